"""
Boundary-value planning through the step (quasistatic_drake/bvp.py; Song, Kumar & Pang).

The commands' parameterisations, the rollout's Jacobian against central
differences, and the two-finger disk push of Halm & Posa under
formulation: lcp: the constant finger speed that leaves the disk at
y = -3 m at t = 10 s, whose continuous answer is (8 - sqrt(0.75)) / 10 m/s.
"""

import os

import numpy as np
import pytest

from conftest import REPO_ROOT
from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.bvp import Commands, PlanningError, shoot, solve_bvp

PUSH = os.path.join(REPO_ROOT, 'config', 'halm_posa_push.yaml')


def test_the_command_parameterisations():
    constant = Commands.build('constant', 4, 3, [0, (1, 2)])
    np.testing.assert_array_equal(constant.at(np.array([2.0, -1.0])), [[2, -1, -1]] * 4)
    steps = Commands.build('piecewise_constant', 4, 2, [1], segments=2,
                           fixed=np.array([0.5, 9.0]))
    np.testing.assert_array_equal(steps.at(np.array([1.0, 3.0])),
                                  [[0.5, 1], [0.5, 1], [0.5, 3], [0.5, 3]])
    ramp = Commands.build('piecewise_linear', 5, 1, [0], segments=2)
    np.testing.assert_allclose(ramp.at(np.array([0.0, 1.0, 0.0]))[:, 0],
                               [0, 0.5, 1, 0.5, 0])
    with pytest.raises(PlanningError, match="expected one of"):
        Commands.build('spline', 4, 2, [0])
    with pytest.raises(PlanningError, match="appear once"):
        Commands.build('constant', 4, 2, [0, (0, 1)])


@pytest.fixture(scope='module')
def disk():
    """Return the push scene with stiff feedback (c = 1e-4) and the y index of the disk."""
    scenario = Scenario.from_yaml(PUSH).with_formulation('lcp', feedback_scale=1e-4)
    sim = QuasistaticSimulator(scenario)
    return sim, sim.model.objects[0].q_idx[1]


def test_the_rollout_jacobian_matches_central_differences(disk):
    sim, disk_y = disk
    q0 = sim.default_positions()
    commands = Commands.build('piecewise_constant', 120, 4, [(1, 3), 0], segments=2)
    theta = np.array([-1.2, -0.8, 0.05, -0.05])
    shot = shoot(sim, q0, ['fingers'], commands, theta)
    assert shot.failed_steps == 0 and shot.degenerate_steps == 0
    assert shot.q_final[disk_y] < 2.5                    # the fingers pushed the disk
    eps = 1e-6
    fd = np.array([(shoot(sim, q0, ['fingers'], commands, theta + eps * e).q_final
                    - shoot(sim, q0, ['fingers'], commands, theta - eps * e).q_final) / (2 * eps)
                   for e in np.eye(len(theta))]).T
    np.testing.assert_allclose(shot.dq_final, fd, rtol=1e-5, atol=1e-6 * np.abs(fd).max())


def test_the_disk_push_bvp_finds_the_analytic_speed(disk):
    sim, disk_y = disk
    commands = Commands.build('constant', 400, 4, [(1, 3)])
    plan = solve_bvp(sim, sim.default_positions(), ['fingers'], commands,
                     lambda q: np.array([q[disk_y] + 3.0]), np.array([-0.5]))
    assert abs(plan.residual[0]) < 1e-9
    # the continuous answer; the step adds the 0.1 mm finger radius and the c = 1e-4 lag
    assert -plan.theta[0] == pytest.approx((8.0 - np.sqrt(0.75)) / 10.0, abs=1e-4)
    assert plan.iterations <= 6 and plan.shot.failed_steps == 0


def test_the_solve_stops_once_the_residual_is_within_its_tolerance(disk):
    """residual_tolerance ends the solve at the first iterate that meets it."""
    sim, disk_y = disk
    commands = Commands.build('constant', 120, 4, [(1, 3)])
    target = -0.2
    residuals = []

    def terminal(q):
        residuals.append(q[disk_y] - target)
        return np.array([q[disk_y] - target])
    args = (sim, sim.default_positions(), ['fingers'], commands, terminal, np.array([-0.5]))
    full = solve_bvp(*args)
    calls = len(residuals)
    residuals.clear()
    early = solve_bvp(*args, residual_tolerance=1e-4)
    assert abs(early.residual[0]) <= 1e-4 < abs(residuals[0])
    assert early.iterations < full.iterations and len(residuals) < calls
    assert abs(full.residual[0]) < 1e-9


@pytest.mark.parametrize('bad', [0.0, -1e-8, float('nan'), float('inf'), '1e-8'])
def test_a_bad_residual_tolerance_is_refused(disk, bad):
    sim, disk_y = disk
    commands = Commands.build('constant', 4, 4, [(1, 3)])
    with pytest.raises(PlanningError, match="residual_tolerance must be a positive number"):
        solve_bvp(sim, sim.default_positions(), ['fingers'], commands,
                  lambda q: np.array([q[disk_y]]), np.array([-0.5]), residual_tolerance=bad)
