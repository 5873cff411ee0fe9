"""
qp: {friction_cone: exact} (the default): the round Coulomb cone as a second-order cone.

A box rests on level ground under gravity tilted by theta (a slope at theta,
in the ground's frame).  Coulomb: it sticks while tan(theta) <= mu, in every
direction.  The pyramid of four directions (+-x, +-y) is the cone only along
them: between them it holds only mu / sqrt(2) (its rows allow |f_x| + |f_y| <=
mu N), so a box on a slope down the diagonal with mu / sqrt(2) < tan(theta) <= mu
slides under the pyramid and sticks under the exact cone.
"""

import math

import numpy as np
import pytest

from conftest import ground_entry, make_sim, sdf_box_object, write
from quasistatic_drake import State
from quasistatic_drake.scenario import ScenarioError

MU = 0.5


def slope(tmp_path, theta, azimuth, cone):
    """Return a simulator of a 10 cm box on the ground, gravity tilted by theta towards azimuth."""
    g = 9.81
    gravity = [g * math.sin(theta) * math.cos(azimuth), g * math.sin(theta) * math.sin(azimuth),
               -g * math.cos(theta)]
    qp = {'friction_cone': cone}
    return make_sim(tmp_path, {
        'gravity': gravity, 'robots': [], 'qp': qp,
        'objects': [{'name': 'box', 'file': write(tmp_path, 'box.sdf', sdf_box_object(
            'box', [0.1] * 3, 1.0, mu=MU)), 'initial_pose': {'xyz': [0, 0, 0.05]}}],
        'environment': [ground_entry(tmp_path, mu=MU)]})


def slid(sim, steps=5):
    """Return how far the box moved on the ground in ``steps`` steps [m], and the last result."""
    state = sim.initial_state()
    q0 = state.q
    for _ in range(steps):
        result = sim.step(state, {})
        assert result.success, result.status
        state = result.state_next
    q = state.q
    xyz = sim.model.objects[0].q_idx[4:7]
    return float(np.linalg.norm((q - q0)[xyz][:2])), result


@pytest.mark.parametrize('ratio, azimuth, pyramid_slides, exact_slides', [
    (0.95, 0.0, False, False),               # along a pyramid direction: both are Coulomb
    (1.05, 0.0, True, True),
    (0.85, math.pi / 4, True, False),        # down the diagonal: the pyramid holds mu / sqrt(2)
    (1.05, math.pi / 4, True, True)])
def test_a_box_on_a_slope_sticks_or_slides_as_mu_says(tmp_path, ratio, azimuth,
                                                      pyramid_slides, exact_slides):
    theta = math.atan(ratio * MU)
    for cone, slides in (('pyramid', pyramid_slides), ('exact', exact_slides)):
        distance, result = slid(slope(tmp_path, theta, azimuth, cone))
        assert (distance > 1e-3) == slides, (cone, distance)
        if not slides:
            assert distance < 1e-9
            total = -result.forces_W.sum(axis=0)         # on the box, by the ground
            tangential, normal = np.linalg.norm(total[:2]), total[2]
            assert tangential == pytest.approx(math.tan(theta) * normal, rel=1e-6)


def test_exact_cone_forces_lie_in_the_round_cone(tmp_path):
    """
    Check the ground's force on a box held on the diagonal slope: |f_t| <= mu f_n.

    Its four corners share the load: their impulses are not unique, and each
    corner's friction is bounded by an even share of the pair's (qp.py,
    ``lagged_impulses``); the pair's force lies in the cone, each corner's in
    its share's.
    """
    _, result = slid(slope(tmp_path, math.atan(0.9 * MU), math.pi / 4, 'exact'), steps=2)
    forces = result.forces_W
    normal = result.contact_set.normal_W
    assert np.allclose(normal, normal[0])                  # one pair, one face
    total = forces.sum(axis=0)
    f_n = total @ normal[0]
    f_t = np.linalg.norm(total - f_n * normal[0])
    assert f_n > 1.0
    assert f_t <= MU * f_n * (1 + 1e-6) + 1e-9
    corner_t = np.linalg.norm(forces - np.outer(forces @ normal[0], normal[0]), axis=1)
    assert np.all(corner_t <= MU * f_n / len(forces) * (1 + 1e-6) + 1e-9)


def test_exact_cone_settings_that_cannot_be_honoured_are_refused(tmp_path):
    for qp, message in [({'friction_cone': 'exact', 'log_barrier_weight': 100.0},
                         r'qp\.friction_cone: exact: the log-barrier form .* Fix: delete '
                         r'friction_cone'),
                        ({'friction_cone': 'round'}, 'friction cone')]:
        with pytest.raises(ScenarioError, match=message):
            make_sim(tmp_path, {
                'robots': [], 'qp': qp,
                'objects': [{'name': 'box', 'file': write(tmp_path, 'box.sdf', sdf_box_object(
                    'box', [0.1] * 3, 1.0)), 'initial_pose': {'xyz': [0, 0, 0.05]}}],
                'environment': [ground_entry(tmp_path)]})


def test_exact_cone_gradients_of_a_box_held_on_the_slope_match_central_differences(tmp_path):
    """Check dq_next/dq of the box held by the round cone on the diagonal slope."""
    sim = slope(tmp_path, math.atan(0.8 * MU), math.pi / 4, 'exact')
    state = sim.initial_state()
    result = sim.step(state, {}, gradients=True)
    assert result.success and not result.gradients.degenerate
    eps, columns = 1e-6, []
    for e in np.eye(len(state.q)):
        ends = [sim.step(State(q=state.q + sign * eps * e, q_ref=state.q_ref,
                               warm_start=state.warm_start), {}).q_next for sign in (1, -1)]
        columns.append((ends[0] - ends[1]) / (2 * eps))
    fd = np.array(columns).T
    np.testing.assert_allclose(result.gradients.dq_next_dq, fd, rtol=1e-5,
                               atol=1e-5 * np.abs(fd).max())
