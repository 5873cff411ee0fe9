"""
The engine's box-box signed distance (manifold.box_box_pairs) against closed forms and Drake.

The engine measures box pairs itself because Drake's touching box-box code can
abort the process.  Closed forms: face to face, an edge to a face, two crossed
edges, an overlap.  Random pairs: penetrations agree with Drake's EPA to
round-off; separations are exact here, and FCL's GJK (an upper bound: it
measures between two surface points) is at most 3e-5 m longer.
"""

import numpy as np
from pydrake.geometry import Box
from pydrake.math import RigidTransform, RollPitchYaw
from pydrake.multibody.plant import AddMultibodyPlantSceneGraph, CoulombFriction
from pydrake.multibody.tree import SpatialInertia
from pydrake.systems.framework import DiagramBuilder
import pytest

from quasistatic_drake.manifold import box_box_pairs

HALF = 0.05
S2 = np.sqrt(2.0)


def measure(X_A, X_B, half_A=(HALF,) * 3, half_B=(HALF,) * 3, tolerance=np.inf,
            drift=np.zeros((2, 3)), with_tie=False):
    """Return (distance, p_ACa, p_BCb, nhat_BA_W) of one pair of boxes (and its tie flag)."""
    R = np.array([X_A.rotation().matrix(), X_B.rotation().matrix()])
    o = np.array([X_A.translation(), X_B.translation()])
    d, p_A, p_B, n, tied = box_box_pairs(R, o, np.array([half_A, half_B], dtype=float),
                                         np.array([0]), np.array([1]), tolerance,
                                         np.asarray(drift, dtype=float))
    return (d[0], p_A[0], p_B[0], n[0]) + ((bool(tied[0]),) if with_tie else ())


@pytest.mark.parametrize('drift_B, normal', [((0, 0, 1), (0, 0, -1)), ((0, 0, -1), (0, 0, 1)),
                                             ((0, 0, 0), (0, 0, -1))])
def test_centred_boxes_come_apart_the_way_b_is_commanded(drift_B, normal):
    """A thin pad centred in a slab's thickness: as deep up as down; its drift picks the way."""
    slab, pad = (0.6, 0.4, HALF), (0.01, 0.03, 0.03)
    X_B = pose([0.07, 0, 0])
    d, p_A, p_B, n, tied = measure(pose([0, 0, 0]), X_B, slab, pad,
                                   drift=[(0, 0, 0), drift_B], with_tie=True)
    assert tied and d == pytest.approx(-(HALF + 0.03), abs=1e-15)
    np.testing.assert_allclose(n, normal, atol=1e-15)        # from B to A: B leaves along -n
    d_off, _, _, n_off, tied_off = measure(pose([0, 0, 0]), pose([0.07, 0, 1e-6]), slab, pad,
                                           drift=[(0, 0, 0), (0, 0, -1)], with_tie=True)
    assert not tied_off and n_off[2] == -1.0, 'off centre, the shallower way wins'


def pose(xyz, rpy=(0, 0, 0)):
    return RigidTransform(RollPitchYaw(rpy), xyz)


TILT_X = [np.pi / 4, 0, 0]    # a top edge along x at z = HALF sqrt(2)


@pytest.mark.parametrize('A_rpy, X_B, distance, normal', [
    ([0, 0, 0], pose([0.2, 0, 0]), 0.1, [-1, 0, 0]),                            # face to face
    ([0, 0, 0], pose([0.2, 0, 0], [0, 0, np.pi / 4]), 0.15 - HALF * S2, [-1, 0, 0]),  # edge
    (TILT_X, pose([0, 0, 0.3], [0, np.pi / 4, 0]), 0.3 - 2 * HALF * S2, [0, 0, -1]),  # x edges
    ([0, 0, 0], pose([0, 0, 0.09]), -0.01, [0, 0, -1]),                         # overlap
    ([0, 0, 0], pose([0.02, 0.01, 0.095], [0, 0, 0.3]), -0.005, [0, 0, -1]),    # turned
], ids=['face', 'edge_to_face', 'crossed_edges', 'overlap', 'overlap_turned'])
def test_closed_forms(A_rpy, X_B, distance, normal):
    X_A = pose([0, 0, 0], A_rpy)
    d, p_A, p_B, n = measure(X_A, X_B)
    assert d == pytest.approx(distance, abs=1e-12)
    np.testing.assert_allclose(n, normal, atol=1e-12)
    gap = X_A.multiply(p_A) - X_B.multiply(p_B)        # witness points: |gap| = |d|
    assert np.linalg.norm(gap) == pytest.approx(abs(d), abs=1e-12)


def test_beyond_the_tolerance_is_inf():
    d, *_ = measure(pose([0, 0, 0]), pose([0.2, 0, 0]), tolerance=0.05)
    assert d == np.inf


@pytest.fixture(scope='module')
def drake_boxes():
    """Two free boxes of different sizes in a MultibodyPlant."""
    builder = DiagramBuilder()
    plant, _ = AddMultibodyPlantSceneGraph(builder, 0.0)
    half = (np.array([0.05, 0.1, 0.03]), np.array([0.02, 0.07, 0.12]))
    bodies, ids = [], []
    for name, h in zip('AB', half):
        body = plant.AddRigidBody(name, SpatialInertia.SolidBoxWithMass(1, 1, 1, 1))
        ids.append(plant.RegisterCollisionGeometry(body, RigidTransform(), Box(*(2 * h)), name,
                                                   CoulombFriction(0.5, 0.5)))
        bodies.append(body)
    plant.Finalize()
    context = plant.GetMyMutableContextFromRoot(builder.Build().CreateDefaultContext())
    return plant, context, bodies, ids, half


def test_random_pairs_against_drake(drake_boxes):
    plant, context, bodies, ids, half = drake_boxes
    rng = np.random.default_rng(0)
    checked = {True: 0, False: 0}
    for _ in range(1500):
        X_A = pose(rng.uniform(-0.1, 0.1, 3), rng.uniform(-3, 3, 3))
        X_B = pose(rng.uniform(-0.25, 0.25, 3), rng.uniform(-3, 3, 3))
        plant.SetFreeBodyPose(context, bodies[0], X_A)
        plant.SetFreeBodyPose(context, bodies[1], X_B)
        d, p_A, p_B, n = measure(X_A, X_B, *half)
        if abs(d) < 1e-6:
            continue                    # Drake's touching code: the reason this kernel exists
        query = plant.get_geometry_query_input_port().Eval(context)
        pair = query.ComputeSignedDistancePairClosestPoints(*ids)
        n_drake = pair.nhat_BA_W if pair.id_A == ids[0] else -pair.nhat_BA_W
        if d < 0:
            assert d == pytest.approx(pair.distance, abs=1e-12)
            np.testing.assert_allclose(n, n_drake, atol=1e-9)
        else:
            assert d <= pair.distance + 1e-12 and pair.distance - d < 3e-5
        assert np.linalg.norm(X_A.multiply(p_A) - X_B.multiply(p_B)) == pytest.approx(
            abs(d), abs=1e-12)
        checked[d < 0] += 1
    assert checked[True] > 100 and checked[False] > 500
