"""
No lift while sliding: the step QP with its rows' bounds shifted by the sliding speed.

Anitescu's relaxation lifts a contact sliding at speed s by mu h s per step
(formulations/sliding_lift.py).  Closed forms on a block pushed across a
plane, then the scenes: a box pushed at 0.1 m/s at h = 0.1 s with mu = 0.5
rode 5 mm above the table; it now stays on it.
"""

import os

import numpy as np
import pytest

from conftest import REPO_ROOT
from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.contact import ContactSet
from quasistatic_drake.formulations.qp import qp_cost, solve_qp_step
from quasistatic_drake.formulations.sliding_lift import (constraint_rows, fixed_point,
                                                         sliding_speeds)

H, M, F, MU, G = 0.1, 1.0, 10.0, 0.5, 9.81


def block_on_a_plane(phi=0.0):
    """
    Return a block (v = [v_x, v_z]) on a plane, with friction along +-x.

    Its cost is quasi-dynamic (M), pushed by F along x and pulled down by
    gravity: b = -h [F, -M g].
    """
    contacts = ContactSet(phi=np.array([phi]), J_n=np.array([[0.0, 1.0]]),
                          J_f=np.array([[1.0, 0.0], [-1.0, 0.0]]), mu=np.array([MU]),
                          normal_W=np.array([[0.0, 0.0, 1.0]]),
                          tangents_W=np.array([[[1.0, 0.0, 0.0], [-1.0, 0.0, 0.0]]]),
                          point_A_W=np.zeros((1, 3)), point_B_W=np.zeros((1, 3)),
                          body_a=('plane',), body_b=('block',))
    cost = qp_cost(2, H, np.zeros(0, int), np.zeros(0), np.zeros(0), np.zeros(0),
                   np.array([0, 1]), M * np.eye(2), np.array([F, -M * G]))
    return contacts, cost


def solve(contacts, cost, speeds=None):
    return solve_qp_step(cost, contacts, H, np.full(2, -np.inf), np.full(2, np.inf),
                         speeds=speeds)


def test_a_pushed_block_closed_forms():
    """
    Check the block pushed along the plane, with and without the lift (closed forms).

    Anitescu's row v_z - mu v_x >= 0 binds: v_x = h (F / M - mu g) / (1 + mu^2) and
    v_z = mu v_x (the lift).  Shifted by s = v_x it reads v_z >= 0: v_x = h (F / M -
    mu g), v_z = 0, the normal impulse h M g and the friction mu times it, as Coulomb.
    """
    contacts, cost = block_on_a_plane()
    anitescu = solve(contacts, cost)
    v_x = H * (F / M - MU * G) / (1 + MU ** 2)
    np.testing.assert_allclose(anitescu.v, [v_x, MU * v_x], rtol=1e-9)
    solution, speeds, iterations, residual = fixed_point(
        lambda s: solve(contacts, cost, s), lambda solution, s: None, contacts, H)
    # to the fixed point's tolerance: a lift of at most LIFT_TOL = 1e-10 m per step
    np.testing.assert_allclose(solution.v, [H * (F / M - MU * G), 0.0], atol=1e-10 / H)
    assert residual <= 1e-10 and iterations <= 25
    np.testing.assert_allclose(speeds, sliding_speeds(contacts, solution.v), atol=1e-9)
    impulse = solution.impulses_W[0]                # on the block
    np.testing.assert_allclose(impulse, [-MU * H * M * G, 0.0, H * M * G], rtol=1e-9)


def test_the_binding_row_linearises_to_the_normal_row():
    """Check constraint_rows: a sliding contact's binding row is J_n, the other J_n + 2 mu J_f."""
    contacts, cost = block_on_a_plane()
    from quasistatic_drake.formulations.qp import friction_cone_rows
    A, index = friction_cone_rows(contacts)
    A_c, tie = constraint_rows(contacts, A, index, np.array([0.5, 0.0]))
    assert not tie
    np.testing.assert_allclose(A_c, [[2 * MU, 1.0], [0.0, 1.0]])
    A_c, _ = constraint_rows(contacts, A, index, np.zeros(2))       # sticking: A's own
    np.testing.assert_array_equal(A_c, A)


def scene(name, **qp):
    scenario = Scenario.from_yaml(os.path.join(REPO_ROOT, 'config', name))
    return QuasistaticSimulator(scenario.with_formulation('qp', **qp) if qp else scenario)


def push(sim, command, steps):
    """Return the box's heights and the least signed distance after each step of a push."""
    q, q_ref, heights, least = sim.default_positions(), None, [], []
    box_z = sim.model.objects[0].q_idx[6]
    for _ in range(steps):
        result = sim.step(sim.initial_state(q, q_ref=q_ref), {'finger': command})
        assert result.success
        q, q_ref = result.q_next, result.state_next.q_ref
        heights.append(q[box_z])
        least.append(result.diagnostics.min_phi_next)
    return np.array(heights), np.array(least), q, result


@pytest.mark.parametrize('command', [[0.1, 0.0, 0.0], [0.1, 0.03, 0.0]])
def test_a_pushed_box_stays_on_the_table(command):
    """
    Check the box pushed at 0.1 m/s, h = 0.1 s, mu = 0.5: within 0.3 mm of its resting height.

    Straight, and off-centre (the box turns as it slides).  Anitescu's rows, kept
    with qp: {anitescu_lift: true}, let it ride mu h |v| = 5 mm above the table.
    """
    heights, least, q, _ = push(scene('finger_push.yaml'), command, 30)
    assert np.abs(heights - 0.05).max() <= 3e-4
    assert least.min() >= -1e-9                          # and no penetration
    assert q[scene('finger_push.yaml').model.objects[0].q_idx[4]] > 0.1   # it slid 10 cm
    lifted, _, _, _ = push(scene('finger_push.yaml', anitescu_lift=True), command, 30)
    assert lifted.max() - 0.05 > 4e-3


def test_sliding_friction_is_mu_times_the_weight():
    """Check the table's friction on the sliding box: mu N against the motion, N = m g."""
    sim = scene('finger_push.yaml')
    _, _, _, result = push(sim, [0.1, 0.0, 0.0], 20)
    contacts = result.contact_set
    table = [i for i, b in enumerate(contacts.body_b) if b.startswith('table')]
    force = result.forces_W[table].sum(axis=0)          # on B by A, A = box, B = table
    assert force[2] < 0 and force[0] > 0                 # the box presses on and drags the table
    assert force[0] == pytest.approx(-0.5 * force[2], rel=1e-9)
    # the finger pushes horizontally through the box's centre: the table carries its weight
    assert -force[2] == pytest.approx(sim.formulation.facts.object_weight, rel=1e-6)


def test_a_box_at_rest_keeps_the_exact_force_balance():
    """Check a box at rest: no sliding, no shift, the table carries exactly its weight."""
    sim = scene('finger_push.yaml')
    q = sim.default_positions()
    result = sim.step(sim.initial_state(q), {'finger': [0.0, 0.0, 0.0]})
    assert result.success and result.diagnostics.solution.lift_iterations == 1
    np.testing.assert_allclose(result.q_next, q, atol=1e-12)
    total = result.forces_W.sum(axis=0)                 # on the table, by the box
    np.testing.assert_allclose(total, [0.0, 0.0, -sim.formulation.facts.object_weight],
                               atol=1e-9)
