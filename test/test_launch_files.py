"""
The launch files and config/sim.yaml against the node's declared parameters (no `launch`).

`launch` and `launch_ros` are not installable here, so the launch files are
read with ast: every parameter they pass to quasistatic_sim must be one the
node declares, every LaunchConfiguration must be declared, and the params
file they load must be valid for the node.  The robot_description helper the
launch files use is tested on the arm's URDF, which has Drake capsules.
"""

import ast
import os
import xml.etree.ElementTree as ET

import numpy as np
from pydrake.multibody.parsing import Parser
from pydrake.multibody.plant import MultibodyPlant
import pytest
import yaml

from conftest import REPO_ROOT
from quasistatic_drake.ros.description import (DescriptionError, robot_descriptions,
                                               robot_state_publisher_parameters, root_link,
                                               ros_urdf)
from quasistatic_drake.ros.params import NODE_NAME, node_params, PARAMETERS

LAUNCH_DIR = os.path.join(REPO_ROOT, 'launch')
SIM_YAML = os.path.join(REPO_ROOT, 'config', 'sim.yaml')
ARM_URDF = os.path.join(REPO_ROOT, 'urdf', 'iiwa14_wsg50.urdf')
ARM_SCENARIO = os.path.join(REPO_ROOT, 'config', 'arm_pick_place.yaml')
# robot_state_publisher's parameters (ROS 2 Jazzy/Kilted), plus rclcpp's use_sim_time
RSP_PARAMETERS = {'robot_description', 'publish_frequency', 'ignore_timestamp', 'frame_prefix',
                  'use_sim_time'}
UNSUPPORTED_BY_URDFDOM = ('capsule', 'ellipsoid')


def launch_tree(name):
    """Return the parsed AST of launch/<name>."""
    with open(os.path.join(LAUNCH_DIR, name)) as f:
        return ast.parse(f.read(), filename=name)


def calls(tree, name):
    """Return the calls of ``name`` (a plain or attribute function name) in the tree."""
    def called(node):
        f = node.func
        return (isinstance(f, ast.Name) and f.id == name) or (
            isinstance(f, ast.Attribute) and f.attr == name)
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and called(n)]


def keyword(call, name):
    """Return a keyword argument's AST node, or None."""
    return next((k.value for k in call.keywords if k.arg == name), None)


def string_args(tree, function):
    """Return the first string argument of every call of ``function``."""
    return {c.args[0].value for c in calls(tree, function)
            if c.args and isinstance(c.args[0], ast.Constant)}


def sim_node_call(tree):
    """Return the Node(...) call that starts quasistatic_sim."""
    nodes = [c for c in calls(tree, 'Node')
             if isinstance(keyword(c, 'executable'), ast.Constant)
             and keyword(c, 'executable').value == 'quasistatic-drake-node']
    assert len(nodes) == 1, 'exactly one quasistatic-drake-node'
    return nodes[0]


def test_sim_launch_passes_only_declared_parameters():
    tree = launch_tree('sim.launch.py')
    node = sim_node_call(tree)
    assert keyword(node, 'name').value == NODE_NAME
    parameters = keyword(node, 'parameters')
    dicts = [e for e in parameters.elts if isinstance(e, ast.Dict)]
    passed = {k.value for d in dicts for k in d.keys}
    assert passed and passed <= set(PARAMETERS), passed - set(PARAMETERS)
    # the params file comes first, so the launch arguments override it
    assert isinstance(parameters.elts[0], ast.Name) and parameters.elts[0].id == 'SIM_PARAMS'
    assert "'config' / 'sim.yaml'" in ast.unparse(tree)


@pytest.mark.parametrize('name', ['sim.launch.py', 'view_robot.launch.py'])
def test_launch_configurations_are_declared(name):
    tree = launch_tree(name)
    declared = string_args(tree, 'DeclareLaunchArgument')
    used = string_args(tree, 'LaunchConfiguration')
    assert used <= declared, used - declared
    assert calls(tree, 'generate_launch_description') == [] and any(
        isinstance(n, ast.FunctionDef) and n.name == 'generate_launch_description'
        for n in tree.body)


def test_sim_launch_arguments_and_other_nodes():
    tree = launch_tree('sim.launch.py')
    assert {'scenario', 'meshcat', 'rviz', 'publish_robot_tf'} <= string_args(
        tree, 'DeclareLaunchArgument')
    others = [c for c in calls(tree, 'Node') if c is not sim_node_call(tree)]
    packages = {keyword(c, 'package').value: c for c in others}
    assert set(packages) == {'robot_state_publisher', 'rviz2'}
    # every other node runs on the simulator's /clock (robot_state_publisher's
    # parameters come from robot_state_publisher_parameters: use_sim_time, tested below)
    assert "'use_sim_time': True" in ast.unparse(keyword(packages['rviz2'], 'parameters'))
    rsp = next(f for f in tree.body if isinstance(f, ast.FunctionDef)
               and packages['robot_state_publisher'] in ast.walk(f))
    assert calls(rsp, 'robot_state_publisher_parameters')
    assert "'publish_robot_tf'" in ast.unparse(rsp)   # only when the node leaves robot TF


def test_sim_yaml_matches_the_node():
    with open(SIM_YAML) as f:
        data = yaml.safe_load(f)
    assert list(data) == [NODE_NAME] and list(data[NODE_NAME]) == ['ros__parameters']
    values = data[NODE_NAME]['ros__parameters']
    assert set(values) == set(PARAMETERS)
    params = node_params(values)                    # raises on a bad value
    assert params.scenario.startswith('package://quasistatic_drake/')


def test_robot_state_publisher_gets_only_its_parameters():
    by_robot = robot_state_publisher_parameters(ARM_SCENARIO, SIM_YAML)
    assert list(by_robot) == ['iiwa']
    assert set(by_robot['iiwa']) <= RSP_PARAMETERS
    assert by_robot['iiwa']['use_sim_time'] is True


def test_ros_urdf_replaces_drake_shapes_and_keeps_the_kinematics(tmp_path):
    with open(ARM_URDF) as f:
        original = f.read()
    assert 'drake:capsule' in original
    text = ros_urdf(original)
    root = ET.fromstring(text)
    assert not any(e.tag.startswith('{') for e in root.iter()), 'no namespaced element'
    for element in root.iter('geometry'):
        shapes = [child.tag for child in element]
        assert len(shapes) == 1 and shapes[0] in ('box', 'cylinder', 'sphere', 'mesh')
    # link_1's capsule (r 0.065, L 0.1725 at z 0.11625): a cylinder and two end spheres
    link = next(x for x in root.iter('link') if x.get('name') == 'iiwa_link_1')
    visuals = link.findall('visual')
    assert [v.find('geometry')[0].tag for v in visuals] == ['cylinder', 'sphere', 'sphere']
    zs = sorted(float(v.find('origin').get('xyz').split()[2]) for v in visuals)
    assert zs == pytest.approx([0.11625 - 0.08625, 0.11625, 0.11625 + 0.08625])
    # Drake reads it: same links, joints and limits
    path = tmp_path / 'ros.urdf'
    path.write_text(text)
    names = []
    for file in (ARM_URDF, str(path)):
        plant = MultibodyPlant(0.0)
        Parser(plant).AddModels(file)
        plant.Finalize()
        names.append(([plant.get_body(b).name() for b in plant.GetBodyIndices(
            plant.GetModelInstanceByName('iiwa14_wsg50'))],
            [plant.get_joint(j).name() for j in plant.GetJointIndices()],
            plant.GetPositionUpperLimits().tolist()))
    assert names[0] == names[1]
    assert root_link(text) == 'world'


def test_ros_urdf_capsule_with_a_rotated_origin():
    urdf = """<robot name="r" xmlns:drake="http://drake.mit.edu"><link name="a"><collision>
      <origin xyz="1 0 0" rpy="0 1.5707963267948966 0"/>
      <geometry><drake:capsule radius="0.1" length="0.4"/></geometry>
      <drake:proximity_properties><drake:mu_dynamic value="1"/></drake:proximity_properties>
      </collision></link></robot>"""
    root = ET.fromstring(ros_urdf(urdf))
    ends = [np.array(c.find('origin').get('xyz').split(), float)
            for c in root.iter('collision') if c.find('geometry')[0].tag == 'sphere']
    # the capsule's axis is the link's x after the pitch of 90 degrees
    assert sorted(e[0] for e in ends) == pytest.approx([0.8, 1.2])
    assert all(abs(e[2]) < 1e-12 for e in ends)
    assert 'proximity' not in ros_urdf(urdf)


def test_descriptions_refuse_what_robot_state_publisher_cannot_use(tmp_path):
    with pytest.raises(DescriptionError, match='not <robot>'):
        ros_urdf('<sdf version="1.9"><model name="m"/></sdf>')
    with pytest.raises(DescriptionError, match="numeric 'radius'"):
        ros_urdf('<robot name="r"><link name="a"><visual><geometry>'
                 '<drake:capsule length="1"/></geometry></visual></link></robot>')
    with pytest.raises(DescriptionError, match='not well-formed'):
        ros_urdf('<robot name="r"><link>')
    assert robot_descriptions(ARM_SCENARIO)['iiwa'].count('<cylinder') >= 7
