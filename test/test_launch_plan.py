"""
What the launch files start, for given launch arguments (quasistatic_drake.ros.launch_plan).

launch/sim.launch.py and launch/view_robot.launch.py turn each NodeLaunch of
sim_nodes / view_robot_nodes into one launch_ros Node, so these tests check
the nodes, their parameters and remappings without `launch` (not on PyPI):
the simulator node's parameters, merged as ROS merges them (later entries
win), pass the node's own validation; robot_state_publisher gets only
parameters it declares; bad argument values raise a clear error.
"""

import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
import yaml

from conftest import REPO_ROOT
from quasistatic_drake.ros.description import root_link
from quasistatic_drake.ros.launch_plan import (LaunchArgumentError, node_parameter_values,
                                               NodeLaunch, SIM_ARGUMENTS, sim_nodes,
                                               VIEW_ROBOT_ARGUMENTS, view_robot_nodes)
from quasistatic_drake.ros.params import (DEFAULT_SCENARIO, NODE_NAME, node_params,
                                          ParameterError, PARAMETERS)

SIM_YAML = os.path.join(REPO_ROOT, 'config', 'sim.yaml')
ARM_URDF = os.path.join(REPO_ROOT, 'urdf', 'iiwa14_wsg50.urdf')
ARM_SCENARIO = os.path.join(REPO_ROOT, 'config', 'arm_pick_place.yaml')
# robot_state_publisher's parameters (ROS 2 Jazzy/Kilted), plus rclcpp's use_sim_time
RSP_PARAMETERS = {'robot_description', 'publish_frequency', 'ignore_timestamp', 'frame_prefix',
                  'use_sim_time'}
# The keyword arguments of launch_ros.actions.Node (Jazzy: launch_ros/actions/node.py)
# and of the launch.actions.ExecuteProcess it extends that the plan uses.
NODE_KEYWORDS = {'executable', 'package', 'name', 'namespace', 'exec_name', 'parameters',
                 'remappings', 'ros_arguments', 'arguments', 'output'}


def ros_parameters(node):
    """Return the parameters ROS gives ``node``: its entries in order, later ones win."""
    values = {}
    for entry in node.parameters:
        if isinstance(entry, str):
            with open(entry) as f:
                entry = yaml.safe_load(f)[node.name]['ros__parameters']
        values.update(entry)
    return values


def sim_yaml_values():
    """Return the quasistatic_sim parameters of config/sim.yaml."""
    with open(SIM_YAML) as f:
        return yaml.safe_load(f)[NODE_NAME]['ros__parameters']


def scenario_robots(path):
    """Return the robot names of a scenario YAML file, in order."""
    with open(path) as f:
        return [robot['name'] for robot in yaml.safe_load(f)['robots']]


def joint_names(urdf_text):
    """Return the joint names of a URDF text (with or without Drake's namespace)."""
    urdf_text = urdf_text.replace('<robot ', '<robot xmlns:drake="http://drake.mit.edu" ', 1) \
        if 'xmlns:drake' not in urdf_text else urdf_text
    return [j.get('name') for j in ET.fromstring(urdf_text).iter('joint')]


def packages(nodes):
    """Return the (package, executable, namespace) of every node, in order."""
    return [(n.package, n.executable, n.namespace) for n in nodes]


def copy_sim_yaml(tmp_path, **changes):
    """Return the path of a copy of config/sim.yaml with some node parameters changed."""
    with open(SIM_YAML) as f:
        data = yaml.safe_load(f)
    data[NODE_NAME]['ros__parameters'].update(changes)
    path = tmp_path / 'sim.yaml'
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_the_plan_imports_neither_launch_nor_ros_nor_drake():
    """Import the plan in a fresh interpreter: no launch, launch_ros, rclpy, pydrake, numba."""
    code = ('import sys\nimport quasistatic_drake.ros.launch_plan\n'
            'print(sorted(m for m in sys.modules if m.split(".")[0] in '
            '("launch", "launch_ros", "rclpy", "pydrake", "numba")))')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         check=True, cwd=REPO_ROOT).stdout
    assert out.strip() == '[]'


def test_sim_defaults_start_only_the_simulator_with_sim_yaml():
    """Check the default sim launch: one quasistatic_sim, sim.yaml then the argument overrides."""
    nodes = sim_nodes({})
    assert packages(nodes) == [('quasistatic_drake', 'quasistatic-drake-node', None)]
    sim = nodes[0]
    assert sim.name == NODE_NAME and sim.output == 'screen'
    assert sim.remappings == () and sim.arguments == ()
    assert os.path.samefile(sim.parameters[0], SIM_YAML)
    assert sim.parameters[1] == {'scenario': DEFAULT_SCENARIO, 'meshcat': True,
                                 'publish_robot_tf': True}
    # the launch file performs every declared argument: the defaults give the same nodes
    assert sim_nodes({a.name: a.default for a in SIM_ARGUMENTS}) == nodes


@pytest.mark.parametrize('arguments, expected', [
    ({}, {'meshcat': True, 'publish_robot_tf': True, 'scenario': DEFAULT_SCENARIO}),
    ({'meshcat': 'false'}, {'meshcat': False}),
    ({'meshcat': 'FALSE', 'rviz': 'True'}, {'meshcat': False}),
    ({'publish_robot_tf': 'false', 'scenario': ARM_SCENARIO},
     {'publish_robot_tf': False, 'scenario': ARM_SCENARIO}),
    ({'scenario': 'package://quasistatic_drake/config/finger_push.yaml'},
     {'scenario': 'package://quasistatic_drake/config/finger_push.yaml'}),
])
def test_the_simulator_node_accepts_every_parameter_the_plan_passes(arguments, expected):
    """Merge sim.yaml and the overrides as ROS does; the node's validation accepts them."""
    sim = sim_nodes(arguments)[0]
    values = ros_parameters(sim)
    assert set(values) <= set(PARAMETERS), set(values) - set(PARAMETERS)
    params = node_params(values)                       # ParameterError if the node refuses
    for name, value in expected.items():
        assert getattr(params, name) == value, name
    # the parameters no argument overrides keep sim.yaml's values
    for name, value in sim_yaml_values().items():
        if name not in ('scenario', 'meshcat', 'publish_robot_tf'):
            assert getattr(params, name) == value, name


def test_rviz_true_adds_rviz2_on_sim_time():
    """Start rviz2 (fixed frame world, sim time) last, and only with rviz:=true."""
    assert 'rviz2' not in [n.package for n in sim_nodes({'rviz': 'false'})]
    nodes = sim_nodes({'rviz': 'true'})
    assert packages(nodes) == [('quasistatic_drake', 'quasistatic-drake-node', None),
                               ('rviz2', 'rviz2', None)]
    rviz = nodes[-1]
    assert rviz.arguments == ('-f', 'world')
    assert rviz.parameters == ({'use_sim_time': True},)
    assert rviz.output == 'screen'


def test_publish_robot_tf_false_adds_a_robot_state_publisher_for_the_arm():
    """Start one robot_state_publisher in the arm's namespace, on /joint_states and sim time."""
    nodes = sim_nodes({'scenario': ARM_SCENARIO, 'publish_robot_tf': 'false', 'rviz': 'true'})
    assert packages(nodes) == [
        ('quasistatic_drake', 'quasistatic-drake-node', None),
        ('robot_state_publisher', 'robot_state_publisher', 'iiwa'),
        ('rviz2', 'rviz2', None)]
    assert ros_parameters(nodes[0])['publish_robot_tf'] is False
    rsp = nodes[1]
    assert rsp.remappings == (('joint_states', '/joint_states'),)
    assert len(rsp.parameters) == 1
    parameters = rsp.parameters[0]
    assert set(parameters) <= RSP_PARAMETERS, set(parameters) - RSP_PARAMETERS
    assert parameters['use_sim_time'] is True
    assert parameters['frame_prefix'] == sim_yaml_values()['frame_prefix']
    # a URDF urdfdom reads (no Drake capsule) with the arm's joints, rooted at world
    description = parameters['robot_description']
    assert 'capsule' not in description and 'drake' not in description
    with open(ARM_URDF) as f:
        assert joint_names(description) == joint_names(f.read())
    assert root_link(description) == 'world'


@pytest.mark.parametrize('scenario', ['finger_push.yaml', 'two_pads_lift.yaml',
                                      'paper_2d.yaml'])
def test_a_package_uri_scenario_gets_one_robot_state_publisher_per_robot(scenario):
    """Give the scenario as a package:// URI: the node gets it as is, each robot an RSP."""
    uri = 'package://quasistatic_drake/config/' + scenario
    nodes = sim_nodes({'scenario': uri, 'publish_robot_tf': 'false'})
    assert ros_parameters(nodes[0])['scenario'] == uri
    robots = scenario_robots(os.path.join(REPO_ROOT, 'config', scenario))
    assert packages(nodes[1:]) == [('robot_state_publisher', 'robot_state_publisher', robot)
                                   for robot in robots]
    for rsp in nodes[1:]:
        assert set(rsp.parameters[0]) <= RSP_PARAMETERS
        assert rsp.parameters[0]['robot_description'].startswith('<robot')


def test_the_params_file_sets_the_frame_prefix_of_every_robot_state_publisher(tmp_path):
    """Give robot_state_publisher the frame_prefix of the params file the simulator node loads."""
    params_file = copy_sim_yaml(tmp_path, frame_prefix='sim/')
    nodes = sim_nodes({'scenario': ARM_SCENARIO, 'publish_robot_tf': 'false'}, params_file)
    assert nodes[0].parameters[0] == params_file
    assert node_params(ros_parameters(nodes[0])).frame_prefix == 'sim/'
    assert nodes[1].parameters[0]['frame_prefix'] == 'sim/'
    viewer = view_robot_nodes({'scenario': ARM_SCENARIO}, params_file)
    assert viewer[0].parameters[0]['frame_prefix'] == 'sim/'


def test_view_robot_starts_a_publisher_and_sliders_per_robot_then_rviz():
    """Start, per robot, robot_state_publisher on wall time and the joint sliders; then rviz2."""
    nodes = view_robot_nodes({})
    assert packages(nodes) == [
        ('robot_state_publisher', 'robot_state_publisher', 'iiwa'),
        ('joint_state_publisher_gui', 'joint_state_publisher_gui', 'iiwa'),
        ('rviz2', 'rviz2', None)]
    rsp, sliders, rviz = nodes
    assert set(rsp.parameters[0]) <= RSP_PARAMETERS
    assert rsp.parameters[0]['use_sim_time'] is False
    assert root_link(rsp.parameters[0]['robot_description']) == 'world'
    # both in the robot's namespace: /iiwa/joint_states, no remapping
    assert rsp.remappings == () and sliders.remappings == ()
    assert sliders.parameters == () and sliders.output == 'log'
    assert rviz.arguments == ('-f', 'world') and rviz.parameters == ()
    assert view_robot_nodes({a.name: a.default for a in VIEW_ROBOT_ARGUMENTS}) == nodes


def test_view_robot_without_gui_uses_joint_state_publisher():
    """Use joint_state_publisher (no window) with gui:=false, for every robot."""
    uri = 'package://quasistatic_drake/config/finger_push.yaml'
    nodes = view_robot_nodes({'scenario': uri, 'gui': 'false'})
    assert packages(nodes) == [('robot_state_publisher', 'robot_state_publisher', 'finger'),
                               ('joint_state_publisher', 'joint_state_publisher', 'finger'),
                               ('rviz2', 'rviz2', None)]


@pytest.mark.parametrize('plan, arguments, message', [
    (sim_nodes, {'rviz': 'yes'},
     r"sim.launch.py: launch argument 'rviz' must be true or false, got 'yes'\. "
     r"Fix: ros2 launch quasistatic_drake sim.launch.py rviz:=true \(or false\)"),
    (sim_nodes, {'meshcat': '1'}, r"'meshcat' must be true or false, got '1'"),
    (sim_nodes, {'publish_robot_tf': ''}, r"'publish_robot_tf' must be true or false, got ''"),
    (sim_nodes, {'scenario': ' '}, r"'scenario' must be a non-empty string, got ' '\. Fix: "
     r"ros2 launch quasistatic_drake sim.launch.py scenario:=package://"),
    (sim_nodes, {'scenery': 'x.yaml'},
     r"unknown launch argument\(s\) \['scenery'\]\. Its arguments are "
     r"\['scenario', 'meshcat', 'rviz', 'publish_robot_tf'\]"),
    (view_robot_nodes, {'gui': 'on'},
     r"view_robot.launch.py: launch argument 'gui' must be true or false, got 'on'"),
    (view_robot_nodes, {'rviz': 'true'},
     r"unknown launch argument\(s\) \['rviz'\]\. Its arguments are \['scenario', 'gui'\]"),
])
def test_bad_launch_arguments_raise_a_clear_error(plan, arguments, message):
    """Refuse a boolean that is not true/false, an empty scenario and an unknown argument."""
    with pytest.raises(LaunchArgumentError, match=message) as error:
        plan(arguments)
    assert isinstance(error.value, ValueError)


@pytest.mark.parametrize('changes, message', [
    ({'publish_rate': 0.0}, r"parameter 'publish_rate' of node 'quasistatic_sim' must be a "
                            r"finite number > 0"),
    ({'meshcat_port': 70000}, r"'meshcat_port'.*0\.\.65535"),
    ({'rate': 10.0}, r"unknown parameter\(s\) \['rate'\]"),
])
def test_a_params_file_the_node_would_refuse_fails_before_any_node_starts(tmp_path, changes,
                                                                          message):
    """Check the merged parameters with the node's validation before returning any node."""
    with pytest.raises(ParameterError, match=message):
        sim_nodes({}, copy_sim_yaml(tmp_path, **changes))


def test_node_parameter_values_merges_like_ros(tmp_path):
    """Merge in order (later wins), reading the node's and the /** sections of a params file."""
    path = tmp_path / 'params.yaml'
    path.write_text(yaml.safe_dump({
        '/**': {'ros__parameters': {'publish_rate': 10.0, 'clock_rate': 20.0}},
        NODE_NAME: {'ros__parameters': {'publish_rate': 30.0}},
        'other_node': {'ros__parameters': {'real_time_rate': 5.0}}}))
    values = node_parameter_values([{'clock_rate': 1.0}, str(path), {'meshcat': False}])
    assert values == {'publish_rate': 30.0, 'clock_rate': 20.0, 'meshcat': False}
    assert node_parameter_values([str(path), {'publish_rate': 2.0}])['publish_rate'] == 2.0


def test_launch_kwargs_are_plain_node_arguments_and_the_plan_does_not_change():
    """Return Node's keywords with lists and dicts; editing them leaves the NodeLaunch as is."""
    nodes = (sim_nodes({'scenario': ARM_SCENARIO, 'publish_robot_tf': 'false', 'rviz': 'true'})
             + view_robot_nodes({}))
    for node in nodes:
        kwargs = node.launch_kwargs()
        assert set(kwargs) <= NODE_KEYWORDS, set(kwargs) - NODE_KEYWORDS
        # launch_ros.actions.Node requires a list of parameters (ensure_argument_type)
        assert type(kwargs['parameters']) is list and type(kwargs['arguments']) is list
        assert all(type(p) in (str, dict) for p in kwargs['parameters'])
        assert NodeLaunch(**kwargs) == node
    sim = nodes[0]
    sim.launch_kwargs()['parameters'][1]['meshcat'] = False
    assert sim.parameters[1]['meshcat'] is True
    with pytest.raises(TypeError):
        sim.parameters[1]['meshcat'] = False


def test_the_plan_declares_the_arguments_the_docstrings_document():
    """List, per launch file, the arguments of its usage line, with their documented defaults."""
    assert [(a.name, a.default, a.boolean) for a in SIM_ARGUMENTS] == [
        ('scenario', DEFAULT_SCENARIO, False), ('meshcat', 'true', True),
        ('rviz', 'false', True), ('publish_robot_tf', 'true', True)]
    assert [(a.name, a.default, a.boolean) for a in VIEW_ROBOT_ARGUMENTS] == [
        ('scenario', DEFAULT_SCENARIO, False), ('gui', 'true', True)]
    assert all(a.description for a in SIM_ARGUMENTS + VIEW_ROBOT_ARGUMENTS)
