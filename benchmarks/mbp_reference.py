"""
The MultibodyPlant side of benchmarks/vs_multibody_plant.py: the same scene, simulated dynamically.

The scene is built from the same Scenario (same URDFs, welds, initial
positions, gravity) into a discrete MultibodyPlant configured by
``MultibodyPlantConfig`` (time step, SAP or TAMSI).  Every robot joint gets
an actuator, and the robot is under joint impedance control with the
scenario's stiffness K:

    tau = K (q_ref - q) + D (v_ref - v) - tau_g(q)

(gravity compensated, as the quasistatic robot is).  D = 2 zeta sqrt(K M_ii)
with M_ii the diagonal of the robot's mass matrix at the start (zeta = 1:
critically damped joint by joint).  q_ref(t) is the benchmark's piecewise-
linear JointReference and v_ref its derivative, fed by a TrajectorySource.

* SAP (and the other non-TAMSI approximations): the K and D terms are
  MultibodyPlant's own PD actuators (``PdControllerGains``, desired state on
  ``get_desired_state_input_port``), which SAP treats implicitly, and the
  gravity term comes from Drake's ``JointStiffnessController`` with zero
  gains on a copy of the robot alone, added as feed-forward actuation.  The
  explicit form made light joints (the wrist, the fingers) marginally stable
  at h = 5e-3 s: the arm then failed to grasp.
* TAMSI ignores PD actuators (measured: the pad never moved), so there the
  whole law is the explicit ``JointStiffnessController`` with gains K and D.

Contact: Drake's hydroelastic model by default (every collision geometry gets
compliant hydroelastic properties, modulus ``hydroelastic_modulus``, with
Hunt-Crossley dissipation), because point contact gives a box one contact
point against the table; ``contact_model="point"`` is Drake's point contact
with its default penetration allowance.  Friction is each geometry's own,
as the quasistatic engine reads it.
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
import time
from dataclasses import dataclass
from typing import Optional

import numpy as np
from pydrake.geometry import AddCompliantHydroelasticProperties, ProximityProperties, RoleAssign
from pydrake.multibody.plant import AddMultibodyPlant, MultibodyPlant, MultibodyPlantConfig
from pydrake.multibody.tree import PdControllerGains
from pydrake.systems.analysis import Simulator
from pydrake.systems.controllers import JointStiffnessController
from pydrake.systems.framework import DiagramBuilder
from pydrake.systems.primitives import LogVectorOutput, TrajectorySource
from pydrake.trajectories import PiecewisePolynomial

from quasistatic_drake.loading import add_scenario_models
from quasistatic_drake.model import QuasistaticModel
from quasistatic_drake.scenario import Scenario

from trajectory_metrics import JointReference, PoseTrajectory

APPROXIMATIONS = ("sap", "tamsi", "similar", "lagged")
CONTACT_MODELS = ("hydroelastic", "point")
BLOW_UP_DISTANCE = 2.0       # [m] an object this far from its start has blown up


@dataclass(frozen=True)
class MbpSettings:
    """How one MultibodyPlant run is configured."""

    time_step: float
    approximation: str = "sap"
    contact_model: str = "hydroelastic"
    hydroelastic_modulus: float = 1.0e7     # [Pa]
    hunt_crossley_dissipation: float = 10.0  # [s/m]
    resolution_hint: float = 0.01           # [m] mesh edge of tessellated shapes
    damping_ratio: float = 1.0
    log_period: float = 0.01                # [s] of the object pose samples

    @property
    def implicit_pd(self) -> bool:
        """Return whether the impedance runs as MultibodyPlant's own PD actuators (not TAMSI)."""
        return self.approximation != "tamsi"

    def label(self) -> str:
        """Return e.g. 'mbp-sap'."""
        return f"mbp-{self.approximation}"


@dataclass(frozen=True)
class MbpRun:
    """The outcome of one run: the object's poses, the robot's, the wall time and status."""

    status: str                  # "ok", "blew up", or "failed: <Drake's message>"
    object_poses: Optional[PoseTrajectory]
    robot_t: np.ndarray
    robot_q: np.ndarray          # (N, n_a)
    wall_time: float             # [s] of Simulator.AdvanceTo only (median of the repeats)
    sim_time: float              # [s] simulated
    stiffness: np.ndarray
    damping: np.ndarray
    wall_times: tuple = ()       # [s] every timed repeat


@dataclass(frozen=True)
class Timing:
    """How often a run is timed: again while the timed total is below ``min_total``."""

    min_total: float = 1.0       # [s]
    max_runs: int = 5


class MbpScene:
    """A Scenario built as a discrete MultibodyPlant with an impedance-controlled robot."""

    def __init__(self, scenario: Scenario, robot: str, obj: str, settings: MbpSettings):
        """Build the plant for ``scenario``; ``robot`` is controlled, ``obj`` is logged."""
        _check_settings(settings)
        self.scenario, self.settings = scenario, settings
        self.qs_model = QuasistaticModel(scenario)
        self.robot_info = self.qs_model.robot(robot)
        self.builder = DiagramBuilder()
        config = MultibodyPlantConfig(
            time_step=settings.time_step,
            discrete_contact_approximation=settings.approximation,
            contact_model=("hydroelastic_with_fallback" if settings.contact_model ==
                           "hydroelastic" else "point"))
        self.plant, self.scene_graph = AddMultibodyPlant(config, self.builder)
        self.instances = add_scenario_models(self.plant, scenario)
        self.robot_instance = self.instances[robot]
        self.object_instance = self.instances[obj]
        _add_actuators(self.plant, self.robot_instance, self.robot_info.joint_names)
        self.control_plant = _robot_alone(scenario, robot, self.robot_info.joint_names)
        self.K, self.D = self.impedance_gains()
        if settings.implicit_pd:
            _set_pd_gains(self.plant, self.robot_instance, self.robot_info.joint_names,
                          self.K, self.D)
        if settings.contact_model == "hydroelastic":
            _make_compliant(self.plant, self.scene_graph, settings)
        self.plant.Finalize()
        self._check_same_positions()
        self.plant.SetDefaultPositions(self.qs_model.q_default)

    def impedance_gains(self) -> tuple[np.ndarray, np.ndarray]:
        """Return K (the scenario's) and D = 2 zeta sqrt(K M_ii) at the start."""
        K = self.robot_info.stiffness
        context = self.control_plant.CreateDefaultContext()
        self.control_plant.SetPositions(context, self.qs_model.q_default[self.robot_info.q_idx])
        M = self.control_plant.CalcMassMatrix(context)
        return K, 2.0 * self.settings.damping_ratio * np.sqrt(K * np.diag(M))

    def build(self, reference: JointReference, horizon: float):
        """Wire the controller, the reference source and the loggers; return the diagram."""
        K, D = self.K, self.D
        zero = np.zeros_like(K)
        controller = self.builder.AddSystem(JointStiffnessController(
            self.control_plant, zero if self.settings.implicit_pd else K,
            zero if self.settings.implicit_pd else D))
        source = self.builder.AddSystem(TrajectorySource(
            reference_trajectory(reference, horizon), output_derivative_order=1))
        plant = self.plant
        self.builder.Connect(plant.get_state_output_port(self.robot_instance),
                             controller.get_input_port_estimated_state())
        self.builder.Connect(source.get_output_port(), controller.get_input_port_desired_state())
        self.builder.Connect(controller.get_output_port_actuation(),
                             plant.get_actuation_input_port(self.robot_instance))
        if self.settings.implicit_pd:
            self.builder.Connect(source.get_output_port(),
                                 plant.get_desired_state_input_port(self.robot_instance))
        period = self.settings.log_period
        self.object_log = LogVectorOutput(plant.get_state_output_port(self.object_instance),
                                          self.builder, period)
        self.robot_log = LogVectorOutput(plant.get_state_output_port(self.robot_instance),
                                         self.builder, period)
        return self.builder.Build(), K, D

    def _check_same_positions(self) -> None:
        """Check that the quasistatic model and this plant order q alike."""
        mine, theirs = self.plant.GetPositionNames(), self.qs_model.plant.GetPositionNames()
        if list(mine) != list(theirs):
            raise RuntimeError(f"MultibodyPlant positions {mine} differ from the quasistatic "
                               f"model's {theirs}; the scene must be built in scenario order.")


def reference_trajectory(reference: JointReference, horizon: float) -> PiecewisePolynomial:
    """Return q_ref(t) as a first-order hold, held still up to ``horizon``."""
    t, q = reference.t, reference.q
    if horizon > t[-1]:
        t, q = np.append(t, horizon), np.vstack([q, q[-1]])
    return PiecewisePolynomial.FirstOrderHold(t, q.T)


def run_mbp(scenario: Scenario, robot: str, obj: str, reference: JointReference,
            horizon: float, settings: MbpSettings, timing: Timing = Timing(1e-9, 1)) -> MbpRun:
    """
    Simulate ``horizon`` seconds; a Drake failure or a blow-up is a status, not a crash.

    A successful run is repeated on a fresh Simulator (same diagram) as
    ``timing`` asks; ``wall_time`` is the median of the repeats.
    """
    scene = MbpScene(scenario, robot, obj, settings)
    diagram, K, D = scene.build(reference, horizon)
    status, wall, simulator = _advance(diagram, horizon)
    context = simulator.get_context()
    objects = scene.object_log.FindLog(context)
    robots = scene.robot_log.FindLog(context)
    poses = _object_trajectory(objects.sample_times(), objects.data())
    if status == "ok" and not _sane(poses):
        status = "blew up"
    walls = [wall]
    while status == "ok" and sum(walls) < timing.min_total and len(walls) < timing.max_runs:
        walls.append(_advance(diagram, horizon)[1])
    n_a = len(scene.robot_info.joint_names)
    return MbpRun(status=status, object_poses=poses, robot_t=robots.sample_times().copy(),
                  robot_q=robots.data()[:n_a].T.copy(), wall_time=float(np.median(walls)),
                  sim_time=float(context.get_time()), stiffness=K, damping=D,
                  wall_times=tuple(walls))


def _advance(diagram, horizon: float) -> tuple[str, float, Simulator]:
    """Run a fresh Simulator of ``diagram`` to ``horizon``; time AdvanceTo only."""
    simulator = Simulator(diagram)
    simulator.Initialize()
    start = time.perf_counter()
    status = "ok"
    try:
        simulator.AdvanceTo(horizon)
    except RuntimeError as err:
        status = f"failed: {str(err).splitlines()[0][:120]}"
    return status, time.perf_counter() - start, simulator


def run_mbp_isolated(scenario: Scenario, robot: str, obj: str, reference: JointReference,
                     horizon: float, settings: MbpSettings, timeout: float,
                     timing: Timing = Timing(1e-9, 1)) -> MbpRun:
    """
    Return run_mbp(...) computed in a child process.

    Drake aborts the whole process on some internal failures (TAMSI's
    "Failure at ... tamsi_solver.cc" is a DRAKE_DEMAND, not an exception), and
    a run can take far longer than its peers.  In a child process either one
    becomes a status ("crashed: <Drake's message>", "timed out after N s")
    and the sweep goes on.  The wall time is measured inside the child, around
    AdvanceTo only, so the process start is not counted.
    """
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    with tempfile.NamedTemporaryFile(prefix="mbp_stderr_", suffix=".txt") as log:
        child = context.Process(target=_child, args=(
            sender, log.name, (scenario, robot, obj, reference, horizon, settings, timing)))
        child.start()
        sender.close()
        result = _receive(receiver, None if timeout > 1e6 else timeout)
        if result is None and child.is_alive():
            child.kill()
        child.join()
        message = _drake_failure(log.name)
    if isinstance(result, MbpRun):
        return result
    status = (f"timed out after {timeout:g} s" if child.exitcode in (None, -9)
              else f"crashed (exit {child.exitcode}): {message}")
    return MbpRun(status=status, object_poses=None, robot_t=np.zeros(0),
                  robot_q=np.zeros((0, 0)), wall_time=float("nan"), sim_time=0.0,
                  stiffness=np.zeros(0), damping=np.zeros(0))


def _receive(receiver, timeout: Optional[float]):
    """Return what the child sent, or None when it died or ran out of time."""
    try:
        return receiver.recv() if receiver.poll(timeout) else None
    except EOFError:
        return None


def _child(sender, stderr_path: str, args: tuple) -> None:
    """Run run_mbp in the child, its stderr going to ``stderr_path``; send the result."""
    with open(stderr_path, "w") as stream:
        os.dup2(stream.fileno(), 2)
    try:
        result = run_mbp(*args)
    except Exception as err:   # a set-up error travels back as the run's status
        result = MbpRun(status=f"failed: {type(err).__name__}: {str(err)[:120]}",
                        object_poses=None, robot_t=np.zeros(0), robot_q=np.zeros((0, 0)),
                        wall_time=float("nan"), sim_time=0.0, stiffness=np.zeros(0),
                        damping=np.zeros(0))
    sender.send(result)
    sender.close()


def _drake_failure(path: str) -> str:
    """Return the first 'Failure at' or 'abort' line of a child's stderr, shortened."""
    try:
        lines = open(path).read().splitlines()
    except OSError:
        return ""
    hits = [line for line in lines if "Failure" in line or "abort" in line.lower()]
    return (hits[0] if hits else (lines[-1] if lines else ""))[:160]


def _object_trajectory(t: np.ndarray, data: np.ndarray) -> Optional[PoseTrajectory]:
    """Return the free body's poses from its logged state [qw qx qy qz x y z | v]."""
    if data.shape[1] == 0:
        return None
    keep = np.concatenate([[True], np.diff(t) > 0.0])
    return PoseTrajectory(t[keep].copy(), data[4:7, keep].T.copy(), data[0:4, keep].T.copy())


def _sane(poses: Optional[PoseTrajectory]) -> bool:
    if poses is None or not poses.finite:
        return False
    travel = np.linalg.norm(poses.xyz - poses.xyz[0], axis=1)
    return bool(np.max(travel) < BLOW_UP_DISTANCE)


def _check_settings(settings: MbpSettings) -> None:
    if settings.approximation not in APPROXIMATIONS:
        raise ValueError(f"MbpSettings.approximation: {settings.approximation!r} is not one of "
                         f"{APPROXIMATIONS}.")
    if settings.contact_model not in CONTACT_MODELS:
        raise ValueError(f"MbpSettings.contact_model: {settings.contact_model!r} is not one of "
                         f"{CONTACT_MODELS}.")
    if not settings.time_step > 0.0:
        raise ValueError(f"MbpSettings.time_step must be > 0, got {settings.time_step}.")


def _add_actuators(plant: MultibodyPlant, instance, joint_names) -> None:
    for name in joint_names:
        joint = plant.GetJointByName(name, instance)
        plant.AddJointActuator(f"{name}_actuator", joint)


def _set_pd_gains(plant: MultibodyPlant, instance, joint_names, K: np.ndarray,
                  D: np.ndarray) -> None:
    """Make the robot's actuators MultibodyPlant PD controllers with gains K and D."""
    for name, kp, kd in zip(joint_names, K, D):
        actuator = plant.GetJointActuatorByName(f"{name}_actuator", instance)
        actuator.set_controller_gains(PdControllerGains(p=kp, d=kd))


def _make_compliant(plant: MultibodyPlant, scene_graph, settings: MbpSettings) -> None:
    """Give every collision geometry compliant hydroelastic properties (keeping its friction)."""
    inspector = scene_graph.model_inspector()
    source = plant.get_source_id()
    for body_index in range(plant.num_bodies()):
        body = plant.get_body(type(plant.world_body().index())(body_index))
        for gid in plant.GetCollisionGeometriesForBody(body):
            props = ProximityProperties(inspector.GetProximityProperties(gid))
            AddCompliantHydroelasticProperties(settings.resolution_hint,
                                               settings.hydroelastic_modulus, props)
            if not props.HasProperty("material", "hunt_crossley_dissipation"):
                props.AddProperty("material", "hunt_crossley_dissipation",
                                  settings.hunt_crossley_dissipation)
            scene_graph.AssignRole(source, gid, props, RoleAssign.kReplace)


def _robot_alone(scenario: Scenario, robot: str, joint_names) -> MultibodyPlant:
    """Return a finalized continuous plant of the robot alone, with actuators."""
    plant = MultibodyPlant(0.0)
    instance = add_scenario_models(plant, scenario, robot_only=robot)[robot]
    _add_actuators(plant, instance, joint_names)
    plant.Finalize()
    names = [plant.get_joint(j).name() for j in plant.GetJointIndices(instance)
             if plant.get_joint(j).num_velocities() > 0]
    if sorted(names) != sorted(joint_names):
        raise RuntimeError(f"controller plant joints {names} differ from {list(joint_names)}")
    return plant
