"""
The console script quasistatic-drake-node as a subprocess, on scenarios the project never saw.

The scene is written here: generated pads (prismatic lift + two sliding
pads), a generated SDFormat box, a ground slab.  Also: a solver that fails
(an MIQP with no time to solve) leaves the state valid and the node running.
"""

import json
import math
import signal
import subprocess

import pytest
import yaml
from std_msgs.msg import Float64MultiArray

from conftest import ground_entry, pads_robot, sdf_box_object, write
from test_ros_helpers import (NODE_SCRIPT, RosHarness, tf_children, transform_of, wait_for,
                              wait_for_node)


def unseen_scenario(tmp_path, **extra):
    """Write a scenario YAML from generated models; return its path."""
    data = {'time_step': 0.1, 'robots': [pads_robot(tmp_path, 0.8)],
            'objects': [{'name': 'crate',
                         'file': write(tmp_path, 'crate.sdf',
                                       sdf_box_object('crate', [0.1] * 3, 1.0)),
                         'initial_pose': {'xyz': [0, 0, 0.05]}}],
            'environment': [ground_entry(tmp_path)], **extra}
    path = tmp_path / 'unseen.yaml'
    path.write_text(yaml.safe_dump(data))
    return path


def start_node(*args):
    """Start the console script with --ros-args ``args``."""
    return subprocess.Popen([NODE_SCRIPT, '--ros-args', *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_console_script_serves_an_unseen_scenario(tmp_path, harness):
    scenario = unseen_scenario(tmp_path)
    node = start_node('-p', f'scenario:={scenario}', '-p', 'meshcat:=false',
                      '-p', 'command_timeout:=30.0')
    try:
        probe = harness.probe
        msg = wait_for_node(probe, node)
        assert list(msg.name) == ['lift', 'left', 'right']
        assert list(msg.position) == pytest.approx([0.05, -0.07, 0.07])
        crate = wait_for(lambda: transform_of(list(probe.tf), 'crate/crate_body'), what='/tf')
        assert crate.header.frame_id == 'world'
        assert crate.transform.translation.z == pytest.approx(0.05, abs=2e-3)
        static = tf_children(wait_for(lambda: list(probe.tf_static), what='/tf_static'))
        assert set(static) == {'ground/slab'}
        assert {'pads/lift_link', 'pads/left_link', 'pads/right_link', 'crate/crate_body'} <= set(
            tf_children(list(probe.tf)))
        # a command moves the lift; bad messages are refused and the command is kept
        probe.send_velocities([0.2, 0.0, 0.0])
        lift0 = probe.positions()['lift']
        wait_for(lambda: probe.positions()['lift'] > lift0 + 0.04, what='the lift to rise')
        probe.send_bad(probe.velocity_pub, Float64MultiArray(data=[math.nan, 0.0, 0.0]))
        probe.send_bad(probe.velocity_pub, Float64MultiArray(data=[0.1] * 5))
        lift1 = probe.positions()['lift']
        wait_for(lambda: probe.positions()['lift'] > lift1 + 0.04, what='the lift to go on')
        clock = [c.clock.sec + 1e-9 * c.clock.nanosec for c in list(probe.clock)]
        assert clock == sorted(clock) and clock[-1] > clock[0]
        assert node.poll() is None
    finally:
        node.send_signal(signal.SIGINT)
        out, err = node.communicate(timeout=30)
    assert node.returncode == 0, err
    assert 'Traceback' not in err + out


def test_console_script_bad_scenario_exits_with_a_clear_error(tmp_path):
    missing = tmp_path / 'nope.yaml'
    node = start_node('-p', f'scenario:={missing}', '-p', 'meshcat:=false')
    out, err = node.communicate(timeout=60)
    assert node.returncode == 2
    assert f"parameter 'scenario' = '{missing}'" in err and 'Fix:' in err
    assert 'Traceback' not in err + out


def test_solver_failure_keeps_the_state_and_the_node(tmp_path):
    scenario = unseen_scenario(tmp_path, formulation='miqp',
                               miqp={'time_limit': 1.0e-9, 'backend': 'gurobi'})
    ros = RosHarness({'scenario': str(scenario), 'meshcat': False, 'publish_rate': 100.0})
    try:
        probe = ros.probe
        assert probe.pause(True).success
        probe.send_velocities([0.0, 0.1, -0.1])
        base = wait_for(lambda: probe.latest_status().get('paused') and probe.latest_status(),
                        what='a paused status')
        before = probe.positions()
        for _ in range(2):
            reply = probe.step()
            assert not reply.success and json.loads(reply.message)['status'] != 'optimal'
        status = wait_for(lambda: probe.latest_status().get('steps') == base['steps'] + 2
                          and probe.latest_status(), what='two more steps')
        assert status['failed_steps'] == base['failed_steps'] + 2 and not status['success']
        after = probe.fresh_positions(status['time'])
        assert after == pytest.approx(before, abs=1e-12)     # q kept: the last valid one
        assert after == pytest.approx({'lift': 0.05, 'left': -0.07, 'right': 0.07})
        assert probe.reset().success                          # and the node still serves
    finally:
        ros.close()


def test_console_script_scenario_error_found_when_building_the_model(tmp_path):
    """A scenario that parses but fails when the model is built: exit 2, one clear line."""
    robot = pads_robot(tmp_path, 0.8)
    robot['stiffness'] = robot['stiffness'][:-1]         # three joints, two values
    scenario = unseen_scenario(tmp_path, robots=[robot])
    node = start_node('-p', f'scenario:={scenario}', '-p', 'meshcat:=false')
    out, err = node.communicate(timeout=60)
    assert node.returncode == 2, err
    assert 'Traceback' not in err + out
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert f"parameter 'scenario' = '{scenario}'" in lines[0]
    assert 'robots[0].stiffness' in lines[0] and 'expected 3 values' in lines[0]
    assert 'Fix:' in lines[0]
