"""
QuasistaticPlant: the engine as a pydrake LeafSystem, for Diagrams built with DiagramBuilder.

State (in the Context, nothing hidden in the System): the engine's
:class:`State` (state.py), split over Drake's state groups so that a
MultibodyPlant user finds vectors where they expect them:

* discrete group 0, ``q``: the configuration (``QuasistaticSimulator.default_positions()``
  by default);
* discrete group 1, ``q_ref``: the robots' reference (Pang & Tedrake 2021's
  spring reference under the QP), robots in scenario order;
* discrete group 2, ``v_a``: the robots' joint velocities (zero at first and
  after ``set_positions``), which the step takes and returns under the
  scenario's ``robot_inertia``; without it they stay zero;
* an abstract warm start (``initial_state``'s at first and after
  ``set_positions``: the QP's contact memory, the MIQP's MIP start);
* an abstract :class:`StepOutcome`: what the last step reported (status,
  contacts, timing), for the status and contact-results output ports.

``get_state(context)`` and ``set_state(context, state)`` read and write the
engine's State as a whole; ``set_positions(context, q)`` sets
``initial_state(q)``.

Outputs have no side effects.  The poses and the QueryObject come from a
cache entry of each Context: a copy of the engine's MultibodyPlant and
SceneGraph context, set to that Context's q when q has changed (Drake's
cache invalidation).  So several Contexts of one plant (two Simulators, a
``MonteCarloSimulation``) never share anything mutable: advanced
interleaved, each gives the trajectory it gives alone.  The update calls
``QuasistaticSimulator.step``, a function of its arguments.  The engine is
not thread-safe, so Contexts of one plant are advanced from one thread.

Timing (zero-order hold).  A periodic unrestricted update with period h and
offset 0 fires at t_k = k h.  The state seen at t_k (after
``Simulator.AdvanceTo(k h)``, and by publish events at t_k such as loggers
and MeshcatVisualizer) is q_k, the result of k steps.  The update at t_k
then reads every velocity command input at t_k, holds it over [t_k, t_k + h]
and replaces (q_k, q_ref) with the result of one ``QuasistaticSimulator.step``:
q_{k+1}, visible for t in (t_k, t_{k+1}].  So a command present at time t
drives the step of the first update time t_k >= t.  Every output depends on
the state only, never on an input, so a controller may feed the positions
back into the commands without an algebraic loop.

An unconnected velocity command port means zero velocity: that robot's
reference holds still.  A command that is not finite, or a failed check of the
state, raises :class:`CommandError` naming the port and time, and the state is
left as it was.  A QP that fails keeps q and q_ref and reports the status on
the step-status port; the Simulator keeps running.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import numpy as np
from pydrake.common.value import AbstractValue, Value
from pydrake.geometry import QueryObject
from pydrake.math import RigidTransform
from pydrake.systems.framework import BasicVector, Context, LeafSystem, ValueProducer
from pydrake.systems.framework import State as DrakeState

from quasistatic_drake.results import Contact, StepResult
from quasistatic_drake.scenario import Scenario
from quasistatic_drake.simulator import CommandError, QuasistaticSimulator
from quasistatic_drake.state import State


@dataclass(frozen=True)
class StepOutcome:
    """
    What the step that produced the current state reported.

    ``status`` is "initial" before the first step, then the solver status
    ("optimal" on success), or "error" when something inside the step
    raised (``error`` says what; q was kept).  ``min_signed_distance`` is at
    the current q.
    ``contacts`` carry the forces of that step (simulator.Contact).  An
    outcome is immutable and shared, not copied, when Drake copies the state
    (``__deepcopy__``); treat its arrays as read-only.
    """

    status: str
    time: float
    steps: int
    solve_time: float
    step_time: float
    min_signed_distance: float
    result: Optional[StepResult] = None
    error: str = ""

    @property
    def success(self) -> bool:
        """Return whether the last step was solved (True before the first step)."""
        return self.status in ("optimal", "initial")

    @property
    def contacts(self) -> tuple[Contact, ...]:
        """Return the contacts of the last successful step, with their forces."""
        return self.result.contacts if self.result is not None else ()

    def __repr__(self) -> str:
        """Return one line: status, time, steps, step time, contacts (not the whole result)."""
        error = f", error={self.error!r}" if self.error else ""
        return (f"StepOutcome(status={self.status!r}, time={self.time:.6g} s, "
                f"steps={self.steps}, step_time={self.step_time * 1e3:.3f} ms, "
                f"contacts={len(self.contacts)}, "
                f"min_signed_distance={self.min_signed_distance:.3g} m{error})")

    def __deepcopy__(self, memo) -> "StepOutcome":
        """Share instead of copy: Drake clones the state every update."""
        return self


class QuasistaticPlant(LeafSystem):
    """The quasistatic engine as a LeafSystem (module docstring: state, timing, errors)."""

    def __init__(self, scenario: Union[Scenario, QuasistaticSimulator]):
        """Build the plant for a Scenario (or wrap an existing engine)."""
        LeafSystem.__init__(self)
        self.engine = (scenario if isinstance(scenario, QuasistaticSimulator)
                       else QuasistaticSimulator(scenario))
        self.scenario = self.engine.scenario
        self.time_step = self.scenario.time_step
        model = self.engine.model
        start = self.engine.initial_state()
        q0 = np.array(start.q)
        self._robot_q_idx = np.concatenate(
            [r.q_idx for r in model.robots]).astype(int) if model.robots else np.zeros(0, int)
        self._q_index = self.DeclareDiscreteState(q0)
        self._q_ref_index = self.DeclareDiscreteState(q0[self._robot_q_idx])
        self._v_a_index = self.DeclareDiscreteState(np.zeros(len(self._robot_q_idx)))
        self._outcome_index = self.DeclareAbstractState(
            AbstractValue.Make(self._initial_outcome(q0)))
        # the formulation's warm start for the next step (the QP's contact memory, the
        # MIQP's MIP start; None: none): at first, initial_state()'s
        self._warm_start_index = self.DeclareAbstractState(Value[object](start.warm_start))
        self._command_ports = {r.name: self.DeclareVectorInputPort(
            f"{r.name}_velocity_command", len(r.joint_names)) for r in model.robots}
        self._position_ports = {r.name: self.DeclareVectorInputPort(
            f"{r.name}_position_command", len(r.joint_names)) for r in model.robots}
        self._force_ports = {o.name: self.DeclareVectorInputPort(
            f"{o.name}_generalized_force", len(o.v_idx)) for o in model.objects}
        self.DeclarePeriodicUnrestrictedUpdateEvent(self.time_step, 0.0, self._update)
        self._scene_cache = self.DeclareCacheEntry(
            "the engine's MultibodyPlant and SceneGraph context at this Context's q",
            ValueProducer(allocate=self._allocate_scene, calc=self._calc_scene),
            {self.discrete_state_ticket(self._q_index)})
        self._declare_outputs()

    # ----- binding port accessors ---------------------------------------------------
    def get_velocity_command_input_port(self, robot: str):
        """Return the input port of a robot's joint velocities (robot_joint_names order)."""
        return _named(self._command_ports, robot, "robot")

    def get_position_command_input_port(self, robot: str):
        """
        Return the input port of a robot's commanded joint positions (qsim's).

        Connected, it sets the reference the step drives towards directly
        (``QuasistaticSimulator.velocity_for_positions``); it wins over the
        velocity port when both are connected.
        """
        return _named(self._position_ports, robot, "robot")

    def get_generalized_force_input_port(self, object: str):
        """Return the input port of generalized forces applied to an object (its velocities)."""
        return _named(self._force_ports, object, "object")

    def get_robot_positions_output_port(self, robot: str):
        """Return the output port of a robot's joint positions."""
        return _named(self._robot_position_ports, robot, "robot")

    def get_object_pose_output_port(self, object: str):
        """Return the output port of an object's base-body pose (an abstract RigidTransform)."""
        return _named(self._object_pose_ports, object, "object")

    def get_object_pose_vector_output_port(self, object: str):
        """
        Return the vector output port of an object's base-body pose, [x y z qw qx qy qz].

        For ``LogVectorOutput`` and Drake's other vector systems, which
        cannot take the abstract RigidTransform of ``get_object_pose_output_port``.
        """
        return _named(self._object_pose_vector_ports, object, "object")

    def get_state_output_port(self):
        """Return the vector output port of the state: q, then the robots' reference q_ref."""
        return self._state_port

    def get_body_poses_output_port(self):
        """Return the output port of all body poses in the world, by BodyIndex (as MbP's)."""
        return self._body_poses_port

    def get_query_object_output_port(self):
        """Return the QueryObject output port (for MeshcatVisualizer.AddToBuilder)."""
        return self._query_port

    def get_contact_results_output_port(self):
        """Return the output port of the last step's contacts (a tuple of Contact)."""
        return self._contacts_port

    def get_step_status_output_port(self):
        """Return the output port of the last step's StepOutcome."""
        return self._status_port

    def get_positions_output_port(self):
        """Return the output port of the whole configuration q (for loggers)."""
        return self._positions_port

    # ----- context helpers -------------------------------------------------------------
    def get_positions(self, context: Context) -> np.ndarray:
        """Return q in a context of this system (a copy)."""
        return context.get_discrete_state(self._q_index).value().copy()

    def get_reference(self, context: Context) -> np.ndarray:
        """Return the robots' commanded-position reference qbar_a (a copy)."""
        return context.get_discrete_state(self._q_ref_index).value().copy()

    def get_robot_velocities(self, context: Context) -> np.ndarray:
        """Return the robots' joint velocities v_a the next step starts from (a copy)."""
        return context.get_discrete_state(self._v_a_index).value().copy()

    def get_warm_start(self, context: Context):
        """Return the warm start the next step will use (None: none; the MIQP's MIP start)."""
        return context.get_abstract_state(self._warm_start_index).get_value()

    def get_state(self, context: Context) -> State:
        """Return the engine's State held in a context of this system (state.py)."""
        return State(q=self.get_positions(context), q_ref=self.get_reference(context),
                     robot_velocity=(self.get_robot_velocities(context)
                                     if self.scenario.robot_inertia else None),
                     warm_start=self.get_warm_start(context))

    def set_state(self, context: Context, state: State) -> None:
        """Set the context's state from an engine State (checked first; CommandError)."""
        state = self.engine.checked_state(state)
        outcome = self._initial_outcome(np.array(state.q), context.get_time())
        context.SetDiscreteState(self._q_index, np.array(state.q))
        context.SetDiscreteState(self._q_ref_index, np.array(state.q_ref))
        context.SetDiscreteState(self._v_a_index, np.zeros(len(self._robot_q_idx))
                                 if state.robot_velocity is None
                                 else np.array(state.robot_velocity))
        context.SetAbstractState(self._outcome_index, outcome)
        context.SetAbstractState(self._warm_start_index, state.warm_start)

    def set_positions(self, context: Context, q: np.ndarray) -> None:
        """Set q, reset the reference to the robots' positions in q (no preload), the rest."""
        self.set_state(context, self.engine.initial_state(q))

    # ----- the update ------------------------------------------------------------------
    def _update(self, context: Context, state: DrakeState) -> None:
        t = context.get_time()
        current = self.get_state(context)
        commands = self._read_commands(context, t, current)
        forces = self._read_vectors(self._force_ports, context, t, self._object_velocities)
        try:
            result = self.engine.step(current, commands, object_forces=forces)
        except CommandError as err:
            raise CommandError(f"QuasistaticPlant at t = {t:.6g} s: {err} The state was not "
                               "changed.") from None
        previous = context.get_abstract_state(self._outcome_index).get_value()
        following = result.state_next
        if result.success:
            state.get_mutable_discrete_state(self._q_index).set_value(following.q)
            state.get_mutable_discrete_state(self._q_ref_index).set_value(following.q_ref)
            if following.robot_velocity is not None:
                state.get_mutable_discrete_state(self._v_a_index).set_value(
                    following.robot_velocity)
        state.get_mutable_abstract_state(self._warm_start_index).set_value(following.warm_start)
        state.get_mutable_abstract_state(self._outcome_index).set_value(
            self._outcome(result, t, previous.steps + 1))

    def _read_commands(self, context: Context, t: float, current: State) -> dict:
        """Return each robot's velocity command; a connected position command wins."""
        joints = self.engine.robot_joint_names
        commands = self._read_vectors(self._command_ports, context, t, joints)
        positions = self._read_vectors(self._position_ports, context, t, joints)
        if positions:
            commands.update(self.engine.velocity_for_positions(current, positions))
        return commands

    def _read_vectors(self, ports: dict, context: Context, t: float, labels) -> dict:
        """Return {name: value} of the connected ports; a non-finite value is refused."""
        values = {}
        for name, port in ports.items():
            if not port.HasValue(context):
                continue
            value = port.Eval(context)
            if not np.all(np.isfinite(value)):
                names = labels(name)
                bad = [names[i] for i in np.flatnonzero(~np.isfinite(value))]
                raise CommandError(
                    f"QuasistaticPlant input port '{port.get_name()}' at t = {t:.6g} s is not "
                    f"finite for joint(s) {bad}: {value.tolist()}. The state was not changed. "
                    "Fix the source connected to it.")
            values[name] = value
        return values

    def _object_velocities(self, name: str) -> list[str]:
        """Label an object's velocities by its joints (for messages)."""
        plant, info = self.engine.model.plant, self.engine.model.object(name)
        labels = []
        for j in plant.GetJointIndices(info.instance):
            joint = plant.get_joint(j)
            labels += [f"{joint.name()}[{k}]" for k in range(joint.num_velocities())]
        return labels

    def _outcome(self, result: StepResult, t: float, steps: int) -> StepOutcome:
        diagnostics = result.diagnostics
        min_phi = (diagnostics.min_phi_next if result.success
                   else self.engine.min_signed_distance(result.q_next))
        return StepOutcome(status=result.status, time=t, steps=steps,
                           solve_time=diagnostics.solve_time, step_time=diagnostics.step_time,
                           min_signed_distance=float(min_phi),
                           result=result if result.success else None, error=diagnostics.error)

    def _initial_outcome(self, q: np.ndarray, t: float = 0.0) -> StepOutcome:
        return StepOutcome(status="initial", time=t, steps=0, solve_time=0.0, step_time=0.0,
                           min_signed_distance=self.engine.min_signed_distance(q))

    # ----- outputs ---------------------------------------------------------------------
    def _declare_outputs(self) -> None:
        model = self.engine.model
        state_only = {self.all_state_ticket()}
        self._positions_port = self.DeclareVectorOutputPort(
            "positions", model.n_q, self._calc_positions, prerequisites_of_calc=state_only)
        self._robot_position_ports = {
            r.name: self.DeclareVectorOutputPort(
                f"{r.name}_positions", len(r.joint_names),
                lambda context, out, idx=r.q_idx: out.SetFromVector(
                    self._q(context)[idx]),
                prerequisites_of_calc=state_only)
            for r in model.robots}
        scene = {self._scene_cache.ticket()}
        self._object_pose_ports = {
            o.name: self.DeclareAbstractOutputPort(
                f"{o.name}_pose", lambda: AbstractValue.Make(RigidTransform()),
                lambda context, out, o=o: out.set_value(self._object_pose(context, o)),
                prerequisites_of_calc=scene)
            for o in model.objects}
        self._object_pose_vector_ports = {
            o.name: self.DeclareVectorOutputPort(
                f"{o.name}_pose_vector", 7,
                lambda context, out, o=o: out.SetFromVector(
                    _pose_vector(self._object_pose(context, o))),
                prerequisites_of_calc=scene)
            for o in model.objects}
        self._state_port = self.DeclareVectorOutputPort(
            "state", model.n_q + len(self._robot_q_idx),
            lambda context, out: out.SetFromVector(np.concatenate(
                [self._q(context), context.get_discrete_state(self._q_ref_index).value()])),
            prerequisites_of_calc=state_only)
        self._body_poses_port = self.DeclareAbstractOutputPort(
            "body_poses", lambda: AbstractValue.Make(
                [RigidTransform()] * model.plant.num_bodies()),
            self._calc_body_poses, prerequisites_of_calc=scene)
        self._query_port = self.DeclareAbstractOutputPort(
            "query_object", lambda: AbstractValue.Make(QueryObject()), self._calc_query_object,
            prerequisites_of_calc=scene)
        self._contacts_port = self.DeclareAbstractOutputPort(
            "contact_results", lambda: AbstractValue.Make(()),
            lambda context, out: out.set_value(self._last(context).contacts),
            prerequisites_of_calc=state_only)
        self._status_port = self.DeclareAbstractOutputPort(
            "step_status", lambda: AbstractValue.Make(self._initial_outcome(
                self.engine.default_positions())),
            lambda context, out: out.set_value(self._last(context)),
            prerequisites_of_calc=state_only)

    def _q(self, context: Context) -> np.ndarray:
        return context.get_discrete_state(self._q_index).value()

    def _last(self, context: Context) -> StepOutcome:
        return context.get_abstract_state(self._outcome_index).get_value()

    def _calc_positions(self, context: Context, out: BasicVector) -> None:
        out.SetFromVector(self._q(context))

    # ----- the scene cache: the engine's plant context, one per Context of this system ----
    def _allocate_scene(self) -> AbstractValue:
        return Value[object](_Scene(self.engine.model))

    def _calc_scene(self, context: Context, value: AbstractValue) -> None:
        scene: _Scene = value.get_mutable_value()
        self.engine.model.plant.SetPositions(scene.plant_context, self._q(context))

    def _scene(self, context: Context) -> "_Scene":
        return self._scene_cache.Eval(context)

    def _object_pose(self, context: Context, info) -> RigidTransform:
        plant = self.engine.model.plant
        body = plant.GetBodyByName(info.base_body, info.instance)
        return plant.EvalBodyPoseInWorld(self._scene(context).plant_context, body)

    def _calc_body_poses(self, context: Context, out: AbstractValue) -> None:
        plant = self.engine.model.plant
        out.set_value(plant.get_body_poses_output_port().Eval(self._scene(context).plant_context))

    def _calc_query_object(self, context: Context, out: AbstractValue) -> None:
        """Copy the scene's QueryObject at q: Drake bakes the copy, so it stays valid."""
        plant = self.engine.model.plant
        out.set_value(plant.get_geometry_query_input_port().Eval(
            self._scene(context).plant_context))

    @property
    def robot_names(self) -> list[str]:
        """Return the robots, in scenario order."""
        return [r.name for r in self.engine.model.robots]

    @property
    def object_names(self) -> list[str]:
        """Return the objects, in scenario order."""
        return [o.name for o in self.engine.model.objects]


def _pose_vector(pose: RigidTransform) -> np.ndarray:
    """Return [x y z qw qx qy qz] of a pose (Drake's quaternion order, w first)."""
    return np.concatenate([pose.translation(), pose.rotation().ToQuaternion().wxyz()])


class _Scene:
    """
    A MultibodyPlant and SceneGraph context of the engine's model, owned by one plant Context.

    Drake clones a cache value when it clones a Context; the clone gets a
    context of its own (``__deepcopy__``), so no two Contexts share one.
    """

    def __init__(self, model, root=None):
        self.model = model
        self.root = root if root is not None else model.diagram.CreateDefaultContext()
        self.plant_context = model.plant.GetMyMutableContextFromRoot(self.root)

    def __deepcopy__(self, memo) -> "_Scene":
        return _Scene(self.model, self.root.Clone())


def _named(ports: dict, name: str, kind: str):
    if name not in ports:
        raise CommandError(f"QuasistaticPlant has no {kind} '{name}'; its {kind}s are "
                           f"{sorted(ports)}.")
    return ports[name]
