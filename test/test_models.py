"""The arm pick-and-place models: the iiwa 14 + WSG 50 robot, the table and the objects."""

import dataclasses
import glob
import math
import os
import re
import subprocess
import sys
from xml.etree import ElementTree

from conftest import PENETRATION_LIMIT, REPO_ROOT, run
import numpy as np
from pydrake.geometry import Box, Convex, Cylinder
from pydrake.math import RigidTransform
from pydrake.multibody.parsing import Parser
from pydrake.multibody.plant import AddMultibodyPlantSceneGraph
from pydrake.multibody.tree import CalcSpatialInertia
from pydrake.systems.framework import DiagramBuilder
import pytest
import yaml

from quasistatic_drake import QuasistaticSimulator, Scenario

URDF_DIR = os.path.join(REPO_ROOT, 'urdf')
CONFIG_DIR = os.path.join(REPO_ROOT, 'config')
ROBOT_URDF = os.path.join(URDF_DIR, 'iiwa14_wsg50.urdf')
MESH = os.path.join(URDF_DIR, 'meshes', 'rounded_box.obj')

ARM_LINKS = ['iiwa_link_%d' % i for i in range(8)]
ARM_JOINTS = ['iiwa_joint_%d' % i for i in range(1, 8)]
FINGER_JOINTS = ['wsg_left_finger_joint', 'wsg_right_finger_joint']
# iiwa 14 R820 data sheet: joint heights at q = 0, axes, limits.
JOINT_HEIGHTS = [0.1575, 0.36, 0.5645, 0.78, 0.9645, 1.18, 1.261]
FLANGE_HEIGHT = 1.306
JOINT_AXES_W = [(0, 0, 1), (0, 1, 0), (0, 0, 1), (0, -1, 0), (0, 0, 1), (0, 1, 0), (0, 0, 1)]
LIMITS_DEG = [170, 120, 170, 120, 170, 120, 175]
VELOCITY_LIMITS_DEG = [85, 85, 100, 75, 130, 135, 135]
EFFORT_LIMITS = [320, 320, 176, 176, 110, 40, 40]
STROKE = 0.055          # [m] per finger
TCP_OFFSET = 0.115      # [m] from the flange along its +z
FINGER_SIZE = (0.02, 0.03, 0.09)

# The arm scenes: (YAML file, object name, object height [m]).
ARM_SCENES = [
    ('arm_pick_place.yaml', 'cylinder', 0.14),
    ('arm_pick_place_box.yaml', 'pick_box', 0.12),
    ('arm_pick_place_rounded_box.yaml', 'rounded_box', 0.12),
]
TCP_START = (0.55, 0.0, 0.39)   # [m] where the scenes' initial configuration puts the TCP


def plant_of(*files):
    """Return (plant, scene_graph, context, instances, diagram) of model files, finalised."""
    builder = DiagramBuilder()
    plant, scene_graph = AddMultibodyPlantSceneGraph(builder, 0.0)
    parser = Parser(plant)
    parser.package_map().Add('quasistatic_drake', REPO_ROOT)
    instances = [parser.AddModels(file_name=f)[0] for f in files]
    plant.Finalize()
    diagram = builder.Build()
    context = plant.GetMyMutableContextFromRoot(diagram.CreateDefaultContext())
    return plant, scene_graph, context, instances, diagram


@pytest.fixture(scope='module')
def robot():
    """Return (plant, scene_graph, context, diagram) of the robot alone, at q = 0."""
    plant, scene_graph, context, _, diagram = plant_of(ROBOT_URDF)
    return plant, scene_graph, context, diagram


def world_pose(plant, context, frame):
    """Return X_WF of a frame given by name."""
    return plant.CalcRelativeTransform(context, plant.world_frame(),
                                       plant.GetFrameByName(frame))


def scene(name, quasi_dynamic=False, **object_pose):
    """Build the simulator of an arm scene, optionally in the other mode or with a new pose."""
    path = os.path.join(CONFIG_DIR, name)
    if object_pose:
        with open(path) as f:
            data = yaml.safe_load(f)
        data['objects'][0]['initial_pose'] = object_pose
        scenario = Scenario.from_dict(data, base_dir=CONFIG_DIR, source=path)
    else:
        scenario = Scenario.from_yaml(path)
    return QuasistaticSimulator(dataclasses.replace(scenario, quasi_dynamic=quasi_dynamic))


def rotation_angle_deg(R_a, R_b):
    """Return the angle [deg] of the rotation taking R_a to R_b."""
    cos = (np.trace(R_a.inverse().multiply(R_b).matrix()) - 1.0) / 2.0
    return math.degrees(math.acos(min(1.0, max(-1.0, cos))))


# ----- every model file ----------------------------------------------------------

@pytest.mark.parametrize('path', sorted(glob.glob(os.path.join(URDF_DIR, '*.urdf'))),
                         ids=os.path.basename)
def test_every_urdf_parses_with_physical_inertias(path):
    plant, _, _, instances, _ = plant_of(path)
    assert plant.num_bodies() > 1
    for b in plant.GetBodyIndices(instances[0]):
        body = plant.get_body(b)
        M = body.default_spatial_inertia()
        assert M.IsPhysicallyValid(), body.name()
        if body.default_mass() == 0.0:
            continue
        moments = np.linalg.eigvalsh(M.CalcRotationalInertia().CopyToFullMatrix3())
        assert moments[0] > 0.0, '%s: inertia must be positive definite' % body.name()
        assert moments[0] + moments[1] >= moments[2], '%s: triangle inequality' % body.name()


@pytest.mark.parametrize('file, shape, mass, mu, rtol', [
    ('cylinder.urdf', Cylinder(0.03, 0.14), 0.4, 0.6, 1e-4),
    ('pick_box.urdf', Box(0.05, 0.05, 0.12), 0.35, 0.6, 1e-4),
    ('rounded_box.urdf', Convex(MESH), 0.4, 0.6, 0.015),   # the exact solid; mesh within 1 %
    ('arm_table.urdf', Box(1.4, 1.0, 0.05), 35.0, 0.5, 1e-4),
])
def test_object_inertia_matches_its_shape(file, shape, mass, mu, rtol):
    plant, scene_graph, _, instances, _ = plant_of(os.path.join(URDF_DIR, file))
    (b,) = plant.GetBodyIndices(instances[0])
    body = plant.get_body(b)
    (gid,) = plant.GetCollisionGeometriesForBody(body)
    inspector = scene_graph.model_inspector()
    assert type(inspector.GetShape(gid)) is type(shape)
    friction = inspector.GetProximityProperties(gid).GetProperty('material', 'coulomb_friction')
    assert friction.dynamic_friction() == mu
    volume = CalcSpatialInertia(shape, 1.0).get_mass()
    expected = CalcSpatialInertia(shape, mass / volume)
    M = body.default_spatial_inertia()
    assert M.get_mass() == pytest.approx(mass)
    X_BG = inspector.GetPoseInFrame(gid)
    np.testing.assert_allclose(M.get_com(), X_BG.translation(), atol=1e-9)
    np.testing.assert_allclose(
        M.Shift(M.get_com()).CalcRotationalInertia().CopyToFullMatrix3(),
        expected.CalcRotationalInertia().CopyToFullMatrix3(), rtol=rtol, atol=1e-12)


# ----- the arm ------------------------------------------------------------------

def test_arm_forward_kinematics_at_zero(robot):
    plant, _, context, _ = robot
    np.testing.assert_allclose(world_pose(plant, context, 'iiwa_link_0').translation(),
                               [0, 0, 0], atol=1e-12)
    np.testing.assert_allclose(world_pose(plant, context, 'iiwa_link_ee').translation(),
                               [0, 0, FLANGE_HEIGHT], atol=1e-12)
    for name, height, axis in zip(ARM_JOINTS, JOINT_HEIGHTS, JOINT_AXES_W):
        joint = plant.GetJointByName(name)
        X_WJ = joint.frame_on_child().CalcPoseInWorld(context)
        np.testing.assert_allclose(X_WJ.translation(), [0, 0, height], atol=1e-12,
                                   err_msg=name)
        axis_W = X_WJ.rotation().multiply(joint.revolute_axis())
        np.testing.assert_allclose(axis_W, axis, atol=1e-12, err_msg=name)


def test_arm_limits_in_degrees(robot):
    plant, _, _, _ = robot
    # Drake makes actuators only from <transmission>s: read the efforts from the file.
    effort_limits = {joint.get('name'): float(joint.find('limit').get('effort'))
                     for joint in ElementTree.parse(ROBOT_URDF).getroot().iter('joint')
                     if joint.find('limit') is not None}
    for name, limit, velocity, effort in zip(ARM_JOINTS, LIMITS_DEG, VELOCITY_LIMITS_DEG,
                                             EFFORT_LIMITS):
        joint = plant.GetJointByName(name)
        assert joint.type_name() == 'revolute'
        np.testing.assert_allclose(np.degrees(joint.position_lower_limits()), [-limit],
                                   atol=1e-4, err_msg=name)
        np.testing.assert_allclose(np.degrees(joint.position_upper_limits()), [limit],
                                   atol=1e-4, err_msg=name)
        np.testing.assert_allclose(np.degrees(joint.velocity_upper_limits()), [velocity],
                                   atol=1e-4, err_msg=name)
        np.testing.assert_allclose(np.degrees(joint.velocity_lower_limits()), [-velocity],
                                   atol=1e-4, err_msg=name)
        assert effort_limits[name] == effort, name


def test_arm_mass(robot):
    plant, _, _, _ = robot
    masses = [plant.GetBodyByName(name).default_mass() for name in ARM_LINKS]
    assert all(m > 0.0 for m in masses)
    assert 29.0 <= sum(masses) <= 31.0
    assert plant.GetBodyByName('wsg_body').default_mass() == pytest.approx(1.2)
    for side in ('left', 'right'):
        assert 0.05 <= plant.GetBodyByName('wsg_%s_finger' % side).default_mass() <= 0.1


def test_joint_order_matches_the_scenarios_stiffness():
    sim = scene('arm_pick_place.yaml')
    assert sim.robot_joint_names('iiwa') == ARM_JOINTS + FINGER_JOINTS
    assert len(sim.scenario.robots[0].stiffness) == 9


# ----- the gripper -----------------------------------------------------------------

def finger_box(plant, scene_graph, context, side):
    """Return (X_TG, size) of a finger's collision box in the TCP frame."""
    inspector = scene_graph.model_inspector()
    (gid,) = plant.GetCollisionGeometriesForBody(plant.GetBodyByName('wsg_%s_finger' % side))
    shape = inspector.GetShape(gid)
    X_WB = plant.GetBodyByName('wsg_%s_finger' % side).EvalPoseInWorld(context)
    X_WT = world_pose(plant, context, 'gripper_tcp')
    X_TG = X_WT.InvertAndCompose(X_WB.multiply(inspector.GetPoseInFrame(gid)))
    return X_TG, np.asarray(shape.size())


def test_finger_joints_and_stroke(robot):
    plant, _, _, _ = robot
    for name, outward in zip(FINGER_JOINTS, ([-1, 0, 0], [1, 0, 0])):
        joint = plant.GetJointByName(name)
        assert joint.type_name() == 'prismatic'
        assert joint.position_lower_limits()[0] == 0.0
        assert joint.position_upper_limits()[0] == STROKE
        # The axis, in the flange frame, points out of the gripper.
        X_EJ = plant.CalcRelativeTransform(
            plant.CreateDefaultContext(), plant.GetFrameByName('iiwa_link_ee'),
            joint.frame_on_parent())
        np.testing.assert_allclose(X_EJ.rotation().multiply(joint.translation_axis()),
                                   outward, atol=1e-12)


@pytest.mark.parametrize('q_left, q_right', [(0.0, 0.0), (0.02, 0.035), (STROKE, STROKE)])
def test_pads_are_at_plus_minus_q_about_the_tcp(q_left, q_right):
    plant, scene_graph, context, _, _diagram = plant_of(ROBOT_URDF)
    # The robot alone has exactly its 9 joint positions, in joint order.
    plant.SetPositions(context, [0.3, -0.5, 0.2, -1.0, 0.4, 0.7, -0.3, q_left, q_right])
    # The TCP is 0.115 m along the flange's +z, with the flange's orientation.
    X_ET = plant.CalcRelativeTransform(context, plant.GetFrameByName('iiwa_link_ee'),
                                       plant.GetFrameByName('gripper_tcp'))
    assert X_ET.IsNearlyEqualTo(RigidTransform([0, 0, TCP_OFFSET]), 1e-12)
    for side, sign, q in (('left', -1, q_left), ('right', 1, q_right)):
        X_TG, size = finger_box(plant, scene_graph, context, side)
        np.testing.assert_allclose(size, FINGER_SIZE, atol=1e-12)
        np.testing.assert_allclose(X_TG.rotation().matrix(), np.eye(3), atol=1e-12)
        centre = X_TG.translation()
        # The inner (pad) face is at x = -q (left) or +q (right); the pad's centre is at
        # the TCP's height, and the finger lies entirely on its own side.
        assert centre[0] - sign * size[0] / 2 == pytest.approx(sign * q, abs=1e-12)
        np.testing.assert_allclose(centre[1:], [0, 0], atol=1e-12)


def test_fingers_point_along_the_flange_z(robot):
    plant, scene_graph, context, _ = robot
    X_ET = plant.CalcRelativeTransform(context, plant.GetFrameByName('iiwa_link_ee'),
                                       plant.GetFrameByName('gripper_tcp'))
    body = plant.GetBodyByName('wsg_body')
    inspector = scene_graph.model_inspector()
    (gid,) = plant.GetCollisionGeometriesForBody(body)
    body_size = np.asarray(inspector.GetShape(gid).size())
    np.testing.assert_allclose(body_size, [0.146, 0.05, 0.07], atol=1e-12)
    for side in ('left', 'right'):
        X_TG, size = finger_box(plant, scene_graph, context, side)
        z_in_flange = X_ET.translation()[2] + X_TG.translation()[2] + np.array([-1, 1]) * \
            size[2] / 2
        # The fingers hang below the gripper body, along the flange's +z.
        np.testing.assert_allclose(z_in_flange, [0.07, 0.16], atol=1e-12)


def test_arm_pointing_down_points_the_fingers_at_the_table():
    sim = scene('arm_pick_place.yaml')
    plant, context = sim.model.plant, sim.model.plant_context
    sim.model.set_positions(sim.default_positions())
    z_flange = world_pose(plant, context, 'iiwa_link_ee').rotation().col(2)
    assert np.dot(z_flange, [0, 0, -1]) > math.cos(math.radians(0.01))


# ----- collision filtering --------------------------------------------------------------

def test_no_self_collision_but_collision_with_the_scene():
    sim = scene('arm_pick_place.yaml')
    inspector = sim.model.scene_graph.model_inspector()
    robot, others = [], []
    for gid, info in sim.model.geometries.items():
        (robot if info.body_name.startswith('iiwa::') else others).append(gid)
    assert len(robot) == 11
    for i, a in enumerate(robot):
        for b in robot[i + 1:]:
            assert inspector.CollisionFiltered(a, b)
        for b in others:
            # Drake filters pairs of bodies welded to the world (the base and the table).
            static = not (sim.model.geometries[a].moves or sim.model.geometries[b].moves)
            assert inspector.CollisionFiltered(a, b) == static


def test_the_filter_group_is_what_filters_non_adjacent_links():
    with open(ROBOT_URDF) as f:
        text = f.read()
    without = re.sub(r'<drake:collision_filter_group.*?</drake:collision_filter_group>', '',
                     text, flags=re.S)
    assert without != text
    for urdf, filtered in ((text, True), (without, False)):
        builder = DiagramBuilder()
        plant, scene_graph = AddMultibodyPlantSceneGraph(builder, 0.0)
        Parser(plant).AddModelsFromString(urdf, 'urdf')
        plant.Finalize()
        inspector = scene_graph.model_inspector()

        def geometry(name):
            return plant.GetCollisionGeometriesForBody(plant.GetBodyByName(name))[0]

        for a, b in (('iiwa_link_1', 'iiwa_link_5'), ('iiwa_link_2', 'wsg_left_finger'),
                     ('wsg_left_finger', 'wsg_right_finger')):
            assert inspector.CollisionFiltered(geometry(a), geometry(b)) == filtered, (a, b)


# ----- the scenes -----------------------------------------------------------------------

@pytest.mark.parametrize('name, obj, height', ARM_SCENES)
def test_initial_configuration(name, obj, height):
    sim = scene(name)
    q = sim.default_positions()
    plant, context = sim.model.plant, sim.model.plant_context
    sim.model.set_positions(q)
    X_WT = world_pose(plant, context, 'gripper_tcp')
    np.testing.assert_allclose(X_WT.translation(), TCP_START, atol=1e-5)
    np.testing.assert_allclose(X_WT.rotation().col(2), [0, 0, -1], atol=1e-5)
    X_WO = sim.object_pose(q, obj)
    np.testing.assert_allclose(X_WO.translation(), [0.55, 0, height / 2], atol=1e-12)
    assert X_WT.translation()[2] - height >= 0.25 - 1e-5
    lower, upper = plant.GetPositionLowerLimits(), plant.GetPositionUpperLimits()
    robot = sim.model.robot('iiwa')
    assert np.all(lower[robot.q_idx] <= q[robot.q_idx])
    assert np.all(q[robot.q_idx] <= upper[robot.q_idx])
    # The object stands on the table: touching, not penetrating.
    assert sim.min_signed_distance(q) == pytest.approx(0.0, abs=1e-9)


def check_rests(sim, obj):
    """Step 10 times without a command; the object and the arm must not move."""
    q0 = sim.default_positions()
    result = run(sim, q0, {}, 10)       # also checks success and penetration
    q = result.q_next
    X0, X = sim.object_pose(q0, obj), sim.object_pose(q, obj)
    assert np.max(np.abs(X.translation() - X0.translation())) < 1e-6
    assert rotation_angle_deg(X0.rotation(), X.rotation()) < 0.01
    assert sim.min_signed_distance(q) >= PENETRATION_LIMIT
    np.testing.assert_allclose(sim.robot_positions(q, 'iiwa'), sim.robot_positions(q0, 'iiwa'),
                               atol=1e-6)
    assert result.contact_set.n_c >= 3, 'an object resting on a face needs a manifold'


@pytest.mark.parametrize('name, obj, height', ARM_SCENES)
def test_object_and_arm_rest(name, obj, height, quasi_dynamic):
    check_rests(scene(name, quasi_dynamic), obj)


@pytest.mark.parametrize('yaw', [0.0, 0.4])
def test_rounded_box_lying_on_its_side_rests(yaw, quasi_dynamic):
    sim = scene('arm_pick_place_rounded_box.yaml', quasi_dynamic,
                xyz=[0.5, 0.15, 0.03], rpy=[math.pi / 2, 0.0, yaw])
    assert sim.min_signed_distance(sim.default_positions()) == pytest.approx(0.0, abs=1e-9)
    check_rests(sim, 'rounded_box')


def test_convex_mesh_signed_distance_to_table_and_fingers():
    sim = scene('arm_pick_place_rounded_box.yaml')
    model = sim.model
    q = sim.default_positions()
    ids = {info.body_name: gid for gid, info in model.geometries.items()}
    mesh = ids['rounded_box::rounded_box_link']
    # 5 mm above the table.
    obj = model.object('rounded_box')
    q[obj.q_idx[4:7]] += [0, 0, 0.005]
    model.set_positions(q)
    query = model.query_object()
    pair = query.ComputeSignedDistancePairClosestPoints(mesh, ids['table::arm_table_top'])
    assert pair.distance == pytest.approx(0.005, abs=1e-6)
    # Centred between the open fingers (pads at +-0.05 m): 0.02 m from each pad.
    X_WT = world_pose(model.plant, model.plant_context, 'gripper_tcp')
    q[obj.q_idx[:4]] = X_WT.rotation().ToQuaternion().wxyz()
    q[obj.q_idx[4:7]] = X_WT.translation()
    model.set_positions(q)
    query = model.query_object()
    for side in ('left', 'right'):
        pair = query.ComputeSignedDistancePairClosestPoints(
            mesh, ids['iiwa::wsg_%s_finger' % side])
        assert pair.distance == pytest.approx(0.05 - 0.03, abs=1e-6), side


# ----- the rounded box's mesh ------------------------------------------------------------

def test_rounded_box_mesh_is_reproduced_byte_for_byte(tmp_path):
    out = tmp_path / 'rounded_box.obj'
    subprocess.run([sys.executable, os.path.join(REPO_ROOT, 'tools', 'make_rounded_box.py'),
                    '--output', str(out)], check=True, capture_output=True)
    with open(MESH, 'rb') as f:
        assert out.read_bytes() == f.read()


def test_rounded_box_mesh_is_convex_and_on_the_rounded_surface():
    with open(MESH) as f:
        vertices = np.array([[float(x) for x in line.split()[1:]]
                             for line in f if line.startswith('v ')])
    hull = Convex(MESH).GetConvexHull()
    assert hull.num_vertices() == len(vertices), 'every vertex is a hull vertex'
    np.testing.assert_allclose(np.max(vertices, axis=0), [0.03, 0.03, 0.06], atol=1e-9)
    np.testing.assert_allclose(np.min(vertices, axis=0), [-0.03, -0.03, -0.06], atol=1e-9)
    # Every vertex is 0.01 m from the inner 0.04 x 0.04 x 0.10 box.
    outside = np.maximum(np.abs(vertices) - [0.02, 0.02, 0.05], 0.0)
    np.testing.assert_allclose(np.linalg.norm(outside, axis=1), 0.01, atol=1e-8)
