"""Behaviour of the QP step on plain models written here (nobody tuned them for us)."""

import numpy as np
import pytest

from conftest import (ground_entry, make_sim, pads_robot, pose_xyz_rpy, run, sdf_box_object,
                      sdf_shape_object, urdf_cartesian_robot, write)

BOX_SIZE = 0.1


def box_scene(tmp_path, quasi_dynamic, size=(BOX_SIZE,) * 3, rpy=(0, 0, 0), robots=()):
    """Build a plain <box> (no friction in its file) resting on a ground slab."""
    return make_sim(tmp_path, {
        'quasi_dynamic': quasi_dynamic,
        'robots': list(robots),
        'objects': [{'name': 'box',
                     'file': write(tmp_path, 'box.sdf', sdf_box_object('box', size, 1.0)),
                     'initial_pose': {'xyz': [0, 0, size[2] / 2], 'rpy': list(rpy)}}],
        'environment': [ground_entry(tmp_path)]})


@pytest.mark.parametrize('size, rpy', [
    ((BOX_SIZE,) * 3, (0, 0, 0)),
    ((BOX_SIZE,) * 3, (0, 0, 0.5)),
    ((0.04, 0.06, 0.25), (0, 0, 0.2)),      # tall and thin, on its small face
    ((0.3, 0.2, 0.02), (0, 0, 0)),          # a flat plate
])
def test_box_at_rest_stays(tmp_path, quasi_dynamic, size, rpy):
    sim = box_scene(tmp_path, quasi_dynamic, size, rpy)
    q0 = sim.default_positions()
    xyz0, rpy0 = pose_xyz_rpy(sim, q0, 'box')
    result = run(sim, q0, {}, 30)
    xyz, rpy1 = pose_xyz_rpy(sim, result.q_next, 'box')
    np.testing.assert_allclose(xyz, xyz0, atol=1e-7)
    np.testing.assert_allclose(rpy1, rpy0, atol=1e-7)
    assert result.contact_set.n_c >= 4, 'a face on a face needs a manifold, not one point'


@pytest.mark.parametrize('geometry, z, rpy', [
    ('<cylinder><radius>0.04</radius><length>0.12</length></cylinder>', 0.06, (0, 0, 0)),
    ('<cylinder><radius>0.04</radius><length>0.12</length></cylinder>', 0.04, (np.pi / 2, 0, 0)),
    ('<capsule><radius>0.03</radius><length>0.1</length></capsule>', 0.03, (0, np.pi / 2, 0)),
    ('<sphere><radius>0.05</radius></sphere>', 0.05, (0, 0, 0)),
], ids=['cylinder_upright', 'cylinder_lying', 'capsule_lying', 'sphere'])
def test_round_objects_at_rest_stay(tmp_path, quasi_dynamic, geometry, z, rpy):
    model = sdf_shape_object('thing', geometry, 0.5, (4e-4, 4e-4, 4e-4))
    sim = make_sim(tmp_path, {
        'quasi_dynamic': quasi_dynamic,
        'objects': [{'name': 'thing', 'file': write(tmp_path, 'thing.sdf', model),
                     'initial_pose': {'xyz': [0.1, -0.2, z], 'rpy': list(rpy)}}],
        'environment': [ground_entry(tmp_path)]})
    q0 = sim.default_positions()
    result = run(sim, q0, {}, 30)
    X0, X = sim.object_pose(q0, 'thing'), sim.object_pose(result.q_next, 'thing')
    np.testing.assert_allclose(X.translation(), X0.translation(), atol=1e-7)
    np.testing.assert_allclose(X.rotation().matrix(), X0.rotation().matrix(), atol=1e-7)


def test_robot_in_free_space_follows_command_exactly(tmp_path, quasi_dynamic):
    robot = urdf_cartesian_robot('arm', [
        ('x', 'world', '1 0 0', None), ('y', 'x_link', '0 1 0', None),
        ('z', 'y_link', '0 0 1', '<geometry><sphere radius="0.02"/></geometry>')])
    sim = make_sim(tmp_path, {
        'quasi_dynamic': quasi_dynamic,
        'robots': [{'name': 'arm', 'file': write(tmp_path, 'arm.urdf', robot),
                    'stiffness': [500, 800, 1200], 'initial_positions': [0.1, 0.2, 0.5]}]})
    assert sim.robot_joint_names('arm') == ['x', 'y', 'z']
    q = sim.default_positions()
    v = np.array([0.05, -0.1, 0.2])
    result = run(sim, q, {'arm': v}, 10)
    np.testing.assert_allclose(sim.robot_positions(result.q_next, 'arm'),
                               [0.1, 0.2, 0.5] + 10 * 0.1 * v, atol=1e-12)
    np.testing.assert_allclose(result.diagnostics.v, v, atol=1e-12)


def finger_robot(tmp_path, start_x, z):
    robot = urdf_cartesian_robot('finger', [
        ('fx', 'world', '1 0 0', None), ('fy', 'fx_link', '0 1 0', None),
        ('fz', 'fy_link', '0 0 1', '<geometry><sphere radius="0.02"/></geometry>')], mu=0.5)
    return {'name': 'finger', 'file': write(tmp_path, 'finger.urdf', robot),
            'stiffness': [1000, 1000, 1000], 'initial_positions': [start_x, 0.0, z]}


def test_sphere_finger_pushes_box_straight(tmp_path, quasi_dynamic):
    sim = box_scene(tmp_path, quasi_dynamic, robots=[finger_robot(tmp_path, -0.08, 0.05)])
    q = sim.default_positions()
    result = run(sim, q, {'finger': [0.1, 0.0, 0.0]}, 30)     # 0.3 m commanded
    xyz, rpy = pose_xyz_rpy(sim, result.q_next, 'box')
    finger = sim.robot_positions(result.q_next, 'finger')
    assert xyz[0] > 0.2, 'the box must follow the finger'
    assert finger[0] + 0.02 == pytest.approx(xyz[0] - BOX_SIZE / 2, abs=2e-3)
    assert abs(xyz[1]) < 1e-6, 'no sideways drift'
    assert np.max(np.abs(rpy)) < 1e-4, 'no spurious yaw or tilt'
    # Anitescu's relaxation lifts a sliding box by at most mu h |v_t| (Pang & Tedrake 2021).
    assert BOX_SIZE / 2 - 1e-4 < xyz[2] < BOX_SIZE / 2 + 0.5 * 0.1 * 0.1 + 1e-4


def squeeze_and_lift(sim):
    q = sim.default_positions()
    squeeze = run(sim, q, {'pads': [0.0, 0.1, -0.1]}, 3)           # close and squeeze 2 cm
    lift = run(sim, squeeze.state_next, {'pads': [0.1, 0.0, 0.0]}, 10)   # lift 10 cm
    return run(sim, lift.state_next, {'pads': [0.0, 0.0, 0.0]}, 10)       # hold: settles


def net_force_on(result, body):
    forces = [c.force_W for c in result.contacts if c.body_b == body]
    forces += [-c.force_W for c in result.contacts if c.body_a == body]
    return np.sum(forces, axis=0)


def test_two_pads_squeeze_and_lift_a_box(tmp_path, quasi_dynamic):
    sim = box_scene(tmp_path, quasi_dynamic, robots=[pads_robot(tmp_path, 0.8)])
    result = squeeze_and_lift(sim)
    xyz, rpy = pose_xyz_rpy(sim, result.q_next, 'box')
    assert xyz[2] > BOX_SIZE / 2 + 0.09, 'the box is lifted with the pads'
    assert np.max(np.abs(rpy)) < 1e-4, 'squeezing pads must not make the box spin'
    assert np.max(np.abs(xyz[:2])) < 1e-6
    # Held still, the contact forces on the box balance its weight exactly.
    np.testing.assert_allclose(net_force_on(result, 'box::box_body'), [0, 0, 9.81],
                               atol=1e-6)


def test_pads_with_too_little_friction_slip(tmp_path, quasi_dynamic):
    sim = box_scene(tmp_path, quasi_dynamic, robots=[pads_robot(tmp_path, 0.05)])
    result = squeeze_and_lift(sim)
    xyz, rpy = pose_xyz_rpy(sim, result.q_next, 'box')
    assert xyz[2] == pytest.approx(BOX_SIZE / 2, abs=1e-3), 'the box slips and stays'
    assert sim.robot_positions(result.q_next, 'pads')[0] > 0.14, 'the pads went up'
    assert np.max(np.abs(rpy)) < 1e-4


def test_resting_box_forces_balance_weight(tmp_path, quasi_dynamic):
    sim = box_scene(tmp_path, quasi_dynamic)
    result = run(sim, sim.default_positions(), {}, 3)
    np.testing.assert_allclose(net_force_on(result, 'box::box_body'), [0, 0, 9.81],
                               atol=1e-6)
    assert all(c.force_W[2] <= 1e-9 for c in result.contacts if c.body_b != 'box::box_body')


def test_falling_box_does_not_tunnel(tmp_path, quasi_dynamic):
    """A box released 5 cm up moves further in one step than the detection tolerance."""
    sim = make_sim(tmp_path, {
        'quasi_dynamic': quasi_dynamic,
        'objects': [{'name': 'box', 'file': write(tmp_path, 'box.sdf',
                                                  sdf_box_object('box', (0.1,) * 3, 1.0)),
                     'initial_pose': {'xyz': [0, 0, 0.1]}}],
        'environment': [ground_entry(tmp_path)]})
    result = run(sim, sim.default_positions(), {}, 5)
    xyz, _ = pose_xyz_rpy(sim, result.q_next, 'box')
    assert xyz[2] == pytest.approx(0.05, abs=1e-3)


def test_mesh_box_rests_on_its_hull_vertices(tmp_path, quasi_dynamic):
    """A collision mesh (Drake uses its convex hull) resting on a face must not tip."""
    corners = [(x, y, z) for z in (-0.05, 0.05) for y in (-0.05, 0.05) for x in (-0.05, 0.05)]
    faces = [(1, 3, 4, 2), (5, 6, 8, 7), (1, 2, 6, 5), (3, 7, 8, 4), (1, 5, 7, 3), (2, 4, 8, 6)]
    obj = ''.join(f'v {x} {y} {z}\n' for x, y, z in corners) + ''.join(
        f'f {a} {b} {c}\nf {a} {c} {d}\n' for a, b, c, d in faces)
    write(tmp_path, 'cube.obj', obj)
    mesh = '<mesh><uri>cube.obj</uri></mesh>'
    sim = make_sim(tmp_path, {
        'quasi_dynamic': quasi_dynamic,
        'objects': [{'name': 'cube', 'file': write(tmp_path, 'cube.sdf', sdf_shape_object(
            'cube', mesh, 1.0, (1.7e-3, 1.7e-3, 1.7e-3))),
            'initial_pose': {'xyz': [0, 0, 0.05], 'rpy': [0, 0, 0.3]}}],
        'environment': [ground_entry(tmp_path)]})
    q0 = sim.default_positions()
    result = run(sim, q0, {}, 30)
    assert result.contact_set.n_c >= 4
    X0, X = sim.object_pose(q0, 'cube'), sim.object_pose(result.q_next, 'cube')
    np.testing.assert_allclose(X.translation(), X0.translation(), atol=1e-7)
    np.testing.assert_allclose(X.rotation().matrix(), X0.rotation().matrix(), atol=1e-7)
