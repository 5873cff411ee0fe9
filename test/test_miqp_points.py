"""
Eq. 23 (Pang & Tedrake 2018) solved on each pair's patch, other points joining where needed.

``miqp_points.py``: the step is solved on the kept points; a dropped point
carries no impulse, and the solution is the whole problem's if it passes
through no dropped point.  Checked against closed forms and against the
step solved on every point.
"""

from dataclasses import replace

import numpy as np
import pytest

from conftest import ground_entry, make_sim, sdf_box_object, write
from test_miqp_hand_built import H, IDX_A, IDX_U, K, MASS, G, side_pusher, STEP
from quasistatic_drake import QuasistaticSimulator, Scenario, ScenarioError
from quasistatic_drake.contact import ContactSet
from quasistatic_drake.formulations.miqp import MiqpSettings, miqp_data
from quasistatic_drake.formulations.miqp_backends import BACKENDS
from quasistatic_drake.formulations.miqp_points import embedded, passed_through
from quasistatic_drake.step_loop import LINEARISATION_TOL
from quasistatic_drake.paths import package_share_dir

WALL_GAP = 0.004      # [m] a wall right of the block: the push (STEP = 1 cm) reaches it


def with_wall(contacts: ContactSet) -> ContactSet:
    """Add a point between the block and a fixed wall on its right (phi_dot = -v_bx)."""
    wall = ContactSet(
        phi=np.array([WALL_GAP]), J_n=np.array([[-1.0, 0.0, 0.0]]),
        J_f=np.array([[0.0, 1.0, 0.0], [0.0, -1.0, 0.0]]), mu=np.array([0.5]),
        normal_W=np.array([[-1.0, 0.0, 0.0]]),
        tangents_W=np.array([[[0.0, 1.0, 0.0], [0.0, -1.0, 0.0]]]),
        point_A_W=np.zeros((1, 3)), point_B_W=np.zeros((1, 3)),
        body_a=('wall',), body_b=('block',))
    return contacts.joined(wall)


def data_of(contacts):
    settings = MiqpSettings(contact_stiffness=K)
    return miqp_data(contacts, H, IDX_U, IDX_A, np.array([STEP]), np.array([0.0, -MASS * G]),
                     settings, np.full(3, -np.inf), np.full(3, np.inf), point_reach=0.05,
                     weight=MASS * G)


def solved(data):
    answer = BACKENDS['gurobi']().solve(data, MiqpSettings(contact_stiffness=K))
    assert answer.status == 'optimal', answer.status
    return answer


def eq23_residuals(data, y, z):
    """Return the worst violation of each row group of eq. 23 at (y, z) (0: all hold)."""
    w, lam = data.R @ y + data.b, y[data.n_v:]
    return {'23a': np.abs(data.A_eq @ y - data.b_eq).max(initial=0.0),
            '23c w': max(0.0, -w.min(initial=0.0)), '23c lambda': max(0.0, -lam.min()),
            '23d w': max(0.0, (w - data.M_w * z).max()),
            '23d lambda': max(0.0, (lam - data.M_lambda * (1 - z)).max()),
            '23f': max(0.0, (data.b_lb - data.A_lb @ y).max(initial=0.0))}


def test_a_dropped_point_out_of_reach_leaves_the_solution_whole():
    """The wall 4 cm away: the push solved without it is eq. 23's solution with it."""
    full_set = with_wall(side_pusher())
    full_set = replace(full_set, phi=np.array([0.0, 0.0, 0.04]))
    full, kept = data_of(full_set), np.array([0, 1])
    answer = solved(data_of(full_set.take(kept)))
    y, z = embedded(full, kept, answer.x, answer.P_n, answer.P_f, answer.gamma, answer.z)
    assert len(passed_through(full, y, kept)) == 0
    assert max(eq23_residuals(full, y, z).values()) <= 1e-7
    assert y[full.n_v + 2] == 0.0 and z[2] == 1.0       # no impulse; its gap is free
    whole = solved(full)
    np.testing.assert_allclose(answer.x, whole.x, atol=1e-8)
    np.testing.assert_allclose(answer.x, [STEP, 0.0, STEP], atol=1e-8)


def test_a_dropped_point_the_push_reaches_is_found_and_stops_the_block():
    """The wall 4 mm away: the push passes through it, and with it the block stops there."""
    full_set = with_wall(side_pusher())
    full, kept = data_of(full_set), np.array([0, 1])
    answer = solved(data_of(full_set.take(kept)))
    y, _ = embedded(full, kept, answer.x, answer.P_n, answer.P_f, answer.gamma, answer.z)
    np.testing.assert_array_equal(passed_through(full, y, kept), [2])
    assert (full.R[2] @ y + full.b[2]) == pytest.approx(WALL_GAP - STEP, abs=1e-8)
    whole = solved(full)
    np.testing.assert_allclose(whole.x, [WALL_GAP, 0.0, WALL_GAP], atol=1e-8)


def tilted_box(tmp_path, per_pair):
    """Return a 0.2 x 0.1 x 0.1 box on one edge of its bottom, tilted 0.05 rad, under eq. 23."""
    pitch = 0.05
    return make_sim(tmp_path, {
        'formulation': 'miqp', 'miqp': {'max_points_per_pair': per_pair},
        'objects': [{'name': 'box', 'file': write(tmp_path, 'box.sdf',
                                                  sdf_box_object('box', (0.2, 0.1, 0.1), 1.0)),
                     'initial_pose': {'xyz': [0, 0, 0.05 + 0.1 * np.sin(pitch)],
                                      'rpy': [0, pitch, 0]}}],
        'environment': [ground_entry(tmp_path)]})


def test_a_box_on_its_edge_settles_as_with_every_point(tmp_path):
    """Its edge's two ends cannot hold it; the far corners join and it settles on its face."""
    thinned, every = tilted_box(tmp_path, 2), tilted_box(tmp_path, 'all')
    q = thinned.default_positions()
    a, b = thinned.step(thinned.initial_state(q), {}), every.step(every.initial_state(q), {})
    assert a.success and b.success, (a.status, b.status)
    assert a.contact_set.n_c == b.contact_set.n_c == 4
    np.testing.assert_allclose(a.q_next, b.q_next, atol=1e-7)
    # the turn onto its face leaves at most the step's position residual
    assert thinned.min_signed_distance(a.q_next) >= -LINEARISATION_TOL
    # all four points were solved
    assert a.diagnostics.solution.binaries == b.diagnostics.solution.binaries == 24


def test_two_pads_squeeze_and_lift_a_box_with_the_default_settings():
    """Issue 18: the pads' grasp under formulation: miqp fits Gurobi's pip licence as shipped."""
    scenario = Scenario.from_yaml(package_share_dir() / 'config' / 'two_pads_lift.yaml')
    scenario = scenario.with_formulation('miqp')
    sim = QuasistaticSimulator(scenario)
    q, q_ref, start = sim.default_positions(), None, None
    z0 = sim.object_pose(q, 'box').translation()[2]
    most = 0
    for command, steps in (([0.0, 0.1, -0.1], 2), ([0.0, 0.02, -0.02], 3),
                           ([0.1, 0.02, -0.02], 10)):
        for _ in range(steps):
            result = sim.step(sim.initial_state(q, q_ref=q_ref, warm_start=start),
                              {'pads': command})
            assert result.success, result.status
            q, q_ref, start = result.q_next, result.state_next.q_ref, result.state_next.warm_start
            most = max(most, result.contact_set.n_c)
            assert sim.min_signed_distance(q) >= -1e-4
    assert most >= 20, 'the manifold has more points than the licence would take'
    # the box rose 10 steps x h x 0.1 m/s with the pads
    assert sim.object_pose(q, 'box').translation()[2] - z0 == pytest.approx(0.1, abs=1e-3)


BOX = {'name': 'box', 'file': 'package://quasistatic_drake/urdf/box.urdf'}


@pytest.mark.parametrize('value, accepted', [(None, 4), ('all', None), (3, 3)])
def test_max_points_per_pair_takes_all_or_a_count(value, accepted):
    block = {} if value is None else {'max_points_per_pair': value}
    scenario = Scenario.from_dict({'time_step': 0.1, 'formulation': 'miqp', 'miqp': block,
                                   'objects': [BOX]})
    assert scenario.settings('miqp').max_points_per_pair == accepted


@pytest.mark.parametrize('value', ['every', 0, 2.5, True])
def test_max_points_per_pair_refuses_anything_else(value):
    with pytest.raises(ScenarioError, match=r"max_points_per_pair: expected a positive integer "
                                            r"\(or 'all' for all manifold points\)"):
        Scenario.from_dict({'time_step': 0.1, 'formulation': 'miqp',
                            'miqp': {'max_points_per_pair': value}, 'objects': [BOX]})
