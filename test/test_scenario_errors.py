"""
Scenario errors found when the models are loaded: each names the file, the key path and a fix.

The model files are generated in tmp_path, so these are models the package has never seen.
"""

import re

import numpy as np
import pytest

from conftest import ground_entry, run, urdf_cartesian_robot, write
from quasistatic_drake import QuasistaticSimulator, Scenario, ScenarioError

INERTIAL = ('<inertial><mass value="{mass}"/><inertia ixx="{i}" ixy="0" ixz="0" iyy="{i}" '
            'iyz="0" izz="{i}"/></inertial>')
BOX = '<geometry><box size="0.1 0.1 0.1"/></geometry>'
TIP = '<geometry><box size="0.02 0.02 0.02"/></geometry>'


def link(name, mass=1.0, inertia=1e-3, collision=True, visual=False):
    """Return a URDF <link> with an inertial and optionally a box collision and visual."""
    parts = [INERTIAL.format(mass=mass, i=inertia) if mass is not None else '']
    if collision:
        parts.append(f'<collision>{BOX}</collision>')
    if visual:
        parts.append(f'<visual>{BOX}</visual>')
    return f'<link name="{name}">{"".join(parts)}</link>'


def joint(name, kind, parent, child, axis='1 0 0'):
    """Return a URDF <joint> (limits for prismatic ones)."""
    limit = '<limit lower="-1" upper="1" effort="1" velocity="1"/>' if kind == 'prismatic' else ''
    return (f'<joint name="{name}" type="{kind}"><parent link="{parent}"/>'
            f'<child link="{child}"/><axis xyz="{axis}"/>{limit}</joint>')


def urdf(name, *elements):
    """Return a URDF robot made of the given <link> and <joint> elements."""
    return f'<?xml version="1.0"?>\n<robot name="{name}">{"".join(elements)}</robot>\n'


def finger_robot(tmp_path):
    """Return a robot entry: a small box on a prismatic z joint, clear of everything."""
    text = urdf_cartesian_robot('finger', [('finger_z', 'world', '0 0 1', TIP)])
    return {'name': 'finger', 'file': write(tmp_path, 'finger.urdf', text), 'stiffness': [100],
            'initial_positions': [0.5]}


def scenario(tmp_path, **changes):
    """Return a scenario dict with a finger, no objects and a ground slab."""
    data = {'time_step': 0.1, 'robots': [finger_robot(tmp_path)], 'objects': [],
            'environment': [ground_entry(tmp_path)]}
    data.update(changes)
    return data


def object_entry(tmp_path, text, name='thing', **extra):
    """Write a URDF object and return its objects entry, 5 cm above the ground."""
    entry = {'name': name, 'file': write(tmp_path, f'{name}.urdf', text),
             'initial_pose': {'xyz': [0, 0, 0.05]}}
    entry.update(extra)
    return entry


def load(tmp_path, data):
    """Build the simulator of a scenario dict whose source is 's.yaml'."""
    return QuasistaticSimulator(Scenario.from_dict(data, base_dir=tmp_path, source='s.yaml'))


def refused(tmp_path, data, where, *phrases):
    """Check that loading fails with a message starting with 's.yaml: <where>: ' and phrases."""
    with pytest.raises(ScenarioError) as err:
        load(tmp_path, data)
    message = str(err.value)
    assert message.startswith(f's.yaml: {where}: '), message
    for phrase in phrases:
        assert phrase in message, (phrase, message)
    return message


# ----- collision geometry ------------------------------------------------------------

def test_object_without_collision_geometry_is_refused(tmp_path):
    """Old code accepted it, and the object fell forever (z = -4.86 m after 50 steps)."""
    ghost = object_entry(tmp_path, urdf('ghost', link('ghost_link', collision=False,
                                                      visual=True)), name='ghost')
    refused(tmp_path, scenario(tmp_path, objects=[ghost]), 'objects[0]',
            "object 'ghost' has no collision geometry on link(s) ['ghost_link']",
            'ghost.urdf', 'Fix: add a <collision> element',
            'list the model under environment if it is only a visual')


def test_second_object_without_collision_geometry_is_named(tmp_path):
    box = object_entry(tmp_path, urdf('box', link('box_link')), name='box')
    ghost = object_entry(tmp_path, urdf('ghost', link('ghost_link', collision=False)),
                         name='ghost', initial_pose={'xyz': [0.5, 0, 0.05]})
    refused(tmp_path, scenario(tmp_path, objects=[box, ghost]), 'objects[1]',
            "object 'ghost'")


def test_visual_only_model_is_accepted_under_environment(tmp_path):
    ghost = {'name': 'ghost', 'file': write(tmp_path, 'ghost.urdf', urdf(
        'ghost', link('ghost_link', collision=False, visual=True)))}
    sim = load(tmp_path, scenario(tmp_path, environment=[ground_entry(tmp_path), ghost]))
    run(sim, sim.default_positions(), {'finger': [0.1]}, 3)


@pytest.mark.parametrize('kind', ['fixed', 'revolute'])
def test_link_without_collision_jointed_to_one_with_collision_is_fine(tmp_path, kind):
    """A body without collision geometry moves with the part it is jointed to."""
    text = urdf('pendulum', link('base'), link('bob', collision=False),
                joint('hinge', kind, 'base', 'bob'))
    sim = load(tmp_path, scenario(tmp_path, objects=[object_entry(tmp_path, text)]))
    result = run(sim, sim.default_positions(), {}, 5)
    np.testing.assert_allclose(sim.object_pose(result.q_next, 'thing').translation(),
                               [0, 0, 0.05], atol=1e-6)


def test_free_part_of_an_object_without_collision_is_refused(tmp_path):
    """An SDFormat model with two unjointed links is two free bodies; each must be touchable."""
    write(tmp_path, 'pair.sdf', """<?xml version="1.0"?>
<sdf version="1.9"><model name="pair">
  <link name="solid"><pose>0 0 0.05 0 0 0</pose><collision name="c"><geometry><box>
    <size>0.1 0.1 0.1</size></box></geometry></collision></link>
  <link name="loose"><pose>0.5 0 0.05 0 0 0</pose></link>
</model></sdf>""")
    refused(tmp_path, scenario(tmp_path, objects=[{'name': 'pair', 'file': 'pair.sdf'}]),
            'objects[0]', "object 'pair' has no collision geometry on link(s) ['loose']")


def test_robot_without_collision_geometry_is_accepted(tmp_path):
    """A robot that cannot touch anything still follows its command: it is legitimate."""
    text = urdf_cartesian_robot('ghost_arm', [('ghost_z', 'world', '0 0 1', None)])
    robot = {'name': 'ghost_arm', 'file': write(tmp_path, 'ghost_arm.urdf', text),
             'stiffness': [100]}
    sim = load(tmp_path, scenario(tmp_path, robots=[robot]))
    result = run(sim, sim.default_positions(), {'ghost_arm': [0.1]}, 3)
    np.testing.assert_allclose(sim.robot_positions(result.q_next, 'ghost_arm'), [0.03])


# ----- joints that a robot cannot have ------------------------------------------------

FLOATING_BASE = (link('world', mass=None, collision=False), link('base'),
                 joint('float', 'floating', 'world', 'base'))


@pytest.mark.parametrize('extra', [(), (link('tip'), joint('slide', 'prismatic', 'base', 'tip'))],
                         ids=['floating_base_only', 'floating_base_and_a_prismatic_joint'])
def test_robot_on_a_floating_joint_is_refused(tmp_path, extra):
    """
    Drake's URDF parser drops the floating joint and leaves a free base.

    Old code welded that base at 'pose' (the floating joint silently ignored), or, with no
    other joint, said 'no movable joints. Fix: list it under environment'.
    """
    robot = {'name': 'drone', 'file': write(tmp_path, 'drone.urdf',
                                            urdf('drone', *FLOATING_BASE, *extra)),
             'stiffness': [100] * (1 if extra else 6)}
    refused(tmp_path, scenario(tmp_path, robots=[robot]), 'robots[0]',
            "joint(s) ['float']", 'drone.urdf', 'of type floating',
            'a floating base cannot be commanded',
            "Fix: remove the floating joint and set 'pose'",
            'list the model under objects if it should move freely')


def test_floating_joint_between_robot_links_is_refused(tmp_path):
    robot = {'name': 'arm', 'stiffness': [100], 'file': write(tmp_path, 'arm.urdf', urdf(
        'arm', link('world', mass=None, collision=False), link('base'), link('hand'),
        link('loose'), joint('slide', 'prismatic', 'world', 'base'),
        joint('wrist', 'fixed', 'base', 'hand'), joint('float', 'floating', 'hand', 'loose')))}
    refused(tmp_path, scenario(tmp_path, robots=[robot]), 'robots[0]', "joint(s) ['float']")


def test_environment_on_a_floating_joint_is_refused(tmp_path):
    """The environment is welded: a floating joint in its file would be ignored."""
    crate = {'name': 'crate', 'file': write(tmp_path, 'crate.urdf', urdf('crate', *FLOATING_BASE)),
             'pose': {'xyz': [0.5, 0, 0.05]}}
    refused(tmp_path, scenario(tmp_path, environment=[ground_entry(tmp_path), crate]),
            'environment[1]', "joint(s) ['float']", 'welded',
            'list the model under objects if it should move freely')


def test_object_on_a_floating_joint_is_a_free_body(tmp_path):
    """For an object, a floating joint to the world means what it says: a free body."""
    sim = load(tmp_path, scenario(tmp_path, objects=[
        object_entry(tmp_path, urdf('crate', *FLOATING_BASE), name='crate')]))
    assert sim.model.object('crate').v_idx.size == 6
    q = run(sim, sim.default_positions(), {}, 5).q_next
    np.testing.assert_allclose(sim.object_pose(q, 'crate').translation(), [0, 0, 0.05],
                               atol=1e-6)


def test_robot_with_a_multi_dof_joint_gets_a_fix(tmp_path):
    """Old code said what was wrong but not how to fix it."""
    robot = {'name': 'slider', 'stiffness': [100, 100, 100], 'file': write(
        tmp_path, 'slider.urdf', urdf('slider', link('world', mass=None, collision=False),
                                      link('base'), joint('glide', 'planar', 'world', 'base',
                                                          axis='0 0 1')))}
    refused(tmp_path, scenario(tmp_path, robots=[robot]), 'robots[0]',
            "multi-DOF joint(s) ['glide (planar)']", 'revolute or prismatic',
            'Fix: model each such joint as a chain of revolute or prismatic joints')


def test_unconnected_root_links_get_a_fix(tmp_path):
    write(tmp_path, 'two.sdf', """<?xml version="1.0"?>
<sdf version="1.9"><model name="two">
  <link name="a"><collision name="c"><geometry><box><size>1 1 1</size></box></geometry>
  </collision></link>
  <link name="b"><pose>3 0 0 0 0 0</pose></link>
</model></sdf>""")
    refused(tmp_path, scenario(tmp_path, environment=[{'name': 'two', 'file': 'two.sdf'}]),
            'environment[0]', "2 unconnected root links ['a', 'b']", 'Fix: connect them')


# ----- mass and inertia -----------------------------------------------------------------

@pytest.mark.parametrize('mass, inertia', [(0.0, 0.0), (1.0, 0.0), (None, None)],
                         ids=['zero_mass', 'mass_without_rotational_inertia', 'no_inertial'])
def test_object_without_mass_or_rotational_inertia_is_refused(tmp_path, mass, inertia):
    """Old code refused it from the simulator, without the file and key path."""
    ghost = object_entry(tmp_path, urdf('ghost', link('ghost_link', mass, inertia)),
                         name='ghost')
    refused(tmp_path, scenario(tmp_path, objects=[ghost]), 'objects[0]',
            "object 'ghost' has a singular mass matrix",
            "link(s) ['ghost_link'] have no mass or no rotational inertia", 'ghost.urdf',
            'Fix: give every link of the object a positive mass')


def test_massless_link_on_a_joint_is_named(tmp_path):
    text = urdf('pendulum', link('base'), link('bob', mass=0.0, inertia=0.0),
                joint('hinge', 'revolute', 'base', 'bob'))
    refused(tmp_path, scenario(tmp_path, objects=[object_entry(tmp_path, text)]),
            'objects[0]', "link(s) ['bob']")


def test_massless_link_welded_to_a_massive_one_is_fine(tmp_path):
    """The welded pair is one rigid body with the massive link's inertia."""
    text = urdf('pair', link('base'), link('handle', mass=0.0, inertia=0.0),
                joint('weld', 'fixed', 'base', 'handle'))
    sim = load(tmp_path, scenario(tmp_path, objects=[object_entry(tmp_path, text)]))
    run(sim, sim.default_positions(), {}, 3)


# ----- other messages now start with the file and key path ------------------------------

def test_halfspace_error_names_the_entry(tmp_path):
    write(tmp_path, 'plane.sdf', """<?xml version="1.0"?>
<sdf version="1.9"><model name="plane"><static>true</static><link name="plane">
<collision name="c"><geometry><plane><normal>0 0 1</normal><size>1 1</size></plane>
</geometry></collision></link></model></sdf>""")
    data = scenario(tmp_path, environment=[ground_entry(tmp_path),
                                           {'name': 'floor', 'file': 'plane.sdf'}])
    refused(tmp_path, data, 'environment[1]', "'floor::plane'", 'plane.sdf',
            'HalfSpace', 'Fix: model the ground or table as a large box')


def test_repeated_name_names_both_entries(tmp_path):
    data = scenario(tmp_path, environment=[dict(ground_entry(tmp_path), name='finger')])
    refused(tmp_path, data, 'environment[0].name',
            "model names must be unique; repeated: ['finger'] (also robots[0].name)",
            'Fix: rename one of them')


def test_scenario_where_nothing_moves_names_the_keys(tmp_path):
    with pytest.raises(ScenarioError, match=re.escape(
            's.yaml: robots, objects: both are empty, so nothing can move')):
        Scenario.from_dict(scenario(tmp_path, robots=[]), base_dir=tmp_path, source='s.yaml')


def test_missing_and_bad_yaml_files_start_with_the_path(tmp_path):
    missing = tmp_path / 'missing.yaml'
    with pytest.raises(ScenarioError, match=f'^{re.escape(str(missing))}: .*Fix: '):
        Scenario.from_yaml(missing)
    bad = tmp_path / 'bad.yaml'
    bad.write_text('time_step: [0.1\n')
    with pytest.raises(ScenarioError, match=f'^{re.escape(str(bad))}: the scenario file is not '
                                            'valid YAML at line 2, column 1.*Fix: '):
        Scenario.from_yaml(bad)
