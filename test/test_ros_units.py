"""The bridge's pure parts: parameters, commands, pacing, frames, conversions (no spinning)."""

import json
import math
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import yaml

from conftest import make_sim, pads_robot, sdf_box_object, write
from quasistatic_drake import CommandError, QuasistaticSimulator, Scenario
from quasistatic_drake.ros.commands import CommandBuffer
from quasistatic_drake.ros.description import (DescriptionError, robot_descriptions,
                                               robots_rooted_at_world)
from quasistatic_drake.ros.conversions import stamp_seconds, status_dict, status_msg, time_msg
from quasistatic_drake.ros.frames import frame_layout, FrameNameClash, joint_layout
from quasistatic_drake.ros.pacing import Pacer
from quasistatic_drake.ros.params import (DEFAULT_SCENARIO, node_params, ParameterError,
                                          PARAMETERS, scenario_path)
from quasistatic_drake.ros.session import SimSession
from test_ros_helpers import ARM_SCENARIO


# ----- parameters ---------------------------------------------------------------------
def test_parameter_defaults_and_checks():
    params = node_params({})
    assert params.scenario == DEFAULT_SCENARIO and scenario_path(params.scenario).is_file()
    assert node_params({'real_time_rate': 0}).real_time_rate == 0.0   # an int is fine
    for name, bad in [('real_time_rate', -1.0), ('publish_rate', 0.0), ('clock_rate', math.inf),
                      ('command_timeout', 'soon'), ('meshcat', 1), ('meshcat_port', 70000),
                      ('scenario', ''), ('frame_prefix', 3), ('publish_robot_tf', 'yes'),
                      ('model_prefix', 'no'),
                      # a timer's period is whole nanoseconds: 1e-300 killed the node
                      ('real_time_rate', 1e-300), ('real_time_rate', 1e-11),
                      ('real_time_rate', 1e7), ('publish_rate', 1e-300), ('clock_rate', 1e300)]:
        with pytest.raises(ParameterError, match=f"parameter '{name}'.*Fix: pass e.g."):
            node_params({name: bad})
    with pytest.raises(ParameterError, match=r"unknown parameter\(s\) \['rate'\]"):
        node_params({'rate': 1.0})
    assert list(PARAMETERS) == ['scenario', 'real_time_rate', 'publish_rate', 'clock_rate',
                                'command_timeout', 'meshcat', 'meshcat_port', 'meshcat_host',
                                'frame_prefix', 'model_prefix', 'publish_robot_tf']


# ----- commands -----------------------------------------------------------------------
def test_command_buffer_refuses_bad_messages_whole():
    buffer = CommandBuffer(['a', 'b', 'c'])
    assert buffer.set_array([1.0, 2.0, 3.0], now=0.0) is None
    for values in ([1.0, 2.0], [1.0, math.nan, 3.0], [math.inf, 0.0, 0.0]):
        assert buffer.set_array(values, now=0.1) is not None
    assert buffer.set_named(['b', 'x'], [5.0, 5.0], now=0.1).kind == 'name'
    assert buffer.set_named(['b', 'b'], [5.0, 6.0], now=0.1).kind == 'name'
    assert buffer.set_named(['b'], [], now=0.1).kind == 'size'
    assert buffer.set_named(['b', 'c'], [5.0, math.nan], now=0.1).kind == 'finite'
    # the engine's MAX_COMMAND: a 1e20 command made every step fail, -1.8e308 raised inside
    assert buffer.set_named(['c'], [-1.79e308], now=0.1).kind == 'range'
    assert 'beyond +-1e+06' in buffer.set_array([0.0, 1e20, 0.0], now=0.1).message
    assert buffer.current(0.2, timeout=1.0).tolist() == [1.0, 2.0, 3.0]
    assert (buffer.accepted, buffer.rejected) == (1, 9)
    assert 'expected 3 velocities' in buffer.set_array([0.0], now=0.0).message


def test_command_buffer_timeout_per_joint():
    buffer = CommandBuffer(['a', 'b'])
    assert buffer.current(0.0, timeout=0.5).tolist() == [0.0, 0.0]
    buffer.set_array([1.0, 2.0], now=0.0)
    buffer.set_named(['b'], [-2.0], now=0.4)
    assert buffer.current(0.45, timeout=0.5).tolist() == [1.0, -2.0]
    assert buffer.current(0.6, timeout=0.5).tolist() == [0.0, -2.0]
    assert buffer.stale(0.6, timeout=0.5) == ['a']
    buffer.clear()
    assert buffer.current(0.6, timeout=10.0).tolist() == [0.0, 0.0]


# ----- pacing -------------------------------------------------------------------------
def test_pacer_follows_the_rate_and_gives_up_catching_up():
    pacer = Pacer(time_step=0.1, rate=2.0, burst=50, max_lag=0.5)
    pacer.restart(wall=10.0, steps=0)
    assert pacer.period() == pytest.approx(0.05)
    assert pacer.due(10.0, 0).steps == 0
    assert pacer.due(10.051, 0).steps == 1
    assert pacer.due(10.16, 1).steps == 2
    late = pacer.due(12.0, 3)               # 1.85 s behind: re-anchor, one step
    assert late.fell_behind and late.steps == 1
    assert pacer.due(12.0, 4).steps == 0 and pacer.due(12.05, 4).steps == 1
    unlimited = Pacer(time_step=0.1, rate=0.0, burst=7)
    assert unlimited.period() == 0.0 and unlimited.due(0.0, 123).steps == 7


# ----- frames -------------------------------------------------------------------------
def two_crates(tmp_path):
    """Return a simulator with two objects from one file and the pads robot."""
    crate = write(tmp_path, 'crate.sdf', sdf_box_object('crate', [0.1] * 3, 1.0))
    return make_sim(tmp_path, {
        'robots': [pads_robot(tmp_path, 0.8)],
        'objects': [{'name': 'one', 'file': crate, 'initial_pose': {'xyz': [0, 0, 0.05]}},
                    {'name': 'two', 'file': crate, 'initial_pose': {'xyz': [0.5, 0, 0.05]}}]})


def test_frames_are_model_slash_link(tmp_path):
    """By default every frame is <model>/<link>: two models sharing a link name, and all."""
    layout = frame_layout(two_crates(tmp_path).model, frame_prefix='sim/')
    names = layout.all_names()
    assert len(names) == len(set(names))
    assert {'sim/one/crate_body', 'sim/two/crate_body', 'sim/pads/lift_link'} <= set(names)
    assert layout.static == ()


def test_bare_link_names_are_qualified_only_where_links_clash(tmp_path):
    layout = frame_layout(two_crates(tmp_path).model, frame_prefix='sim/', model_prefix=False)
    names = layout.all_names()
    assert len(names) == len(set(names))
    assert {'sim/one/crate_body', 'sim/two/crate_body', 'sim/lift_link'} <= set(names)


def test_frames_without_robot_tf(tmp_path):
    arm = QuasistaticSimulator(Scenario.from_yaml(ARM_SCENARIO)).model
    full = frame_layout(arm)
    assert [f.name for f in full.static] == ['iiwa/iiwa_link_0', 'table/arm_table_top']
    # robot_state_publisher covers the arm (its URDF starts at 'world'): only objects remain
    rsp = frame_layout(arm, publish_robot_tf=False, robots_rooted_at_world={'iiwa'})
    assert [f.name for f in rsp.moving] == ['cylinder/cylinder_link']
    assert [f.name for f in rsp.static] == ['table/arm_table_top']
    # a robot welded by the scenario: the node publishes its base weld, nothing else
    welded = frame_layout(arm, publish_robot_tf=False)
    assert [f.name for f in welded.static] == ['iiwa/iiwa_link_0', 'table/arm_table_top']


def test_robots_rooted_at_world(tmp_path):
    assert robots_rooted_at_world(Scenario.from_yaml(ARM_SCENARIO)) == {'iiwa'}
    # the same pads with the world link renamed: the URDF's root is then 'base'
    pads = pads_robot(tmp_path, 0.8)
    text = (tmp_path / pads['file']).read_text().replace('"world"', '"base"')
    based = dict(pads, name='based', file=write(tmp_path, 'based.urdf', text))
    scenario = Scenario.from_dict({'time_step': 0.1, 'robots': [pads, based]},
                                  base_dir=tmp_path)
    assert robots_rooted_at_world(scenario) == {'pads'}


def test_joint_layout_qualifies_clashing_names(tmp_path):
    first = pads_robot(tmp_path, 0.8)
    text = (tmp_path / first['file']).read_text().replace('name="pads"', 'name="pads2"')
    second = dict(first, name='pads2', file=write(tmp_path, 'pads2.urdf', text),
                  initial_positions=[0.5, -0.07, 0.07])
    sim = make_sim(tmp_path, {'robots': [first, second]})
    layout = joint_layout(sim.model)
    assert layout.names == ('pads/lift', 'pads/left', 'pads/right', 'pads2/lift',
                            'pads2/left', 'pads2/right')
    assert layout.robot_slices == {'pads': slice(0, 3), 'pads2': slice(3, 6)}


def two_pads_robots(tmp_path):
    """Return (scenario file, model) of two robots from one URDF: links and joints shared."""
    first = pads_robot(tmp_path, 0.8)
    second = dict(first, name='pads2', initial_positions=[0.5, -0.07, 0.07])
    data = {'time_step': 0.1, 'robots': [first, second]}
    (tmp_path / 'two.yaml').write_text(yaml.safe_dump(data))
    return tmp_path / 'two.yaml', make_sim(tmp_path, data).model


def described(text):
    """Return (links but world, moving joints) of a robot_description; check its joints' ends."""
    root = ET.fromstring(text)
    links = {link.get('name') for link in root.iter('link')} - {'world'}
    for joint in root.iter('joint'):
        assert {joint.find(end).get('link') for end in ('parent', 'child')} <= links | {'world'}
    return links, [j.get('name') for j in root.iter('joint') if j.get('type') != 'fixed']


def test_robot_descriptions_name_links_and_joints_as_the_node_does(tmp_path):
    """Two robots from one URDF: robot_description's links are the node's frames, joints its."""
    scenario, model = two_pads_robots(tmp_path)
    frames = set(frame_layout(model).all_names())
    links, joints = set(), []
    for robot, text in robot_descriptions(scenario).items():
        robot_links, robot_joints = described(text)
        assert all(name.startswith(f'{robot}/') for name in robot_links)
        links |= robot_links
        joints += robot_joints
    assert links <= frames and {'pads/lift_link', 'pads2/lift_link'} <= links
    assert joints == list(joint_layout(model).state_names)    # shared: <robot>/<joint>


def test_bare_names_are_refused_where_robot_state_publisher_would_publish_one_twice(tmp_path):
    scenario, model = two_pads_robots(tmp_path)
    with pytest.raises(DescriptionError, match=r"robots \['pads', 'pads2'\] share the link "
                                               r"name 'lift_link'.*Fix: set model_prefix true"):
        robot_descriptions(scenario, model_prefix=False)
    with pytest.raises(FrameNameClash, match=r"robot 'pads' and model\(s\) \['pads2'\] share "
                                             r"the link name 'lift_link'.*Fix"):
        frame_layout(model, publish_robot_tf=False, model_prefix=False)
    # the arm's names are its own: bare, as the node's
    arm = QuasistaticSimulator(Scenario.from_yaml(ARM_SCENARIO)).model
    links, _ = described(robot_descriptions(ARM_SCENARIO, model_prefix=False)['iiwa'])
    assert 'iiwa_link_7' in links
    assert links <= set(frame_layout(arm, model_prefix=False).all_names())


# ----- conversions and the session ----------------------------------------------------
def test_stamps_round_trip():
    for t in (0.0, 0.1, 1.7, 12345.999999999):
        stamp = time_msg(t)
        assert 0 <= stamp.nanosec < 1_000_000_000
        assert stamp_seconds(stamp) == pytest.approx(t, abs=1e-9)
    assert (time_msg(2.9999999999).sec, time_msg(2.9999999999).nanosec) == (3, 0)


def test_session_steps_resets_and_reports(tmp_path):
    session = SimSession(Scenario.from_yaml(ARM_SCENARIO))
    command = np.zeros(9)
    command[0] = 0.5
    session.step(command)
    outcome = session.step(command)
    assert session.time == pytest.approx(0.2) and outcome.steps == 2 and outcome.success
    sample = session.joint_sample()
    assert sample.positions[0] == pytest.approx(0.1, abs=1e-9)
    assert sample.velocities[0] == pytest.approx(0.5, abs=1e-9)
    fields = json.loads(status_msg(status_dict(outcome, session.time, False, 1, 0, 0,
                                               math.inf)).data)
    assert fields['status'] == 'optimal' and fields['real_time_factor'] is None
    session.reset()
    assert session.time == 0.0 and session.outcome().status == 'initial'
    assert session.joint_sample().positions[0] == 0.0


def test_session_step_that_raises_changes_nothing():
    session = SimSession(Scenario.from_yaml(ARM_SCENARIO))
    command = np.zeros(9)
    command[1] = 0.3
    session.step(command)
    q_before = session.plant.get_positions(session.plant_context)
    ref_before = session.plant.get_reference(session.plant_context)
    command[2] = math.nan
    with pytest.raises(CommandError, match='not finite'):
        session.step(command)
    assert session.time == pytest.approx(0.1) and session.steps == 1
    assert np.array_equal(session.plant.get_positions(session.plant_context), q_before)
    assert np.array_equal(session.plant.get_reference(session.plant_context), ref_before)
    command[2] = 0.0
    assert session.step(command).success and session.time == pytest.approx(0.2)
