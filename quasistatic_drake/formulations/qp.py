r"""
The convex QP time step of Pang & Tedrake 2021.

Pang & Tedrake, "Fast simulation of rigid multibody quasistatic systems with
convex optimization" (ICRA 2021 talk).

Decision variable: the next velocity v' = [v_u'; v_a'] (objects; robots).

    minimise_v'   1/2 v'^T Q v' + b^T v'
    subject to    phi_i / h + (J_n,i + mu_i J_f,ij) v' >= 0    for all i, j    (Anitescu)

Signs of b, derived from the KKT conditions (Pang & Tedrake 2021, "Specializing to robotic
manipulation" and "take 2").  With multipliers beta >= 0 on the constraints,
stationarity reads

    Q v' + b = J^T beta,       0 <= beta  _|_  phi / h + J v' >= 0,

where beta are contact *impulses* [N s] along the friction-cone extreme rays.

* Robots are impedances that become springs (gravity compensated):
  0 = h K (qbar_a' - (q_a + h v_a')) + J_a^T beta, i.e.
  h^2 K v_a' - h K (qbar_a' - q_a) = J_a^T beta, so
  Q_aa = h^2 K  and  b_a = -h K (qbar_a' - q_a).
* Robots with inertia (the scenario's ``robot_inertia``; our extension, not
  in the talk): an impedance-controlled arm tau = K (qbar - q) + D (v_ref - v)
  (gravity compensated) trails its reference where it accelerates, through
  its mass matrix M_a.  The implicit Euler step of
  M_a (v_a' - v_a) / h = K (qbar_a' - q_a - h v_a') + D (v_cmd - v_a') + J_a^T lambda
  adds Q_aa += M_a + h D and b_a -= M_a v_a + h D v_cmd, with v_a the robots'
  velocity at the step's start (state the step takes and returns).  At a
  constant command the robot moves with it and q_a' = qbar_a': no lag.
* Objects in quasi-dynamic mode ("take 2"): momentum is discarded every step
  (v_u = 0), M_u (v_u' - 0) = h tau_g,u + J_u^T beta, so
  Q_uu = M_u  and  b_u = -h tau_g,u.
* Objects in quasi-static mode have no inertia (Q_uu = 0, Pang & Tedrake 2021, "Drawbacks":
  the Hessian is only PSD and solutions may not be unique).  We use
  Q_uu = eps M_u with eps = r h^2 min(K) / lambda_max(M_u), r =
  ``quasi_static_inertia_ratio`` (default 0.1, the scale the reference
  simulator qsim uses): the objects' largest inertia is a fraction r of the
  softest robot spring term, so the Hessian is positive definite and the
  solution unique.  The price is a resistance eps M_u v_u' / h, at most
  r h min(K) |v_u'|, while an object moves; at rest the balance is exact.
  Why not smaller: with the polyhedral friction cone, sideways slip within
  the pyramid costs nothing to first order, so an object with almost no
  inertia has nearly flat directions.  Measured on the finger-pushes-box
  scene (h = 0.1 s): r = 1e-3 and 1e-2 grow a spurious yaw by about 30x per
  step from round-off; r = 0.1 keeps it near 1e-7 degrees over 3 s of pushing
  at h = 0.1 s, but a push through the centre at h <= 0.02 s still turns the
  box in quasi-static mode (docs/robustness.md: about 1.36x per step, 35 to
  68 degrees after 3 s), where quasi-dynamic mode holds it.

Two settings change the rows (the ``qp:`` block): by default each contact's
rows are shifted by the speed it slides at, found by a fixed point, which
removes the relaxation's lift of sliding contacts (``sliding_lift.py``;
``anitescu_lift: true`` keeps the rows above); ``friction_cone: exact``
replaces the pyramid by the round cone, one SOCP per step (``exact_cone.py``).

The slides print b with a plus sign; the KKT derivation above gives the minus.
Contact impulses come from the duals: on B by A, sum_j beta_ij (n_i + mu_i d_ij),
and the force is that impulse divided by h.  This module imports neither Drake
nor ROS.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable, Optional

import numba
import numpy as np

from quasistatic_drake.contact import ContactSet
from quasistatic_drake.formulations.active_set_step import predicted, response
from quasistatic_drake.formulations.base import (Formulation, lead_bounded, ModelFacts,
                                                 spring_reference, StepProblem, StepSolution)
from quasistatic_drake.formulations.exact_cone import cone_impulses, solve_cones
from quasistatic_drake.formulations.log_barrier import (barrier_derivative, solve_log_barrier,
                                                        stacked_rows)
from quasistatic_drake.formulations.proximal_drag import (drag_fractions, object_runs,
                                                          proximal_solve, rotation_rows,
                                                          SETTLED, translation_projection)
from quasistatic_drake.formulations.qp_backends import QpSolverResult, solve_daqp
from quasistatic_drake.formulations.qp_sensitivity import (active_set, central_difference,
                                                           solution_derivative)
from quasistatic_drake.formulations.sliding_lift import (constraint_rows, fixed_point,
                                                         newton_velocity, row_bounds,
                                                         sliding_speeds)
from quasistatic_drake.schema import count, flag, number, one_of, SchemaError, setting


@dataclass(frozen=True)
class QpCost:
    """The Hessian Q and linear term b of the step QP."""

    Q: np.ndarray
    b: np.ndarray


@dataclass(frozen=True)
class QpSolution(StepSolution):
    """The solved step QP: v' (None on failure), the contact impulses on B by A, status."""

    constraint_rows: int = 0    # Anitescu's rows, one per friction-cone extreme ray
    duals: Optional[np.ndarray] = None   # beta, one per row (None on failure)
    # the sliding speeds s_i the rows' bounds were shifted by (sliding_lift.py; None: no
    # shift), the fixed point's iterations and the lift it leaves [m]
    sliding_speeds: Optional[np.ndarray] = None
    lift_iterations: int = 1
    lift_residual: float = 0.0
    cone_multipliers: Optional[np.ndarray] = None   # friction_cone: exact: z per contact
    # quasi-static mode, proximal_iterations > 0 (proximal_drag.py): the proximal centre
    # c (object velocities) of this solve (None: the plain step QP), the iterate it came
    # from, and the largest translational drag left over an object's weight
    proximal_centre: Optional[np.ndarray] = None
    proximal_previous: Optional["QpSolution"] = None
    drag_fraction: Optional[float] = None


QpSolver = Callable[..., QpSolverResult]   # (H, f, A, lower, x_lower, x_upper), qp_backends


@dataclass(frozen=True)
class QpSettings:
    """The scenario's ``qp:`` block (README, "Scenario files")."""

    log_barrier_weight: Optional[float] = setting(
        None, number(positive=True, none_word="off"),
        "kappa: solve the log-barrier form of the QP (smoothed contact for planners, "
        "formulations/log_barrier.py); off: the QP")
    anitescu_lift: bool = setting(
        False, flag(), "keep Anitescu's lift of sliding contacts (mu h |v_t|); false: remove "
        "it by a fixed point on the rows' bounds (formulations/sliding_lift.py)")
    friction_cone: str = setting(
        "pyramid", one_of("pyramid", "exact", what="friction cone"),
        "pyramid: friction_directions rows per contact (a QP); exact: the round Coulomb cone "
        "(an SOCP, formulations/exact_cone.py; no step gradients)")
    proximal_iterations: int = setting(
        6, count(), "quasi-static mode: proximal-point iterates that remove the regulariser "
        "eps M_u's drag on moving objects (formulations/proximal_drag.py); 0: one solve, the "
        "drag as it is.  The log-barrier form (a smoothing itself) takes none")


class QpFormulation(Formulation):
    """
    The step QP as a formulation plug-in (module docstring; ``formulation: qp``).

    Objects: M_u in quasi-dynamic mode, eps M_u in quasi-static mode
    (:func:`quasi_static_inertia_scale`, at the initial configuration).  The
    reference it hands on is the spring reference qbar_a + h v_cmd, kept
    within each joint's ``max_reference_lead`` (``base.lead_bounded``).
    ``solver`` is the dense QP solver (DAQP, chosen by
    ``benchmarks/qp_solvers.py``); a benchmark may wrap it to record the QPs.
    """

    name = "qp"
    settings_type = QpSettings
    gives_gradients = True
    checks_one_sided_by_solving = True
    takes_robot_inertia = True

    def __init__(self, facts: ModelFacts, settings: QpSettings):
        """Fix the objects' inertia scale for the scenario's mode."""
        super().__init__(facts, settings)
        if settings.friction_cone == "exact":
            if settings.log_barrier_weight is not None:
                raise SchemaError("friction_cone", "exact cannot be combined with "
                                  "log_barrier_weight (the barrier is over the pyramid's "
                                  "rows). Fix: friction_cone: pyramid, or log_barrier_weight: "
                                  "off.")
            if not settings.anitescu_lift:
                raise SchemaError("friction_cone", "exact keeps Anitescu's lift of sliding "
                                  "contacts (mu h |v_t|; its removal is for the pyramid "
                                  "only, formulations/sliding_lift.py). Fix: add "
                                  "anitescu_lift: true to the qp: block, or friction_cone: "
                                  "pyramid.")
            self.gives_gradients = self.checks_one_sided_by_solving = False
            self.gradients_fix = "qp: {friction_cone: pyramid} (the default), or gradients=False"
        self.inertia_scale = 1.0 if facts.quasi_dynamic else quasi_static_inertia_scale(
            facts.h, facts.stiffness, facts.object_mass_default,
            facts.quasi_static_inertia_ratio)
        self.solver: QpSolver = solve_daqp
        self.removes_drag = bool(not facts.quasi_dynamic and settings.proximal_iterations > 0
                                 and settings.log_barrier_weight is None
                                 and len(facts.object_v_idx))
        self.object_runs = object_runs(facts)

    def solve(self, problem: StepProblem, contacts: ContactSet,
              warm_start=None) -> QpSolution:
        """Assemble Q and b for robots as springs and solve the step QP (with its centres)."""
        cost = self._cost(problem)
        if self.removes_drag:
            return self._solve_proximal(cost, problem, contacts)
        return self._solve_cost(cost, problem, contacts)

    def _solve_proximal(self, cost: QpCost, problem: StepProblem,
                        contacts: ContactSet) -> QpSolution:
        """
        Solve the plain step QP, then its proximal iterates (``proximal_drag.py``).

        An iterate is first predicted on the last full solve's active set
        (``active_set_step.py``: the same solution to round-off where it
        holds), else solved in full.  The projection P is built only where
        an object moves: the plain solve's whole drag (rotation included)
        bounds its translational drag, and below SETTLED it is reported.
        """
        facts, M_u = self.facts, problem.M_u
        identity = np.eye(len(facts.object_v_idx))
        projection: list = []             # P, once an object moves

        def translation() -> np.ndarray:
            if not projection:
                projection.append(self._projection(problem))
            return projection[0]
        predicts = self.settings.friction_cone == "pyramid"
        rows = friction_cone_rows(contacts) if predicts else None
        last_full: dict = {}

        def solve_from(previous: Optional[QpSolution]) -> QpSolution:
            centre = (np.zeros(len(facts.object_v_idx)) if previous is None
                      else translation() @ previous.v[facts.object_v_idx])
            shift = self._centre_shift(M_u, centre)       # b_u's change from b's
            solution = (self._predicted(last_full, cost, shift, problem, contacts, rows)
                        if previous is not None and predicts else None)
            if solution is None:
                solution = self._solve_cost(self._shifted(cost, shift), problem, contacts,
                                            None if previous is None
                                            else previous.sliding_speeds, rows)
                last_full.clear()
                last_full.update(solution=solution, shift=shift)
            if solution.v is None:
                return solution
            v_u = solution.v[facts.object_v_idx]
            drag = drag_fractions(self.inertia_scale, M_u, identity, v_u, centre, facts.h,
                                  self.object_runs)
            if previous is not None or np.max(drag, initial=0.0) > SETTLED:
                drag = drag_fractions(self.inertia_scale, M_u, translation(), v_u, centre,
                                      facts.h, self.object_runs)
            return replace(solution, proximal_centre=None if previous is None else centre,
                           proximal_previous=previous,
                           drag_fraction=float(np.max(drag, initial=0.0)))

        return proximal_solve(solve_from, self.settings.proximal_iterations)

    def _predicted(self, last_full: dict, cost: QpCost, shift: np.ndarray,
                   problem: StepProblem, contacts: ContactSet,
                   rows: tuple) -> Optional[QpSolution]:
        """Return the step with b_u shifted, predicted on the last full solve's active set."""
        full = last_full.get("solution")
        if full is None or full.v is None:
            return None
        start = time.perf_counter()
        facts, (A, index) = self.facts, rows
        if "response" not in last_full:
            last_full["response"] = response(
                cost.Q, self._shifted(cost, last_full["shift"]).b, A, index, contacts,
                facts.h, problem.v_lower, problem.v_upper, full.v, full.duals,
                full.sliding_speeds, facts.object_v_idx)
        base = last_full["response"]
        if base is None:
            return None
        found = predicted(base, shift - last_full["shift"], cost.Q, A, index, contacts,
                          facts.h, problem.v_lower, problem.v_upper, facts.object_v_idx)
        if found is None:
            return None
        v, duals, speeds = found
        return QpSolution(v, contact_impulses(contacts, index, duals), "optimal",
                          time.perf_counter() - start, len(duals), duals,
                          sliding_speeds=speeds, lift_iterations=0)

    def _projection(self, problem: StepProblem) -> np.ndarray:
        """Return P, the proximal centre's projection onto translation (``proximal_drag``)."""
        return translation_projection(problem.M_u,
                                      rotation_rows(problem.J_w, self.facts.object_v_idx))

    def _cost(self, problem: StepProblem) -> QpCost:
        """Return the step QP's Q and b (module docstring), robots' inertia included."""
        facts = self.facts
        M_u = problem.M_u if facts.quasi_dynamic else self.inertia_scale * problem.M_u
        cost = qp_cost(facts.n_v, facts.h, facts.robot_v_idx, facts.stiffness, problem.q_a,
                       spring_reference(problem, facts.h), facts.object_v_idx, M_u,
                       problem.tau_u)
        if facts.robot_damping is None:
            return cost
        return with_robot_inertia(cost, facts.h, facts.robot_v_idx, facts.robot_damping,
                                  problem.M_a, problem.v_a, problem.v_cmd)

    def _centre_shift(self, M_u: np.ndarray, centre: np.ndarray) -> np.ndarray:
        """Return b_u's change -eps M_u c for the proximal centre c (``proximal_drag.py``)."""
        return -self.inertia_scale * (M_u @ centre)

    def _shifted(self, cost: QpCost, shift: np.ndarray) -> QpCost:
        """Return the cost with b_u changed by ``shift``."""
        b = cost.b.copy()
        b[self.facts.object_v_idx] += shift
        return QpCost(cost.Q, b)

    def _solve_cost(self, cost: QpCost, problem: StepProblem, contacts: ContactSet,
                    speeds: Optional[np.ndarray] = None,
                    rows: Optional[tuple] = None) -> QpSolution:
        """Solve the step QP with this cost (the pyramid's fixed point, the cone, the barrier)."""
        facts = self.facts
        kappa = self.settings.log_barrier_weight
        if self.settings.friction_cone == "exact":
            return self._solve_cones(cost, contacts, problem)
        if kappa is None and self.settings.anitescu_lift:
            return solve_qp_step(cost, contacts, facts.h, problem.v_lower, problem.v_upper,
                                 self.solver, rows=rows)
        if kappa is None:
            if rows is None:                         # the same for every solve of the step
                rows = friction_cone_rows(contacts)
            start = speeds       # a nearby fixed point's speeds (the last proximal iterate's)
            solution, speeds, iterations, residual = fixed_point(
                lambda s: solve_qp_step(cost, contacts, facts.h, problem.v_lower,
                                        problem.v_upper, self.solver, s, rows),
                lambda solution, s: self._newton(cost, contacts, rows, problem, solution, s),
                contacts, facts.h, start)
            return replace(solution, sliding_speeds=speeds, lift_iterations=iterations,
                           lift_residual=residual)
        A, index = friction_cone_rows(contacts)
        lower = -contacts.phi[index[:, 0]] / facts.h if len(index) else np.zeros(0)
        start = time.perf_counter()
        result = solve_log_barrier(cost.Q, cost.b, A, lower, problem.v_lower,
                                   problem.v_upper, kappa)
        spent = time.perf_counter() - start
        if result.x is None:
            return QpSolution(None, np.zeros((contacts.n_c, 3)), result.status, spent,
                              len(lower))
        return QpSolution(result.x, contact_impulses(contacts, index, result.duals),
                          "optimal", spent, len(lower), result.duals)

    def _solve_cones(self, cost: QpCost, contacts: ContactSet,
                     problem: StepProblem) -> QpSolution:
        """Solve the step with exact cones (``exact_cone.py``), Anitescu's lift kept."""
        result = solve_cones(cost.Q, cost.b, contacts, self.facts.h, problem.v_lower,
                             problem.v_upper)
        if result.v is None:
            return QpSolution(None, np.zeros((contacts.n_c, 3)), result.status,
                              result.solve_time)
        return QpSolution(result.v, cone_impulses(contacts, result.z), "optimal",
                          result.solve_time, contacts.n_c, cone_multipliers=result.z)

    def _newton(self, cost: QpCost, contacts: ContactSet, rows: tuple, problem: StepProblem,
                solution: QpSolution, speeds: np.ndarray) -> np.ndarray:
        """Return the Newton update's v of the sliding-lift fixed point (sliding_lift.py)."""
        A, index = rows
        lower = row_bounds(contacts, index, self.facts.h, speeds)
        active = active_set(cost.Q, cost.b, A, lower, problem.v_lower, problem.v_upper,
                            solution.v, solution.duals)
        return newton_velocity(cost.Q, cost.b, A, index, contacts, self.facts.h, solution.v,
                               active, problem.v_lower, problem.v_upper)

    def solution_derivative(self, problem: StepProblem, contacts: ContactSet,
                            solution: QpSolution, changes: list, delta: float
                            ) -> tuple[np.ndarray, bool]:
        """
        Return dv'/dtheta from the KKT conditions with central differences of the QP's data.

        With the data's change dQ, db, dA, dl per parameter, the KKT
        conditions at (v', beta) give the change of the objective's linear
        term df = dQ v' + db - dA^T beta and of the rows' bound
        dl - dA v' (``qp_sensitivity``).  A parameter whose changed step has
        other contact rows (a contact appears or goes) has no derivative:
        its column is zero and the result is flagged one-sided.  A change
        that keeps the step's contacts (a command's) keeps its rows: only
        the cost and the bounds are built again.  The flags are per column.
        Without Anitescu's lift
        (``sliding_lift.py``) the rows' bounds depend on v' through the
        sliding speeds: at a changed step they are those of v' on its rows,
        and the tight rows linearise with ``constraint_rows``.
        """
        if self.settings.log_barrier_weight is not None:
            return self._barrier_derivative(problem, contacts, solution, changes, delta)
        P = self._projection(problem) if solution.proximal_previous is not None else None
        return self._iterate_derivative(problem, contacts, solution, changes, delta, P)

    def _iterate_derivative(self, problem: StepProblem, contacts: ContactSet,
                            solution: QpSolution, changes: list, delta: float,
                            P: Optional[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """
        Return dv'/dtheta of one solve of the step (``solution_derivative``), chained.

        A proximal iterate's centre P v_u^(k-1) moves with the iterate before
        it: its derivative enters the linear term as -eps M_u P dv_u^(k-1).
        """
        v, beta, speeds = solution.v, solution.duals, solution.sliding_speeds
        previous = (None if solution.proximal_previous is None
                    else solution.proximal_previous.v[self.facts.object_v_idx])
        base = self._kkt_data(problem, contacts, speeds=speeds, previous=previous)
        Q, b, A, lower, v_lower, v_upper = base
        active = active_set(Q, b, A, lower, v_lower, v_upper, v, beta)
        A_c, tie = A, False
        if speeds is not None:
            A_c, tie = constraint_rows(contacts, A, friction_cone_rows(contacts)[1], v)
        n, k = len(v), len(changes)
        df, dl = np.zeros((n, k)), np.zeros((len(lower), k))
        d_lower, d_upper = np.zeros((n, k)), np.zeros((n, k))
        broken = np.full(k, tie)
        if previous is not None:
            d_before, broken_before = self._iterate_derivative(
                problem, contacts, solution.proximal_previous, changes, delta, P)
            df[self.facts.object_v_idx] += self._centre_shift(
                problem.M_u, P @ d_before[self.facts.object_v_idx])
            broken |= broken_before
        for j, (plus, minus) in enumerate(changes):
            high, low = (self._kkt_data(*step, rows=base if step[1] is contacts else None,
                                        speeds=None if speeds is None
                                        else sliding_speeds(step[1], v), previous=previous)
                         for step in (plus, minus))
            if high[2].shape != A.shape or low[2].shape != A.shape:
                broken[j] = True
                continue
            dQ, db, dlo, dhi = (central_difference(high[i], low[i], delta) for i in (0, 1, 4, 5))
            df[:, j] += dQ @ v + db
            if high[2] is not A or low[2] is not A:     # the rows changed too
                dA, d_rows = (central_difference(high[i], low[i], delta) for i in (2, 3))
                df[:, j] -= dA.T @ beta
                dl[:, j] = d_rows - dA @ v
            d_lower[:, j], d_upper[:, j] = dlo, dhi
        derivative = solution_derivative(Q, A, active, df, dl, d_lower, d_upper, A_c)
        return derivative.dx, derivative.one_sided | broken

    def _barrier_derivative(self, problem: StepProblem, contacts: ContactSet,
                            solution: QpSolution, changes: list, delta: float
                            ) -> tuple[np.ndarray, bool]:
        """Return dv'/dtheta of the log-barrier step (``log_barrier.barrier_derivative``)."""
        kappa, v = self.settings.log_barrier_weight, solution.v
        Q, b, A, lower, v_lower, v_upper = self._kkt_data(problem, contacts)
        G, g = stacked_rows(A, lower, v_lower, v_upper)
        dF, dG, dg, broken = [], [], [], False
        for plus, minus in changes:
            high, low = self._kkt_data(*plus), self._kkt_data(*minus)
            G_high, g_high = stacked_rows(*high[2:])
            G_low, g_low = stacked_rows(*low[2:])
            if G_high.shape != G.shape or G_low.shape != G.shape:
                broken = True
                G_high, g_high, G_low, g_low = G, g, G, g
            dF.append((high[0] - low[0]) @ v / (2 * delta) + (high[1] - low[1]) / (2 * delta))
            dG.append((G_high - G_low) / (2 * delta))
            dg.append((g_high - g_low) / (2 * delta))
        dx = barrier_derivative(Q, G, g, kappa, v, np.array(dF).T.reshape(len(v), -1), dG,
                                np.array(dg).T.reshape(len(g), -1))
        return dx, broken

    def _kkt_data(self, problem: StepProblem, contacts: ContactSet,
                  rows: Optional[tuple] = None, speeds: Optional[np.ndarray] = None,
                  previous: Optional[np.ndarray] = None) -> tuple:
        """
        Return (Q, b, A, lower, v_lower, v_upper) of the step QP (as ``solve`` builds it).

        ``rows``: data of a step with the same contacts, whose A and lower are
        reused; ``speeds``: the sliding speeds that shift the rows' bounds;
        ``previous``: the last proximal iterate's v_u, whose projection is the
        centre that shifts b (``proximal_drag.py``).
        """
        facts = self.facts
        cost = self._cost(problem)
        if previous is not None:
            cost = self._shifted(cost, self._centre_shift(
                problem.M_u, self._projection(problem) @ previous))
        if rows is not None:
            A, lower = rows[2], rows[3]
        else:
            A, index = friction_cone_rows(contacts)
            lower = row_bounds(contacts, index, facts.h, np.zeros(contacts.n_c)
                               if speeds is None else speeds)
        return cost.Q, cost.b, A, lower, problem.v_lower, problem.v_upper

    def next_reference(self, problem: StepProblem, q_a_next: np.ndarray,
                       solution: StepSolution) -> tuple[np.ndarray, bool]:
        """Return the spring reference qbar_a + h v_cmd, within max_reference_lead of q_a'."""
        return lead_bounded(spring_reference(problem, self.facts.h), q_a_next,
                            self.facts.max_lead)


def qp_cost(n_v: int, h: float, robot_v_idx: np.ndarray, stiffness: np.ndarray,
            q_a: np.ndarray, q_ref_next: np.ndarray, object_v_idx: np.ndarray,
            object_inertia: np.ndarray, tau_g_u: np.ndarray) -> QpCost:
    """
    Assemble Q and b (module docstring) for robots as springs and objects.

    ``object_inertia`` is M_u (quasi-dynamic) or eps M_u (quasi-static).
    """
    Q, b = _assemble_cost(n_v, h, robot_v_idx, stiffness, q_a, q_ref_next, object_v_idx,
                          object_inertia, tau_g_u)
    return QpCost(Q=Q, b=b)


@numba.njit(cache=True)
def _assemble_cost(n_v, h, robot_v_idx, stiffness, q_a, q_ref_next, object_v_idx,
                   object_inertia, tau_g_u):
    Q = np.zeros((n_v, n_v))
    b = np.zeros(n_v)
    for k in range(robot_v_idx.shape[0]):
        i = robot_v_idx[k]
        Q[i, i] = h * h * stiffness[k]
        b[i] = -h * stiffness[k] * (q_ref_next[k] - q_a[k])
    for k in range(object_v_idx.shape[0]):
        for m in range(object_v_idx.shape[0]):
            Q[object_v_idx[k], object_v_idx[m]] = object_inertia[k, m]
        b[object_v_idx[k]] = -h * tau_g_u[k]
    return Q, b


def with_robot_inertia(cost: QpCost, h: float, robot_v_idx: np.ndarray, damping: np.ndarray,
                       M_a: np.ndarray, v_a: np.ndarray, v_cmd: np.ndarray) -> QpCost:
    """
    Add the robots' inertia and damping to the step QP (module docstring, "robot inertia").

    Q_aa += M_a + h D and b_a -= M_a v_a + h D v_cmd: the implicit Euler step of
    M_a (v_a' - v_a) / h = K (qbar_a' - q_a - h v_a') + D (v_cmd - v_a') + J_a^T lambda.
    """
    Q, b = cost.Q.copy(), cost.b.copy()
    Q[np.ix_(robot_v_idx, robot_v_idx)] += M_a + np.diag(h * damping)
    b[robot_v_idx] -= M_a @ v_a + h * damping * v_cmd
    return QpCost(Q, b)


def quasi_static_inertia_scale(h: float, stiffness: np.ndarray, M_u: np.ndarray,
                               ratio: float) -> float:
    """
    Return eps = ratio h^2 min(K) / lambda_max(M_u) (module docstring).

    Without robots, K = NOMINAL_STIFFNESS stands in for min(K).
    """
    if M_u.size == 0:
        return ratio
    k_min = float(np.min(stiffness)) if stiffness.size else NOMINAL_STIFFNESS
    return ratio * h * h * k_min / float(np.linalg.eigvalsh(M_u)[-1])


NOMINAL_STIFFNESS = 1000.0   # [N/m] the quasi-static inertia scale's K when there is no robot


def friction_cone_rows(contacts: ContactSet) -> tuple[np.ndarray, np.ndarray]:
    """
    Return the rows J_n,i + mu_i J_f,ij of Anitescu's constraints and each row's (i, j).

    A frictionless contact gets a single row J_n,i (its n_d rows would coincide);
    its j is -1.
    """
    return _cone_rows(contacts.J_n, contacts.J_f, contacts.mu, contacts.n_d)


@numba.njit(cache=True)
def _cone_rows(J_n, J_f, mu, n_d):
    n_rows = 0
    for i in range(mu.shape[0]):
        n_rows += n_d if mu[i] > 0.0 else 1
    A = np.empty((n_rows, J_n.shape[1]))
    index = np.empty((n_rows, 2), dtype=np.int64)
    r = 0
    for i in range(mu.shape[0]):
        if mu[i] > 0.0:
            for j in range(n_d):
                A[r] = J_n[i] + mu[i] * J_f[i * n_d + j]
                index[r, 0], index[r, 1] = i, j
                r += 1
        else:
            A[r] = J_n[i]
            index[r, 0], index[r, 1] = i, -1
            r += 1
    return A, index


def solve_qp_step(cost: QpCost, contacts: ContactSet, h: float,
                  v_lower: np.ndarray, v_upper: np.ndarray,
                  solver: QpSolver = solve_daqp,
                  speeds: Optional[np.ndarray] = None,
                  rows: Optional[tuple] = None) -> QpSolution:
    """
    Solve the step QP; v_lower <= v' <= v_upper carries joint limits.

    ``speeds``: the sliding speeds the rows' bounds are shifted by
    (``sliding_lift.row_bounds``); None: Anitescu's rows as they are.
    ``rows``: ``friction_cone_rows(contacts)``, when the caller has them.
    """
    A, index = friction_cone_rows(contacts) if rows is None else rows
    lower = row_bounds(contacts, index, h, np.zeros(contacts.n_c) if speeds is None
                       else speeds)
    result = solver(cost.Q, cost.b, A, lower, v_lower, v_upper)
    if not result.ok:
        return QpSolution(None, np.zeros((contacts.n_c, 3)), result.status,
                          result.solve_time, len(lower))
    duals = np.maximum(result.duals, 0.0)
    impulses = contact_impulses(contacts, index, duals)
    return QpSolution(result.x, impulses, "optimal", result.solve_time, len(lower), duals)


def contact_impulses(contacts: ContactSet, index: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """Return the impulse on B by A per contact, sum_j beta_ij (n_i + mu_i d_ij), world frame."""
    return _impulses(contacts.normal_W, contacts.tangents_W, contacts.mu, index, beta)


@numba.njit(cache=True)
def _impulses(normal, tangents, mu, index, beta):
    impulses = np.zeros((normal.shape[0], 3))
    for r in range(index.shape[0]):
        i, j = index[r, 0], index[r, 1]
        impulses[i] += beta[r] * normal[i]
        if j >= 0:
            impulses[i] += beta[r] * mu[i] * tangents[i, j]
    return impulses
