"""
Time the whole QP step on the two-pad-and-box scene (config/two_pads_lift.yaml).

One step is everything QuasistaticSimulator.step does: the signed-distance
query, the contact manifold, the Jacobians, the QP solve, the integration and
the sweep check.  The pads close on the box, squeeze, lift it 10 cm, hold it,
put it down and open; the sequence is repeated, and the first pass (numba's
cache load) is not counted.  Prints a table and writes JSON and a PNG.

    .venv/bin/python benchmarks/step_time.py [--repeats 5] [--json out/step_time.json]
"""

import argparse
import json
import os
from pathlib import Path
import platform
import time

import matplotlib
import numpy as np

from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.paths import package_share_dir

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the Agg backend)

PHASES = [('close', [0.0, 0.1, -0.1], 2), ('squeeze', [0.0, 0.02, -0.02], 3),
          ('lift', [0.1, 0.0, 0.0], 10), ('hold', [0.0, 0.0, 0.0], 10),
          ('lower', [-0.1, 0.0, 0.0], 9), ('open', [0.0, -0.1, 0.1], 5)]


def run_sequence(sim: QuasistaticSimulator) -> list:
    """Run the phases once from the default configuration; return (phase, step, solve, n_c)."""
    sim.reset()
    q = sim.default_positions()
    rows = []
    for phase, command, steps in PHASES:
        for _ in range(steps):
            start = time.perf_counter()
            result = sim.step(q, {'pads': command})
            elapsed = time.perf_counter() - start
            if not result.success:
                raise RuntimeError(f'step failed in phase {phase}: {result.status}')
            q = result.q_next
            rows.append((phase, elapsed, result.solve_time, result.contact_set.n_c))
    return rows


def summarize(rows: list) -> dict:
    """Return medians per phase and overall, in microseconds."""
    step = np.array([r[1] for r in rows]) * 1e6
    solve = np.array([r[2] for r in rows]) * 1e6
    phases = {}
    for phase, _, _ in PHASES:
        mask = np.array([r[0] == phase for r in rows])
        phases[phase] = {'median_step_us': float(np.median(step[mask])),
                         'median_solve_us': float(np.median(solve[mask])),
                         'median_contacts': float(np.median([r[3] for r in rows
                                                             if r[0] == phase]))}
    return {'steps': len(rows), 'median_step_us': float(np.median(step)),
            'p90_step_us': float(np.percentile(step, 90)),
            'max_step_us': float(np.max(step)),
            'median_solve_us': float(np.median(solve)), 'phases': phases}


def plot(rows: list, path: Path) -> None:
    """Write a histogram of the step times."""
    step = np.array([r[1] for r in rows]) * 1e6
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.hist(step, bins=60, color='tab:blue')
    ax.axvline(np.median(step), color='k', linestyle='--',
               label=f'median {np.median(step):.0f} us')
    ax.axvline(500, color='tab:red', label='target 500 us')
    ax.set_xlabel('QP step time [us]')
    ax.set_ylabel('steps')
    ax.set_title('QuasistaticSimulator.step, two pads and a box')
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    """Measure, print and save."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--repeats', type=int, default=5)
    parser.add_argument('--json', type=Path, default=Path('out/step_time.json'))
    parser.add_argument('--png', type=Path, default=Path('out/step_time.png'))
    args = parser.parse_args()
    scenario = Scenario.from_yaml(package_share_dir() / 'config' / 'two_pads_lift.yaml')
    sim = QuasistaticSimulator(scenario)
    run_sequence(sim)                                   # warm-up: numba cache, Drake caches
    rows = [row for _ in range(args.repeats) for row in run_sequence(sim)]
    summary = summarize(rows)
    summary['machine'] = {'platform': platform.platform(), 'python': platform.python_version(),
                          'cpus': os.cpu_count()}
    print(f"{'phase':>8} {'step [us]':>10} {'solve [us]':>10} {'contacts':>8}")
    for phase, stats in summary['phases'].items():
        print(f"{phase:>8} {stats['median_step_us']:10.0f} {stats['median_solve_us']:10.0f} "
              f"{stats['median_contacts']:8.0f}")
    print(f"{'all':>8} {summary['median_step_us']:10.0f} {summary['median_solve_us']:10.0f}"
          f"   ({summary['steps']} steps; p90 {summary['p90_step_us']:.0f} us, "
          f"max {summary['max_step_us']:.0f} us)")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(summary, indent=2))
    args.png.parent.mkdir(parents=True, exist_ok=True)
    plot(rows, args.png)
    print(f'wrote {args.json} and {args.png}')


if __name__ == '__main__':
    main()
