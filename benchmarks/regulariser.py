"""
The quasi-static regulariser: its drag, the stability it buys, and the cost of removing the drag.

Issue 17, item 2.  In quasi-static mode the QP's Hessian keeps eps M_u,
eps = r h^2 min(K) / lambda_max(M_u) (r = ``quasi_static_inertia_ratio``),
and ``qp: {proximal_iterations: N}`` removes the drag eps M_u v / h it puts
on moving objects (``formulations/proximal_drag.py``).  Per (r, N):

* drag: the net force on a moving object over its weight (largest), for the
  arm demo's cylinder and a 28 g brick over their lift and carry, and for a
  box pushed at 0.1 m/s by a finger of K = 1e3 and 1e5 N/m
  (``grasp_creep.py``'s measures);
* stability: the yaw of config/finger_push.yaml's box, pushed through its
  centre by a point, after 5.5 s at h = 0.1 s (its centre then 5 cm before
  the table's edge) and after 3 s at h = 0.02 s, and the growth per step of
  the yaw over the run's second half (an unstable equilibrium that only the
  regulariser holds in quasi-static mode: docs/robustness.md);
* cost: the arm demo's whole pick-and-place rollout, wall time per step
  (median of 3 runs).

    .venv/bin/python benchmarks/regulariser.py [--json FILE] [--png FILE]   # out/regulariser.*
"""

import argparse
from pathlib import Path
import time

import matplotlib
import numpy as np
from pydrake.math import RollPitchYaw

from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.apps.pick_and_place import plan_pick_and_place
import grasp_creep
from report import machine, write_results

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402

CONFIG = grasp_creep.CONFIG
SETTINGS = ((0.1, 0), (0.1, 1), (0.1, 3), (0.2, 5), (0.3, 0), (0.3, 4), (0.3, 6))


def changes(r: float, n: int) -> dict:
    """Return the scenario keys of one setting."""
    return {'quasi_static_inertia_ratio': r, 'qp': {'proximal_iterations': n}}


def held_drag(base: dict, r: float, n: int) -> float:
    """Return the largest drag over weight on the held object of an arm scene."""
    scenario = Scenario.from_dict({**base, **changes(r, n)}, base_dir=CONFIG, source='arm')
    _, _, _, results, name, sim = grasp_creep.held_motion(scenario)
    return max(grasp_creep.net_force_fraction(sim, x, name) for x in results)


def push_drag(stiffness: float, r: float, n: int) -> float:
    """Return the largest drag over weight on a box pushed at 0.1 m/s, once it slides."""
    return max(grasp_creep.push_drag(stiffness, changes=changes(r, n))[3:])


def centre_push_yaw(h: float, duration: float, r: float, n: int) -> tuple[float, float]:
    """Return the yaw [deg] after pushing through the centre, and its growth per step."""
    sim = QuasistaticSimulator(Scenario.from_dict({
        'include': 'finger_push.yaml', 'time_step': h, **changes(r, n)},
        base_dir=CONFIG, source='centre push'))
    q, q_ref, yaws = sim.default_positions(), None, []
    for _ in range(round(duration / h)):
        result = sim.step(sim.initial_state(q, q_ref=q_ref), {'finger': np.array([0.1, 0.0, 0.0])})
        q, q_ref = result.q_next, result.state_next.q_ref
        yaws.append(abs(RollPitchYaw(sim.object_pose(q, 'box').rotation()).yaw_angle()))
    half = np.log(np.maximum(yaws[len(yaws) // 2:], 1e-300))
    return float(np.degrees(yaws[-1])), float(np.exp((half[-1] - half[0]) / (len(half) - 1)))


def arm_cost(r: float, n: int) -> float:
    """Return the wall time per step [s] of the arm demo's rollout (median of 3)."""
    sim = QuasistaticSimulator(Scenario.from_dict(
        {'include': 'arm_pick_place.yaml', **changes(r, n)}, base_dir=CONFIG, source='arm'))
    plan, _, _ = plan_pick_and_place(sim)
    commands = [plan.commands(k) for k in range(plan.steps)]
    walls = []
    for _ in range(3):
        start = time.perf_counter()
        sim.rollout(sim.initial_state(), commands)
        walls.append((time.perf_counter() - start) / len(commands))
    return float(np.median(walls))


def measure() -> dict:
    """Return the figures per setting."""
    brick = {'include': 'arm_base.yaml', 'objects': [{
        'name': 'brick', 'file': str(grasp_creep.BRICK),
        'initial_pose': {'xyz': [0.55, 0.0, 0.025], 'rpy': [0, 0, 0]}}]}
    rows = []
    for r, n in SETTINGS:
        yaw_01, growth_01 = centre_push_yaw(0.1, 5.5, r, n)
        yaw_002, growth_002 = centre_push_yaw(0.02, 3.0, r, n)
        rows.append({
            'r': r, 'proximal_iterations': n,
            'drag_over_weight': {
                'cylinder': held_drag({'include': 'arm_pick_place.yaml'}, r, n),
                'brick': held_drag(brick, r, n),
                'push K=1e3': push_drag(1e3, r, n), 'push K=1e5': push_drag(1e5, r, n)},
            'centre_push_yaw_deg': {'h=0.1, 5.5 s': yaw_01, 'h=0.02, 3 s': yaw_002},
            'centre_push_growth_per_step': {'h=0.1': growth_01, 'h=0.02': growth_002},
            'arm_wall_per_step_s': arm_cost(r, n)})
        print(format_row(rows[-1]), flush=True)
    return {'settings': rows, 'machine': machine()}


def format_row(row: dict) -> str:
    """Return one printed line."""
    drag = ' '.join(f'{k} {100 * v:7.3f}%' for k, v in row['drag_over_weight'].items())
    yaw = list(row['centre_push_yaw_deg'].values())
    growth = list(row['centre_push_growth_per_step'].values())
    return (f"r {row['r']:.1f} N {row['proximal_iterations']}: drag {drag} | yaw h=0.1 "
            f"{yaw[0]:.1e} deg (x{growth[0]:.2f}/step), h=0.02 "
            f"{yaw[1]:.1f} deg (x{growth[1]:.2f}/step) | arm "
            f"{1e3 * row['arm_wall_per_step_s']:.2f} ms/step")


def draw(summary: dict, path: Path) -> None:
    """Plot the stiff push's drag against the arm's cost, one point per setting."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for row in summary['settings']:
        x = 1e3 * row['arm_wall_per_step_s']
        y = 100 * max(row['drag_over_weight'].values())
        ax.scatter(x, y, color='tab:blue')
        ax.annotate(f"r={row['r']:g}, N={row['proximal_iterations']}", (x, y), fontsize=8)
    ax.axhline(1.0, color='tab:red', label='goal: 1 % of the weight')
    ax.set_yscale('log')
    ax.set_xlabel('arm demo: wall time per step [ms]')
    ax.set_ylabel('largest drag over weight [%]')
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    """Measure, print and write the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[1])
    parser.add_argument('--json', type=Path, default=Path('out/regulariser.json'))
    parser.add_argument('--png', type=Path, default=Path('out/regulariser.png'))
    args = parser.parse_args()
    summary = measure()
    write_results(summary, args.json, args.png, lambda path: draw(summary, path))


if __name__ == '__main__':
    main()
