"""
The arm demo: a 7-DOF arm with a parallel-jaw gripper picks an object off the table and places it.

The task is a list of TCP waypoints (planning.Waypoint) built from the
object's initial pose and the place target: above the object, down to the
grasp, close, lift, carry sideways, put down, open, retreat.  The planner
(planning.DiffIkPlanner) turns them into one joint velocity command per step;
a TrajectorySource holds each command over its step and feeds the
QuasistaticPlant in a Diagram, optionally drawn live in Meshcat and recorded
for a self-contained HTML replay.

The grasp squeezes: the fingers' reference closes ``squeeze`` metres past the
object's surface, so the finger springs press with about K * squeeze.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Optional

import numpy as np
from pydrake.geometry import Meshcat, MeshcatVisualizer, MeshcatVisualizerParams
from pydrake.math import RigidTransform, RollPitchYaw, RotationMatrix
from pydrake.systems.analysis import Simulator
from pydrake.systems.framework import DiagramBuilder

from quasistatic_drake.apps.planning import (DiffIkPlanner, JointVelocityPlan, PlanningError,
                                             Waypoint)
from quasistatic_drake.contact_visualizer import (ContactForceVisualizer,
                                                  ContactForceVisualizerParams)
from quasistatic_drake.quasistatic_plant import QuasistaticPlant
from quasistatic_drake.scenario import Scenario
from quasistatic_drake.shapes import feature_points
from quasistatic_drake.simulator import QuasistaticSimulator


CAMERA_XYZ = np.array([1.5, -1.3, 1.0])          # Meshcat's view of the arm scene [m]
CAMERA_TARGET_XYZ = np.array([0.45, 0.1, 0.25])


@dataclass(frozen=True)
class PickPlaceTask:
    """Names in the scenario and the motion's geometry (lengths in m, durations in s)."""

    robot: str = "iiwa"
    object: str = ""                     # empty: the scenario's first object
    tcp_frame: str = "gripper_tcp"
    finger_joints: tuple[str, str] = ("wsg_left_finger_joint", "wsg_right_finger_joint")
    place_offset: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.25, 0.0]))
    approach_height: float = 0.15
    lift_height: float = 0.15
    tcp_to_palm: float = 0.045           # from the TCP up to the gripper body's face
    palm_clearance: float = 0.025        # palm above the object's top: outside the 2 cm tolerance
    open_gripper: float = 0.05           # finger position when open
    squeeze: float = 0.01                # finger reference past the object's surface
    hold_force: float = 10.0             # MIQP: normal force per finger while held [N]
    durations: dict = field(default_factory=lambda: {
        "pre-grasp": 3.0, "descend": 2.0, "close": 1.5, "lift": 2.0, "carry": 3.0,
        "place": 2.0, "open": 1.0, "retreat": 2.0})


@dataclass(frozen=True)
class StepRecord:
    """One step of the run: the state after it and what the step reported."""

    step: int
    time: float                          # [s] at the end of the step
    waypoint: str                        # the waypoint the step moved towards
    object_xyz: np.ndarray
    tilt_deg: float
    gripper: np.ndarray                  # finger joint positions
    contacts: int
    status: str
    step_time: float                     # [s] of the plant update


@dataclass(frozen=True)
class DemoRun:
    """What one run of the demo produced (summary() gives the binding JSON keys)."""

    formulation: str
    object_initial_xyz: np.ndarray
    object_final_xyz: np.ndarray
    place_target_xyz: np.ndarray
    final_tilt_deg: float
    min_signed_distance: float
    records: tuple[StepRecord, ...]
    plan: JointVelocityPlan

    @property
    def step_times(self) -> np.ndarray:
        """Return the plant update time of every step [s]."""
        return np.array([r.step_time for r in self.records])

    def summary(self) -> dict:
        """Return the JSON summary; its keys are binding, do not rename them."""
        return {
            "object_initial_xyz": self.object_initial_xyz.tolist(),
            "object_final_xyz": self.object_final_xyz.tolist(),
            "place_target_xyz": self.place_target_xyz.tolist(),
            "max_object_lift": float(max(r.object_xyz[2] for r in self.records)
                                     - self.object_initial_xyz[2]),
            "final_tilt_deg": self.final_tilt_deg,
            "min_signed_distance": self.min_signed_distance,
            "steps": int(len(self.step_times)),
            "step_time_ms": {"median": float(np.median(self.step_times) * 1e3),
                             "max": float(np.max(self.step_times) * 1e3)},
            "formulation": self.formulation,
            "failed_steps": int(sum(r.status != "optimal" for r in self.records)),
            "place_error_m": float(np.linalg.norm(
                self.object_final_xyz[:2] - self.place_target_xyz[:2])),
        }


@dataclass(frozen=True)
class GraspGeometry:
    """Where the TCP goes relative to the object's origin, and how far the fingers close."""

    height: float                        # TCP above the object's origin [m]
    finger_closed: float                 # finger joint position of the squeeze [m]


def gripper_down(X_WT_start: RigidTransform) -> RotationMatrix:
    """Return the TCP orientation pointing the fingers down, with the start's yaw."""
    yaw = RollPitchYaw(X_WT_start.rotation()).yaw_angle()
    return RotationMatrix(RollPitchYaw(np.pi, 0.0, yaw))


def grasp_geometry(engine: QuasistaticSimulator, q: np.ndarray, name: str,
                   R_WT: RotationMatrix, task: PickPlaceTask) -> GraspGeometry:
    """
    Return the grasp for object ``name`` at q, from its collision geometry.

    The palm stops ``palm_clearance`` above the object's top; the fingers
    (closing along the TCP x axis) close ``squeeze`` past its half width.
    """
    origin = engine.object_pose(q, name).translation()
    top = object_extent(engine, q, name, np.array([0.0, 0.0, 1.0]))
    axis = R_WT.col(0)
    centre = origin @ axis
    half_width = 0.5 * (object_extent(engine, q, name, axis) - centre
                        + object_extent(engine, q, name, -axis) + centre)
    if half_width - task.squeeze < 0.0 or half_width > task.open_gripper:
        raise PlanningError(f"object '{name}' is {2 * half_width * 1e3:.0f} mm wide across the "
                            f"fingers; the gripper opens to {2 * task.open_gripper * 1e3:.0f} "
                            "mm. Fix: a smaller object or a wider open_gripper.")
    return GraspGeometry(height=top + task.palm_clearance - task.tcp_to_palm - origin[2],
                         finger_closed=half_width - task.squeeze)


def object_extent(engine: QuasistaticSimulator, q: np.ndarray, name: str,
                  direction: np.ndarray) -> float:
    """Return the largest p . direction over the object's collision geometry at q."""
    model = engine.model
    model.set_positions(engine.checked_positions(q))
    bodies = {int(b) for b in model.plant.GetBodyIndices(model.object(name).instance)}
    query = model.query_object()
    extent = -np.inf
    for geometry_id, info in model.geometries.items():
        if info.body_index not in bodies:
            continue
        centres, radii = feature_points(info.shape)
        points = query.GetPoseInWorld(geometry_id).multiply(centres.T).T
        extent = max(extent, float(np.max(points @ direction + radii, initial=-np.inf)))
    if not np.isfinite(extent):
        raise PlanningError(f"object '{name}' has no collision geometry to grasp.")
    return extent


def pick_and_place_waypoints(X_W_object: RigidTransform, R_WT: RotationMatrix,
                             grasp: GraspGeometry,
                             task: PickPlaceTask) -> tuple[list[Waypoint], np.ndarray]:
    """Return the waypoints of the task and the place target (the object's origin)."""
    at_grasp = X_W_object.translation() + [0.0, 0.0, grasp.height]
    target = X_W_object.translation() + task.place_offset
    at_place = target + [0.0, 0.0, grasp.height]
    up = np.array([0.0, 0.0, 1.0])
    closed, d = grasp.finger_closed, task.durations
    steps = [("pre-grasp", at_grasp + task.approach_height * up, task.open_gripper),
             ("descend", at_grasp, task.open_gripper),
             ("close", at_grasp, closed),
             ("lift", at_grasp + task.lift_height * up, closed),
             ("carry", at_place + task.lift_height * up, closed),
             ("place", at_place, closed),
             ("open", at_place, task.open_gripper),
             ("retreat", at_place + task.approach_height * up, task.open_gripper)]
    waypoints = [Waypoint(label, RigidTransform(R_WT, p), g, d[label]) for label, p, g in steps]
    return waypoints, target


def plan_pick_and_place(engine: QuasistaticSimulator, task: PickPlaceTask) -> tuple:
    """Return (plan, place target, object name) from the engine's initial state."""
    scenario = engine.scenario
    if not engine.model.objects:
        raise PlanningError(f"{scenario.source}: the pick-and-place demo needs an object.")
    names = [o.name for o in engine.model.objects]
    name = task.object or names[0]
    if name not in names:
        raise PlanningError(f"{scenario.source}: no object '{name}' to pick; the objects are "
                            f"{names}.")
    q0 = engine.default_positions()
    planner = DiffIkPlanner(scenario, task.robot, task.tcp_frame, task.finger_joints)
    q_robot = engine.robot_positions(q0, task.robot)
    R_WT = gripper_down(planner.tcp_pose(q_robot))
    grasp = grasp_geometry(engine, q0, name, R_WT, task)
    waypoints, target = pick_and_place_waypoints(engine.object_pose(q0, name), R_WT, grasp,
                                                 task)
    plan = planner.plan(q_robot, waypoints, scenario.time_step)
    if scenario.formulation == "miqp":
        stiffness = scenario.settings('miqp').contact_stiffness
        speed = task.hold_force / (stiffness * scenario.time_step)
        plan = hold_squeeze(plan, planner.finger_idx, speed)
    return plan, target, name


def hold_squeeze(plan: JointVelocityPlan, finger_idx: np.ndarray,
                 speed: float) -> JointVelocityPlan:
    """
    Keep closing the fingers at ``speed`` from the 'close' waypoint until 'open'.

    Under the MIQP the robot follows its command and is no spring: the grasp
    force comes only from the normal-force lower bound K * phibar of eq. 23f,
    so the command must keep squeezing while the object is held, as eq. 29
    does in Pang & Tedrake 2018's example.  speed = F / (K h) gives about F per finger (eq. 23f
    bounds the sum over the points of a body pair).
    """
    velocities = plan.velocities.copy()
    held = range(plan.step_range("close").start, plan.step_range("open").start)
    for k in held:
        velocities[k, finger_idx] -= speed
    q_ref = plan.q_ref[0] + plan.time_step * np.vstack(
        [np.zeros(velocities.shape[1]), np.cumsum(velocities, axis=0)])
    return replace(plan, velocities=velocities, q_ref=q_ref)


def run_pick_and_place(scenario: Scenario, task: PickPlaceTask = PickPlaceTask(),
                       meshcat: Optional[Meshcat] = None, realtime_rate: float = 0.0,
                       html: Optional[Path] = None,
                       on_step: Optional[Callable[[StepRecord], None]] = None) -> DemoRun:
    """
    Plan, then simulate the task in a Diagram; draw it in ``meshcat`` if given.

    With ``html`` (and ``meshcat``) the run is recorded and saved as a
    self-contained page.  ``on_step`` sees every step as it is taken.
    """
    builder = DiagramBuilder()
    plant = builder.AddSystem(QuasistaticPlant(scenario))
    plan, target, name = plan_pick_and_place(plant.engine, task)
    source = builder.AddSystem(plan.command_source())
    builder.Connect(source.get_output_port(), plant.get_velocity_command_input_port(task.robot))
    visualizer = None
    if meshcat is not None:
        meshcat.SetCameraPose(CAMERA_XYZ, CAMERA_TARGET_XYZ)
        visualizer = MeshcatVisualizer.AddToBuilder(
            builder, plant.get_query_object_output_port(), meshcat,
            MeshcatVisualizerParams(publish_period=scenario.time_step))
        forces = ContactForceVisualizer.AddToBuilder(
            builder, plant.get_contact_results_output_port(), meshcat,
            ContactForceVisualizerParams(publish_period=scenario.time_step))
    simulator = Simulator(builder.Build())
    simulator.set_target_realtime_rate(realtime_rate)
    context = plant.GetMyContextFromRoot(simulator.get_context())
    recording = visualizer is not None and html is not None
    if recording:
        visualizer.StartRecording()
    object_port = plant.get_object_pose_output_port(name)
    initial = object_port.Eval(context).translation().copy()
    fingers = _finger_indices(plant, task)
    robot_port = plant.get_robot_positions_output_port(task.robot)
    records, min_phi = [], np.inf
    for k in range(plan.steps):
        simulator.AdvanceTo((k + 1) * scenario.time_step)
        outcome = plant.get_step_status_output_port().Eval(context)
        X = object_port.Eval(context)
        record = StepRecord(
            step=k, time=(k + 1) * scenario.time_step, waypoint=plan.labels[k],
            object_xyz=X.translation().copy(), tilt_deg=tilt_deg(X.rotation()),
            gripper=robot_port.Eval(context)[fingers].copy(),
            contacts=len(outcome.contacts), status=outcome.status, step_time=outcome.step_time)
        records.append(record)
        min_phi = min(min_phi, outcome.min_signed_distance)
        if on_step is not None:
            on_step(record)
    if recording:
        visualizer.StopRecording()
        visualizer.PublishRecording()
        forces.Delete()          # the replay animates poses; the last forces would mislead
        html.parent.mkdir(parents=True, exist_ok=True)
        html.write_text(meshcat.StaticHtml())
    X_final = object_port.Eval(context)
    return DemoRun(
        formulation=scenario.formulation, object_initial_xyz=initial,
        object_final_xyz=X_final.translation().copy(), place_target_xyz=target,
        final_tilt_deg=tilt_deg(X_final.rotation()), min_signed_distance=float(min_phi),
        records=tuple(records), plan=plan)


def _finger_indices(plant: QuasistaticPlant, task: PickPlaceTask) -> np.ndarray:
    names = plant.engine.robot_joint_names(task.robot)
    return np.array([names.index(j) for j in task.finger_joints], dtype=int)


def tilt_deg(R: RotationMatrix) -> float:
    """Return the angle between a body's z axis and the world's z axis, in degrees."""
    return float(np.degrees(np.arccos(np.clip(R.matrix()[2, 2], -1.0, 1.0))))
