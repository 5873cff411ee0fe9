"""
Scaling with the number of objects: N boxes on a table, one of them pushed by a pad.

Why: a step of ours solves one problem per contact island over every
contact of the scene, so its cost grows with the objects; this measures how
fast, against the dynamic simulator Drake offers (SAP), on a scene where
only one object moves and the others merely rest.

The scene is config/bench_pad_push.yaml (the table, the two-pad robot of
stiffness 1000 per joint, a 10 cm box at the origin pushed along +x by the
left pad, which starts 1 cm behind it) with N - 1 more boxes resting on the
table in a grid beside the push (``GRID_X`` x ``GRID_Y``, 5 cm apart and
8 cm or more from the pushed box's path, every box 2 cm or more inside the
1.2 m x 0.8 m table top), so that they never touch the pad or the pushed box.
The left pad moves at 0.1 m/s for 1.5 s of simulated time, the other joints
hold still.  For N = 1, 2, 4, 8, 16, 32 it measures the thread CPU time
(``time.thread_time``) per simulated second of:

* ours: ``QuasistaticSimulator.step`` at the scenario's h = 0.1 s, the
  stepping loop only (construction and ``initial_state()`` not counted; one
  untimed pass first, for numba's cache and Drake's);
* SAP: Drake's discrete MultibodyPlant with the SAP approximation and point
  contact, at h = 0.01 s and h = 0.001 s, the robot under the joint
  impedance of benchmarks/mbp_reference.py (the scenario's stiffness,
  critical damping, gravity compensated; ``MbpScene``), its reference moving
  at 0.1 m/s; ``Simulator.AdvanceTo`` only.  The full 1.5 s at h = 0.001 s
  too: at N = 32 that takes about 1.5 s of CPU, so no span is shortened
  (``--quick`` shortens them all; the JSON's notes say so).

Each run is repeated (a fresh state or Simulator) until its timed CPU adds
up to ``Timing.min_total`` (at most ``Timing.max_runs`` runs); the figure is
the median.  BLAS and OpenMP are held to one thread (threadpoolctl) while
timing.  Also reported: the pushed box's final x in each simulator (a
sanity check that both pushed it alike, not asserted), the farthest any
resting box moved and the lowest a resting box's centre got (under SAP's
point contact a box rocks on one contact point and sinks into the table:
about 2.4 cm at h = 0.01 s, 2 mm at h = 0.001 s), and the growth exponent
of the cost over N = 8..32 (the least-squares slope of log cost against
log N).

Why the box file is copied: Drake's Parser names a model instance after the
file's ``<robot name>``, and one plant cannot hold two instances of one name.
The scenario loader renames each instance right after parsing it, so today
box.urdf could be listed N times under distinct names; but that rests on the
loader's order of parse-and-rename (an entry named ``box`` would clash with
the next copy).  So each box gets a copy of box.urdf of its own, model name
``box_i``, written to a temporary directory, and the scenario is built as a
dict (``Scenario.from_dict``) pointing at the copies; both simulators load
the same copies through it.

    .venv/bin/python benchmarks/scaling.py [--sizes 1,2,4,8,16,32] [--quick]
        [--json benchmarks/results/scaling.json] [--png benchmarks/results/scaling.png]

``--quick``: sizes 1 and 4 (unless ``--sizes``), 0.5 s spans (0.2 s for SAP
at h = 0.001 s), fewer timed runs.
"""

import argparse
from dataclasses import dataclass
from pathlib import Path
import subprocess
import tempfile
import time

import matplotlib
from matplotlib.ticker import NullLocator
import numpy as np
from pydrake.multibody.plant import ContactModel, DiscreteContactApproximation
from pydrake.systems.analysis import Simulator
from threadpoolctl import threadpool_limits
import yaml

from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.paths import package_share_dir
from mbp_reference import MbpScene, MbpSettings
from report import machine, write_results
from trajectory_metrics import JointReference

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the Agg backend)

SIZES = (1, 2, 4, 8, 16, 32)
QUICK_SIZES = (1, 4)
SPAN = 1.5                      # [s] simulated
QUICK_SPAN = 0.5                # [s]
SPEED = 0.1                     # [m/s] of the left pad
PUSH_JOINT = 1                  # left_x
SAP_STEPS = (0.01, 0.001)       # [s]
QUICK_FINE_SPAN = 0.2           # [s] SAP at h = 0.001 s under --quick
GRID_X = tuple(-0.525 + 0.15 * k for k in range(8))   # [m] resting boxes' centres
GRID_Y = (0.33, -0.33, 0.18, -0.18)                    # [m] rows, filled in this order
TABLE_HALF = (0.6, 0.4)         # [m] urdf/table.urdf: a 1.2 m x 0.8 m top at the origin
BOX_HALF = 0.05                 # [m] urdf/box.urdf: a 10 cm cube
FIT_FROM = 8                    # the growth exponent is fitted over N >= FIT_FROM
REPO = Path(__file__).resolve().parent.parent
CONFIG = package_share_dir() / 'config' / 'bench_pad_push.yaml'
BOX = package_share_dir() / 'urdf' / 'box.urdf'


class StepFailed(RuntimeError):
    """A step of ours that did not succeed."""


@dataclass(frozen=True)
class Timing:
    """How often a run is timed: again while the timed total is below ``min_total``."""

    min_total: float = 2.0       # [s] thread CPU
    max_runs: int = 10


def box_positions(n: int) -> list:
    """Return the xy of the N boxes: the pushed one at the origin, the others on the grid."""
    grid = [(x, y) for y in GRID_Y for x in GRID_X]
    if n - 1 > len(grid):
        raise SystemExit(f'--sizes: at most {len(grid) + 1} boxes fit on the table, got {n}.')
    boxes = [(0.0, 0.0)] + grid[:n - 1]
    inside = np.array(TABLE_HALF) - BOX_HALF
    assert all(np.all(np.abs(xy) <= inside) for xy in boxes), 'a box off the table top'
    return boxes


def write_boxes(n: int, folder: Path) -> list:
    """Write N copies of box.urdf with model names box_0..box_{N-1}; return their paths."""
    text = BOX.read_text()
    paths = []
    for i in range(n):
        path = folder / f'box_{i}.urdf'
        copy = text.replace('<robot name="box"', f'<robot name="box_{i}"', 1)
        if copy == text:
            raise RuntimeError(f'{BOX} has no <robot name="box">: cannot rename its copies.')
        path.write_text(copy)
        paths.append(path)
    return paths


def scenario(n: int, folder: Path) -> Scenario:
    """Return bench_pad_push.yaml with its box replaced by N boxes (copies in ``folder``)."""
    data = yaml.safe_load(CONFIG.read_text())
    data['objects'] = [{'name': path.stem, 'file': str(path),
                        'initial_pose': {'xyz': [x, y, 0.05], 'rpy': [0, 0, 0]}}
                       for path, (x, y) in zip(write_boxes(n, folder), box_positions(n))]
    return Scenario.from_dict(data, base_dir=CONFIG.parent, source=f'scaling, N = {n}')


def box_summary(xyz: np.ndarray, start: np.ndarray) -> dict:
    """Return the pushed box's final xyz, how far the resting boxes moved and sank."""
    summary = {'pushed_box_final_xyz': xyz[0].tolist(), 'pushed_box_final_x': float(xyz[0, 0]),
               'resting_boxes_max_drift_m': None, 'resting_boxes_min_z_m': None}
    if len(xyz) > 1:
        drift = np.linalg.norm(xyz[1:] - start[1:], axis=1)
        summary.update(resting_boxes_max_drift_m=float(np.max(drift)),
                       resting_boxes_min_z_m=float(np.min(xyz[1:, 2])))
    return summary


def timed_runs(run, timing: Timing) -> tuple:
    """Call ``run()`` -> (cpu, outcome) until ``timing`` is met; return the CPUs, last outcome."""
    cpus, outcome = [], None
    while not cpus or (sum(cpus) < timing.min_total and len(cpus) < timing.max_runs):
        cpu, outcome = run()
        cpus.append(cpu)
    return cpus, outcome


def cost(cpus: list, span: float, extra: dict) -> dict:
    """Return the figures of one simulator at one N: CPU per simulated second, the runs."""
    return {'cpu_per_sim_s': float(np.median(cpus)) / span, 'span_s': span,
            'runs_cpu_s': [float(c) for c in cpus], 'status': 'ok', **extra}


def ours_pass(sim: QuasistaticSimulator, steps: int) -> tuple:
    """Step ``steps`` times from the initial state; return (thread CPU, final state)."""
    state = sim.initial_state()
    command = {'pads': np.eye(3)[PUSH_JOINT] * SPEED}
    start = time.thread_time()
    for k in range(steps):
        result = sim.step(state, command)
        if not result.success:
            raise StepFailed(f'step {k}: status {result.status!r}, '
                             f'error {result.diagnostics.error!r}')
        state = result.state_next
    return time.thread_time() - start, state


def run_ours(scene: Scenario, n: int, span: float, timing: Timing) -> dict:
    """Time our engine on the scene over ``span``; a failed step becomes the status."""
    sim = QuasistaticSimulator(scene)
    steps = int(round(span / scene.time_step))
    names = [f'box_{i}' for i in range(n)]

    def xyz(q):
        return np.array([sim.object_pose(q, name).translation() for name in names])
    try:
        ours_pass(sim, steps)                         # warm-up: numba's cache, Drake's
        cpus, state = timed_runs(lambda: ours_pass(sim, steps), timing)
    except StepFailed as err:
        return {'status': f'failed: {err}', 'span_s': span}
    extra = {'time_step': scene.time_step, 'steps': steps,
             **box_summary(xyz(state.q), xyz(sim.default_positions()))}
    return cost(cpus, span, extra)


def push_reference(q0: np.ndarray, span: float) -> JointReference:
    """Return the pads' reference: the left pad moving at SPEED for ``span``, the others still."""
    q1 = np.array(q0, float) + np.eye(len(q0))[PUSH_JOINT] * SPEED * span
    return JointReference(t=np.array([0.0, span]), q=np.vstack([q0, q1]))


def sap_scene(scene: Scenario, h: float, span: float):
    """Build the SAP, point-contact plant of mbp_reference; return (MbpScene, diagram)."""
    settings = MbpSettings(time_step=h, approximation='sap', contact_model='point',
                           log_period=span)
    mbp = MbpScene(scene, 'pads', 'box_0', settings)
    plant = mbp.plant
    assert plant.get_discrete_contact_approximation() == DiscreteContactApproximation.kSap
    assert plant.get_contact_model() == ContactModel.kPoint
    q0 = mbp.qs_model.q_default[mbp.robot_info.q_idx]
    diagram, _, _ = mbp.build(push_reference(q0, span), span)
    return mbp, diagram


def sap_pass(mbp: MbpScene, diagram, span: float, n: int) -> tuple:
    """Advance a fresh Simulator to ``span``; return (thread CPU, boxes' final xyz)."""
    simulator = Simulator(diagram)
    simulator.Initialize()
    start = time.thread_time()
    simulator.AdvanceTo(span)
    cpu = time.thread_time() - start
    context = mbp.plant.GetMyContextFromRoot(simulator.get_context())
    return cpu, boxes_xyz(mbp, context, n)


def boxes_xyz(mbp: MbpScene, context, n: int) -> np.ndarray:
    """Return the boxes' positions [qw qx qy qz x y z] -> xyz in the plant's context."""
    return np.array([mbp.plant.GetPositions(context, mbp.instances[f'box_{i}'])[4:7]
                     for i in range(n)])


def run_sap(scene: Scenario, n: int, h: float, span: float, timing: Timing) -> dict:
    """Time SAP at step h on the scene over ``span``; a Drake failure becomes the status."""
    mbp, diagram = sap_scene(scene, h, span)
    start = boxes_xyz(mbp, mbp.plant.CreateDefaultContext(), n)
    try:
        cpus, xyz = timed_runs(lambda: sap_pass(mbp, diagram, span, n), timing)
    except RuntimeError as err:
        return {'status': f'failed: {str(err).splitlines()[0][:160]}', 'span_s': span}
    extra = {'time_step': h, 'steps': int(round(span / h)),
             'stiffness': mbp.K.tolist(), 'damping': mbp.D.tolist(),
             **box_summary(xyz, start)}
    return cost(cpus, span, extra)


def spans(quick: bool) -> dict:
    """Return the simulated span [s] of each simulator."""
    if quick:
        return {'ours': QUICK_SPAN, 'sap_0.01': QUICK_SPAN, 'sap_0.001': QUICK_FINE_SPAN}
    return {'ours': SPAN, 'sap_0.01': SPAN, 'sap_0.001': SPAN}


def measure_size(n: int, quick: bool, timing: Timing) -> dict:
    """Return the figures of ours and SAP at N boxes."""
    span = spans(quick)
    with tempfile.TemporaryDirectory(prefix=f'scaling_{n}_') as folder:
        scene = scenario(n, Path(folder))
        row = {'n': n, 'ours': run_ours(scene, n, span['ours'], timing)}
        for h in SAP_STEPS:
            row[f'sap_{h:g}'] = run_sap(scene, n, h, span[f'sap_{h:g}'], timing)
    row['ratio_sap_0.01_over_ours'] = ratio(row['sap_0.01'], row['ours'])
    return row


def ratio(a: dict, b: dict):
    """Return a's CPU per simulated second over b's, or None when either failed."""
    if 'cpu_per_sim_s' not in a or 'cpu_per_sim_s' not in b:
        return None
    return a['cpu_per_sim_s'] / b['cpu_per_sim_s']


def exponent(rows: list, key: str):
    """Return the least-squares slope of log cost against log N over N >= FIT_FROM."""
    points = [(row['n'], row[key]['cpu_per_sim_s']) for row in rows
              if row['n'] >= FIT_FROM and 'cpu_per_sim_s' in row[key]]
    if len(points) < 2:
        return None
    n, c = np.array(points, float).T
    return float(np.polyfit(np.log(n), np.log(c), 1)[0])


def figure(run: dict) -> str:
    """Return one table cell: CPU per simulated second, or the failure."""
    if 'cpu_per_sim_s' not in run:
        return f"{'FAILED':>12}"
    return f"{run['cpu_per_sim_s']:12.4g}"


def print_row(row: dict) -> None:
    """Print one line of the table, as it comes."""
    r = row['ratio_sap_0.01_over_ours']
    cells = ''.join(figure(row[key]) for key in ('ours', 'sap_0.01', 'sap_0.001'))
    xs = ''.join(f"{row[key].get('pushed_box_final_x', float('nan')):9.4f}"
                 for key in ('ours', 'sap_0.01', 'sap_0.001'))
    print(f"{row['n']:>4}{cells}{'-' if r is None else f'{r:.3g}':>10}{xs}", flush=True)


def print_header() -> None:
    """Print the table's header."""
    print('thread CPU [s] per simulated second; x: the pushed box\'s final x [m]')
    print(f"{'N':>4}{'ours':>12}{'SAP h=0.01':>12}{'SAP h=0.001':>12}{'SAP/ours':>10}"
          f"{'x ours':>9}{'x 0.01':>9}{'x 0.001':>9}")


def notes(rows: list) -> list:
    """Return what the reader must know: the shortened spans, the failures."""
    out = []
    for row in rows:
        for key in ('ours', 'sap_0.01', 'sap_0.001'):
            run = row[key]
            if run['status'] != 'ok':
                out.append(f"N = {row['n']}, {key}: {run['status']}")
            elif key == 'sap_0.001' and run['span_s'] < row['ours']['span_s']:
                out.append(f"N = {row['n']}, sap_0.001: simulated {run['span_s']:g} s only "
                           f"(ours {row['ours']['span_s']:g} s), to bound the run time; the "
                           'pad reaches the box at 0.1 s')
    return out


def revision() -> dict:
    """Return the git commit measured and the library files changed in the working tree."""
    def git(*args):
        return subprocess.run(['git', '-C', str(REPO), *args], capture_output=True,
                              text=True).stdout
    changed = git('status', '--porcelain', '--', 'quasistatic_drake').splitlines()
    return {'commit': git('rev-parse', 'HEAD').strip(), 'library_changes': changed}


def measure(sizes: list, quick: bool) -> dict:
    """Measure every size, printing the table as it goes; return the summary."""
    timing = Timing(0.3, 3) if quick else Timing()
    print_header()
    rows = []
    with threadpool_limits(1):
        for n in sizes:
            rows.append(measure_size(n, quick, timing))
            print_row(rows[-1])
    exponents = {key: exponent(rows, key) for key in ('ours', 'sap_0.01', 'sap_0.001')}
    print(f'growth exponent over N >= {FIT_FROM} (slope of log cost vs log N): '
          + ', '.join(f"{key} {'-' if e is None else f'{e:.3f}'}"
                      for key, e in exponents.items()))
    return {'machine': machine(), 'revision': revision(), 'blas_threads': 1,
            'clock': 'time.thread_time', 'quick': quick, 'sizes': sizes,
            'speed_m_per_s': SPEED, 'rows': rows,
            'growth_exponent': {'fit_sizes': [n for n in sizes if n >= FIT_FROM],
                                **exponents},
            'timing': {'min_total_s': timing.min_total, 'max_runs': timing.max_runs,
                       'figure': 'median of the runs'},
            'grid': {'x': list(GRID_X), 'y': list(GRID_Y)}, 'notes': notes(rows)}


def draw(summary: dict, path: Path) -> None:
    """Plot CPU per simulated second against N (log-log), and the SAP/ours ratio."""
    rows = summary['rows']
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    labels = {'ours': 'ours (QP, h = 0.1 s)', 'sap_0.01': 'SAP, h = 0.01 s',
              'sap_0.001': 'SAP, h = 0.001 s'}
    for key, label in labels.items():
        points = [(row['n'], row[key]['cpu_per_sim_s']) for row in rows
                  if 'cpu_per_sim_s' in row[key]]
        if points:
            exp = summary['growth_exponent'][key]
            left.loglog(*zip(*points), 'o-', label=label + (
                '' if exp is None else f' (slope {exp:.2f} for N >= {FIT_FROM})'))
    left.set_xlabel('N boxes')
    left.set_ylabel('thread CPU per simulated second [s]')
    left.legend(fontsize=8)
    left.grid(True, which='both', alpha=0.3)
    points = [(row['n'], row['ratio_sap_0.01_over_ours']) for row in rows
              if row['ratio_sap_0.01_over_ours'] is not None]
    if points:
        right.semilogx(*zip(*points), 'o-')
    right.axhline(1.0, color='grey', linestyle=':')
    for ax in (left, right):
        ax.set_xticks(summary['sizes'], [str(n) for n in summary['sizes']])
        ax.xaxis.set_minor_locator(NullLocator())
    right.set_xlabel('N boxes')
    right.set_ylabel('SAP (h = 0.01 s) CPU / ours (dotted: equal)')
    right.grid(True, which='both', alpha=0.3)
    fig.suptitle('N boxes on a table, one pushed by a pad (1 BLAS thread)')
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def parse_sizes(text: str) -> list:
    """Return the sizes of ``--sizes 1,2,4``."""
    try:
        sizes = [int(word) for word in text.split(',') if word.strip()]
    except ValueError:
        raise SystemExit(f'--sizes: expected integers separated by commas, got {text!r}.')
    if not sizes or min(sizes) < 1:
        raise SystemExit(f'--sizes: expected positive integers, got {text!r}.')
    return sizes


def main() -> None:
    """Measure, print and write the figures."""
    parser = argparse.ArgumentParser(description=__doc__.strip().split('\n')[0])
    parser.add_argument('--json', type=Path, default=Path('benchmarks/results/scaling.json'))
    parser.add_argument('--png', type=Path, default=Path('benchmarks/results/scaling.png'))
    parser.add_argument('--sizes', default=None, help='e.g. 1,2,4,8,16,32')
    parser.add_argument('--quick', action='store_true',
                        help='sizes 1,4 (unless --sizes) and shorter spans')
    args = parser.parse_args()
    default = QUICK_SIZES if args.quick else SIZES
    sizes = parse_sizes(args.sizes) if args.sizes else list(default)
    summary = measure(sizes, args.quick)
    write_results(summary, args.json, args.png, lambda path: draw(summary, path))


if __name__ == '__main__':
    main()
