"""Convex meshes in the contact manifold: the hull-plane field, grasps and the arm scene."""

import math
import os
import shutil

import numpy as np
from pydrake.geometry import Convex, Mesh
import pytest

from conftest import (assert_gradient_matches_finite_differences, ground_entry, make_sim,
                      pads_robot, PENETRATION_LIMIT, pose_xyz_rpy, REPO_ROOT, run,
                      sdf_shape_object, write)
from quasistatic_drake import Scenario
from quasistatic_drake.model import shape_spec
from quasistatic_drake.apps.pick_and_place import run_pick_and_place
from quasistatic_drake.shapes import (BOX, CONVEX, feature_edges, feature_points, hull_planes,
                                      ShapeSpec, signed_distance)

ROUNDED_BOX_OBJ = os.path.join(REPO_ROOT, 'urdf', 'meshes', 'rounded_box.obj')
ROUNDED_BOX_SCENE = os.path.join(REPO_ROOT, 'config', 'arm_pick_place_rounded_box.yaml')
SIZE = (0.06, 0.06, 0.12)       # [m] the rounded box's outer size, and the mesh box's
INERTIA = (5.75e-4, 5.75e-4, 2.271e-4)
CUBE_CORNERS = np.array([[x, y, z] for z in (-1, 1) for y in (-1, 1) for x in (-1, 1)], float)
# Each face of the cube as two triangles, wound outwards (indices into CUBE_CORNERS).
CUBE_TRIANGLES = [(0, 2, 3), (0, 3, 1), (4, 5, 7), (4, 7, 6), (0, 1, 5), (0, 5, 4),
                  (2, 6, 7), (2, 7, 3), (0, 4, 6), (0, 6, 2), (1, 3, 7), (1, 7, 5)]


def box_obj(tmp_path, half, name='box.obj'):
    """Write a box with half extents ``half`` as a triangulated OBJ; return its path."""
    lines = ['v %.9f %.9f %.9f' % tuple(c) for c in CUBE_CORNERS * half]
    lines += ['f %d %d %d' % tuple(i + 1 for i in t) for t in CUBE_TRIANGLES]
    path = tmp_path / name
    path.write_text('\n'.join(lines) + '\n')
    return str(path)


@pytest.fixture
def unit_cube(tmp_path):
    """Return the CONVEX spec of a unit cube (half extents 0.5) read by Drake from an OBJ."""
    return shape_spec(Convex(box_obj(tmp_path, np.full(3, 0.5))))


BOX_FIELD = ShapeSpec(BOX, half=np.full(3, 0.5))


# ----- the field -------------------------------------------------------------------------

def test_drake_convex_and_mesh_become_convex_shapes(tmp_path):
    path = box_obj(tmp_path, np.array([0.1, 0.2, 0.3]))
    for shape in (Convex(path), Mesh(path), Convex(path, 2.0)):
        spec = shape_spec(shape)
        assert spec.kind == CONVEX and spec.has_distance_field
        assert len(spec.planes) == 6 and len(spec.edges) == 12
    half = 2.0 * np.array([0.1, 0.2, 0.3])          # the scale applies
    np.testing.assert_allclose(np.sort(spec.planes[:, 3]), np.sort(np.concatenate([half] * 2)))
    np.testing.assert_allclose(np.max(np.abs(feature_points(spec)[0]), axis=0), half)


@pytest.mark.parametrize('flip', [(), (1, 4, 9)], ids=['outwards', 'mixed_winding'])
def test_hull_planes_merge_coplanar_triangles_and_point_outwards(flip):
    faces = [t[::-1] if k in flip else t for k, t in enumerate(CUBE_TRIANGLES)]
    planes, plane_of_face = hull_planes(CUBE_CORNERS * 0.5 + [1.0, 2.0, 3.0], faces)
    assert len(planes) == 6
    assert plane_of_face[0] == plane_of_face[1] and plane_of_face[2] == plane_of_face[3]
    np.testing.assert_allclose(np.linalg.norm(planes[:, :3], axis=1), 1.0)
    centre = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(planes[:, :3] @ centre - planes[:, 3], -0.5)   # outward
    normals = {tuple(np.round(n).astype(int)) for n in planes[:, :3]}
    assert normals == {(1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1), (0, 0, -1)}


def test_hull_planes_reject_faces_that_do_not_hold_the_vertices():
    with pytest.raises(ValueError):
        hull_planes(CUBE_CORNERS, CUBE_TRIANGLES[:6])          # half the faces are missing


def test_cube_field_equals_the_box_field_inside(unit_cube):
    points = np.random.default_rng(5).uniform(-0.5, 0.5, size=(500, 3))
    d, grad = signed_distance(unit_cube, points)
    d_box, grad_box = signed_distance(BOX_FIELD, points)
    np.testing.assert_allclose(d, d_box, atol=1e-12)
    np.testing.assert_allclose(grad, grad_box, atol=1e-12)
    assert np.all(d <= 0.0)


def test_cube_field_equals_the_box_field_beyond_a_face(unit_cube):
    """Outside, where the closest surface point lies on a face, the field is exact."""
    rng = np.random.default_rng(6)
    on_face = rng.uniform(-0.5, 0.5, size=(600, 3))
    axis = rng.integers(0, 3, size=600)
    sign = rng.choice([-1.0, 1.0], size=600)
    on_face[np.arange(600), axis] = 0.5 * sign
    outward = np.zeros((600, 3))
    outward[np.arange(600), axis] = sign
    gap = rng.uniform(0.0, 0.3, size=600)
    points = on_face + gap[:, None] * outward
    d, grad = signed_distance(unit_cube, points)
    np.testing.assert_allclose(d, gap, atol=1e-12)
    np.testing.assert_allclose(d, signed_distance(BOX_FIELD, points)[0], atol=1e-12)
    np.testing.assert_allclose(grad, outward, atol=1e-12)


def test_cube_field_underestimates_beyond_edges_and_vertices(unit_cube):
    """Near an edge or a vertex outside, the field is the farthest face plane's distance."""
    points = np.array([[0.6, 0.6, 0.0], [0.6, 0.7, 0.8], [-0.9, 0.5, -0.6]])
    d, grad = signed_distance(unit_cube, points)
    np.testing.assert_allclose(d, [0.1, 0.3, 0.4], atol=1e-12)
    np.testing.assert_allclose(grad[1:], [[0, 0, 1], [-1, 0, 0]], atol=1e-12)
    d_true = signed_distance(BOX_FIELD, points)[0]
    assert np.all(d < d_true) and np.all(d >= d_true / math.sqrt(3.0))


def test_cube_field_gradient_is_a_unit_outward_normal_and_the_finite_difference(unit_cube):
    rng = np.random.default_rng(7)
    points = rng.uniform(-1.0, 1.0, size=(500, 3))
    d, grad = signed_distance(unit_cube, points)
    np.testing.assert_allclose(np.linalg.norm(grad, axis=1), 1.0, atol=1e-12)
    # An outward face normal: the face's plane is where the field is measured.
    np.testing.assert_allclose(np.max(np.abs(grad), axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(np.sum(grad * points, axis=1) - 0.5, d, atol=1e-12)
    assert_gradient_matches_finite_differences(unit_cube, points, d, grad, "the planes' ties")


def test_rounded_box_field_at_known_points():
    spec = shape_spec(Convex(ROUNDED_BOX_OBJ))
    assert spec.kind == CONVEX
    d, grad = signed_distance(spec, [[0, 0, 0], [0.04, 0.01, 0], [0, -0.015, -0.07],
                                     [0.0, 0.025, 0.03]])
    np.testing.assert_allclose(d, [-0.03, 0.01, 0.01, -0.005], atol=1e-12)
    np.testing.assert_allclose(grad[1:], [[1, 0, 0], [0, 0, -1], [0, 1, 0]], atol=1e-12)
    # Every hull vertex lies on the field's zero level set; the normals are unit.
    vertices, radii = feature_points(spec)
    np.testing.assert_allclose(signed_distance(spec, vertices)[0], -radii, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(spec.planes[:, :3], axis=1), 1.0, atol=1e-12)
    edges = feature_edges(spec)
    assert len(edges) == len(spec.edges) > 0
    np.testing.assert_allclose(signed_distance(spec, edges.mean(axis=1))[0], 0.0, atol=1e-12)


# ----- the manifold ------------------------------------------------------------------------

def mesh_object(tmp_path, kind):
    """Write a 0.06 x 0.06 x 0.12 m object: a convex mesh box, the rounded box or a Mesh."""
    if kind == 'box_mesh':
        uri = os.path.basename(box_obj(tmp_path, 0.5 * np.array(SIZE)))
    else:
        uri = 'rounded_box.obj'
        shutil.copy(ROUNDED_BOX_OBJ, tmp_path / uri)
    convex = '' if kind == 'rounded_box_mesh' else '<drake:declare_convex/>'
    geometry = f'<mesh><uri>{uri}</uri>{convex}</mesh>'
    return write(tmp_path, 'thing.sdf', sdf_shape_object('thing', geometry, 0.4, INERTIA,
                                                         mu=0.6))


def mesh_scene(tmp_path, quasi_dynamic, kind, robots=(), xyz=(0, 0, SIZE[2] / 2), rpy=(0, 0, 0)):
    sim = make_sim(tmp_path, {
        'quasi_dynamic': quasi_dynamic,
        'robots': list(robots),
        'objects': [{'name': 'thing', 'file': mesh_object(tmp_path, kind),
                     'initial_pose': {'xyz': list(xyz), 'rpy': list(rpy)}}],
        'environment': [ground_entry(tmp_path)]})
    assert {g.shape.kind for g in sim.model.geometries.values()} == {BOX, CONVEX}
    return sim


def close_pads(tmp_path):
    """Return the pads robot 1 cm either side of a 0.06 m wide object, at its mid-height."""
    robot = pads_robot(tmp_path, 0.8)
    robot['initial_positions'] = [0.05, -0.05, 0.05]
    return robot


def test_pad_on_a_rounded_box_face_holds_the_overlap_corners(tmp_path):
    """
    A 0.06 m pad on the rounded box's 0.04 m wide flat face touches a 0.04 x 0.06 rectangle.

    Its corners are where the pad's edges leave the flat face: no vertex of
    either shape.  The manifold must hold all four.
    """
    sim = mesh_scene(tmp_path, False, 'rounded_box', robots=[close_pads(tmp_path)])
    q = sim.default_positions()
    q[sim.model.robot('pads').q_idx] = [0.05, -0.04, 0.04]     # inner faces on the object
    sim.model.set_positions(q)
    contacts = sim.detector.detect(0.02)
    for side, x in (('left', -0.03), ('right', 0.03)):
        pad = f'pads::{side}_link'
        on_face = [p for p, phi, n, a, b in zip(contacts.point_A_W, contacts.phi,
                                                contacts.normal_W, contacts.body_a,
                                                contacts.body_b)
                   if pad in (a, b) and abs(phi) < 1e-9 and abs(n[0]) > 1.0 - 1e-12]
        corners = {(round(p[1], 9), round(p[2], 9)) for p in on_face}
        assert {(-0.02, 0.02), (0.02, 0.02), (-0.02, 0.08), (0.02, 0.08)} <= corners, side
        np.testing.assert_allclose([p[0] for p in on_face], x, atol=1e-12)


@pytest.mark.parametrize('kind', ['box_mesh', 'rounded_box', 'rounded_box_mesh'])
def test_two_pads_squeeze_and_lift_a_convex_mesh(tmp_path, quasi_dynamic, kind):
    sim = mesh_scene(tmp_path, quasi_dynamic, kind, robots=[close_pads(tmp_path)])
    q = sim.default_positions()
    xyz0, _ = pose_xyz_rpy(sim, q, 'thing')
    lift0, state = sim.robot_positions(q, 'pads')[0], sim.initial_state()
    for command, steps in (([0.0, 0.1, -0.1], 3), ([0.1, 0.0, 0.0], 10), ([0.0] * 3, 10)):
        for _ in range(steps):
            result = run(sim, state, {'pads': command}, 1)   # checks phi >= -1 mm
            state = result.state_next
            q = np.array(state.q)
            xyz, rpy = pose_xyz_rpy(sim, q, 'thing')
            rise = sim.robot_positions(q, 'pads')[0] - lift0
            assert xyz[2] - xyz0[2] == pytest.approx(rise, abs=1e-3), 'rises with the pads'
            assert np.max(np.abs(np.degrees(rpy))) < 0.05, 'no yaw or tilt'
            assert np.max(np.abs(xyz[:2] - xyz0[:2])) < 1e-3
    assert xyz[2] - xyz0[2] > 0.09


@pytest.mark.parametrize('kind, xyz, rpy', [
    ('box_mesh', (0.1, -0.2, SIZE[2] / 2), (0, 0, 0.3)),
    ('rounded_box', (0.0, 0.0, SIZE[2] / 2), (0, 0, 0)),
    ('rounded_box', (0.2, 0.1, SIZE[0] / 2), (math.pi / 2, 0, 0.5)),
], ids=['box_mesh', 'rounded_box_upright', 'rounded_box_lying'])
def test_convex_mesh_at_rest_stays(tmp_path, quasi_dynamic, kind, xyz, rpy):
    sim = mesh_scene(tmp_path, quasi_dynamic, kind, xyz=xyz, rpy=rpy)
    q0 = sim.default_positions()
    result = run(sim, q0, {}, 30)
    X0, X = sim.object_pose(q0, 'thing'), sim.object_pose(result.q_next, 'thing')
    assert np.max(np.abs(X.translation() - X0.translation())) < 1e-6
    assert np.max(np.abs(X.rotation().matrix() - X0.rotation().matrix())) < 1e-6
    assert result.contact_set.n_c >= 4, 'a face on a face needs a manifold'


def test_convex_meshes_rest_on_a_convex_mesh_slab(tmp_path, quasi_dynamic):
    """Hull vertices and hull edges against another mesh's field hold a face on a face."""
    box_obj(tmp_path, np.array([0.5, 0.5, 0.1]), 'slab.obj')
    slab = """<?xml version="1.0"?>
<robot name="slab" xmlns:drake="http://drake.mit.edu">
  <link name="slab">
    <collision>
      <geometry><mesh filename="slab.obj"><drake:declare_convex/></mesh></geometry>
      <drake:proximity_properties><drake:mu_dynamic value="0.5"/></drake:proximity_properties>
    </collision>
  </link>
</robot>
"""
    for rpy, z in (((0, 0, 0.3), SIZE[2] / 2), ((math.pi / 2, 0, 0.4), SIZE[0] / 2)):
        sim = make_sim(tmp_path, {
            'quasi_dynamic': quasi_dynamic,
            'objects': [{'name': 'thing', 'file': mesh_object(tmp_path, 'rounded_box'),
                         'initial_pose': {'xyz': [0.1, 0.05, z], 'rpy': list(rpy)}}],
            'environment': [{'name': 'slab', 'file': write(tmp_path, 'slab.urdf', slab),
                             'pose': {'xyz': [0, 0, -0.1]}}]})
        assert {g.shape.kind for g in sim.model.geometries.values()} == {CONVEX}
        q0 = sim.default_positions()
        assert sim.min_signed_distance(q0) == pytest.approx(0.0, abs=1e-9)
        result = run(sim, q0, {}, 30)
        X0, X = sim.object_pose(q0, 'thing'), sim.object_pose(result.q_next, 'thing')
        assert np.max(np.abs(X.translation() - X0.translation())) < 1e-6
        assert np.max(np.abs(X.rotation().matrix() - X0.rotation().matrix())) < 1e-6
        assert result.contact_set.n_c >= 4


# ----- the arm scene -----------------------------------------------------------------------

def test_arm_picks_and_places_the_rounded_box():
    scenario = Scenario.from_yaml(ROUNDED_BOX_SCENE)
    run_ = run_pick_and_place(scenario)
    summary = run_.summary()
    assert summary['max_object_lift'] >= 0.10
    place_error = np.linalg.norm(run_.object_final_xyz[:2] - run_.place_target_xyz[:2])
    assert place_error <= 0.02
    assert run_.final_tilt_deg < 10.0
    assert run_.min_signed_distance >= PENETRATION_LIMIT
    assert summary['failed_steps'] == 0
