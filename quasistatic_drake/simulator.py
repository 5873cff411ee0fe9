"""
QuasistaticSimulator: the time-stepping engine.  It needs no Diagram.

One call of :meth:`QuasistaticSimulator.step` does: contact query and manifold
(contact_detection.py), the step QP (formulations/qp.py), and integration
q_next = q + h N(q) v' with quaternions renormalised.

The robots' commanded-position reference qbar_a (seed 002's impedance model)
is part of the state.  Each step advances it, qbar_a' = qbar_a + h v_cmd, and
the robot joints are springs pulling towards qbar_a'.  In free space the robot
therefore follows v_cmd exactly; in contact the reference runs ahead of the
joints and the spring force K (qbar_a' - q_a') is what squeezes a grasp.
The reference is an explicit argument, so a step's result depends on its
arguments only:

* ``step(q, v_cmd, q_ref=...)``: the one given (n_a values, robots in scenario
  order, joints in ``robot_joint_names`` order); a rollout passes the last
  step's ``StepResult.q_ref_next``, and the spring preload carries over;
* ``step(q, v_cmd)``: the robot positions of q, no preload.

:meth:`QuasistaticSimulator.rollout` steps through a sequence of commands,
handing each step's q_next and q_ref_next to the next.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Iterable, Mapping, Optional

import numpy as np
from pydrake.math import RigidTransform
from pydrake.multibody.tree import JointIndex

from quasistatic_drake.compile_notice import compile_notice
from quasistatic_drake.contact import ContactSet, thin_contacts
from quasistatic_drake.contact_detection import ContactDetector, proximity_pairs
from quasistatic_drake.manifold import body_motions, sweep_lengths
from quasistatic_drake.formulations.miqp import contact_impulses_miqp, miqp_data
from quasistatic_drake.formulations.miqp_backends import (BACKENDS as MIQP_BACKENDS,
                                                          MiqpSolverMissing, MiqpTooLarge)
from quasistatic_drake.formulations.qp import (QpStepSolution, joint_limit_velocity_bounds,
                                               qp_cost, quasi_static_inertia_scale,
                                               solve_qp_step)
from quasistatic_drake.model import QuasistaticModel
from quasistatic_drake.scenario import Scenario, ScenarioError

MAX_RESOLVES = 3   # widenings of the detection tolerance in one step (_tolerance_for_sweep)
# [m] the largest error a turning body's linearised contacts may make in one step
# (_turn_limits): a point at R from the axis is off by about R theta^2 / 2.
LINEARISATION_ERROR = 5e-4
RECOVERY_BISECTIONS = 6        # alpha to 1/64 when a QP step cannot work off all penetration
MIQP_RECOVERY_BISECTIONS = 3   # alpha to 1/8 for an MIQP (each solve costs milliseconds)


class CommandError(ValueError):
    """A velocity command (or q, or q_ref) that cannot be used; nothing was changed."""


@dataclass(frozen=True)
class Contact:
    """One contact point after a step; ``force_W`` is the force on body_b by body_a [N]."""

    body_a: str
    body_b: str
    point_W: np.ndarray
    normal_W: np.ndarray
    phi: float
    force_W: np.ndarray


@dataclass(frozen=True)
class StepResult:
    """
    The outcome of one step.  On failure ``q_next`` equals the input q.

    ``recovery_dropped`` is True when the step was infeasible as posed and
    was solved working off only the fraction ``recovery_fraction`` of each
    penetration (``QuasistaticSimulator._partial_recovery``).  ``tight_big_m`` names
    the MIQP's big-M rows that were tight (formulations/miqp.py): M may have
    been too small there.  ``rotation_limited`` is True when the step was
    solved again with the objects' turn bounded, because its linearised
    contacts let it penetrate deeper (``QuasistaticSimulator._deepened``).
    ``reference_limited`` is True when ``q_ref_next`` was held within a
    robot's ``max_reference_lead`` of its joints (``_bounded_reference``).
    ``status`` is "error" when something inside the
    step raised (a Drake check, a solver crash): ``error`` then says what,
    and q_next = q.  ``mip_start_next`` (the MIQP only) is the MIP start for
    the next step: this step's binaries, or on failure the start it was given.
    """

    q_next: np.ndarray
    status: str
    solve_time: float
    q_ref_next: np.ndarray
    v: Optional[np.ndarray]
    contact_set: ContactSet
    forces_W: np.ndarray
    step_time: float
    resolves: int = 0
    min_phi_next: float = field(default=np.inf)
    recovery_dropped: bool = False
    tight_big_m: tuple[str, ...] = ()
    error: str = ""
    recovery_fraction: float = 1.0
    rotation_limited: bool = False
    reference_limited: bool = False
    mip_start_next: Optional[np.ndarray] = None

    @property
    def success(self) -> bool:
        """Return whether the QP was solved and q advanced."""
        return self.status == "optimal"

    @cached_property
    def contacts(self) -> tuple[Contact, ...]:
        """Return the contacts of the step with their forces (built on first access)."""
        cs = self.contact_set
        mid = 0.5 * (cs.point_A_W + cs.point_B_W)
        return tuple(Contact(cs.body_a[i], cs.body_b[i], mid[i], cs.normal_W[i],
                             float(cs.phi[i]), self.forces_W[i]) for i in range(cs.n_c))


@dataclass(frozen=True)
class Rollout:
    """
    Steps from :meth:`QuasistaticSimulator.rollout`.

    ``q`` (steps + 1 rows) and ``q_ref`` start with the initial values; row
    k + 1 follows ``results[k]``.
    """

    q: np.ndarray
    q_ref: np.ndarray
    results: tuple[StepResult, ...]

    @property
    def failed_steps(self) -> int:
        """Return how many steps did not succeed (their q was kept)."""
        return sum(not r.success for r in self.results)


class QuasistaticSimulator:
    """The quasistatic engine for a :class:`Scenario` (see module docstring)."""

    def __init__(self, scenario: Scenario):
        self.scenario = scenario
        self.model = QuasistaticModel(scenario)
        self.h = scenario.time_step
        self.detector = ContactDetector(self.model, scenario.friction_directions)
        robots, objects = self.model.robots, self.model.objects
        self._robot_q_idx = _concat([r.q_idx for r in robots])
        self._robot_v_idx = _concat([r.v_idx for r in robots])
        self._stiffness = np.concatenate([r.stiffness for r in robots]) if robots else np.zeros(0)
        self._max_lead = np.concatenate([r.max_lead for r in robots]) if robots else np.zeros(0)
        self._robot_names = frozenset(r.name for r in robots)
        self._object_v_idx = _concat([o.v_idx for o in objects])
        self._object_block = np.ix_(self._object_v_idx, self._object_v_idx)
        self._inertia_scale = self._object_inertia_scale()
        self._object_weight = self._weight_of_objects()
        self._miqp = self._miqp_backend()
        self._limits = self._position_limits()
        # proximity pairs of the last q and tolerance asked: a step's q_next is the next
        # step's q.  Keyed by both, so it never changes a result.
        self._pairs_cache: Optional[tuple[bytes, list]] = None
        self._warm_up()

    # ----- binding public API ------------------------------------------------
    def default_positions(self) -> np.ndarray:
        """Return the scenario's initial configuration q (a copy)."""
        return self.model.q_default.copy()

    def robot_joint_names(self, robot: str) -> list[str]:
        """Return the actuated joints of a robot, in the order of its v_cmd entries."""
        return list(self._robot(robot).joint_names)

    def robot_positions(self, q: np.ndarray, robot: str) -> np.ndarray:
        """Return the joint positions of a robot, in ``robot_joint_names`` order."""
        return self._checked_q(q)[self._robot(robot).q_idx].copy()

    def object_pose(self, q: np.ndarray, object: str) -> RigidTransform:
        """Return the world pose of an object's base body at q."""
        info = self._object(object)
        self.model.set_positions(self._checked_q(q))
        plant = self.model.plant
        body = plant.GetBodyByName(info.base_body, info.instance)
        return plant.EvalBodyPoseInWorld(self.model.plant_context, body)

    def min_signed_distance(self, q: np.ndarray) -> float:
        """
        Return the smallest signed distance over all collision pairs at q (inf if none).

        Drake's distance of each pair; a pair Drake cannot measure (touching
        boxes, contact_detection.drake_query) takes its manifold's deepest point.
        """
        self.model.set_positions(self._checked_q(q))
        pairs = proximity_pairs(self.model, np.inf)
        unmeasured = [p for p in pairs if not np.isfinite(p.distance)]
        measured = [p.distance for p in pairs if np.isfinite(p.distance)]
        if unmeasured:
            measured.extend(self.detector.detect(np.inf, unmeasured).phi)
        return float(min(measured, default=np.inf))

    def checked_positions(self, q) -> np.ndarray:
        """Return q as a float array after checking its size and values (CommandError)."""
        return self._checked_q(q)

    def step(self, q: np.ndarray, v_cmd: Mapping[str, np.ndarray],
             q_ref: Optional[np.ndarray] = None,
             mip_start: Optional[np.ndarray] = None) -> StepResult:
        """
        Advance q by one time step h under the robots' velocity commands.

        ``v_cmd`` maps robot names to joint velocities (robots left out hold still).
        ``q_ref`` is the robots' reference (module docstring); None means the
        robot positions of q.  ``mip_start`` (the MIQP only) is a MIP start for
        the step's solves, usually the last step's ``mip_start_next``: it
        changes how fast Gurobi solves, and among equally good solutions
        which one it returns.  The result depends on the arguments only.
        The input q is never modified.  Bad input raises CommandError and
        changes nothing, as does ``MiqpTooLarge`` (the MIQP exceeds the
        solver's licence; its message gives the fixes).  A failed solve, or any
        other failure inside the step (status "error": whatever was raised but
        KeyboardInterrupt), returns a result with q_next = q: the engine stays
        usable.
        """
        start = time.perf_counter()
        q = self._checked_q(q).copy()
        v_bar = self._checked_command(v_cmd)
        q_ref = self._start_reference(q, q_ref)
        mip_start = self._checked_mip_start(mip_start)
        try:
            return self._step(q, q_ref, v_bar, mip_start, start)
        except MiqpTooLarge:
            raise
        except (Exception, SystemExit) as err:   # noqa: B902 - nothing may end the process
            return StepResult(
                q_next=q, status="error", solve_time=0.0, q_ref_next=q_ref, v=None,
                contact_set=ContactSet.empty(self.model.n_v, self.scenario.friction_directions),
                forces_W=np.zeros((0, 3)), step_time=time.perf_counter() - start,
                error=f"{type(err).__name__}: {err}", mip_start_next=mip_start)

    def rollout(self, q0: np.ndarray, commands: Iterable[Mapping[str, np.ndarray]],
                q_ref: Optional[np.ndarray] = None) -> Rollout:
        """
        Step from q0 through ``commands``, one ``v_cmd`` mapping per step.

        Each step starts from the last one's ``q_next``, ``q_ref_next`` and
        ``mip_start_next``; ``q_ref`` is the first step's reference (None: the
        robot positions of q0).  A failed step keeps q, and the rollout goes on
        from there.  A bad command raises CommandError naming its index;
        nothing is returned.
        """
        q = self._checked_q(q0).copy()
        q_ref = self._start_reference(q, q_ref)
        qs, refs, results, mip_start = [q], [q_ref], [], None
        for k, v_cmd in enumerate(commands):
            try:
                result = self.step(q, v_cmd, q_ref=q_ref, mip_start=mip_start)
            except CommandError as err:
                raise CommandError(f"commands[{k}]: {err}") from err
            q, q_ref, mip_start = result.q_next, result.q_ref_next, result.mip_start_next
            qs.append(q)
            refs.append(q_ref)
            results.append(result)
        return Rollout(q=np.array(qs), q_ref=np.array(refs), results=tuple(results))

    def _step(self, q: np.ndarray, q_ref: np.ndarray, v_bar: np.ndarray,
              mip_start: Optional[np.ndarray], start: float) -> StepResult:
        """Detect, solve and integrate one step from checked inputs (:meth:`step`)."""
        q_ref_next = self._next_reference(q, q_ref, v_bar)
        tolerance = self.scenario.contact_detection_tolerance
        for resolves in range(MAX_RESOLVES + 1):
            pairs = self._pairs(q, tolerance)
            self.model.set_positions(q)
            contacts = self.detector.detect(tolerance, pairs)
            if self._miqp is not None and self.scenario.miqp.max_points_per_pair:
                contacts = thin_contacts(contacts, self.scenario.miqp.max_points_per_pair)
            solution = self._solve_formulation(q, q_ref, q_ref_next, v_bar, contacts,
                                               mip_start)
            if solution.v is None:
                return self._failure(q, q_ref, contacts, solution, mip_start, start)
            wider = self._tolerance_for_sweep(solution.v, tolerance)
            if wider is None or resolves == MAX_RESOLVES:
                break
            tolerance = wider
        q_next = self._integrate(q, solution.v)
        if self._deepened(pairs, q_next):
            self.model.set_positions(q)
            limited = self._solve_formulation(q, q_ref, q_ref_next, v_bar, contacts,
                                              mip_start, rotation_limited=True)
            if limited.v is not None:
                solution, q_next = limited, self._integrate(q, limited.v)
        q_ref_next, reference_limited = self._bounded_reference(q_ref_next, q_next)
        result = StepResult(
            q_next=q_next, status=solution.status, solve_time=solution.solve_time,
            q_ref_next=q_ref_next, v=solution.v, contact_set=contacts,
            forces_W=solution.impulses_W / self.h, step_time=time.perf_counter() - start,
            resolves=resolves, min_phi_next=self._min_phi(q_next),
            recovery_dropped=solution.recovery_dropped,
            recovery_fraction=solution.recovery_fraction, tight_big_m=solution.tight_big_m,
            rotation_limited=solution.rotation_limited, reference_limited=reference_limited,
            mip_start_next=solution.mip_start)
        return result

    # ----- the step ----------------------------------------------------------
    def _solve_formulation(self, q, q_ref, q_ref_next, v_bar, contacts: ContactSet,
                           mip_start: Optional[np.ndarray],
                           rotation_limited: bool = False) -> QpStepSolution:
        """Solve the scenario's formulation; optionally with each body's turn bounded."""
        v_lower, v_upper = self._velocity_bounds(q)
        if rotation_limited:
            limit = self._turn_limits()
            v_lower, v_upper = np.maximum(v_lower, -limit), np.minimum(v_upper, limit)

        def solve(rows: ContactSet) -> QpStepSolution:
            if self._miqp is not None:
                return self._solve_miqp(q, q_ref, v_bar, rows, v_lower, v_upper, mip_start)
            return self._solve(q, q_ref_next, rows, v_lower, v_upper)

        solution = solve(contacts)
        if solution.v is None and np.any(contacts.phi < 0.0) and (
                self._miqp is None or "infeasible" in solution.status):
            solution = self._partial_recovery(solve, contacts, solution)
        return replace(solution, rotation_limited=rotation_limited)

    def _partial_recovery(self, solve, contacts: ContactSet,
                          failed: QpStepSolution) -> QpStepSolution:
        """
        Solve again, working off the largest fraction alpha of every penetration possible.

        A penetrating contact (phi < 0) asks for a separating velocity -phi/h,
        and that can be impossible: the joints' velocity limits (a finger 16 mm
        inside the table at h = 0.01 s may move 2.1 mm), or two demands that
        contradict each other.  With phi scaled by alpha in [0, 1] the step
        asks to work off the fraction alpha; alpha = 0 keeps "no deeper
        penetration" and is always feasible (v' = 0 satisfies it).  alpha is
        bisected (RECOVERY_BISECTIONS times for the QP, MIQP_RECOVERY_BISECTIONS
        for the costlier MIQP), so the rest is worked off in later steps.
        Returns ``failed`` if even alpha = 0 fails.
        """
        def scaled(alpha: float) -> ContactSet:
            return replace(contacts, phi=np.where(contacts.phi < 0.0, alpha * contacts.phi,
                                                  contacts.phi))

        best = solve(scaled(0.0))
        spent = failed.solve_time + best.solve_time
        if best.v is None:
            return replace(failed, solve_time=spent)
        low, high = 0.0, 1.0
        for _ in range(RECOVERY_BISECTIONS if self._miqp is None else MIQP_RECOVERY_BISECTIONS):
            alpha = 0.5 * (low + high)
            trial = solve(scaled(alpha))
            spent += trial.solve_time
            if trial.v is None:
                high = alpha
            else:
                low, best = alpha, trial
        return replace(best, recovery_dropped=True, recovery_fraction=low, solve_time=spent)

    def _deepened(self, pairs: list, q_next: np.ndarray) -> bool:
        """
        Return whether a pair penetrates deeper at q_next than at q (by LINEARISATION_ERROR).

        The contact rows are linear in v, but bodies turn: a box tipping 0.48
        rad in one step ended 11.5 mm inside the table, an arm link swung
        through it.  Such a step is solved again with :meth:`_turn_limits`.
        ``pairs`` are the proximity pairs at q; a pair first seen at q_next
        counts from 0.  Each pair is judged on its own, so a penetration
        elsewhere (an arm already buried) does not hide a new one.
        """
        before = {(p.id_A, p.id_B): p.distance for p in pairs if np.isfinite(p.distance)}
        for p in self._pairs(q_next, self.scenario.contact_detection_tolerance):
            if np.isfinite(p.distance) and p.distance < min(
                    before.get((p.id_A, p.id_B), 0.0), 0.0) - LINEARISATION_ERROR:
                return True
        return False

    def _turn_limits(self) -> np.ndarray:
        """
        Return the largest rate of each velocity that turns a body (inf elsewhere), at q.

        A velocity j turns body b at |J_w,bj| and moves its origin at
        |J_v,bj|, so b's geometry lies within R_j = |J_v,bj| / |J_w,bj| + R_b
        of the axis; a point at R off the axis is off its linearised path by
        R theta^2 / 2 after turning theta.  Each velocity may turn its bodies
        by theta_j = sqrt(2 LINEARISATION_ERROR / R_j) in a step, split evenly
        over the turning velocities of its model (3 for a free body, 7 for an
        arm): rate theta_j / (h sqrt(n)).  The model must be at q.
        """
        J_w, J_v, _ = self.model.body_jacobians()
        w = np.linalg.norm(J_w, axis=1)                      # (bodies, n_v)
        u = np.linalg.norm(J_v, axis=1)
        turns = w > 1e-12
        reach = np.where(turns, u / np.where(turns, w, 1.0)
                         + self.model.moving_radii[:, None], 0.0)
        radius = reach.max(axis=0, initial=0.0)
        rate = np.where(turns, 1.0 / np.where(turns, w, 1.0), np.inf).min(axis=0, initial=np.inf)
        limit = np.full(self.model.n_v, np.inf)
        for model in (*self.model.robots, *self.model.objects):
            turning = [j for j in model.v_idx if radius[j] > 0.0]
            for j in turning:
                theta = math.sqrt(2.0 * LINEARISATION_ERROR / radius[j])
                limit[j] = rate[j] * theta / (self.h * math.sqrt(len(turning)))
        return limit

    def _solve(self, q: np.ndarray, q_ref_next: np.ndarray, contacts: ContactSet,
               v_lower: np.ndarray, v_upper: np.ndarray) -> QpStepSolution:
        """Solve the seed 002 QP for this step (formulations/qp.py)."""
        plant, context = self.model.plant, self.model.plant_context
        idx_u = self._object_v_idx
        M_u = plant.CalcMassMatrix(context)[self._object_block]
        if not self.scenario.quasi_dynamic:
            M_u = self._inertia_scale * M_u
        tau_g = plant.CalcGravityGeneralizedForces(context)[idx_u]
        cost = qp_cost(self.model.n_v, self.h, self._robot_v_idx, self._stiffness,
                       q[self._robot_q_idx], q_ref_next, idx_u, M_u, tau_g)
        return solve_qp_step(cost, contacts, self.h, v_lower, v_upper)

    def _next_reference(self, q: np.ndarray, q_ref: np.ndarray, v_bar: np.ndarray) -> np.ndarray:
        """
        Advance the robots' reference by h v_cmd.

        QP: the spring reference accumulates, qbar_a' = qbar_a + h v_cmd.  MIQP:
        the reference is the hypothetical position q_a + h v_cmd of this step
        only (seed 000, eq. 21); the delayed normal-force lower bound of Sec.
        V-B reads the previous step's shortfall from it.
        """
        if self._miqp is not None:
            return q[self._robot_q_idx] + self.h * v_bar
        return q_ref + self.h * v_bar

    def _bounded_reference(self, q_ref_next: np.ndarray,
                           q_next: np.ndarray) -> tuple[np.ndarray, bool]:
        """
        Keep the spring reference a QP step hands on within max_lead of the joints.

        The reference integrates the command, so a joint held back (by the
        table, a buried pad, a joint limit) would build an unbounded lead, a
        spring force without bound, and a jump when it comes free.  Each
        joint's lead is capped at its robot's ``max_reference_lead`` (the
        force at K max_lead); in free space the lead is zero and nothing
        changes.  Returns the reference and whether a cap applied.  The MIQP's
        reference is q_a + h v_cmd of one step and is never capped.
        """
        if self._miqp is not None or not self._max_lead.size:
            return q_ref_next, False
        lead = q_ref_next - q_next[self._robot_q_idx]
        if np.all(np.abs(lead) <= self._max_lead):
            return q_ref_next, False
        return q_ref_next - lead + np.clip(lead, -self._max_lead, self._max_lead), True

    def _solve_miqp(self, q: np.ndarray, q_ref: np.ndarray, v_bar: np.ndarray,
                    contacts: ContactSet, v_lower: np.ndarray, v_upper: np.ndarray,
                    mip_start: Optional[np.ndarray]) -> QpStepSolution:
        """
        Solve seed 000's eq. 23 for this step (formulations/miqp.py).

        A command beyond a joint's velocity limit is followed at the limit:
        the tracking target h vbar and the big-M reach D use the command
        clipped to [v_lower, v_upper] (a 100 rad/s command made D, and with
        it every big-M, so large that Gurobi and SCIP ran into the time limit).
        """
        settings = self.scenario.miqp
        plant, context = self.model.plant, self.model.plant_context
        idx_u, idx_a = self._object_v_idx, self._robot_v_idx
        tau_u = plant.CalcGravityGeneralizedForces(context)[idx_u]
        v_bar = np.clip(v_bar, v_lower[idx_a], v_upper[idx_a])
        phibar_delayed = None
        if settings.delayed_lower_bound:
            phibar_delayed = contacts.phi + contacts.J_n[:, idx_a] @ (
                q_ref - q[self._robot_q_idx])
        data = miqp_data(contacts, self.h, idx_u, idx_a, self.h * v_bar, tau_u, settings,
                         self.h * v_lower, self.h * v_upper, self._point_reach(v_bar),
                         self._object_weight, phibar_delayed)
        answer = self._miqp.solve(data, settings, start=mip_start)
        if answer.x is None:
            return QpStepSolution(None, np.zeros((contacts.n_c, 3)), answer.status,
                                  answer.solve_time, data.n_binaries)
        return QpStepSolution(answer.x / self.h,
                              contact_impulses_miqp(contacts, answer.P_n, answer.P_f),
                              "optimal", answer.solve_time, data.n_binaries,
                              tight_big_m=answer.tight_big_m, mip_start=answer.z)

    def _point_reach(self, v_bar: np.ndarray) -> float:
        """D of the MIQP big-M: the tolerance plus twice the farthest robot point's travel."""
        v = np.zeros(self.model.n_v)
        v[self._robot_v_idx] = v_bar
        J_w, J_v, _ = self.model.body_jacobians()
        sweeps = sweep_lengths(J_w, J_v, self.model.moving_radii, v, self.h)
        return self.scenario.contact_detection_tolerance + 2.0 * float(
            np.max(sweeps, initial=0.0))

    def _integrate(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """q_next = q + h N(q) v, then unit quaternions (design step 5)."""
        qdot = self.model.plant.MapVelocityToQDot(self.model.plant_context, v)
        q_next = q + self.h * qdot
        for s in self.model.quaternion_starts:
            quaternion = q_next[s:s + 4]
            quaternion /= math.sqrt(quaternion @ quaternion)
        return q_next

    def _tolerance_for_sweep(self, v: np.ndarray, tolerance: float) -> Optional[float]:
        """
        Return a wider detection tolerance if the step could reach an unseen point, else None.

        A body can move further in one step than the detection tolerance (an
        object falling free, a fast arm).  A point of body B moves by at most
        |s_B| + t_B, where s_B = h v_B is its origin's displacement and
        t_B = h |w_B| R_B, R_B the radius of its geometry about its origin; two
        points of bodies A and B close in by at most |s_A - s_B| + t_A + t_B
        (a fixed body: s = 0, t = 0).  Points of a pair already in contact lie
        up to that apart too (a tilted box 19 mm above the table, pushed down
        22 mm, hit it with a corner that was 21 mm away), while a cylinder
        carried by the fingers closes in on them by no more than its slip.
        When such a reach exceeds the tolerance, the step is solved again from
        q with the tolerance widened to cover it.
        """
        J_w, J_v, _ = self.model.body_jacobians()
        shift, turn = body_motions(J_w, J_v, self.model.moving_radii, v, self.h)
        sweeps = np.sqrt(np.einsum('ij,ij->i', shift, shift)) + turn
        if 2.0 * np.max(sweeps, initial=0.0) <= tolerance:
            return None
        slot = self.model.moving_slot
        geometries = self.model.geometries
        reach_needed = 0.0
        for pair in proximity_pairs(self.model, 2.0 * np.max(sweeps)):
            a = slot.get(geometries[pair.id_A].body_index)
            b = slot.get(geometries[pair.id_B].body_index)
            s_a = shift[a] if a is not None else _NO_SHIFT
            s_b = shift[b] if b is not None else _NO_SHIFT
            reach = (math.sqrt((s_a - s_b) @ (s_a - s_b)) + (turn[a] if a is not None else 0.0)
                     + (turn[b] if b is not None else 0.0))
            distance = pair.distance if np.isfinite(pair.distance) else 0.0
            if distance < reach:
                reach_needed = max(reach_needed, reach)
        if reach_needed <= tolerance:
            return None
        return reach_needed + self.scenario.contact_detection_tolerance

    def _pairs(self, q: np.ndarray, tolerance: float) -> list:
        """Signed-distance pairs within tolerance at q (the last asked are kept)."""
        key = q.tobytes() + np.float64(tolerance).tobytes()
        if self._pairs_cache is None or self._pairs_cache[0] != key:
            self.model.set_positions(q)
            self._pairs_cache = (key, proximity_pairs(self.model, tolerance))
        return self._pairs_cache[1]

    def _min_phi(self, q: np.ndarray) -> float:
        """Return the smallest Drake signed distance of the pairs within tolerance at q."""
        pairs = self._pairs(q, self.scenario.contact_detection_tolerance)
        return min((p.distance for p in pairs if np.isfinite(p.distance)), default=np.inf)

    def _failure(self, q, q_ref, contacts, solution, mip_start, start) -> StepResult:
        return StepResult(q_next=q, status=solution.status, solve_time=solution.solve_time,
                          q_ref_next=q_ref, v=None, contact_set=contacts,
                          forces_W=np.zeros((contacts.n_c, 3)),
                          step_time=time.perf_counter() - start, mip_start_next=mip_start)

    # ----- set-up helpers ------------------------------------------------------
    def _warm_up(self) -> None:
        """
        Take one step from the default configuration and forget it.

        The first step of a process loads the compiled kernels from numba's
        cache (tens of ms); paying that here keeps it out of the step times.
        In a new environment the kernels compile first (about 30 s), and
        compile_notice says so.  The MIQP is not solved here (its solve dwarfs
        the load, and a problem too large for the licence should fail at its
        step, not at construction).
        """
        with compile_notice():
            self._warm_up_kernels()

    def _warm_up_kernels(self) -> None:
        """Run the compiled kernels once (see _warm_up)."""
        if self._miqp is not None:
            self.min_signed_distance(self.model.q_default)
            return
        self.step(self.model.q_default.copy(), {})

    def _miqp_backend(self):
        """Return the MIQP backend of the scenario, or None for the QP formulation."""
        if self.scenario.formulation != "miqp":
            return None
        try:
            return MIQP_BACKENDS[self.scenario.miqp.backend]()
        except MiqpSolverMissing as err:
            raise ScenarioError(f"{self.scenario.source}: miqp.backend: {err}") from None

    def _weight_of_objects(self) -> float:
        """Return the objects' total weight |g| sum(m) [N]."""
        plant = self.model.plant
        mass = sum(plant.get_body(b).default_mass() for o in self.model.objects
                   for b in plant.GetBodyIndices(o.instance))
        return float(np.linalg.norm(self.scenario.gravity)) * mass

    def _object_inertia_scale(self) -> float:
        """Return eps of the quasi-static Hessian eps M_u (model.py refuses a singular M_u)."""
        self.model.set_positions(self.model.q_default)
        M_u = self.model.plant.CalcMassMatrix(self.model.plant_context)[self._object_block]
        return quasi_static_inertia_scale(self.h, self._stiffness, M_u,
                                          self.scenario.quasi_static_inertia_ratio)

    def _position_limits(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(q index, v index, lower, upper) of every 1-DOF joint with finite limits."""
        plant = self.model.plant
        lo, hi = plant.GetPositionLowerLimits(), plant.GetPositionUpperLimits()
        q_idx, v_idx = [], []
        for j in range(plant.num_joints()):
            joint = plant.get_joint(JointIndex(j))
            if joint.num_positions() == 1 and joint.num_velocities() == 1:
                s = joint.position_start()
                if np.isfinite(lo[s]) or np.isfinite(hi[s]):
                    q_idx.append(s)
                    v_idx.append(joint.velocity_start())
        q_idx, v_idx = np.array(q_idx, dtype=int), np.array(v_idx, dtype=int)
        return q_idx, v_idx, lo[q_idx], hi[q_idx]

    def _velocity_bounds(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """
        Return the model files' joint limits as bounds on v'.

        Position limits: a joint already beyond a limit may stay there.
        Velocity limits (URDF ``<limit velocity>``, SDFormat ``<velocity>``):
        a joint moves no faster, whatever its command (the reference still
        advances by h v_cmd, within max_reference_lead).
        """
        q_idx, v_idx, lo, hi = self._limits
        lower, upper = joint_limit_velocity_bounds(self.model.n_v, self.h, q, q_idx, v_idx, lo,
                                                   hi)
        plant = self.model.plant
        return (np.maximum(lower, plant.GetVelocityLowerLimits()),
                np.minimum(upper, plant.GetVelocityUpperLimits()))

    # ----- input checking --------------------------------------------------------
    def _robot(self, name: str):
        try:
            return self.model.robot(name)
        except KeyError as err:
            raise CommandError(err.args[0]) from None

    def _object(self, name: str):
        try:
            return self.model.object(name)
        except KeyError as err:
            raise CommandError(err.args[0]) from None

    def _checked_q(self, q) -> np.ndarray:
        q = np.asarray(q, dtype=float)
        if q.shape != (self.model.n_q,):
            raise CommandError(f"q must have shape ({self.model.n_q},) for this scenario, "
                               f"got {q.shape}. Fix: start from default_positions().")
        if not np.isfinite(q).all():
            raise CommandError(f"q has non-finite entries at {np.flatnonzero(~np.isfinite(q))}.")
        return q

    def _checked_command(self, v_cmd: Mapping[str, np.ndarray]) -> np.ndarray:
        if not isinstance(v_cmd, Mapping):
            raise CommandError("v_cmd must map robot names to velocity arrays, got "
                               f"{type(v_cmd).__name__}.")
        v_bar = np.zeros(len(self._robot_v_idx))
        offset = 0
        known = self._robot_names
        unknown = sorted(set(v_cmd) - known)
        if unknown:
            raise CommandError(f"v_cmd names unknown robot(s) {unknown}. "
                               f"Robots in this scenario: {sorted(known)}.")
        for robot in self.model.robots:
            n = len(robot.joint_names)
            if robot.name in v_cmd:
                v_bar[offset:offset + n] = self._checked_vector(
                    v_cmd[robot.name], n, f"v_cmd[{robot.name!r}]", robot.joint_names)
            offset += n
        return v_bar

    @staticmethod
    def _checked_vector(value, n: int, where: str, names) -> np.ndarray:
        try:
            vec = np.asarray(value, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            raise CommandError(f"{where} must be {n} numbers, got {value!r}.") from None
        if vec.size != n:
            raise CommandError(f"{where} has {vec.size} entries; expected {n}, one per "
                               f"joint {list(names)}.")
        if not np.isfinite(vec).all():
            bad = [names[i] for i in np.flatnonzero(~np.isfinite(vec))]
            raise CommandError(f"{where} is not finite for joint(s) {bad}: {vec.tolist()}.")
        return vec

    def _checked_mip_start(self, mip_start) -> Optional[np.ndarray]:
        """Return the MIP start as a 0/1 float array, or None (CommandError if it is not one)."""
        if mip_start is None:
            return None
        if self._miqp is None:
            raise CommandError("mip_start: this scenario's formulation is "
                               f"{self.scenario.formulation!r}, which takes none. Fix: pass "
                               "mip_start=None (only formulation: miqp uses it).")
        try:
            z = np.array(mip_start, dtype=float).reshape(-1)
        except (TypeError, ValueError) as err:
            raise CommandError(f"mip_start must be a sequence of 0/1 values, "
                               f"got {mip_start!r}. Fix: pass a StepResult's "
                               "mip_start_next, or None.") from err
        if not np.all((z == 0.0) | (z == 1.0)):
            raise CommandError("mip_start must hold only 0 and 1 values (the binaries of "
                               "an earlier step). Fix: pass a StepResult's mip_start_next, "
                               "or None.")
        return z

    def _start_reference(self, q: np.ndarray, q_ref: Optional[np.ndarray]) -> np.ndarray:
        if q_ref is not None:
            names = [f"{r.name}/{j}" for r in self.model.robots for j in r.joint_names]
            return self._checked_vector(q_ref, len(self._robot_q_idx), "q_ref", names)
        return q[self._robot_q_idx].copy()


_NO_SHIFT = np.zeros(3)


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts).astype(int) if parts else np.zeros(0, dtype=int)
