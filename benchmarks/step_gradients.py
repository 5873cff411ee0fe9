"""
The cost of a step with gradients (dq_next/dq, dq_next/dv_cmd, dq_next/dq_ref) against one without.

Each scene rolls out a scripted command; every step is taken twice from
the same state, once with ``gradients=True``, and the wall times are
compared (the per-scene median of the ratio).  The goal was at most 2x.
The gradients run the contact detector again at q +- 1e-6 e_i for every
coordinate (``step_gradients.py``), so their cost grows with n_q.

    .venv/bin/python benchmarks/step_gradients.py [--steps 30]
        [--json out/step_gradients.json] [--png out/step_gradients.png]
"""

import argparse
import json
from pathlib import Path
import time

import matplotlib
import numpy as np

from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.paths import package_share_dir

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the Agg backend)

GOAL = 2.0
SCENES = {   # name: (config file, robot, command, lcp feedback scale or None)
    'finger pushes box (qp)': ('finger_push.yaml', 'finger', [0.1, 0.0, 0.0], None),
    'pads lift box (qp)': ('two_pads_lift.yaml', 'pads', [0.02, 0.05, -0.05], None),
    'fingers push disk (lcp)': ('halm_posa_push.yaml', 'fingers', [0.0, -1.0, 0.0, -1.0],
                                2.0 ** -4),
}


def measure(config: str, robot: str, command: list, c, steps: int) -> dict:
    """Return the step times without and with gradients over a rollout [s]."""
    scenario = Scenario.from_yaml(package_share_dir() / 'config' / config)
    if c is not None:
        scenario = scenario.with_formulation('lcp', feedback_scale=c)
    sim = QuasistaticSimulator(scenario)
    q, q_ref, plain, with_gradients = sim.default_positions(), None, [], []
    for _ in range(steps):
        start = time.perf_counter()
        result = sim.step(q, {robot: command}, q_ref=q_ref)
        plain.append(time.perf_counter() - start)
        start = time.perf_counter()
        sim.step(q, {robot: command}, q_ref=q_ref, gradients=True)
        with_gradients.append(time.perf_counter() - start)
        q, q_ref = result.q_next, result.q_ref_next
    plain, with_gradients = np.array(plain), np.array(with_gradients)
    return {'n_q': int(len(q)), 'plain_ms': float(1e3 * np.median(plain)),
            'gradients_ms': float(1e3 * np.median(with_gradients)),
            'ratio': float(np.median(with_gradients / plain))}


def main() -> None:
    """Measure each scene, print the table, write JSON and a bar plot."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--steps', type=int, default=30)
    parser.add_argument('--json', type=Path, default=Path('out/step_gradients.json'))
    parser.add_argument('--png', type=Path, default=Path('out/step_gradients.png'))
    args = parser.parse_args()
    rows = {name: measure(*spec, args.steps) for name, spec in SCENES.items()}
    print(f"{'scene':26}{'n_q':>5}{'step ms':>10}{'+gradients ms':>15}{'ratio':>8}")
    for name, row in rows.items():
        print(f"{name:26}{row['n_q']:5d}{row['plain_ms']:10.3f}{row['gradients_ms']:15.3f}"
              f"{row['ratio']:8.1f}")
    print(f'goal: ratio <= {GOAL}')
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({'scenes': rows, 'goal_ratio': GOAL,
                                     'steps': args.steps}, indent=2))
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.barh(list(rows), [row['ratio'] for row in rows.values()])
    ax.axvline(GOAL, color='k', ls='--', label='goal')
    ax.set_xlabel('step time with gradients / without')
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.png, dpi=100)
    print(f'wrote {args.json} and {args.png}')


if __name__ == '__main__':
    main()
