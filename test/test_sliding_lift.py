"""
No lift while sliding: exact normal rows, and friction bounded by a lagged impulse.

Anitescu's relaxation (the talk's convex QP, formulations/anitescu.py) lifts
a contact sliding at speed s by mu h s per step: a box pushed at 0.1 m/s at
h = 0.1 s with mu = 0.5 rode 5 mm above the table.  The step now keeps the
normal row exact and bounds the friction by mu times the contact's normal
impulse of the last step (formulations/conic_step.py).  Closed forms on a
block pushed across a plane, then the scenes.
"""

import os

import numpy as np
import pytest

from conftest import REPO_ROOT
from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.contact import ContactSet
from quasistatic_drake.formulations.anitescu import solve_qp_step
from quasistatic_drake.formulations.conic_step import (IslandData, PYRAMID, ROUND,
                                                       solve_island, tangent_rows)
from quasistatic_drake.formulations.qp import qp_cost
from quasistatic_drake.step_loop import LINEARISATION_TOL

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


def solve(contacts, cost, normal_bound, cone=ROUND):
    """Solve the block's step with its friction bounded by mu times ``normal_bound``."""
    return solve_island(IslandData(
        Q=cost.Q, b=cost.b, lower=np.full(2, -np.inf), upper=np.full(2, np.inf),
        phi_h=contacts.phi / H, J_n=contacts.J_n,
        J_t=tangent_rows(contacts.J_f, contacts.n_c, contacts.n_d),
        J_f=contacts.J_f.reshape(contacts.n_c, contacts.n_d, 2),
        friction=MU * np.array([normal_bound]), cone=cone, penalty=1e3))


@pytest.mark.parametrize('cone', [ROUND, PYRAMID], ids=['round', 'pyramid'])
def test_a_pushed_block_closed_forms(cone):
    """
    Check the block pushed along the plane against the closed forms.

    Anitescu's row v_z - mu v_x >= 0 binds: v_x = h (F / M - mu g) / (1 + mu^2) and
    v_z = mu v_x (the lift).  The exact row v_z >= 0, with the friction bounded by
    mu times the last step's normal impulse h M g: v_x = h (F / M - mu g), v_z = 0,
    the normal impulse h M g and the friction mu times it, as Coulomb.
    """
    contacts, cost = block_on_a_plane()
    anitescu = solve_qp_step(cost, contacts, H, np.full(2, -np.inf), np.full(2, np.inf))
    v_x = H * (F / M - MU * G) / (1 + MU ** 2)
    np.testing.assert_allclose(anitescu.v, [v_x, MU * v_x], rtol=1e-9)
    answer = solve(contacts, cost, H * M * G, cone)
    np.testing.assert_allclose(answer.v, [H * (F / M - MU * G), 0.0], atol=1e-11)
    assert answer.normal[0] == pytest.approx(H * M * G, rel=1e-10)
    friction = answer.friction[0] if cone == ROUND else answer.friction[0] @ [1.0, -1.0]
    assert np.abs(friction).max() == pytest.approx(MU * H * M * G, rel=1e-10)
    assert np.ravel(friction)[0] < 0.0                   # against the slip


def test_a_block_held_by_its_friction_does_not_move():
    """Check a push below mu m g: the block sticks, the friction balances the push."""
    contacts, cost = block_on_a_plane()
    cost_weak = qp_cost(2, H, np.zeros(0, int), np.zeros(0), np.zeros(0), np.zeros(0),
                        np.array([0, 1]), M * np.eye(2), np.array([0.4 * MU * G, -M * G]))
    answer = solve(contacts, cost_weak, H * M * G)
    np.testing.assert_allclose(answer.v, 0.0, atol=1e-11)
    assert answer.friction[0][0] == pytest.approx(-0.4 * MU * G * H, rel=1e-9)


def scene(name, **qp):
    scenario = Scenario.from_yaml(os.path.join(REPO_ROOT, 'config', name))
    return QuasistaticSimulator(scenario.with_formulation('qp', **qp) if qp else scenario)


def push(sim, command, steps):
    """Return the box's heights and the least signed distance after each step of a push."""
    state, heights, least = sim.initial_state(), [], []
    box_z = sim.model.objects[0].q_idx[6]
    for _ in range(steps):
        result = sim.step(state, {'finger': command})
        assert result.success
        state = result.state_next
        heights.append(state.q[box_z])
        least.append(result.diagnostics.min_phi_next)
    return np.array(heights), np.array(least), np.array(state.q), result


@pytest.mark.parametrize('command', [[0.1, 0.0, 0.0], [0.1, 0.03, 0.0]])
def test_a_pushed_box_stays_on_the_table(command):
    """
    Check the box pushed at 0.1 m/s, h = 0.1 s, mu = 0.5: within 0.3 mm of its resting height.

    Straight, and off-centre (the box turns as it slides).  The talk's QP with
    Anitescu's rows lets it ride mu h |v| = 5 mm above the table.
    """
    sim = scene('finger_push.yaml')
    heights, least, q, _ = push(sim, command, 30)
    assert np.abs(heights - 0.05).max() <= 3e-4
    assert least.min() >= -LINEARISATION_TOL     # and no penetration beyond the step's residual
    assert q[sim.model.objects[0].q_idx[4]] > 0.1        # it slid 10 cm


def test_the_talks_qp_lifts_the_same_pushed_box():
    """Check the comparison: the step's own data under Anitescu's rows lifts by mu h |v|."""
    sim = scene('finger_push.yaml')
    _, _, _, result = push(sim, [0.1, 0.0, 0.0], 10)      # sliding steadily
    contacts = result.contact_set
    problem_cost = sim.formulation._cost(sim.data.problem(
        np.array(result.state_next.q), np.array(result.state_next.q_ref),
        np.array([0.1, 0.0, 0.0])))
    sim.model.set_positions(np.array(result.state_next.q))
    contacts = sim.loop.contacts(np.array(result.state_next.q), 0.02)
    n_v = sim.model.n_v
    lifted = solve_qp_step(problem_cost, contacts, sim.h, np.full(n_v, -np.inf),
                           np.full(n_v, np.inf))
    box_z_velocity = sim.formulation.facts.object_v_idx[5]
    assert sim.h * lifted.v[box_z_velocity] > 4e-3          # 5 mm up in one step


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
    assert result.success
    np.testing.assert_allclose(result.q_next, q, atol=1e-12)
    total = result.forces_W.sum(axis=0)                 # on the table, by the box
    np.testing.assert_allclose(total, [0.0, 0.0, -sim.formulation.facts.object_weight],
                               atol=1e-9)
