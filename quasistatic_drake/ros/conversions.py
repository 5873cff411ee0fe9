"""
Drake values to ROS 2 messages: pure functions, no node, no spinning.

Times are simulated seconds; stamps are ``builtin_interfaces/Time`` of that
time (sim time, as /clock publishes it).  Poses become
``geometry_msgs/TransformStamped`` with parent ``world``.
"""

from __future__ import annotations

import json
import math
from typing import Sequence

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import TransformStamped
from pydrake.math import RigidTransform
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage

from quasistatic_drake.quasistatic_plant import StepOutcome
from quasistatic_drake.ros.frames import Frame, WORLD
from quasistatic_drake.ros.session import JointSample


def time_msg(seconds: float) -> Time:
    """Return the stamp of ``seconds`` (>= 0), rounded to the nanosecond."""
    sec, nanosec = divmod(int(round(seconds * 1e9)), 1_000_000_000)
    return Time(sec=sec, nanosec=nanosec)


def stamp_seconds(stamp: Time) -> float:
    """Return a stamp as seconds."""
    return stamp.sec + 1e-9 * stamp.nanosec


def clock_msg(seconds: float) -> Clock:
    """Return the /clock message of sim time ``seconds``."""
    return Clock(clock=time_msg(seconds))


def joint_state_msg(names: Sequence[str], sample: JointSample) -> JointState:
    """Return /joint_states: names, positions and velocities, stamped with sim time."""
    msg = JointState()
    msg.header.stamp = time_msg(sample.time)
    msg.name = list(names)
    msg.position = [float(x) for x in sample.positions]
    msg.velocity = [float(x) for x in sample.velocities]
    return msg


def transform_msg(X_WB: RigidTransform, child: str, stamp: Time) -> TransformStamped:
    """Return world -> child for the pose X_WB."""
    msg = TransformStamped()
    msg.header.stamp = stamp
    msg.header.frame_id = WORLD
    msg.child_frame_id = child
    p = X_WB.translation()
    q = X_WB.rotation().ToQuaternion()
    t, r = msg.transform.translation, msg.transform.rotation
    t.x, t.y, t.z = float(p[0]), float(p[1]), float(p[2])
    r.w, r.x, r.y, r.z = float(q.w()), float(q.x()), float(q.y()), float(q.z())
    return msg


def tf_msg(frames: Sequence[Frame], poses: Sequence[RigidTransform], seconds: float) -> TFMessage:
    """Return a TFMessage with world -> frame for every frame, at sim time ``seconds``."""
    stamp = time_msg(seconds)
    return TFMessage(transforms=[transform_msg(poses[f.body_index], f.name, stamp)
                                 for f in frames])


def status_dict(outcome: StepOutcome, sim_time: float, paused: bool, commands_accepted: int,
                commands_rejected: int, failed_steps: int, real_time_factor: float) -> dict:
    """
    Return the ~/status fields (the README's table documents them).

    ``min_phi`` is null while no pair is within reach (inf); times are seconds.
    """
    min_phi = outcome.min_signed_distance
    return {
        "time": sim_time,
        "steps": outcome.steps,
        "status": outcome.status,
        "success": outcome.success,
        "min_phi": min_phi if math.isfinite(min_phi) else None,
        "solve_time": outcome.solve_time,
        "step_time": outcome.step_time,
        "contacts": len(outcome.contacts),
        "failed_steps": failed_steps,
        "paused": paused,
        "real_time_factor": real_time_factor if math.isfinite(real_time_factor) else None,
        "commands_accepted": commands_accepted,
        "commands_rejected": commands_rejected,
    }


def status_msg(fields: dict) -> String:
    """Return ~/status: the fields as one JSON object in std_msgs/String."""
    return String(data=json.dumps(fields, default=_json_default))


def _json_default(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, np.bool_):
        return bool(value)
    raise TypeError(f"cannot encode {type(value).__name__} in ~/status")
