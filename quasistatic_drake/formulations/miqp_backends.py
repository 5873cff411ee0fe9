"""
MIQP solvers for eq. 23 (miqp.py): Gurobi through gurobipy's matrix API, and SCIP.

Both take a :class:`MiqpData` and return a :class:`MiqpSolution` whose
``solve_time`` is the solver's own runtime (Gurobi's ``Runtime`` attribute,
as Pang & Tedrake 2018's Table I; SCIP's solving time).  Gurobi builds a model per
step with the matrix API (one sparse constraint matrix, 1-4 ms).  A caller
may pass a MIP start (``start``, the binaries z of an earlier solution, such
as the previous step's ``MiqpSolution.z``); it is used when the number of
binaries matches.  The backend keeps nothing between solves.  SCIP takes
no start here.  Reusing the model between steps would save little: every
coefficient of eq. 23 changes with q (the Jacobians, phi, the bounds), so a
reused model would have all its constraints replaced, which costs what a
new one does.

Least force (``MiqpSettings.least_force``, on by default).  The normal
impulses of eq. 23 are not unique: two fingers squeezing an object may press
with any force above the lower bound of eq. 23f, and a solver returns
whichever vertex it finds, often at the big-M bound.  A second solve fixes
the optimal motion x and minimises the total normal impulse (a MILP): the
least-force solution, which is what Pang & Tedrake 2018's Fig. 5e shows.  The reported
runtime is the sum of both solves.

Scaling.  Displacements per step are ~1e-3 m, so eq. 23's objective is
~1e-6, and Gurobi's absolute tolerances hid the tie-break of miqp.py: a box
pushed through its centre drifted 1 cm sideways in six steps, at an
objective 45 times the straight push's.  The objective is scaled so that the
commanded displacement's square is 1 (``objective_scale``), the absolute gap
is 0 and the optimality tolerance 1e-9; continuous solutions are then exact
to about 1e-8 m.

Time limit.  A solve that reaches ``miqp.time_limit`` keeps its best
solution when Gurobi (or SCIP) proved it within INCUMBENT_GAP (1 %) of the
optimum; otherwise the step reports "time limit" and the state is kept.
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np
from scipy import sparse

from quasistatic_drake.errors import SolverLimitExceeded
from quasistatic_drake.formulations.miqp import MiqpData, MiqpSettings, MiqpSolution, tight_rows

# The restricted pip licence, measured with gurobipy 13.0.3: at most 2000 linear
# constraints and 2000 variables, but only 200 variables in a model with a
# quadratic objective (eq. 23 has one).
GUROBI_QUADRATIC_VARIABLE_LIMIT = 200
GUROBI_CONSTRAINT_LIMIT = 2000
LEAST_FORCE_X_SLACK = 1e-12    # the least-force stage holds x within this (relative) of stage 1
# A solve stopped by miqp.time_limit keeps its best solution only if that is
# proven within this relative gap of the optimum; otherwise the step fails
# ("time limit") and the state is kept.  A far-from-optimal incumbent can
# swing the arm about (measured: a step whose incumbent moved the arm enough
# to widen the contact search to 88 contacts).
INCUMBENT_GAP = 1e-2
MIN_DISPLACEMENT = 1e-4        # [m] the objective scale's floor (objective_scale)


class MiqpTooLarge(SolverLimitExceeded):
    """The MIQP exceeds what the installed Gurobi licence allows."""


class MiqpSolverMissing(RuntimeError):
    """The chosen MIQP backend is not installed."""


def _failure(data: MiqpData, status: str, runtime: float) -> MiqpSolution:
    return MiqpSolution(None, np.zeros(data.n_c), np.zeros(data.n_d), np.zeros(data.n_c),
                        status, runtime, binaries=data.n_binaries)


def _solution(data: MiqpData, y: np.ndarray, z: np.ndarray, runtime: float) -> MiqpSolution:
    n_v, n_c, n_d = data.n_v, data.n_c, data.n_d
    return MiqpSolution(
        x=y[:n_v].copy(), P_n=y[n_v:n_v + n_c].copy(), P_f=y[n_v + n_c:n_v + n_c + n_d].copy(),
        gamma=y[n_v + n_c + n_d:].copy(), status="optimal", solve_time=runtime,
        objective=data.objective(y), tight_big_m=tight_rows(data, y, z),
        binaries=data.n_binaries, z=np.round(z))


class GurobiBackend:
    """Gurobi through the matrix API, with an optional MIP start (module docstring)."""

    def __init__(self):
        """Open a quiet Gurobi environment (raises MiqpSolverMissing without gurobipy)."""
        try:
            import gurobipy
        except ImportError as err:
            raise MiqpSolverMissing("miqp.backend 'gurobi' needs gurobipy (pip install "
                                    "gurobipy), or choose backend: scip.") from err
        self.gp = gurobipy
        self.env = gurobipy.Env(empty=True)
        self.env.setParam("OutputFlag", 0)
        # One thread: eq. 23 is small, and on a loaded 2-core machine the
        # default (all cores) was slower (measured on saved slow steps: 0.9 s
        # against 1.3 s, 4.0 s against 4.8 s).
        self.env.setParam("Threads", 1)
        self.env.start()

    def solve(self, data: MiqpData, settings: MiqpSettings,
              start: Optional[np.ndarray] = None) -> MiqpSolution:
        """Solve eq. 23 (objective ||x_a - xbar_a||^2 + eps ||x_u||^2); ``start``: a MIP start."""
        gp = self.gp
        model, y, z = self._model(data)
        model.Params.TimeLimit = settings.time_limit
        model.Params.MIPGap = settings.mip_gap
        model.Params.MIPGapAbs = 0.0     # objectives are ~1e-6 (m^2): the default 1e-10 is coarse
        model.Params.OptimalityTol = 1e-9
        if start is not None and len(start) == data.n_binaries:
            z.Start = start
        try:
            model.optimize()
        except gp.GurobiError as err:
            if err.errno == gp.GRB.Error.SIZE_LIMIT_EXCEEDED:
                raise MiqpTooLarge(
                    f"this step's MIQP has {model.NumVars} variables and {model.NumConstrs} "
                    f"constraints ({data.n_c} contacts, {data.n_binaries} binaries); Gurobi's "
                    "restricted pip licence allows only "
                    f"{GUROBI_QUADRATIC_VARIABLE_LIMIT} variables in a model with a "
                    f"quadratic objective (and {GUROBI_CONSTRAINT_LIMIT} constraints). Fix: "
                    "fewer points per contact patch (miqp.max_points_per_pair: 3; at least 4 "
                    "keeps a face's corners), miqp.backend: scip, formulation: qp, fewer "
                    "contacts (a smaller contact_detection_tolerance), or a full Gurobi "
                    "licence.") from err
            raise
        runtime = model.Runtime
        if model.SolCount == 0 or (model.Status == gp.GRB.TIME_LIMIT
                                   and model.MIPGap > INCUMBENT_GAP):
            return _failure(data, _GUROBI_STATUS.get(model.Status, str(model.Status)), runtime)
        y_best, z_best = np.asarray(y.X), np.asarray(z.X)
        if settings.least_force and data.n_c:
            self._least_force(model, y, data)
            runtime += model.Runtime
            if model.SolCount:
                y_best, z_best = np.asarray(y.X), np.asarray(z.X)
        return _solution(data, y_best, z_best, runtime)

    def _least_force(self, model, y, data: MiqpData) -> None:
        """
        Second stage: fix the optimal motion x, minimise the total normal impulse (a MILP).

        If it finds nothing (x held at round-off from a feasible point), the
        caller keeps the first stage's solution.
        """
        gp = self.gp
        x = np.asarray(y.X)[:data.n_v]
        slack = LEAST_FORCE_X_SLACK * np.maximum(1.0, np.abs(x))
        y[:data.n_v].LB = np.maximum(x - slack, data.x_lower)
        y[:data.n_v].UB = np.minimum(x + slack, data.x_upper)
        c = np.zeros(data.n_y + data.n_binaries)
        c[data.n_v:data.n_v + data.n_c] = 1.0
        model.setMObjective(None, c, 0.0, sense=gp.GRB.MINIMIZE)
        model.optimize()

    def _model(self, data: MiqpData):
        """
        Build eq. 23 over v = [y; z] with one sparse constraint matrix and one objective.

        Sparse blocks through ``addMConstr``: building the same model from
        dense numpy expressions took about 10 ms per step, as long as a solve.
        """
        gp = self.gp
        n_y, N = data.n_y, data.n_binaries
        model = gp.Model(env=self.env)
        lower = np.concatenate([data.x_lower, np.zeros(n_y - data.n_v), np.zeros(N)])
        upper = np.concatenate([data.x_upper, data.M_lambda, np.ones(N)])
        lower[~np.isfinite(lower)] = -gp.GRB.INFINITY
        upper[~np.isfinite(upper)] = gp.GRB.INFINITY
        vtype = np.array([gp.GRB.CONTINUOUS] * n_y + [gp.GRB.BINARY] * N)
        v = model.addMVar(n_y + N, lb=lower, ub=upper, vtype=vtype, name="v")
        A, sense, rhs = eq23_rows(data)
        model.addMConstr(A, v, sense, rhs)
        Q, c, constant = eq23_objective(data)
        model.setMObjective(Q, c, constant, sense=gp.GRB.MINIMIZE)
        return model, v[:n_y], v[n_y:]


def eq23_rows(data: MiqpData) -> tuple:
    """Return (A, sense, rhs), eq. 23a-d and 23f as sparse rows over v = [y; z]."""
    n_v, n_y, N = data.n_v, data.n_y, data.n_binaries
    n_eq, n_lb = len(data.b_eq), len(data.b_lb)
    A = np.zeros((n_eq + 3 * N + n_lb, n_y + N))
    A[:n_eq, :n_y] = data.A_eq                                   # 23a: force balance
    rows = slice(n_eq, n_eq + N)
    A[rows, :n_y] = data.R                                       # 23b, c: w >= 0
    rows = slice(n_eq + N, n_eq + 2 * N)
    A[rows, :n_y] = data.R                                       # 23d: w <= M_w z
    A[rows, n_y:] = -np.diag(data.M_w)
    rows = slice(n_eq + 2 * N, n_eq + 3 * N)
    A[rows, n_v:n_y] = np.eye(N)                                 # 23d: lambda <= M (1 - z)
    A[rows, n_y:] = np.diag(data.M_lambda)
    A[n_eq + 3 * N:, :n_y] = data.A_lb                           # 23f
    sense = np.array(["="] * n_eq + [">"] * N + ["<"] * (2 * N) + [">"] * n_lb)
    rhs = np.concatenate([data.b_eq, -data.b, -data.b, data.M_lambda, data.b_lb])
    return sparse.csr_matrix(A), sense, rhs


def eq23_objective(data: MiqpData) -> tuple:
    """
    Return (Q, c, constant) with v'Qv + c'v + constant the objective over v = [y; z].

    ||x_a - xbar_a||^2 + motion_weight ||x_u||^2 + impulse_weight sum(P_n).
    """
    n = data.n_y + data.n_binaries
    q = np.zeros(n)
    c = np.zeros(n)
    q[data.idx_u] = data.motion_weight
    q[data.idx_a] = 1.0
    c[data.idx_a] = -2.0 * data.xbar_a
    c[data.n_v:data.n_v + data.n_c] = data.impulse_weight
    s = objective_scale(data)
    return sparse.diags(s * q), s * c, s * float(data.xbar_a @ data.xbar_a)


def objective_scale(data: MiqpData) -> float:
    """
    Return the factor that makes the commanded displacement's square O(1) for Gurobi.

    Displacements per step are ~1e-3 m, so the objective is ~1e-6 and
    Gurobi's absolute tolerances (1e-6 for optimality, 1e-10 for the gap)
    could not tell a held object at rest from one drifting by millimetres.
    """
    return 1.0 / max(float(np.max(np.abs(data.xbar_a), initial=0.0)), MIN_DISPLACEMENT) ** 2


_GUROBI_STATUS = {3: "infeasible", 4: "infeasible or unbounded", 5: "unbounded",
                  9: "time limit", 11: "interrupted", 12: "numeric"}


class ScipBackend:
    """SCIP through PySCIPOpt, for users without Gurobi (epigraph of the quadratic objective)."""

    def __init__(self):
        """Import PySCIPOpt (raises MiqpSolverMissing without it)."""
        try:
            import pyscipopt
        except ImportError as err:
            raise MiqpSolverMissing("miqp.backend 'scip' needs pyscipopt (pip install "
                                    "pyscipopt), or choose backend: gurobi.") from err
        self.scip = pyscipopt

    def solve(self, data: MiqpData, settings: MiqpSettings,
              start: Optional[np.ndarray] = None) -> MiqpSolution:
        """Solve eq. 23 with SCIP (``start`` is accepted for the common signature, not used)."""
        scip = self.scip
        model = scip.Model()
        model.hideOutput()
        model.setParam("limits/time", settings.time_limit)
        model.setParam("limits/gap", settings.mip_gap)
        n_y, N = data.n_y, data.n_binaries
        y = []
        for k in range(n_y):
            if k < data.n_v:
                lo, hi = data.x_lower[k], data.x_upper[k]
            else:
                lo, hi = 0.0, data.M_lambda[k - data.n_v]
            y.append(model.addVar(lb=lo if np.isfinite(lo) else None,
                                  ub=hi if np.isfinite(hi) else None))
        z = [model.addVar(vtype="B") for _ in range(N)]
        for row, rhs in zip(data.A_eq, data.b_eq):
            model.addCons(_dot(row, y) == rhs)
        for k in range(N):
            w = _dot(data.R[k], y) + data.b[k]
            model.addCons(w >= 0.0)
            model.addCons(w <= data.M_w[k] * z[k])
            model.addCons(y[data.n_v + k] <= data.M_lambda[k] * (1 - z[k]))
        for row, rhs in zip(data.A_lb, data.b_lb):
            model.addCons(_dot(row, y) >= rhs)
        # The epigraph row t >= ||x_a - xbar_a||^2 is checked with SCIP's absolute
        # feasibility tolerance (1e-6); displacements are ~1e-3 m, so the row is
        # scaled to make its terms O(1), else a 1e-3 tracking error would pass as 0.
        c = 1.0 / max(float(np.max(np.abs(data.xbar_a), initial=0.0)), 1e-6)
        t = model.addVar(lb=0.0)
        tracking = scip.quicksum((c * (y[j] - xb)) * (c * (y[j] - xb))
                                 for j, xb in zip(data.idx_a, data.xbar_a))
        motion = scip.quicksum((c * y[j]) * (c * y[j]) for j in data.idx_u)
        model.addCons(tracking + data.motion_weight * motion <= t)
        impulses = scip.quicksum(y[data.n_v + i] for i in range(data.n_c))
        model.setObjective(t + data.impulse_weight * impulses, "minimize")
        model.optimize()
        runtime = model.getSolvingTime()
        if model.getNSols() == 0 or (model.getStatus() == "timelimit"
                                     and model.getGap() > INCUMBENT_GAP):
            return _failure(data, str(model.getStatus()), runtime)
        if settings.least_force and data.n_c:
            x = [model.getVal(v) for v in y[:data.n_v]]
            model.freeTransform()
            for v, value in zip(y[:data.n_v], x):
                model.chgVarLb(v, value)
                model.chgVarUb(v, value)
            first = model.getBestSol()
            stage1 = ([first[v] for v in y], [first[v] for v in z])
            model.setObjective(impulses, "minimize")
            model.optimize()
            runtime += model.getSolvingTime()
            if model.getNSols() == 0:            # keep the first stage's solution
                return _solution(data, np.array(stage1[0]), np.array(stage1[1]), runtime)
        best = model.getBestSol()
        y_val = np.array([best[v] for v in y])
        z_val = np.array([best[v] for v in z])
        return _solution(data, y_val, z_val, runtime)


def _dot(row: np.ndarray, variables: list):
    """Return row . variables as a SCIP expression (an empty one for a zero row)."""
    from pyscipopt import quicksum
    return quicksum(float(c) * variables[j] for j, c in enumerate(row) if c != 0.0)


BACKENDS: dict[str, Callable[[], object]] = {"gurobi": GurobiBackend, "scip": ScipBackend}
