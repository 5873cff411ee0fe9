"""
The launch files' building blocks: robot_description helpers, config/sim.yaml, structure.

What the launch files start is tested as behaviour in test/test_launch_plan.py
(quasistatic_drake.ros.launch_plan computes it).  Here: the robot_description
helpers the plan gives robot_state_publisher (tested on the arm's URDF, which
has Drake capsules), config/sim.yaml against the node's parameters, and a
last structural check that each launch file is only the plan's wrapper.
"""

import ast
import os
import re
import xml.etree.ElementTree as ET

import numpy as np
from pydrake.multibody.parsing import Parser
from pydrake.multibody.plant import MultibodyPlant
import pytest
import yaml

from conftest import REPO_ROOT
from quasistatic_drake.ros.description import (DescriptionError, robot_descriptions, root_link,
                                               ros_urdf)
from quasistatic_drake.ros.launch_plan import SIM_ARGUMENTS, VIEW_ROBOT_ARGUMENTS
from quasistatic_drake.ros.params import NODE_NAME, node_params, PARAMETERS

LAUNCH_DIR = os.path.join(REPO_ROOT, 'launch')
SIM_YAML = os.path.join(REPO_ROOT, 'config', 'sim.yaml')
ARM_URDF = os.path.join(REPO_ROOT, 'urdf', 'iiwa14_wsg50.urdf')
ARM_SCENARIO = os.path.join(REPO_ROOT, 'config', 'arm_pick_place.yaml')
PLAN_MODULE = 'quasistatic_drake.ros.launch_plan'
# launch file -> (the plan's argument list, its name, the plan function's name)
LAUNCH_FILES = {'sim.launch.py': (SIM_ARGUMENTS, 'SIM_ARGUMENTS', 'sim_nodes'),
                'view_robot.launch.py': (VIEW_ROBOT_ARGUMENTS, 'VIEW_ROBOT_ARGUMENTS',
                                         'view_robot_nodes')}


def calls(tree, name):
    """Return the calls of ``name`` (a plain function name) in the tree."""
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name) and n.func.id == name]


def enclosing_comprehension(tree, node):
    """Return the innermost comprehension whose element contains ``node`` (None if none)."""
    found = None
    for comp in ast.walk(tree):
        if isinstance(comp, (ast.ListComp, ast.DictComp)):
            parts = [comp.elt] if isinstance(comp, ast.ListComp) else [comp.key, comp.value]
            if any(node in ast.walk(part) for part in parts):
                found = comp          # ast.walk is breadth-first: later ones are inner
    return found


def only_loop(comp):
    """Return the (target, iterable) of a comprehension that has one plain for clause."""
    assert comp is not None and len(comp.generators) == 1, 'one for clause'
    loop = comp.generators[0]
    assert isinstance(loop.target, ast.Name) and not loop.ifs, 'no filter'
    return loop.target.id, loop.iter


def test_sim_yaml_matches_the_node():
    """Check that config/sim.yaml sets every parameter the node declares, with valid values."""
    with open(SIM_YAML) as f:
        data = yaml.safe_load(f)
    assert list(data) == [NODE_NAME] and list(data[NODE_NAME]) == ['ros__parameters']
    values = data[NODE_NAME]['ros__parameters']
    assert set(values) == set(PARAMETERS)
    params = node_params(values)                    # raises on a bad value
    assert params.scenario.startswith('package://quasistatic_drake/')


@pytest.mark.parametrize('name', sorted(LAUNCH_FILES))
def test_each_launch_file_only_declares_the_plans_arguments_and_starts_its_nodes(name):
    """
    Check, in the source, that a launch file is the plan's thin wrapper.

    `launch` and `launch_ros` cannot be imported here (not on PyPI), so the
    launch files cannot run in these tests; test/test_launch_sim.py runs the
    real launch where launch_testing exists.  Their behaviour is the plan's
    (test_launch_plan.py) as long as they declare exactly the plan's
    arguments, perform exactly those, and start a Node for each planned node
    and nothing else, which is what this checks.  Their usage line documents
    the same arguments.
    """
    arguments, arguments_name, plan_name = LAUNCH_FILES[name]
    with open(os.path.join(LAUNCH_DIR, name)) as f:
        tree = ast.parse(f.read(), filename=name)
    usage = re.findall(r'\[(\w+):=', ast.get_docstring(tree))
    assert usage == [a.name for a in arguments]
    # from this package, the launch file imports only the plan's list and function
    imported = {(n.module, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                for a in n.names if n.module.startswith('quasistatic_drake')}
    assert imported == {(PLAN_MODULE, arguments_name), (PLAN_MODULE, plan_name)}
    # DeclareLaunchArgument(a.name, default_value=a.default, ...) for each a of the list
    [declare] = calls(tree, 'DeclareLaunchArgument')
    var, iterable = only_loop(enclosing_comprehension(tree, declare))
    assert ast.unparse(iterable) == arguments_name
    assert ast.unparse(declare) == (f'DeclareLaunchArgument({var}.name, default_value='
                                    f'{var}.default, description={var}.description)')
    # {a.name: LaunchConfiguration(a.name).perform(context) for a in the list}
    [configuration] = calls(tree, 'LaunchConfiguration')
    performed = enclosing_comprehension(tree, configuration)
    var, iterable = only_loop(performed)
    assert ast.unparse(iterable) == arguments_name
    assert ast.unparse(performed.key) == f'{var}.name'
    assert ast.unparse(performed.value) == f'LaunchConfiguration({var}.name).perform(context)'
    # [Node(**n.launch_kwargs()) for n in plan(those values)], in the OpaqueFunction
    [node] = calls(tree, 'Node')
    var, iterable = only_loop(enclosing_comprehension(tree, node))
    assert ast.unparse(node) == f'Node(**{var}.launch_kwargs())'
    assert isinstance(iterable, ast.Call) and ast.unparse(iterable.func) == plan_name
    [values] = iterable.args
    function = next(f for f in tree.body if isinstance(f, ast.FunctionDef)
                    and node in ast.walk(f))
    assert any(isinstance(s, ast.Assign) and ast.unparse(s.targets[0]) == ast.unparse(values)
               and s.value is performed for s in function.body)
    [opaque] = calls(tree, 'OpaqueFunction')
    assert ast.unparse(opaque) == f'OpaqueFunction(function={function.name})'
    # the launch description holds the declarations and the OpaqueFunction, nothing else
    [description] = calls(tree, 'LaunchDescription')
    actions = {n.func.id for n in ast.walk(description) if isinstance(n, ast.Call)
               and isinstance(n.func, ast.Name)}
    assert actions == {'LaunchDescription', 'DeclareLaunchArgument', 'OpaqueFunction'}


def test_ros_urdf_replaces_drake_shapes_and_keeps_the_kinematics(tmp_path):
    """Replace the arm's capsules by cylinders and spheres; Drake reads the same kinematics."""
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
    """Put a rotated capsule's end spheres along its own axis and drop Drake's elements."""
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
    """Refuse a non-URDF, a capsule without radius and bad XML; convert the arm's scenario."""
    with pytest.raises(DescriptionError, match='not <robot>'):
        ros_urdf('<sdf version="1.9"><model name="m"/></sdf>')
    with pytest.raises(DescriptionError, match="numeric 'radius'"):
        ros_urdf('<robot name="r"><link name="a"><visual><geometry>'
                 '<drake:capsule length="1"/></geometry></visual></link></robot>')
    with pytest.raises(DescriptionError, match='not well-formed'):
        ros_urdf('<robot name="r"><link>')
    assert robot_descriptions(ARM_SCENARIO)['iiwa'].count('<cylinder') >= 7
