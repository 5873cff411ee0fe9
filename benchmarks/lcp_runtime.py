"""
Halm & Posa's runtime claim: the LCP solve per step on the polygonal peg-in-hole.

Halm & Posa, Sec. 6.2: the peg-in-hole (two triangular fingers, a 2 x 6
peg, a slot with 1 % clearance; c = 0.01, h = 0.05 s, 240 steps) took PATH
1.51 ms per LCP on average.  The goal here is at most 1 ms.

This runs the hand-built peg-in-hole of ``quasistatic-drake paper-jamming``
(``apps/paper_jamming.py``: the authors' contact selection, each step one
to a few LCPs) ``--repeats`` times and reports, per step:

* the LCP time: the solver's wall time summed over the step's LCPs (what
  the authors' ``simulateQuasiStatics.m`` sums into ``ctime``), and the
  largest LCP of the step (variables);
* the whole hand-built step: the geometry of all 64 vertex contacts, the
  selection, the LCPs and the check of the contacts left out;
* for the engine: the Drake path's step (``QuasistaticSimulator.step`` under
  ``formulation: lcp``) on the wall scene (config/halm_posa_wall.yaml,
  c = 2^-6), contact detection included.

Each figure is the per-step median over the repeats; the table gives the
mean, median, 90th percentile and maximum over the steps.

    .venv/bin/python benchmarks/lcp_runtime.py [--repeats 5] [--backend lemke]
        [--json out/lcp_runtime.json] [--png out/lcp_runtime.png]
"""

import argparse
from pathlib import Path
import time

import matplotlib
import numpy as np

from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.apps import paper_jamming
from quasistatic_drake.apps import paper_jamming_scenes as scenes
from quasistatic_drake.formulations.lcp_solvers import BACKENDS
from quasistatic_drake.paths import package_share_dir
from report import machine, write_results

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the Agg backend)

PAPER_PATH_MS = 1.51      # Halm & Posa, Sec. 6.2: PATH's mean per LCP
GOAL_MS = 1.0


def peg_steps(backend: str) -> dict:
    """Run the peg-in-hole once; return per-step LCP time, LCP size and step time [s]."""
    example = scenes.peg_in_hole()
    clock = scenes.authors_clock(example.h, example.steps)
    q_o, q_m = example.q_o0.astype(float), example.q_m0.astype(float)
    lcp, size, step, failed = [], [], [], 0
    for k in range(example.steps):
        start = time.perf_counter()
        u = example.command(q_o, q_m, clock[k])
        outcome = paper_jamming.hand_step(example, q_o, q_m, u, paper_jamming.PEG_C, backend)
        step.append(time.perf_counter() - start)
        lcp.append(outcome.lcp_time)
        size.append(outcome.lcp_size)
        if outcome.q_o is None:
            failed += 1
        else:
            q_o, q_m = outcome.q_o, outcome.q_m
    return {'lcp': np.array(lcp), 'size': np.array(size), 'step': np.array(step),
            'failed': failed, 'final': q_o}


def engine_steps() -> np.ndarray:
    """Return the engine's step times [s] over the wall scene (400 steps, c = 2^-6)."""
    scenario = Scenario.from_yaml(package_share_dir() / 'config' / 'halm_posa_wall.yaml')
    sim = QuasistaticSimulator(scenario.with_formulation('lcp', feedback_scale=2.0 ** -6))
    state, times = sim.initial_state(), []
    for _ in range(400):
        result = sim.step(state, {'fingers': [1.0, -1.0, 1.0, -1.0]})
        times.append(result.diagnostics.step_time)
        state = result.state_next
    return np.array(times)


def stats(seconds: np.ndarray) -> dict:
    """Return mean, median, p90 and max in milliseconds."""
    ms = 1e3 * seconds
    return {'mean': float(ms.mean()), 'median': float(np.median(ms)),
            'p90': float(np.percentile(ms, 90)), 'max': float(ms.max())}


def main() -> None:
    """Measure, print the table, write JSON and the plot."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--repeats', type=int, default=5)
    parser.add_argument('--backend', choices=BACKENDS, default='lemke')
    parser.add_argument('--json', type=Path, default=Path('out/lcp_runtime.json'))
    parser.add_argument('--png', type=Path, default=Path('out/lcp_runtime.png'))
    args = parser.parse_args()
    peg_steps(args.backend)                          # load the compiled kernels first
    runs = [peg_steps(args.backend) for _ in range(args.repeats)]
    lcp = np.median([r['lcp'] for r in runs], axis=0)
    step = np.median([r['step'] for r in runs], axis=0)
    size = runs[0]['size']
    engine = np.median([engine_steps() for _ in range(args.repeats)], axis=0)
    result = {
        'peg_in_hole': {'steps': int(len(lcp)), 'failed_steps': runs[0]['failed'],
                        'final_peg_pose': runs[0]['final'].tolist(),
                        'lcp_ms': stats(lcp), 'step_ms': stats(step),
                        'lcp_size': {'median': float(np.median(size)), 'max': int(size.max())},
                        'paper_path_ms': PAPER_PATH_MS, 'goal_ms': GOAL_MS,
                        'meets_goal': bool(1e3 * lcp.mean() <= GOAL_MS)},
        'engine_wall_step_ms': stats(engine),
        'settings': {'repeats': args.repeats, 'backend': args.backend,
                     'c': paper_jamming.PEG_C},
        'machine': machine(),
    }
    peg = result['peg_in_hole']
    print(f"peg-in-hole, {peg['steps']} steps, {peg['failed_steps']} failed, backend "
          f"{args.backend}, median of {args.repeats} runs per step:")
    print(f"{'':24}{'mean':>9}{'median':>9}{'p90':>9}{'max':>9}  [ms]")
    for name, row in (('LCP solve per step', peg['lcp_ms']), ('whole hand-built step',
                                                              peg['step_ms']),
                      ('engine step (wall)', result['engine_wall_step_ms'])):
        print(f"{name:24}{row['mean']:9.3f}{row['median']:9.3f}{row['p90']:9.3f}"
              f"{row['max']:9.3f}")
    print(f"LCP size: median {peg['lcp_size']['median']:.0f}, max {peg['lcp_size']['max']} "
          f"variables; paper (PATH): {PAPER_PATH_MS} ms mean; goal <= {GOAL_MS} ms: "
          f"{'met' if peg['meets_goal'] else 'NOT met'}")

    def draw(png: Path) -> None:
        """Draw the plot to png."""
        fig, ax = plt.subplots(1, 2, figsize=(12, 4))
        t = np.arange(len(lcp)) * scenes.peg_in_hole().h
        ax[0].plot(t, 1e3 * lcp, label='LCP solve per step')
        ax[0].plot(t, 1e3 * step, label='whole hand-built step')
        ax[0].axhline(PAPER_PATH_MS, color='k', ls='--', label='paper: PATH, mean')
        ax[0].set_xlabel('t [s]')
        ax[0].set_ylabel('ms')
        ax[0].set_yscale('log')
        ax[0].legend()
        ax[0].set_title('Peg-in-hole (Halm & Posa, Sec. 6.2)')
        ax[1].scatter(size, 1e3 * lcp, s=8)
        ax[1].set_xlabel('largest LCP of the step [variables]')
        ax[1].set_ylabel('LCP time per step [ms]')
        ax[1].set_yscale('log')
        fig.tight_layout()
        fig.savefig(png, dpi=100)

    write_results(result, args.json, args.png, draw)


if __name__ == '__main__':
    main()
