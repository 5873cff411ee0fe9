"""
Pang & Tedrake 2018's Table I: the MIQP solver's runtime per step over the arm pick-and-place.

Pang & Tedrake (IROS 2018), Sec. V-B: a 7-DOF arm with a parallel-jaw gripper
picks up an object, lifts it and carries it; 12 s at h = 0.005 s, 2400 MIQPs
solved with Gurobi; Table I gives the number of binaries and the average,
worst and standard deviation of Gurobi's own ``Runtime`` per step:

    cylinder      36 binaries   2.7 ms avg   11.8 ms worst   0.83 ms std
    rounded box   72 binaries   6.6 ms avg  118.7 ms worst    9.7 ms std

Here the same task runs on this project's arm (config/arm_pick_place*.yaml)
with ``formulation: miqp`` at h = 0.005 s, the demo's waypoints with their
durations scaled to ``--duration`` seconds.  Settings that differ from the
demo's scenario, and why:

* ``contact_detection_tolerance`` 5 mm (the scenarios' 2 cm is for h = 0.1 s:
  the gripper moves about 1 mm per step here, and the engine widens the
  tolerance for a step that could reach further).  It keeps the palm, 1 cm
  above the object, out of the MIQP.
* ``miqp.max_points_per_pair`` 4, as in the scenarios: the grasp fits the
  restricted pip licence of Gurobi (200 variables with a quadratic
  objective).

Two measurements per object:

* **Closed loop**, per backend of ``--backends``: the whole task, each
  backend driving its own trajectory.  Per MIQP (one engine step's solves,
  both stages of the MIQP, the least-force stage included) the thread CPU
  time of the backend's ``solve`` calls (model building included; CPU, not
  wall time: the host is shared), the solver's own runtime (Gurobi's
  ``Runtime`` is wall time), the branch-and-bound nodes and the binaries
  N = 2 n_c + n_c n_d; failed steps, the lift and the placement error, and
  the placement's distance to the first backend's (Gurobi's).  SCIP takes
  0.5 to 2 s per held step, so ``--closed-loop-max-steps`` caps each run
  (``--scip-steps`` for SCIP alone).
* **Replay**: every ``--replay-every``-th MIQP of the first backend's run
  (the same eq. 23 data and MIP start) solved by each backend of
  ``--replay-backends``: CPU time per MIQP, and the largest difference of
  x = Delta q (velocity coordinates: m and rad) to the first backend's
  solution where both succeed.

``binaries`` in the table is the largest N of the run, ``held`` the median
N while the object is off the table.  A step whose runtime reached
``miqp.time_limit`` is counted in ``time_limit_steps``.

    .venv/bin/python benchmarks/miqp_runtime.py [--objects cylinder rounded_box]
        [--backends gurobi daqp] [--replay-backends gurobi scip daqp]
        [--replay-every 10] [--scip-steps 400] [--other-steps N] [--other-time-limit S]
        [--time-step 0.005] [--duration 12]
        [--json benchmarks/results/miqp_runtime.json]
        [--png benchmarks/results/miqp_runtime.png] [--delayed] [--max-steps N]
        [--points-per-pair K] [--no-least-force]

--json writes {"rows": [{"object", "backend", "binaries", "avg_ms", "worst_ms",
"median_ms", "std_ms", "nodes_avg", "failed_steps", "place_error_m", ...}],
"replay": [{"object", "backend", "avg_ms", "worst_ms", "median_ms", "failed",
"max_dx_vs_reference"}], "settings": {...}, "machine": {...}}.
"""

import argparse
from dataclasses import dataclass, replace
import gc
from pathlib import Path
import sys
import time

import matplotlib
import numpy as np

from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.formulations.miqp_backends import BACKENDS, MiqpTooLarge
from quasistatic_drake.formulations.miqp_data import MIQP_BACKENDS
from quasistatic_drake.paths import package_share_dir
from quasistatic_drake.apps.pick_and_place import PickPlaceTask, plan_pick_and_place
from report import machine, write_json

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the Agg backend)

SCENES = {'cylinder': 'arm_pick_place.yaml', 'rounded_box': 'arm_pick_place_rounded_box.yaml',
          'box': 'arm_pick_place_box.yaml'}
PAPER = {'cylinder': (36, 2.7, 11.8, 0.83), 'rounded_box': (72, 6.6, 118.7, 9.7)}


@dataclass(frozen=True)
class BenchSettings:
    """What the benchmark changes in each scenario (module docstring)."""

    time_step: float = 0.005
    duration: float = 12.0
    tolerance: float = 0.005
    points_per_pair: int = 4
    backend: str = 'gurobi'
    delayed: bool = False
    time_limit: float = 2.0
    max_steps: int = 0                   # > 0: stop after this many steps (smoke tests)
    least_force: bool = True             # the second, least-force solve (miqp.least_force)
    replay_every: int = 10               # replay every k-th MIQP of the reference run


def bench_scenario(path: Path, settings: BenchSettings) -> Scenario:
    """Return the scene's scenario with the MIQP settings of the benchmark."""
    scenario = Scenario.from_yaml(path)
    scenario = scenario.with_formulation(
        'miqp', max_points_per_pair=settings.points_per_pair, backend=settings.backend,
        delayed_lower_bound=settings.delayed, time_limit=settings.time_limit,
        least_force=settings.least_force)
    return replace(scenario, time_step=settings.time_step,
                   contact_detection_tolerance=settings.tolerance)


def scaled_task(duration: float) -> PickPlaceTask:
    """Return the demo's task with its waypoint durations scaled to ``duration`` seconds."""
    task = PickPlaceTask()
    scale = duration / sum(task.durations.values())
    return replace(task, durations={k: v * scale for k, v in task.durations.items()})


class TimedBackend:
    """A backend whose ``solve`` calls are timed in thread CPU time and recorded."""

    def __init__(self, backend, record: bool):
        """Wrap ``backend``; with ``record``, keep every call's data, start and answer."""
        self.backend, self.record = backend, record
        self.cpu, self.calls = 0.0, []

    def solve(self, data, settings, start=None):
        """Solve with the wrapped backend, adding its thread CPU time to ``cpu``."""
        begin = time.thread_time()
        answer = self.backend.solve(data, settings, start=start)
        self.cpu += time.thread_time() - begin
        if self.record:
            self.calls.append((data, settings, start, answer))
        return answer


def run_object(name: str, settings: BenchSettings, backend: str = 'gurobi',
               max_steps: int = 0, record: bool = False) -> dict:
    """Simulate the pick-and-place of one object with ``backend``; return its row."""
    settings = replace(settings, backend=backend)
    scenario = bench_scenario(package_share_dir() / 'config' / SCENES[name], settings)
    engine = QuasistaticSimulator(scenario)
    timed = TimedBackend(engine.formulation.backend, record)
    engine.formulation.backend = timed
    task = scaled_task(settings.duration)
    plan, target, object_name = plan_pick_and_place(engine, task)
    # The collector would otherwise rescan the recorded calls of earlier runs inside a
    # timed solve: a 70 ms pause landed on one daqp step after Gurobi's recorded run.
    gc.collect()
    gc.freeze()
    q = engine.default_positions()
    z0 = engine.object_pose(q, object_name).translation()[2]
    cpu, solve, step, binaries, nodes, heights, failures, added = [], [], [], [], [], [], 0, 0
    q_ref = warm_start = None
    limit = max_steps or settings.max_steps
    steps = min(plan.steps, limit) if limit > 0 else plan.steps
    for k in range(steps):
        start = time.perf_counter()
        before = timed.cpu
        start_state = engine.initial_state(q, q_ref=q_ref, warm_start=warm_start)
        result = engine.step(start_state, {task.robot: plan.velocities[k]})
        step.append(time.perf_counter() - start)
        cpu.append(timed.cpu - before)
        solve.append(result.diagnostics.solve_time)
        solution = result.diagnostics.solution
        binaries.append(solution.binaries if solution is not None else 0)
        nodes.append(getattr(solution, 'nodes', 0))
        added += getattr(solution, 'added_points', 0) > 0
        failures += not result.success
        q, q_ref, warm_start = result.q_next, result.state_next.q_ref, result.state_next.warm_start
        heights.append(engine.object_pose(q, object_name).translation()[2] - z0)
        if (k + 1) % max(steps // 10, 1) == 0:
            print(f'  {name}, {backend}: step {k + 1} of {steps}, {np.mean(cpu) * 1e3:.2f} ms '
                  'CPU per MIQP on average so far', file=sys.stderr, flush=True)
    cpu_ms, solve_ms, heights = np.array(cpu) * 1e3, np.array(solve) * 1e3, np.array(heights)
    final = engine.object_pose(q, object_name).translation()
    held = np.array(binaries)[heights > 0.01]
    return {
        'object': name, 'backend': backend, 'binaries': int(max(binaries)),
        'binaries_held': int(np.median(held)) if len(held) else 0,
        'avg_ms': float(cpu_ms.mean()), 'worst_ms': float(cpu_ms.max()),
        'std_ms': float(cpu_ms.std()), 'median_ms': float(np.median(cpu_ms)),
        'p99_ms': float(np.percentile(cpu_ms, 99)),
        'solver_avg_ms': float(solve_ms.mean()), 'solver_worst_ms': float(solve_ms.max()),
        'nodes_avg': float(np.mean(nodes)), 'nodes_max': int(max(nodes)),
        'step_avg_ms': float(np.mean(step) * 1e3),
        'lifted': bool(heights.max() > 0.5 * task.lift_height),
        'max_lift_m': float(heights.max()),
        'place_error_m': float(np.linalg.norm(final[:2] - target[:2])),
        'final_position': final.tolist(),
        'steps': int(steps), 'failed_steps': int(failures), 'resolved_steps': int(added),
        'time_limit_steps': int(np.sum(solve_ms >= 0.99e3 * settings.time_limit)),
        'solve_ms': cpu_ms.tolist(), 'calls': timed.calls,
    }


def replay(name: str, calls: list, backends: list, every: int, reference: str) -> list:
    """Solve every ``every``-th recorded MIQP with each backend; return a row per backend."""
    sample = calls[::every]
    rows = []
    for backend in backends:
        solver = BACKENDS[backend]()
        cpu, failed, dx = [], 0, []
        for data, settings, start, answer in sample:
            begin = time.thread_time()
            mine = solver.solve(data, replace(settings, backend=backend), start=start)
            cpu.append(time.thread_time() - begin)
            failed += mine.x is None
            if mine.x is not None and answer.x is not None:
                dx.append(float(np.max(np.abs(mine.x - answer.x), initial=0.0)))
        cpu_ms = np.array(cpu) * 1e3
        rows.append({'object': name, 'backend': backend, 'reference': reference,
                     'miqps': len(sample), 'avg_ms': float(cpu_ms.mean()),
                     'worst_ms': float(cpu_ms.max()), 'median_ms': float(np.median(cpu_ms)),
                     'failed': int(failed), 'max_dx_vs_reference': float(max(dx, default=0.0)),
                     'p99_dx_vs_reference': float(np.percentile(dx, 99)) if dx else 0.0})
        print(f'  replay {name}, {backend}: {rows[-1]["avg_ms"]:.2f} / '
              f'{rows[-1]["worst_ms"]:.1f} ms avg / worst CPU, {failed} failed',
              file=sys.stderr, flush=True)
    return rows


def print_table(rows: list, replayed: list) -> None:
    """Print the rows beside Pang & Tedrake 2018's Table I, then the replay."""
    print(f"{'object':12s} {'backend':7s} {'binaries':>8s} {'held':>5s} {'avg ms':>8s} "
          f"{'worst ms':>9s} {'median':>7s} {'nodes':>7s} {'failed':>6s} {'lifted':>6s} "
          f"{'place mm':>8s} {'vs ref mm':>9s} | paper: binaries, avg, worst, std")
    for r in rows:
        paper = PAPER.get(r['object'])
        ref = (f"{paper[0]}, {paper[1]}, {paper[2]}, {paper[3]}" if paper else '-')
        print(f"{r['object']:12s} {r['backend']:7s} {r['binaries']:8d} {r['binaries_held']:5d} "
              f"{r['avg_ms']:8.2f} {r['worst_ms']:9.1f} {r['median_ms']:7.2f} "
              f"{r['nodes_avg']:7.1f} {r['failed_steps']:6d} {str(r['lifted']):>6s} "
              f"{r['place_error_m'] * 1e3:8.2f} {r.get('place_vs_reference_m', 0) * 1e3:9.3f} "
              f"| {ref}")
    if replayed:
        print(f"replayed MIQPs (thread CPU per MIQP): {'object':12s} {'backend':7s} "
              f"{'avg ms':>8s} {'worst ms':>9s} {'median':>7s} {'failed':>6s} "
              f"{'max |dx| vs ref':>15s}")
        for r in replayed:
            print(f"{'':38s}{r['object']:12s} {r['backend']:7s} {r['avg_ms']:8.2f} "
                  f"{r['worst_ms']:9.1f} {r['median_ms']:7.2f} {r['failed']:6d} "
                  f"{r['max_dx_vs_reference']:15.2e}")


def plot(rows: list, path: Path) -> None:
    """Write a histogram of the solver's runtime per step, one series per object."""
    fig, ax = plt.subplots(figsize=(7, 4))
    all_ms = np.concatenate([r['solve_ms'] for r in rows])
    bins = np.logspace(np.log10(max(all_ms.min(), 1e-2)), np.log10(all_ms.max() * 1.01), 50)
    for r in rows:
        ax.hist(r['solve_ms'], bins=bins, alpha=0.5, histtype='stepfilled',
                label=f"{r['object']}, {r['backend']} (avg {r['avg_ms']:.1f} ms, worst "
                      f"{r['worst_ms']:.0f} ms, {r['steps']} steps)")
    ax.set_xscale('log')
    ax.set_yscale('log')
    ax.set_xlabel('MIQP CPU time per step [ms] (thread CPU of the backend, both stages)')
    ax.set_ylabel('steps')
    ax.set_title('Pang & Tedrake 2018, Table I: arm pick-and-place, h = '
                 f"{rows[0].get('time_step', '')}")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse_args(argv=None) -> argparse.Namespace:
    """Parse and check the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--objects', nargs='+', default=['cylinder', 'rounded_box'],
                        help=f'objects to pick, from {sorted(SCENES)}')
    parser.add_argument('--time-step', type=float, default=BenchSettings.time_step)
    parser.add_argument('--duration', type=float, default=BenchSettings.duration,
                        help='seconds of the whole task (the waypoint durations are scaled)')
    parser.add_argument('--tolerance', type=float, default=BenchSettings.tolerance,
                        help='contact_detection_tolerance [m]')
    parser.add_argument('--points-per-pair', type=int, default=BenchSettings.points_per_pair)
    parser.add_argument('--backends', nargs='+', default=['gurobi', 'daqp'],
                        help=f'closed-loop runs, from {list(MIQP_BACKENDS)}; the first is the '
                             'reference of the replay and of the placements')
    parser.add_argument('--replay-backends', nargs='*', default=list(MIQP_BACKENDS),
                        help='backends that solve the reference run\'s recorded MIQPs')
    parser.add_argument('--replay-every', type=int, default=BenchSettings.replay_every,
                        help='replay every k-th MIQP of the reference run')
    parser.add_argument('--scip-steps', type=int, default=400,
                        help='closed-loop steps of SCIP (0: all; 0.5 to 2 s per held step)')
    parser.add_argument('--other-steps', type=int, default=0,
                        help='closed-loop steps of the backends after the first (0: all)')
    parser.add_argument('--other-time-limit', type=float, default=0.0,
                        help='miqp.time_limit of the backends after the first (0: --time-limit)')
    parser.add_argument('--delayed', action='store_true',
                        help='the one-step-delayed lower bound of Sec. V-B')
    parser.add_argument('--time-limit', type=float, default=BenchSettings.time_limit,
                        help='miqp.time_limit per MIQP [s]')
    parser.add_argument('--no-least-force', action='store_true',
                        help='skip the least-force second solve (the paper solves one MIQP)')
    parser.add_argument('--max-steps', type=int, default=0,
                        help='stop each run after this many steps (0: the whole task)')
    parser.add_argument('--json', type=Path, default=Path('out/miqp_runtime.json'))
    parser.add_argument('--png', type=Path, default=Path('out/miqp_runtime.png'))
    args = parser.parse_args(argv)
    unknown = [o for o in args.objects if o not in SCENES]
    if unknown:
        parser.error(f'--objects: unknown {unknown}; choose from {sorted(SCENES)}.')
    if args.other_steps < 0 or args.other_time_limit < 0:
        parser.error('--other-steps and --other-time-limit: must be 0 or positive.')
    for name in ('time_step', 'duration', 'tolerance', 'time_limit'):
        if not getattr(args, name) > 0:
            parser.error(f"--{name.replace('_', '-')}: must be positive, got "
                         f'{getattr(args, name)}.')
    if args.points_per_pair < 1:
        parser.error(f'--points-per-pair: must be at least 1, got {args.points_per_pair}.')
    if args.max_steps < 0:
        parser.error(f'--max-steps: must be 0 (all) or positive, got {args.max_steps}.')
    for option in ('backends', 'replay_backends'):
        unknown = [b for b in getattr(args, option) if b not in MIQP_BACKENDS]
        if unknown:
            parser.error(f"--{option.replace('_', '-')}: unknown {unknown}; choose from "
                         f'{list(MIQP_BACKENDS)}.')
    if args.replay_every < 1:
        parser.error(f'--replay-every: must be at least 1, got {args.replay_every}.')
    return args


def main(argv=None) -> int:
    """Run the benchmark, print the table, write the JSON and the PNG."""
    args = parse_args(argv)
    settings = BenchSettings(time_step=args.time_step, duration=args.duration,
                             tolerance=args.tolerance, points_per_pair=args.points_per_pair,
                             backend=args.backends[0], delayed=args.delayed,
                             time_limit=args.time_limit, max_steps=args.max_steps,
                             least_force=not args.no_least_force,
                             replay_every=args.replay_every)
    rows, replayed = [], []
    for name in args.objects:
        print(f'{name}: {int(round(settings.duration / settings.time_step))} steps '
              f'at h = {settings.time_step} s ...', flush=True)
        reference = None
        for backend in args.backends:
            cap = args.scip_steps if backend == 'scip' else 0
            run = settings
            if reference is not None:
                cap = min(c for c in (cap, args.other_steps) if c > 0) if (
                    cap or args.other_steps) else 0
                if args.other_time_limit > 0:
                    run = replace(settings, time_limit=args.other_time_limit)
            try:
                row = run_object(name, run, backend, max_steps=cap,
                                 record=reference is None)
            except MiqpTooLarge as err:
                print(f'{name}, {backend}: {err}', file=sys.stderr)
                return 1
            row['time_step'] = settings.time_step
            if reference is None:
                reference = row
            else:
                row['place_vs_reference_m'] = float(np.linalg.norm(
                    np.subtract(row['final_position'], reference['final_position'])))
            rows.append(row)
        if args.replay_backends:
            replayed += replay(name, reference['calls'], args.replay_backends,
                               settings.replay_every, reference['backend'])
    print_table(rows, replayed)
    plot(rows, args.png)
    summary = [{k: v for k, v in r.items() if k not in ('solve_ms', 'calls')} for r in rows]
    write_json(args.json, {'rows': summary, 'replay': replayed, 'settings': settings.__dict__,
                           'machine': machine()})
    print(f'wrote {args.json} and {args.png}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
