"""
A small planner for the arm demo: differential IK over end-effector waypoints.

The plan is made on the scenario's own model (a separate Context of its
MultibodyPlant) and on the commanded-position reference, for an arm robot
and a gripper robot (the same robot when one model holds both): each step k
asks Drake's ``DoDifferentialInverseKinematics`` for the arm joint
velocities that move the tool centre point (TCP) frame to its desired pose
at t_{k+1}, within the joint position and velocity limits, and moves the
gripper's finger joints at a bounded speed towards their waypoint
positions (whichever direction each finger closes in).  The result is one
joint velocity command per step and robot; fed to the simulator it
advances the reference exactly as planned (QuasistaticSimulator's qbar_a),
and the springs pull the real joints after it.

Between waypoints the TCP position is interpolated linearly and its
orientation by slerp, both with the smooth time scaling s = 3 tau^2 - 2 tau^3,
so the motion starts and stops at rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Union

import numpy as np
from pydrake.common.eigen_geometry import Quaternion
from pydrake.math import RigidTransform, RotationMatrix
from pydrake.multibody.inverse_kinematics import (DifferentialInverseKinematicsParameters,
                                                  DifferentialInverseKinematicsStatus,
                                                  DoDifferentialInverseKinematics)
from pydrake.multibody.tree import BodyIndex, JacobianWrtVariable, ModelInstanceIndex
from pydrake.systems.primitives import TrajectorySource
from pydrake.trajectories import PiecewisePolynomial

from quasistatic_drake.model import QuasistaticModel
from quasistatic_drake.scenario import Scenario
from quasistatic_drake.shapes import feature_points, OTHER

FINGER_SPEED = 0.05        # [m/s] fastest finger motion the planner commands


class PlanningError(RuntimeError):
    """The planner could not follow the waypoints (a pose out of reach, a bad waypoint)."""


@dataclass(frozen=True)
class Waypoint:
    """Reach TCP pose ``X_WT`` and finger positions ``gripper`` after ``duration`` seconds."""

    label: str
    X_WT: RigidTransform
    gripper: Union[float, np.ndarray]   # the finger joints' positions: one for all, or each's
    duration: float                     # [s] of the segment that ends here


@dataclass(frozen=True)
class JointVelocityPlan:
    """
    One joint velocity command per step, for the joints of one or more robots.

    ``velocities[k]`` is held over [k h, (k + 1) h]; ``q_ref[k]`` is the
    reference at k h (``q_ref[0]`` the start) and ``labels[k]`` the waypoint
    the step moves towards.  The columns are the joints of the robots in
    ``robots`` ((name, number of joints), scenario order), side by side.
    """

    time_step: float
    velocities: np.ndarray      # (N, n_a)
    q_ref: np.ndarray           # (N + 1, n_a)
    labels: tuple[str, ...]
    tcp_desired: np.ndarray     # (N + 1, 3) desired TCP position at each k h
    tcp_planned: np.ndarray     # (N + 1, 3) the plan's TCP position at each k h
    robots: tuple[tuple[str, int], ...] = ()

    @property
    def steps(self) -> int:
        """Return the number of steps N."""
        return len(self.velocities)

    @property
    def robot_slices(self) -> dict[str, slice]:
        """Return each robot's columns of ``velocities`` and ``q_ref``."""
        slices, start = {}, 0
        for name, n in self.robots:
            slices[name] = slice(start, start + n)
            start += n
        return slices

    def commands(self, k: int) -> dict[str, np.ndarray]:
        """Return step k's command per robot, as QuasistaticSimulator.step takes it."""
        return {name: self.velocities[k, s] for name, s in self.robot_slices.items()}

    def command_source(self, robot: Optional[str] = None) -> TrajectorySource:
        """
        Return a TrajectorySource that holds ``velocities[k]`` over [k h, (k + 1) h).

        With ``robot``, only that robot's columns (for its velocity command port).
        """
        columns = slice(None) if robot is None else self.robot_slices[robot]
        n = self.steps
        times = self.time_step * np.arange(n + 1)
        velocities = self.velocities[:, columns]
        values = np.vstack([velocities, velocities[-1:] * 0.0]).T
        return TrajectorySource(PiecewisePolynomial.ZeroOrderHold(times, values))

    def step_range(self, label: str) -> range:
        """Return the steps that move towards the waypoint ``label``."""
        steps = [k for k, name in enumerate(self.labels) if name == label]
        if not steps:
            raise KeyError(f"no waypoint '{label}' in the plan; waypoints: "
                           f"{sorted(set(self.labels))}")
        return range(steps[0], steps[-1] + 1)


def find_frame(plant, name: str, instances: dict):
    """
    Return the frame ``name`` of the plant: scoped ('model::frame') or in ``instances``.

    ``instances`` maps model names to the instances an unscoped name is
    looked up in.  Raises PlanningError naming the frames there are.
    """
    if "::" in name:
        scope, _, frame = name.rpartition("::")
        if not plant.HasModelInstanceNamed(scope):
            models = [plant.GetModelInstanceName(i) for i in _all_instances(plant)]
            raise PlanningError(f"no model instance '{scope}' (of frame '{name}'); the "
                                f"models are {models}.")
        instance = plant.GetModelInstanceByName(scope)
        if not plant.HasFrameNamed(frame, instance):
            raise PlanningError(f"model '{scope}' has no frame '{frame}'; its frames: "
                                f"{_frame_names(plant, instance)}.")
        return plant.GetFrameByName(frame, instance)
    found = [(model, instance) for model, instance in instances.items()
             if plant.HasFrameNamed(name, instance)]
    owners = "/".join(f"'{m}'" for m in instances)
    if not found:
        frames = sorted({f for i in instances.values() for f in _frame_names(plant, i)})
        raise PlanningError(f"robot {owners} has no frame '{name}'; frames: {frames}.")
    if len(found) > 1:
        raise PlanningError(f"frame '{name}' is on robots {[m for m, _ in found]}; scope it "
                            f"as '<model>::{name}'.")
    return plant.GetFrameByName(name, found[0][1])


def _frame_names(plant, instance) -> list[str]:
    """Return the names of a model instance's frames (not Drake's internal '__' ones)."""
    return sorted(plant.get_frame(i).name() for i in plant.GetFrameIndices(instance)
                  if not plant.get_frame(i).name().startswith("__"))


def _all_instances(plant) -> list:
    """Return every model instance of the plant."""
    return [ModelInstanceIndex(i) for i in range(plant.num_model_instances())]


class DiffIkPlanner:
    """Plans joint velocity commands for an arm and its gripper (module docstring)."""

    def __init__(self, scenario: Union[Scenario, QuasistaticModel], robot: str, tcp_frame: str,
                 finger_joints: Sequence[str] = (), gripper: Optional[str] = None):
        """
        Use the arm ``robot`` of ``scenario`` (or of a model already built from one).

        ``finger_joints`` are joints of the robot ``gripper`` (default: the
        arm) and follow Waypoint.gripper; the arm's other joints follow the
        TCP.  A model is shared: the planner works in a Context of its own.
        """
        self.model = (scenario if isinstance(scenario, QuasistaticModel)
                      else QuasistaticModel(scenario))
        model = self.model
        gripper = gripper or robot
        names = [r.name for r in model.robots]
        for name in (robot, gripper):
            if name not in names:
                raise PlanningError(f"scenario {model.scenario.source} has no robot '{name}'; "
                                    f"robots: {names}")
        self.arm, self.gripper = robot, gripper
        self.robots = tuple(r for r in model.robots if r.name in (robot, gripper))
        self.plant = model.plant
        self.context = self.plant.CreateDefaultContext()
        self._q_full = model.q_default.copy()
        columns = [(r.name, j) for r in self.robots for j in r.joint_names]
        self.joint_names = [j for _, j in columns]
        self.q_idx = np.concatenate([r.q_idx for r in self.robots]).astype(int)
        self.v_idx = np.concatenate([r.v_idx for r in self.robots]).astype(int)
        self._followers = tuple(f for r in self.robots for f in r.followers)
        self.tcp = find_frame(self.plant, tcp_frame,
                              {r.name: r.instance for r in self.robots})
        gripper_joints = [j for name, j in columns if name == gripper]
        missing = [j for j in finger_joints if j not in gripper_joints]
        if missing:
            raise PlanningError(f"robot '{gripper}' has no joint(s) {missing}; joints: "
                                f"{gripper_joints}")
        self.finger_idx = np.array([columns.index((gripper, j)) for j in finger_joints],
                                   dtype=int)
        self.arm_idx = np.array([i for i, (name, _) in enumerate(columns)
                                 if name == robot and i not in self.finger_idx], dtype=int)
        self._lower = self.plant.GetPositionLowerLimits()[self.q_idx]
        self._upper = self.plant.GetPositionUpperLimits()[self.q_idx]
        self._v_limit = self.plant.GetVelocityUpperLimits()[self.v_idx]
        self.q_start = self._q_full[self.q_idx].copy()
        J = self._jacobian(self.q_start)
        if not np.any(np.abs(J) > 1e-9):
            raise PlanningError(f"frame '{tcp_frame}' does not move with the joints of the arm "
                                f"'{robot}', so the arm cannot steer it.")

    @property
    def robot_sizes(self) -> tuple[tuple[str, int], ...]:
        """Return (name, number of joints) of the planned robots, in column order."""
        return tuple((r.name, len(r.joint_names)) for r in self.robots)

    def tcp_pose(self, q: np.ndarray) -> RigidTransform:
        """Return the TCP pose in the world at the planned robots' positions q."""
        self._set(q)
        return self.tcp.CalcPoseInWorld(self.context)

    def points_in_tcp(self, q: np.ndarray, bodies) -> tuple[np.ndarray, np.ndarray]:
        """
        Return the collision feature points (k x 3, TCP frame) of ``bodies`` at q, and radii.

        ``bodies`` are body indices (ints); shapes.feature_points says what the
        points of each shape are (an ellipsoid has none).
        """
        X_TW = self.tcp_pose(q).inverse()
        inspector = self.model.scene_graph.model_inspector()
        points, radii = [np.zeros((0, 3))], [np.zeros(0)]
        for geometry_id, info in self.model.geometries.items():
            if info.body_index not in bodies or info.shape.kind == OTHER:
                continue
            body = self.plant.get_body(BodyIndex(info.body_index))
            X_TG = X_TW @ self.plant.EvalBodyPoseInWorld(self.context, body) @ \
                inspector.GetPoseInFrame(geometry_id)
            centres, r = feature_points(info.shape)
            points.append(X_TG.multiply(centres.T).T)
            radii.append(r)
        return np.vstack(points), np.concatenate(radii)

    def plan(self, q_start: np.ndarray, waypoints: Sequence[Waypoint],
             time_step: float) -> JointVelocityPlan:
        """Return the per-step commands that follow ``waypoints`` from positions q_start."""
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
            tcp_planned=np.array(planned), robots=self.robot_sizes)

    def _set(self, q: np.ndarray) -> None:
        """Set the planned joints (and the joints that follow them) in the own Context."""
        q_full = self._q_full
        q_full[self.q_idx] = q
        for f in self._followers:
            q_full[f.q_idx] = f.ratio * q_full[f.leader_q_idx] + f.offset
        self.plant.SetPositions(self.context, q_full)

    def _jacobian(self, q: np.ndarray) -> np.ndarray:
        """Return the TCP's spatial velocity Jacobian in the arm's joint velocities at q."""
        self._set(q)
        return self.plant.CalcJacobianSpatialVelocity(
            self.context, JacobianWrtVariable.kV, self.tcp, np.zeros(3),
            self.plant.world_frame(), self.plant.world_frame())[:, self.v_idx[self.arm_idx]]

    def _arm_velocity(self, q, v_arm, X_des: RigidTransform, params, h: float, label: str,
                      k: int) -> np.ndarray:
        """Diff IK: arm velocities that bring the TCP to X_des in one step."""
        X = self.tcp_pose(q)
        rotation = (X_des.rotation() @ X.rotation().inverse()).ToAngleAxis()
        V = np.concatenate([rotation.axis() * rotation.angle() / h,
                            (X_des.translation() - X.translation()) / h])
        J = self._jacobian(q)
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
    """Return (label, desired TCP pose, finger targets) at every k h, from the start on."""
    gripper_start = np.asarray(gripper_start, dtype=float)
    out = [("start", X_start, gripper_start)]
    X_from, g_from = X_start, gripper_start
    for w in waypoints:
        if not (np.isfinite(w.duration) and w.duration > 0.0):
            raise PlanningError(f"waypoint '{w.label}': duration must be positive, got "
                                f"{w.duration}")
        g_to = np.broadcast_to(np.asarray(w.gripper, dtype=float), gripper_start.shape)
        n = max(1, int(round(w.duration / h)))
        q_from = X_from.rotation().ToQuaternion()
        q_to = w.X_WT.rotation().ToQuaternion()
        for i in range(1, n + 1):
            tau = i / n
            s = 3.0 * tau ** 2 - 2.0 * tau ** 3
            p = (1.0 - s) * X_from.translation() + s * w.X_WT.translation()
            R = RotationMatrix(_slerp(q_from, q_to, s))
            g = (1.0 - s) * g_from + s * g_to
            out.append((w.label, RigidTransform(R, p), g))
        X_from, g_from = w.X_WT, g_to.copy()
    return out


def _slerp(a: Quaternion, b: Quaternion, s: float) -> Quaternion:
    return a.slerp(s, b)
