"""
step(gradients=True) under formulation: miqp (Pang & Tedrake 2018, eq. 23), binaries fixed.

The derivative is the KKT derivative of eq. 23 with its binaries fixed at the
solution (``formulations/miqp_sensitivity.py``); central differences of whole
MIQP steps are the reference.  Their step is 1e-4, not the QP's 1e-6: the
backends hold eq. 23's rows near contact to about 1e-6 m (Gurobi's
feasibility tolerance; DAQP's contact band, miqp_backends.contact_band,
where a point keeps a penetration or gap of up to 2e-6 m), so steps that
move contact points by less show the solvers' tolerances, not the step.
Measured: Gurobi's columns err by 2 % at 1e-6 and 1e-9 at 1e-5; under DAQP a
q step of 1e-5 tilts the pushed box's corners by 1e-6 m, inside the band,
and its tilt columns err by 0.4; at 1e-4 (1e-5 m) both backends agree with
the KKT derivative.
"""

import os

import numpy as np
import pytest

import test_step_gradients
from conftest import REPO_ROOT
from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.formulations.miqp import MiqpData
from quasistatic_drake.formulations.miqp_sensitivity import (
    biactive_pairs, fixed_binary_derivative, fixed_binary_qp, multipliers, NotStationary)
from test_step_gradients import assert_close, state

EPS = 1e-4


def central(*args):
    """Return the central differences of whole steps with MIQP-sized steps (module docstring)."""
    saved, test_step_gradients.EPS = test_step_gradients.EPS, EPS
    try:
        return test_step_gradients.central(*args)
    finally:
        test_step_gradients.EPS = saved


def miqp_scene(name, backend):
    """Return the scene under formulation: miqp with ``backend``."""
    scenario = Scenario.from_yaml(os.path.join(REPO_ROOT, 'config', name))
    return QuasistaticSimulator(scenario.with_formulation('miqp', backend=backend))


@pytest.mark.parametrize('backend', ['daqp', 'gurobi'])
def test_a_sliding_push_matches_central_differences(backend):
    """
    Check a finger that pushes a box and slides along its face, the box sliding on the table.

    Every contact slides or separates in a definite direction: the binaries stay the
    same under a small change, and all three gradients match.  Cold, DAQP's candidate
    modes are all infeasible here (two table points slide along a diagonal of the
    pyramid): the local mode search settles it (miqp_backends, "the local mode search").
    """
    sim = miqp_scene('finger_push.yaml', backend)
    command = [0.1, 0.05, -0.05]
    s = state(sim, 'finger', [command] * 8, warm=False)   # cold MIQPs
    v_cmd = np.array(command)
    result = sim.step(s, {'finger': v_cmd}, gradients=True)
    assert result.success and not result.gradients.degenerate
    assert result.contact_set.n_c >= 5                     # finger-box, box-table
    assert_close(result.gradients.dq_next_dq, central(sim, 'finger', s, v_cmd, 'q'))
    assert_close(result.gradients.dq_next_dv_cmd, central(sim, 'finger', s, v_cmd, 'v_cmd'))
    # the MIQP's target is q_a + h v_cmd (eq. 21): q_ref enters nowhere
    np.testing.assert_array_equal(result.gradients.dq_next_dq_ref, 0.0)
    box_x = sim.model.objects[0].q_idx[4]
    assert result.gradients.dq_next_dv_cmd[box_x, 0] > 0.01           # the push moves the box


def test_a_contact_at_its_cones_edge_is_flagged():
    """
    Check that a sticking finger at the edge of its friction cone makes the step one-sided.

    Pushing with a small sideways command, the finger sticks to the box with its
    friction on the cone's edge and no sliding: a lift command of either sign could
    start it sliding at no cost, so no two-sided derivative exists, and the step says so
    (central differences of the MIQP there vary with the step size: 0.10, 0.11, 0.17).
    Gurobi's solution: DAQP's answer here slides the finger 7e-7 m with its friction
    on the cone's edge, a solution as valid to 1e-6 m, whose friction rows miss
    BIACTIVE_TOL by 4e-7 and are not flagged (docs/formulations.md, "Gradients").
    """
    sim = miqp_scene('finger_push.yaml', 'gurobi')
    command = [0.1, 0.02, 0.0]
    s = state(sim, 'finger', [command] * 8, warm=False)
    result = sim.step(s, {'finger': np.array(command)}, gradients=True)
    assert result.success and result.gradients.degenerate


@pytest.mark.parametrize('backend', ['gurobi', 'daqp'])
def test_the_arm_in_free_space_follows_its_command_exactly(backend):
    """Check the arm scene under the MIQP at its start: dq_a'/dv_cmd = h I, and the differences."""
    sim = miqp_scene('arm_pick_place_miqp.yaml', backend)
    s = sim.initial_state()
    v_cmd = 0.02 * np.ones(len(s.q_ref))
    result = sim.step(s, {'iiwa': v_cmd}, gradients=True)
    assert result.success
    arm = sim.model.robots[0].q_idx
    np.testing.assert_allclose(result.gradients.dq_next_dv_cmd[arm], sim.h * np.eye(len(arm)),
                               atol=1e-9)
    assert_close(result.gradients.dq_next_dv_cmd, central(sim, 'iiwa', s, v_cmd, 'v_cmd'))
    fd = central(sim, 'iiwa', s, v_cmd, 'q')
    np.testing.assert_allclose(result.gradients.dq_next_dq[:, arm], fd[:, arm], atol=1e-7)


def point_at_a_wall(phi, xbar):
    """
    Return eq. 23 for a 1-D robot point at gap ``phi`` from a frictionless wall.

    y = [x, P_n, Gamma]; the gap closes as the point moves: phi_next = phi - x.
    """
    return MiqpData(n_v=1, n_c=1, n_d=0, idx_u=np.zeros(0, int), idx_a=np.array([0]),
                    xbar_a=np.array([xbar]), A_eq=np.zeros((0, 3)), b_eq=np.zeros(0),
                    R=np.array([[-1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]), b=np.array([phi, 0.0]),
                    A_lb=np.array([[0.0, 1.0, 0.0]]), b_lb=np.array([-1.0]),
                    x_lower=np.array([-1.0]), x_upper=np.array([1.0]),
                    M_w=np.ones(2), M_lambda=np.ones(2))


def derivative_at(phi, xbar, y, z, delta=1e-4):
    changed = [(point_at_a_wall(phi + delta, xbar), point_at_a_wall(phi - delta, xbar)),
               (point_at_a_wall(phi, xbar + delta), point_at_a_wall(phi, xbar - delta))]
    return fixed_binary_derivative(point_at_a_wall(phi, xbar), y, z, changed, delta)


def test_a_point_against_a_wall_closed_form():
    """
    Check eq. 23 with binaries fixed on a 1-D point and a wall (closed forms).

    At gap phi = 0.01, commanded xbar = 0.03 towards the wall, the point stops at it:
    x = phi, with no force (nothing pushes back on a robot in eq. 23 but the gap row),
    so the gap's pair is biactive (w = 0, P_n = 0); the row's multiplier is the
    tracking cost's pull 2 (xbar - x) = 0.04 > 0, so it stays tight: dx/dphi = 1,
    dx/dxbar = 0.  Commanded away (xbar = -0.03) it follows: dx/dphi = 0, dx/dxbar = 1.
    """
    dx, degenerate = derivative_at(0.01, 0.03, np.array([0.01, 0.0, 0.0]),
                                   np.array([0.0, 1.0]))
    assert not degenerate
    np.testing.assert_allclose(dx, [[1.0, 0.0]], atol=1e-9)
    data = point_at_a_wall(0.01, 0.03)
    free = biactive_pairs(data, np.array([0.01, 0.0, 0.0]))
    assert free.tolist() == [True, True]
    duals = multipliers(fixed_binary_qp(data, np.array([0.0, 1.0]), free),
                        np.array([0.01, 0.0, 0.0]))
    assert max(duals) == pytest.approx(0.04, rel=1e-9)
    dx, degenerate = derivative_at(0.01, -0.03, np.array([-0.03, 0.0, 0.0]),
                                   np.array([1.0, 1.0]))
    assert not degenerate
    np.testing.assert_allclose(dx, [[0.0, 1.0]], atol=1e-9)


def test_a_solution_that_is_not_optimal_for_its_binaries_is_refused():
    """A point short of its command in free space is not a solution: NotStationary."""
    data = point_at_a_wall(0.5, 0.03)
    y = np.array([0.01, 0.0, 0.0])                 # it could have moved 0.03
    with pytest.raises(NotStationary, match='not stationary'):
        multipliers(fixed_binary_qp(data, np.array([1.0, 1.0]),
                                    biactive_pairs(data, y)), y)


def test_touching_without_force_while_commanded_along_the_wall_is_one_sided():
    """
    Check that a point at the wall, commanded along it (xbar = 0), is flagged.

    x = 0 and P_n = 0: a command towards the wall stops at it, one away is followed:
    the derivative in xbar is 0 on one side and 1 on the other.
    """
    dx, degenerate = derivative_at(0.0, 0.0, np.zeros(3), np.array([0.0, 1.0]))
    assert degenerate
