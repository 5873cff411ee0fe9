r"""
The QP time step of Pang & Tedrake 2021, with exact non-penetration and round friction cones.

Pang & Tedrake, "Fast simulation of rigid multibody quasistatic systems with
convex optimization" (ICRA 2021 talk).  The decision variable is the next
velocity v' = [v_u'; v_a'] (objects; robots), and the talk's cost:

    minimise_v'   1/2 v'^T Q v' + b^T v'   + (contacts: conic_step.py)

Signs of b, derived from the KKT conditions (the talk's "Specializing to
robotic manipulation" and "take 2"): with the contact impulses gamma,
stationarity reads Q v' + b = J^T gamma.

* Robots are impedances that become springs (gravity compensated):
  0 = h K (qbar_a' - (q_a + h v_a')) + J_a^T gamma, so Q_aa = h^2 K and
  b_a = -h K (qbar_a' - q_a), with the reference qbar_a' = qbar_a + h v_cmd.
* Robots with inertia (the scenario's ``robot_inertia``; ours, not the
  talk's): the implicit Euler step of an impedance-controlled arm,
  M_a (v_a' - v_a) / h = K (qbar_a' - q_a - h v_a') + D (v_cmd - v_a') + J_a^T lambda,
  adds Q_aa += M_a + h D and b_a -= M_a v_a + h D v_cmd.
* Objects in quasi-dynamic mode ("take 2"): momentum is discarded every step,
  M_u v_u' = h tau_g,u + J_u^T gamma: Q_uu = M_u, b_u = -h tau_g,u.
* Objects in quasi-static mode have no inertia (the talk's "Drawbacks": Q_uu = 0
  is only positive semidefinite).  We keep Q_uu = eps M_u with
  eps = r h^2 min(K) / lambda_max(M_u), r = ``quasi_static_inertia_ratio``
  (default 1e-6): only so that the velocities are unique.  With exact
  non-penetration and round cones (below), nothing else in the step is left
  unpriced but a free object's fall, so r can be this small: the drag it
  puts on a moving object, eps M_u v / h, grows as r K v: 1.02e-4 of the
  weight of a box pushed at 0.1 m/s by a finger of K = 1e5 N/m
  (``benchmarks/regulariser.py``; docs/formulations.md).

The contacts (``conic_step.py``, per contact island, ``islands.py``): an
exact normal row, and the maximum-dissipation friction of the round Coulomb
cone (``friction_cone: exact``, the default; ``pyramid``: the balanced
friction directions' pyramid) bounded by mu times the contact's normal
impulse in the last step, the warm start this formulation hands on
(``contact_memory.py``; Drake's "lagged" approximation).  The cone's
curvature prices every sideways slip and turn of a sliding object, so a box
pushed through its centre holds its yaw at any h, where the pyramid's flat
faces let the regulariser decide it.

Two bounds keep a step within its linearisation: the joint limits
(``joint_limits.py``), and a trust region on the objects' velocities: no
point of an object moves further in a step than TRUST_FRACTION of the
detection tolerance, than the robots' references move it (so a carried
object keeps up with the gripper), or than gravity and the applied forces
take an object from rest in a step (|g| h^2, and h^2 |tau_j| / M_jj for an
``object_forces`` entry).  An object with nothing to hold it (a fall, a
slide down a slope steeper than its friction, a lift by a force larger than
its weight) moves at that speed in the quasi-static mode: the model has no
speed of its own to give it.  The quasi-dynamic mode's own speed is within it.

An island with no robot in it whose objects did not move in the last step
sleeps: it is not solved, and stays where it is, until a contact joins it
to an awake island or a force is applied to one of its objects.

``qp: {log_barrier_weight: kappa}`` solves instead the log-barrier form of
the talk's QP (Anitescu's rows; ``log_barrier.py``), qsim's smoothing for
planners.  This module imports neither Drake nor ROS.
"""

from __future__ import annotations

import math
import operator
import time
from dataclasses import dataclass, replace
from typing import Optional

import numba
import numpy as np

from quasistatic_drake.contact import ContactSet
from quasistatic_drake.formulations import anitescu
from quasistatic_drake.formulations.base import (Formulation, lead_bounded, ModelFacts,
                                                 spring_reference, StepProblem, StepSolution)
from quasistatic_drake.formulations.conic_polish import ON_BOUNDARY
from quasistatic_drake.formulations.conic_step import (CostChange, Guess, island_derivative,
                                                       IslandData, IslandSolution, PYRAMID,
                                                       ROUND, solve_island, tangent_rows)
from quasistatic_drake.formulations.contact_memory import ContactMemory, recall
from quasistatic_drake.formulations.log_barrier import (barrier_derivative, solve_log_barrier,
                                                        stacked_rows)
from quasistatic_drake.islands import find_islands
from quasistatic_drake.manifold import body_motions
from quasistatic_drake.records import changed
from quasistatic_drake.schema import number, one_of, removed, SchemaError, setting

# the trust region: an object velocity moves a point of its bodies by at most the largest of
# TRUST_FRACTION x the detection tolerance, TRUST_MARGIN x the robots' reference sweep, and
# |g| h^2 (an unsupported object falls no faster than gravity takes it from rest in a step)
TRUST_FRACTION = 0.5
TRUST_MARGIN = 2.0
REST = 1e-10              # [m] an undriven island whose points move less than this sleeps
# the price of a penetrating contact's slack, over the largest impulse the island's springs
# and weights give (conic_step.py): relaxing is always dearer than pushing out
RECOVERY_PRICE = 1e3
NO_IMPULSE = 1e-9         # of the largest lagged impulse: an impulse below this is none
TOUCH_DISTANCE = 1e-6     # [m] a contact this close to its body pair's loaded ones touches too
SETTLE_ITERATIONS = 8     # at most, of the zero-command solves that settle a first warm start
SETTLED = 1e-12           # [m] settled: a solve moved no point further than the last


@dataclass(frozen=True)
class QpCost:
    """The Hessian Q and linear term b of the step QP."""

    Q: np.ndarray
    b: np.ndarray


@dataclass(frozen=True)
class QpSolution(StepSolution):
    """
    The solved step: v' (None on failure), the impulses on B by A, status, time, and more.

    ``normal_impulses`` per contact [N s] (the next step's friction bounds),
    ``friction_bounds`` this step's (mu times the last step's normal impulse),
    ``slack`` per contact: how much of its penetration speed the step did not
    work off [m/s]; ``islands`` solved and ``sleeping`` skipped; ``iterations``
    of the interior-point method, summed; ``memory`` (the warm start handed on).
    """

    normal_impulses: Optional[np.ndarray] = None
    friction_bounds: Optional[np.ndarray] = None
    slack: Optional[np.ndarray] = None
    islands: int = 0
    sleeping: int = 0
    iterations: int = 0
    memory: Optional[ContactMemory] = None
    duals: Optional[np.ndarray] = None        # the log-barrier form's row multipliers
    penetration_speed: Optional[np.ndarray] = None   # max(0, -phi / h) per contact
    # each solved island and its solution (the derivatives differentiate them)
    parts: tuple = ()

    @property
    def recovery_fraction(self) -> float:
        """Return the least fraction of a penetration the step works off (1: all of it)."""
        if self.slack is None or self.penetration_speed is None:
            return 1.0
        deep = self.penetration_speed > 0.0
        if not deep.any():
            return 1.0
        return float(max(0.0, 1.0 - np.max(self.slack[deep] / self.penetration_speed[deep])))

    @property
    def warm_start_next(self) -> Optional[ContactMemory]:
        """Return the contacts and impulses the next step's friction bounds come from."""
        return self.memory


def _friction_cone(value, where: str) -> Optional[str]:
    """Check qp.friction_cone: exact, pyramid, or None (left out)."""
    return None if value is None else one_of("exact", "pyramid", what="friction cone")(value,
                                                                                       where)


@dataclass(frozen=True)
class QpSettings:
    """The scenario's ``qp:`` block (README, "Scenario files")."""

    log_barrier_weight: Optional[float] = setting(
        None, number(positive=True, none_word="off"),
        "kappa: solve the log-barrier form of the talk's QP (smoothed contact for planners, "
        "formulations/log_barrier.py); off: the QP")
    friction_cone: Optional[str] = setting(
        None, _friction_cone,
        "exact: the round Coulomb cone; pyramid: friction_directions rows per contact; left "
        "out: exact, and the log-barrier form's Anitescu rows (a pyramid)")
    anitescu_lift: Optional[bool] = setting(
        None, removed("the step's normal rows are exact and no contact lifts while it "
                      "slides (issue 30). Fix: delete the key."),
        "removed (the step has no lift)")
    proximal_iterations: Optional[int] = setting(
        None, removed("the regulariser is too small to drag (quasi_static_inertia_ratio, "
                      "default 1e-6), so no iterates remove it (issue 30). Fix: delete the key."),
        "removed (no drag to remove)")

    def __post_init__(self):
        """Refuse the round cone with the log-barrier form, whose rows are Anitescu's."""
        if self.log_barrier_weight is not None and self.friction_cone == "exact":
            raise SchemaError("qp.friction_cone", "exact: the log-barrier form "
                              "(log_barrier_weight) takes Anitescu's rows, a pyramid of "
                              "friction_directions faces. Fix: delete friction_cone (or set "
                              "it to pyramid), or delete log_barrier_weight.")


class QpFormulation(Formulation):
    """
    The step QP as a formulation plug-in (module docstring; ``formulation: qp``).

    The reference it hands on is the spring reference qbar_a + h v_cmd, kept
    within each joint's ``max_reference_lead`` (``base.lead_bounded``); the
    warm start, its contacts and their impulses (``contact_memory.py``).
    """

    name = "qp"
    settings_type = QpSettings
    gives_gradients = True
    checks_one_sided_by_solving = True
    takes_robot_inertia = True

    def __init__(self, facts: ModelFacts, settings: QpSettings):
        """Fix the objects' inertia scale for the scenario's mode, and the islands' units."""
        super().__init__(facts, settings)
        self.inertia_scale = 1.0 if facts.quasi_dynamic else quasi_static_inertia_scale(
            facts.h, facts.stiffness, facts.object_mass_default,
            facts.quasi_static_inertia_ratio)
        self.cone = PYRAMID if settings.friction_cone == "pyramid" else ROUND
        self.unit_of_v, self.object_units, self.robot_units = _units(facts)
        self.unit_names = facts.object_names + facts.robot_names
        self.unit_load = _unit_loads(facts)
        self.fall = float(np.linalg.norm(facts.gravity)) * facts.h ** 2   # |g| h^2 [m]
        self.object_idx = np.asarray(facts.object_v_idx, dtype=np.int64)
        self.robot_idx = np.asarray(facts.robot_v_idx, dtype=np.int64)
        self.rho_floor = TRUST_FRACTION * min(facts.detection_tolerance, 1.0)   # [m]

    # ----- the step -----------------------------------------------------------------------
    def solve(self, problem: StepProblem, contacts: ContactSet,
              warm_start: Optional[ContactMemory] = None) -> QpSolution:
        """Solve the step's islands (module docstring); the warm start bounds the friction."""
        cost = self._cost(problem)
        if self.settings.log_barrier_weight is not None:
            return self._solve_barrier(cost, problem, contacts)
        start = time.perf_counter()
        found = recall(warm_start, contacts)
        friction = contacts.mu * lagged_impulses(contacts, warm_start, found)
        lower, upper = self._trust_bounds(problem)
        J_t = tangent_rows(contacts.J_f, contacts.n_c, contacts.n_d)
        rows = _contact_rows(np.ascontiguousarray(contacts.J_n, dtype=float),
                             np.ascontiguousarray(contacts.J_f, dtype=float), contacts.n_d)
        islands = find_islands(self.unit_of_v, len(self.unit_names), self.robot_units, rows)
        n_v = self.facts.n_v
        carried = self._carried(warm_start, contacts, found)
        v = np.zeros(n_v)
        normal, slack = np.zeros(contacts.n_c), np.zeros(contacts.n_c)
        impulses = np.zeros((contacts.n_c, 3))
        slides = np.zeros(contacts.n_c, dtype=bool)
        asleep, solved, sleeping, iterations, status = set(), 0, 0, 0, "optimal"
        parts: list = []
        for island in islands:
            names = [self.unit_names[u] for u in island.units]
            if self._sleeps(island, names, warm_start, problem):
                sleeping += 1
                asleep.update(names)
                kept = found[island.contacts]
                known = kept >= 0
                normal[island.contacts[known]] = warm_start.normal_impulse[kept[known]]
                impulses[island.contacts[known]] = warm_start.impulse_W[kept[known]]
                continue
            answer = solve_island(self._island_data(island, cost, contacts, J_t, friction,
                                                    lower, upper, carried))
            parts.append((island, answer))
            solved += 1
            iterations += answer.iterations
            if answer.v is None:
                status = answer.status
                break
            v[island.v_idx] = answer.v
            normal[island.contacts] = answer.normal
            slack[island.contacts] = answer.slack
            impulses[island.contacts] = self._impulses_W(contacts, island.contacts, answer)
            if self.cone == ROUND:
                slides[island.contacts] = _slides(answer.friction, friction[island.contacts])
            if not island.driven and self._at_rest(problem, island, answer.v):
                v[island.v_idx] = 0.0
                asleep.update(names)
        spent = time.perf_counter() - start
        if status != "optimal":
            return QpSolution(None, np.zeros((contacts.n_c, 3)), status, spent,
                              iterations=iterations, islands=solved, sleeping=sleeping)
        memory = ContactMemory.of(contacts, normal, impulses, frozenset(asleep), v, slides)
        return QpSolution(v, impulses, "optimal", spent, normal_impulses=normal,
                          friction_bounds=friction, slack=slack, islands=solved,
                          sleeping=sleeping, iterations=iterations, memory=memory,
                          penetration_speed=np.maximum(-contacts.phi / self.facts.h, 0.0),
                          parts=tuple(parts))

    def _carried(self, memory: Optional[ContactMemory], contacts: ContactSet,
                 found: np.ndarray) -> Optional[Guess]:
        """
        Return the last step's v', and each contact's impulses and sliding, or None.

        A recalled contact takes its remembered normal impulse, its friction
        impulse along this step's tangents and whether it slid; a new one
        none (``conic_step.Guess``).  None where nothing is remembered, or
        the friction is the pyramid's.
        """
        if memory is None or memory.sliding is None or self.cone != ROUND:
            return None
        v = np.zeros(self.facts.n_v) if memory.velocity is None else memory.velocity
        return Guess(v, *_carried_impulses(np.asarray(found, dtype=np.int64),
                                           memory.normal_impulse, memory.impulse_W,
                                           memory.sliding, contacts.normal_W,
                                           np.ascontiguousarray(contacts.tangents_W[:, 0])))

    def _island_data(self, island, cost: QpCost, contacts: ContactSet, J_t: np.ndarray,
                     friction: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                     carried: Optional[Guess] = None) -> IslandData:
        """Return one island's problem (conic_step.py), with the last step's guess if known."""
        ix, ic = island.v_idx, island.contacts
        J_f = contacts.J_f.reshape(contacts.n_c, contacts.n_d, self.facts.n_v)
        Q, J_n, J_t_island, J_f_island = _island_rows(
            cost.Q, np.ascontiguousarray(contacts.J_n), np.ascontiguousarray(J_t),
            np.ascontiguousarray(J_f), np.asarray(ix, dtype=np.int64),
            np.asarray(ic, dtype=np.int64))
        return IslandData(
            Q=Q, b=cost.b[ix], lower=lower[ix], upper=upper[ix],
            phi_h=contacts.phi[ic] / self.facts.h, J_n=J_n, J_t=J_t_island, J_f=J_f_island,
            friction=friction[ic], cone=self.cone,
            penalty=RECOVERY_PRICE * (float(np.sum(self.unit_load[island.units])) + 1e-3),
            guess=None if carried is None else Guess(carried.v[ix], carried.normal[ic],
                                                     carried.friction[ic], carried.sliding[ic]))

    def _islands_data(self, problem: StepProblem, contacts: ContactSet, friction: np.ndarray,
                      parts: tuple, cost: Optional[QpCost] = None,
                      bounds: Optional[tuple] = None) -> list:
        """Return the problem of each of ``parts``' islands, from the step's data."""
        cost = self._cost(problem) if cost is None else cost
        lower, upper = self._trust_bounds(problem) if bounds is None else bounds
        J_t = tangent_rows(contacts.J_f, contacts.n_c, contacts.n_d)
        return [self._island_data(island, cost, contacts, J_t, friction, lower, upper)
                for island, _ in parts]

    @staticmethod
    def _impulses_W(contacts: ContactSet, ic: np.ndarray,
                    answer: IslandSolution) -> np.ndarray:
        """Return each contact's impulse on B by A in the world: lambda n + friction."""
        if answer.friction.shape[1] == 2:                  # round: along t1, t2 = n x t1
            return _round_impulses(contacts.normal_W, contacts.tangents_W,
                                   np.asarray(ic, dtype=np.int64), answer.normal,
                                   answer.friction)
        impulse = answer.normal[:, None] * contacts.normal_W[ic]
        impulse += np.einsum("kj,kjx->kx", answer.friction, contacts.tangents_W[ic])
        return impulse                                     # pyramid: beta_j d_j

    def _sleeps(self, island, names: list, warm_start: Optional[ContactMemory],
                problem: StepProblem) -> bool:
        """Return whether an island sleeps: no robot, its objects asleep, no force applied."""
        if island.driven or warm_start is None or not names:
            return False
        if not all(name in warm_start.asleep for name in names):
            return False
        return problem.tau_ext is None or not np.any(problem.tau_ext[island.v_idx])

    def _at_rest(self, problem: StepProblem, island, v_island: np.ndarray) -> bool:
        """Return whether no point of the island's bodies moves by REST in the step."""
        v = np.zeros(self.facts.n_v)
        v[island.v_idx] = v_island
        shift, turn = body_motions(problem.J_w, problem.J_v, problem.body_radii, v,
                                   self.facts.h)
        return float(np.max(np.linalg.norm(shift, axis=1) + turn, initial=0.0)) <= REST

    def _trust_radius(self, problem: StepProblem) -> float:
        """Return the trust region's rho of ``_trust_bounds`` [m]."""
        facts = self.facts
        return _trust_radius_of(problem.J_w, problem.J_v, problem.body_radii,
                                spring_reference(problem, facts.h) - problem.q_a,
                                problem.v_lower, problem.v_upper, self.robot_idx, facts.h,
                                self.rho_floor)

    def _trust_bounds(self, problem: StepProblem,
                      rho: Optional[float] = None) -> tuple[np.ndarray, np.ndarray]:
        """
        Return the joint limits' bounds on v', with the objects' trust region (docstring).

        Object velocity j moves its bodies' origins by at most h |J_v,j| |v_j|
        and turns their points by at most h R |J_w,j| |v_j|.  The turn may be
        at most rho = max(TRUST_FRACTION x the detection tolerance,
        TRUST_MARGIN x how far the robots' references move their points this
        step), so that a pushed or carried object keeps up with the robot; the
        shift may be at most the larger of rho and |g| h^2, so that an
        unsupported object falls as gravity takes it from rest.  Gravity gives
        no turn: a box tipping over an edge turns by rho / R a step, and its
        contact rows stay within their linearisation.  An applied force
        (``object_forces``) widens the bound of each velocity it drives to
        the speed it gives the object from rest in the step, h |tau_j| / M_jj
        (a 1e4 N lift of a 1 kg box reaches its quasi-dynamic 999 m/s, and
        in the quasi-static mode the motion grows with the force).  Each
        velocity's bound is scaled by its share of ``problem.trust``.
        """
        rho = self._trust_radius(problem) if rho is None else rho
        trust, applied = self._trust_shares(problem)
        return _trust_bounds_at(problem.J_w, problem.J_v, problem.body_radii, rho, self.fall,
                                self.facts.h, trust, applied, self.object_idx,
                                problem.v_lower, problem.v_upper)

    def _trust_shares(self, problem: StepProblem) -> tuple[np.ndarray, np.ndarray]:
        """Return each velocity's share of the trust region, and an applied force's speed."""
        facts = self.facts
        trust = (np.full(facts.n_v, float(problem.trust)) if np.isscalar(problem.trust)
                 else np.broadcast_to(np.asarray(problem.trust, dtype=float), (facts.n_v,)))
        applied = np.zeros(facts.n_v)     # an applied force's speed from rest in a step
        if problem.tau_ext is not None:
            idx = self.object_idx
            applied[idx] = facts.h * np.abs(problem.tau_ext[idx]) / np.diag(problem.M_u)
        return trust, applied

    def _command_derivatives(self, problem: StepProblem, contacts: ContactSet, changes: list,
                             delta: float, rho: float) -> tuple:
        """
        Return which of ``changes`` only change the commands, and d b, d lower, d upper.

        A command column (``step_gradients``: the iterate's own contacts, a
        problem that differs in v_cmd and q_ref alone) changes b's robot rows
        (module docstring) and, through rho (``_trust_radius``), the trust
        region's bounds: their central differences, all columns at once, as
        n_v x k arrays (zero in the other columns).  The robots' inertia would
        add h D v_cmd to b_a, but the step refuses gradients under it.
        """
        facts = self.facts
        commands = np.array([all(c is contacts and _commands_only(p, problem) for p, c in column)
                             for column in changes], dtype=bool)
        if not commands.any():
            return commands, *(np.zeros((facts.n_v, len(changes))) for _ in range(3))
        sides = [p for j in np.flatnonzero(commands) for p, _ in changes[j]]  # plus, minus, ...
        n_a = len(facts.robot_v_idx)
        trust, applied = self._trust_shares(problem)
        return (commands, *_command_columns(
            commands, np.array([p.v_cmd for p in sides]).reshape(-1, n_a),
            np.array([p.q_ref for p in sides]).reshape(-1, n_a), problem.q_a, facts.stiffness,
            facts.h, delta, problem.J_w, problem.J_v, problem.body_radii, problem.v_lower,
            problem.v_upper, self.robot_idx, rho, self.rho_floor, self.fall, trust, applied,
            self.object_idx))

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

    # ----- the log-barrier form ------------------------------------------------------------
    def _solve_barrier(self, cost: QpCost, problem: StepProblem,
                       contacts: ContactSet) -> QpSolution:
        """Solve the log-barrier form of the talk's QP (``log_barrier.py``)."""
        kappa = self.settings.log_barrier_weight
        A, index = anitescu.friction_cone_rows(contacts)
        lower = -contacts.phi[index[:, 0]] / self.facts.h if len(index) else np.zeros(0)
        start = time.perf_counter()
        result = solve_log_barrier(cost.Q, cost.b, A, lower, problem.v_lower,
                                   problem.v_upper, kappa)
        spent = time.perf_counter() - start
        if result.x is None:
            return QpSolution(None, np.zeros((contacts.n_c, 3)), result.status, spent)
        return QpSolution(result.x, anitescu.contact_impulses(contacts, index, result.duals),
                          "optimal", spent, duals=result.duals)

    def barrier_data(self, problem: StepProblem, contacts: ContactSet) -> tuple:
        """Return (Q, b, A, lower, v_lower, v_upper) of the log-barrier form's QP."""
        cost = self._cost(problem)
        A, index = anitescu.friction_cone_rows(contacts)
        lower = -contacts.phi[index[:, 0]] / self.facts.h if len(index) else np.zeros(0)
        return cost.Q, cost.b, A, lower, problem.v_lower, problem.v_upper

    def solution_derivative(self, problem: StepProblem, contacts: ContactSet,
                            solution: QpSolution, changes: list, delta: float
                            ) -> tuple[np.ndarray, np.ndarray]:
        """
        Return dv'/dtheta and which columns are one-sided (``Formulation``).

        Each solved island's conditions at its solution, differentiated
        (``conic_step.island_derivative``), with the friction bounds (the last
        step's impulses) held; a sleeping island is not solved, and does not
        move under a small change.
        """
        if self.settings.log_barrier_weight is not None:
            return self._barrier_derivative(problem, contacts, solution, changes, delta)
        k = len(changes)
        dv, one_sided = np.zeros((self.facts.n_v, k)), np.zeros(k, dtype=bool)
        friction, parts = solution.friction_bounds, solution.parts
        base_cost, rho = self._cost(problem), self._trust_radius(problem)
        bounds = self._trust_bounds(problem, rho)
        base = self._islands_data(problem, contacts, friction, parts, base_cost, bounds)
        commands, db, dlower, dupper = self._command_derivatives(problem, contacts, changes,
                                                                 delta, rho)

        def data(at_problem: StepProblem, at_contacts: ContactSet) -> list:
            if (at_problem is problem and at_contacts.J_n is contacts.J_n
                    and at_contacts.J_f is contacts.J_f):    # an offset's column: phi only
                return [changed(own, phi_h=at_contacts.phi[island.contacts] / self.facts.h)
                        for own, (island, _) in zip(base, parts)]
            return self._islands_data(at_problem, at_contacts, friction, parts)
        sides = [None if command else (data(*plus), data(*minus))
                 for command, (plus, minus) in zip(commands, changes)]
        columns = np.flatnonzero(commands)
        for i, (island, answer) in enumerate(solution.parts):
            ix = island.v_idx
            d, sided = island_derivative(
                base[i], answer,
                [None if side is None else (side[0][i], side[1][i]) for side in sides], delta,
                CostChange(columns, *(part[np.ix_(ix, columns)] for part in (db, dlower, dupper)))
                if len(columns) else None)
            dv[island.v_idx] = d
            one_sided |= sided
        return dv, one_sided

    def _barrier_derivative(self, problem: StepProblem, contacts: ContactSet,
                            solution: QpSolution, changes: list, delta: float
                            ) -> tuple[np.ndarray, bool]:
        """Return dv'/dtheta of the log-barrier form."""
        kappa, v = self.settings.log_barrier_weight, solution.v
        Q, b, A, lower, v_lower, v_upper = self.barrier_data(problem, contacts)
        G, g = stacked_rows(A, lower, v_lower, v_upper)
        dF, dG, dg, broken = [], [], [], False
        for plus, minus in changes:
            high, low = self.barrier_data(*plus), self.barrier_data(*minus)
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

    # ----- the warm start and the reference ------------------------------------------------
    def checked_warm_start(self, warm_start):
        """Return the warm start (a ContactMemory or None), or raise CommandError."""
        from quasistatic_drake.errors import CommandError
        if isinstance(warm_start, ContactMemory):
            for name, shape in (("velocity", (self.facts.n_v,)), ("sliding", (warm_start.size,))):
                value = getattr(warm_start, name)
                if value is not None and np.shape(value) != shape:
                    raise CommandError(
                        f"warm_start.{name}: the ContactMemory's {name} has shape "
                        f"{np.shape(value)}, not {shape} (the model's velocities, or one per "
                        "remembered contact). Fix: hand on a StepResult's state_next "
                        "unchanged, or start from sim.initial_state().")
            sweep = warm_start.sweep
            if sweep is not None and not (isinstance(sweep, (float, int))
                                          and math.isfinite(sweep) and sweep >= 0.0):
                raise CommandError(
                    f"warm_start.sweep: the ContactMemory's sweep is {sweep!r}, not a finite "
                    "distance >= 0 [m] (how far its velocity moved any point) or None. Fix: "
                    "hand on a StepResult's state_next unchanged, or set sweep=None.")
        if warm_start is None or isinstance(warm_start, ContactMemory):
            return warm_start
        raise CommandError(
            f"warm_start: formulation 'qp' takes the ContactMemory of its last step (its "
            f"contacts' impulses, which bound the next step's friction), got "
            f"{type(warm_start).__name__}. Fix: start from a StepResult's state_next, or "
            "sim.initial_state().")

    def linearisation_velocity(self, warm_start: Optional[ContactMemory]):
        """Return the last step's v' (the next step linearises halfway along it) and sweep."""
        return (None, None) if warm_start is None else (warm_start.velocity, warm_start.sweep)

    def gap_offsets(self, warm_start: Optional[ContactMemory]) -> dict:
        """Return the gap offsets the last step ended with ({} without a warm start)."""
        return {} if warm_start is None or warm_start.offsets is None else warm_start.offsets

    def with_step_end(self, warm_start: Optional[ContactMemory], offsets: dict,
                      sweep: float) -> Optional[ContactMemory]:
        """Return the memory with the step's gap offsets and v''s sweep kept for the next step."""
        return None if warm_start is None else changed(warm_start, offsets=dict(offsets),
                                                       sweep=sweep)

    def settled_warm_start(self, problem: StepProblem,
                           contacts: ContactSet) -> Optional[ContactMemory]:
        """
        Return the warm start of a scene at q under zero commands: its contacts at rest.

        A first state has no last step to take friction bounds from, so its
        zero-command step is solved again with the bounds its own impulses
        give, until a solve moves nothing further than the last (SETTLED), at
        most SETTLE_ITERATIONS times: a box on a slope starts held by its
        friction, not sliding for a step.
        """
        if self.settings.log_barrier_weight is not None:
            return None                       # Anitescu's rows need no friction bounds
        memory, last = None, None
        for _ in range(SETTLE_ITERATIONS):
            solution = self.solve(problem, contacts, memory)
            if solution.v is None:
                return memory
            memory = replace(solution.memory, asleep=frozenset(), velocity=None, sweep=None)
            if last is not None and self.facts.h * np.max(
                    np.abs(solution.v - last), initial=0.0) <= SETTLED:
                break
            last = solution.v
        return memory

    def next_reference(self, problem: StepProblem, q_a_next: np.ndarray,
                       solution: StepSolution) -> tuple[np.ndarray, bool]:
        """Return the spring reference qbar_a + h v_cmd, within max_reference_lead of q_a'."""
        return lead_bounded(spring_reference(problem, self.facts.h), q_a_next,
                            self.facts.max_lead)


def lagged_impulses(contacts: ContactSet, memory: Optional[ContactMemory],
                    found: np.ndarray) -> np.ndarray:
    """
    Return each contact's lagged normal impulse: its body pair's, shared evenly [N s].

    Rigid contacts that share a load (a box's four corners on a table)
    have no unique impulses: the step's solution holds for a family of
    them, and the one a solver returns moves with its round-off.  So each
    body pair's impulse of the last step is shared evenly among its contacts
    found again that touch as its loaded ones do (the uniform pressure of
    quasi-static pushing): those that carried any of it, and those whose
    gap is within TOUCH_DISTANCE of the least gap of the loaded ones (or of
    zero).  A new contact, or one that carried nothing and stands apart,
    has none.  An impulse at the solver's round-off (NO_IMPULSE of the
    largest) is none.

    Why the body pair and the touching contacts: which of several contacts
    of a rigid pair carries the load is decided by their gaps' last
    nanometres.  drake_models' WSG 50 "with tip" touches a brick with four
    1 mm spheres per finger, each its own geometry pair; its left finger
    stood 6.3e-7 rad off the brick's face, its other spheres 6 to 13 nm
    from it, and one sphere per finger took the whole squeeze.  Shared per geometry
    pair among loaded contacts, only that sphere had friction: two points
    on the grasp axis, no torsional friction, and the brick turned about
    the axis (15 degrees in the lift, 100 in the carry; docs/contact.md).
    Shared over the finger's four spheres, its friction holds the brick as
    the pads' faces do.
    """
    if (memory is None or not memory.size or not contacts.n_c
            or contacts.geometry_a is None):       # (no places: every contact is new)
        return np.zeros(contacts.n_c)
    return _shared_evenly(_body_pairs(contacts.body_a, contacts.body_b),
                          np.asarray(found, dtype=np.int64),
                          np.asarray(memory.normal_impulse, dtype=float),
                          np.asarray(contacts.phi, dtype=float), TOUCH_DISTANCE)


def _commands_only(changed_problem: StepProblem, problem: StepProblem) -> bool:
    """Return whether a changed problem shares every field of ``problem`` but the commands."""
    mine, own = changed_problem.__dict__, problem.__dict__
    return all(map(operator.is_, map(mine.__getitem__, _NOT_COMMANDS),
                   map(own.__getitem__, _NOT_COMMANDS)))


_NOT_COMMANDS = tuple(name for name in StepProblem.__dataclass_fields__
                      if name not in ("v_cmd", "q_ref"))


def _body_pairs(body_a: tuple, body_b: tuple) -> np.ndarray:
    """Return each contact's body pair as a number, the same for (A, B) and (B, A)."""
    seen: dict = {}
    return np.array([seen.setdefault((a, b) if a <= b else (b, a), len(seen))
                     for a, b in zip(body_a, body_b)], dtype=np.int64)


@numba.njit(cache=True)
def _shared_evenly(pair, found, remembered, phi, touch):
    """Return each touching contact's share of its body pair's last impulses, else 0."""
    n = found.shape[0]
    last = np.zeros(n)
    top = 0.0
    for i in range(n):
        if found[i] >= 0:
            last[i] = remembered[found[i]]
            top = max(top, last[i])
    n_pairs = 0
    for i in range(n):
        n_pairs = max(n_pairs, pair[i] + 1)
    total, floor = np.zeros(n_pairs), np.full(n_pairs, np.inf)
    loaded = np.zeros(n, dtype=np.bool_)
    for i in range(n):                         # the pair's loaded contacts, in order
        loaded[i] = found[i] >= 0 and last[i] > NO_IMPULSE * top
        if loaded[i]:
            total[pair[i]] += last[i]
            floor[pair[i]] = min(floor[pair[i]], phi[i])
    member = np.zeros(n, dtype=np.bool_)
    count = np.zeros(n_pairs)
    for i in range(n):
        k = pair[i]
        member[i] = total[k] > 0.0 and found[i] >= 0 and (
            loaded[i] or phi[i] <= max(floor[k], 0.0) + touch)
        if member[i]:
            count[k] += 1.0
    out = np.zeros(n)
    for i in range(n):
        if member[i]:
            out[i] = total[pair[i]] / count[pair[i]]
    return out


@numba.njit(cache=True)
def _trust_bounds_at(J_w, J_v, radii, rho, fall, h, trust, applied, idx, v_lower, v_upper):
    """
    Return the velocity bounds within the trust region of radius rho (``_trust_bounds``).

    The objects' velocities ``idx`` are bounded by ``_trust_limits``, their
    shift by max(rho, fall); the others keep v_lower and v_upper.
    """
    lower, upper = v_lower.copy(), v_upper.copy()
    if idx.shape[0]:
        _trust_limits(J_w, J_v, radii, rho, max(rho, fall), h, trust, applied, idx, lower,
                      upper)
    return lower, upper


@numba.njit(cache=True, error_model="numpy")
def _trust_limits(J_w, J_v, radii, rho, rho_shift, h, trust, applied, idx, lower, upper):
    """
    Bound the objects' velocities ``idx`` in lower and upper by the trust region (in place).

    Velocity j may move a body's origin by h |J_v,bj| |v_j| <= rho_shift and
    turn its points by h R_b |J_w,bj| |v_j| <= rho (``_trust_bounds``), or
    reach ``applied[j]``, the speed an applied force gives it from rest, times
    its share trust_j.
    """
    for k in range(idx.shape[0]):
        j = idx[k]
        shift, turn = 0.0, 0.0
        for b in range(J_v.shape[0]):
            shift = max(shift, math.sqrt(J_v[b, 0, j] * J_v[b, 0, j] + J_v[b, 1, j] * J_v[b, 1, j]
                                         + J_v[b, 2, j] * J_v[b, 2, j]))
            turn = max(turn, radii[b] * math.sqrt(J_w[b, 0, j] * J_w[b, 0, j]
                                                  + J_w[b, 1, j] * J_w[b, 1, j]
                                                  + J_w[b, 2, j] * J_w[b, 2, j]))
        by_shift, by_turn = rho_shift / (h * shift), rho / (h * turn)
        limit = by_shift if by_shift <= by_turn else by_turn
        limit = (limit if limit >= applied[j] else applied[j]) * trust[j]
        if not lower[j] >= -limit:
            lower[j] = -limit
        if not upper[j] <= limit:
            upper[j] = limit


@numba.njit(cache=True)
def _command_columns(commands, v_cmd, q_ref, q_a, stiffness, h, delta, J_w, J_v,
                     radii, v_lower, v_upper, robot_idx, rho, rho_floor, fall, trust, applied,
                     object_idx):
    """
    Return d b, d lower, d upper (n_v x k) of ``QpFormulation._command_derivatives``.

    Column j of ``commands`` takes the central difference of b_a = -h K
    (q_ref + h v_cmd - q_a) and of the trust region's bounds
    (``_trust_bounds_at`` at ``_trust_radius_of`` its lead)
    between its two sides, rows 2i and 2i + 1 of v_cmd and q_ref.
    """
    n_v, k = v_lower.shape[0], commands.shape[0]
    db, dlower, dupper = np.zeros((n_v, k)), np.zeros((n_v, k)), np.zeros((n_v, k))
    side = 0
    lower, upper = np.empty((2, n_v)), np.empty((2, n_v))
    for j in range(k):
        if not commands[j]:
            continue
        moved = False
        for s in range(2):
            lead = q_ref[side + s] + h * v_cmd[side + s] - q_a
            sign = 1.0 if s == 0 else -1.0
            for i in range(robot_idx.shape[0]):
                db[robot_idx[i], j] += sign * (-h * stiffness[i] * lead[i]) / (2 * delta)
            at = _trust_radius_of(J_w, J_v, radii, lead, v_lower, v_upper, robot_idx, h,
                                  rho_floor)
            moved = moved or at != rho
            lower[s], upper[s] = _trust_bounds_at(J_w, J_v, radii, at, fall, h, trust, applied,
                                                  object_idx, v_lower, v_upper)
        if moved:
            dlower[:, j] = (lower[0] - lower[1]) / (2 * delta)
            dupper[:, j] = (upper[0] - upper[1]) / (2 * delta)
        side += 2
    return db, dlower, dupper


@numba.njit(cache=True)
def _contact_rows(J_n, J_f, n_d):
    """Return |J_n| + sum_j |J_f,j| per contact (n_c x n_v): the velocities each one moves."""
    rows = np.empty(J_n.shape)
    for i in range(J_n.shape[0]):
        for v in range(J_n.shape[1]):
            tangent = abs(J_f[i * n_d, v])
            for j in range(1, n_d):
                tangent += abs(J_f[i * n_d + j, v])
            rows[i, v] = abs(J_n[i, v]) + tangent
    return rows


@numba.njit(cache=True)
def _island_rows(Q, J_n, J_t, J_f, ix, ic):
    """Return Q[ix, ix], J_n[ic, ix], J_t[ic, :, ix] and J_f[ic, :, ix] (one island's)."""
    n, k = ix.shape[0], ic.shape[0]
    Q_i = np.empty((n, n))
    for a in range(n):
        for b in range(n):
            Q_i[a, b] = Q[ix[a], ix[b]]
    J_n_i = np.empty((k, n))
    J_t_i = np.empty((k, J_t.shape[1], n))
    J_f_i = np.empty((k, J_f.shape[1], n))
    for a in range(k):
        for b in range(n):
            J_n_i[a, b] = J_n[ic[a], ix[b]]
            for d in range(J_t.shape[1]):
                J_t_i[a, d, b] = J_t[ic[a], d, ix[b]]
            for d in range(J_f.shape[1]):
                J_f_i[a, d, b] = J_f[ic[a], d, ix[b]]
    return Q_i, J_n_i, J_t_i, J_f_i


@numba.njit(cache=True)
def _carried_impulses(found, normal_impulse, impulse_W, sliding, normal_W, t1_W):
    """Return ``_carried``'s normal impulses, frictions along (t1, n x t1) and sliding flags."""
    k = found.shape[0]
    normal, friction = np.zeros(k), np.zeros((k, 2))
    slid = np.zeros(k, dtype=np.bool_)
    for a in range(k):
        i = found[a]
        if i < 0:
            continue
        n, t1 = normal_W[a], t1_W[a]
        t2 = np.array([n[1] * t1[2] - n[2] * t1[1], n[2] * t1[0] - n[0] * t1[2],
                       n[0] * t1[1] - n[1] * t1[0]])
        normal[a] = normal_impulse[i]
        friction[a, 0] = impulse_W[i] @ t1
        friction[a, 1] = impulse_W[i] @ t2
        slid[a] = sliding[i]
    return normal, friction, slid


@numba.njit(cache=True)
def _slides(friction, bound):
    """Return which contacts' friction (k, 2) is at its bound (k,): they slide."""
    out = np.zeros(friction.shape[0], dtype=np.bool_)
    for a in range(friction.shape[0]):
        out[a] = bound[a] > 0.0 and (math.hypot(friction[a, 0], friction[a, 1])
                                     >= (1.0 - ON_BOUNDARY) * bound[a])
    return out


@numba.njit(cache=True)
def _round_impulses(normal_W, tangents_W, ic, normal, friction):
    """Return the impulses lambda n + f_1 t1 + f_2 (n x t1) of the contacts ``ic`` [N s]."""
    out = np.empty((ic.shape[0], 3))
    for a in range(ic.shape[0]):
        n, t1 = normal_W[ic[a]], tangents_W[ic[a], 0]
        t2 = np.array([n[1] * t1[2] - n[2] * t1[1], n[2] * t1[0] - n[0] * t1[2],
                       n[0] * t1[1] - n[1] * t1[0]])
        for x in range(3):
            out[a, x] = normal[a] * n[x] + (friction[a, 0] * t1[x] + friction[a, 1] * t2[x])
    return out


@numba.njit(cache=True)
def _trust_radius_of(J_w, J_v, radii, lead, v_lower, v_upper, idx, h, rho_floor):
    """
    Return the trust region's rho: max(rho_floor, TRUST_MARGIN x the robots' sweep).

    The sweep (``_robot_sweep``) is how far the robots' references move any
    of their points this step [m], ``lead`` being qbar_a' - q_a.
    """
    return max(rho_floor, TRUST_MARGIN * _robot_sweep(J_w, J_v, radii, lead, v_lower, v_upper,
                                                      idx, h))


@numba.njit(cache=True)
def _robot_sweep(J_w, J_v, radii, lead, v_lower, v_upper, idx, h):
    """
    Return how far the robots' references move any of their points this step [m].

    The joints' target displacement is the lead qbar_a' - q_a, within what
    their velocity limits let them move in the step (a command of 93 m/s
    moves pads limited to 1 m/s by 0.1 m); body b moves by at most
    |J_v,b dq| + R_b |J_w,b dq| for it (first order).
    """
    dq = np.zeros(J_w.shape[2])
    for k in range(idx.shape[0]):
        j = idx[k]
        low, high = h * v_lower[j], h * v_upper[j]
        value = lead[k] if lead[k] > low or np.isnan(lead[k]) else low    # numpy's clip
        dq[j] = value if value < high or np.isnan(value) else high
    shift, turn = body_motions(J_w, J_v, radii, dq / h, h)
    sweep = 0.0
    for b in range(turn.shape[0]):
        reach = math.sqrt(shift[b, 0] * shift[b, 0] + shift[b, 1] * shift[b, 1]
                          + shift[b, 2] * shift[b, 2]) + turn[b]
        sweep = max(sweep, reach)
    return sweep


def _units(facts: ModelFacts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return each velocity's model (objects first, then robots), and the two kinds' models."""
    unit = -np.ones(facts.n_v, dtype=np.int64)
    offset, k = 0, 0
    for size in facts.object_sizes:
        unit[facts.object_v_idx[offset:offset + size]] = k
        offset, k = offset + size, k + 1
    objects = np.arange(k)
    offset = 0
    for size in facts.robot_sizes:
        unit[facts.robot_v_idx[offset:offset + size]] = k
        offset, k = offset + size, k + 1
    return unit, objects, np.arange(len(facts.object_sizes), k)


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


def _unit_loads(facts: ModelFacts) -> np.ndarray:
    """
    Return the largest impulse each model can give in a step [N s], objects then robots.

    An object's weight times h; a robot's springs at their largest lead,
    sum K max_lead, times h.  An island's penetration price is RECOVERY_PRICE
    times its own models' sum, so that nothing outside it changes its problem.
    """
    g = float(np.linalg.norm(facts.gravity))
    loads = [facts.h * g * mass for mass in facts.object_masses]
    start = 0
    for size in facts.robot_sizes:
        joints = slice(start, start + size)
        loads.append(facts.h * float(np.sum(facts.stiffness[joints] * facts.max_lead[joints])))
        start += size
    return np.array(loads)


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
