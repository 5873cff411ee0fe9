"""
``quasistatic-drake rollouts SCENARIO --samples N --noise SIGMA --out FILE.npz``.

Perturbs a scenario's nominal command and rolls out every sample with
``quasistatic_drake.batch.rollout_batch``, with a progress bar, and writes
the trajectories and statuses to a .npz file.

The nominal command (T steps x n_a joints, robots in scenario order) is the
scenario's ``nominal_commands:`` block, each segment's velocities held for
its duration; without it, the plan of the scenario's ``task:`` (the demo's
pick and place: ``plan_pick_and_place``).  Sample i's command is the nominal
plus sigma w_i, w_i ~ N(0, I) at every step and joint, drawn from
``--seed``; every sample starts from the scenario's initial configuration.

The .npz holds: ``q`` (N, T + 1, n_q), ``status`` (N, T), ``commands``
(N, T, n_a), ``nominal`` (T, n_a), ``q0`` (n_q), ``joints`` (n_a names,
'robot/joint'), ``time_step``, ``noise``, ``seed``, ``scenario`` (its path),
``backend``, ``workers``, ``seconds``, ``reruns``; with ``--gradients`` also
``dq_next_dv_cmd`` (N, T, n_q, n_a).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

from quasistatic_drake.apps.arguments import non_negative, output_file, positive_int, seed
from quasistatic_drake.batch import BACKENDS, BatchError, rollout_batch, scenario_of
from quasistatic_drake.batch.engines import engine_for
from quasistatic_drake.batch.inputs import by_robot, robot_columns, robot_layout
from quasistatic_drake.batch.smoothing import perturbed
from quasistatic_drake.errors import CommandError
from quasistatic_drake.simulator import QuasistaticSimulator

STEP_TOL = 1e-9     # a segment's duration must be a whole number of steps to this fraction


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the rollouts arguments to a (sub)command's parser."""
    parser.add_argument('scenario', type=Path, help='the scenario YAML')
    parser.add_argument('--samples', type=positive_int, required=True, metavar='N',
                        help='how many perturbed rollouts')
    parser.add_argument('--noise', type=non_negative, required=True, metavar='SIGMA',
                        help='standard deviation of the noise added to every joint velocity '
                             'at every step [m/s or rad/s]')
    parser.add_argument('--backend', choices=BACKENDS, default='process',
                        help='where the rollouts run (default process)')
    parser.add_argument('--workers', type=positive_int,
                        help="how many at once (default: this machine's cores; with --address, "
                             "the cluster's CPUs)")
    parser.add_argument('--address', help="a Ray cluster's address (with --backend ray)")
    parser.add_argument('--seed', type=seed, default=0, help='the noise generator seed (0)')
    parser.add_argument('--steps', type=positive_int,
                        help="only the nominal command's first STEPS steps")
    parser.add_argument('--gradients', action='store_true',
                        help='also write each step\'s dq_next_dv_cmd')
    parser.add_argument('--out', type=output_file('.npz'), required=True,
                        help='the .npz file to write')


def run(args: argparse.Namespace) -> int:
    """Roll out the perturbed samples as the arguments say; return 0 (1 if steps failed)."""
    from tqdm import tqdm

    scenario = scenario_of(args.scenario)
    engine = engine_for(scenario)
    nominal = nominal_commands(engine)
    if args.steps is not None:
        nominal = nominal[:args.steps]
    _check_memory(args.samples, len(nominal), engine)
    commands = perturbed(nominal, args.noise, args.samples, args.seed)
    q0 = engine.default_positions()
    with tqdm(total=args.samples, unit='rollout', file=sys.stderr,
              desc=f'{args.samples} rollouts x {len(nominal)} steps') as bar:
        try:
            result = rollout_batch(scenario, np.tile(q0, (args.samples, 1)),
                                   split_by_robot(engine, commands), backend=args.backend,
                                   workers=args.workers, address=args.address,
                                   gradients=args.gradients,
                                   on_chunk=lambda chunk: bar.update(chunk.count))
        except BatchError as err:
            raise CommandError(str(err)) from None
    extra = {} if result.dq_next_dv_cmd is None else {'dq_next_dv_cmd': result.dq_next_dv_cmd}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(args.out, q=result.q, status=result.status, commands=commands, nominal=nominal,
             q0=q0, joints=np.array(joint_labels(engine)), time_step=scenario.time_step,
             noise=args.noise, seed=args.seed, scenario=str(args.scenario),
             backend=result.backend, workers=result.workers, seconds=result.seconds,
             reruns=result.reruns, **extra)
    failed = int(np.sum(result.failed_steps))
    rate = args.samples / result.seconds
    print(f'{args.samples} rollouts of {len(nominal)} steps on {result.backend} '
          f'({result.workers} workers, {result.chunks} chunks) in {result.seconds:.1f} s: '
          f'{rate:.2f} rollouts/s; failed steps {failed} in '
          f'{int(np.sum(result.failed_steps > 0))} rollouts; written to {args.out}')
    for i, message in sorted(result.errors.items())[:3]:
        print(f'rollout {i} ended early: {message}')
    return 0 if failed == 0 else 1


def _check_memory(samples: int, steps: int, engine: QuasistaticSimulator) -> None:
    """Refuse a batch whose commands and results would not fit in half the free memory."""
    n_a = len(engine.robot_q_idx)
    needed = 8 * samples * steps * (2 * n_a + engine.model.n_q + 1)   # commands, q, status
    free = os.sysconf('SC_AVPHYS_PAGES') * os.sysconf('SC_PAGE_SIZE')
    if needed > free / 2:
        raise CommandError(f'--samples {samples} rollouts of {steps} steps need about '
                           f'{needed / 1e9:.3g} GB for their commands and results; this machine '
                           f'has {free / 1e9:.3g} GB free. Fix: fewer --samples (or --steps), '
                           'in several runs.')


def nominal_commands(engine: QuasistaticSimulator) -> np.ndarray:
    """Return the scenario's nominal command, (T, n_a) (module docstring); CommandError if none."""
    scenario = engine.scenario
    if scenario.nominal_commands:
        return _segments(engine)
    if scenario.task:
        return _task_plan(engine)
    raise CommandError(f"{scenario.source}: no nominal command to perturb: the scenario has "
                       "neither a nominal_commands: block nor a task: block. Fix: add "
                       "nominal_commands: [{duration: 1.0, velocities: {ROBOT: [...]}}] "
                       "(README, \"Scenario files\").")


def split_by_robot(engine: QuasistaticSimulator, commands: np.ndarray) -> dict:
    """Return (N, T, n_a) commands as rollout_batch's v_cmds, {robot: (N, T, joints)}."""
    return by_robot(commands, robot_layout(engine))


def joint_labels(engine: QuasistaticSimulator) -> list[str]:
    """Return 'robot/joint' for every commanded joint, robots in scenario order."""
    return [f'{r.name}/{j}' for r in engine.model.robots for j in r.joint_names]


def _segments(engine: QuasistaticSimulator) -> np.ndarray:
    """Return the nominal_commands: block as one command per step."""
    h = engine.scenario.time_step
    rows = []
    for i, segment in enumerate(engine.scenario.nominal_commands):
        where = f'{engine.scenario.source}: nominal_commands[{i}]'
        steps = segment.duration / h
        if abs(steps - round(steps)) > STEP_TOL * max(1.0, steps) or round(steps) < 1:
            raise CommandError(f'{where}.duration: {segment.duration} s is not a whole number '
                               f'of time steps (h = {h} s). Fix: a multiple of h, such as '
                               f'{max(1, round(steps)) * h:g}.')
        try:
            v = engine.checked_command(segment.velocities)
        except CommandError as err:
            raise CommandError(f'{where}.velocities: {err}') from None
        rows.extend([v] * int(round(steps)))
    return np.array(rows)


def _task_plan(engine: QuasistaticSimulator) -> np.ndarray:
    """Return the task's pick-and-place plan (the demo's) over every commanded joint."""
    from quasistatic_drake.apps.pick_and_place import plan_pick_and_place

    plan, _, _ = plan_pick_and_place(engine)
    out = np.zeros((plan.steps, len(joint_labels(engine))))
    columns = robot_columns(robot_layout(engine))
    for name, s in plan.robot_slices.items():
        out[:, columns[name]] = plan.velocities[:, s]
    return out
