"""
Flood the console script's node with commands and service calls; it must stay alive and consistent.

For FLOOD_SECONDS of wall time the test publishes at 1 kHz a seeded random
mix of good velocity commands (small, large, sign reversals) and bad ones
(wrong length, NaN/inf, unknown or repeated joint names), while a second
thread calls ~/pause, ~/step and ~/reset in random order.  Then the node
must still run, serve and report a consistent state, reset to its initial
configuration, and exit cleanly on SIGINT.
"""

import json
import math
import random
import signal
import subprocess
import threading
import time

import pytest
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from test_ros_helpers import NODE_SCRIPT, stamp, transform_of, wait_for, wait_for_node

SEED = 20240611
FLOOD_SECONDS = 20.0
RATE = 1000.0                       # [Hz] command messages
H = 0.1                             # two_pads_lift.yaml's time step [s]
Q0 = [0.05, -0.07, 0.07]            # its initial joint positions
BOX_XYZ = [0.0, 0.0, 0.05]          # its box's initial position


def consistent(status):
    """Return whether a ~/status has time = steps h (both are set by the same step or reset)."""
    return abs(status['time'] - status['steps'] * H) <= 1e-9


class CommandFlood:
    """Publishes a seeded random mix of good and bad commands at RATE; counts them."""

    def __init__(self, probe, joints, rng):
        """Send on ``probe``'s command publishers to a node with ``joints``."""
        self.probe, self.joints, self.rng = probe, list(joints), rng
        self.sent = self.good = 0
        self.last = [0.0] * len(self.joints)

    def run(self, seconds):
        """Publish for ``seconds`` of wall time, one message per 1 / RATE."""
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            self.publish_one()
            # pacing, not synchronisation: keep the average rate at RATE
            delay = start + self.sent / RATE - time.monotonic()
            if delay > 0:
                time.sleep(delay)

    def publish_one(self):
        """Publish one random message: two in three are good."""
        if self.rng.random() < 2 / 3:
            self._good()
            self.good += 1
        else:
            self._bad()
        self.sent += 1

    def _velocity(self, i):
        kind = self.rng.random()
        if kind < 0.6:
            return self.rng.uniform(-0.3, 0.3)
        if kind < 0.8:
            return self.rng.uniform(-50.0, 50.0)          # large: joint limits, contact
        return -self.last[i] or 0.2                       # sign reversal

    def _good(self):
        v = [self._velocity(i) for i in range(len(self.joints))]
        if self.rng.random() < 0.5:
            self.last = v
            self.probe.velocity_pub.publish(Float64MultiArray(data=v))
        else:
            chosen = self.rng.sample(range(len(self.joints)), self.rng.randint(1, len(v)))
            for i in chosen:
                self.last[i] = v[i]
            self.probe.joint_cmd_pub.publish(JointState(
                name=[self.joints[i] for i in chosen], velocity=[v[i] for i in chosen]))

    def _bad(self):
        n = len(self.joints)
        kind = self.rng.randrange(6)
        if kind == 0:                                     # wrong length
            size = self.rng.choice([k for k in range(2 * n + 1) if k != n])
            self.probe.velocity_pub.publish(Float64MultiArray(data=[0.1] * size))
        elif kind == 1:                                   # not finite
            data = [0.0] * n
            data[self.rng.randrange(n)] = self.rng.choice([math.nan, math.inf, -math.inf])
            self.probe.velocity_pub.publish(Float64MultiArray(data=data))
        elif kind == 2:                                   # unknown joint
            self.probe.joint_cmd_pub.publish(JointState(
                name=[self.joints[0], 'no_such_joint'], velocity=[0.1, 0.1]))
        elif kind == 3:                                   # repeated joint
            name = self.rng.choice(self.joints)
            self.probe.joint_cmd_pub.publish(JointState(name=[name, name],
                                                        velocity=[0.1, -0.1]))
        elif kind == 4:                                   # names and velocities differ
            self.probe.joint_cmd_pub.publish(JointState(name=list(self.joints),
                                                        velocity=[0.1]))
        else:                                             # not finite, by name
            self.probe.joint_cmd_pub.publish(JointState(name=[self.joints[-1]],
                                                        velocity=[math.nan]))


def call_services(probe, rng, stop, log):
    """Call ~/pause, ~/step and ~/reset in random order until ``stop``; check every reply."""
    paused = False
    while not stop.is_set():
        op = rng.choice(['pause', 'resume', 'step', 'step', 'reset'])
        if op in ('pause', 'resume'):
            paused = op == 'pause'
            reply = probe.pause(paused)
            assert reply.success, reply.message
        elif op == 'reset':
            reply = probe.reset()
            assert reply.success, reply.message
        else:
            reply = probe.step()
            if paused:      # a JSON reply: the step's time and count agree
                answer = json.loads(reply.message)
                assert consistent(answer), answer
            else:
                assert not reply.success and '~/pause' in reply.message, reply.message
        log.append(op)


def last_words(log_file, count=3):
    """Return the last lines of the node's stderr that are not command warnings."""
    log_file.flush()
    with open(log_file.name) as f:
        lines = [line.strip() for line in f if 'ignored a message' not in line]
    return ' | '.join(lines[-count:])


def test_flood_of_commands_and_service_calls(tmp_path, harness):
    probe = harness.probe
    out_file, err_file = open(tmp_path / 'out.txt', 'w+'), open(tmp_path / 'err.txt', 'w+')
    node = subprocess.Popen(
        [NODE_SCRIPT, '--ros-args',
         '-p', 'scenario:=package://quasistatic_drake/config/two_pads_lift.yaml',
         '-p', 'meshcat:=false', '-p', 'real_time_rate:=0.0', '-p', 'command_timeout:=0.05'],
        stdout=out_file, stderr=err_file, text=True)
    try:
        joints = wait_for_node(probe, node).name
        wait_for(lambda: probe.velocity_pub.get_subscription_count() > 0
                 and probe.joint_cmd_pub.get_subscription_count() > 0, what='the node subscribing')
        flood = CommandFlood(probe, joints, random.Random(SEED))
        stop, calls, errors = threading.Event(), [], []

        def services():
            try:
                call_services(probe, random.Random(SEED + 1), stop, calls)
            except BaseException as err:   # noqa: B902 - report it in the test thread
                errors.append(err)
        thread = threading.Thread(target=services, daemon=True)
        thread.start()
        try:
            flood.run(FLOOD_SECONDS)
        finally:
            stop.set()
            thread.join(timeout=30.0)
        assert node.poll() is None, (f'the node exited with code {node.returncode} during '
                                     f'the flood; its last words: {last_words(err_file)}')
        assert not thread.is_alive(), 'the service thread did not stop (a call hangs)'
        assert not errors, f'a service call failed after {len(calls)} calls: {errors[0]!r}'
        assert flood.sent > 0.25 * RATE * FLOOD_SECONDS and len(calls) > 20, \
            (flood.sent, len(calls))
        # every ~/status: time = steps h; the counts of commands never exceed what was sent
        status = wait_for(probe.latest_status, what='~/status')
        with probe.lock:
            statuses, joint_states = list(probe.status), list(probe.joint_states)
        assert statuses and all(consistent(s) for s in statuses), \
            [s for s in statuses if not consistent(s)][:3]
        assert status['commands_accepted'] > 0 and status['commands_rejected'] > 0, status
        assert status['commands_accepted'] + status['commands_rejected'] <= flood.sent
        assert all(math.isfinite(p) for msg in joint_states for p in msg.position)
        # it runs again when resumed
        assert probe.pause(False).success
        before = probe.latest_status()['time']
        probe.wait_status(lambda s: not s['paused'] and s['error'] is None
                          and s['time'] > before, 'the simulation running again')
        # reset: t = 0, the initial configuration
        assert probe.pause(True).success and probe.reset().success
        probe.steady_status(lambda s: s['paused'] and s['time'] == 0.0 and s['steps'] == 0,
                            'paused at t = 0 after the reset')
        positions = probe.positions_at(0.0)
        assert [positions[j] for j in joints] == pytest.approx(Q0, abs=1e-12)
        box = wait_for(lambda: (t := transform_of(list(probe.tf), 'box/box_link'))
                       and stamp(t.header) == 0.0 and t, what='/tf of the box at t = 0')
        p = box.transform.translation
        assert [p.x, p.y, p.z] == pytest.approx(BOX_XYZ, abs=1e-9)
        assert node.poll() is None
    finally:
        node.send_signal(signal.SIGINT)
        node.wait(timeout=30)
        out_file.seek(0)
        err_file.seek(0)
        out, err = out_file.read(), err_file.read()
        out_file.close()
        err_file.close()
    assert node.returncode == 0, err[-2000:]
    assert 'Traceback' not in err + out, err[-2000:]
