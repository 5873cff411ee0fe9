"""
Time the QP step: the engine on the two-pad scene, and the plant update on the arm scene.

two_pads: one step is everything QuasistaticSimulator.step does on
config/two_pads_lift.yaml: the signed-distance query, the contact manifold,
the Jacobians, the QP solve, the integration and the sweep check.  The pads
close on the box, squeeze, lift it 10 cm, hold it, put it down and open.
Target: median at most 0.5 ms.

arm: one step is a full QuasistaticPlant update inside a Drake Simulator
(``AdvanceTo`` over one period h = 0.1 s: the event dispatch, reading the
command port and the engine step) for config/arm_pick_place.yaml, the whole
pick-and-place of the demo (165 steps).  Targets: median at most 1 ms, and a
real-time factor h / median of at least 100.  The arm's update is also split
into the formulation's solve (``engine.formulation.solve``, timed by a
wrapper on that instance) and everything outside it (the geometry query,
the contact manifold, the Jacobians, the integration, the Diagram and the
command source): the latter is the floor no faster solver can lower.

Each sequence is repeated; the first pass (numba's cache load) is not
counted.  Prints tables and writes JSON and a PNG.

    .venv/bin/python benchmarks/step_time.py [--repeats 5] [--scene all|two_pads|arm]
        [--json out/step_time.json] [--png out/step_time.png]

The guard against regressions (run it before committing a change to the
step; docs/performance.md): ``--quick --against REV`` times the working
tree and the git revision REV, each in a worker process of its own
(``step_time_worker.py``), in thread CPU time, passes of the two scenes
alternately for about 30 s, and prints the mean CPU per two-pad step and per
arm update of each, and their ratio (working tree / REV):

    .venv/bin/python benchmarks/step_time.py --quick --against HEAD [--seconds 30]

REV is extracted once into .build/step_time/<commit> (with its numba cache:
the first run against a new revision also compiles its kernels).
"""

import argparse
import json
import os
from pathlib import Path
import subprocess
import sys
import time

import matplotlib
import numpy as np

from pydrake.systems.analysis import Simulator
from pydrake.systems.framework import DiagramBuilder

from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.paths import package_share_dir
from quasistatic_drake.apps.pick_and_place import PickPlaceTask, plan_pick_and_place
from quasistatic_drake.quasistatic_plant import QuasistaticPlant
from report import machine, write_results

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the Agg backend)

PHASES = [('close', [0.0, 0.1, -0.1], 2), ('squeeze', [0.0, 0.02, -0.02], 3),
          ('lift', [0.1, 0.0, 0.0], 10), ('hold', [0.0, 0.0, 0.0], 10),
          ('lower', [-0.1, 0.0, 0.0], 9), ('open', [0.0, -0.1, 0.1], 5)]


def run_sequence(sim: QuasistaticSimulator) -> list:
    """Run the phases once from the default configuration; return (phase, step, solve, n_c)."""
    state = sim.initial_state()
    rows = []
    for phase, command, steps in PHASES:
        for _ in range(steps):
            start = time.thread_time()
            result = sim.step(state, {'pads': command})
            elapsed = time.thread_time() - start
            if not result.success:
                raise RuntimeError(f'step failed in phase {phase}: {result.status}')
            state = result.state_next
            rows.append((phase, elapsed, result.diagnostics.solve_time,
                         result.contact_set.n_c))
    return rows


def summarize_two_pads(rows: list) -> dict:
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


def timed_solves(formulation) -> list:
    """Wrap this formulation instance's ``solve`` to record its thread CPU; return the record."""
    spent, solve = [], formulation.solve

    def timed(*args, **kwargs):
        start = time.thread_time()
        try:
            return solve(*args, **kwargs)
        finally:
            spent.append(time.thread_time() - start)
    formulation.solve = timed
    return spent


def run_arm(scenario: Scenario) -> list:
    """Run the demo's pick-and-place; return (waypoint, update, engine step, n_c, solve)."""
    builder = DiagramBuilder()
    plant = builder.AddSystem(QuasistaticPlant(scenario))
    solves = timed_solves(plant.engine.formulation)
    plan, _, _ = plan_pick_and_place(plant.engine, PickPlaceTask())
    source = builder.AddSystem(plan.command_source())
    builder.Connect(source.get_output_port(), plant.get_velocity_command_input_port('iiwa'))
    simulator = Simulator(builder.Build())
    context = plant.GetMyContextFromRoot(simulator.get_context())
    status = plant.get_step_status_output_port()
    rows = []
    for k in range(plan.steps):
        solves.clear()
        start = time.thread_time()
        simulator.AdvanceTo((k + 1) * scenario.time_step)
        elapsed = time.thread_time() - start
        outcome = status.Eval(context)
        if not outcome.success:
            raise RuntimeError(f'arm step {k} failed: {outcome.status}')
        rows.append((plan.labels[k], elapsed, outcome.step_time, len(outcome.contacts),
                     sum(solves)))
    return rows


def summarize_arm(rows: list, h: float) -> dict:
    """Return the plant update statistics in microseconds and the real-time factor."""
    update = np.array([r[1] for r in rows]) * 1e6
    engine = np.array([r[2] for r in rows]) * 1e6
    solve = np.array([r[4] for r in rows]) * 1e6
    phases = {}
    for label in dict.fromkeys(r[0] for r in rows):
        mask = np.array([r[0] == label for r in rows])
        phases[label] = {'median_update_us': float(np.median(update[mask])),
                         'median_contacts': float(np.median([r[3] for r in rows
                                                             if r[0] == label]))}
    median = float(np.median(update))
    return {'steps': len(rows), 'time_step': h, 'median_update_us': median,
            'p90_update_us': float(np.percentile(update, 90)),
            'max_update_us': float(np.max(update)),
            'median_engine_step_us': float(np.median(engine)),
            'median_solve_us': float(np.median(solve)),
            'median_outside_solve_us': float(np.median(update - solve)),
            'min_outside_solve_us': float(np.min(update - solve)),
            'real_time_factor': h / (median * 1e-6), 'phases': phases}


def plot(results: dict, path: Path) -> None:
    """Write one histogram of step times per scene."""
    fig, axes = plt.subplots(1, len(results), figsize=(6.5 * len(results), 4), squeeze=False)
    for ax, (scene, (times_us, target_us, what)) in zip(axes[0], results.items()):
        ax.hist(times_us, bins=60, color='tab:blue')
        ax.axvline(np.median(times_us), color='k', linestyle='--',
                   label=f'median {np.median(times_us):.0f} us')
        ax.axvline(target_us, color='tab:red', label=f'target {target_us:.0f} us')
        ax.set_xlabel(f'{what} [us]')
        ax.set_ylabel('steps')
        ax.set_title(scene)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def bench_two_pads(repeats: int) -> tuple[dict, np.ndarray]:
    """Measure and print the engine step on the two-pad scene."""
    sim = QuasistaticSimulator(
        Scenario.from_yaml(package_share_dir() / 'config' / 'two_pads_lift.yaml'))
    run_sequence(sim)                                   # warm-up: numba cache, Drake caches
    rows = [row for _ in range(repeats) for row in run_sequence(sim)]
    summary = summarize_two_pads(rows)
    print('two_pads: QuasistaticSimulator.step (target: median <= 500 us)')
    print(f"{'phase':>10} {'step [us]':>10} {'solve [us]':>10} {'contacts':>8}")
    for phase, stats in summary['phases'].items():
        print(f"{phase:>10} {stats['median_step_us']:10.0f} {stats['median_solve_us']:10.0f} "
              f"{stats['median_contacts']:8.0f}")
    print(f"{'all':>10} {summary['median_step_us']:10.0f} {summary['median_solve_us']:10.0f}"
          f"   ({summary['steps']} steps; p90 {summary['p90_step_us']:.0f} us, "
          f"max {summary['max_step_us']:.0f} us)")
    return summary, np.array([r[1] for r in rows]) * 1e6


def bench_arm(repeats: int) -> tuple[dict, np.ndarray]:
    """Measure and print the plant update on the arm scene."""
    scenario = Scenario.from_yaml(package_share_dir() / 'config' / 'arm_pick_place.yaml')
    run_arm(scenario)                                   # warm-up
    rows = [row for _ in range(repeats) for row in run_arm(scenario)]
    summary = summarize_arm(rows, scenario.time_step)
    print(f'arm: QuasistaticPlant update at h = {scenario.time_step} s '
          '(targets: median <= 1000 us, real-time factor >= 100)')
    print(f"{'waypoint':>10} {'update [us]':>11} {'contacts':>8}")
    for label, stats in summary['phases'].items():
        print(f"{label:>10} {stats['median_update_us']:11.0f} {stats['median_contacts']:8.0f}")
    print(f"{'all':>10} {summary['median_update_us']:11.0f}   ({summary['steps']} steps; p90 "
          f"{summary['p90_update_us']:.0f} us, max {summary['max_update_us']:.0f} us; engine "
          f"step median {summary['median_engine_step_us']:.0f} us; real-time factor "
          f"{summary['real_time_factor']:.0f})")
    print(f"{'':>10} the formulation's solve: median {summary['median_solve_us']:.0f} us; "
          f"everything outside it: median {summary['median_outside_solve_us']:.0f} us, "
          f"min {summary['min_outside_solve_us']:.0f} us")
    return summary, np.array([r[1] for r in rows]) * 1e6


REPO = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).resolve().parent / 'step_time_worker.py'


def extracted(revision: str) -> Path:
    """Return a checkout of ``revision`` in .build/step_time/<commit> (extracted once)."""
    commit = subprocess.run(['git', '-C', str(REPO), 'rev-parse', '--verify',
                             f'{revision}^{{commit}}'], capture_output=True, text=True)
    if commit.returncode != 0:
        raise SystemExit(f'--against {revision}: not a git revision of {REPO} '
                         f'({commit.stderr.strip()}). Fix: a commit, branch or tag, e.g. HEAD.')
    root = REPO / '.build' / 'step_time' / commit.stdout.strip()
    if not (root / 'quasistatic_drake').is_dir():
        root.mkdir(parents=True, exist_ok=True)
        archive = subprocess.Popen(['git', '-C', str(REPO), 'archive', commit.stdout.strip()],
                                   stdout=subprocess.PIPE)
        subprocess.run(['tar', '-x', '-C', str(root)], stdin=archive.stdout, check=True)
        if archive.wait() != 0:
            raise SystemExit(f'git archive {revision} failed')
    return root


class Worker:
    """A step_time_worker.py process timing the checkout at ``root``."""

    def __init__(self, root: Path):
        env = dict(os.environ, PYTHONPATH=str(root))
        self.process = subprocess.Popen([sys.executable, str(WORKER)], env=env, cwd=str(root),
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True)

    def wait_ready(self) -> None:
        """Read lines until the worker says it is ready (its warm-up is done)."""
        for line in self.process.stdout:
            if line.strip() == 'ready':
                return
        raise RuntimeError(f'the worker exited with {self.process.wait()} before it was ready')

    def run(self, scene: str) -> list:
        """Return the thread CPU times [s] of one pass of ``scene``."""
        self.process.stdin.write(scene + '\n')
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f'the worker exited with {self.process.wait()} during {scene}')
        return json.loads(line)

    def close(self) -> None:
        """Ask the worker to quit."""
        if self.process.poll() is None:
            self.process.stdin.write('quit\n')
            self.process.stdin.flush()
        self.process.wait()


def quick(against: str, seconds: float) -> dict:
    """Time the working tree against ``against``, alternately; print and return the means."""
    versions = {'tree': REPO, against: extracted(against)}
    workers = {name: Worker(root) for name, root in versions.items()}
    try:
        for worker in workers.values():
            worker.wait_ready()
        times = {scene: {name: [] for name in workers} for scene in ('two_pads', 'arm')}
        start, rounds = time.perf_counter(), 0
        while rounds < 2 or time.perf_counter() - start < seconds:
            for scene, by_version in times.items():
                for name, worker in workers.items():       # old and new, alternately
                    by_version[name].extend(worker.run(scene))
            rounds += 1
    finally:
        for worker in workers.values():
            worker.close()
    summary = {'against': against, 'rounds': rounds}
    print(f'thread CPU time, working tree against {against}, {rounds} alternating rounds')
    for scene, by_version in times.items():
        mean = {name: float(np.mean(values)) * 1e6 for name, values in by_version.items()}
        ratio = mean['tree'] / mean[against]
        summary[scene] = {'mean_us': mean, 'ratio': ratio,
                          'steps': {name: len(values) for name, values in by_version.items()}}
        what = 'step' if scene == 'two_pads' else 'plant update'
        print(f"{scene:>9} mean {what}: tree {mean['tree']:.0f} us, {against} "
              f"{mean[against]:.0f} us, ratio {ratio:.3f}")
    return summary


def main() -> None:
    """Measure, print and save."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true',
                        help='time the working tree against --against REV (about --seconds)')
    parser.add_argument('--against', default='HEAD', metavar='REV')
    parser.add_argument('--seconds', type=float, default=20.0)
    parser.add_argument('--repeats', type=int, default=5)
    parser.add_argument('--scene', choices=('all', 'two_pads', 'arm'), default='all')
    parser.add_argument('--json', type=Path, default=Path('out/step_time.json'))
    parser.add_argument('--png', type=Path, default=Path('out/step_time.png'))
    args = parser.parse_args()
    if args.quick:
        quick(args.against, args.seconds)
        return
    if args.repeats < 1:
        parser.error('--repeats must be at least 1')
    summary = {'machine': machine()}
    histograms = {}
    if args.scene in ('all', 'two_pads'):
        summary['two_pads'], times = bench_two_pads(args.repeats)
        histograms['two pads and a box: QuasistaticSimulator.step'] = (times, 500, 'step')
    if args.scene in ('all', 'arm'):
        summary['arm'], times = bench_arm(args.repeats)
        histograms['arm, gripper, cylinder: plant update, h = 0.1 s'] = (times, 1000, 'update')
    write_results(summary, args.json, args.png, lambda path: plot(histograms, path))


if __name__ == '__main__':
    main()
