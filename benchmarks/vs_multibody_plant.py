"""
Benchmark QuasistaticSimulator against Drake's MultibodyPlant: accuracy and speed, same scenes.

Scenes (same URDFs, same commanded joint motion for every simulator):

* ``pick_place``: config/arm_pick_place.yaml, the arm demo.  The joint
  velocity plan comes once from the demo's planner (pick_and_place.
  plan_pick_and_place at the scenario's h = 0.1 s) and is replayed open loop.
* ``push``: config/bench_pad_push.yaml, a flat pad pushes a 10 cm box
  0.14 m along +x (a 0.15 m smooth stroke from 1 cm behind the box), holds,
  and backs off 5 cm.
* ``finger_push`` (not in the default set): the same stroke with the sphere
  of config/finger_push.yaml.  Pushing a box through its centre with a point
  is an unstable equilibrium: MultibodyPlant's box yaws by a different
  fraction of a degree at every h, and that yaw dominates the error.

The command is a piecewise-linear joint reference q_ref(t)
(trajectory_metrics.JointReference).  The quasistatic engine gets, per step,
the average velocity over the step, so its spring reference equals q_ref at
each step boundary.  MultibodyPlant gets q_ref and its derivative as the
desired state of a joint impedance controller with the same stiffness K,
critical damping and gravity compensation (mbp_reference.py).

Ground truth: MultibodyPlant (SAP, hydroelastic contact) at ``--truth-h``
(5e-5 s by default; the quick sweep uses 1e-4 s).  Metric: the integral over
simulated time of the object's pose error against the ground truth,
||dp|| [m] + angle [rad], both trajectories resampled on a 0.01 s grid
(trajectory_metrics.integral_error).  Speed: wall seconds per simulated
second of the stepping loop only (model construction and planning excluded);
a successful run is timed again until its timed total reaches ``--min-timed``
(1 s, at most ``--max-runs`` 5 runs) and the median counts, for every
simulator alike, so that a short run is not judged by one burst of load from
other processes (the ground truth is timed once).

Summary keys: ``speedup_at_equal_error`` (trajectory_metrics.
speedup_at_equal_error over the QP rows, quasi-static and quasi-dynamic,
with and without the robots' inertia, together, against MultibodyPlant
rows of any contact approximation), ``speedup_at_equal_error_vs_sap`` (the
same against SAP's rows only: issue 17's figure, goal 30; TAMSI's error
floor of 0.012 on the arm makes it expensive exactly where the QP matches
it) and
``qs_real_time_factor_h0.1`` (simulated seconds per wall second of the QP
quasi-static run at h = 0.1 s, median of its repeats).  Both are given per
scene and, at the top level, as the worst (smallest) over the scenes run.

    .venv/bin/python benchmarks/vs_multibody_plant.py [--quick] [--scenes pick_place,push]
        [--json out/vs_mbp.json] [--plots out/vs_mbp]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Optional, Sequence

import matplotlib
import numpy as np

from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.paths import package_share_dir
from quasistatic_drake.apps.pick_and_place import PickPlaceTask, hold_squeeze, plan_pick_and_place

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mbp_reference import (APPROXIMATIONS, CONTACT_MODELS, MbpSettings,  # noqa: E402
                           run_mbp_isolated, Timing)
from trajectory_metrics import (JointReference, PoseTrajectory, RunPoint,  # noqa: E402
                                integral_error, pareto_front, speedup_at_equal_error,
                                steps_for, tilt_angle, yaw_angle)

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the Agg backend)

QS_H = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2)
MBP_H = (1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3)
SAP_EXTRA_H = (1e-2, 2e-2)     # beyond the list: where SAP's error meets the QP's
MIQP_H = (0.05, 0.1, 0.2)
QUICK_MBP_H = (5e-4, 1e-3, 2e-3, 5e-3)
QUICK_TAMSI_H = (1e-3, 5e-3)
QUICK_MIQP_H = (0.05, 0.1)
TRUTH_H, QUICK_TRUTH_H = 5e-5, 1e-4
QUICK_TIMEOUT = 120.0          # [s] per run (except the ground truth) in the quick sweep
FULL_TIMEOUT = 600.0           # [s] per run (except the ground truth) in the full sweep
GRID_DT = 0.01                 # [s] of the common grid the errors are integrated on
SETTLE = 0.5                   # [s] simulated after the reference stops
QS_KINDS = ('qs-qp-static', 'qs-qp-dynamic', 'qs-qp-static-lag', 'qs-qp-dynamic-lag',
            'qs-miqp')
QP_KINDS = QS_KINDS[:4]        # the QP's: objects quasi-static or -dynamic, robots with inertia
RTF_H = 0.1                    # [s] the time step of qs_real_time_factor_h0.1
COLORS = {'qs-qp-static': 'tab:blue', 'qs-qp-dynamic': 'tab:orange', 'qs-miqp': 'tab:green',
          'qs-qp-static-lag': 'tab:cyan', 'qs-qp-dynamic-lag': 'tab:olive',
          'mbp-sap': 'tab:red', 'mbp-tamsi': 'tab:purple', 'mbp-similar': 'tab:brown',
          'mbp-lagged': 'tab:pink'}


@dataclass(frozen=True)
class Scene:
    """A benchmark scene: the scenario, who is commanded, who is measured, what success is."""

    name: str
    scenario: Scenario
    robot: str
    obj: str
    reference: JointReference
    success: Callable[[PoseTrajectory], tuple[bool, str]]
    miqp_reference: Optional[JointReference] = None

    @property
    def horizon(self) -> float:
        """Return the simulated duration: the reference plus a settling time [s]."""
        return self.reference.duration + SETTLE


@dataclass
class Row:
    """One run of one simulator at one time step (the JSON rows)."""

    scene: str
    simulator: str
    h: float
    status: str
    steps: int = 0
    sim_time: float = 0.0
    wall_time: float = 0.0
    wall_per_sim_s: float = math.nan
    real_time_factor: float = math.nan
    integral_error: float = math.nan
    success: Optional[bool] = None
    success_detail: str = ''
    failed_steps: int = 0
    final_xyz: list = field(default_factory=list)
    notes: str = ''
    wall_times: list = field(default_factory=list)   # every timed repeat [s]

    @property
    def ok(self) -> bool:
        """Return whether the run finished and has an error figure."""
        return self.status == 'ok' and math.isfinite(self.integral_error)


# ----- scenes -------------------------------------------------------------------------------
def pick_place_scene() -> Scene:
    """Return the arm scene with the demo planner's commands (planned once, at h = 0.1 s)."""
    scenario = Scenario.from_yaml(package_share_dir() / 'config' / 'arm_pick_place.yaml')
    task = PickPlaceTask()
    engine = QuasistaticSimulator(scenario)
    plan, target, name = plan_pick_and_place(engine, task)
    reference = JointReference.from_velocities(plan.q_ref[0], plan.velocities, plan.time_step)
    finger_idx = np.array([engine.robot_joint_names(task.robot).index(j)
                           for j in task.finger_joints])
    squeeze = task.hold_force / (scenario.settings('miqp').contact_stiffness * plan.time_step)
    held = hold_squeeze(plan, finger_idx, squeeze)
    miqp_reference = JointReference.from_velocities(held.q_ref[0], held.velocities,
                                                    held.time_step)
    start = engine.object_pose(engine.default_positions(), name).translation()
    return Scene('pick_place', scenario, task.robot, name, reference,
                 lambda traj: pick_place_success(traj, start, target), miqp_reference)


def pick_place_success(traj: PoseTrajectory, start: np.ndarray,
                       target: np.ndarray) -> tuple[bool, str]:
    """Lifted >= 10 cm, and put down upright within 2 cm of the target, at table height."""
    lift = float(np.max(traj.xyz[:, 2]) - start[2])
    final = traj.xyz[-1]
    place = float(np.linalg.norm(final[:2] - target[:2]))
    tilt = float(np.degrees(tilt_angle(traj.quat[-1:])[0]))
    ok = lift >= 0.10 and place <= 0.02 and abs(final[2] - start[2]) <= 0.01 and tilt <= 10.0
    return ok, f'lift {lift * 100:.1f} cm, place error {place * 100:.1f} cm, tilt {tilt:.1f} deg'


PUSH_STROKE = 0.15           # [m] finger travel along +x
PUSH_GAP = 0.01              # [m] finger surface to box face at the start
PUSH_BACK = 0.05             # [m] the finger backs off this much at the end


def push_reference(q0: np.ndarray, joint: int, dt: float = 0.05) -> JointReference:
    """Hold 0.5 s, stroke PUSH_STROKE in 2 s (smooth), hold 0.5 s, back off in 0.5 s, hold."""
    segments = [(0.5, 0.0), (2.0, PUSH_STROKE), (0.5, 0.0), (0.5, -PUSH_BACK), (0.5, 0.0)]
    t, x = [0.0], [0.0]
    for duration, distance in segments:
        n = int(round(duration / dt))
        tau = np.arange(1, n + 1) / n
        x.extend(x[-1] + distance * (3.0 * tau ** 2 - 2.0 * tau ** 3))
        t.extend(t[-1] + dt * np.arange(1, n + 1))
    q = np.repeat(np.asarray(q0, float)[None, :], len(t), axis=0)
    q[:, joint] += np.array(x)
    return JointReference(t=np.round(np.array(t), 12), q=q)


def _push_scene(name: str, config: str, robot: str, joint: str) -> Scene:
    scenario = Scenario.from_yaml(package_share_dir() / 'config' / config)
    engine = QuasistaticSimulator(scenario)
    q0 = engine.default_positions()
    start = engine.object_pose(q0, 'box').translation()
    reference = push_reference(engine.robot_positions(q0, robot),
                               engine.robot_joint_names(robot).index(joint))
    return Scene(name, scenario, robot, 'box', reference, lambda traj: push_success(traj, start))


def push_scene() -> Scene:
    """Return the flat-pad push (config/bench_pad_push.yaml): the left pad pushes the box."""
    return _push_scene('push', 'bench_pad_push.yaml', 'pads', 'left_x')


def finger_push_scene() -> Scene:
    """Return the sphere-finger push (config/finger_push.yaml), an unstable equilibrium."""
    return _push_scene('finger_push', 'finger_push.yaml', 'finger', 'finger_x')


def push_success(traj: PoseTrajectory, start: np.ndarray) -> tuple[bool, str]:
    """Box moved PUSH_STROKE - PUSH_GAP along x (1.5 cm), |dy| < 1 cm, tilt and yaw < 5 deg."""
    moved = traj.xyz[-1] - start
    expected = PUSH_STROKE - PUSH_GAP
    tilt = float(np.degrees(np.max(tilt_angle(traj.quat))))
    yaw = float(np.degrees(abs(yaw_angle(traj.quat[-1:])[0])))
    ok = abs(moved[0] - expected) <= 0.015 and abs(moved[1]) <= 0.01 and tilt <= 5.0 \
        and yaw <= 5.0
    return ok, (f'dx {moved[0] * 100:.1f} cm (commanded {expected * 100:.0f}), dy '
                f'{moved[1] * 100:.2f} cm, max tilt {tilt:.1f} deg, yaw {yaw:.1f} deg')


SCENES = {'pick_place': pick_place_scene, 'push': push_scene,
          'finger_push': finger_push_scene}
DEFAULT_SCENES = ('pick_place', 'push')


# ----- the quasistatic runs -------------------------------------------------------------------
def qs_scenario(scene: Scene, kind: str, h: float) -> Scenario:
    """Return the scene's scenario set up for one quasistatic variant and time step."""
    formulation = 'miqp' if kind == 'qs-miqp' else 'qp'
    return replace(scene.scenario, time_step=h, formulation=formulation,
                   quasi_dynamic=kind.startswith('qs-qp-dynamic'),
                   robot_inertia=kind.endswith('-lag'))


def run_quasistatic(scene: Scene, kind: str, h: float, timeout: float = math.inf,
                    timing: Timing = Timing(1e-9, 1)) -> tuple[Row, Optional[PoseTrajectory]]:
    """
    Step QuasistaticSimulator directly over the horizon; time the loop only (<= timeout).

    A successful run is repeated with the same engine (after ``reset``) as
    ``timing`` asks; the row's wall time is the median of the repeats.
    """
    row = Row(scene.name, kind, h, 'ok')
    reference = scene.miqp_reference if kind == 'qs-miqp' and scene.miqp_reference else \
        scene.reference
    if reference is not scene.reference:
        row.notes = 'MIQP robots follow commands (no spring): the grasp squeeze is commanded'
    try:
        sim = QuasistaticSimulator(qs_scenario(scene, kind, h))
    except Exception as err:   # a scenario the variant cannot build is a result, not a crash
        row.status = f'failed: {type(err).__name__}: {str(err)[:120]}'
        return row, None
    n = steps_for(scene.horizon, h)
    commands = reference.step_velocities(h, n)      # computed before the clock starts
    traj, wall = _step_through(sim, scene, commands, h, timeout, row)
    walls = [wall]
    while row.status == 'ok' and sum(walls) < timing.min_total and len(walls) < timing.max_runs:
        walls.append(_step_through(sim, scene, commands, h, timeout, Row('', '', h, 'ok'))[1])
    if row.status == 'ok' and row.failed_steps:
        row.status = f'{row.failed_steps} failed steps'
    row.wall_times = walls
    _fill_timing(row, len(traj.t) - 1, float(traj.t[-1]), float(np.median(walls)))
    return row, traj


def _step_through(sim: QuasistaticSimulator, scene: Scene, commands: np.ndarray, h: float,
                  timeout: float, row: Row) -> tuple[PoseTrajectory, float]:
    """Take len(commands) steps from the default q; return the object's poses and the time."""
    state = sim.initial_state()
    q_idx = sim.model.object(scene.obj).q_idx
    times, states = [0.0], [state.q[q_idx].copy()]
    start = time.perf_counter()
    try:
        for k, command in enumerate(commands):
            if time.perf_counter() - start > timeout:
                row.status = f'timed out after {timeout:g} s at step {k} of {len(commands)}'
                break
            result = sim.step(state, {scene.robot: command})
            row.failed_steps += int(not result.success)
            state = result.state_next      # q, the reference, v_a and the warm start
            times.append((k + 1) * h)
            states.append(state.q[q_idx].copy())
    except Exception as err:   # MiqpTooLarge, a solver error: recorded, the sweep goes on
        row.status = f'failed at step {len(times) - 1}: {type(err).__name__}: ' \
            f'{str(err).splitlines()[0][:100]}'
    wall = time.perf_counter() - start
    states = np.array(states)
    return PoseTrajectory(np.array(times), states[:, 4:7], states[:, 0:4]), wall


def _fill_timing(row: Row, steps: int, sim_time: float, wall: float) -> None:
    row.steps, row.sim_time, row.wall_time = steps, sim_time, wall
    if sim_time > 0.0 and wall > 0.0:
        row.wall_per_sim_s = wall / sim_time
        row.real_time_factor = sim_time / wall


# ----- the MultibodyPlant runs ---------------------------------------------------------------
def run_multibody(scene: Scene, settings: MbpSettings, timeout: float,
                  timing: Timing = Timing(1e-9, 1)) -> tuple[Row, Optional[PoseTrajectory]]:
    """Simulate the scene with MultibodyPlant in a child process; failures are a status."""
    run = run_mbp_isolated(scene.scenario, scene.robot, scene.obj, scene.reference,
                           scene.horizon, settings, timeout, timing)
    row = Row(scene.name, settings.label(), settings.time_step, run.status,
              wall_times=list(run.wall_times))
    _fill_timing(row, int(round(run.sim_time / settings.time_step)), run.sim_time,
                 run.wall_time)
    return row, run.object_poses


# ----- the sweep -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Sweep:
    """Which runs to make."""

    scenes: tuple[str, ...]
    qs_h: tuple[float, ...]
    miqp_h: tuple[float, ...]
    mbp_h: dict                       # approximation -> time steps
    truth_h: float
    contact_model: str = 'hydroelastic'
    timeout: float = FULL_TIMEOUT      # [s] per run (not the ground truth)
    timing: Timing = Timing()          # repeats of short runs (median wall time)


def evaluate(row: Row, traj: Optional[PoseTrajectory], scene: Scene,
             truth: PoseTrajectory) -> None:
    """Fill the row's error and task success from its object trajectory."""
    if traj is None or not traj.finite:
        if row.status == 'ok':
            row.status = 'blew up'
        return
    row.final_xyz = [float(x) for x in traj.xyz[-1]]
    if row.status != 'ok' and not row.status.endswith('failed steps'):
        return
    # a run that finished with some failed steps (q held there) still gets its figures,
    # but Row.ok stays False: it takes no part in the speed-up at equal error
    row.success, row.success_detail = scene.success(traj)
    row.integral_error = integral_error(traj, truth, scene.horizon, GRID_DT)


def run_scene(scene: Scene, sweep: Sweep, log: Callable[[str], None]) -> list[Row]:
    """Run the ground truth, then every simulator of the sweep, on one scene."""
    truth_settings = MbpSettings(sweep.truth_h, 'sap', sweep.contact_model)
    truth_row, truth = run_multibody(scene, truth_settings, math.inf)
    truth_row.simulator = 'ground truth (mbp-sap)'
    if truth_row.status != 'ok' or truth is None:
        raise RuntimeError(f'{scene.name}: the ground truth run failed ({truth_row.status}). '
                           'Fix: a smaller --truth-h or --contact-model point.')
    truth_row.success, truth_row.success_detail = scene.success(truth)
    truth_row.integral_error = 0.0
    truth_row.final_xyz = [float(x) for x in truth.xyz[-1]]
    log(format_row(truth_row))
    rows = [truth_row]
    jobs = [(kind, h) for kind in QP_KINDS for h in sweep.qs_h]
    jobs += [('qs-miqp', h) for h in sweep.miqp_h]
    for kind, h in jobs:
        row, traj = run_quasistatic(scene, kind, h, sweep.timeout, sweep.timing)
        evaluate(row, traj, scene, truth)
        rows.append(row)
        log(format_row(row))
    for approximation, steps in sweep.mbp_h.items():
        for h in steps:
            settings = MbpSettings(h, approximation, sweep.contact_model)
            row, traj = run_multibody(scene, settings, sweep.timeout, sweep.timing)
            evaluate(row, traj, scene, truth)
            rows.append(row)
            log(format_row(row))
    return rows


def scene_summary(rows: Sequence[Row]) -> dict:
    """Return the binding figures of one scene from its rows."""
    def point(r: Row) -> RunPoint:
        return RunPoint(f'{r.simulator} h={r.h:g}', r.integral_error, r.wall_per_sim_s)
    mbp = [point(r) for r in rows if r.simulator.startswith('mbp') and r.ok]
    sap = [point(r) for r in rows if r.simulator == 'mbp-sap' and r.ok]
    qp = [point(r) for r in rows if r.simulator.startswith('qs-qp') and r.ok]
    speedup = speedup_at_equal_error(mbp, qp)
    against_sap = speedup_at_equal_error(sap, qp)
    rtf = [r.real_time_factor for r in rows if r.simulator == 'qs-qp-static'
           and math.isclose(r.h, RTF_H) and r.status == 'ok']
    return {'speedup_at_equal_error': speedup.value,
            'speedup_detail': {'reason': speedup.reason,
                               'mbp': asdict(speedup.mbp) if speedup.mbp else None,
                               'qp': asdict(speedup.qp) if speedup.qp else None},
            'speedup_at_equal_error_vs_sap': against_sap.value,
            'speedup_vs_sap_detail': {
                'mbp': asdict(against_sap.mbp) if against_sap.mbp else None,
                'qp': asdict(against_sap.qp) if against_sap.qp else None},
            'qs_real_time_factor_h0.1': rtf[0] if rtf else None,
            'pareto_front': [asdict(p) for p in pareto_front(mbp + qp)]}


def overall(summaries: dict) -> dict:
    """Return the binding figures over the scenes (the worst of each) and their goals."""
    keys = ('speedup_at_equal_error', 'speedup_at_equal_error_vs_sap',
            'qs_real_time_factor_h0.1')
    return {**{key: worst([s[key] for s in summaries.values()]) for key in keys},
            'goals': {'speedup_at_equal_error': 100.0,
                      'speedup_at_equal_error_vs_sap': 30.0,   # issue 17, item 5
                      'qs_real_time_factor_h0.1': 100.0}}


def worst(values: Sequence[Optional[float]]) -> Optional[float]:
    """Return the smallest of the values, None if any is None (a goal not measurable)."""
    if not values or any(v is None for v in values):
        return None
    return min(values)


# ----- output ----------------------------------------------------------------------------------
HEADER = (f"{'scene':<10} {'simulator':<22} {'h [s]':>8} {'status':<10} {'steps':>7} "
          f"{'int. error':>10} {'wall/sim s':>10} {'RT factor':>9} {'task':<5} detail")


def format_row(r: Row) -> str:
    """Return one table line."""
    status = r.status if len(r.status) <= 10 else r.status[:9] + '~'
    task = '-' if r.success is None else ('yes' if r.success else 'NO')
    detail = r.success_detail if r.status == 'ok' else f'{r.status} {r.success_detail}'.strip()
    return (f'{r.scene:<10} {r.simulator:<22} {r.h:8.0e} {status:<10} {r.steps:7d} '
            f'{r.integral_error:10.4f} {r.wall_per_sim_s:10.4f} {r.real_time_factor:9.1f} '
            f'{task:<5} {detail}')


def plot_error_vs_h(rows: Sequence[Row], path: Path) -> None:
    """Log-log integral error against time step, one line per simulator, one panel per scene."""
    scenes = list(dict.fromkeys(r.scene for r in rows))
    fig, axes = plt.subplots(1, len(scenes), figsize=(6.5 * len(scenes), 4.5), squeeze=False)
    for ax, scene in zip(axes[0], scenes):
        for simulator in dict.fromkeys(r.simulator for r in rows if r.scene == scene):
            if simulator.startswith('ground'):
                continue
            pts = sorted((r.h, r.integral_error) for r in rows
                         if r.scene == scene and r.simulator == simulator and r.ok)
            failed = [r.h for r in rows if r.scene == scene and r.simulator == simulator
                      and not r.ok]
            color = COLORS.get(simulator, 'k')
            if pts:
                ax.loglog(*zip(*pts), marker='o', label=simulator, color=color)
            if failed:
                ax.scatter(failed, [1.0] * len(failed), marker='x', color=color,
                           label=f'{simulator}: failed or incomplete (drawn at 1)')
                ax.set_xscale('log')
                ax.set_yscale('log')
        _label_error_axes(ax, 'time step h [s]', f'{scene}: error vs time step')
    _save(fig, path)


def plot_pareto(rows: Sequence[Row], path: Path) -> None:
    """Log-log integral error against wall time per simulated second (the Pareto view)."""
    scenes = list(dict.fromkeys(r.scene for r in rows))
    fig, axes = plt.subplots(1, len(scenes), figsize=(6.5 * len(scenes), 4.5), squeeze=False)
    for ax, scene in zip(axes[0], scenes):
        for simulator in dict.fromkeys(r.simulator for r in rows if r.scene == scene):
            pts = [(r.wall_per_sim_s, r.integral_error, r.h) for r in rows if r.scene == scene
                   and r.simulator == simulator and r.ok and not simulator.startswith('ground')]
            if not pts:
                continue
            ax.loglog([p[0] for p in pts], [p[1] for p in pts], 'o', label=simulator,
                      color=COLORS.get(simulator, 'k'))
            for x, y, h in pts:
                ax.annotate(f'{h:g}', (x, y), fontsize=6, xytext=(3, 3),
                            textcoords='offset points')
        ax.axvline(1.0, color='grey', linestyle=':', label='real time')
        _label_error_axes(ax, 'wall seconds per simulated second',
                          f'{scene}: accuracy vs cost (labels: h)')
    _save(fig, path)


def _label_error_axes(ax, xlabel: str, title: str) -> None:
    """Label a panel whose y axis is the integral pose error; grid and legend."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel('integral pose error [(m + rad) s]')
    ax.set_title(title)
    ax.grid(True, which='both', alpha=0.3)
    ax.legend(fontsize=8)


def _save(fig, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ----- command line ----------------------------------------------------------------------------
def parse_steps(text: str, option: str) -> tuple[float, ...]:
    """Parse a comma-separated list of positive time steps, or fail saying where and how."""
    try:
        values = tuple(float(x) for x in text.split(',') if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f'{option}: {text!r} is not a comma-separated list of numbers. '
            'Fix: e.g. 0.01,0.1') from None
    bad = [v for v in values if not (math.isfinite(v) and v > 0.0)]
    if not values or bad:
        raise argparse.ArgumentTypeError(
            f'{option}: every time step must be a finite number > 0, got {text!r}. '
            'Fix: e.g. 0.01,0.1')
    return values


def parse_scenes(text: str) -> tuple[str, ...]:
    """Parse a comma-separated list of scene names."""
    names = tuple(x.strip() for x in text.split(',') if x.strip())
    unknown = [n for n in names if n not in SCENES]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f'--scenes: unknown scene(s) {unknown or [text]}. Known scenes: '
            f'{sorted(SCENES)}. Fix: e.g. --scenes pick_place,push')
    return names


def build_sweep(args: argparse.Namespace) -> Sweep:
    """Return the sweep from the options (--quick picks the reduced defaults)."""
    quick = args.quick
    sap = args.mbp_h or ((QUICK_MBP_H if quick else MBP_H) + SAP_EXTRA_H)
    tamsi = args.tamsi_h or (QUICK_TAMSI_H if quick else MBP_H)
    mbp_h = {a: sap if a == 'sap' else tamsi for a in args.approximations}
    return Sweep(scenes=args.scenes, qs_h=args.qs_h or QS_H,
                 miqp_h=args.miqp_h if args.miqp_h is not None else
                 (QUICK_MIQP_H if quick else MIQP_H),
                 mbp_h=mbp_h, truth_h=args.truth_h or (QUICK_TRUTH_H if quick else TRUTH_H),
                 contact_model=args.contact_model,
                 timeout=args.timeout or (QUICK_TIMEOUT if quick else FULL_TIMEOUT),
                 timing=Timing(args.min_timed, args.max_runs))


def parser() -> argparse.ArgumentParser:
    """Return the command-line parser."""
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--quick', action='store_true',
                   help='reduced sweep (MBP h >= 5e-4, ground truth at 1e-4)')
    p.add_argument('--scenes', type=parse_scenes, default=DEFAULT_SCENES)
    p.add_argument('--qs-h', type=lambda s: parse_steps(s, '--qs-h'))
    p.add_argument('--miqp-h', type=lambda s: () if s == 'none' else parse_steps(s, '--miqp-h'),
                   help="MIQP time steps, or 'none'")
    p.add_argument('--mbp-h', type=lambda s: parse_steps(s, '--mbp-h'))
    p.add_argument('--tamsi-h', type=lambda s: parse_steps(s, '--tamsi-h'))
    p.add_argument('--truth-h', type=lambda s: parse_steps(s, '--truth-h')[0])
    p.add_argument('--approximations', default=('sap', 'tamsi'),
                   type=lambda s: _choices(s, APPROXIMATIONS, '--approximations'))
    p.add_argument('--timeout', type=lambda s: parse_steps(s, '--timeout')[0],
                   help='[s] wall limit of one run, ground truth excepted (600, quick: 120)')
    p.add_argument('--min-timed', type=float, default=1.0,
                   help='[s] repeat a successful run while its timed total is below this')
    p.add_argument('--max-runs', type=int, default=5, help='at most this many timed repeats')
    p.add_argument('--from-json', type=Path, metavar='JSON',
                   help='run nothing: print the table and redraw the plots of a saved run')
    p.add_argument('--profile', action='store_true',
                   help='print a cProfile of the QP quasi-static run at h = 0.1 per scene')
    p.add_argument('--contact-model', choices=CONTACT_MODELS, default='hydroelastic')
    p.add_argument('--json', type=Path, default=Path('out/vs_mbp.json'))
    p.add_argument('--plots', type=Path, default=Path('out/vs_mbp'),
                   help='prefix of the PNGs: PREFIX_error_vs_h.png, PREFIX_pareto.png')
    return p


def _choices(text: str, allowed: Sequence[str], option: str) -> tuple[str, ...]:
    names = tuple(x.strip() for x in text.split(',') if x.strip())
    bad = [n for n in names if n not in allowed]
    if not names or bad:
        raise argparse.ArgumentTypeError(f'{option}: {bad or text!r} not in {list(allowed)}.')
    return names


def main(argv: Optional[Sequence[str]] = None) -> dict:
    """Run the sweep, print the table, write the JSON and the plots."""
    p = parser()
    args = p.parse_args(argv)
    if args.max_runs < 1 or not args.min_timed >= 0.0:
        p.error(f'--max-runs must be >= 1 and --min-timed >= 0, got {args.max_runs} and '
                f'{args.min_timed}.')
    if args.from_json is not None:
        return replot(args.from_json, args.plots, p)
    sweep = build_sweep(args)
    started = time.perf_counter()
    print(HEADER, flush=True)
    rows, summaries = [], {}
    for name in sweep.scenes:
        scene = SCENES[name]()
        if args.profile:
            profile_step(scene)
        scene_rows = run_scene(scene, sweep, lambda line: print(line, flush=True))
        rows += scene_rows
        summaries[name] = scene_summary(scene_rows)
    result = {
        **overall(summaries),
        'by_scene': summaries,
        'sweep': {**asdict(sweep), 'quick': args.quick, 'grid_dt': GRID_DT, 'settle': SETTLE},
        'machine': {'platform': platform.platform(), 'python': platform.python_version(),
                    'cpus': os.cpu_count(), 'load_average_start': _load()},
        'wall_time_total': time.perf_counter() - started,
        'rows': [asdict(r) for r in rows],
    }
    print_summary(result)
    write_outputs(result, rows, args.json, args.plots)
    return result


def profile_step(scene: Scene, top: int = 15) -> None:
    """Print cProfile's top entries (cumulative time) of the QP quasi-static run at h = 0.1."""
    import cProfile
    import pstats
    profiler = cProfile.Profile()
    profiler.enable()
    row, _ = run_quasistatic(scene, 'qs-qp-static', RTF_H)
    profiler.disable()
    print(f'profile of {scene.name}, qs-qp-static, h = {RTF_H}: {row.steps} steps, '
          f'{row.wall_time:.3f} s (profiled, so slower)')
    pstats.Stats(profiler).sort_stats('cumulative').print_stats(top)


def replot(path: Path, plots: Path, p: argparse.ArgumentParser) -> dict:
    """Print the table and redraw the plots of a JSON written by an earlier run."""
    try:
        result = json.loads(path.read_text())
        rows = [Row(**{k: (math.nan if v is None and isinstance(getattr(Row, k, 0.0), float)
                           else v) for k, v in r.items()}) for r in result['rows']]
    except (OSError, ValueError, KeyError, TypeError) as err:
        p.error(f'--from-json {path}: cannot read the rows of a vs_multibody_plant run: {err}. '
                'Fix: pass a JSON this script wrote with --json.')
    print(HEADER)
    for row in rows:
        print(format_row(row))
    print_summary(result)
    write_plots(rows, plots)
    return result


def print_summary(result: dict) -> None:
    """Print the binding figures against their goals."""
    for name, s in result['by_scene'].items():
        detail = s['speedup_detail']
        sap = s.get('speedup_vs_sap_detail', {})
        print(f"{name}: speedup_at_equal_error = {_fmt(s['speedup_at_equal_error'])} "
              f"({detail['reason']}; MBP {detail['mbp']}, QP {detail['qp']}); "
              f"against SAP only = {_fmt(s.get('speedup_at_equal_error_vs_sap'))} "
              f"(MBP {sap.get('mbp')}, QP {sap.get('qp')}); "
              f"qs_real_time_factor_h0.1 = {_fmt(s['qs_real_time_factor_h0.1'])}")
    for key, goal in result['goals'].items():
        value = result.get(key)
        verdict = 'not measurable' if value is None else ('met' if value >= goal else 'NOT met')
        print(f'{key} (worst over scenes) = {_fmt(value)}: goal >= {goal:g} {verdict}')
    print(f"total wall time {result['wall_time_total']:.0f} s; load average at start "
          f"{result['machine']['load_average_start']}")


def write_outputs(result: dict, rows: Sequence[Row], json_path: Path, plots: Path) -> None:
    """Write the JSON and the two PNGs."""
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(_finite(result), indent=2, default=_json_default,
                                    allow_nan=False))
    print(f'wrote {json_path}')
    write_plots(rows, plots)


def write_plots(rows: Sequence[Row], plots: Path) -> None:
    """Write PREFIX_error_vs_h.png and PREFIX_pareto.png."""
    plots.parent.mkdir(parents=True, exist_ok=True)
    error_png = plots.with_name(plots.name + '_error_vs_h.png')
    pareto_png = plots.with_name(plots.name + '_pareto.png')
    plot_error_vs_h(rows, error_png)
    plot_pareto(rows, pareto_png)
    print(f'wrote {error_png} and {pareto_png}')


def _fmt(value: Optional[float]) -> str:
    return 'n/a' if value is None else f'{value:.3g}'


def _load() -> Optional[list]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _finite(value):
    """Return ``value`` with every NaN or infinity replaced by None (strict JSON)."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, (float, np.floating)) and not math.isfinite(value):
        return None
    return value


def _json_default(value):
    if isinstance(value, (np.floating, np.integer, np.bool_)):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f'cannot write {type(value).__name__} to JSON')


if __name__ == '__main__':
    main()
