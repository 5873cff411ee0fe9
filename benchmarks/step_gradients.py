"""
The cost of a step with gradients (dq_next/dq, dq_next/dv_cmd, dq_next/dq_ref) against one without.

Each scene rolls out a scripted command (the arm: the demo's planned
pick-and-place, every k-th step of it measured so that the steps span the
approach, grasp, carry and release); every measured step is taken three times
from the same state: without gradients, with ``gradients="commands"``
(dq_next/dv_cmd and dq_next/dq_ref, qsim's kBOnly) and with
``gradients=True`` (all three); their thread CPU times are compared (the per-scene
median of the ratio).  The goal is at most 2x.  dq_next/dq runs the contact
detector again at q +- 1e-6 e_i for every coordinate (``step_gradients.py``),
so its cost grows with n_q; the command gradients need no detector run.

    .venv/bin/python benchmarks/step_gradients.py [--steps 30]
        [--json out/step_gradients.json] [--png out/step_gradients.png]
"""

import argparse
from pathlib import Path
import time

import matplotlib
import numpy as np

from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.apps.pick_and_place import PickPlaceTask, plan_pick_and_place
from quasistatic_drake.paths import package_share_dir
from report import machine, write_results

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the Agg backend)

GOAL = 2.0
SCENES = {   # name: (config file, robot, command, formulation and its settings or None)
    'finger pushes box (qp)': ('finger_push.yaml', 'finger', [0.1, 0.0, 0.0], None),
    'pads lift box (qp)': ('two_pads_lift.yaml', 'pads', [0.02, 0.05, -0.05], None),
    'fingers push disk (lcp)': ('halm_posa_push.yaml', 'fingers', [0.0, -1.0, 0.0, -1.0],
                                ('lcp', {'feedback_scale': 2.0 ** -4})),
    'finger pushes box (miqp)': ('finger_push.yaml', 'finger', [0.1, 0.05, -0.05],
                                 ('miqp', {})),
    'arm picks and places (qp)': ('arm_pick_place.yaml', 'iiwa', 'plan', None),
}


def measure(config: str, robot: str, command: list, formulation, steps: int) -> dict:
    """Return the step times without and with gradients over a rollout [s]."""
    scenario = Scenario.from_yaml(package_share_dir() / 'config' / config)
    if formulation is not None:
        scenario = scenario.with_formulation(formulation[0], **formulation[1])
    sim = QuasistaticSimulator(scenario)
    if command == 'plan':                      # the demo's pick-and-place, every stride-th step
        plan = plan_pick_and_place(sim, PickPlaceTask())[0]
        commands, stride = plan.commands, max(plan.steps // steps, 1)
    else:
        commands, stride = (lambda k: {robot: command}), 1
    state = sim.initial_state()
    times = {mode: [] for mode in (False, 'commands', True)}
    for k in range(steps * stride):
        if k % stride:
            state = sim.step(state, commands(k)).state_next
            continue
        for mode, spent in times.items():      # each from the same state, warm start and all
            start = time.thread_time()
            result = sim.step(state, commands(k), gradients=mode)
            spent.append(time.thread_time() - start)
        state = result.state_next
    plain, commands, full = (np.array(spent) for spent in times.values())
    return {'n_q': int(len(state.q)), 'plain_ms': float(1e3 * np.median(plain)),
            'commands_ms': float(1e3 * np.median(commands)),
            'gradients_ms': float(1e3 * np.median(full)),
            'commands_ratio': float(np.median(commands / plain)),
            'ratio': float(np.median(full / plain))}


def main() -> None:
    """Measure each scene, print the table, write JSON and a bar plot."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--steps', type=int, default=30)
    parser.add_argument('--json', type=Path, default=Path('out/step_gradients.json'))
    parser.add_argument('--png', type=Path, default=Path('out/step_gradients.png'))
    args = parser.parse_args()
    rows = {name: measure(*spec, args.steps) for name, spec in SCENES.items()}
    print(f"{'scene':26}{'n_q':>5}{'step ms':>10}{'commands ms':>13}{'ratio':>7}"
          f"{'all ms':>9}{'ratio':>7}")
    for name, row in rows.items():
        print(f"{name:26}{row['n_q']:5d}{row['plain_ms']:10.3f}{row['commands_ms']:13.3f}"
              f"{row['commands_ratio']:7.2f}{row['gradients_ms']:9.3f}{row['ratio']:7.1f}")
    print(f'goal: ratio <= {GOAL}')
    write_results({'scenes': rows, 'goal_ratio': GOAL, 'steps': args.steps,
                   'machine': machine()}, args.json, args.png, lambda png: plot(rows, png))


def plot(rows: dict, png: Path) -> None:
    """Draw each scene's two ratios as bars against the goal."""
    fig, ax = plt.subplots(figsize=(7, 3.5))
    names = np.arange(len(rows))
    ax.barh(names - 0.2, [row['commands_ratio'] for row in rows.values()], height=0.4,
            label='gradients="commands"')
    ax.barh(names + 0.2, [row['ratio'] for row in rows.values()], height=0.4,
            label='gradients=True')
    ax.set_yticks(names, list(rows))
    ax.set_xscale('log')
    ax.axvline(GOAL, color='k', ls='--', label='goal')
    ax.set_xlabel('step time with gradients / without')
    ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=100)


if __name__ == '__main__':
    main()
