"""
The ``quasistatic-drake`` console script.

Subcommands:
  demo   a spherical finger pushes a box across a table (config/finger_push.yaml)
         and the run is printed step by step with a summary;
  info   load a scenario and print its robots, objects and the contacts at start.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
from pydrake.math import RollPitchYaw

from quasistatic_drake.paths import package_share_dir
from quasistatic_drake.scenario import Scenario, ScenarioError
from quasistatic_drake.simulator import QuasistaticSimulator, StepResult


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the console script; return the process exit code."""
    args = _parser().parse_args(argv)
    try:
        return args.run(args)
    except ScenarioError as err:
        print(f'error: {err}', file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog='quasistatic-drake', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest='command', required=True)
    demo = commands.add_parser('demo', help='a finger pushes a box across a table')
    demo.add_argument('--scenario', type=Path,
                      default=package_share_dir() / 'config' / 'finger_push.yaml',
                      help='scenario YAML with a robot "finger" and an object "box"')
    demo.add_argument('--distance', type=_positive, default=0.2,
                      help='how far to command the finger along +x [m] (default 0.2)')
    demo.add_argument('--speed', type=_positive, default=0.1,
                      help='commanded finger speed [m/s] (default 0.1)')
    demo.add_argument('--json', type=Path, help='write a summary of the run here')
    demo.set_defaults(run=run_demo)
    info = commands.add_parser('info', help='print what a scenario contains')
    info.add_argument('scenario', type=Path)
    info.set_defaults(run=run_info)
    return parser


def _positive(text: str) -> float:
    value = float(text)
    if not np.isfinite(value) or value <= 0.0:
        raise argparse.ArgumentTypeError(f'must be a positive number, got {text}')
    return value


def run_demo(args) -> int:
    """Push the box with the finger and print what happened."""
    sim = QuasistaticSimulator(Scenario.from_yaml(args.scenario))
    h = sim.scenario.time_step
    steps = int(round(args.distance / (args.speed * h)))
    q = sim.default_positions()
    box_start = sim.object_pose(q, 'box').translation()
    print(f'Finger pushes a box: {steps} steps of h = {h} s at {args.speed} m/s along +x '
          f'({sim.scenario.source})')
    print(f"{'t [s]':>6} {'finger x':>9} {'box x':>8} {'box y':>8} {'box z':>8} "
          f"{'yaw [deg]':>9} {'contacts':>8} {'push [N]':>9} {'step [ms]':>9}")
    times, min_phi = [], np.inf
    for k in range(steps):
        result = sim.step(q, {'finger': [args.speed, 0.0, 0.0]})
        if not result.success:
            print(f'step {k} failed: {result.status}; the state is kept.')
            return 1
        q = result.q_next
        times.append(result.step_time)
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
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=2))
        print(f'Summary written to {args.json}')
    return 0


def _print_row(t: float, sim: QuasistaticSimulator, q: np.ndarray, result: StepResult):
    box = sim.object_pose(q, 'box')
    yaw = np.degrees(RollPitchYaw(box.rotation()).yaw_angle())
    push = sum(np.linalg.norm(c.force_W) for c in result.contacts
               if 'finger' in c.body_a and 'box' in c.body_b)
    x, y, z = box.translation()
    print(f'{t:6.2f} {sim.robot_positions(q, "finger")[0]:9.4f} {x:8.4f} {y:8.4f} {z:8.4f} '
          f'{yaw:9.4f} {result.contact_set.n_c:8d} {push:9.3f} {result.step_time * 1e3:9.3f}')


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
        print(f'environment {env.name}: {env.file}')
    sim.model.set_positions(q)
    contacts = sim.detector.detect(sim.scenario.contact_detection_tolerance)
    print(f'{contacts.n_c} contact points within '
          f'{sim.scenario.contact_detection_tolerance} m; min signed distance '
          f'{sim.min_signed_distance(q):.4g} m')
    return 0


if __name__ == '__main__':
    sys.exit(main())
