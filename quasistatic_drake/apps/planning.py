"""
A small planner for the arm demo: differential IK over end-effector waypoints.

The plan is made on the robot alone (a MultibodyPlant holding only the robot
model, welded as in the scenario) and on the commanded-position reference:
each step k asks Drake's ``DoDifferentialInverseKinematics`` for the arm
joint velocities that move the tool centre point (TCP) frame to its desired
pose at t_{k+1}, within the joint position and velocity limits, and moves
the gripper fingers at a bounded speed towards their waypoint opening.  The
result is one joint velocity command per step; fed to the simulator it
advances the reference exactly as planned (QuasistaticSimulator's qbar_a),
and the springs pull the real joints after it.

Between waypoints the TCP position is interpolated linearly and its
orientation by slerp, both with the smooth time scaling s = 3 tau^2 - 2 tau^3,
so the motion starts and stops at rest.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np
from pydrake.common.eigen_geometry import Quaternion
from pydrake.math import RigidTransform, RotationMatrix
from pydrake.multibody.inverse_kinematics import (DifferentialInverseKinematicsParameters,
                                                  DifferentialInverseKinematicsStatus,
                                                  DoDifferentialInverseKinematics)
from pydrake.multibody.tree import JacobianWrtVariable
from pydrake.systems.primitives import TrajectorySource
from pydrake.trajectories import PiecewisePolynomial

from quasistatic_drake.model import QuasistaticModel
from quasistatic_drake.scenario import Scenario

FINGER_SPEED = 0.05        # [m/s] fastest finger motion the planner commands


class PlanningError(RuntimeError):
    """The planner could not follow the waypoints (a pose out of reach, a bad waypoint)."""


@dataclass(frozen=True)
class Waypoint:
    """Reach TCP pose ``X_WT`` and finger opening ``gripper`` after ``duration`` seconds."""

    label: str
    X_WT: RigidTransform
    gripper: float          # each finger's joint position [m] (half the opening)
    duration: float         # [s] of the segment that ends here


@dataclass(frozen=True)
class JointVelocityPlan:
    """
    One joint velocity command per step, for one robot.

    ``velocities[k]`` is held over [k h, (k + 1) h]; ``q_ref[k]`` is the
    reference at k h (``q_ref[0]`` the start) and ``labels[k]`` the waypoint
    the step moves towards.
    """

    time_step: float
    velocities: np.ndarray      # (N, n_a)
    q_ref: np.ndarray           # (N + 1, n_a)
    labels: tuple[str, ...]
    tcp_desired: np.ndarray     # (N + 1, 3) desired TCP position at each k h
    tcp_planned: np.ndarray     # (N + 1, 3) the plan's TCP position at each k h

    @property
    def steps(self) -> int:
        """Return the number of steps N."""
        return len(self.velocities)

    def command_source(self) -> TrajectorySource:
        """Return a TrajectorySource that holds ``velocities[k]`` over [k h, (k + 1) h)."""
        n = self.steps
        times = self.time_step * np.arange(n + 1)
        values = np.vstack([self.velocities, self.velocities[-1:] * 0.0]).T
        return TrajectorySource(PiecewisePolynomial.ZeroOrderHold(times, values))

    def step_range(self, label: str) -> range:
        """Return the steps that move towards the waypoint ``label``."""
        steps = [k for k, name in enumerate(self.labels) if name == label]
        if not steps:
            raise KeyError(f"no waypoint '{label}' in the plan; waypoints: "
                           f"{sorted(set(self.labels))}")
        return range(steps[0], steps[-1] + 1)


class DiffIkPlanner:
    """Plans joint velocity commands for one robot of a scenario (module docstring)."""

    def __init__(self, scenario: Scenario, robot: str, tcp_frame: str,
                 finger_joints: Sequence[str] = ()):
        """Use ``robot`` of ``scenario``; ``finger_joints`` follow Waypoint.gripper."""
        specs = [r for r in scenario.robots if r.name == robot]
        if not specs:
            raise PlanningError(f"scenario {scenario.source} has no robot '{robot}'; robots: "
                                f"{[r.name for r in scenario.robots]}")
        alone = replace(scenario, robots=tuple(specs), objects=(), environment=())
        self.model = QuasistaticModel(alone)
        self.plant = self.model.plant
        self.context = self.model.plant_context
        if not self.plant.HasFrameNamed(tcp_frame):
            raise PlanningError(f"robot '{robot}' has no frame '{tcp_frame}'.")
        self.tcp = self.plant.GetFrameByName(tcp_frame)
        names = list(self.model.robots[0].joint_names)
        missing = [j for j in finger_joints if j not in names]
        if missing:
            raise PlanningError(f"robot '{robot}' has no joint(s) {missing}; joints: {names}")
        self.joint_names = names
        self.finger_idx = np.array([names.index(j) for j in finger_joints], dtype=int)
        self.arm_idx = np.array([i for i in range(len(names)) if i not in self.finger_idx])
        self._lower = self.plant.GetPositionLowerLimits()
        self._upper = self.plant.GetPositionUpperLimits()
        self._v_limit = self.plant.GetVelocityUpperLimits()

    def tcp_pose(self, q: np.ndarray) -> RigidTransform:
        """Return the TCP pose in the world at robot positions q."""
        self.model.set_positions(np.asarray(q, dtype=float))
        return self.tcp.CalcPoseInWorld(self.context)

    def plan(self, q_start: np.ndarray, waypoints: Sequence[Waypoint],
             time_step: float) -> JointVelocityPlan:
        """Return the per-step commands that follow ``waypoints`` from robot positions q_start."""
        q = np.array(q_start, dtype=float)
        if q.shape != (len(self.joint_names),) or not np.all(np.isfinite(q)):
            raise PlanningError(f"q_start must be {len(self.joint_names)} finite joint "
                                f"positions {self.joint_names}, got {q_start!r}")
        params = self._parameters(q, time_step)
        poses = _interpolated_poses(self.tcp_pose(q), q[self.finger_idx], waypoints, time_step)
        velocities, q_ref, desired, planned = [], [q.copy()], [poses[0][1].translation()], []
        planned.append(self.tcp_pose(q).translation())
        v_arm = np.zeros(len(self.arm_idx))
        for k, (label, X_des, gripper) in enumerate(poses[1:]):
            v = np.zeros(len(q))
            v_arm = self._arm_velocity(q, v_arm, X_des, params, time_step, label, k)
            v[self.arm_idx] = v_arm
            v[self.finger_idx] = np.clip((gripper - q[self.finger_idx]) / time_step,
                                         -FINGER_SPEED, FINGER_SPEED)
            q = q + time_step * v
            velocities.append(v)
            q_ref.append(q.copy())
            desired.append(X_des.translation())
            planned.append(self.tcp_pose(q).translation())
        return JointVelocityPlan(
            time_step=time_step, velocities=np.array(velocities), q_ref=np.array(q_ref),
            labels=tuple(label for label, _, _ in poses[1:]), tcp_desired=np.array(desired),
            tcp_planned=np.array(planned))

    def _arm_velocity(self, q, v_arm, X_des: RigidTransform, params, h: float, label: str,
                      k: int) -> np.ndarray:
        """Diff IK: arm velocities that bring the TCP to X_des in one step."""
        X = self.tcp_pose(q)
        rotation = (X_des.rotation() @ X.rotation().inverse()).ToAngleAxis()
        V = np.concatenate([rotation.axis() * rotation.angle() / h,
                            (X_des.translation() - X.translation()) / h])
        J = self.plant.CalcJacobianSpatialVelocity(
            self.context, JacobianWrtVariable.kV, self.tcp, np.zeros(3),
            self.plant.world_frame(), self.plant.world_frame())[:, self.arm_idx]
        result = DoDifferentialInverseKinematics(q[self.arm_idx], v_arm, V, J, params)
        if result.status != DifferentialInverseKinematicsStatus.kSolutionFound:
            raise PlanningError(f"differential IK failed at step {k} (towards waypoint "
                                f"'{label}'): {result.status}. The waypoint may be out of "
                                "reach or past a joint limit.")
        return np.asarray(result.joint_velocities).reshape(-1)

    def _parameters(self, q: np.ndarray, h: float) -> DifferentialInverseKinematicsParameters:
        n = len(self.arm_idx)
        params = DifferentialInverseKinematicsParameters(n, n)
        params.set_time_step(h)
        params.set_nominal_joint_position(q[self.arm_idx])
        params.set_joint_centering_gain(0.1 * np.eye(n))
        params.set_joint_position_limits((self._lower[self.arm_idx], self._upper[self.arm_idx]))
        limit = self._v_limit[self.arm_idx]
        params.set_joint_velocity_limits((-limit, limit))
        return params


def _interpolated_poses(X_start: RigidTransform, gripper_start: np.ndarray,
                        waypoints: Sequence[Waypoint], h: float) -> list:
    """Return (label, desired TCP pose, finger target) at every k h, from the start on."""
    out = [("start", X_start, gripper_start)]
    X_from, g_from = X_start, gripper_start
    for w in waypoints:
        if not (np.isfinite(w.duration) and w.duration > 0.0):
            raise PlanningError(f"waypoint '{w.label}': duration must be positive, got "
                                f"{w.duration}")
        n = max(1, int(round(w.duration / h)))
        q_from = X_from.rotation().ToQuaternion()
        q_to = w.X_WT.rotation().ToQuaternion()
        for i in range(1, n + 1):
            tau = i / n
            s = 3.0 * tau ** 2 - 2.0 * tau ** 3
            p = (1.0 - s) * X_from.translation() + s * w.X_WT.translation()
            R = RotationMatrix(_slerp(q_from, q_to, s))
            g = (1.0 - s) * np.asarray(g_from, float) + s * w.gripper
            out.append((w.label, RigidTransform(R, p), g))
        X_from, g_from = w.X_WT, np.full_like(np.asarray(gripper_start, float), w.gripper)
    return out


def _slerp(a: Quaternion, b: Quaternion, s: float) -> Quaternion:
    return a.slerp(s, b)
