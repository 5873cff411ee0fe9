"""
The gripper as the pick-and-place demo sees it: its TCP convention, its reach, the grasp's slip.

The planner (planning.DiffIkPlanner) drives a tool centre point (TCP) frame
whose z axis points along the fingers, from the palm towards the
fingertips (down, towards the object, when it grasps from above), and it
closes the fingers across that axis.  A third party's gripper rarely comes
with such a frame: Drake's WSG 50 points its y axis along the fingers, so a
user adds one with an ``add_frame`` directive.  Everything here is measured
on the collision geometry, in the TCP frame:

* the fingers' axis: from the palm's centre to the fingers' centre, with
  each finger's closing direction taken out; it must be the TCP's +z
  (:func:`tcp_axis_fix` says how to rotate a frame that points elsewhere);
* the fingers' reach: the deepest point of any finger's geometry along the
  TCP's z, open and closed; the demo keeps it above the surface the object
  rests on (pick_and_place.grasp_geometry);
* the grasp's slip: the object's pose in the TCP frame from the moment the
  fingers have closed to the moment they open.

The math (axes, rotations, slip) takes plain arrays; the functions that
read the model take the planner, whose Context they use.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
from pydrake.math import RigidTransform, RotationMatrix

from quasistatic_drake.apps.planning import DiffIkPlanner, PlanningError
from quasistatic_drake.scenario import ScenarioError

AXIS_NAMES = "xyz"
# The rotation about one of its own axes that turns a frame's z axis onto its (axis, sign):
# (angle [deg], the axis turned about, the same as roll-pitch-yaw [deg]).
Z_ONTO = {(0, 1): (90, "y", (0, 90, 0)), (0, -1): (-90, "y", (0, -90, 0)),
          (1, 1): (-90, "x", (-90, 0, 0)), (1, -1): (90, "x", (90, 0, 0)),
          (2, -1): (180, "x", (180, 0, 0))}
CLOSING_ALONG_Z = 0.5      # |z| of a finger's closing direction beyond which it closes along z


class TaskError(ScenarioError, PlanningError):
    """
    A ``task:`` block that does not fit the scenario's models; the message names task.<key>.

    A ScenarioError (the scenario must change) and a PlanningError (what the
    demo's callers already catch for the task's other checks).
    """


# ----- the math: axes, rotations, slip ----------------------------------------------------
def principal_axis(direction: np.ndarray) -> tuple[int, int]:
    """Return (index, sign) of the frame axis nearest ``direction`` (0, 1, 2 for x, y, z)."""
    index = int(np.argmax(np.abs(direction)))
    return index, 1 if direction[index] > 0.0 else -1


def finger_axis(finger_centres: Sequence[np.ndarray], closing: Sequence[np.ndarray],
                palm_centre: np.ndarray) -> np.ndarray:
    """
    Return the unit direction from the palm along the fingers, in the TCP frame.

    Each finger contributes its centre's offset from the palm's centre with
    the part along its closing direction taken out, so two fingers that
    stand apart across the TCP count only by how far they reach.
    """
    total = np.zeros(3)
    for centre, direction in zip(finger_centres, closing):
        offset = np.asarray(centre, float) - palm_centre
        total += offset - (offset @ direction) * direction
    norm = np.linalg.norm(total)
    if norm == 0.0:
        raise PlanningError("the fingers do not reach beyond the palm.")
    return total / norm


def tcp_axis_fix(axis: tuple[int, int], closes_along_z: bool) -> Optional[str]:
    """
    Return what is wrong with a TCP frame whose fingers point along ``axis``, and the fix.

    ``axis`` is (index, sign) of the TCP axis the fingers point along (from
    the palm towards the fingertips); None when it is +z and the fingers do
    not close along z.
    """
    if axis == (2, 1) and not closes_along_z:
        return None
    index, sign = axis
    if axis == (2, 1):
        what = "the fingers close along its z axis"
        return (f"{what}. The planner closes them across the TCP's z axis, which points "
                "along the fingers. Fix: a TCP frame whose z axis points from the palm "
                "towards the fingertips and whose x-y plane holds the closing direction.")
    if index == 2:
        what = ("its z axis points away from the fingers (from the fingertips back to the "
                "palm: up, when the gripper grasps from above)")
    else:
        what = (f"the fingers point along its {'+' if sign > 0 else '-'}{AXIS_NAMES[index]} "
                "axis, not along its z axis")
    if closes_along_z:
        what += ", and the fingers close along its z axis"
    angle, about, rpy = Z_ONTO[axis]
    return (f"{what}. The planner points the TCP's z axis along the fingers, from the palm "
            "towards the fingertips (down, towards the object, when it grasps from above), "
            f"and closes the fingers across it. Fix: rotate the frame {angle} degrees about "
            f"its own {about} axis (for a frame added by add_frame: compose its X_PF "
            f"rotation with !Rpy {{deg: [{rpy[0]}, {rpy[1]}, {rpy[2]}]}}), so that its z "
            "axis points from the palm to the fingertips.")


def rotation_angle_deg(R: RotationMatrix) -> float:
    """Return the angle of a rotation, in degrees (0 to 180)."""
    cosine = 0.5 * (np.trace(R.matrix()) - 1.0)
    return float(np.degrees(np.arccos(np.clip(cosine, -1.0, 1.0))))


def grasp_slip(object_in_tcp: Sequence[RigidTransform]) -> tuple[float, float]:
    """
    Return the largest slip of a held object: (translation [m], rotation [deg]).

    ``object_in_tcp`` are the object's poses in the TCP frame, the first
    when the grasp closed; the slip is each pose's distance and angle from
    that first one.
    """
    if not object_in_tcp:
        return 0.0, 0.0
    first = object_in_tcp[0]
    shifts = [np.linalg.norm(X.translation() - first.translation()) for X in object_in_tcp]
    turns = [rotation_angle_deg(first.rotation().inverse() @ X.rotation())
             for X in object_in_tcp]
    return float(max(shifts)), float(max(turns))


# ----- the measurements on the model ------------------------------------------------------
def finger_motion(planner: DiffIkPlanner, column: int, open_: float,
                  closed: float) -> tuple[set[int], np.ndarray]:
    """
    Return a finger's bodies and the unit direction it closes in (TCP frame).

    The bodies are those welded to the finger joint's child; the direction
    is how the child's origin moves from ``open_`` to ``closed``, rounded to
    1e-9 so that a model's round axes stay exact.
    """
    plant = planner.plant
    instance = planner.model.robot(planner.gripper).instance
    child = plant.GetJointByName(planner.joint_names[column], instance).child_body()
    bodies = {int(b.index()) for b in plant.GetBodiesWeldedTo(child)}
    at = []
    for value in (open_, closed):
        q = planner.q_start.copy()
        q[column] = value
        X_TW = planner.tcp_pose(q).inverse()
        at.append((X_TW @ plant.EvalBodyPoseInWorld(planner.context, child)).translation())
    motion = at[1] - at[0]
    direction = np.round(motion / np.linalg.norm(motion), 9)
    return bodies, direction / np.linalg.norm(direction)


def palm_bodies(planner: DiffIkPlanner) -> set[int]:
    """Return the bodies welded to the TCP frame's body: the palm (and what it is welded to)."""
    return {int(b.index()) for b in planner.plant.GetBodiesWeldedTo(planner.tcp.body())}


def palm_centre(planner: DiffIkPlanner) -> np.ndarray:
    """Return the centre of the palm's collision points in the TCP frame (or its body origin)."""
    points, _ = planner.points_in_tcp(planner.q_start, palm_bodies(planner))
    if len(points):
        return points.mean(axis=0)
    return planner.tcp.GetFixedPoseInBodyFrame().inverse().translation()


def fingers_reach(planner: DiffIkPlanner, bodies: set[int],
                  configurations: Sequence[np.ndarray]) -> float:
    """
    Return how far the fingers reach along the TCP's z: the largest p_z + radius.

    Over the collision geometry of ``bodies`` in each of ``configurations``
    (the planned robots' positions: the gripper open, and closed).
    """
    reach = -np.inf
    for q in configurations:
        points, radii = planner.points_in_tcp(q, bodies)
        reach = max(reach, float(np.max(points[:, 2] + radii, initial=-np.inf)))
    if not np.isfinite(reach):
        raise PlanningError("the fingers have no collision geometry to measure.")
    return float(np.round(reach, 9))


def lowest_point(planner: DiffIkPlanner, q: np.ndarray, bodies: set[int]) -> float:
    """Return the world height of the lowest point of the bodies' collision geometry at q."""
    points, radii = planner.points_in_tcp(q, bodies)
    if len(points) == 0:
        return np.inf
    heights = planner.tcp_pose(q).multiply(points.T).T[:, 2] - radii
    return float(np.min(heights))
