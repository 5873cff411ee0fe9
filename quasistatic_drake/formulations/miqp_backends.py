"""
MIQP solvers for eq. 23 (miqp.py): Gurobi through gurobipy's matrix API, SCIP, and DAQP.

Each takes a :class:`MiqpData` (miqp_data.py) and returns a
:class:`MiqpSolution` whose ``solve_time`` is the solver's own runtime
(Gurobi's ``Runtime`` attribute, as Pang & Tedrake 2018's Table I; SCIP's
solving time; for DAQP the thread CPU time of the whole call, model
building included) and ``nodes`` its branch-and-bound nodes.  Gurobi builds a model per
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

DAQP (``miqp.backend: daqp``, no licence).  DAQP 0.11's branch and bound
(depth first, warm-started dual active-set QPs at the nodes) takes binary
constraints: a row that must sit at its lower or its upper bound (``sense``
16).  Eq. 23 is modelled over u = [y; z] scaled to O(1) (``daqp_problem``):
x by the commanded step L, each impulse and sliding slack by its big-M,
the binaries z as simple bounds 0 <= z <= 1 marked binary, the rows of
``eq23_rows``.  DAQP needs a strictly convex objective, and eq. 23 prices
only x:

* the impulses and slacks get the curvature IMPULSE_CURVATURE (1e-8) on
  their scaled squares (at most 1 each), the objects' x at least that: the
  least-norm impulses among the optimal ones.  Its effect on x is below
  what the replays resolve (docs/formulations.md: the figures);
* the binaries get BINARY_CURVATURE (1e-8) on (z - 1/2)^2, the same for
  every mode; a relaxation with fractional z is lower by up to 1/4 of it
  per binary, so the search's absolute gap includes that sum;
* where DAQP's factors degenerate (cycling, the iteration limit) the step
  is solved again with both at 1e-6 (CURVATURES).

The search (``DaqpBackend._search``): the relaxation (0 <= z <= 1) bounds
every mode from below.  Candidate modes, solved as QPs with z fixed: the
MIP start (the previous step's mode), the relaxation's own (each pair on the
side its scaled w or lambda is nearer to zero), then up to MODE_CANDIDATES
contact modes (miqp_modes.py): each point open, sticking or sliding as the
relaxation's motion moves it, then each body pair's nearest points set
open, sticking or sliding, one pair changed, then two, ...  The first
within the gap of the bound is the answer; otherwise the best feasible one
is (a deterministic list).  At the mode changes in closed loop (the fingers
closing on the object, the set-down) the big-M relaxation says nothing:
every z at 1/2 and the bound at the optimum, so DAQP's depth-first dives
ended in infeasible leaves until the time limit; one of the pair modes
("the fingers stick, the table lets go") is the optimum there.

The local mode search (``_mode_rounds``), where no candidate is feasible: a
box that slides and turns under a finger (the cold push of
test_miqp_gradients) slides table points along a diagonal of the friction
pyramid, friction between two directions, a mode no candidate has, and the
relaxation's motion (the box translated, not turned) gives wrong sliding
directions.  Each round takes the point modes near a motion x (the
relaxation's, then the best solution's) and solves each as a small MIQP:
the contact and stick/slide binaries fixed, the rho binaries of each
sliding point's two directions most opposed to its slip under x left
binary (three if no mode of the round is feasible yet), settled by DAQP's
branch and bound (an infeasible mode in one node, a feasible one in tens to
hundreds).  Each round's best seeds the next; the search stops when a round
improves nothing (two or three rounds on the cold push: Gurobi's optimum,
to 1e-10 m in x).  A pair's mode is taken by its points near contact, then
by all its points (a box tilted 1e-4 rad has its corners 12 um apart, and
levelling closes all four).  Only where no round finds a feasible mode does
DAQP search the whole tree: the modes within the gap of the bound
(DIVE_TIME), then all (SEARCH_TIME), then a mode within INCUMBENT_GAP of the
bound, as the Gurobi backend accepts at its time limit.  That search is cut
by time (DAQP 0.11 has no node limit), so its outcome may depend on the
host; no step of the benchmark's closed loops, paper-2d or the MIQP tests
reaches it (``DaqpBackend.stats["search"]`` counts the steps that do).
The gap is relative (``mip_gap``) to the whole objective, constant
included.  ``DaqpBackend.stats`` counts how solves ended.

Rows near contact (``contact_band``): a manifold's phi of +-1e-7 m
(detection noise) between parallel pads made "all points closed"
infeasible exactly, and DAQP searched 1e5 nodes for a mode that Gurobi's
feasibility tolerance (1e-6, both sides of every row) took at once.  Within
GAP_TOLERANCE of contact a point may keep its penetration and, closed, stay
as far open as it is, tapering to exact rows at 2 GAP_TOLERANCE: one-sided
(never deeper, never farther than it was) and continuous in phi.  The rule
before it took |phi| < GAP_TOLERANCE as 0, a step at the band's edge: at
the rounded box's set-down a pad at -0.99e-6 and -1.02e-6 m became a tilt
that the opposite pad could not follow, every candidate was infeasible, and
DAQP's search ran into the time limit (docs/formulations.md).

The least-force stage keeps the first stage's mode and x (a QP: sum P_n
over P_max plus LEAST_FORCE_CURVATURE on the scaled impulses, small enough
that the least-force vertex does not move), where Gurobi's searches all
modes (a MILP); the closed-form tests (test_miqp_hand_built.py) hold on both.
DAQP's ``time_limit`` is wall time; the search's phases are cut by thread
CPU time.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from itertools import chain
import time
from typing import Callable, Optional

import numpy as np
from scipy import sparse

from quasistatic_drake.errors import SolverLimitExceeded
from quasistatic_drake.formulations.gurobi_licence import optimize_within_licence
from quasistatic_drake.formulations.miqp_data import (MiqpData, MiqpSettings, MiqpSolution,
                                                      tight_rows)
from quasistatic_drake.formulations.miqp_modes import (candidate_modes, free_directions,
                                                       mode_binaries, point_mode_variations,
                                                       slide_directions)

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


def _failure(data: MiqpData, status: str, runtime: float, nodes: int = 0) -> MiqpSolution:
    return MiqpSolution(None, np.zeros(data.n_c), np.zeros(data.n_d), np.zeros(data.n_c),
                        status, runtime, binaries=data.n_binaries, nodes=int(nodes))


def _solution(data: MiqpData, y: np.ndarray, z: np.ndarray, runtime: float,
              nodes: int = 0) -> MiqpSolution:
    n_v, n_c, n_d = data.n_v, data.n_c, data.n_d
    return MiqpSolution(
        x=y[:n_v].copy(), P_n=y[n_v:n_v + n_c].copy(), P_f=y[n_v + n_c:n_v + n_c + n_d].copy(),
        gamma=y[n_v + n_c + n_d:].copy(), status="optimal", solve_time=runtime,
        objective=data.objective(y), tight_big_m=tight_rows(data, y, z),
        binaries=data.n_binaries, z=np.round(z), nodes=int(nodes))


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
        optimize_within_licence(model, lambda: MiqpTooLarge(
            f"this step's MIQP has {model.NumVars} variables and {model.NumConstrs} "
            f"constraints ({data.n_c} contacts, {data.n_binaries} binaries); Gurobi's "
            f"restricted pip licence allows only {GUROBI_QUADRATIC_VARIABLE_LIMIT} variables "
            f"in a model with a quadratic objective (and {GUROBI_CONSTRAINT_LIMIT} "
            "constraints). Fix: fewer points per contact patch (miqp.max_points_per_pair: 3; "
            "at least 4 keeps a face's corners), miqp.backend: scip, formulation: qp, fewer "
            "contacts (a smaller contact_detection_tolerance), or a full Gurobi licence."))
        runtime, nodes = model.Runtime, int(model.NodeCount)
        if model.SolCount == 0 or (model.Status == gp.GRB.TIME_LIMIT
                                   and model.MIPGap > INCUMBENT_GAP):
            return _failure(data, _GUROBI_STATUS.get(model.Status, str(model.Status)), runtime,
                            nodes)
        y_best, z_best = np.asarray(y.X), np.asarray(z.X)
        if settings.least_force and data.n_c:
            self._least_force(model, y, data)
            runtime, nodes = runtime + model.Runtime, nodes + int(model.NodeCount)
            if model.SolCount:
                y_best, z_best = np.asarray(y.X), np.asarray(z.X)
        return _solution(data, y_best, z_best, runtime, nodes)

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
        runtime, nodes = model.getSolvingTime(), model.getNNodes()
        if model.getNSols() == 0 or (model.getStatus() == "timelimit"
                                     and model.getGap() > INCUMBENT_GAP):
            return _failure(data, str(model.getStatus()), runtime, nodes)
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
            runtime, nodes = runtime + model.getSolvingTime(), nodes + model.getNNodes()
            if model.getNSols() == 0:            # keep the first stage's solution
                return _solution(data, np.array(stage1[0]), np.array(stage1[1]), runtime,
                                 nodes)
        best = model.getBestSol()
        y_val = np.array([best[v] for v in y])
        z_val = np.array([best[v] for v in z])
        return _solution(data, y_val, z_val, runtime, nodes)


def _dot(row: np.ndarray, variables: list):
    """Return row . variables as a SCIP expression (an empty one for a zero row)."""
    from pyscipopt import quicksum
    return quicksum(float(c) * variables[j] for j, c in enumerate(row) if c != 0.0)


DAQP_INF = 1e30               # DAQP's infinite bound
# The curvature DAQP needs on every variable that eq. 23's objective leaves flat, in the
# scaled variables of DaqpProblem (each impulse and slack over its big-M, so at most 1).
IMPULSE_CURVATURE = 1e-8
BINARY_CURVATURE = 1e-8       # on (z - 1/2)^2: the same at z = 0 and at z = 1
# Where DAQP cycles or stalls (degenerate factors), the step is solved again with these
# curvatures (impulses, binaries): better conditioned, a larger effect on x.
CURVATURES = ((IMPULSE_CURVATURE, BINARY_CURVATURE), (1e-6, 1e-6))
NUMERICAL_FAILURES = (-2, -4, -6)  # cycling, iteration limit, overdetermined
ABSOLUTE_GAP = 1e-13          # the scaled objective: a tracking error of 3e-7 commanded steps
LEAST_FORCE_CURVATURE = 1e-4  # the least-force stage: sum P_n / P_max + this ||.||^2
# Near contact a point may keep its penetration, and a closed one stay as far open as it
# is, up to this (contact_band), as Gurobi's rows hold to its FeasibilityTol (1e-6,
# absolute).  Exactly, the four ends of two line contacts between parallel pads (a held
# cylinder; detection noise of 1e-7 m in phi) cannot all close at once, and DAQP searched
# 1e5 nodes for it.
GAP_TOLERANCE = 1e-6          # [m]
DIVE_TIME = 0.05              # [s] for the search of the modes within the gap of the bound
SEARCH_TIME = 0.2             # [s] for the whole search to the gap, before INCUMBENT_GAP
MODE_CANDIDATES = 64          # pair modes tried as QPs before the search (miqp_modes.py)
MODE_ROUNDS = 8               # rounds of the local mode search, each from the best x so far
PRIMAL_TOL = 1e-6            # DAQP: a row may be violated by this (scaled rows: entries <= 1)
_DAQP_STATUS = {-1: "infeasible", -2: "cycling", -3: "unbounded", -4: "iteration limit",
                -5: "nonconvex", -6: "overdetermined", -7: "time limit", -8: "unsupported",
                5: "time limit"}


@dataclass(frozen=True)
class DaqpProblem:
    """
    Eq. 23 for DAQP over the scaled u = [y; z] / scale (``daqp_problem``).

    ``lower <= [u; A u] <= upper``: the first n entries are simple bounds;
    ``sense`` marks the force balance equalities (5) and the binaries (16).
    """

    H: np.ndarray
    f: np.ndarray
    A: np.ndarray
    upper: np.ndarray
    lower: np.ndarray
    sense: np.ndarray
    scale: np.ndarray
    n_y: int
    R_w: np.ndarray       # w / M_w = R_w u[:n_y] + b_w (eq. 23b)
    b_w: np.ndarray
    binary: float         # the curvature on (z - 1/2)^2


def daqp_problem(data: MiqpData, impulse: float = IMPULSE_CURVATURE,
                 binary: float = BINARY_CURVATURE) -> DaqpProblem:
    """
    Return eq. 23 as DAQP's mixed-integer QP (module docstring, "DAQP").

    The non-penetration rows near contact are held as ``contact_band`` says
    (within GAP_TOLERANCE, one-sided and continuous in phi).

    Variables are scaled to O(1): x by the commanded step L (objective_scale),
    each impulse and sliding slack by its big-M; rows to unit largest entry.
    """
    n_v, n_c, n_y, N = data.n_v, data.n_c, data.n_y, data.n_binaries
    length = max(float(np.max(np.abs(data.xbar_a), initial=0.0)), MIN_DISPLACEMENT)
    scale = np.concatenate([np.full(n_v, length), np.maximum(data.M_lambda, 1e-12),
                            np.ones(N)])
    n = n_y + N
    linear = data.impulse_weight * scale[n_v:n_v + n_c] / length ** 2
    weight = np.full(n, max(impulse, LEAST_FORCE_CURVATURE * np.max(linear, initial=0)))
    weight[n_y:] = binary
    weight[data.idx_u] = max(data.motion_weight, impulse)
    weight[data.idx_a] = 1.0
    f = np.zeros(n)
    f[data.idx_a] = -2.0 * data.xbar_a / length
    f[n_y:] = -BINARY_CURVATURE
    f[n_v:n_v + n_c] = linear
    A, sense_rows, rhs = eq23_rows(data)
    n_eq, n_d = len(data.b_eq), data.n_d
    kept, reached = contact_band(data.b[:n_c], GAP_TOLERANCE)
    opened = np.concatenate([reached, np.zeros(n_d + n_c)])
    rhs = rhs + np.concatenate([np.zeros(n_eq), -kept, np.zeros(n_d + n_c), opened,
                                np.zeros(N + len(data.b_lb))])
    A = A.toarray() * scale
    norm = np.max(np.abs(A), axis=1, initial=0.0)
    norm[norm == 0.0] = 1.0
    A /= norm[:, None]
    rhs = rhs / norm
    upper = np.where(sense_rows == ">", DAQP_INF, rhs)
    lower = np.where(sense_rows == "<", -DAQP_INF, rhs)
    y_lower = np.concatenate([data.x_lower / length, np.zeros(n - n_v)])
    y_upper = np.concatenate([data.x_upper / length, np.ones(n - n_v)])
    sense = np.zeros(n + len(rhs), dtype=np.intc)
    sense[n_y:n] = 16
    sense[n:][sense_rows == "="] = 5
    return DaqpProblem(H=np.diag(2.0 * weight), f=f, A=A,
                       upper=np.clip(np.concatenate([y_upper, upper]), -DAQP_INF, DAQP_INF),
                       lower=np.clip(np.concatenate([y_lower, lower]), -DAQP_INF, DAQP_INF),
                       sense=sense, scale=scale, n_y=n_y,
                       R_w=data.R * scale[:n_y] / data.M_w[:, None], b_w=data.b / data.M_w,
                       binary=binary)


def contact_band(phi: np.ndarray, tolerance: float) -> tuple[np.ndarray, np.ndarray]:
    """
    Return (kept, reached) per point: phi_next >= -kept, and a closed row phi_next <= reached.

    Pang & Tedrake 2018, eq. 23b-d, held near contact as Gurobi holds its
    rows (FeasibilityTol), but one-sided: a point within ``tolerance`` of
    contact may keep the penetration it has (kept = -phi) and, closed, stay
    as far open as it is (reached = phi); no row is loosened beyond where the
    point already is.  Both taper back to 0 (exact rows) at 2 ``tolerance``,
    so they are continuous in phi: a point's allowance never jumps.  The
    earlier rule, phi taken as 0 where |phi| < tolerance, jumped: a pad at
    phi -0.99e-6 m on two points and -1.02e-6 m on the other two (the rounded
    box's set-down) was made a tilt of 1e-6 m that the parallel pad opposite
    could not follow, and every closed mode was infeasible
    (docs/formulations.md).  Exact beyond the band: a far point closes to
    phi_next = 0 (an open allowance there let paper-2d's falling cylinder
    stop 1e-6 m above the table, at less motion).
    """
    kept = np.clip(np.minimum(-phi, 2.0 * tolerance + phi), 0.0, tolerance)
    reached = np.clip(np.minimum(phi, 2.0 * tolerance - phi), 0.0, tolerance)
    return kept, reached


class DaqpBackend:
    """DAQP's branch and bound on eq. 23, searched from its relaxation's bound (docstring)."""

    def __init__(self):
        """Import daqp (raises MiqpSolverMissing without it)."""
        try:
            import daqp
        except ImportError as err:
            raise MiqpSolverMissing("miqp.backend 'daqp' needs daqp (pip install daqp), or "
                                    "choose backend: gurobi or scip.") from err
        self.daqp = daqp
        self.stats: Counter = Counter()     # how each solve ended (_search)

    def solve(self, data: MiqpData, settings: MiqpSettings,
              start: Optional[np.ndarray] = None) -> MiqpSolution:
        """Solve eq. 23; ``start`` (binaries of an earlier step) is tried first as incumbent."""
        cpu = time.thread_time()
        nodes = 0
        for impulse, binary in CURVATURES:      # stiffer where DAQP's factors degenerate
            p = daqp_problem(data, impulse, binary)
            incumbent = None
            usable = start if start is not None and len(start) == data.n_binaries else None
            if usable is not None:
                incumbent = self._fixed_binaries(p, p.H, p.f, p.lower, p.upper, p.sense, start)
            u, flag, more = self._search(p, settings, incumbent, p.H, p.f, p.lower, p.upper,
                                         p.sense, settings.mip_gap, cpu, data)
            nodes += more
            if u is not None or flag not in NUMERICAL_FAILURES:
                break
        if u is None:
            return _failure(data, _DAQP_STATUS.get(flag, f"daqp exit flag {flag}"),
                            time.thread_time() - cpu, nodes)
        if settings.least_force and data.n_c:
            found, _, more = self._least_force(p, data, u, settings, cpu)
            nodes += more
            if found is not None:
                u = found
        y, z = u[:p.n_y] * p.scale[:p.n_y], u[p.n_y:]
        return _solution(data, y, z, time.thread_time() - cpu, nodes)

    def _search(self, p: DaqpProblem, settings: MiqpSettings, incumbent, H, f, lower, upper,
                sense, rel_gap: float, cpu: float, data: Optional[MiqpData] = None):
        """
        Return (u, exit flag, nodes): DAQP's branch and bound from the relaxation's bound.

        The relaxation (binaries between 0 and 1) bounds every mode from below.
        An incumbent within the tolerance of that bound is optimal; otherwise
        the candidate modes (``candidate_modes``) are solved as QPs, the first
        within the tolerance or else the best being the answer.  Only where
        none is feasible does DAQP search: first the modes within the
        tolerance of the bound, then all.  ``u`` is None when no mode was found.
        """
        relaxed, flag = self._qp(H, f, p.A, lower, upper, _without_binaries(p, sense))
        if relaxed is None:                      # the relaxation is infeasible: so is eq. 23
            return None, flag, 0
        bound = _objective(H, f, relaxed)
        # The gap is relative to the whole objective, the tracking error's square included
        # (1/2 u'Hu + f'u leaves out its constant, 1/2 f'H^-1 f; H is diagonal), and
        # absolute for the curvature of the binaries: every mode pays the same.
        whole = bound + 0.5 * float(f @ (f / np.diag(H)))
        gap = (ABSOLUTE_GAP + 0.25 * p.binary * len(f[p.n_y:])
               + rel_gap * abs(whole))
        modes = [_rounded_mode(p, relaxed)]
        if data is not None:
            modes += list(candidate_modes(
                data, relaxed[:data.n_v] * p.scale[:data.n_v], _commanded_motion(data),
                GAP_TOLERANCE, GAP_TOLERANCE, MODE_CANDIDATES))
        incumbent = self._best_mode(p, H, f, lower, upper, sense, incumbent, modes, bound + gap)
        if incumbent is not None:
            self.stats["within gap" if _objective(H, f, incumbent) <= bound + gap
                       else "best candidate"] += 1
            return incumbent, 1, 0
        nodes = 0
        if data is not None:
            incumbent, nodes = self._mode_rounds(p, data, relaxed, cpu, settings)
            if incumbent is not None:
                self.stats["mode rounds"] += 1
                return incumbent, 1, nodes
        self.stats["search"] += 1
        flag = -7
        loose = gap + INCUMBENT_GAP * abs(whole)
        phases = ((bound + gap, gap, DIVE_TIME), (DAQP_INF, gap, SEARCH_TIME),
                  (DAQP_INF, loose, settings.time_limit))
        for limit, tolerance, budget in phases:
            budget = min(budget, settings.time_limit - (time.thread_time() - cpu))
            if budget <= 0.0:
                break
            u, _, flag, info = self.daqp.solve(
                H, f, p.A, upper, lower, sense, primal_start=incumbent, rel_subopt=0.0,
                abs_subopt=tolerance, fval_bound=limit, time_limit=budget,
                primal_tol=PRIMAL_TOL)
            nodes += info["nodes"]
            if flag in (1, 4) or (flag == 5 and _objective(H, f, np.asarray(u)) - bound
                                  <= loose):
                return np.asarray(u), flag, nodes
            if flag == 5:
                incumbent = np.asarray(u)
        if flag == -1 and incumbent is not None:
            return incumbent, 1, nodes
        return None, flag, nodes

    def _mode_rounds(self, p: DaqpProblem, data: MiqpData, start: np.ndarray, cpu: float,
                     settings: MiqpSettings):
        """
        Return (u, nodes): the local mode search from ``start``'s motion (module docstring).

        Each round (``_mode_round``) starts from the motion x of the best
        solution so far, the first from ``start``'s; it stops when a round
        finds nothing better, after MODE_ROUNDS, or at the time limit.
        While no mode is feasible, a round that finds none is tried again
        with three friction directions left binary.  ``u`` is None if no
        mode was feasible.
        """
        incumbent, nodes, x = None, 0, start[:data.n_v] * p.scale[:data.n_v]
        for _ in range(MODE_ROUNDS):
            found, more = self._mode_round(p, data, x, incumbent, 2, cpu, settings)
            nodes += more
            if found is None and incumbent is None:
                found, more = self._mode_round(p, data, x, incumbent, 3, cpu, settings)
                nodes += more
            if found is None:
                break
            incumbent, x = found, found[:data.n_v] * p.scale[:data.n_v]
        return incumbent, nodes

    def _mode_round(self, p: DaqpProblem, data: MiqpData, x: np.ndarray, incumbent,
                    directions: int, cpu: float, settings: MiqpSettings):
        """
        Return (u, nodes): the best mode near the motion x, None unless better than incumbent.

        The point modes near x (``point_mode_variations``: a pair's mode
        taken by its points near contact, then by all its points, as a
        slightly tilted box's four corners), each solved with its sliding
        points' ``directions`` friction directions most opposed to their
        slip under x left binary (``free_directions``): a small branch and
        bound, where the pyramid's sector is not known.
        """
        best = np.inf if incumbent is None else _objective(p.H, p.f, incumbent) - ABSOLUTE_GAP
        found, nodes, seen = None, 0, set()
        opposed = slide_directions(data, x, _commanded_motion(data), GAP_TOLERANCE, directions)
        for modes in chain(*(point_mode_variations(data, x, GAP_TOLERANCE, touch, MODE_CANDIDATES)
                             for touch in (2.0 * GAP_TOLERANCE, np.inf))):
            budget = settings.time_limit - (time.thread_time() - cpu)
            if budget <= 0.0:
                break
            if modes.tobytes() in seen:
                continue
            seen.add(modes.tobytes())
            u, more = self._free_directions(p, mode_binaries(data, modes, opposed[:, 0]),
                                            free_directions(data, modes, opposed), budget,
                                            best)
            nodes += more
            if u is not None and _objective(p.H, p.f, u) < best:
                found, best = u, _objective(p.H, p.f, u)
        return found, nodes

    def _free_directions(self, p: DaqpProblem, z: np.ndarray, free: np.ndarray,
                         budget: float, bound: float):
        """
        Return (u, nodes): DAQP's branch and bound with z fixed except where ``free``.

        Complete within ``budget`` (the step's time left); a mode whose
        directions it cannot settle in that time counts as infeasible, and
        so does one that cannot beat ``bound`` (pruned by DAQP).
        """
        lower, upper, sense = p.lower.copy(), p.upper.copy(), p.sense.copy()
        fixed = p.n_y + np.flatnonzero(~free)
        lower[fixed] = upper[fixed] = np.round(z[~free])
        sense[fixed] = 5
        u, _, flag, info = self.daqp.solve(p.H, p.f, p.A, upper, lower, sense,
                                           primal_tol=PRIMAL_TOL, rel_subopt=0.0,
                                           abs_subopt=ABSOLUTE_GAP, time_limit=budget,
                                           fval_bound=_daqp_bound(p.H, p.f, bound))
        if flag == 5:
            self.stats["direction time limit"] += 1
        return (np.asarray(u) if flag in (1, 4) else None), info["nodes"]

    def _best_mode(self, p: DaqpProblem, H, f, lower, upper, sense, incumbent, modes,
                   enough: float):
        """
        Return the best of ``incumbent`` and the QPs of ``modes`` (z of eq. 23d, in order).

        Stops at the first whose objective is at most ``enough`` (the bound
        plus the gap: optimal).  None if every one is infeasible.
        """
        best = None if incumbent is None else _objective(H, f, incumbent)
        for z in modes:
            if best is not None and best <= enough:
                break
            u = self._fixed_binaries(p, H, f, lower, upper, sense, z,
                                     DAQP_INF if best is None else best)
            if u is not None and (best is None or _objective(H, f, u) < best):
                incumbent, best = u, _objective(H, f, u)
        return incumbent

    def _qp(self, H, f, A, lower, upper, sense, bound: float = DAQP_INF):
        """
        Return (u, exit flag) of one QP (no binaries in ``sense``); u None on failure.

        DAQP's dual objective only grows, so it stops (as infeasible) once it
        passes ``bound``: a QP that cannot beat an incumbent ends early.
        """
        u, _, flag, _ = self.daqp.solve(H, f, A, upper, lower, sense, primal_tol=PRIMAL_TOL,
                                        fval_bound=_daqp_bound(H, f, bound))
        return (np.asarray(u) if flag in (1, 4) else None), flag

    def _fixed_binaries(self, p: DaqpProblem, H, f, lower, upper, sense, z: np.ndarray,
                        bound: float = DAQP_INF):
        """Return the QP's solution with the binaries fixed at z (None: infeasible or worse)."""
        lower, upper, sense = lower.copy(), upper.copy(), sense.copy()
        binaries = slice(p.n_y, len(p.f))
        lower[binaries] = upper[binaries] = np.round(np.asarray(z, dtype=float))
        sense[binaries] = 5
        return self._qp(H, f, p.A, lower, upper, sense, bound)[0]

    def _least_force(self, p: DaqpProblem, data: MiqpData, u: np.ndarray,
                     settings: MiqpSettings, cpu: float):
        """Second stage: x fixed at u's, least total normal impulse (module docstring)."""
        n_v, n = data.n_v, len(p.f)
        lower, upper, sense = p.lower.copy(), p.upper.copy(), p.sense.copy()
        lower[:n_v] = upper[:n_v] = u[:n_v]
        sense[:n_v] = 5
        weight = np.full(n, LEAST_FORCE_CURVATURE)
        weight[:n_v] = 1.0
        weight[p.n_y:] = p.binary
        f = np.zeros(n)
        f[n_v:n_v + data.n_c] = 1.0
        f[p.n_y:] = -p.binary
        return self._fixed_binaries(p, np.diag(2.0 * weight), f, lower, upper, sense,
                                    np.round(u[p.n_y:])), 1, 0


def _rounded_mode(p: DaqpProblem, relaxed: np.ndarray) -> np.ndarray:
    """
    Return the relaxation's mode: each pair on the side its solution is nearer to.

    z_k = 1 (w_k free, lambda_k = 0) where w_k / M_w,k exceeds lambda_k / M_lambda,k.
    """
    u = relaxed[:p.n_y]
    w = p.R_w @ u + p.b_w
    return (w > u[p.n_y - len(w):]).astype(float)


def _commanded_motion(data: MiqpData) -> np.ndarray:
    """Return x with the robots at their command (xbar_a of eq. 23) and the objects still."""
    x = np.zeros(data.n_v)
    x[data.idx_a] = data.xbar_a
    return x


def _daqp_bound(H: np.ndarray, f: np.ndarray, bound: float) -> float:
    """
    Return ``bound`` on 1/2 u'Hu + f'u as DAQP's ``fval_bound`` (H diagonal).

    DAQP prunes on its own objective, shifted to 0 at the unconstrained
    optimum: 1/2 u'Hu + f'u + 1/2 f'H^-1 f (measured: a QP of optimum -1.5
    and shift 2 is pruned at a bound of 0.4 and solved at 0.6).
    """
    if bound >= DAQP_INF:
        return DAQP_INF
    return bound + 0.5 * float(f @ (f / np.diag(H)))


def _objective(H: np.ndarray, f: np.ndarray, u: np.ndarray) -> float:
    """Return 1/2 u'Hu + f'u."""
    return float(0.5 * u @ H @ u + f @ u)


def _without_binaries(p: DaqpProblem, sense: np.ndarray) -> np.ndarray:
    """Return the sense of the relaxation: the binaries as plain bounds 0 <= z <= 1."""
    sense = sense.copy()
    sense[p.n_y:len(p.f)] = 0
    return sense


BACKENDS: dict[str, Callable[[], object]] = {"gurobi": GurobiBackend, "scip": ScipBackend,
                                             "daqp": DaqpBackend}
