"""
Robots the way Drake users write them: model directives, package paths, and no silent physics.

Every model here is generated in tmp_path.  Each test of a silent change
fails on the engine before issue 14 (friction left at Drake's 1.0, a mimic
joint moving freely, a joint frozen outside its limits, out-of-plane
tangents, a ghost link's pose).
"""

import numpy as np
import pytest
import yaml

from conftest import ground_entry, make_sim, sdf_box_object, urdf_cartesian_robot, write
from quasistatic_drake import QuasistaticSimulator, Scenario, ScenarioError
from quasistatic_drake.ros.description import robot_descriptions
from quasistatic_drake.ros.frames import joint_layout

X_Z_PLANE = [('x', 'prismatic', '1 0 0'), ('z', 'prismatic', '0 0 1'),
             ('ry', 'revolute', '0 1 0')]
PAD = '<geometry><box size="0.02 0.06 0.06"/></geometry>'
INERTIA = '<inertia ixx="1e-4" ixy="0" ixz="0" iyy="1e-4" iyz="0" izz="1e-4"/>'


def arm_urdf():
    """Return a gantry 'arm': lift z then slide x, ending at link 'flange' (no geometry)."""
    return urdf_cartesian_robot('arm', [('lift', 'world', '0 0 1', None),
                                        ('slide', 'lift_link', '1 0 0', None)]).replace(
        'slide_link', 'flange')


def gripper_sdf(mimic=False):
    """Return an SDFormat parallel gripper: a palm and two box fingers on prismatic joints."""
    def finger(name, sign):
        coupling = ('<drake:mimic joint="left_finger" multiplier="-1" offset="0"/>'
                    if mimic and name == 'right_finger' else '')
        return f"""
    <link name="{name}_link">
      <inertial><mass>0.1</mass><inertia><ixx>1e-4</ixx><iyy>1e-4</iyy><izz>1e-4</izz>
        <ixy>0</ixy><ixz>0</ixz><iyz>0</iyz></inertia></inertial>
      <collision name="{name}_pad"><geometry><box><size>0.02 0.06 0.06</size></box></geometry>
        <drake:proximity_properties><drake:mu_dynamic>0.8</drake:mu_dynamic>
        </drake:proximity_properties></collision>
    </link>
    <joint name="{name}" type="prismatic">
      <parent>palm</parent><child>{name}_link</child>
      <axis><xyz>{sign} 0 0</xyz><limit><lower>-0.1</lower><upper>0.1</upper></limit></axis>
      {coupling}
    </joint>"""
    return f"""<?xml version="1.0"?>
<sdf version="1.9" xmlns:drake="http://drake.mit.edu">
  <model name="gripper">
    <link name="palm">
      <inertial><mass>0.2</mass><inertia><ixx>1e-4</ixx><iyy>1e-4</iyy><izz>1e-4</izz>
        <ixy>0</ixy><ixz>0</ixz><iyz>0</iyz></inertia></inertial>
    </link>{finger('left_finger', 1)}{finger('right_finger', 1)}
  </model>
</sdf>
"""


def directive_scene(tmp_path):
    """Return (directives, entries): an arm with a gripper welded to its flange, a box, ground."""
    write(tmp_path, 'arm.urdf', arm_urdf())
    write(tmp_path, 'gripper.sdf', gripper_sdf())
    write(tmp_path, 'box.sdf', sdf_box_object('box', [0.1] * 3, 1.0))
    write(tmp_path, 'ground.urdf', open(tmp_path / 'ground.urdf').read()
          if (tmp_path / 'ground.urdf').exists() else '')
    ground_entry(tmp_path)
    directives = [
        {'add_model': {'name': 'arm', 'file': 'arm.urdf'}},
        {'add_model': {'name': 'gripper', 'file': 'gripper.sdf'}},
        {'add_weld': {'parent': 'arm::flange', 'child': 'gripper::palm'}},
        {'add_model': {'name': 'box', 'file': 'box.sdf'}},
        {'add_model': {'name': 'ground', 'file': 'ground.urdf'}},
        {'add_weld': {'parent': 'world', 'child': 'ground::slab',
                      'X_PC': {'translation': [0, 0, -0.1]}}},
    ]
    entries = {'robots': [{'name': 'arm', 'stiffness': [1000, 1000],
                           'initial_positions': [0.05, 0.0]},
                          {'name': 'gripper', 'stiffness': [1000, 1000],
                           'initial_positions': [-0.07, 0.07]}],
               'objects': [{'name': 'box', 'initial_pose': {'xyz': [0, 0, 0.05]}}],
               'environment': [{'name': 'ground'}]}
    return directives, entries


def squeeze_and_lift(sim):
    """Close the gripper on the box, then lift; return the box's height."""
    q = sim.default_positions()
    commands = ([{'gripper': [0.1, -0.1]}] * 3 + [{'gripper': [0.02, -0.02]}] * 2
                + [{'arm': [0.1, 0.0]}] * 6)
    rollout = sim.rollout(sim.initial_state(q), commands)
    assert rollout.failed_steps == 0
    return sim.object_pose(rollout.q[-1], 'box').translation()[2]


def test_a_gripper_welded_to_an_arm_by_directives_squeezes_and_lifts(tmp_path):
    directives, entries = directive_scene(tmp_path)
    sim = make_sim(tmp_path, {'directives': directives, **entries})
    assert sim.robot_joint_names('gripper') == ['left_finger', 'right_finger']
    assert squeeze_and_lift(sim) > 0.05 + 0.04, 'the box rose with the arm'


def test_the_same_scene_from_a_directives_file(tmp_path):
    directives, entries = directive_scene(tmp_path)
    (tmp_path / 'scene.dmd.yaml').write_text(yaml.safe_dump({'directives': directives}))
    sim = make_sim(tmp_path, {'directives_file': 'scene.dmd.yaml', **entries})
    assert squeeze_and_lift(sim) > 0.05 + 0.04


def test_drake_tags_in_directives_are_kept(tmp_path):
    directives, entries = directive_scene(tmp_path)
    text = yaml.safe_dump({'time_step': 0.1, 'directives': directives, **entries})
    text = text.replace('translation:\n      - 0\n      - 0\n      - -0.1',
                        'translation: [0, 0, -0.1]\n      rotation: !Rpy {deg: [0, 0, 90]}')
    assert '!Rpy' in text
    (tmp_path / 's.yaml').write_text(text)
    sim = QuasistaticSimulator(Scenario.from_yaml(tmp_path / 's.yaml'))
    assert squeeze_and_lift(sim) > 0.09


def refused(tmp_path, data, *phrases):
    """Check that loading the scenario fails with all phrases in the message."""
    with pytest.raises(ScenarioError) as err:
        make_sim(tmp_path, data)
    for phrase in phrases:
        assert phrase in str(err.value), (phrase, str(err.value))
    return str(err.value)


@pytest.mark.parametrize('change, phrases', [
    (lambda d: d[2]['add_weld'].update(parent='arm::nowhere'),
     ['directives[2] (add_weld): Drake could not process it', 'nowhere', 'Fix:']),
    (lambda d: d.append({'add_weld': {'parent': 'world', 'child': 'gripper::palm'}}),
     ["directives[6] (add_weld): 'gripper::palm' is already welded by directives[2]"]),
    (lambda d: d.append({'add_welds': {'parent': 'world', 'child': 'box::box_body'}}),
     ["directives[6] (add_welds): not in Drake's model directive syntax"]),
    (lambda d: d.append({'add_weld': {'parent': 'world', 'child': 'fixture::base'}}),
     ["directives[6] (add_weld): child 'fixture::base' is not a frame of a model"]),
    (lambda d: d.append({'add_model': {'name': 'spare', 'file': 'box.sdf'}}),
     ["model instance(s) ['spare'] that no entry names"]),
])
def test_bad_directives_name_the_directive_and_the_fix(tmp_path, change, phrases):
    directives, entries = directive_scene(tmp_path)
    change(directives)
    refused(tmp_path, {'directives': directives, **entries}, *phrases)


def test_entries_and_directives_must_match(tmp_path):
    directives, entries = directive_scene(tmp_path)
    entries['objects'].append({'name': 'ball'})
    refused(tmp_path, {'directives': directives, **entries},
            "objects[1]: no model instance 'ball' comes from the directives")
    refused(tmp_path, {'robots': [{'name': 'arm', 'stiffness': [1, 1]}]},
            'robots[0].file: is required when the scenario has no directives')
    directives, entries = directive_scene(tmp_path)
    (tmp_path / 'scene.dmd.yaml').write_text(yaml.safe_dump({'directives': directives}))
    refused(tmp_path, {'directives': directives, 'directives_file': 'scene.dmd.yaml',
                       **entries}, 'give either directives or directives_file')


# ----- packages ----------------------------------------------------------------------------
def package(tmp_path, name):
    """Make a package directory holding a package.xml and a box model; return its path."""
    root = tmp_path / name
    (root / 'models').mkdir(parents=True)
    (root / 'package.xml').write_text(
        f'<?xml version="1.0"?><package format="3"><name>{name}</name><version>0.0.0'
        '</version><description>d</description><maintainer email="a@b.org">a</maintainer>'
        '<license>BSD</license></package>')
    (root / 'models' / 'box.sdf').write_text(sdf_box_object('box', [0.1] * 3, 1.0))
    (root / 'models' / 'finger.urdf').write_text(urdf_cartesian_robot(
        'finger', [('fz', 'world', '0 0 1', PAD)]))
    return root


def package_scene(tmp_path, name):
    """Return a scenario dict that loads a robot and an object through package://name."""
    return {'robots': [{'name': 'finger', 'file': f'package://{name}/models/finger.urdf',
                        'stiffness': [100], 'initial_positions': [0.3]}],
            'objects': [{'name': 'box', 'file': f'package://{name}/models/box.sdf',
                         'initial_pose': {'xyz': [0, 0, 0.05]}}],
            'environment': [ground_entry(tmp_path)]}


def test_packages_resolve_in_the_engine_and_in_robot_description(tmp_path):
    package(tmp_path, 'my_models')
    data = {**package_scene(tmp_path, 'my_models'), 'packages': {'my_models': 'my_models'}}
    sim = make_sim(tmp_path, data)
    assert sim.object_pose(sim.default_positions(), 'box').translation()[2] == 0.05
    (tmp_path / 's.yaml').write_text(yaml.safe_dump({'time_step': 0.1, **data}))
    assert 'fz' in robot_descriptions(tmp_path / 's.yaml')['finger']


def test_ros_package_path_resolves_in_the_engine_and_in_robot_description(
        tmp_path, monkeypatch):
    root = package(tmp_path / 'ws', 'ros_models')
    monkeypatch.setenv('ROS_PACKAGE_PATH', str(root.parent))
    data = package_scene(tmp_path, 'ros_models')
    sim = make_sim(tmp_path, data)
    assert sim.robot_joint_names('finger') == ['fz']
    (tmp_path / 's.yaml').write_text(yaml.safe_dump({'time_step': 0.1, **data}))
    assert 'fz' in robot_descriptions(tmp_path / 's.yaml')['finger']


def test_an_unreachable_drake_models_gets_a_two_line_fix(tmp_path, monkeypatch):
    monkeypatch.delenv('ROS_PACKAGE_PATH', raising=False)
    data = package_scene(tmp_path, 'drake_models')
    message = refused(tmp_path, data, 'package://drake_models is not available',
                      'Fix: packages: {drake_models: <a local copy')
    assert len(message.splitlines()) == 2


def test_bad_packages_are_refused(tmp_path):
    refused(tmp_path, {**package_scene(tmp_path, 'x'), 'packages': {'x': 'missing_dir'}},
            "packages.x: '", 'is not a directory')


# ----- no silent physics ---------------------------------------------------------------------
def friction_of(sim, body_name):
    """Return the friction of the first collision geometry of a body."""
    return next(g.mu for g in sim.model.geometries.values() if g.body_name == body_name)


def test_default_friction_applies_whatever_the_source(tmp_path):
    """A package URI, drake: attributes, and an SDFormat include all get default_friction."""
    root = package(tmp_path, 'fpkg')
    (root / 'models' / 'plain_box.sdf').write_text(
        sdf_box_object('plain', [0.1] * 3, 1.0))                 # no friction in the file
    (root / 'models' / 'wrapper.sdf').write_text(
        '<?xml version="1.0"?><sdf version="1.9"><model name="wrapper"><include merge="true">'
        '<uri>package://fpkg/models/plain_box.sdf</uri></include></model></sdf>')
    finger = urdf_cartesian_robot('finger', [('fz', 'world', '0 0 1', PAD)]).replace(
        '<drake:proximity_properties><drake:mu_dynamic value="0.8"/>\n        '
        '</drake:proximity_properties>', '')                    # no friction in the file,
    finger = finger.replace('<link name="fz_link"',             # and a drake: attribute
                            '<link name="fz_link" drake:note="made for this test"', 1)
    assert 'mu_dynamic' not in finger and 'drake:note' in finger
    (root / 'models' / 'finger_attr.urdf').write_text(finger)
    sim = make_sim(tmp_path, {
        'default_friction': 0.3, 'packages': {'fpkg': 'fpkg'},
        'robots': [{'name': 'finger', 'file': 'package://fpkg/models/finger_attr.urdf',
                    'stiffness': [100], 'initial_positions': [0.3]}],
        'objects': [{'name': 'a', 'file': 'package://fpkg/models/plain_box.sdf',
                     'initial_pose': {'xyz': [0, 0, 0.05]}},
                    {'name': 'b', 'file': 'package://fpkg/models/wrapper.sdf',
                     'initial_pose': {'xyz': [0.5, 0, 0.05]}}],
        'environment': [ground_entry(tmp_path)]})
    assert friction_of(sim, 'a::plain_body') == 0.3
    assert friction_of(sim, 'b::plain_body') == 0.3
    assert friction_of(sim, 'finger::fz_link') == 0.3
    assert friction_of(sim, 'ground::slab') == 0.5            # the file's own value stays


def test_a_friction_of_one_in_the_file_is_the_files(tmp_path):
    sim = make_sim(tmp_path, {
        'default_friction': 0.3,
        'robots': [{'name': 'finger', 'file': write(tmp_path, 'f.urdf', urdf_cartesian_robot(
            'finger', [('fz', 'world', '0 0 1', PAD)], mu=1.0)), 'stiffness': [100],
            'initial_positions': [0.3]}],
        'environment': [ground_entry(tmp_path)]})
    assert friction_of(sim, 'finger::fz_link') == 1.0


def mimic_gripper_scene(tmp_path):
    """Return a scenario with the gripper's right finger coupled to its left (-1)."""
    directives, entries = directive_scene(tmp_path)
    write(tmp_path, 'gripper.sdf', gripper_sdf(mimic=True))
    entries['robots'][1] = {'name': 'gripper', 'stiffness': [1000],
                            'initial_positions': [-0.07]}
    return {'directives': directives, **entries}


def test_a_mimic_joint_follows_its_leader_and_takes_no_command(tmp_path):
    sim = make_sim(tmp_path, mimic_gripper_scene(tmp_path))
    assert sim.robot_joint_names('gripper') == ['left_finger']
    q0 = sim.default_positions()
    follower = sim.model.robot('gripper').followers[0]
    assert q0[follower.q_idx] == pytest.approx(0.07)           # set from the leader
    result = sim.step(sim.initial_state(q0), {'gripper': [0.1]})
    moved = result.q_next - q0
    assert moved[follower.leader_q_idx] == pytest.approx(0.01)
    assert moved[follower.q_idx] == pytest.approx(-0.01)
    assert squeeze_and_lift_coupled(sim) > 0.09
    layout = joint_layout(sim.model)
    assert 'right_finger' not in layout.names and 'right_finger' in layout.state_names
    bad = q0.copy()
    bad[follower.q_idx] += 0.01
    with pytest.raises(Exception, match="breaks the model's joint coupling"):
        sim.step(sim.initial_state(bad), {})


def squeeze_and_lift_coupled(sim):
    """Close the coupled gripper on the box, then lift; return the box's height."""
    commands = ([{'gripper': [0.1]}] * 3 + [{'gripper': [0.02]}] * 2
                + [{'arm': [0.1, 0.0]}] * 6)
    rollout = sim.rollout(sim.initial_state(), commands)
    assert rollout.failed_steps == 0
    return sim.object_pose(rollout.q[-1], 'box').translation()[2]


def test_the_mimic_is_honoured_by_the_miqp_too(tmp_path):
    sim = make_sim(tmp_path, {**mimic_gripper_scene(tmp_path), 'formulation': 'miqp',
                              'time_step': 0.05})
    follower = sim.model.robot('gripper').followers[0]
    q0 = sim.default_positions()
    result = sim.step(sim.initial_state(q0), {'gripper': [0.1]})
    assert result.success
    assert result.q_next[follower.q_idx] - q0[follower.q_idx] == pytest.approx(-0.005)


def test_initial_positions_outside_the_limits_are_refused(tmp_path):
    robot = {'name': 'finger', 'file': write(tmp_path, 'f.urdf', urdf_cartesian_robot(
        'finger', [('fz', 'world', '0 0 1', PAD)])), 'stiffness': [100],
        'initial_positions': [2.5]}
    refused(tmp_path, {'robots': [robot], 'environment': [ground_entry(tmp_path)]},
            "robots[0]: joint 'fz' starts at 2.5, outside its limits [-2, 2]",
            'Fix: give an initial position within the limits')


def planar_box_urdf(axes):
    """Return a URDF box on prismatic x, prismatic z and revolute y joints (an x-z plane)."""
    links = ['<link name="world"/>']
    parent = 'world'
    for name, kind, axis in axes:
        links.append(f'<link name="{name}_link"><inertial><mass value="1e-6"/>{INERTIA}'
                     '</inertial></link>')
        links.append(f'<joint name="{name}" type="{kind}"><parent link="{parent}"/>'
                     f'<child link="{name}_link"/><axis xyz="{axis}"/></joint>')
        parent = f'{name}_link'
    links.append('<link name="box"><inertial><mass value="1"/>'
                 '<inertia ixx="2e-3" ixy="0" ixz="0" iyy="2e-3" iyz="0" izz="2e-3"/>'
                 '</inertial><collision><geometry><box size="0.1 0.1 0.1"/></geometry>'
                 '</collision></link>')
    links.append(f'<joint name="fixed" type="fixed"><parent link="{parent}"/>'
                 '<child link="box"/></joint>')
    return f'<?xml version="1.0"?><robot name="planar">{"".join(links)}</robot>'


def test_two_friction_directions_lie_in_an_x_z_plane(tmp_path):
    """A box in the x-z plane, pulled along x by 20 % of its weight, sticks at mu = 0.5."""
    box = write(tmp_path, 'planar.urdf', planar_box_urdf(X_Z_PLANE))
    finger = write(tmp_path, 'finger.urdf', urdf_cartesian_robot(
        'finger', [('fz', 'world', '0 0 1', PAD)]))
    sim = make_sim(tmp_path, {
        'friction_directions': 2, 'gravity': [0.2 * 9.81, 0, -9.81],
        'robots': [{'name': 'finger', 'file': finger, 'stiffness': [100],
                    'initial_positions': [1.0]}],
        'objects': [{'name': 'box', 'file': box, 'initial_positions': [0.0, 0.05, 0.0]}],
        'environment': [ground_entry(tmp_path)]})
    np.testing.assert_allclose(np.abs(sim.model.motion_plane_normal), [0, 1, 0], atol=1e-12)
    rollout = sim.rollout(sim.initial_state(), [{}] * 5)
    tangents = rollout.results[-1].contact_set.tangents_W
    assert len(tangents) and np.allclose(tangents[..., 1], 0.0), 'tangents in the x-z plane'
    assert abs(sim.object_pose(rollout.q[-1], 'box').translation()[0]) < 1e-6, 'it sticks'


def test_two_friction_directions_for_a_free_body_are_refused(tmp_path):
    refused(tmp_path, {
        'friction_directions': 2,
        'objects': [{'name': 'box', 'file': write(tmp_path, 'b.sdf', sdf_box_object(
            'box', [0.1] * 3, 1.0)), 'initial_pose': {'xyz': [0, 0, 0.05]}}],
        'environment': [ground_entry(tmp_path)]},
        "friction_directions: 2 is a balanced set only for motion in a plane, but 'box'",
        'Fix: friction_directions: 4')


def test_object_pose_is_the_physical_body_not_a_ghost_link(tmp_path):
    box = write(tmp_path, 'planar.urdf', planar_box_urdf(X_Z_PLANE))
    data = {'objects': [{'name': 'box', 'file': box, 'initial_positions': [0.3, 0.05, 0.0]}],
            'environment': [ground_entry(tmp_path)]}
    sim = make_sim(tmp_path, data)
    np.testing.assert_allclose(sim.object_pose(sim.default_positions(), 'box').translation(),
                               [0.3, 0.0, 0.05], atol=1e-12)
    data['objects'][0]['body'] = 'x_link'
    sim = make_sim(tmp_path, data)
    np.testing.assert_allclose(sim.object_pose(sim.default_positions(), 'box').translation(),
                               [0.3, 0.0, 0.0], atol=1e-12)
    data['objects'][0]['body'] = 'lid'
    refused(tmp_path, data, "objects[0].body: object 'box' has no body 'lid'")


# ----- qsim parity ----------------------------------------------------------------------------
def test_an_infinite_detection_tolerance_sees_every_pair(tmp_path):
    finger = write(tmp_path, 'finger.urdf', urdf_cartesian_robot(
        'finger', [('fz', 'world', '0 0 1', PAD)]))
    data = {'contact_detection_tolerance': float('inf'),
            'robots': [{'name': 'finger', 'file': finger, 'stiffness': [100],
                        'initial_positions': [1.0]}],
            'environment': [ground_entry(tmp_path)]}
    sim = make_sim(tmp_path, data)
    result = sim.step(sim.initial_state(), {'finger': [-0.1]})
    assert result.success and result.contact_set.n_c > 0
    assert np.min(result.contact_set.phi) > 0.9, 'a pair a metre away is a contact row'
    refused(tmp_path, {**data, 'formulation': 'miqp'},
            'contact_detection_tolerance: must be finite under formulation: miqp')


def test_object_forces_push_a_box_only_past_friction(tmp_path):
    box = write(tmp_path, 'box.sdf', sdf_box_object('box', [0.1] * 3, 1.0))
    sim = make_sim(tmp_path, {'objects': [{'name': 'box', 'file': box,
                                           'initial_pose': {'xyz': [0, 0, 0.05]}}],
                              'environment': [ground_entry(tmp_path)]})
    q0, start = sim.default_positions(), sim.initial_state()
    weak = sim.step(start, {}, object_forces={'box': [0, 0, 0, 0.3 * 9.81, 0, 0]})
    strong = sim.step(start, {}, object_forces={'box': [0, 0, 0, 0.8 * 9.81, 0, 0]})
    assert abs(weak.q_next[-3] - q0[-3]) < 1e-9, 'mu = 0.5 holds 30 % of the weight'
    assert strong.q_next[-3] - q0[-3] > 1e-3, '80 % of the weight slides it'
    with pytest.raises(Exception, match=r"object_forces\['box'\] has 2 entries; expected 6"):
        sim.step(sim.initial_state(q0), {}, object_forces={'box': [1, 2]})
    with pytest.raises(Exception, match=r"object_forces names unknown object\(s\) \['lid'\]"):
        sim.step(sim.initial_state(q0), {}, object_forces={'lid': [0] * 6})


def test_position_commands_set_the_reference(tmp_path):
    directives, entries = directive_scene(tmp_path)
    entries['robots'][1]['initial_positions'] = [-0.1, 0.1]     # fingers clear of the box
    sim = make_sim(tmp_path, {'directives': directives, **entries})
    start = sim.initial_state()
    v = sim.velocity_for_positions(start, {'arm': [0.08, 0.0]})
    result = sim.step(start, v)
    np.testing.assert_allclose(result.state_next.q_ref[:2], [0.08, 0.0], atol=1e-12)
    np.testing.assert_allclose(sim.robot_positions(result.q_next, 'arm'), [0.08, 0.0],
                               atol=1e-9)
    with pytest.raises(Exception, match=r"q_cmd\['arm'\] has 1 entries; expected 2"):
        sim.velocity_for_positions(start, {'arm': [0.1]})


def test_position_command_port_wins_over_the_velocity_port(tmp_path):
    from pydrake.systems.analysis import Simulator
    from quasistatic_drake import QuasistaticPlant
    directives, entries = directive_scene(tmp_path)
    entries['robots'][1]['initial_positions'] = [-0.1, 0.1]
    plant = QuasistaticPlant(make_sim(tmp_path, {'directives': directives, **entries}))
    simulator = Simulator(plant)
    context = simulator.get_mutable_context()
    plant.get_velocity_command_input_port('arm').FixValue(context, [-0.5, 0.0])
    plant.get_position_command_input_port('arm').FixValue(context, [0.09, 0.0])
    simulator.AdvanceTo(0.1)
    np.testing.assert_allclose(plant.get_reference(context)[:2], [0.09, 0.0], atol=1e-12)
    plant.get_generalized_force_input_port('box').FixValue(context, [0, 0, 0, 0.8 * 9.81, 0, 0])
    x = plant.get_positions(context)[-3]
    simulator.AdvanceTo(0.2)
    assert plant.get_positions(context)[-3] - x > 1e-3, 'the applied force slides the box'
    plant.get_generalized_force_input_port('box').FixValue(context, [np.nan] * 6)
    with pytest.raises(Exception, match="'box_generalized_force'.*not finite"):
        simulator.AdvanceTo(0.3)


# ----- composition -----------------------------------------------------------------------------
def test_a_scenario_includes_a_base_and_overrides_keys(tmp_path):
    base_dir = tmp_path / 'base'
    base_dir.mkdir()
    finger = write(base_dir, 'finger.urdf', urdf_cartesian_robot(
        'finger', [('fz', 'world', '0 0 1', PAD)]))
    (base_dir / 'base.yaml').write_text(yaml.safe_dump({
        'time_step': 0.1, 'formulation': 'miqp', 'miqp': {'time_limit': 5, 'mip_gap': 0.01},
        'robots': [{'name': 'finger', 'file': finger, 'stiffness': [100],
                    'initial_positions': [0.3]}]}))
    (tmp_path / 'child.yaml').write_text(yaml.safe_dump({
        'include': 'base/base.yaml', 'time_step': 0.05, 'miqp': {'time_limit': 2}}))
    scenario = Scenario.from_yaml(tmp_path / 'child.yaml')
    assert scenario.time_step == 0.05
    assert (scenario.settings().time_limit, scenario.settings().mip_gap) == (2.0, 0.01)
    assert scenario.robots[0].file == str(base_dir / 'finger.urdf'), 'relative to the base'
    (tmp_path / 'loop.yaml').write_text(yaml.safe_dump({'include': 'loop.yaml',
                                                        'time_step': 0.1}))
    with pytest.raises(ScenarioError, match='includes itself'):
        Scenario.from_yaml(tmp_path / 'loop.yaml')
    (tmp_path / 'missing.yaml').write_text(yaml.safe_dump({'include': 'nowhere.yaml'}))
    with pytest.raises(ScenarioError, match=r'include\[0\]: .*does not exist'):
        Scenario.from_yaml(tmp_path / 'missing.yaml')
