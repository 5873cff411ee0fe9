"""The quasistatic_sim node in-process over rclpy and FastDDS (arm scene); SimSession restores."""

import json
import math
import os
import time

import numpy as np
import pytest
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.ros.node import QuasistaticSimNode, SetupError
from quasistatic_drake.ros.session import SimSession
from conftest import REPO_ROOT
from test_ros_helpers import (ARM_SCENARIO, RosHarness, stamp, tf_children, transform_of,
                              wait_for)

ARM_JOINTS = ['iiwa_joint_1', 'iiwa_joint_2', 'iiwa_joint_3', 'iiwa_joint_4', 'iiwa_joint_5',
              'iiwa_joint_6', 'iiwa_joint_7', 'wsg_left_finger_joint', 'wsg_right_finger_joint']
H = 0.1
TWO_PADS = os.path.join(REPO_ROOT, 'config', 'two_pads_lift.yaml')


@pytest.fixture(scope='module')
def ros():
    """Run the node on the arm scene, as fast as it can, and a probe."""
    harness = RosHarness({'scenario': ARM_SCENARIO, 'meshcat': False, 'real_time_rate': 0.0,
                          'publish_rate': 100.0, 'command_timeout': 5.0})
    yield harness
    harness.close()


def at_start(status):
    """Return whether a ~/status is paused at t = 0 before any step (just reset)."""
    return status['paused'] and status['time'] == 0.0 and status['steps'] == 0


@pytest.fixture
def paused(ros):
    """
    Pause and reset before a test; resume after it.

    It waits until the newest ~/status and /joint_states show the reset: a
    message sent before it may arrive after the service reply (a topic is not
    ordered against a service), but every later one was sent after it.
    """
    assert ros.probe.pause(True).success
    ros.probe.clear()
    assert ros.probe.reset().success
    ros.probe.wait_status(at_start, 'paused at t = 0, steps 0')
    ros.probe.positions_at(0.0)
    yield ros.probe
    ros.probe.pause(False)


def test_joint_states_tf_and_clock(ros):
    probe = ros.probe
    probe.clear()
    wait_for(lambda: len(probe.clock) > 20 and len(probe.joint_states) > 5, what='messages')
    msg = probe.last(probe.joint_states)
    assert list(msg.name) == ARM_JOINTS
    assert len(msg.position) == len(msg.velocity) == len(ARM_JOINTS)
    stamps = [c.clock.sec + 1e-9 * c.clock.nanosec for c in list(probe.clock)]
    assert all(b >= a for a, b in zip(stamps, stamps[1:])) and stamps[-1] > stamps[0]
    # world -> cylinder (its URDF link) on /tf: at rest on the table, upright
    cylinder = wait_for(lambda: transform_of(list(probe.tf), 'cylinder/cylinder_link'), what='/tf')
    assert cylinder.header.frame_id == 'world'
    p = cylinder.transform.translation
    assert np.allclose([p.x, p.y, p.z], [0.55, 0.0, 0.07], atol=2e-3)
    # welded environment and the arm's base on /tf_static; robot links on /tf
    static = tf_children(wait_for(lambda: list(probe.tf_static), what='/tf_static'))
    assert set(static) == {'table/arm_table_top', 'iiwa/iiwa_link_0'}
    moving = tf_children(list(probe.tf))
    assert {'iiwa/iiwa_link_7', 'iiwa/gripper_tcp', 'iiwa/wsg_left_finger',
            'cylinder/cylinder_link'} <= set(moving)


def test_no_tf_edge_twice(ros):
    """Every child frame has one parent, world, and is either static or moving, not both."""
    probe = ros.probe
    wait_for(lambda: len(probe.tf) > 3, what='/tf')
    static, moving = tf_children(list(probe.tf_static)), tf_children(list(probe.tf))
    assert not set(static) & set(moving)
    assert all(parents == {'world'} for parents in (*static.values(), *moving.values()))
    for msg in list(probe.tf):
        children = [t.child_frame_id for t in msg.transforms]
        assert len(children) == len(set(children))


def test_tf_matches_drake_kinematics(ros, paused):
    sim = QuasistaticSimulator(Scenario.from_yaml(ARM_SCENARIO))
    plant, context = sim.model.plant, sim.model.plant_context
    sim.model.set_positions(sim.default_positions())
    X = plant.EvalBodyPoseInWorld(context, plant.GetBodyByName('gripper_tcp'))
    t = wait_for(lambda: (t := transform_of(list(paused.tf), 'iiwa/gripper_tcp'))
                 and stamp(t.header) == 0.0 and t, what='/tf at t = 0 (after the reset)')
    p, r = t.transform.translation, t.transform.rotation
    assert np.allclose([p.x, p.y, p.z], X.translation(), atol=1e-9)
    q = X.rotation().ToQuaternion()
    assert abs(abs(np.dot([r.w, r.x, r.y, r.z], q.wxyz())) - 1.0) < 1e-9


def test_velocity_commands_move_the_joints(ros, paused):
    v = np.zeros(len(ARM_JOINTS))
    v[0], v[7] = 0.5, -0.02
    start = paused.positions()
    paused.send_velocities(v)
    for k in range(4):
        assert paused.step().success
    end = paused.fresh_positions(4 * H)
    # in free space the arm follows the command: 4 steps of h v
    assert end['iiwa_joint_1'] - start['iiwa_joint_1'] == pytest.approx(4 * H * 0.5, abs=1e-6)
    assert end['wsg_left_finger_joint'] - start['wsg_left_finger_joint'] == pytest.approx(
        -4 * H * 0.02, abs=1e-6)
    assert end['iiwa_joint_2'] == pytest.approx(start['iiwa_joint_2'], abs=1e-6)
    msg = paused.last(paused.joint_states)
    assert msg.velocity[0] == pytest.approx(0.5, abs=1e-6)


def test_joint_commands_by_name(ros, paused):
    start = paused.positions()
    paused.send_joint_command(['iiwa_joint_3'], [-0.3])
    assert paused.step().success and paused.step().success
    end = paused.fresh_positions(2 * H)
    assert end['iiwa_joint_3'] - start['iiwa_joint_3'] == pytest.approx(-2 * H * 0.3, abs=1e-6)
    assert end['iiwa_joint_1'] == pytest.approx(start['iiwa_joint_1'], abs=1e-6)


def test_bad_messages_are_refused_and_the_last_good_command_kept(ros, paused):
    v = np.zeros(len(ARM_JOINTS))
    v[3] = 0.2
    paused.send_velocities(v)
    nan = v.copy()
    nan[3] = math.nan
    paused.send_bad(paused.velocity_pub, Float64MultiArray(data=nan.tolist()))
    paused.send_bad(paused.velocity_pub, Float64MultiArray(data=[0.1, 0.2]))
    paused.send_bad(paused.velocity_pub, Float64MultiArray(data=[math.inf] * len(ARM_JOINTS)))
    paused.send_bad(paused.joint_cmd_pub, JointState(name=['no_such_joint'], velocity=[1.0]))
    paused.send_bad(paused.joint_cmd_pub, JointState(name=['iiwa_joint_1'], velocity=[]))
    paused.send_bad(paused.joint_cmd_pub,
                    JointState(name=['iiwa_joint_1', 'iiwa_joint_2'], velocity=[0.1, math.nan]))
    start = paused.positions()
    assert paused.step().success
    end = paused.fresh_positions(H)
    assert end['iiwa_joint_4'] - start['iiwa_joint_4'] == pytest.approx(H * 0.2, abs=1e-6)
    assert end['iiwa_joint_1'] == pytest.approx(start['iiwa_joint_1'], abs=1e-9)
    assert ros.node.commands.rejected >= 6


def test_stale_commands_become_zero(ros, paused):
    ros.node.set_parameters([Parameter('command_timeout', value=0.2)])
    try:
        paused.send_joint_command(['iiwa_joint_5'], [0.4])
        wait_for(lambda: ros.node.commands.stale(time.monotonic(), 0.2),
                 what='the command to go stale')
        start = paused.positions()
        assert paused.step().success
        end = paused.fresh_positions(H)
        assert end['iiwa_joint_5'] == pytest.approx(start['iiwa_joint_5'], abs=1e-9)
    finally:
        ros.node.set_parameters([Parameter('command_timeout', value=5.0)])


def test_pause_step_and_reset(ros, paused):
    # paused: time stands still, at t = 0 after the reset
    paused.steady_status(at_start, 'paused at t = 0, steps 0')
    paused.send_joint_command(['iiwa_joint_1'], [0.5])
    reply = paused.step()
    assert reply.success and json.loads(reply.message)['steps'] == 1
    moved = paused.fresh_positions(H)
    assert moved['iiwa_joint_1'] == pytest.approx(H * 0.5, abs=1e-6)
    paused.steady_status(lambda s: s['paused'] and s['steps'] == 1
                         and s['time'] == pytest.approx(H, abs=1e-12), 'paused at t = h, steps 1')
    # reset: t = 0, initial configuration, commands forgotten
    assert paused.reset().success
    paused.steady_status(at_start, 'paused at t = 0, steps 0 after the reset')
    assert paused.positions_at(0.0)['iiwa_joint_1'] == pytest.approx(0.0, abs=1e-12)
    assert paused.step().success
    assert paused.fresh_positions(H)['iiwa_joint_1'] == pytest.approx(0.0, abs=1e-12)
    # ~/step refuses while running
    paused.pause(False)
    reply = paused.step()
    assert not reply.success and '~/pause' in reply.message


def test_dynamic_parameters_are_checked(ros):
    result = ros.node.set_parameters([Parameter('real_time_rate', value=-2.0)])[0]
    assert not result.successful and 'real_time_rate' in result.reason
    result = ros.node.set_parameters([Parameter('scenario', value='other.yaml')])[0]
    assert not result.successful
    assert ros.node.params.real_time_rate == 0.0


@pytest.mark.parametrize('rate', [1e-300, 1e-11, 1e300])
def test_a_rate_out_of_range_is_refused_and_the_node_runs_on(ros, rate):
    """A timer's period is whole nanoseconds: 1e-300 raised TypeError and the node died."""
    result = ros.node.set_parameters([Parameter('real_time_rate', value=rate)])[0]
    assert not result.successful
    assert "'real_time_rate'" in result.reason and 'from 1e-06 to 1e+06' in result.reason
    assert ros.node.params.real_time_rate == 0.0
    steps = ros.probe.wait_status(lambda s: True, 'a status')['steps']
    ros.probe.wait_status(lambda s: s['steps'] > steps + 3, 'more steps')


def test_the_clock_runs_again_after_a_very_slow_rate(ros):
    """At 1e-6 a step is due every 1e5 s; set back to 0, stepping resumed only after a pause."""
    assert ros.node.set_parameters([Parameter('real_time_rate', value=1e-6)])[0].successful
    try:
        assert ros.node._step_timer.timer_period_ns == pytest.approx(H / 1e-6 * 1e9)
        # the timer has fired under the new period: its next call is a day away
        wait_for(lambda: ros.node._step_timer.time_until_next_call() > 1e13, what='the timer')
    finally:
        assert ros.node.set_parameters([Parameter('real_time_rate', value=0.0)])[0].successful
    steps = ros.probe.wait_status(lambda s: True, 'a status')['steps']
    ros.probe.wait_status(lambda s: s['steps'] > steps + 3, 'steps after the rate change')


def test_bad_scenario_parameter_is_a_clear_error(tmp_path):
    harness = RosHarness()
    try:
        with pytest.raises(SetupError, match=r"parameter 'scenario'.*does not exist.*Fix"):
            QuasistaticSimNode(context=harness.context, parameter_overrides=[
                Parameter('scenario', value=str(tmp_path / 'missing.yaml')),
                Parameter('meshcat', value=False)])
        bad = tmp_path / 'bad.yaml'
        bad.write_text('time_step: -1\nrobots: []\n')
        with pytest.raises(SetupError, match=r"parameter 'scenario'.*time_step"):
            QuasistaticSimNode(context=harness.context, parameter_overrides=[
                Parameter('scenario', value=str(bad)), Parameter('meshcat', value=False)])
        with pytest.raises(SetupError, match=r"parameter 'publish_rate'.*Fix"):
            QuasistaticSimNode(context=harness.context, parameter_overrides=[
                Parameter('publish_rate', value=0.0), Parameter('meshcat', value=False)])
    finally:
        harness.close()


def test_meshcat_is_served_when_asked(tmp_path):
    harness = RosHarness()
    try:
        node = QuasistaticSimNode(context=harness.context, parameter_overrides=[
            Parameter('scenario', value='package://quasistatic_drake/config/two_pads_lift.yaml'),
            Parameter('meshcat', value=True)])
        assert node.session.meshcat.web_url().startswith('http://')
        names = [s.get_name() for s in node.session.diagram.GetSystems()]
        assert any('meshcat_visualizer' in n for n in names), names
        assert 'contact_force_visualizer' in names, 'the contact forces are drawn too'
        node.destroy_node()
    finally:
        harness.close()


class LogRecorder:
    """Stands in for the node's logger: keeps what it logs, by level."""

    def __init__(self):
        """Start with nothing logged."""
        self.lines = {'info': [], 'warning': [], 'error': []}

    def __getattr__(self, level):
        """Return a logging method of ``level`` that records its text."""
        if level not in self.lines:
            raise AttributeError(level)
        return self.lines[level].append


def spy_steps(monkeypatch, engine, first_error=None):
    """Record the engine's step calls in the list returned; the first raises ``first_error``."""
    real_step, calls = engine.step, []

    def step(*args, **kwargs):
        calls.append(None)
        if first_error is not None and len(calls) == 1:
            raise first_error
        return real_step(*args, **kwargs)
    monkeypatch.setattr(engine, 'step', step)
    return calls


def test_an_exception_in_a_step_pauses_and_keeps_the_state(ros, paused, monkeypatch):
    """Drake's internal failures arrive as SystemExit: the node lives on, paused, as before."""
    node = ros.node
    paused.send_joint_command(['iiwa_joint_1'], [0.5])
    assert paused.step().success and paused.step().success
    before = paused.steady_status(lambda s: s['steps'] == 2, 'paused after two steps')
    q_before = paused.fresh_positions(2 * H)['iiwa_joint_1']
    log = LogRecorder()
    monkeypatch.setattr(node, 'get_logger', lambda: log)
    calls = spy_steps(monkeypatch, node.session.plant.engine,
                      SystemExit('Failure at multibody/foo.cc:12 in Bar(): condition failed.'))
    reply = paused.step()
    assert not reply.success
    answer = json.loads(reply.message)
    assert answer['steps'] == 2 and answer['time'] == pytest.approx(2 * H, abs=1e-12)
    assert answer['status'].startswith('SystemExit: Failure at')
    status = paused.steady_status(lambda s: s['error'] is not None, 'the error')
    assert status['error'].startswith('SystemExit: Failure at multibody/foo.cc:12')
    assert status['paused'] and status['status'] == 'optimal' and status['success']
    assert (status['steps'], status['time']) == (before['steps'], before['time'])
    assert any('the step raised: SystemExit: Failure at' in line
               and '~/pause with data: false' in line for line in log.lines['error']), log.lines
    # ~/step goes on from the state of before the failure: exactly one step
    reply = paused.step()
    assert reply.success and json.loads(reply.message)['steps'] == 3 and len(calls) == 2
    q_after = paused.fresh_positions(3 * H)['iiwa_joint_1']
    assert q_after - q_before == pytest.approx(H * 0.5, abs=1e-6)
    paused.send_joint_command(['iiwa_joint_1'], [0.0])
    assert paused.pause(False).success
    paused.wait_status(lambda s: not s['paused'] and s['error'] is None and s['steps'] > 3,
                       'running again, the error cleared')


def test_a_failure_the_engine_caught_pauses_the_node(ros, paused, monkeypatch):
    """Contact detection raises inside the engine's step: status "error", q kept, paused."""
    engine = ros.node.session.plant.engine
    paused.send_joint_command(['iiwa_joint_1'], [0.5])
    assert paused.step().success
    q_before = paused.fresh_positions(H)['iiwa_joint_1']
    real_detect, calls = engine.detector.detect, []

    def detect(*args, **kwargs):
        calls.append(None)
        if len(calls) == 1:
            raise SystemExit('Failure at geometry/foo.cc:1 in Baz(): condition failed.')
        return real_detect(*args, **kwargs)
    monkeypatch.setattr(engine.detector, 'detect', detect)
    reply = paused.step()
    assert not reply.success
    status = paused.steady_status(lambda s: s['error'] is not None, 'the engine error')
    assert status['error'].startswith('SystemExit: Failure at geometry/foo.cc:1')
    assert status['paused'] and status['status'] == 'error' and status['failed_steps'] == 1
    assert paused.positions()['iiwa_joint_1'] == pytest.approx(q_before, abs=1e-12)
    assert paused.pause(False).success
    paused.wait_status(lambda s: not s['paused'] and s['error'] is None and s['steps'] > 2,
                       'running again')


def test_ctrl_c_in_a_step_is_not_caught(monkeypatch):
    harness = RosHarness()
    try:
        node = QuasistaticSimNode(context=harness.context, parameter_overrides=[
            Parameter('scenario', value=TWO_PADS), Parameter('meshcat', value=False)])
        spy_steps(monkeypatch, node.session.plant.engine, KeyboardInterrupt())
        with pytest.raises(KeyboardInterrupt):
            node.step_once()
        assert not node.paused and node.error is None
        node.destroy_node()
    finally:
        harness.close()


def session_state(session):
    """Return (time, q, q_ref, outcome) of a SimSession."""
    plant, context = session.plant, session.plant_context
    return (session.time, plant.get_positions(context), plant.get_reference(context),
            session.outcome())


class FailAfterAdvance:
    """A Simulator whose next AdvanceTo raises after it advanced (e.g. a failing publish)."""

    def __init__(self, simulator, error):
        """Wrap ``simulator``; its next AdvanceTo raises ``error`` once it is done."""
        self.simulator, self.error = simulator, error

    def AdvanceTo(self, boundary_time):  # noqa: N802 - the Simulator's name
        """Advance the Simulator, then raise the error once."""
        self.simulator.AdvanceTo(boundary_time)
        error, self.error = self.error, None
        if error is not None:
            raise error

    def __getattr__(self, name):
        """Delegate the rest to the Simulator."""
        return getattr(self.simulator, name)


@pytest.mark.parametrize('error', [RuntimeError, SystemExit])
@pytest.mark.parametrize('where', ['in the update', 'after the update'])
def test_session_restores_the_whole_state_after_an_exception(monkeypatch, error, where):
    """Time, q, q_ref and the outcome are as before; the next call takes exactly one step."""
    session = SimSession(Scenario.from_yaml(TWO_PADS))
    lift = [0.1, 0.0, 0.0]
    session.step(lift)
    session.step(lift)
    t, q, q_ref, outcome = session_state(session)
    assert outcome.steps == 2 and outcome.status == 'optimal'
    failure = error(f'Failure at {where}')
    if where == 'in the update':
        calls = spy_steps(monkeypatch, session.plant.engine, failure)
    else:
        calls = spy_steps(monkeypatch, session.plant.engine)
        monkeypatch.setattr(session, 'simulator', FailAfterAdvance(session.simulator, failure))
    with pytest.raises(error, match=where):
        session.step(lift)
    assert len(calls) == 1
    t2, q2, q_ref2, outcome2 = session_state(session)
    assert (t2, session.steps) == (t, 2) and outcome2 is outcome
    assert np.array_equal(q2, q) and np.array_equal(q_ref2, q_ref)
    # the Simulator's periodic update is due at t again: the next call takes exactly one step
    lift_before = session.joint_sample().positions[0]
    next_outcome = session.step(lift)
    assert len(calls) == 2 and next_outcome.steps == session.steps == 3
    assert session.time == pytest.approx(3 * H, abs=1e-12)
    assert session.joint_sample().positions[0] - lift_before == pytest.approx(H * 0.1, abs=1e-9)
