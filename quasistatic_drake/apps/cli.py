"""
The ``quasistatic-drake`` console script.

Subcommands:
  demo   a 7-DOF arm with a parallel-jaw gripper picks a cylinder off a table,
         carries it and places it (config/arm_pick_place.yaml, or any arm and
         gripper a scenario's task: block names), shown live in Meshcat, with a
         summary and optional JSON and HTML replay;
  paper-2d  Pang & Tedrake 2018's 2D gripper-cylinder example (MIQP against Trinkle's LCP),
         built from eqs. 24-28 and through Drake; JSON and the panels of Figs. 5-6;
  paper-jamming  Halm & Posa's Sec. 6 under the finite-feedback LCP: two-finger pushes and
         their gain sweep, jamming against a wall, a peg in a hole, Fig. 2's square;
         JSON and the panels of Figs. 3-4;
  paper-bvp  Song, Kumar & Pang's Sec. IV-A: the sliding-then-rolling disk (closed form,
         discrete BVP by shooting and as one MILP) and the billiard ball (IVPs, BVPs);
         JSON and the panels of Figs. 2-4;
  plan   boundary-value problems through the step, by shooting with the step
         gradients: a disk push (LCP) and a box pushed and turned (QP);
  push   a spherical finger pushes a box across a table (config/finger_push.yaml)
         and the run is printed step by step with a summary;
  rollouts  perturb a scenario's nominal command and roll out the samples in a batch
         (serially, in local processes or on Ray), with a progress bar; writes a .npz;
  info   load a scenario and print its robots, objects and the contacts at start.
"""

from __future__ import annotations

import argparse
from contextlib import contextmanager
import json
import sys
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
from pydrake.math import RollPitchYaw

from quasistatic_drake.apps import convert_qsim, paper_2d, rollouts
from quasistatic_drake.apps.arguments import at_most, non_negative, output_file, positive
from quasistatic_drake.inputs import MAX_COMMAND
from quasistatic_drake.meshcat_server import make_meshcat
from quasistatic_drake.optional import is_optional, missing_message
from quasistatic_drake.shapes import KIND_NAMES
from quasistatic_drake.paths import package_share_dir
from quasistatic_drake.apps.pick_and_place import PickPlaceTask, StepRecord, run_pick_and_place
from quasistatic_drake.apps.planning import PlanningError
from quasistatic_drake.errors import CommandError, SolverLimitExceeded
from quasistatic_drake.formulations import registry
from quasistatic_drake.formulations.lcp_solvers import BACKENDS as LCP_BACKENDS
from quasistatic_drake.formulations.miqp import MIQP_BACKENDS
from quasistatic_drake.scenario import Scenario, ScenarioError
from quasistatic_drake.simulator import QuasistaticSimulator, StepResult


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the console script; return the process exit code."""
    args = _parser().parse_args(argv)
    try:
        return args.run(args)
    except (ScenarioError, CommandError, SolverLimitExceeded) as err:
        print(f'error: {err}', file=sys.stderr)
        return 2
    except ModuleNotFoundError as err:
        if not is_optional(err.name or ''):
            raise
        print(f'error: {missing_message(err.name)}', file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog='quasistatic-drake', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest='command', required=True)
    demo = commands.add_parser(
        'demo', help='the arm picks and places a cylinder',
        description='An arm with a parallel-jaw gripper picks an object and places it. What '
                    "to drive comes from the scenario's task: block; the options below "
                    'override its keys.')
    demo.add_argument('--scenario', type=Path,
                      help='scenario YAML with an arm, a gripper and an object, named by its '
                           'task: block (default: config/arm_pick_place.yaml, or with '
                           '--formulation miqp config/arm_pick_place_miqp.yaml, its h = 0.01 s '
                           'variant)')
    demo.add_argument('--object', help='task.object: the object to pick (without it or the '
                                       "key: the scenario's first object)")
    demo.add_argument('--arm', help='task.arm: the robot driven by differential IK (without '
                                    'it or the key: "iiwa")')
    demo.add_argument('--gripper', help='task.gripper: the robot with the finger joints '
                                        '(without it or the key: the arm)')
    demo.add_argument('--tcp-frame', help="task.tcp_frame: the TCP frame, 'model::frame' or a "
                                          'frame of the arm or the gripper (without it or the '
                                          'key: "gripper_tcp")')
    demo.add_argument('--finger', action='append', type=_finger, metavar='JOINT:OPEN:CLOSED',
                      help='task.fingers: a finger joint, its position with the gripper open '
                           'and fully closed [m]; repeat it for each finger (the list replaces '
                           "the scenario's; without it or the key: the WSG's two fingers, "
                           'open 0.05, closed 0)')
    demo.add_argument('--formulation', choices=[n for n in registry.names() if n != 'lcp'],
                      help="override the scenario's formulation (not lcp: Halm & Posa's LCP "
                           'is planar, and the arm moves in 3D)')
    demo.add_argument('--no-meshcat', action='store_true', help='run headless')
    demo.add_argument('--meshcat-host', default='localhost',
                      help="the interface Meshcat listens on (default localhost: this machine "
                           "only; '*': every interface)")
    demo.add_argument('--realtime-rate', type=non_negative,
                      help='simulated seconds per wall second; 0 = as fast as possible '
                           '(default 1 with Meshcat, 0 headless)')
    demo.add_argument('--keep-open', action='store_true',
                      help='keep the live Meshcat view after the run, until Ctrl-C')
    demo.add_argument('--html', type=output_file('.html'),
                      help='save a self-contained Meshcat replay of the run here')
    demo.add_argument('--json', type=output_file('.json'),
                      help='write a summary of the run here')
    demo.set_defaults(run=run_arm_demo)
    push = commands.add_parser('push', help='a finger pushes a box across a table')
    push.add_argument('--scenario', type=Path,
                      default=package_share_dir() / 'config' / 'finger_push.yaml',
                      help='scenario YAML with a robot "finger" and an object "box"')
    push.add_argument('--distance', type=positive, default=0.2,
                      help='how far to command the finger along +x [m] (default 0.2)')
    push.add_argument('--speed', type=at_most(MAX_COMMAND, 'm/s'), default=0.1,
                      help='commanded finger speed [m/s] (default 0.1)')
    push.add_argument('--json', type=output_file('.json'),
                      help='write a summary of the run here')
    push.set_defaults(run=run_push_demo)
    paper = commands.add_parser('paper-2d',
                                help="Pang & Tedrake 2018's 2D gripper-cylinder example")
    paper.add_argument('--backend', choices=MIQP_BACKENDS, default='daqp',
                       help='the MIQP solver (default daqp, as miqp.backend)')
    paper.add_argument('--json', type=output_file('.json'),
                       help='write the trajectories and figures here')
    paper.add_argument('--png', type=output_file('.png'),
                       default=Path('out/paper_2d.png'),
                       help='the panels of Figs. 5 and 6 (default out/paper_2d.png)')
    paper.set_defaults(run=run_paper_2d)
    jamming = commands.add_parser(
        'paper-jamming', help="Halm & Posa's Sec. 6: pushing, jamming, peg-in-hole (LCP)")
    jamming.add_argument('--json', type=output_file('.json'),
                         help='write the figures (binding keys) here')
    jamming.add_argument('--png', type=output_file('.png'),
                         default=Path('out/paper_jamming.png'),
                         help='the panels of Figs. 3 and 4 (default out/paper_jamming.png)')
    jamming.add_argument('--quick', action='store_true',
                         help='every 4th gain of the sweeps (c = 2^(4-n), n = 2, 6, ...)')
    jamming.add_argument('--backend', choices=LCP_BACKENDS, default='lemke',
                         help='the LCP solver (default lemke)')
    jamming.set_defaults(run=run_paper_jamming)
    bvp = commands.add_parser(
        'paper-bvp', help="Song, Kumar & Pang's Sec. IV-A: boundary-value problems")
    bvp.add_argument('--json', type=output_file('.json'),
                     help='write the figures (binding keys) here')
    bvp.add_argument('--png', type=output_file('.png'),
                     default=Path('out/paper_bvp.png'),
                     help='the panels of Figs. 2-4 (default out/paper_bvp.png)')
    bvp.set_defaults(run=run_paper_bvp)
    plan = commands.add_parser(
        'plan', help='boundary-value problems solved through the step (disk push, box turn)')
    plan.add_argument('--json', type=output_file('.json'),
                      help='write the solutions (binding keys) here')
    plan.set_defaults(run=run_plan)
    batch = commands.add_parser(
        'rollouts', help="perturb a scenario's nominal command and roll out the samples",
        description=rollouts.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    rollouts.add_arguments(batch)
    batch.set_defaults(run=rollouts.run)
    info = commands.add_parser('info', help='print what a scenario contains')
    info.add_argument('scenario', type=Path)
    info.set_defaults(run=run_info)
    convert = commands.add_parser(
        'convert-qsim', help="write a scenario from a qsim q_sys file (docs/qsim.md)")
    convert_qsim.add_arguments(convert)
    convert.set_defaults(run=convert_qsim.run)
    return parser


def _finger(text: str) -> dict:
    """Return a ``task.fingers`` entry from JOINT:OPEN:CLOSED."""
    joint, _, rest = text.partition(':')
    open_, _, closed = rest.partition(':')
    try:
        if not joint or not closed:
            raise ValueError
        return {'joint': joint, 'open': float(open_), 'closed': float(closed)}
    except ValueError:
        raise argparse.ArgumentTypeError(f'expected JOINT:OPEN:CLOSED (a joint name and two '
                                         f'numbers), got {text}') from None


def _default_arm_scene(formulation: Optional[str]) -> Path:
    """
    Return the arm scene for a formulation: the MIQP's needs a finer step.

    docs/formulations.md, "The arm under the MIQP", says why.
    """
    name = 'arm_pick_place_miqp.yaml' if formulation == 'miqp' else 'arm_pick_place.yaml'
    return package_share_dir() / 'config' / name


def run_arm_demo(args) -> int:
    """Pick and place with the arm; print the phases and a summary."""
    if args.keep_open and args.no_meshcat:
        raise CommandError('--keep-open keeps the live Meshcat view; with --no-meshcat there '
                           'is none. Fix: drop one of them.')
    scenario = Scenario.from_yaml(args.scenario or _default_arm_scene(args.formulation))
    if args.formulation:
        scenario = scenario.with_formulation(args.formulation)
    task = PickPlaceTask.from_scenario(scenario, arm=args.arm, gripper=args.gripper,
                                       tcp_frame=args.tcp_frame, fingers=args.finger,
                                       object=args.object)
    meshcat = None
    if not args.no_meshcat:
        meshcat = make_meshcat(host=args.meshcat_host)
        print(f'Meshcat: open {meshcat.web_url()} in a browser to watch.', flush=True)
    elif args.html is not None:       # headless: Meshcat records the replay, nobody watches
        meshcat = make_meshcat(host='localhost')
    rate = args.realtime_rate if args.realtime_rate is not None else (0.0 if args.no_meshcat
                                                                      else 1.0)
    print(f'Pick and place ({scenario.source}): h = {scenario.time_step} s, '
          f'{scenario.formulation}, realtime rate {rate or "unlimited"}')
    print(f"{'t [s]':>6} {'waypoint':>10} {'object x':>9} {'object y':>9} {'object z':>9} "
          f"{'tilt [deg]':>10} {'fingers [mm]':>12} {'contacts':>8} {'step [ms]':>9}")
    printer = _PhasePrinter()
    try:
        run = run_pick_and_place(scenario, task, meshcat, rate, args.html, printer)
    except PlanningError as err:
        print(f'error: {err}', file=sys.stderr)
        return 2
    printer.finish()
    summary = run.summary()
    _print_summary(summary)
    if args.html is not None:
        print(f'Replay written to {args.html} (open it in a browser; no server needed).')
    if args.json:
        _write_json(args.json, summary)
    if args.keep_open:
        print(f'Meshcat stays open at {meshcat.web_url()}; press Ctrl-C to end.', flush=True)
        _wait_for_interrupt()
    return 0 if summary['failed_steps'] == 0 else 1


def _print_summary(summary: dict) -> None:
    """Print the summary: the place, the grasp (tilt, slip, the fingers' clearance), the steps."""
    print(f"Lifted {summary['max_object_lift'] * 100:.1f} cm; placed "
          f"{summary['place_error_m'] * 100:.2f} cm from the target, tilt "
          f"{summary['final_tilt_deg']:.2f} deg; deepest penetration "
          f"{max(0.0, -summary['min_signed_distance']) * 1e3:.3f} mm; {summary['steps']} steps, "
          f"step time median {summary['step_time_ms']['median']:.3f} ms, max "
          f"{summary['step_time_ms']['max']:.3f} ms; failed steps {summary['failed_steps']}.")
    print(f"Held: largest tilt {summary['max_carry_tilt_deg']:.2f} deg (lift to place); "
          f"slip in the grasp {summary['grasp_slip_mm']:.2f} mm, "
          f"{summary['grasp_slip_deg']:.2f} deg; fingers' lowest point "
          f"{summary['min_finger_clearance_m'] * 1e3:.1f} mm above the table.")
    grasp = summary.get('grasp', {})
    if grasp.get('limited_by') == 'fingers':
        print(f"The object is too short for the palm's clearance: grasped as low as the "
              f"fingers allow, {grasp['fingers_above_support_m'] * 1e3:.1f} mm above the "
              f"table (task.finger_clearance), the palm {grasp['palm_above_top_m'] * 1e3:.1f} "
              "mm above the object's top.")


def _wait_for_interrupt() -> None:
    """Return on Ctrl-C (or SIGTERM): the live view stays up until then."""
    import signal
    import threading
    done = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: done.set())
    while not done.wait(timeout=1.0):
        pass


class _PhasePrinter:
    """Print a row at the end of every waypoint segment (and on a failed step)."""

    def __init__(self):
        self.last: Optional[StepRecord] = None

    def __call__(self, record: StepRecord) -> None:
        if self.last is not None and record.waypoint != self.last.waypoint:
            self._row(self.last)
        if record.status != 'optimal':
            print(f'step {record.step} at t = {record.time:.2f} s: {record.status}; '
                  'the state is kept.')
        self.last = record

    @staticmethod
    def _row(r: StepRecord) -> None:
        x, y, z = r.object_xyz
        fingers = '/'.join(f'{g * 1e3:.1f}' for g in r.gripper)
        print(f'{r.time:6.2f} {r.waypoint:>10} {x:9.4f} {y:9.4f} {z:9.4f} {r.tilt_deg:10.3f} '
              f'{fingers:>12} {r.contacts:8d} {r.step_time * 1e3:9.3f}', flush=True)

    def finish(self) -> None:
        """Print the last segment's row."""
        if self.last is not None:
            self._row(self.last)


@contextmanager
def _stage_bar(stages: int, name: str):
    """
    Yield ``progress(stage)``: a progress bar on stderr, one tick as each stage starts.

    The bar shows the stage running and the time so far; stdout keeps the results.
    """
    from tqdm import tqdm
    with tqdm(total=stages, file=sys.stderr, desc=name, unit='stage',
              bar_format='{desc}: {n_fmt}/{total_fmt} stages, {elapsed}{postfix}') as bar:
        started = []

        def progress(stage: str) -> None:
            if started:
                bar.update(1)
            started.append(stage)
            bar.set_postfix_str(stage)
        yield progress
        if started:
            bar.update(1)


def _write_json(path: Path, summary: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=2))
    print(f'Summary written to {path}')


def _write_figures(args, json_summary: dict, summary: dict, plot) -> int:
    """Write ``--json`` (if asked) and the ``--png`` of a paper command; return 0."""
    if args.json:
        _write_json(args.json, json_summary)
    args.png.parent.mkdir(parents=True, exist_ok=True)
    plot(summary, args.png)
    print(f'Figures written to {args.png}')
    return 0


def run_paper_2d(args) -> int:
    """Reproduce Pang & Tedrake 2018, Sec. V-A, and print the figures that matter."""
    summary = paper_2d.reproduce(args.backend)
    y = np.array(summary['cylinder_y'])
    print(f"2D gripper and cylinder (Pang & Tedrake 2018, Sec. V-A), MIQP with {args.backend}:")
    print(f"  fingers touch at step {summary['touch_step']} (paper: 21)")
    print(f"  cylinder lifted to y = {y.max():.4f} m while squeezed; after release "
          f"y = {y[-1]:.4f} m (r = {paper_2d.RADIUS})")
    print(f"  finger normal force while squeezed {max(summary['normal_force']):.2f} N "
          f"(K h |x_dot| = {paper_2d.K * paper_2d.H * 0.1:.2f} N)")
    print(f"  LCP (eq. 30): cylinder max y {max(summary['lcp_cylinder_y']):.4f} m, normal "
          f"force max {max(np.abs(summary['lcp_normal_force'])):.2f} N")
    dq, df = (summary['hand_written_vs_drake_max_q_diff'],
              summary['hand_written_vs_drake_max_force_diff'])
    agree = max(dq, df) <= paper_2d.CROSS_CHECK_TOL
    print(f"  hand-written (eqs. 24-28) vs Drake path: max |dq| {dq:.2e} m, max |dF| "
          f"{df:.2e} N: {'within' if agree else 'FAILED, beyond'} the tolerance "
          f"{paper_2d.CROSS_CHECK_TOL:g}")
    _write_figures(args, summary, summary, paper_2d.plot)
    if not agree:
        print(f'error: with --backend {args.backend} the hand-written model and the Drake '
              f'path disagree beyond {paper_2d.CROSS_CHECK_TOL:g}: the example is not '
              'reproduced (the backend returns another solution of one of the MIQPs, or a '
              'less exact one).', file=sys.stderr)
    return 0 if agree else 1


def run_paper_jamming(args) -> int:
    """Reproduce Halm & Posa, Sec. 6, and print the figures against the paper's claims."""
    from quasistatic_drake.apps import paper_jamming
    with _stage_bar(paper_jamming.stages(), 'paper-jamming') as progress:
        summary = paper_jamming.reproduce(quick=args.quick, backend=args.backend,
                                          progress=progress)
    print(f"Halm & Posa, Sec. 6, finite-feedback LCP ({args.backend}):")
    for case, block in summary['push'].items():
        print(f"  {case} push: e ~ c^{block['slope_high_gain']:.3f} for c <= 2^-8 (paper: "
              f"linear), e = {block['e'][-1]:.2e} at c = {block['c'][-1]:.2e}, "
              f"{block['failed_steps']} failed steps")
    wall = summary['wall']
    perfect = wall['perfect']
    final_x = [pose[0] for pose in wall['final_pose']]
    print(f"  wall: c = 0 {perfect['status']} at step {perfect['failed_step']} (the jam); "
          f"finite gains: {sum(wall['failed_steps'])} failed steps, "
          f"min phi {min(wall['min_phi']):.2e} m, final x {min(final_x):.2f} to "
          f"{max(final_x):.2f} m")
    peg = summary['peg_in_hole']
    print(f"  peg-in-hole: {peg['failed_steps']} failed of {peg['steps']} steps, final peg "
          f"{np.round(peg['final_peg_pose'], 3).tolist()}, LCP {peg['lcp_ms']['mean']:.3f} ms "
          f"mean (paper, PATH: 1.51 ms), min phi {peg['min_phi']:.2e} m")
    square = summary['square']
    print(f"  Fig. 2 square: c = 0 {square['perfect_status']}; c lambda_N at c = "
          f"{square['c'][-1]:g}: {np.round(square['c_lambda_n'][-1], 4).tolist()}")
    print(f"  hand-built vs Drake path: max |dq| {summary['hand_vs_drake_max_dq']:.2e}")
    return _write_figures(args, paper_jamming.json_ready(summary), summary,
                          paper_jamming.plot)


def run_paper_bvp(args) -> int:
    """Reproduce Song, Kumar & Pang, Sec. IV-A, and print the figures against the paper's."""
    from quasistatic_drake.apps import paper_bvp
    with _stage_bar(paper_bvp.STAGES, 'paper-bvp') as progress:
        summary = paper_bvp.reproduce(progress)
    disk, ball = summary['disk'], summary['ball']
    print("Song, Kumar & Pang, Sec. IV-A:")
    print(f"  disk, closed form: v0 = {disk['analytic']['v0']:.4f} m/s, tau = "
          f"{disk['analytic']['tau']:.4f} s (paper: 1.2402, 0.0114)")
    print(f"  disk, discrete BVP (N + 1 = {disk['bvp']['N'] + 1}, h = {disk['bvp']['h']} s): "
          f"v0 = {disk['bvp']['v0']:.6f} by shooting, {disk['simultaneous']['v0']:.6f} as one "
          f"{disk['simultaneous']['solver']} problem; rolling from sample "
          f"{disk['bvp']['first_rolling_sample']}")
    last = disk['convergence'][-1]
    print(f"  disk, convergence: v0 = {last['v0']:.6f} at N = {last['N']}")
    print(f"  ball, cone: final (dx, dy) = {np.round(ball['ivp_cone']['final_dxdy'], 4).tolist()},"
          f" rolling at {ball['ivp_cone']['rolling_time']:.2f} s")
    print(f"  ball, box: final (dx, dy) = {np.round(ball['ivp_box']['final_dxdy'], 4).tolist()},"
          f" rolling at {ball['ivp_box']['rolling_time_t']:.2f} and "
          f"{ball['ivp_box']['rolling_time_o']:.2f} s (paper: 0.30, 0.37)")
    print(f"  ball BVPs: v0 = {np.round(ball['bvp_consistent']['v0_xy'], 6).tolist()} (the "
          f"IVP's), {np.round(ball['bvp_far']['v0_xy'], 4).tolist()} to "
          f"{ball['bvp_far']['target']}")
    return _write_figures(args, summary, summary, paper_bvp.plot)


def run_plan(args) -> int:
    """Solve the planning problems of apps/plan.py and print how each went."""
    from quasistatic_drake.apps import plan
    with _stage_bar(plan.STAGES, 'plan') as progress:
        summary = plan.run(progress)
    print("Boundary-value problems through the step (Song, Kumar & Pang), by shooting:")
    for row in summary['problems']:
        error = ', '.join(f'{k} {v:.2e}' for k, v in row['terminal_error'].items())
        print(f"  {row['name']}: {len(row['parameters'])} parameters, {row['iterations']} "
              f"evaluations, {row['solve_time_s']:.1f} s ({row['fd_solve_time_s']:.1f} s "
              f"with finite differences); terminal error {error}")
    disk = summary['problems'][0]
    print(f"  disk: finger speed {-disk['parameters'][0]:.5f} m/s (continuous answer "
          f"{summary['disk_analytic_speed']:.5f})")
    if args.json:
        _write_json(args.json, summary)
    return 0


MAX_PUSH_STEPS = 100_000     # the push command's longest run (a few minutes of CPU)


def run_push_demo(args) -> int:
    """Push the box with the finger and print what happened."""
    sim = QuasistaticSimulator(Scenario.from_yaml(args.scenario))
    h = sim.scenario.time_step
    steps = int(round(args.distance / (args.speed * h)))
    if not 1 <= steps <= MAX_PUSH_STEPS:
        raise CommandError(f'--distance {args.distance:g} at --speed {args.speed:g} m/s is '
                           f'{steps} steps of h = {h} s; the push takes 1 to {MAX_PUSH_STEPS}. '
                           'Fix: choose the distance and the speed so that distance / (speed '
                           'h) is within that range.')
    q = sim.default_positions()
    box_start = sim.object_pose(q, 'box').translation()
    print(f'Finger pushes a box: {steps} steps of h = {h} s at {args.speed} m/s along +x '
          f'({sim.scenario.source})')
    print(f"{'t [s]':>6} {'finger x':>9} {'box x':>8} {'box y':>8} {'box z':>8} "
          f"{'yaw [deg]':>9} {'contacts':>8} {'push [N]':>9} {'step [ms]':>9}")
    times, min_phi, state = [], np.inf, sim.initial_state(q)
    for k in range(steps):
        result = sim.step(state, {'finger': [args.speed, 0.0, 0.0]})
        if not result.success:
            print(f'step {k} failed: {result.status}; the state is kept.')
            return 1
        state = result.state_next
        q = np.array(state.q)
        times.append(result.diagnostics.step_time)
        min_phi = min(min_phi, sim.min_signed_distance(q))
        if k % max(1, steps // 10) == 0 or k == steps - 1:
            _print_row((k + 1) * h, sim, q, result)
    summary = _demo_summary(sim, q, box_start, times, min_phi, steps)
    print(f"Box moved {summary['box_displacement'][0]:.3f} m along x, "
          f"{summary['box_displacement'][1]:+.1e} m along y, yaw "
          f"{summary['box_final_yaw_deg']:+.2e} deg; deepest penetration "
          f"{max(0.0, -min_phi) * 1e3:.3f} mm; step time median "
          f"{summary['step_time_ms']['median']:.3f} ms.")
    if args.json:
        _write_json(args.json, summary)
    return 0


def _print_row(t: float, sim: QuasistaticSimulator, q: np.ndarray, result: StepResult):
    box = sim.object_pose(q, 'box')
    yaw = np.degrees(RollPitchYaw(box.rotation()).yaw_angle())
    push = sum(np.linalg.norm(c.force_W) for c in result.contacts
               if 'finger' in c.body_a and 'box' in c.body_b)
    x, y, z = box.translation()
    print(f'{t:6.2f} {sim.robot_positions(q, "finger")[0]:9.4f} {x:8.4f} {y:8.4f} {z:8.4f} '
          f'{yaw:9.4f} {result.contact_set.n_c:8d} {push:9.3f} '
          f'{result.diagnostics.step_time * 1e3:9.3f}')


def _demo_summary(sim, q, box_start, times, min_phi, steps) -> dict:
    box = sim.object_pose(q, 'box')
    return {
        'steps': steps,
        'box_initial_xyz': box_start.tolist(),
        'box_final_xyz': box.translation().tolist(),
        'box_displacement': (box.translation() - box_start).tolist(),
        'box_final_yaw_deg': float(np.degrees(RollPitchYaw(box.rotation()).yaw_angle())),
        'finger_final': sim.robot_positions(q, 'finger').tolist(),
        'min_signed_distance': float(min_phi),
        'step_time_ms': {'median': float(np.median(times) * 1e3),
                         'max': float(np.max(times) * 1e3)},
        'formulation': sim.scenario.formulation,
    }


def run_info(args) -> int:
    """Print the DOF partition and the contacts of a scenario's initial configuration."""
    sim = QuasistaticSimulator(Scenario.from_yaml(args.scenario))
    q = sim.default_positions()
    print(f'{args.scenario}: h = {sim.scenario.time_step} s, formulation '
          f'{sim.scenario.formulation}, quasi_dynamic = {sim.scenario.quasi_dynamic}, '
          f'n_q = {sim.model.n_q}, n_v = {sim.model.n_v}')
    for robot in sim.model.robots:
        print(f'robot {robot.name}: joints {list(robot.joint_names)}, stiffness '
              f'{robot.stiffness.tolist()}, q = {sim.robot_positions(q, robot.name).tolist()}')
    for obj in sim.model.objects:
        xyz = sim.object_pose(q, obj.name).translation()
        print(f'object {obj.name}: base {obj.base_body}, {len(obj.v_idx)} DOFs, '
              f'xyz = {np.round(xyz, 4).tolist()}')
    for env in sim.scenario.environment:
        print(f'environment {env.name}: {sim.model.file_of(env.name)}')
    print('collision geometries (body: shape, Coulomb friction mu; two in contact combine as '
          'Drake does, 2 mu_a mu_b / (mu_a + mu_b)):')
    for info in sorted(sim.model.geometries.values(), key=lambda g: g.index):
        print(f'  {info.body_name}: {KIND_NAMES[info.shape.kind]}, mu = {info.mu:g}'
              f'{"" if info.moves else " (welded)"}')
    sim.model.set_positions(q)
    contacts = sim.detector.detect(sim.scenario.contact_detection_tolerance)
    print(f'{contacts.n_c} contact points within '
          f'{sim.scenario.contact_detection_tolerance} m; min signed distance '
          f'{sim.min_signed_distance(q):.4g} m')
    return 0


if __name__ == '__main__':
    sys.exit(main())
