"""
`quasistatic-drake plan`: boundary-value problems solved through the step (Song, Kumar & Pang).

Two problems, each solved by shooting with the step gradients
(``quasistatic_drake/bvp.py``) and again with finite-difference Jacobians
of whole rollouts, for comparison:

* **disk**: Halm & Posa's two-finger push under ``formulation: lcp``
  (config/halm_posa_push.yaml, c = 1e-4): the constant finger speed that
  leaves the disk at y = -3 m at t = 10 s.  The continuous answer is
  (8 - sqrt(0.75)) / 10 = 0.7134 m/s: the fingers close the gap
  2 - sqrt(0.75) m, then carry the disk.
* **box**: the QP on config/finger_push.yaml: the finger's x and y
  velocities, piecewise linear over 4 s (3 segments), that push the box
  10 cm along x and turn it by 20 degrees; terminal error at most 1 mm and
  0.5 degree.

Each solve stops once its terminal residual is below the problem's
``residual_tolerance`` (1e-10 m for the disk, 1e-8 for the box), or on
scipy's tolerances.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
from pydrake.common.eigen_geometry import Quaternion
from pydrake.math import RollPitchYaw, RotationMatrix

from quasistatic_drake.bvp import Commands, solve_bvp
from quasistatic_drake.paths import package_share_dir
from quasistatic_drake.scenario import Scenario

DISK_TARGET_Y = -3.0
DISK_ANALYTIC_SPEED = (8.0 - np.sqrt(0.75)) / 10.0
BOX_MOVE = np.array([0.10, 0.0, np.radians(20.0)])    # [m, m, rad]
ANGLE_WEIGHT = 0.05                                   # [m/rad] in the box's residual


@dataclass(frozen=True)
class Problem:
    """A boundary-value problem: the engine, its commands, the residual and a start."""

    name: str
    sim: object
    robot: str
    commands: Commands
    terminal: Callable[[np.ndarray], np.ndarray]
    theta0: np.ndarray
    bounds: tuple
    error: Callable[[np.ndarray], dict]
    residual_tolerance: float     # the solve stops once |terminal| is this small


def disk_problem() -> Problem:
    """Return the disk push (module docstring)."""
    from quasistatic_drake.simulator import QuasistaticSimulator
    scenario = Scenario.from_yaml(package_share_dir() / "config" / "halm_posa_push.yaml")
    sim = QuasistaticSimulator(scenario.with_formulation("lcp", feedback_scale=1e-4))
    disk_y = sim.model.objects[0].q_idx[1]
    return Problem(
        name="disk push to y = -3 m (lcp)", sim=sim, robot="fingers",
        commands=Commands.build("constant", 400, 4, [(1, 3)]),
        terminal=lambda q: np.array([q[disk_y] - DISK_TARGET_Y]),
        theta0=np.array([-0.5]), bounds=(-2.0, 0.0),
        error=lambda q: {"position_m": float(abs(q[disk_y] - DISK_TARGET_Y))},
        residual_tolerance=1e-10)


def box_problem() -> Problem:
    """Return the box push and turn (module docstring)."""
    from quasistatic_drake.simulator import QuasistaticSimulator
    sim = QuasistaticSimulator(Scenario.from_yaml(
        package_share_dir() / "config" / "finger_push.yaml"))
    box = sim.model.objects[0].q_idx
    target = planar_pose(sim.default_positions(), box) + BOX_MOVE

    def terminal(q):
        r = planar_pose(q, box) - target
        return np.array([r[0], r[1], ANGLE_WEIGHT * r[2]])

    def error(q):
        r = planar_pose(q, box) - target
        return {"position_m": float(np.hypot(r[0], r[1])),
                "angle_deg": float(abs(np.degrees(r[2])))}
    steps = round(4.0 / sim.h)
    return Problem(
        name="box push 10 cm and turn 20 degrees (qp)", sim=sim, robot="finger",
        commands=Commands.build("piecewise_linear", steps, 3, [0, 1], segments=3),
        terminal=terminal, theta0=np.concatenate([np.full(4, 0.06), np.zeros(4)]),
        bounds=(-0.3, 0.3), error=error, residual_tolerance=1e-8)


def planar_pose(q: np.ndarray, box_q_idx: np.ndarray) -> np.ndarray:
    """Return [x, y, yaw] of a free body from its quaternion and position in q."""
    w = q[box_q_idx[:4]] / np.linalg.norm(q[box_q_idx[:4]])
    yaw = RollPitchYaw(RotationMatrix(Quaternion(w))).yaw_angle()
    return np.array([q[box_q_idx[4]], q[box_q_idx[5]], yaw])


def solve(problem: Problem, progress: Callable[[str], None] = lambda stage: None) -> dict:
    """Solve with the step gradients, then with finite differences; return the JSON row."""
    q0 = problem.sim.default_positions()
    args = (problem.sim, q0, [problem.robot], problem.commands, problem.terminal,
            problem.theta0)
    progress(f"{problem.name}: step gradients")
    plan = solve_bvp(*args, bounds=problem.bounds,
                     residual_tolerance=problem.residual_tolerance)
    progress(f"{problem.name}: finite differences")
    start = time.perf_counter()
    fd = solve_bvp(*args, bounds=problem.bounds, finite_differences=True,
                   residual_tolerance=problem.residual_tolerance)
    fd_time = time.perf_counter() - start
    return {"name": problem.name, "parameters": plan.theta.tolist(),
            "terminal_error": problem.error(plan.shot.q_final),
            "iterations": plan.iterations, "method": plan.method,
            "solve_time_s": plan.solve_time, "fd_solve_time_s": fd_time,
            "fd_parameters": fd.theta.tolist(),
            "fd_terminal_error": problem.error(fd.shot.q_final),
            "degenerate_steps": plan.shot.degenerate_steps,
            "failed_steps": plan.shot.failed_steps}


STAGES = 4    # the calls of run()'s ``progress``: two problems, two methods each


def run(progress: Callable[[str], None] = lambda stage: None) -> dict:
    """Solve both problems; return the binding JSON (``problems``); ``progress`` per stage."""
    return {"problems": [solve(disk_problem(), progress), solve(box_problem(), progress)],
            "disk_analytic_speed": DISK_ANALYTIC_SPEED}
