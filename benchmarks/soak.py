"""
Soak test: hours of simulated stepping, checked for memory growth, failures and drift.

Each scene runs a seeded command pattern, built from closed cycles that
make contact, grasp and release, for ``--sim-hours`` of simulated time
(10 h = 360,000 steps at h = 0.1 s).  It steps through the public API
only, ``QuasistaticSimulator.step(state, v_cmd)``, with the state
passed explicitly every step (None on the first), so the run depends on no
state hidden in the engine.  Only the arm's commands come from elsewhere:
the demo's planner (quasistatic_drake.apps.pick_and_place), run once per scene.

Command patterns (chosen from the scene's robot):

* two pads (joints lift_z, left_x, right_x): close on the box, squeeze, lift
  it 3 to 10 cm, hold it while moving it smoothly (seeded), then the same
  motion backwards: lower, release, open; rest.
* the arm (a robot that ``plan_pick_and_place`` can plan for, as the demo):
  the demo's plan up to a seeded part of its lift (above the object, down,
  close the fingers, lift), hold with a seeded smooth wiggle of the arm
  joints, then backwards: lower, open, retreat to the start; rest.
* any other scene: seeded smooth random joint velocities (at most
  0.05 units/s), played forwards and then backwards.

Every cycle ends with the negated commands in reverse order, so the
commanded reference returns to its start (up to round-off) and the robot
cannot wander off.

Every ``--checkpoint-every`` steps (1000) it records the process's resident
set size (current RSS from /proc/self/statm, or the peak RSS from
resource.getrusage where /proc is missing: the output says which), the steps
per second of that interval (the whole loop: command, step, bookkeeping;
the totals also give steps per CPU second, which other processes on the
machine disturb less), the failed steps so far, the running minimum of
``min_phi_next``, and the drift at the last cycle start (how far the robots,
their reference and the objects are from where they started).

``--repeats`` (2) runs the same seeded sequence again from the start with a
fresh QuasistaticSimulator in the same process.  Reported: the largest
|q difference| to the first repetition at every checkpoint (and a SHA-256 of
the whole q trajectory), and the RSS growth: a straight line fitted to RSS
against steps after the first 10 % of each repetition (bytes per 1000
steps), and the total growth.  Prints a table per scene and writes JSON and
a PNG (RSS and steps per second against steps).

    .venv/bin/python benchmarks/soak.py --quick               # 0.05 h per scene
    .venv/bin/python benchmarks/soak.py [--sim-hours 10] [--repeats 2] [--seed 0]
        [--scenes config/two_pads_lift.yaml config/arm_pick_place.yaml]
        [--checkpoint-every 1000] [--json out/soak.json] [--png out/soak.png]
"""

import argparse
import gc
import hashlib
import os
from pathlib import Path
import time

import matplotlib
import numpy as np

from quasistatic_drake import QuasistaticSimulator, Scenario
from report import machine, write_results

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the Agg backend)

DEFAULT_SCENES = ('config/two_pads_lift.yaml', 'config/arm_pick_place.yaml')
QUICK_HOURS = 0.05
WARM_UP_FRACTION = 0.1       # RSS before this share of a repetition is not fitted
TABLE_ROWS = 10              # checkpoints printed per repetition (about)
PADS_JOINTS = ['lift_z', 'left_x', 'right_x']


# ----- RSS ---------------------------------------------------------------------------------
def rss_reader():
    """Return (a function giving the RSS in bytes, a description of what it reads)."""
    if os.path.exists('/proc/self/statm'):
        page = os.sysconf('SC_PAGE_SIZE')

        def current() -> int:
            with open('/proc/self/statm') as f:
                return int(f.read().split()[1]) * page
        return current, 'current RSS, /proc/self/statm (resident pages x page size)'
    import resource

    def peak() -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return peak, 'peak RSS, resource.getrusage(RUSAGE_SELF).ru_maxrss'


# ----- command patterns --------------------------------------------------------------------
def smooth_random(rng: np.random.Generator, steps: int, mix: np.ndarray,
                  bound: float) -> np.ndarray:
    """
    Return (steps, n) velocities: random knots every 10 steps, linear between, 0 at both ends.

    ``mix`` (n x k) maps the k random signals, each in [-1, 1], to the n
    joints; the result is scaled by ``bound``.
    """
    knots = max(2, steps // 10 + 1)
    values = rng.uniform(-1.0, 1.0, (knots, mix.shape[1]))
    values[0] = values[-1] = 0.0
    t_knots = np.linspace(0.0, steps, knots)
    t = np.arange(steps) + 0.5
    signals = np.column_stack([np.interp(t, t_knots, column) for column in values.T])
    return bound * signals @ mix.T


def closed_cycle(forward: np.ndarray, hold: np.ndarray, rest: int) -> np.ndarray:
    """Return forward, hold, the hold backwards, forward backwards, then ``rest`` still steps."""
    n = forward.shape[1]
    return np.vstack([forward, hold, -hold[::-1], -forward[::-1], np.zeros((rest, n))])


def commands(pattern, seed: int, steps: int):
    """
    Yield (command vector, marker) for ``steps`` steps.

    The marker is 'start' on a cycle's first step, 'held' on the first step
    of the hold of a pattern that holds an object, else None.
    """
    rng = np.random.default_rng(seed)
    k = 0
    while True:
        cycle, held = pattern.cycle(rng)
        for i, v in enumerate(cycle):
            if k == steps:
                return
            yield v, 'start' if i == 0 else 'held' if i == held else None
            k += 1


class PadsPattern:
    """Two pads: squeeze, lift, hold and move the box, put it down, open (module docstring)."""

    name = 'pads: squeeze, lift, move, lower, open'

    def __init__(self, n_a: int, column: int):
        self.n_a, self.column = n_a, column

    def cycle(self, rng: np.random.Generator) -> tuple[np.ndarray, int]:
        """Return one cycle of commands (all robots' joints side by side) and its hold's start."""
        squeeze_steps, lift_steps = rng.integers(2, 5), rng.integers(3, 11)
        forward = np.array([[0.0, 0.1, -0.1]] * 2 + [[0.0, 0.02, -0.02]] * squeeze_steps
                           + [[0.1, 0.0, 0.0]] * lift_steps)
        # lift (half the bound) and a sideways motion of both pads together
        mix = np.array([[0.5, 0.0], [0.0, 1.0], [0.0, 1.0]])
        hold = smooth_random(rng, int(rng.integers(10, 31)), mix, 0.05)
        return self._embed(closed_cycle(forward, hold, int(rng.integers(1, 6)))), len(forward)

    def _embed(self, v: np.ndarray) -> np.ndarray:
        out = np.zeros((len(v), self.n_a))
        out[:, self.column:self.column + v.shape[1]] = v
        return out


class ArmPattern(PadsPattern):
    """The demo's approach, grasp and lift, a wiggle while holding, then all backwards."""

    name = "arm: the demo's grasp and lift, a held wiggle, then backwards"

    def __init__(self, n_a: int, column: int, plan, finger_idx: np.ndarray):
        super().__init__(n_a, column)
        lift = plan.step_range('lift')
        self.velocities = plan.velocities
        self.lift_start, self.lift_steps = lift.start, len(lift)
        self.mix = np.eye(plan.velocities.shape[1])
        self.mix[finger_idx] = 0.0            # the fingers keep their grip while held

    def cycle(self, rng: np.random.Generator) -> tuple[np.ndarray, int]:
        """Return one cycle of commands (all robots' joints side by side) and its hold's start."""
        lift = int(rng.integers(self.lift_steps // 2, self.lift_steps + 1))
        forward = self.velocities[:self.lift_start + lift]
        hold = smooth_random(rng, int(rng.integers(20, 51)), self.mix, 0.03)
        return self._embed(closed_cycle(forward, hold, int(rng.integers(1, 6)))), len(forward)


class RandomPattern:
    """Any scene: smooth random joint velocities (at most 0.05 units/s), then backwards."""

    name = 'random: smooth joint velocities, then backwards'

    def __init__(self, n_a: int):
        self.mix = np.eye(n_a)

    def cycle(self, rng: np.random.Generator) -> tuple[np.ndarray, None]:
        """Return one cycle of commands (all robots' joints side by side) and no hold."""
        return closed_cycle(np.zeros((0, len(self.mix))),
                            smooth_random(rng, 50, self.mix, 0.05), 0), None


def make_pattern(sim: QuasistaticSimulator):
    """Return the command pattern for the scene of ``sim`` (module docstring)."""
    robots = sim.model.robots
    n_a = sum(len(r.joint_names) for r in robots)
    if len(robots) != 1:
        return RandomPattern(n_a)
    robot = robots[0]
    if list(robot.joint_names) == PADS_JOINTS:
        return PadsPattern(n_a, 0)
    if sim.model.objects:
        # the demo's planner (pydrake differential IK); any other robot falls back
        from quasistatic_drake.apps.pick_and_place import PickPlaceTask, plan_pick_and_place
        from quasistatic_drake.apps.planning import PlanningError
        task = PickPlaceTask(robot=robot.name)
        if set(task.finger_joints) <= set(robot.joint_names):
            try:
                plan, _, _ = plan_pick_and_place(sim, task)
            except PlanningError:
                return RandomPattern(n_a)
            fingers = np.array([list(robot.joint_names).index(j) for j in task.finger_joints])
            return ArmPattern(n_a, 0, plan, fingers)
    return RandomPattern(n_a)


# ----- one repetition ----------------------------------------------------------------------
def run_once(scenario: Scenario, pattern, seed: int, steps: int, every: int, rss,
             reference: dict | None, rep: int) -> dict:
    """
    Run the seeded sequence once with a fresh simulator; return its checkpoint series.

    Prints about TABLE_ROWS of the checkpoints as it goes; ``reference`` is
    the first repetition's result, to compare q with.
    """
    gc.collect()
    sim = QuasistaticSimulator(scenario)
    robots = sim.model.robots
    slices, start = {}, 0
    for r in robots:
        slices[r.name] = slice(start, start + len(r.joint_names))
        start += len(r.joint_names)
    objects = [o.name for o in sim.model.objects]
    q = q0 = sim.default_positions()
    robot0 = np.concatenate([sim.robot_positions(q0, r.name) for r in robots])
    xyz0 = [sim.object_pose(q0, name).translation() for name in objects]
    q_ref = warm_start = None
    failed, min_phi, errors, lifts = 0, np.inf, [], []
    drift = {'robot': 0.0, 'reference': 0.0, 'object_mm': 0.0}
    digest = hashlib.sha256(q.tobytes())
    series = {key: [] for key in ('step', 'rss_mb', 'steps_per_s', 'failed_steps', 'min_phi',
                                  'robot_drift', 'reference_drift', 'object_drift_mm',
                                  'repeat_diff')}
    qs = []
    n_checkpoints = -(-steps // every) + 1
    stride = max(1, -(-(n_checkpoints - 1) // TABLE_ROWS))

    def object_offsets():
        return [sim.object_pose(q, name).translation() - p0 for name, p0 in zip(objects, xyz0)]

    def checkpoint(k, rate):
        series['step'].append(k)
        series['rss_mb'].append(rss() / 2 ** 20)
        series['steps_per_s'].append(rate)
        series['failed_steps'].append(failed)
        series['min_phi'].append(float(min_phi) if np.isfinite(min_phi) else None)
        series['robot_drift'].append(drift['robot'])
        series['reference_drift'].append(drift['reference'])
        series['object_drift_mm'].append(drift['object_mm'])
        qs.append(q.copy())
        i = len(qs) - 1
        series['repeat_diff'].append(None if reference is None else
                                     float(np.max(np.abs(q - reference['_qs'][i]))))
        if i % stride == 0 or i == n_checkpoints - 1:
            print_row(rep, series, scenario.time_step)

    checkpoint(0, None)
    t_start = t_last = time.perf_counter()
    cpu_start = time.process_time()
    for k, (v, marker) in enumerate(commands(pattern, seed, steps), start=1):
        if marker == 'start' and k > 1:
            robot_q = np.concatenate([sim.robot_positions(q, r.name) for r in robots])
            drift['robot'] = float(np.max(np.abs(robot_q - robot0), initial=0.0))
            drift['reference'] = float(np.max(np.abs(q_ref - robot0), initial=0.0))
            drift['object_mm'] = 1e3 * max((float(np.linalg.norm(d)) for d in object_offsets()),
                                           default=0.0)
        elif marker == 'held' and objects:
            lifts.append(1e3 * max(float(d[2]) for d in object_offsets()))
        start = sim.initial_state(q, q_ref=q_ref, warm_start=warm_start)
        result = sim.step(start, {name: v[s] for name, s in slices.items()})
        if not result.success:
            failed += 1
            if len(errors) < 5:
                errors.append(f'step {k}: {result.status} {result.diagnostics.error}'.strip())
        state = result.state_next
        q, q_ref, warm_start = np.array(state.q), np.array(state.q_ref), state.warm_start
        min_phi = min(min_phi, result.diagnostics.min_phi_next)
        digest.update(q.tobytes())
        if k % every == 0 or k == steps:
            now = time.perf_counter()
            checkpoint(k, (k - series['step'][-1]) / (now - t_last))
            t_last = now
    wall = time.perf_counter() - t_start
    cpu = time.process_time() - cpu_start
    out = {'wall_s': wall, 'steps_per_s': steps / wall, 'cpu_s': cpu,
           'steps_per_cpu_s': steps / cpu, 'failed_steps': failed,
           'min_phi': float(min_phi) if np.isfinite(min_phi) else None, 'errors': errors,
           'cycles_held': len(lifts), 'min_held_lift_mm': min(lifts, default=None),
           'trajectory_sha256': digest.hexdigest(), 'checkpoints': series}
    out.update(rss_fit(series, steps))
    out['max_repeat_diff'] = None if reference is None else max(series['repeat_diff'])
    out['_qs'] = qs                       # for the next repetition; not written to JSON
    return out


def rss_fit(series: dict, steps: int) -> dict:
    """Return the RSS line fitted after the warm-up, and the growth over the repetition."""
    step = np.array(series['step'], dtype=float)
    rss_b = np.array(series['rss_mb']) * 2 ** 20
    after = step >= WARM_UP_FRACTION * steps
    slope = (float(np.polyfit(step[after], rss_b[after], 1)[0]) * 1000.0
             if np.count_nonzero(after) >= 2 else None)
    return {'rss_start_mb': float(rss_b[0] / 2 ** 20), 'rss_end_mb': float(rss_b[-1] / 2 ** 20),
            'rss_growth_mb': float((rss_b[-1] - rss_b[0]) / 2 ** 20),
            'rss_growth_after_warm_up_mb': float((rss_b[-1] - rss_b[after][0]) / 2 ** 20),
            'rss_slope_bytes_per_1000_steps': slope}


# ----- a scene -----------------------------------------------------------------------------
def fmt(value, spec: str, scale: float = 1.0) -> str:
    """Format value * scale, or '-' for None."""
    return '-' if value is None else format(value * scale, spec)


def least(values):
    """Return the smallest of the values that are not None (None if there are none)."""
    return min((v for v in values if v is not None), default=None)


def print_row(rep: int, s: dict, h: float) -> None:
    """Print the last checkpoint of the series ``s`` of repetition ``rep``."""
    print(f"{rep:>3} {s['step'][-1]:>8} {s['step'][-1] * h / 3600:7.3f} {s['rss_mb'][-1]:8.1f} "
          f"{fmt(s['steps_per_s'][-1], '7.0f'):>7} {s['failed_steps'][-1]:>6} "
          f"{fmt(s['min_phi'][-1], '9.1e'):>9} {fmt(s['repeat_diff'][-1], '9.1e'):>9} "
          f"{s['reference_drift'][-1]:9.1e} {s['object_drift_mm'][-1]:8.2f}", flush=True)


def soak_scene(path: Path, hours: float, repeats: int, seed: int, every: int, rss) -> dict:
    """Run one scene ``repeats`` times; print its table and return its figures."""
    scenario = Scenario.from_yaml(path)
    h = scenario.time_step
    steps = max(1, int(round(hours * 3600.0 / h)))
    pattern = make_pattern(QuasistaticSimulator(scenario))
    print(f'\n{path}: {steps} steps of h = {h} s ({steps * h / 3600:.3f} h), seed {seed}, '
          f'pattern {pattern.name}')
    print(f"{'rep':>3} {'step':>8} {'sim h':>7} {'RSS MB':>8} {'step/s':>7} {'failed':>6} "
          f"{'min phi m':>9} {'rep diff':>9} {'ref drift':>9} {'obj mm':>8}", flush=True)
    runs = []
    for rep in range(repeats):
        runs.append(run_once(scenario, pattern, seed, steps, every, rss,
                             runs[0] if runs else None, rep))
    wall = sum(r['wall_s'] for r in runs)
    cpu = sum(r['cpu_s'] for r in runs)
    slopes = [r['rss_slope_bytes_per_1000_steps'] for r in runs
              if r['rss_slope_bytes_per_1000_steps'] is not None]
    diffs = [r['max_repeat_diff'] for r in runs[1:]]
    same = (all(r['trajectory_sha256'] == runs[0]['trajectory_sha256'] for r in runs)
            and all(d == 0.0 for d in diffs)) if diffs else None
    for r in runs:
        del r['_qs']
    summary = {
        'scene': str(path), 'pattern': pattern.name, 'time_step': h, 'steps': steps,
        'sim_hours': steps * h / 3600.0, 'repeats': repeats, 'seed': seed, 'wall_s': wall,
        'steps_per_s': steps * repeats / wall, 'cpu_s': cpu,
        'steps_per_cpu_s': steps * repeats / cpu,
        'failed_steps': sum(r['failed_steps'] for r in runs),
        'min_phi': least(r['min_phi'] for r in runs),
        'cycles_held': runs[0]['cycles_held'],
        'min_held_lift_mm': least(r['min_held_lift_mm'] for r in runs),
        'rss_start_mb': runs[0]['rss_start_mb'], 'rss_end_mb': runs[-1]['rss_end_mb'],
        'rss_slope_bytes_per_1000_steps': max(slopes) if slopes else None,
        'rss_growth_mb': runs[-1]['rss_end_mb'] - runs[0]['rss_start_mb'],
        'max_repeat_diff': max(diffs) if diffs else None, 'bitwise_identical': same,
        'object_drift_mm': runs[0]['checkpoints']['object_drift_mm'][-1],
        'reference_drift': runs[0]['checkpoints']['reference_drift'][-1],
        'repetitions': runs}
    identical = ('bitwise identical' if same else
                 'not compared (one repetition)' if same is None else
                 f"max |q difference| {summary['max_repeat_diff']:.3g}")
    slope_text = ', '.join(f"{fmt(r['rss_slope_bytes_per_1000_steps'], '.0f')} B"
                           for r in runs)
    print(f"  {steps * repeats} steps in {wall:.1f} s: {summary['steps_per_s']:.0f} steps/s "
          f"(real-time factor {summary['steps_per_s'] * h:.0f}; "
          f"{summary['steps_per_cpu_s']:.0f} per CPU second); failed steps "
          f"{summary['failed_steps']}; min phi {fmt(summary['min_phi'], '.3g')} m")
    if summary['cycles_held']:
        print(f"  {summary['cycles_held']} grasps per repetition; every one lifted the object "
              f"at least {summary['min_held_lift_mm']:.1f} mm (at the start of the hold)")
    print(f'  repetitions: {identical}')
    print(f"  RSS {summary['rss_start_mb']:.1f} -> {summary['rss_end_mb']:.1f} MB; per "
          f'repetition, fitted after the first {WARM_UP_FRACTION:.0%}: {slope_text} per 1000 '
          'steps; growth after the warm-up '
          + ', '.join(f"{r['rss_growth_after_warm_up_mb']:+.2f} MB" for r in runs))
    print(f"  at the last cycle start: reference {summary['reference_drift']:.1e} from its "
          f"start, objects {summary['object_drift_mm']:.2f} mm from theirs")
    print(f'  10 h of simulated time here: {36000 / h:.0f} steps, about '
          f"{36000 / h / summary['steps_per_s'] / 60:.0f} min per repetition at this rate "
          f"({36000 / h / summary['steps_per_cpu_s'] / 60:.0f} min of CPU time)")
    for r in runs:
        for e in r['errors']:
            print(f'  failed: {e}')
    return summary


def plot(results: list, path: Path) -> None:
    """Plot RSS and steps per second against steps, per scene and repetition."""
    fig, axes = plt.subplots(2, len(results), figsize=(6.5 * len(results), 7), squeeze=False)
    for col, scene in enumerate(results):
        for rep, run in enumerate(scene['repetitions']):
            s = run['checkpoints']
            axes[0, col].plot(s['step'], s['rss_mb'], marker='.', label=f'repetition {rep}')
            axes[1, col].plot(s['step'][1:], s['steps_per_s'][1:], marker='.',
                              label=f'repetition {rep}')
        axes[0, col].set_title(f"{Path(scene['scene']).stem}: {scene['sim_hours']:.2f} h "
                               f"simulated, {scene['steps']} steps")
        axes[0, col].set_ylabel('RSS [MB]')
        axes[1, col].set_ylabel('steps per second')
        for ax in axes[:, col]:
            ax.set_xlabel('step')
            ax.grid(alpha=0.3)
            ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    """Soak every scene, print, and save."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--scenes', nargs='+', type=Path,
                        default=[Path(scene) for scene in DEFAULT_SCENES])
    parser.add_argument('--sim-hours', type=float, default=10.0,
                        help='simulated hours per scene and repetition (default 10)')
    parser.add_argument('--quick', action='store_true', help=f'--sim-hours {QUICK_HOURS}')
    parser.add_argument('--repeats', type=int, default=2)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--checkpoint-every', type=int, default=1000)
    parser.add_argument('--json', type=Path, default=Path('out/soak.json'))
    parser.add_argument('--png', type=Path, default=Path('out/soak.png'))
    args = parser.parse_args()
    hours = QUICK_HOURS if args.quick else args.sim_hours
    if not (np.isfinite(hours) and hours > 0.0):
        parser.error('--sim-hours: must be positive')
    if args.repeats < 1:
        parser.error('--repeats: must be at least 1')
    if args.checkpoint_every < 1:
        parser.error('--checkpoint-every: must be at least 1')
    missing = [str(p) for p in args.scenes if not p.is_file()]
    if missing:
        parser.error(f'--scenes: no such file {missing}')
    rss, rss_source = rss_reader()
    print(f'RSS: {rss_source}')
    results = [soak_scene(p, hours, args.repeats, args.seed, args.checkpoint_every, rss)
               for p in args.scenes]
    summary = {'machine': machine(),
               'rss_source': rss_source, 'checkpoint_every': args.checkpoint_every,
               'warm_up_fraction': WARM_UP_FRACTION,
               'scenes': {Path(r['scene']).stem: r for r in results}}
    write_results(summary, args.json, args.png, lambda path: plot(results, path))


if __name__ == '__main__':
    main()
