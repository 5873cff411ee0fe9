"""
Grasps: how far a held object creeps across the fingers, and the regulariser's drag on it.

Issue 17, item 2.  For the arm demo (config/arm_pick_place.yaml, its cylinder)
and a 28 g foam brick in the same grasp (test/data/foam_brick.urdf), over the
demo's 15 cm lift and 25 cm carry: the object's pose in the left finger's
frame (the largest drift per axis, and the largest turn), at h = 0.1, 0.05
and 0.02 s.  And the drag: the net force on the object (its contact forces
and its weight) over its weight, while it moves, for the two grasps and for
a box pushed at 0.1 m/s by a finger of stiffness 1e3 and 1e5 N/m
(config/finger_push.yaml).  In quasi-static mode that net force is the
regulariser's eps M_u v / h (``formulations/qp.py``).

    .venv/bin/python benchmarks/grasp_creep.py [--json FILE] [--png FILE]   # out/grasp_creep.*
"""

import argparse
from pathlib import Path
from typing import Optional

import matplotlib
import numpy as np

from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.apps.pick_and_place import plan_pick_and_place
from quasistatic_drake.paths import package_share_dir
from report import machine, write_results

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402

CONFIG = package_share_dir() / 'config'
BRICK = package_share_dir() / 'test' / 'data' / 'foam_brick.urdf'
TIME_STEPS = (0.1, 0.05, 0.02)


def brick_scenario(h: float = 0.1) -> Scenario:
    """Return the arm demo with the 28 g foam brick in place of the cylinder."""
    return Scenario.from_dict({
        'include': 'arm_base.yaml', 'time_step': h,
        'objects': [{'name': 'brick', 'file': str(BRICK),
                     'initial_pose': {'xyz': [0.55, 0.0, 0.025], 'rpy': [0, 0, 0]}}]},
        base_dir=CONFIG, source='foam brick scene')


def cylinder_scenario(h: float = 0.1) -> Scenario:
    """Return the arm demo (its cylinder) at time step h."""
    return Scenario.from_dict({'include': 'arm_pick_place.yaml', 'time_step': h},
                              base_dir=CONFIG, source=f'arm demo at h = {h}')


def held_motion(scenario: Scenario):
    """
    Return the object's pose in the left finger's frame over the lift and the carry, and more.

    (translations (k x 3) relative to the first, largest turn [rad], how far the
    object travelled in the world [m], the run's results over those steps, and
    the object's name and simulator).
    """
    sim = QuasistaticSimulator(scenario)
    plan, _, name = plan_pick_and_place(sim)
    rollout = sim.rollout(sim.initial_state(), [plan.commands(k) for k in range(plan.steps)])
    if rollout.failed_steps:
        raise RuntimeError(f'{scenario.source}: {rollout.failed_steps} steps failed')
    plant, context = sim.model.plant, sim.model.plant_context
    finger = plant.GetBodyByName('wsg_left_finger')
    held = range(plan.step_range('lift').start + 1, plan.step_range('carry').stop + 1)
    poses, travelled = [], []
    for k in held:
        sim.model.set_positions(rollout.q[k])
        poses.append(plant.EvalBodyPoseInWorld(context, finger).inverse().multiply(
            sim.object_pose(rollout.q[k], name)))
        travelled.append(sim.object_pose(rollout.q[k], name).translation())
    shifts = np.array([X.translation() - poses[0].translation() for X in poses])
    turns = [X.rotation().inverse().multiply(poses[0].rotation()).ToAngleAxis().angle()
             for X in poses]
    distance = np.linalg.norm(np.diff(travelled, axis=0), axis=1).sum()
    return shifts, max(turns), distance, rollout.results[held.start - 1:held.stop - 1], name, sim


def net_force_fraction(sim: QuasistaticSimulator, result, name: str) -> float:
    """Return |the object's contact forces + its weight| / its weight after one step."""
    info = sim.model.object(name)
    body = sim.model.plant.GetBodyByName(info.base_body, info.instance)
    weight = body.default_mass() * np.linalg.norm(sim.scenario.gravity)
    force = np.array(sim.scenario.gravity, dtype=float) * body.default_mass()
    c = result.contact_set
    for i in range(c.n_c):
        if c.body_b[i].startswith(name + '::'):
            force += result.forces_W[i]
        if c.body_a[i].startswith(name + '::'):
            force -= result.forces_W[i]
    return float(np.linalg.norm(force) / weight)


def push_drag(stiffness: float, steps: int = 15, changes: Optional[dict] = None) -> list:
    """Return the net force over the weight per step of a box pushed at 0.1 m/s."""
    sim = QuasistaticSimulator(Scenario.from_dict({
        'include': 'finger_push.yaml', **(changes or {}),
        'robots': [{'name': 'finger', 'file': 'package://quasistatic_drake/urdf/finger.urdf',
                    'stiffness': [stiffness] * 3, 'initial_positions': [-0.08, 0.0, 0.05]}]},
        base_dir=CONFIG, source=f'finger push, K = {stiffness:g}'))
    state, fractions = sim.initial_state(), []
    for _ in range(steps):
        result = sim.step(state, {'finger': np.array([0.1, 0.0, 0.0])})
        state = result.state_next
        fractions.append(net_force_fraction(sim, result, 'box'))
    return fractions


def measure() -> dict:
    """Return the creep per scene and h, and the drag per scene."""
    creep, drag = {}, {}
    for label, make in (('cylinder', cylinder_scenario), ('brick', brick_scenario)):
        for h in TIME_STEPS:
            shifts, turn, distance, results, name, sim = held_motion(make(h))
            creep[f'{label} h={h:g}'] = {
                'largest_drift_m': np.abs(shifts).max(axis=0).tolist(),
                'largest_turn_rad': turn, 'travelled_m': distance, 'steps': len(results)}
            if h == 0.1:
                fractions = [net_force_fraction(sim, r, name) for r in results]
                drag[label] = {'median': float(np.median(fractions)),
                               'max': float(np.max(fractions))}
    for stiffness in (1e3, 1e5):
        fractions = push_drag(stiffness)[3:]            # once the box slides
        drag[f'push K={stiffness:g}'] = {'median': float(np.median(fractions)),
                                         'max': float(np.max(fractions))}
    return {'creep': creep, 'drag_over_weight': drag, 'machine': machine()}


def draw(summary: dict, path: Path) -> None:
    """Plot the largest drift per scene and h, against the 0.1 mm goal."""
    fig, ax = plt.subplots(figsize=(7, 4))
    labels = list(summary['creep'])
    drift = [1e3 * max(v['largest_drift_m']) for v in summary['creep'].values()]
    ax.bar(range(len(labels)), drift, color='tab:blue')
    ax.axhline(0.1, color='tab:red', label='goal 0.1 mm')
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha='right')
    ax.set_ylabel('largest drift against the fingers [mm]')
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    """Measure, print and write the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[1])
    parser.add_argument('--json', type=Path, default=Path('out/grasp_creep.json'))
    parser.add_argument('--png', type=Path, default=Path('out/grasp_creep.png'))
    args = parser.parse_args()
    summary = measure()
    for label, row in summary['creep'].items():
        print(f"{label:>18}: largest drift across axes "
              f"{', '.join(f'{1e6 * d:.3f}' for d in row['largest_drift_m'])} um, turn "
              f"{row['largest_turn_rad']:.1e} rad over {row['steps']} steps")
    for label, row in summary['drag_over_weight'].items():
        print(f"{label:>18}: drag / weight median {100 * row['median']:.2g} %, "
              f"max {100 * row['max']:.2g} %")
    write_results(summary, args.json, args.png, lambda path: draw(summary, path))


if __name__ == '__main__':
    main()
