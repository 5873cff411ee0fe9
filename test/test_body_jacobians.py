"""
The moving bodies' Jacobians (QuasistaticModel.body_jacobians) against Drake's, body by body.

They are taken from the Jacobians of the leaf bodies alone, shifted to each
body's origin on the columns of the joints inboard of it (model.py,
``_jacobian_plan``): the arm's 11 moving bodies from 3.  Each scene of
config/ is checked at its initial configuration and at a perturbed one
(every joint and free body moved), against Drake's
CalcJacobianSpatialVelocity of each body at its origin.
"""

import os

import numpy as np
from pydrake.multibody.tree import JacobianWrtVariable
import pytest

from conftest import REPO_ROOT
from quasistatic_drake import QuasistaticSimulator, Scenario

SCENES = ['arm_pick_place.yaml', 'two_pads_lift.yaml', 'finger_push.yaml', 'cluttered_bin.yaml',
          'halm_posa_push.yaml', 'paper_2d.yaml']


def drake_jacobians(model):
    """Return J_w, J_v and origins of the moving bodies, one Drake Jacobian each."""
    plant, context = model.plant, model.plant_context
    world = plant.world_frame()
    J = np.array([plant.CalcJacobianSpatialVelocity(context, JacobianWrtVariable.kV,
                                                    body.body_frame(), np.zeros(3), world, world)
                  for body, _ in model.moving_bodies])
    origins = np.array([plant.EvalBodyPoseInWorld(context, body).translation()
                        for body, _ in model.moving_bodies])
    return J[:, :3], J[:, 3:], origins


def perturbed(model, q, rng):
    """Return q with every coordinate moved a little (free bodies' quaternions renormalised)."""
    moved = q + 0.05 * rng.standard_normal(len(q))
    for start in model.quaternion_starts:
        moved[start:start + 4] /= np.linalg.norm(moved[start:start + 4])
    return moved


@pytest.mark.parametrize('name', SCENES)
def test_shifted_jacobians_equal_drakes(name):
    model = QuasistaticSimulator(Scenario.from_yaml(os.path.join(REPO_ROOT, 'config', name))).model
    rng = np.random.default_rng(3)
    for q in (model.q_default, perturbed(model, model.q_default, rng)):
        model.set_positions(q)
        J_w, J_v, origins = model.body_jacobians()
        expected = drake_jacobians(model)
        for ours, theirs in zip((J_w, J_v, origins), expected):
            np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-13)
        assert np.abs(J_v).max() > 0.0


def test_the_arm_asks_drake_for_its_leaves_only():
    model = QuasistaticSimulator(
        Scenario.from_yaml(os.path.join(REPO_ROOT, 'config', 'arm_pick_place.yaml'))).model
    leaves = sorted(frame.body().name() for frame in model._leaf_frames)
    assert leaves == ['cylinder_link', 'wsg_left_finger', 'wsg_right_finger']
    assert len(model.moving_bodies) == 11
