"""
The quasi-static regulariser r: the drag it puts on a moving object, the yaw it decides, its cost.

In quasi-static mode the step's Hessian keeps eps M_u for the objects,
eps = r h^2 min(K) / lambda_max(M_u) with r = ``quasi_static_inertia_ratio``
(``formulations/qp.py``), only so that the velocities are unique; it resists
every moving object with the force eps M_u v / h.  Since issue 30 r defaults
to 1e-6 (it was 0.3).  The proximal iterates that removed that drag
(``qp: {proximal_iterations: N}``) were removed in issue 30: with exact
normal rows and the round friction cone they leave nothing to remove, so
only r is swept here (``RATIOS``).  Per r:

* drag: the net force on the moving object over its weight, for the box
  of config/finger_push.yaml pushed at 0.1 m/s by a finger of K = 1e5 N/m,
  over the steps once it slides (the 4th to the 15th; the largest and the
  median; ``grasp_creep.push_drag``, the measure of
  test/test_regulariser_drag.py);
* yaw: the yaw [deg] of config/finger_push.yaml's box pushed through its
  centre (the finger at [0.1, 0, 0]) after 3 s of simulated time, at
  h = 0.1 s and h = 0.01 s (quasi-static mode, the scene's default round
  cone): an unstable equilibrium that only the contacts and the regulariser
  hold (docs/robustness.md);
* cost: the thread CPU time (``time.thread_time``) per step of those two
  runs, the median, and how many of their steps failed.

    .venv/bin/python benchmarks/regulariser.py [--json benchmarks/results/regulariser.json]
        [--png benchmarks/results/regulariser.png]
"""

import argparse
from pathlib import Path
import time

import matplotlib
import numpy as np
from pydrake.math import RollPitchYaw

from quasistatic_drake import QuasistaticSimulator, Scenario
import grasp_creep
from report import machine, write_results

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the Agg backend)

RATIOS = (1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1, 0.3)   # 1e-6: the default
DEFAULT_RATIO = 1e-6
STIFFNESS = 1e5           # [N/m] the pushing finger's, for the drag
SLIDES_FROM = 3           # the push's steps from which the box slides (grasp_creep, the test)
DURATION = 3.0            # [s] simulated, of the centre push
TIME_STEPS = (0.1, 0.01)  # [s]
COMMAND = np.array([0.1, 0.0, 0.0])   # [m/s] the finger's, through the box's centre


def drag(r: float) -> dict:
    """Return the largest and the median drag over weight on the box pushed by the stiff finger."""
    fractions = grasp_creep.push_drag(
        STIFFNESS, changes={'quasi_static_inertia_ratio': r})[SLIDES_FROM:]
    return {'max': float(np.max(fractions)), 'median': float(np.median(fractions))}


def centre_push(h: float, r: float) -> dict:
    """Return the box's yaw [deg] after DURATION, the median CPU per step [s], the failures."""
    sim = QuasistaticSimulator(Scenario.from_dict(
        {'include': 'finger_push.yaml', 'time_step': h, 'quasi_static_inertia_ratio': r},
        base_dir=grasp_creep.CONFIG, source=f'centre push, h = {h:g}, r = {r:g}'))
    state, cpu, failed = sim.initial_state(), [], 0
    for _ in range(round(DURATION / h)):
        start = time.thread_time()
        result = sim.step(state, {'finger': COMMAND})
        cpu.append(time.thread_time() - start)
        failed += not result.success
        state = result.state_next
    yaw = RollPitchYaw(sim.object_pose(state.q, 'box').rotation()).yaw_angle()
    x = sim.object_pose(state.q, 'box').translation()[0]
    return {'yaw_deg': float(np.degrees(yaw)), 'cpu_per_step_s': float(np.median(cpu)),
            'failed_steps': failed, 'steps': len(cpu), 'box_x_m': float(x)}


def measure() -> dict:
    """Return the figures per r, printing each row as it comes."""
    print(f"{'r':>8}{'drag max':>11}{'median':>10}" + ''.join(
        f"{f'yaw h={h:g}':>14}{'ms/step':>9}" for h in TIME_STEPS) + f"{'failed':>8}")
    rows = []
    for r in RATIOS:
        runs = {f'h={h:g}': centre_push(h, r) for h in TIME_STEPS}
        rows.append({'r': r, 'default': r == DEFAULT_RATIO, 'drag_over_weight': drag(r),
                     'centre_push': runs})
        print(format_row(rows[-1]), flush=True)
    print('(drag: net force on the box over its weight, K = 1e5 N/m, 0.1 m/s, once it slides; '
          f'yaw [deg] after {DURATION:g} s of the centre push; ms/step: median thread CPU; '
          'failed: steps of the two centre pushes)')
    return {'ratios': rows, 'stiffness_N_per_m': STIFFNESS, 'duration_s': DURATION,
            'machine': machine()}


def format_row(row: dict) -> str:
    """Return one printed line of the table."""
    drag_row, runs = row['drag_over_weight'], row['centre_push'].values()
    return (f"{row['r']:8.0e}{100 * drag_row['max']:10.2e}%{100 * drag_row['median']:9.2e}%"
            + ''.join(f"{run['yaw_deg']:14.2e}{1e3 * run['cpu_per_step_s']:9.3f}"
                      for run in runs)
            + f"{sum(run['failed_steps'] for run in runs):8d}"
            + ('   (default)' if row['default'] else ''))


def draw(summary: dict, path: Path) -> None:
    """Plot the drag, the yaw and the CPU per step against r."""
    rows = summary['ratios']
    r = [row['r'] for row in rows]
    fig, (left, middle, right) = plt.subplots(1, 3, figsize=(13, 4))
    left.loglog(r, [100 * row['drag_over_weight']['max'] for row in rows], 'o-',
                label='largest')
    left.loglog(r, [100 * row['drag_over_weight']['median'] for row in rows], 's--',
                label='median')
    left.axhline(1.0, color='tab:red', linestyle=':', label='test limit: 1 %')
    left.set_ylabel('drag over weight [%] (K = 1e5 N/m, 0.1 m/s)')
    for h in TIME_STEPS:
        runs = [row['centre_push'][f'h={h:g}'] for row in rows]
        middle.loglog(r, [max(abs(run['yaw_deg']), 1e-15) for run in runs], 'o-',
                      label=f'h = {h:g} s')
        right.semilogx(r, [1e3 * run['cpu_per_step_s'] for run in runs], 'o-',
                       label=f'h = {h:g} s')
    middle.set_ylabel(f'|yaw| after {DURATION:g} s of the centre push [deg] (0 at 1e-15)')
    right.set_ylabel('thread CPU per step, median [ms]')
    for ax in (left, middle, right):
        ax.axvline(DEFAULT_RATIO, color='grey', linestyle=':')
        ax.set_xlabel('r = quasi_static_inertia_ratio (dotted: the default)')
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    """Measure, print and write the figures."""
    parser = argparse.ArgumentParser(description=__doc__.strip().split('\n')[0])
    parser.add_argument('--json', type=Path, default=Path('benchmarks/results/regulariser.json'))
    parser.add_argument('--png', type=Path, default=Path('benchmarks/results/regulariser.png'))
    args = parser.parse_args()
    summary = measure()
    write_results(summary, args.json, args.png, lambda path: draw(summary, path))


if __name__ == '__main__':
    main()
