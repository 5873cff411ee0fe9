"""
qp: {friction_cone: exact}: the round Coulomb cone as a second-order cone program.

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
from quasistatic_drake.scenario import ScenarioError

MU = 0.5


def slope(tmp_path, theta, azimuth, cone):
    """Return a simulator of a 10 cm box on the ground, gravity tilted by theta towards azimuth."""
    g = 9.81
    gravity = [g * math.sin(theta) * math.cos(azimuth), g * math.sin(theta) * math.sin(azimuth),
               -g * math.cos(theta)]
    qp = {'friction_cone': cone}
    if cone == 'exact':
        qp['anitescu_lift'] = True
    return make_sim(tmp_path, {
        'gravity': gravity, 'robots': [], 'qp': qp,
        'objects': [{'name': 'box', 'file': write(tmp_path, 'box.sdf', sdf_box_object(
            'box', [0.1] * 3, 1.0, mu=MU)), 'initial_pose': {'xyz': [0, 0, 0.05]}}],
        'environment': [ground_entry(tmp_path, mu=MU)]})


def slid(sim, steps=5):
    """Return how far the box moved on the ground in ``steps`` steps [m], and the last result."""
    q = q0 = sim.default_positions()
    for _ in range(steps):
        result = sim.step(sim.initial_state(q), {})
        assert result.success, result.status
        q = result.q_next
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
    """Check every contact force of a box held on the diagonal slope: |f_t| <= mu f_n."""
    _, result = slid(slope(tmp_path, math.atan(0.9 * MU), math.pi / 4, 'exact'), steps=2)
    forces = result.forces_W
    normal = result.contact_set.normal_W
    f_n = np.einsum('ij,ij->i', forces, normal)
    f_t = np.linalg.norm(forces - f_n[:, None] * normal, axis=1)
    assert f_n.max() > 1.0
    assert np.all(f_t <= MU * f_n * (1 + 1e-6) + 1e-9)


def test_exact_cone_settings_that_cannot_be_honoured_are_refused(tmp_path):
    for qp, message in [({'friction_cone': 'exact'}, 'anitescu_lift: true'),
                        ({'friction_cone': 'exact', 'anitescu_lift': True,
                          'log_barrier_weight': 100.0}, 'log_barrier_weight'),
                        ({'friction_cone': 'round'}, 'friction cone')]:
        with pytest.raises(ScenarioError, match=message):
            make_sim(tmp_path, {
                'robots': [], 'qp': qp,
                'objects': [{'name': 'box', 'file': write(tmp_path, 'box.sdf', sdf_box_object(
                    'box', [0.1] * 3, 1.0)), 'initial_pose': {'xyz': [0, 0, 0.05]}}],
                'environment': [ground_entry(tmp_path)]})


def test_exact_cone_refuses_gradients_with_the_fix(tmp_path):
    from quasistatic_drake import CommandError
    sim = slope(tmp_path, 0.0, 0.0, 'exact')
    with pytest.raises(CommandError, match='friction_cone: pyramid'):
        sim.step(sim.initial_state(), {}, gradients=True)
