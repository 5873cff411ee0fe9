"""
Pure math of benchmarks/vs_multibody_plant.py: references, pose errors, speed-up selection.

Nothing here imports Drake, so every function is unit-tested on hand-built
numbers (test/test_vs_multibody_plant.py).

Conventions:

* A pose trajectory is sampled at times ``t`` (strictly increasing) with
  positions ``xyz`` (N x 3, m) and unit quaternions ``quat`` (N x 4, w x y z,
  Drake's order for a free body's q).
* The pose error at one instant is ||p - p_ref|| [m] + the angle of
  R_ref^T R [rad]; "m + rad" is the seed-002 talk's pose error.  Its integral
  over simulated time, on a common grid, is the *integral error* [(m + rad) s].
* Resampling is linear in position and normalised linear (nlerp) in the
  quaternion, with the sign of each neighbour aligned; outside the sampled
  span the end values are held.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np


@dataclass(frozen=True)
class PoseTrajectory:
    """Poses of one body at increasing times."""

    t: np.ndarray        # (N,) [s]
    xyz: np.ndarray      # (N, 3) [m]
    quat: np.ndarray     # (N, 4) w x y z

    def __post_init__(self):
        """Check shapes and that times increase."""
        n = len(self.t)
        if self.xyz.shape != (n, 3) or self.quat.shape != (n, 4) or n < 1:
            raise ValueError(f"PoseTrajectory: t {np.shape(self.t)}, xyz {self.xyz.shape}, "
                             f"quat {self.quat.shape}; expected (N,), (N, 3), (N, 4), N >= 1.")
        if n > 1 and not np.all(np.diff(self.t) > 0.0):
            raise ValueError("PoseTrajectory: times must increase strictly.")

    @property
    def finite(self) -> bool:
        """Return whether every sample is finite."""
        return bool(np.isfinite(self.xyz).all() and np.isfinite(self.quat).all())


@dataclass(frozen=True)
class JointReference:
    """
    A commanded joint-position reference, piecewise linear between knots.

    Its derivative is the commanded joint velocity (piecewise constant).  Both
    simulators replay it open loop: the quasistatic engine gets, for a step
    [t, t + h], the average velocity (q(t + h) - q(t)) / h, so its reference
    qbar_a equals q(t) at every step boundary; MultibodyPlant gets q(t) and
    its derivative as the desired state of the impedance controller.  After
    the last knot the reference holds still.
    """

    t: np.ndarray        # (M,) knots [s], strictly increasing, t[0] = 0
    q: np.ndarray        # (M, n_a) joint positions at the knots

    def __post_init__(self):
        """Check shapes and that the knots increase from 0."""
        if self.q.ndim != 2 or self.q.shape[0] != len(self.t) or len(self.t) < 2:
            raise ValueError(f"JointReference: t {np.shape(self.t)}, q {self.q.shape}; "
                             "expected (M,) and (M, n_a), M >= 2.")
        if self.t[0] != 0.0 or not np.all(np.diff(self.t) > 0.0):
            raise ValueError("JointReference: knots must start at 0 and increase strictly.")

    @property
    def duration(self) -> float:
        """Return the time of the last knot [s]."""
        return float(self.t[-1])

    def at(self, time: float) -> np.ndarray:
        """Return the reference positions at ``time`` (held outside the knots)."""
        return np.array([np.interp(time, self.t, column) for column in self.q.T])

    def step_velocity(self, start: float, h: float) -> np.ndarray:
        """Return the average commanded velocity over [start, start + h]."""
        return (self.at(start + h) - self.at(start)) / h

    def step_velocities(self, h: float, n: int) -> np.ndarray:
        """Return the average velocities of steps 0..n-1 of size h, one row per step."""
        times = h * np.arange(n + 1)
        q = np.column_stack([np.interp(times, self.t, column) for column in self.q.T])
        return np.diff(q, axis=0) / h

    @staticmethod
    def from_velocities(q0: np.ndarray, velocities: np.ndarray, dt: float) -> "JointReference":
        """Return the integral of piecewise-constant velocities (one row per dt) from q0."""
        velocities = np.atleast_2d(np.asarray(velocities, dtype=float))
        q = np.vstack([q0, q0 + dt * np.cumsum(velocities, axis=0)])
        return JointReference(t=dt * np.arange(len(q)), q=q)


def steps_for(duration: float, h: float) -> int:
    """Return the number of steps of size h that cover ``duration`` (rounded up)."""
    return int(math.ceil(duration / h - 1e-9))


def _aligned_quaternions(quat: np.ndarray) -> np.ndarray:
    """Flip signs so consecutive quaternions lie in the same hemisphere."""
    out = np.array(quat, dtype=float)
    for k in range(1, len(out)):
        if out[k] @ out[k - 1] < 0.0:
            out[k] = -out[k]
    return out


def resample(traj: PoseTrajectory, grid: np.ndarray) -> PoseTrajectory:
    """Return ``traj`` at the times ``grid`` (module docstring: lerp and nlerp, ends held)."""
    grid = np.asarray(grid, dtype=float)
    if len(traj.t) == 1:
        return PoseTrajectory(grid, np.repeat(traj.xyz, len(grid), 0),
                              np.repeat(traj.quat, len(grid), 0))
    xyz = np.column_stack([np.interp(grid, traj.t, traj.xyz[:, i]) for i in range(3)])
    quat = _aligned_quaternions(traj.quat)
    quat = np.column_stack([np.interp(grid, traj.t, quat[:, i]) for i in range(4)])
    quat /= np.linalg.norm(quat, axis=1, keepdims=True)
    return PoseTrajectory(grid, xyz, quat)


def rotation_angle(quat_a: np.ndarray, quat_b: np.ndarray) -> np.ndarray:
    """
    Return the angle [rad] of the rotation between unit quaternions, row by row.

    With the signs aligned (a . b >= 0) and a . b = cos(theta / 2), the angle
    is 4 atan2(|a - b|, |a + b|): exact to round-off near 0, where
    2 arccos(a . b) loses half of the digits.
    """
    a, b = np.atleast_2d(quat_a), np.atleast_2d(quat_b)
    b = np.where(np.sum(a * b, axis=1, keepdims=True) < 0.0, -b, b)
    return 4.0 * np.arctan2(np.linalg.norm(a - b, axis=1), np.linalg.norm(a + b, axis=1))


def pose_errors(traj: PoseTrajectory, truth: PoseTrajectory) -> np.ndarray:
    """Return ||p - p_truth|| + angle(R_truth^T R) at each sample (same times)."""
    if traj.t.shape != truth.t.shape or not np.allclose(traj.t, truth.t):
        raise ValueError("pose_errors: the trajectories must share their times; resample "
                         "them onto one grid first.")
    return (np.linalg.norm(traj.xyz - truth.xyz, axis=1)
            + rotation_angle(traj.quat, truth.quat))


def time_grid(duration: float, dt: float) -> np.ndarray:
    """Return 0, dt, ..., duration (the last point exactly ``duration``)."""
    n = max(1, int(round(duration / dt)))
    return np.linspace(0.0, duration, n + 1)


def integral_error(traj: PoseTrajectory, truth: PoseTrajectory, duration: float,
                   dt: float = 0.01) -> float:
    """Return the trapezoidal integral over [0, duration] of the pose error [(m + rad) s]."""
    grid = time_grid(duration, dt)
    errors = pose_errors(resample(traj, grid), resample(truth, grid))
    return float(np.sum(0.5 * (errors[1:] + errors[:-1]) * np.diff(grid)))


def tilt_angle(quat: np.ndarray) -> np.ndarray:
    """Return the angle [rad] between each body's z axis and the world z axis."""
    quat = np.atleast_2d(quat)
    _, x, y, _ = (quat / np.linalg.norm(quat, axis=1, keepdims=True)).T
    return np.arccos(np.clip(1.0 - 2.0 * (x * x + y * y), -1.0, 1.0))


def yaw_angle(quat: np.ndarray) -> np.ndarray:
    """Return the yaw [rad] (rotation about world z) of each quaternion."""
    w, x, y, z = np.atleast_2d(quat).T
    return np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


@dataclass(frozen=True)
class RunPoint:
    """One simulator run as the speed-up selection sees it."""

    label: str
    error: float                 # integral error [(m + rad) s]
    wall_per_sim_s: float        # wall seconds per simulated second


@dataclass(frozen=True)
class Speedup:
    """The speed-up at equal error and the two runs it compares (see speedup_at_equal_error)."""

    value: Optional[float]
    mbp: Optional[RunPoint]
    qp: Optional[RunPoint]
    reason: str


def speedup_at_equal_error(mbp: Sequence[RunPoint], qp: Sequence[RunPoint]) -> Speedup:
    """
    Return MBP's wall time per simulated second over the QP's, at equal error.

    The MultibodyPlant point is the one with the smallest integral error that
    some QP run matches or beats (QP error <= MBP error); among MBP runs tied
    at that error, the fastest.  The QP point is the fastest (least wall time
    per simulated second) of the QP runs whose error is <= that MBP error.
    Runs with a non-finite error or time are ignored.  ``value`` is None, with
    a reason, when no QP run matches any MBP run.
    """
    mbp = [p for p in mbp if _usable(p)]
    qp = [p for p in qp if _usable(p)]
    if not mbp or not qp:
        return Speedup(None, None, None, "no successful MultibodyPlant or QP run")
    best_qp_error = min(p.error for p in qp)
    matched = [p for p in mbp if p.error >= best_qp_error]
    if not matched:
        return Speedup(None, None, None,
                       f"every MultibodyPlant error (min {min(p.error for p in mbp):.3g}) is "
                       f"below the best QP error {best_qp_error:.3g}")
    target = min(matched, key=lambda p: (p.error, p.wall_per_sim_s))
    fastest = min((p for p in qp if p.error <= target.error), key=lambda p: p.wall_per_sim_s)
    return Speedup(target.wall_per_sim_s / fastest.wall_per_sim_s, target, fastest,
                   "smallest MultibodyPlant error the QP matches or beats")


def pareto_front(points: Sequence[RunPoint]) -> list[RunPoint]:
    """Return the points no other point beats in both error and wall time, by time."""
    usable = sorted((p for p in points if _usable(p)),
                    key=lambda p: (p.wall_per_sim_s, p.error))
    front, best = [], math.inf
    for p in usable:
        if p.error < best:
            front.append(p)
            best = p.error
    return front


def _usable(point: RunPoint) -> bool:
    return math.isfinite(point.error) and math.isfinite(point.wall_per_sim_s) \
        and point.wall_per_sim_s > 0.0
