"""
QuasistaticSimulator: the time-stepping engine.  It needs no Diagram.

One call of :meth:`QuasistaticSimulator.step` does: contact query and manifold
(contact_detection.py), the scenario's formulation (formulations/: the QP of
Pang & Tedrake 2021, the MIQP of Pang & Tedrake 2018, or a registered
plug-in), and integration q_next = q + h N(q) v' with quaternions
renormalised.  The step loop is the same for every formulation
(formulations/base.py says what a formulation does and what the loop does).

The state is explicit (state.py): ``result = sim.step(state, v_cmd)``, then
``state = result.state_next``.  It holds q, the robots' reference (under
the QP the spring reference qbar_a of Pang & Tedrake 2021's impedance
model: each step advances it, qbar_a' = qbar_a + h v_cmd, and in contact it
runs ahead of the joints: the spring force K (qbar_a' - q_a') squeezes a
grasp), the robots' velocity (under ``robot_inertia``) and the
formulation's warm start.  ``sim.initial_state()`` builds one; a step's
result depends on its arguments only.  :meth:`QuasistaticSimulator.rollout`
steps through a sequence of commands.

The engine keeps one MultibodyPlant context as scratch space: every query
sets it to the q it is given first.  Keyed caches (the plant's set q, the
proximity pairs of the last q and tolerance) only skip work and never change
a result.  The engine is not thread-safe: use one engine per thread or
process.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Any, Iterable, Iterator, Mapping, Optional, Union

import numpy as np
from pydrake.math import RigidTransform
from pydrake.multibody.tree import JacobianWrtVariable, JointIndex

from quasistatic_drake.compile_notice import compile_notice
from quasistatic_drake.contact import ContactSet
from quasistatic_drake.contact_detection import ContactDetector, proximity_pairs
from quasistatic_drake.coupling import CoupledFormulation, Coupling
from quasistatic_drake.errors import CommandError, SolverLimitExceeded
from quasistatic_drake.formulations import registry
from quasistatic_drake.formulations.base import (Formulation, ModelFacts, ObjectFrame,
                                                 StepProblem, StepSolution)
from quasistatic_drake.joint_limits import joint_limit_velocity_bounds
from quasistatic_drake.manifold import body_motions
from quasistatic_drake.model import QuasistaticModel
from quasistatic_drake.results import (Contact, Rollout, StepDiagnostics, StepGradients,
                                       StepResult)
from quasistatic_drake.scenario import Scenario, ScenarioError
from quasistatic_drake.schema import SchemaError
from quasistatic_drake.state import State
from quasistatic_drake.step_gradients import GRADIENT_MODES, step_gradients
from quasistatic_drake.sticking import (loaded_contacts, MAX_SLIP_CORRECTION, MAX_SLIP_ITERATIONS,
                                        moving_together, point_jacobians, REACH, SLIP_TOL,
                                        slip_rows, STILL, stuck_contacts, touching_contacts)

__all__ = ["CommandError", "Contact", "QuasistaticSimulator", "Rollout", "State", "StepResult"]

MAX_RESOLVES = 3   # widenings of the detection tolerance in one step (_tolerance_for_sweep)
# [m] the largest error a turning body's linearised contacts may make in one step
# (_turn_limits): a point at R from the axis is off by about R theta^2 / 2.
LINEARISATION_ERROR = 5e-4
# a step that still penetrates deeper with its turns limited is solved again with half the
# limits, down to this fraction of them (_step)
MIN_TURN_SCALE = 0.125


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
        self._robot_names = frozenset(r.name for r in robots)
        self._object_v_idx = _concat([o.v_idx for o in objects])
        self._object_block = np.ix_(self._object_v_idx, self._object_v_idx)
        object_names = {o.name for o in objects}
        self._object_bodies = frozenset(name for name in self.model.moving_slot_by_name
                                        if name.split("::")[0] in object_names)
        self._limits = self._position_limits()
        followers = tuple(f for r in robots for f in r.followers)
        # coupled joints (URDF <mimic>): the step solves for the independent velocities
        self.coupling = Coupling.build(self.model.n_v, followers) if followers else None
        self.formulation: Formulation = self._formulation()
        # proximity pairs of the last q and tolerance asked: a step's q_next is the next
        # step's q.  Keyed by both, so it never changes a result.
        self._pairs_cache: Optional[tuple[bytes, list]] = None
        self._warm_up()

    # ----- binding public API ------------------------------------------------
    def default_positions(self) -> np.ndarray:
        """Return the scenario's initial configuration q (a copy)."""
        return self.model.q_default.copy()

    @property
    def robot_q_idx(self) -> np.ndarray:
        """Return the robots' entries of q, in the order of the reference q_ref."""
        return self._robot_q_idx.copy()

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

    def checked_command(self, v_cmd: Mapping[str, np.ndarray]) -> np.ndarray:
        """Return v_cmd as one array (robots in scenario order, those left out 0); CommandError."""
        return self._checked_command(v_cmd)

    def initial_state(self, q: Optional[np.ndarray] = None, q_ref: Optional[np.ndarray] = None,
                      robot_velocity: Optional[np.ndarray] = None,
                      warm_start: Any = None) -> State:
        """
        Return a checked State to start from (state.py).

        ``q``: the configuration (None: the scenario's initial one);
        ``q_ref``: the robots' reference (None: the robot positions of q, no
        preload); ``robot_velocity``: under the scenario's ``robot_inertia``,
        the robots' joint velocities (None: at rest); ``warm_start``: the
        formulation's (None: none).  Bad input raises CommandError.
        """
        q = self.model.q_default.copy() if q is None else self._checked_q(q)
        return State(q=q, q_ref=self._start_reference(q, q_ref),
                     robot_velocity=self._checked_robot_velocity(robot_velocity),
                     warm_start=self.formulation.checked_warm_start(warm_start))

    def checked_state(self, state: Any) -> State:
        """Return ``state`` after checking every part of it (CommandError naming the part)."""
        if not isinstance(state, State):
            raise CommandError(
                f"the state must be a quasistatic_drake.State, got {type(state).__name__}. "
                "step(q, v_cmd, q_ref=...) is the old form. Fix: state = "
                "sim.initial_state(q, q_ref=q_ref); result = sim.step(state, v_cmd); "
                "state = result.state_next.")
        q = self._checked_q(state.q)
        self._start_reference(q, state.q_ref)
        self._checked_robot_velocity(state.robot_velocity)
        self.formulation.checked_warm_start(state.warm_start)
        return state

    def step(self, state: State, v_cmd: Optional[Mapping[str, np.ndarray]] = None, *,
             object_forces: Optional[Mapping[str, np.ndarray]] = None,
             gradients: Union[bool, str] = False, **old_keywords) -> StepResult:
        """
        Advance the state by one time step h under the robots' velocity commands.

        ``result = sim.step(state, v_cmd)``, then ``state = result.state_next``
        (state.py: the state carries q, the robots' reference, their velocity
        and the warm start).  ``v_cmd`` maps robot names to joint velocities
        (robots left out hold still).  ``object_forces`` maps object names to
        generalized forces applied to them over the step (one per object
        velocity, as gravity's; [N, N m]).  The result depends on the
        arguments only; the state given is never modified.  Bad input raises
        CommandError and changes nothing, as does ``SolverLimitExceeded`` (the
        problem exceeds the solver's licence, as the MIQP's ``MiqpTooLarge``;
        its message gives the fixes).  A failed solve, or any other failure
        inside the step (status "error": whatever was raised but
        KeyboardInterrupt), returns a result whose ``state_next`` keeps q and
        the reference: the engine stays usable.  ``gradients=True`` also fills
        ``result.gradients`` (dq_next/dq, /dv_cmd, /dq_ref; step_gradients.py)
        on a successful step; ``gradients="commands"`` the last two only
        (qsim's kBOnly); a formulation that gives none is a CommandError.
        """
        if old_keywords:
            raise CommandError(
                f"step() got {sorted(old_keywords)}: the reference, warm start and robot "
                "velocity are parts of the State now. Fix: state = sim.initial_state(q, "
                "q_ref=..., robot_velocity=..., warm_start=...); result = sim.step(state, "
                "v_cmd); state = result.state_next.")
        start = time.perf_counter()
        state = self.checked_state(state)
        q, q_ref = np.array(state.q), np.array(state.q_ref)
        v_bar = self._checked_command({} if v_cmd is None else v_cmd)
        warm_start = state.warm_start
        tau_ext = self._checked_object_forces(object_forces)
        v_a = self._checked_robot_velocity(state.robot_velocity)
        self.check_gradients(gradients)
        try:
            return self._step(q, q_ref, v_bar, warm_start, start, tau_ext, gradients, v_a)
        except SolverLimitExceeded:
            raise
        except (Exception, SystemExit) as err:   # noqa: B902 - nothing may end the process
            return StepResult(
                state_next=state, status="error",
                contact_set=ContactSet.empty(self.model.n_v, self.scenario.friction_directions),
                forces_W=np.zeros((0, 3)),
                diagnostics=StepDiagnostics(step_time=time.perf_counter() - start,
                                            error=f"{type(err).__name__}: {err}"))

    def check_gradients(self, gradients: Any) -> None:
        """Raise CommandError unless :meth:`step` can give the ``gradients`` asked for."""
        if not any(gradients is mode or (isinstance(gradients, str) and gradients == mode)
                   for mode in GRADIENT_MODES):
            raise CommandError(f"gradients must be True, False or 'commands', got "
                               f"{gradients!r}. Fix: gradients=True for all three "
                               "derivatives, 'commands' for dq_next_dv_cmd and "
                               "dq_next_dq_ref only.")
        if gradients and not self.formulation.gives_gradients:
            raise CommandError(
                f"gradients=True: formulation {self.formulation.name!r} gives no step "
                f"gradients here. Fix: {self.formulation.gradients_fix}.")
        if gradients and self.scenario.robot_inertia:
            raise CommandError("gradients: under robot_inertia the step depends on the "
                               "robots' velocity too, and its derivative in that velocity is "
                               "not computed, so chained gradients would be wrong. Fix: "
                               "robot_inertia: false, or gradients=False.")

    def rollout(self, state: State, commands: Iterable[Mapping[str, np.ndarray]],
                gradients: Union[bool, str] = False) -> Rollout:
        """
        Step from ``state`` through ``commands``, one ``v_cmd`` mapping per step.

        Each step starts from the last one's ``state_next``.  A failed step
        keeps q, and the rollout goes on from there.  ``gradients`` is passed
        to every :meth:`step`.  A bad command raises CommandError naming its
        index; nothing is returned.
        """
        state = self.checked_state(state)
        results = list(self.rollout_steps(state, commands, gradients))
        states = [state] + [r.state_next for r in results]
        velocities = [s.robot_velocity for s in states]
        return Rollout(q=np.array([s.q for s in states]),
                       q_ref=np.array([s.q_ref for s in states]), results=tuple(results),
                       final_state=states[-1],
                       robot_velocity=None if velocities[0] is None else np.array(velocities))

    def rollout_steps(self, state: State, commands: Iterable[Mapping[str, np.ndarray]],
                      gradients: Union[bool, str] = False) -> Iterator[StepResult]:
        """
        Yield the StepResults of :meth:`rollout` one at a time, as they are taken.

        The same chaining as :meth:`rollout`; a caller that stops early (or
        sees an exception, such as ``SolverLimitExceeded``) keeps the steps
        it was given.  A bad command raises CommandError naming its index.
        """
        state = self.checked_state(state)
        for k, v_cmd in enumerate(commands):
            try:
                result = self.step(state, v_cmd, gradients=gradients)
            except CommandError as err:
                raise CommandError(f"commands[{k}]: {err}") from err
            state = result.state_next
            yield result

    def _step(self, q: np.ndarray, q_ref: np.ndarray, v_bar: np.ndarray, warm_start: Any,
              start: float, tau_ext: Optional[np.ndarray] = None,
              gradients: Union[bool, str] = False,
              v_a: Optional[np.ndarray] = None) -> StepResult:
        """Detect, solve and integrate one step from checked inputs (:meth:`step`)."""
        formulation = self.formulation
        tolerance = self.scenario.contact_detection_tolerance
        self.model.set_positions(q)
        problem = self._problem(q, q_ref, v_bar, tau_ext, v_a)
        for resolves in range(MAX_RESOLVES + 1):
            pairs = self._pairs(q, tolerance)
            self.model.set_positions(q)
            contacts = formulation.contacts(self.detector.detect(tolerance, pairs))
            attempt = self._solve(problem, contacts, warm_start)
            if attempt.solution.v is None:
                return self._failure(q, q_ref, v_a, contacts, attempt, warm_start, start)
            wider = self._tolerance_for_sweep(attempt.solution.v, tolerance)
            if wider is None or resolves == MAX_RESOLVES:
                break
            tolerance = wider
        q_next, loaded, slip = self._advanced(q, problem, contacts, attempt.solution)
        scale = 1.0
        while self._deepened(pairs, q_next) and scale >= MIN_TURN_SCALE:
            self.model.set_positions(q)
            limited_problem = self._turn_limited(problem, scale)
            limited = self._solve(limited_problem, contacts, warm_start)
            if limited.solution.v is None:
                break
            attempt = replace(limited, rotation_limited=True, turn_scale=scale)
            problem = limited_problem        # the limits only shrink: halving it is the same
            q_next, loaded, slip = self._advanced(q, problem, contacts, limited.solution)
            scale *= 0.5
        solution = attempt.solution
        derivatives = (step_gradients(self, q, q_ref, v_bar, tau_ext, problem, contacts,
                                      attempt, tolerance, with_q=gradients is True,
                                      loaded=loaded, slip=slip)
                       if gradients else None)
        q_ref_next, reference_limited = formulation.next_reference(
            problem, q_next[self._robot_q_idx], solution)
        state_next = State(q=q_next, q_ref=q_ref_next,
                           robot_velocity=None if v_a is None else solution.v[self._robot_v_idx],
                           warm_start=solution.warm_start_next)
        return StepResult(
            state_next=state_next, status=solution.status, contact_set=contacts,
            **self._impulse_fields(solution.impulses_W),
            gradients=None if derivatives is None else StepGradients(
                derivatives.dq_next_dq, derivatives.dq_next_dv_cmd, derivatives.dq_next_dq_ref,
                derivatives.degenerate),
            diagnostics=StepDiagnostics(
                v=solution.v, solution=solution, solve_time=attempt.solve_time,
                step_time=time.perf_counter() - start, min_phi_next=self._min_phi(q_next),
                recovery_fraction=attempt.recovery_fraction,
                reference_limited=reference_limited, resolves=resolves,
                rotation_limited=attempt.rotation_limited, slip_correction=slip))

    # ----- the step ----------------------------------------------------------
    def _problem(self, q: np.ndarray, q_ref: np.ndarray, v_bar: np.ndarray,
                 tau_ext: Optional[np.ndarray] = None,
                 v_a: Optional[np.ndarray] = None) -> StepProblem:
        """Gather the formulation's data at q (the model must be at q)."""
        plant, context = self.model.plant, self.model.plant_context
        v_lower, v_upper = self._velocity_bounds(q)
        J_w, J_v, _ = self.model.body_jacobians()
        tau_u = plant.CalcGravityGeneralizedForces(context)[self._object_v_idx]
        M = plant.CalcMassMatrix(context)
        return StepProblem(
            M_a=None if v_a is None else M[np.ix_(self._robot_v_idx, self._robot_v_idx)],
            v_a=v_a,
            q_a=q[self._robot_q_idx], q_ref=q_ref, v_cmd=v_bar, v_lower=v_lower,
            v_upper=v_upper, M_u=M[self._object_block],
            tau_u=tau_u if tau_ext is None else tau_u + tau_ext,
            J_w=J_w, J_v=J_v, body_radii=self.model.moving_radii,
            object_frames=(self._object_frames() if self.formulation.needs_object_frames
                           else ()))

    def _object_frames(self) -> tuple[ObjectFrame, ...]:
        """Return each object's reported body's orientation and COM Jacobian (model at q)."""
        plant, context = self.model.plant, self.model.plant_context
        world = plant.world_frame()
        frames = []
        for info in self.model.objects:
            body = plant.GetBodyByName(info.base_body, info.instance)
            J = plant.CalcJacobianSpatialVelocity(
                context, JacobianWrtVariable.kV, body.body_frame(), body.default_com(),
                world, world)
            frames.append(ObjectFrame(
                R_WB=plant.EvalBodyPoseInWorld(context, body).rotation().matrix(),
                J_com=J[:, info.v_idx]))
        return tuple(frames)

    def _solve(self, problem: StepProblem, contacts: ContactSet, warm_start: Any) -> "_Attempt":
        """Solve the formulation; if that fails with penetration, recover partially."""
        solution = self.formulation.solve(problem, contacts, warm_start)
        if (solution.v is None and np.any(contacts.phi < 0.0)
                and self.formulation.recovers_from(solution)):
            return self._partial_recovery(problem, contacts, warm_start, solution)
        return _Attempt(solution, solution.solve_time)

    def _partial_recovery(self, problem: StepProblem, contacts: ContactSet, warm_start: Any,
                          failed: StepSolution) -> "_Attempt":
        """
        Solve again, working off the largest fraction alpha of every penetration possible.

        A penetrating contact (phi < 0) asks for a separating velocity -phi/h,
        and that can be impossible: the joints' velocity limits (a finger 16 mm
        inside the table at h = 0.01 s may move 2.1 mm), or two demands that
        contradict each other.  With phi scaled by alpha in [0, 1] the step
        asks to work off the fraction alpha; alpha = 0 keeps "no deeper
        penetration" and is always feasible (v' = 0 satisfies it).  alpha is
        bisected the formulation's ``recovery_bisections`` times (6 for the
        QP, 3 for the costlier MIQP), so the rest is worked off in later
        steps.  Returns ``failed`` if even alpha = 0 fails.
        """
        def solve(alpha: float) -> StepSolution:
            scaled = replace(contacts, phi=np.where(contacts.phi < 0.0, alpha * contacts.phi,
                                                    contacts.phi))
            return self.formulation.solve(problem, scaled, warm_start)

        best = solve(0.0)
        spent = failed.solve_time + best.solve_time
        if best.v is None:
            return _Attempt(failed, spent)
        low, high = 0.0, 1.0
        for _ in range(self.formulation.recovery_bisections):
            alpha = 0.5 * (low + high)
            trial = solve(alpha)
            spent += trial.solve_time
            if trial.v is None:
                high = alpha
            else:
                low, best = alpha, trial
        return _Attempt(best, spent, recovery_fraction=low)

    def _deepened(self, pairs: list, q_next: np.ndarray) -> bool:
        """
        Return whether a pair penetrates deeper at q_next than at q (by LINEARISATION_ERROR).

        The contact rows are linear in v, but bodies turn: a box tipping 0.48
        rad in one step ended 11.5 mm inside the table, an arm link swung
        through it.  Such a step is solved again with :meth:`_turn_limited`.
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

    def _turn_limited(self, problem: StepProblem, scale: float = 1.0) -> StepProblem:
        """Return the problem with each turning velocity bounded by scale * _turn_limits."""
        limit = scale * self._turn_limits()
        return replace(problem, v_lower=np.maximum(problem.v_lower, -limit),
                       v_upper=np.minimum(problem.v_upper, limit))

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

    def _advanced(self, q: np.ndarray, problem: StepProblem, contacts: ContactSet,
                  solution: StepSolution) -> tuple:
        """
        Return (q_next, the loaded contacts, the slip correction) of a solved step.

        The last two are None where nothing turns (``_turns``) or the
        formulation keeps no contacts stuck.

        q_next integrates v' plus the correction that keeps the stuck contacts
        stuck (``sticking.py``).
        """
        loaded, slip = None, None
        if self._corrects(problem, solution.v):
            loaded = self._loaded(contacts, solution)
            slip = self._slip_correction(q, problem, contacts, solution.v, loaded)
        self.model.set_positions(q)
        q_next = self._integrate(q, solution.v if slip is None else solution.v + slip)
        return q_next, loaded, slip

    def _loaded(self, contacts: ContactSet, solution: StepSolution) -> np.ndarray:
        """Return the mask of the loaded contacts that touch an object (``sticking.py``)."""
        return loaded_contacts(contacts, solution.impulses_W) & self._touches_object(contacts)

    def _touches_object(self, contacts: ContactSet) -> np.ndarray:
        """Return the mask of contacts one of whose bodies is an object's."""
        objects = self._object_bodies
        return np.array([a in objects or b in objects
                         for a, b in zip(contacts.body_a, contacts.body_b)], dtype=bool)

    def _slip_correction(self, q: np.ndarray, problem: StepProblem, contacts: ContactSet,
                         v: np.ndarray, loaded: np.ndarray) -> Optional[np.ndarray]:
        """
        Return Delta (n_v, objects only) that keeps the loaded contacts on v' (sticking.py).

        For a step that ``_corrects``.  None when no ``loaded`` contact sticks
        or their material points already end the step where the rows put
        them (within SLIP_TOL).  Gauss-Newton
        on the material points' displacements over q -> q + h N(q) (v' +
        Delta), measured with the bodies' poses at both ends.  The model is
        left at an arbitrary q.
        """
        stuck = stuck_contacts(contacts, loaded, v)
        if not stuck.any():
            return None
        slot = self.model.moving_slot_by_name
        slots_A = np.array([slot.get(name, -1) for name in contacts.body_a], dtype=int)
        slots_B = np.array([slot.get(name, -1) for name in contacts.body_b], dtype=int)
        still = np.append(self._still_bodies(problem, v), True)      # row -1: a fixed body
        stuck &= ~(still[slots_A] & still[slots_B])       # two bodies at rest do not slip
        if not stuck.any():
            return None
        self.model.set_positions(q)
        J_w, J_v = _with_fixed(problem.J_w), _with_fixed(problem.J_v)   # row -1: a fixed body
        omega = J_w @ v
        together = moving_together(contacts, stuck, omega[slots_A], omega[slots_B], self.h)
        rows = slip_rows(contacts, stuck, together, v, self._object_v_idx, self.h)
        used = np.unique(np.concatenate([slots_A[stuck], slots_B[stuck]]))
        used = used[used >= 0]
        row = np.full(len(self.model.moving_bodies) + 1, -1)   # slot -> row of the poses
        row[used] = np.arange(len(used))
        rows_A, rows_B = row[slots_A[stuck]], row[slots_B[stuck]]   # -1: a fixed body
        N = self.model.plant.MakeVelocityToQDotMap(self.model.plant_context).toarray()
        start = _with_world(*self.model.body_poses(used))
        points_A, points_B = contacts.point_A_W[stuck], contacts.point_B_W[stuck]
        local_A = _in_body(points_A, rows_A, *start)
        local_B = _in_body(points_B, rows_B, *start)
        gap = points_B - points_A
        delta = np.zeros(self.model.n_v)
        for iteration in range(MAX_SLIP_ITERATIONS):
            self.model.set_positions(self._integrated(q, N, v + delta))
            R, p = _with_world(*self.model.body_poses(used))
            relative = (_in_world(local_B, rows_B, R, p) - _in_world(local_A, rows_A, R, p)
                        - gap)
            slip = rows.slip(relative, delta[self._object_v_idx])
            if iteration == 0:
                if np.max(np.abs(slip), initial=0.0) <= SLIP_TOL:
                    return None
                touching = (touching_contacts(contacts, v, self.h)
                            & self._touches_object(contacts))
                u = self._object_v_idx
                ends = (point_jacobians(J_v[slots][:, :, u], J_w[slots][:, :, u],
                                        np.einsum("kij,kj->ki", R[rows_X], local))
                        for slots, local, rows_X in ((slots_A[stuck], local_A, rows_A),
                                                     (slots_B[stuck], local_B, rows_B)))
                rows = rows.holding(rows.material_jacobian(*ends, self.h), contacts, stuck,
                                    touching, u, self.h)
                slip = rows.slip(relative, delta[self._object_v_idx])
            change = rows.change(slip)
            delta[self._object_v_idx] += change
            if self.h * np.max(np.abs(change), initial=0.0) <= SLIP_TOL:
                break
        return None if self._largest_shift(problem, delta) > MAX_SLIP_CORRECTION else delta

    def _corrects(self, problem: StepProblem, v: np.ndarray) -> bool:
        """
        Return whether a step of v gets the slip correction (``sticking.py``).

        Not where the formulation keeps no contacts stuck, nor where v turns
        nothing enough for a second-order slip of SLIP_TOL over REACH: where no
        velocity that turns a body moves (prismatic robots and objects that
        translate, as two pads lifting a box), the step's motion is linear in
        v and its integration exact.  The step gradients keep the step's
        answer (``step_gradients._slip_derivative``).
        """
        if not self.formulation.keeps_contacts_stuck:
            return False
        turning = np.abs(problem.J_w).max(axis=(0, 1), initial=0.0) > 0.0
        rate = self.h * np.max(np.abs(v[turning]), initial=0.0)
        return rate * rate * REACH > SLIP_TOL

    def _still_bodies(self, problem: StepProblem, v: np.ndarray) -> np.ndarray:
        """Return which moving bodies v moves by at most STILL in the step (any point)."""
        return self._largest_shifts(problem, v) <= STILL

    def _largest_shifts(self, problem: StepProblem, v: np.ndarray) -> np.ndarray:
        """Return how far h v moves each body's geometry at most (``body_motions``)."""
        shift, turn = body_motions(problem.J_w, problem.J_v, self.model.moving_radii, v, self.h)
        return np.linalg.norm(shift, axis=1) + turn

    def _largest_shift(self, problem: StepProblem, delta: np.ndarray) -> float:
        """Return the most any body's geometry moves under h delta (the problem's Jacobians)."""
        return float(np.max(self._largest_shifts(problem, delta), initial=0.0))

    def _integrated(self, q: np.ndarray, N: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Return q + h N v with unit quaternions (N = N(q): ``_integrate`` with N given)."""
        q_next = q + self.h * (N @ v)
        for s in self.model.quaternion_starts:
            quaternion = q_next[s:s + 4]
            quaternion /= math.sqrt(quaternion @ quaternion)
        return q_next

    def _integrate(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """q_next = q + h N(q) v, then unit quaternions."""
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

    def _failure(self, q, q_ref, v_a, contacts, attempt: "_Attempt", warm_start,
                 start) -> StepResult:
        """Return the result of a failed solve: q, the reference, v_a and the warm start kept."""
        return StepResult(state_next=State(q, q_ref, v_a, warm_start),
                          status=attempt.solution.status, contact_set=contacts,
                          **self._impulse_fields(np.zeros((contacts.n_c, 3))),
                          diagnostics=StepDiagnostics(
                              solution=attempt.solution, solve_time=attempt.solve_time,
                              step_time=time.perf_counter() - start))

    def _impulse_fields(self, impulses_W: np.ndarray) -> dict:
        """Return forces [N] (impulse / h), or scaled impulses if the formulation has them."""
        if self.formulation.scaled_impulses:
            return {"forces_W": None, "scaled_impulses_W": impulses_W}
        return {"forces_W": impulses_W / self.h}

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
        if not self.formulation.solves_at_warm_up:
            self.min_signed_distance(self.model.q_default)
            return
        self.step(self.initial_state(), {})

    def _formulation(self) -> Formulation:
        """Build the scenario's formulation (formulations/registry.py) from the model's facts."""
        scenario, robots = self.scenario, self.model.robots
        self.model.set_positions(self.model.q_default)
        M_u = self.model.plant.CalcMassMatrix(self.model.plant_context)[self._object_block]
        coupling = self.coupling
        name = scenario.formulation
        try:
            cls = registry.formulation_class(name)
        except KeyError as err:
            raise ScenarioError(f"{scenario.source}: formulation: {err.args[0]}") from None
        facts = ModelFacts(
            h=self.h, n_v=self.model.n_v if coupling is None else len(coupling.kept),
            object_v_idx=(self._object_v_idx if coupling is None
                          else coupling.reduced(self._object_v_idx)),
            robot_v_idx=(self._robot_v_idx if coupling is None
                         else coupling.reduced(self._robot_v_idx)),
            stiffness=np.concatenate([r.stiffness for r in robots]) if robots else np.zeros(0),
            max_lead=np.concatenate([r.max_lead for r in robots]) if robots else np.zeros(0),
            object_mass_default=M_u, object_weight=self._weight_of_objects(),
            quasi_dynamic=scenario.quasi_dynamic,
            quasi_static_inertia_ratio=scenario.quasi_static_inertia_ratio,
            detection_tolerance=scenario.contact_detection_tolerance,
            robot_names=tuple(r.name for r in robots),
            robot_sizes=tuple(len(r.v_idx) for r in robots),
            object_names=tuple(o.name for o in self.model.objects),
            object_sizes=tuple(len(o.v_idx) for o in self.model.objects),
            object_masses=self._object_masses(),
            robot_damping=self._robot_damping(cls),
            plane_normal=self.model.motion_plane_normal, gravity=np.array(scenario.gravity),
            object_frames_default=self._object_frames() if cls.needs_object_frames else ())
        try:
            formulation = cls(facts, scenario.settings(name))
            return formulation if coupling is None else CoupledFormulation(formulation, coupling)
        except SchemaError as err:   # a key "scenario.<key>" is a top-level key
            key = (err.key[len("scenario."):] if err.key.startswith("scenario.")
                   else f"{name}.{err.key}")
            raise ScenarioError(f"{scenario.source}: {key}: {err.message}") from None

    def _robot_damping(self, cls: type) -> Optional[np.ndarray]:
        """
        Return D = 2 zeta sqrt(K M_ii) per robot joint under robot_inertia (None without).

        M_ii is the diagonal of the robots' mass matrix at the initial q, as
        the impedance controller of benchmarks/mbp_reference.py sets it.
        """
        scenario = self.scenario
        if not scenario.robot_inertia:
            return None
        if not cls.takes_robot_inertia:
            raise ScenarioError(f"{scenario.source}: robot_inertia: formulation "
                                f"{scenario.formulation!r} does not take the robots' inertia. "
                                "Fix: formulation: qp, or robot_inertia: false.")
        if self.coupling is not None:
            raise ScenarioError(f"{scenario.source}: robot_inertia: the robots have coupled "
                                "joints (<mimic>), whose inertia the step does not reduce. "
                                "Fix: robot_inertia: false, or command the joints apart.")
        M = self.model.plant.CalcMassMatrix(self.model.plant_context)
        diagonal = np.diag(M)[self._robot_v_idx]
        ratios = np.concatenate([np.full(len(r.v_idx), 1.0 if spec.damping_ratio is None
                                         else spec.damping_ratio)
                                 for r, spec in zip(self.model.robots, scenario.robots)])
        stiffness = np.concatenate([r.stiffness for r in self.model.robots])
        return 2.0 * ratios * np.sqrt(stiffness * diagonal)

    def _checked_robot_velocity(self, robot_velocity) -> Optional[np.ndarray]:
        """Return v_a under robot_inertia (zeros for None); refuse one without it."""
        if not self.scenario.robot_inertia:
            if robot_velocity is not None:
                raise CommandError("robot_velocity: only a scenario with robot_inertia: true "
                                   "has robot velocities as state. Fix: pass "
                                   "robot_velocity=None, or set robot_inertia: true.")
            return None
        if robot_velocity is None:
            return np.zeros(len(self._robot_v_idx))
        return self._checked_vector(robot_velocity, len(self._robot_v_idx), "robot_velocity",
                                    self._robot_joint_labels())

    def _weight_of_objects(self) -> float:
        """Return the objects' total weight |g| sum(m) [N]."""
        return float(np.linalg.norm(self.scenario.gravity)) * sum(self._object_masses())

    def _object_masses(self) -> tuple[float, ...]:
        """Return each object's mass, all the bodies of its model instance [kg]."""
        plant = self.model.plant
        return tuple(sum(plant.get_body(b).default_mass()
                         for b in plant.GetBodyIndices(o.instance)) for o in self.model.objects)

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
        broken = self.coupling.violation(q) if self.coupling is not None else []
        if broken:
            raise CommandError(f"q breaks the model's joint coupling (<mimic>): {broken}. Fix: "
                               "set each coupled joint from its leader, or start from "
                               "default_positions().")
        return q

    def _checked_command(self, v_cmd: Mapping[str, np.ndarray]) -> np.ndarray:
        v_bar = np.zeros(len(self._robot_v_idx))
        for _, rows, value in self._robot_vectors(v_cmd, "v_cmd", "velocity arrays"):
            v_bar[rows] = value
        return v_bar

    def _robot_vectors(self, values, what: str, kind: str) -> list[tuple[str, slice, np.ndarray]]:
        """Return (robot, its rows among the commanded joints, checked value) per given robot."""
        if not isinstance(values, Mapping):
            raise CommandError(f"{what} must map robot names to {kind}, got "
                               f"{type(values).__name__}.")
        unknown = sorted(set(values) - self._robot_names)
        if unknown:
            raise CommandError(f"{what} names unknown robot(s) {unknown}. "
                               f"Robots in this scenario: {sorted(self._robot_names)}.")
        out, offset = [], 0
        for robot in self.model.robots:
            n = len(robot.joint_names)
            if robot.name in values:
                out.append((robot.name, slice(offset, offset + n), self._checked_vector(
                    values[robot.name], n, f"{what}[{robot.name!r}]", robot.joint_names)))
            offset += n
        return out

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

    def velocity_for_positions(self, state: State,
                               q_cmd: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """
        Return the velocity commands that bring the robots' reference to ``q_cmd`` in one step.

        A position command sets the reference directly (qsim's commanded
        positions): v_cmd = (q_cmd - base) / h, where base is what the
        formulation adds h v_cmd to (``Formulation.reference_base``: the spring
        reference under the QP, the joints' positions under the MIQP).  Robots
        left out of ``q_cmd`` get no entry.
        """
        state = self.checked_state(state)
        base = self.formulation.reference_base(np.array(state.q)[self._robot_q_idx],
                                               np.array(state.q_ref))
        return {robot: (target - base[rows]) / self.h for robot, rows, target in
                self._robot_vectors(q_cmd, "q_cmd", "position arrays")}

    def _checked_object_forces(self, forces) -> Optional[np.ndarray]:
        """Return the objects' applied generalized forces in object-velocity order, or None."""
        if not forces:
            return None
        if not isinstance(forces, Mapping):
            raise CommandError("object_forces must map object names to generalized forces, "
                               f"got {type(forces).__name__}.")
        objects = {o.name for o in self.model.objects}
        unknown = sorted(set(forces) - objects)
        if unknown:
            raise CommandError(f"object_forces names unknown object(s) {unknown}. Objects in "
                               f"this scenario: {sorted(objects)}.")
        tau, offset = np.zeros(len(self._object_v_idx)), 0
        for obj in self.model.objects:
            n = len(obj.v_idx)
            if obj.name in forces:
                tau[offset:offset + n] = self._checked_vector(
                    forces[obj.name], n, f"object_forces[{obj.name!r}]",
                    [f"v[{i}]" for i in obj.v_idx])
            offset += n
        return tau

    def _robot_joint_labels(self) -> list[str]:
        """Return "robot/joint" per robot joint, scenario order (for messages)."""
        return [f"{r.name}/{j}" for r in self.model.robots for j in r.joint_names]

    def _start_reference(self, q: np.ndarray, q_ref: Optional[np.ndarray]) -> np.ndarray:
        if q_ref is not None:
            return self._checked_vector(q_ref, len(self._robot_q_idx), "q_ref",
                                        self._robot_joint_labels())
        return q[self._robot_q_idx].copy()


_NO_SHIFT = np.zeros(3)


def _with_fixed(J: np.ndarray) -> np.ndarray:
    """Return per-body Jacobians (n_b x 3 x n_v) with a zero row appended: row -1, a fixed body."""
    return np.concatenate([J, np.zeros((1,) + J.shape[1:])])


def _with_world(R: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return the poses with the world's (identity) appended: row -1 is a fixed body."""
    return np.concatenate([R, np.eye(3)[None]]), np.concatenate([p, np.zeros((1, 3))])


def _in_body(points_W: np.ndarray, rows: np.ndarray, R: np.ndarray,
             p: np.ndarray) -> np.ndarray:
    """Return points in their bodies' frames (``_with_world`` poses, a row per point)."""
    return np.einsum("kji,kj->ki", R[rows], points_W - p[rows])


def _in_world(local: np.ndarray, rows: np.ndarray, R: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Return body-frame points in the world (``_with_world`` poses, a row per point)."""
    return np.einsum("kij,kj->ki", R[rows], local) + p[rows]


@dataclass(frozen=True)
class _Attempt:
    """A formulation's solution in the step loop, with what the loop did to get it."""

    solution: StepSolution
    solve_time: float                  # every solve's time, the recovery solves' included
    recovery_fraction: float = 1.0     # the fraction of each penetration worked off
    rotation_limited: bool = False     # solved with the bodies' turn bounded
    turn_scale: float = 1.0            # by this fraction of _turn_limits


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts).astype(int) if parts else np.zeros(0, dtype=int)
