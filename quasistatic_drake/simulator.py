"""
QuasistaticSimulator: the time-stepping engine.  It needs no Diagram.

The state is explicit (state.py): ``result = sim.step(state, v_cmd)``, then
``state = result.state_next``.  It holds q, the robots' reference (under
the QP the spring reference qbar_a of Pang & Tedrake 2021's impedance
model: each step advances it, qbar_a' = qbar_a + h v_cmd, and in contact it
runs ahead of the joints: the spring force K (qbar_a' - q_a') squeezes a
grasp), the robots' velocity (under ``robot_inertia``) and the
formulation's warm start (the QP's: its contacts' last impulses, which
bound the next step's friction).  ``sim.initial_state()`` builds one; a
step's result depends on its arguments only.

The engine is three parts: the input checks (``inputs.py``), the model's
facts and each step's data (``step_data.py``), and the step itself
(``step_loop.py``: detection, the scenario's formulation, integration; the
same algorithm for every formulation).  This class wires them and is the
public API.

The engine keeps one MultibodyPlant context as scratch space: every query
sets it to the q it is given first.  Keyed caches (the plant's set q, the
proximity pairs of the last q and tolerance) only skip work and never change
a result.  The engine is not thread-safe: use one engine per thread or
process.
"""

from __future__ import annotations

import time
from typing import Any, Iterable, Iterator, Mapping, Optional, Union

import numpy as np
from pydrake.math import RigidTransform

from quasistatic_drake.compile_notice import compile_notice
from quasistatic_drake.contact import ContactSet
from quasistatic_drake.contact_detection import ContactDetector, proximity_pairs
from quasistatic_drake.threads import one_thread
from quasistatic_drake.errors import CommandError, SolverLimitExceeded
from quasistatic_drake.formulations.base import Formulation
from quasistatic_drake.inputs import InputChecks
from quasistatic_drake.model import QuasistaticModel
from quasistatic_drake.results import Contact, Rollout, StepDiagnostics, StepResult
from quasistatic_drake.scenario import Scenario
from quasistatic_drake.state import State
from quasistatic_drake.step_data import StepData
from quasistatic_drake.step_gradients import GradientRequest, Tangents
from quasistatic_drake.step_loop import StepLoop

__all__ = ["CommandError", "Contact", "QuasistaticSimulator", "Rollout", "State", "StepResult"]


class QuasistaticSimulator:
    """The quasistatic engine for a :class:`Scenario` (see module docstring)."""

    def __init__(self, scenario: Scenario):
        """Build the model, the detector and the formulation, and take one warm-up step."""
        self.scenario = scenario
        self.model = QuasistaticModel(scenario)
        self.h = scenario.time_step
        self.detector = ContactDetector(self.model, scenario.friction_directions)
        self.data = StepData(scenario, self.model)
        self.coupling = self.data.coupling
        self.checks = InputChecks(self.model, self.coupling, scenario.robot_inertia,
                                  self.data.limits)
        self.formulation: Formulation = self.data.formulation()
        self.loop = StepLoop(scenario, self.model, self.detector, self.data, self.formulation)
        self._warm_up()

    # ----- binding public API ------------------------------------------------
    def default_positions(self) -> np.ndarray:
        """Return the scenario's initial configuration q (a copy)."""
        return self.model.q_default.copy()

    @property
    def robot_q_idx(self) -> np.ndarray:
        """Return the robots' entries of q, in the order of the reference q_ref."""
        return self.data.robot_q_idx.copy()

    def robot_joint_names(self, robot: str) -> list[str]:
        """Return the actuated joints of a robot, in the order of its v_cmd entries."""
        return list(self.checks.robot(robot).joint_names)

    def robot_positions(self, q: np.ndarray, robot: str) -> np.ndarray:
        """Return the joint positions of a robot, in ``robot_joint_names`` order."""
        return self.checks.positions(q)[self.checks.robot(robot).q_idx].copy()

    def object_pose(self, q: np.ndarray, object: str) -> RigidTransform:
        """Return the world pose of an object's base body at q."""
        info = self.checks.object(object)
        self.model.set_positions(self.checks.positions(q))
        plant = self.model.plant
        body = plant.GetBodyByName(info.base_body, info.instance)
        return plant.EvalBodyPoseInWorld(self.model.plant_context, body)

    def min_signed_distance(self, q: np.ndarray) -> float:
        """
        Return the smallest signed distance over all collision pairs at q (inf if none).

        Drake's distance of each pair; a pair Drake cannot measure (touching
        boxes, contact_detection.drake_query) takes its manifold's deepest point.
        """
        self.model.set_positions(self.checks.positions(q))
        pairs = proximity_pairs(self.model, np.inf)
        unmeasured = [p for p in pairs if not np.isfinite(p.distance)]
        measured = [p.distance for p in pairs if np.isfinite(p.distance)]
        if unmeasured:
            measured.extend(self.detector.detect(np.inf, unmeasured).phi)
        return float(min(measured, default=np.inf))

    def checked_positions(self, q) -> np.ndarray:
        """Return q as a float array after checking its size and values (CommandError)."""
        return self.checks.positions(q)

    def checked_command(self, v_cmd: Mapping[str, np.ndarray]) -> np.ndarray:
        """Return v_cmd as one array (robots in scenario order, those left out 0); CommandError."""
        return self.checks.command(v_cmd)

    def initial_state(self, q: Optional[np.ndarray] = None, q_ref: Optional[np.ndarray] = None,
                      robot_velocity: Optional[np.ndarray] = None,
                      warm_start: Any = None) -> State:
        """
        Return a checked State to start from (state.py).

        ``q``: the configuration (None: the scenario's initial one);
        ``q_ref``: the robots' reference (None: the robot positions of q, no
        preload); ``robot_velocity``: under the scenario's ``robot_inertia``,
        the robots' joint velocities (None: at rest); ``warm_start``: the
        formulation's (None: the one of the scene at rest at q, for the QP
        its contacts' impulses under zero commands, which bound the first
        step's friction).  Bad input raises CommandError.
        """
        q = self.model.q_default.copy() if q is None else self.checks.positions(q)
        state = State(q=q, q_ref=self.checks.reference(q, q_ref),
                      robot_velocity=self.checks.robot_velocity(robot_velocity),
                      warm_start=self.formulation.checked_warm_start(warm_start))
        if warm_start is None:
            state = state.with_warm_start(self.loop.settled_warm_start(q))
        return state

    def checked_state(self, state: Any) -> State:
        """Return ``state`` after checking every part of it (CommandError naming the part)."""
        return self.checks.state(state, self.formulation)

    def step(self, state: State, v_cmd: Optional[Mapping[str, np.ndarray]] = None, *,
             object_forces: Optional[Mapping[str, np.ndarray]] = None,
             gradients: Union[bool, str, np.ndarray, Tangents] = False,
             **old_keywords) -> StepResult:
        """
        Advance the state by one time step h under the robots' velocity commands.

        ``result = sim.step(state, v_cmd)``, then ``state = result.state_next``
        (state.py).  ``v_cmd`` maps robot names to joint velocities (robots
        left out hold still).  ``object_forces`` maps object names to
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
        (qsim's kBOnly); ``gradients=S`` (an n_q x k array) the last two and
        ``dq_next_dq_along`` = dq_next/dq @ S in place of dq_next/dq (forward
        mode: what chaining k sensitivities through a rollout needs, at 2k
        detector runs instead of 2 n_q); ``gradients=Tangents(dq, dv_cmd,
        dq_ref)`` (columns in q, the commands and the reference) only
        ``dq_next_tangents``, dq_next along each (a Jacobian-vector product,
        2k runs of the step's data and no command columns).  A formulation that
        gives none is a CommandError.
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
        v_bar = self.checks.command({} if v_cmd is None else v_cmd)
        tau_ext = self.checks.object_forces(object_forces)
        v_a = self.checks.robot_velocity(state.robot_velocity)
        request = self.gradient_request(gradients)
        try:
            with one_thread():
                return self.loop.take(q, q_ref, v_bar, state.warm_start, start, tau_ext,
                                      request, v_a)
        except SolverLimitExceeded:
            raise
        except (Exception, SystemExit) as err:   # noqa: B902 - nothing may end the process
            return StepResult(
                state_next=state, status="error",
                contact_set=ContactSet.empty(self.model.n_v, self.scenario.friction_directions),
                forces_W=np.zeros((0, 3)),
                diagnostics=StepDiagnostics(step_time=time.perf_counter() - start,
                                            error=f"{type(err).__name__}: {err}"))

    def gradient_request(self, gradients: Any) -> Optional[GradientRequest]:
        """Return what :meth:`step`'s ``gradients`` asks for (None: nothing), or CommandError."""
        if gradients is False:
            return None
        n_q, n_a = self.model.n_q, self.checks.n_a
        commands = np.eye(2 * n_a)
        if gradients is True:
            request = GradientRequest(np.eye(n_q), commands, "full")
        elif isinstance(gradients, str) and gradients == "commands":
            request = GradientRequest(None, commands, "commands")
        elif isinstance(gradients, Tangents):
            tangents = self._tangents(gradients)
            request = GradientRequest(tangents.dq, np.vstack([tangents.dv_cmd, tangents.dq_ref]),
                                      "tangents")
        elif isinstance(gradients, (bool, str)) or gradients is None or np.ndim(gradients) == 0:
            raise CommandError(f"gradients must be True, False, 'commands', an n_q x k "
                               f"array of directions or Tangents, got {gradients!r}. Fix: "
                               "gradients=True for all three derivatives, 'commands' for "
                               "dq_next_dv_cmd and dq_next_dq_ref only, an array S for "
                               "dq_next/dq @ S, Tangents(dq, dv_cmd, dq_ref) for dq_next "
                               "along them.")
        else:
            request = GradientRequest(self._directions(gradients, "gradients", n_q), commands,
                                      "along")
        if not self.formulation.gives_gradients:
            raise CommandError(
                f"gradients: formulation {self.formulation.name!r} gives no step "
                f"gradients here. Fix: {self.formulation.gradients_fix}.")
        if self.scenario.robot_inertia:
            raise CommandError("gradients: under robot_inertia the step depends on the "
                               "robots' velocity too, and its derivative in that velocity is "
                               "not computed, so chained gradients would be wrong. Fix: "
                               "robot_inertia: false, or gradients=False.")
        return request

    def _tangents(self, tangents: Tangents) -> Tangents:
        """Return ``tangents`` with each part checked: n_q x k, n_a x k, n_a x k, finite."""
        dq = self._directions(tangents.dq, "gradients: Tangents.dq", self.model.n_q)
        n_a, k = self.checks.n_a, dq.shape[1]
        parts = [self._directions(getattr(tangents, name), f"gradients: Tangents.{name}", n_a,
                                  k) for name in ("dv_cmd", "dq_ref")]
        return Tangents(dq, *parts)

    @staticmethod
    def _directions(value: Any, what: str, rows: int, columns: Optional[int] = None
                    ) -> np.ndarray:
        """Return ``value`` as a rows x k float array of finite directions, or raise."""
        try:
            directions = np.array(value, dtype=float)
        except (TypeError, ValueError) as err:
            raise CommandError(f"{what}: directions must be a {rows} x k array of numbers, "
                               f"got {type(value).__name__} ({err}). Fix: "
                               "np.eye(n_q)[:, cols] or a rollout's dq/dtheta.") from None
        k = columns if columns is not None else "k"
        if (directions.ndim != 2 or directions.shape[0] != rows or directions.shape[1] < 1
                or (columns is not None and directions.shape[1] != columns)):
            raise CommandError(f"{what}: directions must be {rows} x {k} with k >= 1 (rows: "
                               f"q's coordinates or the commanded joints), got shape "
                               f"{directions.shape}. Fix: one column per direction, e.g. "
                               "S[:, None] for one.")
        if not np.all(np.isfinite(directions)):
            raise CommandError(f"{what}: directions hold NaN or inf. Fix: finite values.")
        return directions

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
        base = self.formulation.reference_base(np.array(state.q)[self.data.robot_q_idx],
                                               np.array(state.q_ref))
        return {robot: (target - base[rows]) / self.h for robot, rows, target in
                self.checks.robot_vectors(q_cmd, "q_cmd", "position arrays")}

    # ----- set-up ------------------------------------------------------------
    def _warm_up(self) -> None:
        """
        Take one step from the default configuration and forget it.

        The first step of a process loads the compiled kernels from numba's
        cache (tens of ms); paying that here keeps it out of the step times.
        In a new environment the kernels compile first (up to a minute), and
        compile_notice says so.  The MIQP is not solved here (its solve dwarfs
        the load, and a problem too large for the licence should fail at its
        step, not at construction).
        """
        with compile_notice():
            if not self.formulation.solves_at_warm_up:
                self.min_signed_distance(self.model.q_default)
                return
            self.step(self.initial_state(), {})
