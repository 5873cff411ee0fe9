"""
The arm demo: an arm with a parallel-jaw gripper picks an object off the table and places it.

The task is a list of TCP waypoints (planning.Waypoint) built from the
object's initial pose and the place target: above the object, down to the
grasp, close, lift, carry sideways, put down, open, retreat.  The planner
(planning.DiffIkPlanner) turns them into one joint velocity command per step
for the arm robot (differential IK) and the gripper robot (its finger
joints; the same robot when one model holds both); a TrajectorySource per
robot holds each command over its step and feeds the QuasistaticPlant in a
Diagram, optionally drawn live in Meshcat and recorded for a self-contained
HTML replay.

What to drive comes from the scenario's ``task:`` block (PickPlaceTask.from_scenario;
the demo's options override it), or the defaults, which fit
urdf/iiwa14_wsg50.urdf (one robot 'iiwa' with arm, WSG-like fingers and the
frame ``gripper_tcp``)::

    task:
      arm: iiwa                  # the robot the differential IK drives
      gripper: gripper           # the robot with the finger joints (default: the arm)
      tcp_frame: gripper::tcp    # 'model::frame', or a frame of the arm or the gripper
      fingers:                   # each finger joint: its open and fully closed position
        - {joint: left_jaw_joint, open: 0.01, closed: 0.06}
        - {joint: right_jaw_joint, open: -0.01, closed: -0.06}
      object: cylinder           # default: the scenario's first object
      # and the motion's geometry: place_offset, approach_height, lift_height,
      # tcp_to_palm, palm_clearance, finger_clearance, squeeze, hold_force, durations

Each finger closes from ``open`` towards ``closed``, whichever sign that is.
The grasp is measured on the collision geometry.  The TCP frame's z axis
points along the fingers, from the palm towards the fingertips (down when
grasping from above), and the fingers close across it: checked before
planning (check_tcp_frame; a wrong axis is a TaskError naming
``task.tcp_frame`` and the rotation that fixes it).  The palm (what is
welded to the TCP's body) stops ``palm_clearance`` above the object's top,
unless that would take the fingers' lowest point closer than
``finger_clearance`` to the surface the object rests on: then the grasp is
as low as the fingers allow, and the run's summary says so.  Each finger's
reference closes ``squeeze`` metres past where its pad meets the object, so
the finger springs press with about K * squeeze.

The run (run_pick_and_place) reports, besides the object's final pose, its
largest tilt while held (lift to place), how far it slipped in the grasp
(its pose in the TCP frame from the grasp's close to its release), and the
fingers' lowest point above that surface over the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
from pydrake.geometry import Meshcat, MeshcatVisualizer, MeshcatVisualizerParams
from pydrake.math import RigidTransform, RollPitchYaw, RotationMatrix
from pydrake.systems.analysis import Simulator
from pydrake.systems.framework import DiagramBuilder

from quasistatic_drake.apps.gripper import (CLOSING_ALONG_Z, finger_axis, finger_motion,
                                            fingers_reach, grasp_slip, lowest_point,
                                            palm_centre, principal_axis, tcp_axis_fix,
                                            TaskError)
from quasistatic_drake.apps.planning import (DiffIkPlanner, find_frame, JointVelocityPlan,
                                             PlanningError, Waypoint)
from quasistatic_drake.contact_visualizer import (ContactForceVisualizer,
                                                  ContactForceVisualizerParams)
from quasistatic_drake.quasistatic_plant import QuasistaticPlant
from quasistatic_drake.scenario import Scenario, ScenarioError
from quasistatic_drake.schema import (list_of, mapping_of, nested, number, optional, read,
                                      SchemaError, setting, text, vector)
from quasistatic_drake.shapes import feature_points
from quasistatic_drake.simulator import QuasistaticSimulator


CAMERA_XYZ = np.array([1.5, -1.3, 1.0])          # Meshcat's view of the arm scene [m]
CAMERA_TARGET_XYZ = np.array([0.45, 0.1, 0.25])
WAYPOINTS = ("pre-grasp", "descend", "close", "lift", "carry", "place", "open", "retreat")


@dataclass(frozen=True)
class Finger:
    """A finger joint of the gripper: its position when open and when fully closed."""

    joint: str
    open: float                          # [m] the finger's position with the gripper open
    closed: float                        # [m] fully closed; the grasp closes towards it


WSG_FINGERS = (Finger("wsg_left_finger_joint", 0.05, 0.0),
               Finger("wsg_right_finger_joint", 0.05, 0.0))


@dataclass(frozen=True)
class PickPlaceTask:
    """
    Names in the scenario and the motion's geometry (lengths in m, durations in s).

    The defaults fit urdf/iiwa14_wsg50.urdf; a scenario's ``task:`` block
    (:meth:`from_scenario`) names the others.  ``robot`` is the arm (the
    block's ``arm``); ``gripper`` empty means the arm holds the fingers.
    """

    robot: str = "iiwa"
    object: str = ""                     # empty: the scenario's first object
    tcp_frame: str = "gripper_tcp"
    gripper: str = ""                    # the robot with the finger joints; empty: robot
    fingers: tuple[Finger, ...] = WSG_FINGERS
    place_offset: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.25, 0.0]))
    approach_height: float = 0.15
    lift_height: float = 0.15
    tcp_to_palm: Optional[float] = None  # TCP up to the palm's face; None: measured
    palm_clearance: float = 0.025        # palm above the object's top: outside the 2 cm tolerance
    finger_clearance: float = 0.005      # fingers' lowest point above the surface the object is on
    squeeze: float = 0.01                # finger reference past the object's surface
    hold_force: float = 10.0             # MIQP: normal force per finger while held [N]
    durations: dict = field(default_factory=lambda: {
        "pre-grasp": 3.0, "descend": 2.0, "close": 1.5, "lift": 2.0, "carry": 3.0,
        "place": 2.0, "open": 1.0, "retreat": 2.0})

    @property
    def finger_joints(self) -> tuple[str, ...]:
        """Return the finger joints' names."""
        return tuple(f.joint for f in self.fingers)

    @property
    def gripper_robot(self) -> str:
        """Return the robot with the finger joints (the arm unless ``gripper`` names one)."""
        return self.gripper or self.robot

    @staticmethod
    def from_scenario(scenario: Scenario, **overrides: Any) -> "PickPlaceTask":
        """
        Return the task of the scenario's ``task:`` block, with ``overrides`` on top.

        ``overrides`` are keys of the block (None: not given), as the demo's
        options pass them.  Raises ScenarioError naming ``task.<key>``.
        """
        data = dict(scenario.task)
        data.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return task_from_block(read(TaskBlock, data, "task"))
        except SchemaError as err:
            fix = "" if "Fix:" in str(err) else (" Fix: correct the scenario's task: block "
                                                 "or the demo option that sets it.")
            raise ScenarioError(f"{scenario.source}: {err}{fix}") from None


# ----- the task: block ------------------------------------------------------------------
@dataclass(frozen=True)
class FingerSpec:
    """One entry of ``task.fingers``."""

    joint: str = setting(check=text("a joint name"), doc="a finger joint of the gripper robot")
    open: float = setting(check=number(), doc="its position with the gripper open [m]")
    closed: float = setting(check=number(), doc="its position fully closed [m]")


@dataclass(frozen=True)
class TaskBlock:
    """The scenario's ``task:`` block as the demo reads it; a key left out keeps its default."""

    arm: Optional[str] = setting(None, optional(text("a robot name")),
                                 "the robot driven by differential IK (default iiwa)")
    gripper: Optional[str] = setting(None, optional(text("a robot name")),
                                     "the robot with the finger joints (default: the arm)")
    tcp_frame: Optional[str] = setting(
        None, optional(text("a frame name")),
        "'model::frame', or a frame of the arm or the gripper (default gripper_tcp)")
    fingers: Optional[tuple] = setting(None, optional(list_of(nested(FingerSpec))),
                                       "[{joint, open, closed}, ...] (default: the WSG's)")
    object: Optional[str] = setting(None, optional(text("an object name")),
                                    "the object to pick (default: the first)")
    place_offset: Optional[np.ndarray] = setting(None, optional(vector(3)),
                                                 "place target minus the object's start [m]")
    approach_height: Optional[float] = setting(None, optional(number(positive=True)), "[m]")
    lift_height: Optional[float] = setting(None, optional(number(positive=True)), "[m]")
    tcp_to_palm: Optional[float] = setting(None, optional(number()),
                                           "[m] TCP to the palm's face (default: measured)")
    palm_clearance: Optional[float] = setting(None, optional(number(nonnegative=True)),
                                              "[m] palm above the object's top, at most")
    finger_clearance: Optional[float] = setting(
        None, optional(number(nonnegative=True)),
        "[m] fingers' lowest point above the surface the object rests on, at least")
    squeeze: Optional[float] = setting(None, optional(number(nonnegative=True)),
                                       "[m] finger reference past the object's surface")
    hold_force: Optional[float] = setting(None, optional(number(positive=True)),
                                          "[N] per finger while held (MIQP)")
    durations: Optional[dict] = setting(None, optional(mapping_of(number(positive=True),
                                                                  "a waypoint name")),
                                        "[s] per waypoint: " + ", ".join(WAYPOINTS))


def task_from_block(block: TaskBlock) -> PickPlaceTask:
    """Return the PickPlaceTask of a read ``task:`` block (SchemaError naming task.<key>)."""
    task = PickPlaceTask()
    given = {f.name: getattr(block, f.name) for f in fields(block)
             if getattr(block, f.name) is not None}
    if "arm" in given:
        given["robot"] = given.pop("arm")
    if "fingers" in given:
        given["fingers"] = _fingers(given["fingers"])
    if "durations" in given:
        unknown = sorted(set(given["durations"]) - set(WAYPOINTS))
        if unknown:
            raise SchemaError("task.durations", f"unknown waypoint(s) {unknown}; the waypoints "
                              f"are {list(WAYPOINTS)}.")
        given["durations"] = {**task.durations, **given["durations"]}
    return replace(task, **given)


def _fingers(specs: tuple) -> tuple[Finger, ...]:
    """Return the fingers of ``task.fingers``: at least one, each joint once, open != closed."""
    if not specs:
        raise SchemaError("task.fingers", "expected at least one finger {joint, open, "
                          "closed}.")
    seen = set()
    for i, spec in enumerate(specs):
        if spec.open == spec.closed:
            raise SchemaError(f"task.fingers[{i}]", f"open and closed are both {spec.open}, so "
                              "the finger could not close. Fix: give the position with the "
                              "gripper open and the one fully closed.")
        if spec.joint in seen:
            raise SchemaError(f"task.fingers[{i}].joint", f"'{spec.joint}' is listed twice. "
                              "Fix: list each finger joint once.")
        seen.add(spec.joint)
    return tuple(Finger(s.joint, s.open, s.closed) for s in specs)


def checked_task(engine: QuasistaticSimulator, task: PickPlaceTask) -> str:
    """
    Check the task against the scenario's models; return the object to pick.

    Raises TaskError (a ScenarioError and a PlanningError) naming the file,
    ``task.<key>`` and a fix.
    """
    source = engine.scenario.source
    model = engine.model
    robots = [r.name for r in model.robots]
    where = (("task.arm", task.robot, "the robot to drive by differential IK", "--arm"),
             ("task.gripper", task.gripper_robot, "the robot with the finger joints",
              "--gripper"))
    for key, name, what, option in where:
        if name not in robots:
            raise TaskError(f"{source}: {key}: no robot '{name}'; the robots are {robots}. "
                            f"Fix: name {what} in the scenario's task: block, or with "
                            f"{option}.")
    if not model.objects:
        raise TaskError(f"{source}: the pick-and-place demo needs an object. Fix: add one "
                        "under objects.")
    names = [o.name for o in model.objects]
    name = task.object or names[0]
    if name not in names:
        raise TaskError(f"{source}: task.object: no object '{name}' to pick; the objects "
                        f"are {names}. Fix: name one of them (task.object or --object).")
    gripper = model.robot(task.gripper_robot)
    _check_fingers(engine, task, gripper)
    arm_joints = set(model.robot(task.robot).joint_names)
    if task.robot == task.gripper_robot:
        arm_joints -= set(task.finger_joints)
    if not arm_joints:
        raise TaskError(f"{source}: task.fingers: every joint of the arm '{task.robot}' is "
                        "a finger, so nothing moves the TCP. Fix: list only the finger "
                        "joints.")
    instances = {r.name: r.instance for r in model.robots
                 if r.name in (task.robot, task.gripper_robot)}
    try:
        find_frame(model.plant, task.tcp_frame, instances)
    except PlanningError as err:
        raise TaskError(f"{source}: task.tcp_frame: {err} Fix: name the frame between "
                        "the fingers in the scenario's task: block, or with "
                        "--tcp-frame.") from None
    return name


def _check_fingers(engine: QuasistaticSimulator, task: PickPlaceTask, gripper) -> None:
    """Check each finger joint: a commanded sliding joint of the gripper, open/closed inside."""
    source, plant = engine.scenario.source, engine.model.plant
    joints = list(gripper.joint_names)
    following = {f.joint_name: f.leader_name for f in gripper.followers}
    for i, finger in enumerate(task.fingers):
        key = f"{source}: task.fingers[{i}]"
        if finger.joint in following:
            raise TaskError(f"{key}.joint: '{finger.joint}' follows "
                            f"'{following[finger.joint]}' (a coupled joint) and takes no "
                            "command. Fix: list the joint it follows instead.")
        if finger.joint not in joints:
            elsewhere = [r.name for r in engine.model.robots if finger.joint in r.joint_names]
            hint = f" (it is a joint of {elsewhere}: set task.gripper)" if elsewhere else ""
            raise TaskError(f"{key}.joint: robot '{gripper.name}' has no joint "
                            f"'{finger.joint}'{hint}; its joints are {joints}. Fix: list "
                            "the gripper's finger joints.")
        joint = plant.GetJointByName(finger.joint, gripper.instance)
        if joint.type_name() != "prismatic":
            raise TaskError(f"{key}.joint: '{finger.joint}' is a {joint.type_name()} joint; "
                            "the demo's grasp needs fingers that slide (prismatic joints).")
        lower, upper = joint.position_lower_limits()[0], joint.position_upper_limits()[0]
        for value, end in ((finger.open, "open"), (finger.closed, "closed")):
            if not lower - 1e-12 <= value <= upper + 1e-12:
                raise TaskError(f"{key}.{end}: {value:g} is outside the limits "
                                f"[{lower:g}, {upper:g}] of joint '{finger.joint}'. Fix: "
                                "give a position within them.")


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
    object_in_tcp: RigidTransform = field(default_factory=RigidTransform)   # X_TO
    finger_clearance: float = np.inf     # [m] fingers' lowest point above the support


HELD = ("lift", "carry", "place")        # the waypoints the object is carried through


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
    grasp: Optional["GraspGeometry"] = None

    @property
    def step_times(self) -> np.ndarray:
        """Return the plant update time of every step [s]."""
        return np.array([r.step_time for r in self.records])

    @property
    def max_carry_tilt_deg(self) -> float:
        """Return the object's largest tilt while carried (lift, carry, place) [deg]."""
        return float(max((r.tilt_deg for r in self.records if r.waypoint in HELD),
                         default=0.0))

    def grasp_slip(self) -> tuple[float, float]:
        """
        Return the object's largest slip in the grasp: (translation [m], rotation [deg]).

        Its pose in the TCP frame from the last 'close' step (the grasp
        closed) through the last 'place' step (before the fingers open).
        """
        labels = [r.waypoint for r in self.records]
        if "close" not in labels or "open" not in labels:
            return 0.0, 0.0
        closed = len(labels) - 1 - labels[::-1].index("close")
        released = labels.index("open")
        return grasp_slip([r.object_in_tcp for r in self.records[closed:released]])

    def summary(self) -> dict:
        """Return the JSON summary; its keys are binding, do not rename them."""
        slip_m, slip_deg = self.grasp_slip()
        summary = {
            "object_initial_xyz": self.object_initial_xyz.tolist(),
            "object_final_xyz": self.object_final_xyz.tolist(),
            "place_target_xyz": self.place_target_xyz.tolist(),
            "max_object_lift": float(max(r.object_xyz[2] for r in self.records)
                                     - self.object_initial_xyz[2]),
            "final_tilt_deg": self.final_tilt_deg,
            "max_carry_tilt_deg": self.max_carry_tilt_deg,
            "grasp_slip_mm": slip_m * 1e3,
            "grasp_slip_deg": slip_deg,
            "min_finger_clearance_m": float(min(r.finger_clearance for r in self.records)),
            "min_signed_distance": self.min_signed_distance,
            "steps": int(len(self.step_times)),
            "step_time_ms": {"median": float(np.median(self.step_times) * 1e3),
                             "max": float(np.max(self.step_times) * 1e3)},
            "formulation": self.formulation,
            "failed_steps": int(sum(r.status != "optimal" for r in self.records)),
            "place_error_m": float(np.linalg.norm(
                self.object_final_xyz[:2] - self.place_target_xyz[:2])),
        }
        if self.grasp is not None:
            summary["grasp"] = self.grasp.summary()
        return summary


@dataclass(frozen=True)
class GraspGeometry:
    """
    Where the TCP goes relative to the object's origin, where the fingers close to, and why.

    ``limited_by`` is 'palm' when the palm stops ``palm_clearance`` above the
    object's top, or 'fingers' when the object is too short for that: the
    fingers' lowest point then stops ``finger_clearance`` above the surface
    the object rests on, and the palm stays higher.
    """

    height: float                        # TCP above the object's origin [m]
    finger_closed: np.ndarray            # each finger's joint position of the squeeze [m]
    limited_by: str = "palm"             # 'palm' or 'fingers'
    palm_above_top: float = np.nan       # [m] the palm's face above the object's top
    fingers_above_support: float = np.nan   # [m] the fingers' lowest point above the support
    support_height: float = np.nan       # [m] world z of the surface the object rests on

    def summary(self) -> dict:
        """Return the planned grasp as the demo's JSON summary gives it."""
        return {"limited_by": self.limited_by, "palm_above_top_m": self.palm_above_top,
                "fingers_above_support_m": self.fingers_above_support}


def gripper_down(X_WT_start: RigidTransform) -> RotationMatrix:
    """Return the TCP orientation pointing the fingers down, with the start's yaw."""
    yaw = RollPitchYaw(X_WT_start.rotation()).yaw_angle()
    return RotationMatrix(RollPitchYaw(np.pi, 0.0, yaw))


def grasp_geometry(engine: QuasistaticSimulator, planner: DiffIkPlanner, q: np.ndarray,
                   name: str, R_WT: RotationMatrix, task: PickPlaceTask) -> GraspGeometry:
    """
    Return the grasp for object ``name`` at q, from the collision geometry.

    With the TCP at orientation R_WT over the object's origin, each finger's
    pad meets the object at half its width along the finger's axis, and its
    reference closes ``squeeze`` past that.  The TCP's height is
    :func:`grasp_height`'s.
    """
    closed = finger_targets(engine, planner, q, name, R_WT, task)
    return grasp_height(engine, planner, q, name, task, closed)


def finger_targets(engine: QuasistaticSimulator, planner: DiffIkPlanner, q: np.ndarray,
                   name: str, R_WT: RotationMatrix, task: PickPlaceTask) -> np.ndarray:
    """Return each finger's joint position that squeezes the object ``squeeze`` past its side."""
    source = engine.scenario.source
    origin = engine.object_pose(q, name).translation()
    half_widths, opening, closed = [], [], []
    for i, (finger, column) in enumerate(zip(task.fingers, planner.finger_idx)):
        direction, inner = closing_direction(planner, column, finger, i, source)
        axis = R_WT.multiply(direction if direction[np.argmax(np.abs(direction))] > 0.0
                             else -direction)
        centre = origin @ axis
        half_width = 0.5 * (object_extent(engine, q, name, axis) - centre
                            + object_extent(engine, q, name, -axis) + centre)
        sign = np.sign(finger.closed - finger.open)
        half_widths.append(half_width)
        opening.append(-inner)
        # the pad moves |dq| along ``direction``: it touches at open + sign (-inner - half_width)
        closed.append(finger.open - sign * inner - sign * half_width + sign * task.squeeze)
    if any(w > o for w, o in zip(half_widths, opening)):
        raise PlanningError(f"object '{name}' is {sum(half_widths) * 1e3:.0f} mm wide across "
                            f"the fingers; the gripper opens to {sum(opening) * 1e3:.0f} mm. "
                            "Fix: a smaller object or fingers that open wider "
                            "(task.fingers[].open).")
    for finger, target in zip(task.fingers, closed):
        if (target - finger.closed) * np.sign(finger.closed - finger.open) > 0.0:
            raise PlanningError(
                f"object '{name}' is {sum(half_widths) * 1e3:.0f} mm wide across the fingers: "
                f"squeezing it by {task.squeeze * 1e3:.0f} mm takes finger '{finger.joint}' to "
                f"{target:.4g}, past its closed position {finger.closed:g}. Fix: a wider "
                "object, a smaller task.squeeze, or task.fingers[].closed further in.")
    return np.array(closed)


def grasp_height(engine: QuasistaticSimulator, planner: DiffIkPlanner, q: np.ndarray,
                 name: str, task: PickPlaceTask, closed: np.ndarray) -> GraspGeometry:
    """
    Return the grasp with the TCP as low as the palm and the fingers allow.

    The palm stops ``palm_clearance`` above the object's top, unless the
    fingers would then come closer than ``finger_clearance`` to the surface
    the object rests on (its lowest point at q): the fingers' reach along
    the TCP's z, open and squeezed, sets the lowest TCP.  The same holds at
    the place, which is the grasp moved by ``place_offset``.  An object too
    short for the fingers to reach its side from there is a TaskError.
    """
    origin = engine.object_pose(q, name).translation()[2]
    top = object_extent(engine, q, name, np.array([0.0, 0.0, 1.0]))
    support = -object_extent(engine, q, name, np.array([0.0, 0.0, -1.0]))
    palm = task.tcp_to_palm if task.tcp_to_palm is not None else palm_depth(planner, task)
    squeezed = planner.q_start.copy()
    squeezed[planner.finger_idx] = closed
    opened = planner.q_start.copy()
    opened[planner.finger_idx] = [f.open for f in task.fingers]
    reach = fingers_reach(planner, finger_bodies(planner), (opened, squeezed))
    by_palm = top + task.palm_clearance - palm
    by_fingers = support + task.finger_clearance + reach
    if support + task.finger_clearance >= top:
        raise TaskError(
            f"{engine.scenario.source}: task.finger_clearance: object '{name}' is "
            f"{(top - support) * 1e3:.1f} mm tall; with the fingers kept "
            f"{task.finger_clearance * 1e3:.1f} mm above the surface it rests on they would "
            "not reach its sides. Fix: a smaller task.finger_clearance, or a taller object.")
    tcp = max(by_palm, by_fingers)
    return GraspGeometry(height=tcp - origin, finger_closed=closed,
                         limited_by="fingers" if by_fingers > by_palm else "palm",
                         palm_above_top=tcp + palm - top,
                         fingers_above_support=tcp - reach - support, support_height=support)


def finger_bodies(planner: DiffIkPlanner) -> set[int]:
    """
    Return every finger's bodies: its joint's child, and what is welded to it.

    A jaw coupled to a finger joint (drake:mimic) is a finger too.
    """
    plant = planner.plant
    gripper = planner.model.robot(planner.gripper)
    fingers = {planner.joint_names[column] for column in planner.finger_idx}
    joints = fingers | {f.joint_name for f in gripper.followers if f.leader_name in fingers}
    bodies = set()
    for joint in joints:
        child = plant.GetJointByName(joint, gripper.instance).child_body()
        bodies |= {int(b.index()) for b in plant.GetBodiesWeldedTo(child)}
    return bodies


def check_tcp_frame(planner: DiffIkPlanner, task: PickPlaceTask, source: str) -> None:
    """
    Check the TCP frame's convention on the gripper's geometry (gripper.tcp_axis_fix).

    The fingers (each finger's collision points, open, from the palm's
    centre, without their closing direction) must point along the TCP's +z,
    and no finger may close along z.  Raises TaskError naming
    ``task.tcp_frame``, the axis the fingers point along and the rotation
    that fixes the frame.
    """
    centres, directions, closes_along_z = [], [], False
    for finger, column in zip(task.fingers, planner.finger_idx):
        bodies, direction = finger_motion(planner, column, finger.open, finger.closed)
        q_open = planner.q_start.copy()
        q_open[column] = finger.open
        points, _ = planner.points_in_tcp(q_open, bodies)
        if len(points) == 0:
            continue                     # closing_direction says it has nothing to grasp with
        centres.append(points.mean(axis=0))
        directions.append(direction)
        closes_along_z |= abs(direction[2]) > CLOSING_ALONG_Z
    if not centres:
        return
    try:
        axis = principal_axis(finger_axis(centres, directions, palm_centre(planner)))
    except PlanningError as err:
        raise TaskError(f"{source}: task.tcp_frame: frame '{task.tcp_frame}': {err} Fix: "
                        "check task.fingers and the gripper's collision geometry.") from None
    problem = tcp_axis_fix(axis, closes_along_z)
    if problem is not None:
        raise TaskError(f"{source}: task.tcp_frame: frame '{task.tcp_frame}': {problem}")


def _nanometres(value):
    """
    Return a length (or direction) measured on the models, rounded to 1e-9.

    Poses composed through the kinematic tree carry float noise of about
    1e-17 m; rounding keeps a model's round dimensions exact (the WSG's pads
    at q, its palm 0.045 m from the TCP), so the default demo plans as
    before the grasp was measured.
    """
    return np.round(value, 9)


def closing_direction(planner: DiffIkPlanner, column: int, finger: Finger, i: int,
                      source: str) -> tuple[np.ndarray, float]:
    """
    Return the direction a finger moves in from open to closed (TCP frame) and its pad.

    The pad is the finger's collision geometry furthest along that direction
    with the finger open, measured from the TCP: negative while the finger is
    on its far side of the TCP, as it must be to close on an object there.
    """
    joint_name = planner.joint_names[column]
    bodies, direction = finger_motion(planner, column, finger.open, finger.closed)
    q_open = planner.q_start.copy()
    q_open[column] = finger.open
    points, radii = planner.points_in_tcp(q_open, bodies)
    key = f"{source}: task.fingers[{i}]"
    if len(points) == 0:
        raise TaskError(f"{key}.joint: finger '{joint_name}' has no collision geometry to "
                        "grasp with. Fix: list the joints of fingers with collision geometry.")
    if abs(direction[2]) > CLOSING_ALONG_Z:
        raise TaskError(f"{source}: task.tcp_frame: finger '{joint_name}' closes along the z "
                        "axis of the TCP frame, but the planner points that axis along the "
                        "fingers and closes them across it. Fix: a TCP frame whose z axis "
                        "points from the palm towards the fingertips.")
    inner = float(_nanometres(np.max(points @ direction + radii)))
    if inner >= 0.0:
        raise TaskError(f"{key}: from open ({finger.open:g}) to closed ({finger.closed:g}) "
                        f"finger '{joint_name}' moves away from the TCP between the fingers. "
                        "Fix: swap open and closed, or check the TCP frame (task.tcp_frame).")
    return direction, inner


def palm_depth(planner: DiffIkPlanner, task: PickPlaceTask) -> float:
    """
    Return how far the palm's face is from the TCP, along the TCP's z axis (towards the arm).

    The palm is the collision geometry welded to the TCP frame's body.
    """
    plant = planner.plant
    bodies = {int(b.index()) for b in plant.GetBodiesWeldedTo(planner.tcp.body())}
    points, radii = planner.points_in_tcp(planner.q_start, bodies)
    if len(points) == 0:
        raise PlanningError(f"{planner.model.scenario.source}: task.tcp_to_palm: nothing with "
                            f"collision geometry is welded to the TCP frame "
                            f"'{task.tcp_frame}', so the palm cannot be measured. Fix: give "
                            "task.tcp_to_palm, the distance from the TCP up to the palm [m].")
    return -float(_nanometres(np.max(points[:, 2] + radii)))


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
    opened = np.array([f.open for f in task.fingers])
    closed, d = grasp.finger_closed, task.durations
    steps = [("pre-grasp", at_grasp + task.approach_height * up, opened),
             ("descend", at_grasp, opened),
             ("close", at_grasp, closed),
             ("lift", at_grasp + task.lift_height * up, closed),
             ("carry", at_place + task.lift_height * up, closed),
             ("place", at_place, closed),
             ("open", at_place, opened),
             ("retreat", at_place + task.approach_height * up, opened)]
    waypoints = [Waypoint(label, RigidTransform(R_WT, p), g, d[label]) for label, p, g in steps]
    return waypoints, target


@dataclass(frozen=True)
class PlannedTask:
    """The demo's plan and what the run measures against: the grasp, the TCP, the fingers."""

    plan: JointVelocityPlan
    target: np.ndarray                   # the place target (the object's origin) [m]
    name: str                            # the object picked
    grasp: GraspGeometry
    planner: DiffIkPlanner               # its Context measures the TCP and the fingers
    fingers: frozenset                   # the fingers' body indices


def plan_task(engine: QuasistaticSimulator, task: Optional[PickPlaceTask] = None) -> PlannedTask:
    """
    Return the task's plan from the engine's initial state, with its grasp.

    ``task`` defaults to the scenario's (PickPlaceTask.from_scenario).  The
    task is checked against the models first (checked_task, then the TCP's
    convention: check_tcp_frame).  The plan's columns are the arm's and the
    gripper's joints (one robot's when they are the same).
    """
    scenario = engine.scenario
    task = task if task is not None else PickPlaceTask.from_scenario(scenario)
    name = checked_task(engine, task)
    q0 = engine.default_positions()
    try:
        planner = DiffIkPlanner(engine.model, task.robot, task.tcp_frame, task.finger_joints,
                                task.gripper_robot)
    except PlanningError as err:    # what checked_task leaves: a TCP the arm does not move
        raise TaskError(f"{scenario.source}: task.tcp_frame: {err} Fix: a frame on the "
                        "arm's last link or on a gripper welded to it.") from None
    check_tcp_frame(planner, task, scenario.source)
    q_robot = planner.q_start
    R_WT = gripper_down(planner.tcp_pose(q_robot))
    grasp = grasp_geometry(engine, planner, q0, name, R_WT, task)
    waypoints, target = pick_and_place_waypoints(engine.object_pose(q0, name), R_WT, grasp,
                                                 task)
    plan = planner.plan(q_robot, waypoints, scenario.time_step)
    if scenario.formulation == "miqp":
        stiffness = scenario.settings('miqp').contact_stiffness
        speed = task.hold_force / (stiffness * scenario.time_step)
        closing = np.sign([f.closed - f.open for f in task.fingers])
        plan = hold_squeeze(plan, planner.finger_idx, speed, closing)
    return PlannedTask(plan=plan, target=target, name=name, grasp=grasp, planner=planner,
                       fingers=frozenset(finger_bodies(planner)))


def plan_pick_and_place(engine: QuasistaticSimulator,
                        task: Optional[PickPlaceTask] = None) -> tuple:
    """Return (plan, place target, object name): :func:`plan_task`'s, for the callers of old."""
    planned = plan_task(engine, task)
    return planned.plan, planned.target, planned.name


def hold_squeeze(plan: JointVelocityPlan, finger_idx: np.ndarray, speed: float,
                 closing: Optional[np.ndarray] = None) -> JointVelocityPlan:
    """
    Keep closing the fingers at ``speed`` from the 'close' waypoint until 'open'.

    ``closing`` is each finger's closing direction (+1 or -1; default -1,
    the WSG's).  Under the MIQP the robot follows its command and is no
    spring: the grasp force comes only from the normal-force lower bound
    K * phibar of eq. 23f, so the command must keep squeezing while the
    object is held, as eq. 29 does in Pang & Tedrake 2018's example.
    speed = F / (K h) gives about F per finger (eq. 23f bounds the sum over
    the points of a body pair).
    """
    closing = -np.ones(len(finger_idx)) if closing is None else np.asarray(closing, float)
    velocities = plan.velocities.copy()
    held = range(plan.step_range("close").start, plan.step_range("open").start)
    for k in held:
        velocities[k, finger_idx] += speed * closing
    q_ref = plan.q_ref[0] + plan.time_step * np.vstack(
        [np.zeros(velocities.shape[1]), np.cumsum(velocities, axis=0)])
    return replace(plan, velocities=velocities, q_ref=q_ref)


def run_pick_and_place(scenario: Scenario, task: Optional[PickPlaceTask] = None,
                       meshcat: Optional[Meshcat] = None, realtime_rate: float = 0.0,
                       html: Optional[Path] = None,
                       on_step: Optional[Callable[[StepRecord], None]] = None) -> DemoRun:
    """
    Plan, then simulate the task in a Diagram; draw it in ``meshcat`` if given.

    ``task`` defaults to the scenario's (PickPlaceTask.from_scenario).  With
    ``html`` (and ``meshcat``) the run is recorded and saved as a
    self-contained page.  ``on_step`` sees every step as it is taken.
    """
    task = task if task is not None else PickPlaceTask.from_scenario(scenario)
    builder = DiagramBuilder()
    plant = builder.AddSystem(QuasistaticPlant(scenario))
    planned = plan_task(plant.engine, task)
    plan = planned.plan
    for robot, _ in plan.robots:
        source = builder.AddSystem(plan.command_source(robot))
        builder.Connect(source.get_output_port(),
                        plant.get_velocity_command_input_port(robot))
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
    object_port = plant.get_object_pose_output_port(planned.name)
    initial = object_port.Eval(context).translation().copy()
    fingers = _finger_indices(plant, task)
    records, min_phi = [], np.inf
    for k in range(plan.steps):
        simulator.AdvanceTo((k + 1) * scenario.time_step)
        record = _step_record(plant, context, planned, task, fingers, k)
        records.append(record)
        min_phi = min(min_phi, plant.get_step_status_output_port().Eval(
            context).min_signed_distance)
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
        object_final_xyz=X_final.translation().copy(), place_target_xyz=planned.target,
        final_tilt_deg=tilt_deg(X_final.rotation()), min_signed_distance=float(min_phi),
        records=tuple(records), plan=plan, grasp=planned.grasp)


def _step_record(plant: QuasistaticPlant, context, planned: PlannedTask, task: PickPlaceTask,
                 fingers: np.ndarray, k: int) -> StepRecord:
    """
    Return step k's record from the plant's outputs after it.

    The object's pose in the TCP frame and the fingers' lowest point are
    measured in the planner's own Context, at the robots' simulated positions.
    """
    time_step = planned.plan.time_step
    outcome = plant.get_step_status_output_port().Eval(context)
    X_WO = plant.get_object_pose_output_port(planned.name).Eval(context)
    q_robots = np.concatenate([plant.get_robot_positions_output_port(robot).Eval(context)
                               for robot, _ in planned.plan.robots])
    X_WT = planned.planner.tcp_pose(q_robots)
    lowest = lowest_point(planned.planner, q_robots, set(planned.fingers))
    gripper = plant.get_robot_positions_output_port(task.gripper_robot).Eval(context)
    return StepRecord(
        step=k, time=(k + 1) * time_step, waypoint=planned.plan.labels[k],
        object_xyz=X_WO.translation().copy(), tilt_deg=tilt_deg(X_WO.rotation()),
        gripper=gripper[fingers].copy(), contacts=len(outcome.contacts),
        status=outcome.status, step_time=outcome.step_time,
        object_in_tcp=X_WT.inverse() @ X_WO,
        finger_clearance=lowest - planned.grasp.support_height)


def _finger_indices(plant: QuasistaticPlant, task: PickPlaceTask) -> np.ndarray:
    """Return the finger joints' indices among the gripper robot's joints."""
    names = plant.engine.robot_joint_names(task.gripper_robot)
    return np.array([names.index(j) for j in task.finger_joints], dtype=int)


def tilt_deg(R: RotationMatrix) -> float:
    """Return the angle between a body's z axis and the world's z axis, in degrees."""
    return float(np.degrees(np.arccos(np.clip(R.matrix()[2, 2], -1.0, 1.0))))
