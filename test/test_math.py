"""The math on its own: distance fields, tangents, Jacobians and the QP's KKT conditions."""

import numpy as np
import pytest

from conftest import (assert_gradient_matches_finite_differences, ground_entry, make_sim,
                      sdf_box_object, write)
from quasistatic_drake.contact import ContactSet, tangent_directions
from quasistatic_drake.formulations.anitescu import solve_qp_step
from quasistatic_drake.formulations.qp import qp_cost
from quasistatic_drake.shapes import (BOX, CAPSULE, CYLINDER, HALFSPACE, SPHERE, ShapeSpec,
                                      feature_points, signed_distance)

SHAPES = [ShapeSpec(BOX, half=np.array([0.1, 0.05, 0.2])),
          ShapeSpec(SPHERE, radius=0.07),
          ShapeSpec(CYLINDER, radius=0.05, half_length=0.1),
          ShapeSpec(CAPSULE, radius=0.03, half_length=0.08),
          ShapeSpec(HALFSPACE)]


@pytest.mark.parametrize('shape', SHAPES, ids=lambda s: str(s.kind))
def test_distance_gradient_is_the_unit_finite_difference_gradient(shape):
    rng = np.random.default_rng(7)
    points = rng.uniform(-0.3, 0.3, size=(400, 3))
    d, grad = signed_distance(shape, points)
    np.testing.assert_allclose(np.linalg.norm(grad, axis=1), 1.0, atol=1e-12)
    assert_gradient_matches_finite_differences(shape, points, d, grad, "the medial axis")


@pytest.mark.parametrize('shape', SHAPES[:4], ids=lambda s: str(s.kind))
def test_distance_is_zero_on_the_surface_and_grows_along_the_normal(shape):
    rng = np.random.default_rng(3)
    points = rng.normal(size=(200, 3))
    d, grad = signed_distance(shape, points)
    surface = points - d[:, None] * grad
    np.testing.assert_allclose(signed_distance(shape, surface)[0], 0.0, atol=1e-12)
    np.testing.assert_allclose(signed_distance(shape, surface + 0.01 * grad)[0], 0.01,
                               atol=1e-12)


def test_distance_values_at_known_points():
    box, cylinder = SHAPES[0], SHAPES[2]
    d, g = signed_distance(box, [[0.3, 0, 0], [0.0, 0.0, 0.0], [0.2, 0.15, 0.2]])
    np.testing.assert_allclose(d, [0.2, -0.05, np.hypot(0.1, 0.1)])
    np.testing.assert_allclose(g[1], [0, 1, 0])
    d, g = signed_distance(cylinder, [[0.0, 0.2, 0.0], [0.0, 0.0, 0.15], [0.08, 0, 0.14]])
    np.testing.assert_allclose(d, [0.15, 0.05, 0.05])
    np.testing.assert_allclose(g[2], [0.6, 0, 0.8])


def test_feature_points_lie_on_the_boundary():
    for shape in SHAPES[:4]:
        centres, radii = feature_points(shape)
        d, _ = signed_distance(shape, centres)
        np.testing.assert_allclose(d, -radii, atol=1e-12)   # sphere centres sit r deep


@pytest.mark.parametrize('n_d', [2, 4, 8])
def test_tangents_are_unit_orthogonal_and_balanced(n_d):
    normals = np.random.default_rng(1).normal(size=(50, 3))
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    normals[0] = [1.0, 0.0, 0.0]
    d = tangent_directions(normals, n_d)
    np.testing.assert_allclose(np.linalg.norm(d, axis=2), 1.0, atol=1e-12)
    np.testing.assert_allclose(np.einsum('cjk,ck->cj', d, normals), 0.0, atol=1e-12)
    np.testing.assert_allclose(d[:, :n_d // 2] + d[:, n_d // 2:], 0.0, atol=1e-12)


def test_contact_jacobians_match_finite_differences(tmp_path):
    """J_n v and J_f v are the rates of phi and of the sliding along d (eqs. 3-4)."""
    sim = make_sim(tmp_path, {
        'objects': [{'name': 'box', 'file': write(tmp_path, 'box.sdf',
                                                  sdf_box_object('box', (0.1, 0.2, 0.1), 1.0)),
                     'initial_pose': {'xyz': [0.0, 0.0, 0.12], 'rpy': [0.1, -0.05, 0.3]}}],
        'environment': [ground_entry(tmp_path)]})
    q = sim.default_positions()
    sim.model.set_positions(q)
    before = sim.detector.detect(0.3)
    v = np.random.default_rng(0).normal(size=sim.model.n_v)
    eps = 1e-7
    q_eps = q + eps * sim.model.plant.MapVelocityToQDot(sim.model.plant_context, v)
    sim.model.set_positions(q_eps)
    after = sim.detector.detect(0.3)
    vertices = before.phi > 1e-3          # box vertices against the ground: fixed to the box
    assert vertices.sum() >= 8 and after.n_c == before.n_c
    np.testing.assert_allclose((after.phi - before.phi)[vertices] / eps,
                               (before.J_n @ v)[vertices], rtol=1e-5, atol=1e-6)
    slide = np.einsum('cjk,ck->cj', before.tangents_W,
                      after.point_A_W - before.point_A_W).reshape(-1) / eps
    n_d = before.n_d
    rows = np.repeat(vertices, n_d)
    np.testing.assert_allclose(-slide[rows], (before.J_f @ v)[rows], rtol=1e-5, atol=1e-6)


def line_contacts(phi, J_n, mu=0.0, n_d=2):
    """Frictionless contacts along x for a hand-built 1D problem."""
    n_c = len(phi)
    tangents = np.tile(np.array([[0.0, 1.0, 0.0], [0.0, -1.0, 0.0]]), (n_c, n_d // 2, 1))
    return ContactSet(phi=np.asarray(phi, float), J_n=np.asarray(J_n, float),
                      J_f=np.zeros((n_c * n_d, len(J_n[0]))), mu=np.full(n_c, mu),
                      normal_W=np.tile([1.0, 0.0, 0.0], (n_c, 1)), tangents_W=tangents,
                      point_A_W=np.zeros((n_c, 3)), point_B_W=np.zeros((n_c, 3)),
                      body_a=('robot', 'object'), body_b=('object', 'wall'))


def wall_push(h=0.1, K=1000.0, m=2.0):
    """Return the contacts and cost of a spring robot pushing an object against a wall."""
    # v = [v_u (object), v_a (robot)]; robot -> object: phi_dot = v_u - v_a;
    # object -> wall: phi_dot = -v_u.
    contacts = line_contacts([0.0, 0.0], [[1.0, -1.0], [-1.0, 0.0]])
    cost = qp_cost(2, h, np.array([1]), np.array([K]), np.array([0.0]), np.array([0.01]),
                   np.array([0]), np.array([[m]]), np.array([0.0]))
    return contacts, cost


def test_robot_pushing_object_into_wall_kkt():
    """A spring robot pushes an object against a wall: v' = 0 and force = K (qbar' - q_a)."""
    h, K = 0.1, 1000.0
    contacts, cost = wall_push(h, K)
    np.testing.assert_allclose(cost.b, [0.0, -h * K * 0.01])     # the sign from the KKT
    sol = solve_qp_step(cost, contacts, h, np.full(2, -np.inf), np.full(2, np.inf))
    assert sol.status == 'optimal'
    np.testing.assert_allclose(sol.v, [0.0, 0.0], atol=1e-6)
    forces = sol.impulses_W / h
    np.testing.assert_allclose(forces[0], [K * 0.01, 0, 0], rtol=1e-5)   # on the object
    np.testing.assert_allclose(forces[1], [K * 0.01, 0, 0], rtol=1e-5)   # on the wall


def test_free_robot_reaches_its_reference():
    h, K = 0.05, np.array([300.0, 900.0])
    cost = qp_cost(2, h, np.array([0, 1]), K, np.array([0.1, 0.2]), np.array([0.15, 0.1]),
                   np.zeros(0, dtype=int), np.zeros((0, 0)), np.zeros(0))
    sol = solve_qp_step(cost, ContactSet.empty(2, 4), h, np.full(2, -np.inf),
                        np.full(2, np.inf))
    np.testing.assert_allclose(sol.v, [0.05 / h, -0.1 / h])
