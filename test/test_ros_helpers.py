"""
Shared helpers of the ROS 2 tests: an isolated DDS domain, a probe node, the node in-process.

Every test process uses its own ROS_DOMAIN_ID (from its pid, 1..100, valid for
FastDDS) and localhost-only discovery, set before rclpy.init; subprocesses
inherit them.  The probe subscribes to everything the node publishes and
records it; :class:`RosHarness` spins the probe (and, in-process, the node)
in a background thread.
"""

import json
import os
import sys
import threading
import time

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import SetBool, Trigger
from tf2_msgs.msg import TFMessage

from conftest import REPO_ROOT

NODE_SCRIPT = os.path.join(os.path.dirname(sys.executable), 'quasistatic-drake-node')
ARM_SCENARIO = os.path.join(REPO_ROOT, 'config', 'arm_pick_place.yaml')
NS = '/quasistatic_sim'


def isolate_ros_domain():
    """Set a per-process ROS_DOMAIN_ID and localhost-only discovery (before rclpy.init)."""
    os.environ['ROS_DOMAIN_ID'] = str(1 + os.getpid() % 100)
    os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
    os.environ.pop('ROS_LOCALHOST_ONLY', None)


def wait_for(predicate, timeout=20.0, what='condition'):
    """Poll ``predicate`` until it is truthy; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError(f'timed out after {timeout} s waiting for {what}')


# A node's first run in a fresh environment compiles the contact kernels: about 70 s of CPU
# on an idle machine, several times that on a loaded one.
NODE_START_TIMEOUT = 300.0


def wait_for_node(probe, process):
    """Wait for the node subprocess's first /joint_states; fail at once if it exits first."""
    def started():
        if process.poll() is not None:
            raise AssertionError(f'the node exited with code {process.returncode} '
                                 'before it published /joint_states')
        return probe.last(probe.joint_states)
    return wait_for(started, NODE_START_TIMEOUT, 'the node\'s first /joint_states')


class Probe(Node):
    """Records /joint_states, /tf, /tf_static, /clock and ~/status; sends commands."""

    def __init__(self, context):
        """Subscribe with the QoS the node publishes with (/clock: best effort)."""
        super().__init__('probe', context=context)
        self.lock = threading.Lock()
        self.joint_states, self.tf, self.tf_static, self.clock, self.status = [], [], [], [], []
        self.create_subscription(JointState, '/joint_states', self._keep(self.joint_states), 50)
        self.create_subscription(TFMessage, '/tf', self._keep(self.tf), 100)
        self.create_subscription(
            TFMessage, '/tf_static', self._keep(self.tf_static),
            QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL))
        self.create_subscription(Clock, '/clock', self._keep(self.clock),
                                 QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT))
        self.create_subscription(String, NS + '/status', self._keep(self.status, json.loads), 50)
        self.velocity_pub = self.create_publisher(Float64MultiArray, NS + '/velocity_commands',
                                                  10)
        self.joint_cmd_pub = self.create_publisher(JointState, NS + '/joint_commands', 10)
        self.reset_client = self.create_client(Trigger, NS + '/reset')
        self.pause_client = self.create_client(SetBool, NS + '/pause')
        self.step_client = self.create_client(Trigger, NS + '/step')

    def _keep(self, store, convert=None):
        def callback(msg):
            with self.lock:
                store.append(convert(msg.data) if convert else msg)
        return callback

    def last(self, store):
        """Return the newest message of a store, or None."""
        with self.lock:
            return store[-1] if store else None

    def latest_status(self):
        """Return the newest ~/status fields, or an empty dict."""
        return self.last(self.status) or {}

    def wait_status(self, predicate, what, timeout=20.0):
        """Wait until the newest ~/status satisfies ``predicate``; return it."""
        def ready():
            status = self.latest_status()
            return status if status and predicate(status) else None
        return wait_for(ready, timeout, f'~/status: {what}')

    def steady_status(self, predicate, what, count=3):
        """
        Wait for a ~/status that satisfies ``predicate``; check that ``count`` later ones do.

        The node publishes ~/status in order, so this shows that the state holds
        (e.g. paused: time stands still).  Returns the first matching status.
        """
        status = self.wait_status(predicate, what)
        with self.lock:
            index = max(i for i, s in enumerate(self.status) if s is status)

        def later_ones():
            with self.lock:
                return self.status[index + 1:index + 1 + count] \
                    if len(self.status) > index + count else None
        later = wait_for(later_ones, what=f'{count} more ~/status messages')
        bad = [s for s in later if not predicate(s)]
        assert not bad, f'~/status did not stay "{what}": {status} was followed by {bad}'
        return status

    def clear(self):
        """Forget what was received (not /tf_static)."""
        with self.lock:
            for store in (self.joint_states, self.tf, self.clock, self.status):
                store.clear()

    def call(self, client, request, timeout=20.0):
        """Call a service and return its response (the executor thread completes it)."""
        assert client.wait_for_service(timeout_sec=timeout), f'no service {client.srv_name}'
        future = client.call_async(request)
        wait_for(future.done, timeout, f'a response from {client.srv_name}')
        return future.result()

    def pause(self, paused=True):
        """Pause (or resume) the simulation."""
        return self.call(self.pause_client, SetBool.Request(data=paused))

    def step(self):
        """Take one step while paused; return the response."""
        return self.call(self.step_client, Trigger.Request())

    def reset(self):
        """Reset the simulation."""
        return self.call(self.reset_client, Trigger.Request())

    def send_velocities(self, values, wait=True):
        """Publish ~/velocity_commands; with ``wait``, until ~/status counts it as accepted."""
        self._send(self.velocity_pub, Float64MultiArray(data=[float(v) for v in values]),
                   'commands_accepted' if wait else None)

    def send_joint_command(self, names, velocities, wait_key='commands_accepted'):
        """Publish ~/joint_commands and wait until ~/status counts it (wait_key)."""
        msg = JointState(name=list(names), velocity=[float(v) for v in velocities])
        self._send(self.joint_cmd_pub, msg, wait_key)

    def send_bad(self, publisher, msg):
        """Publish a message the node must refuse; wait until ~/status counts the refusal."""
        self._send(publisher, msg, 'commands_rejected')

    def _send(self, publisher, msg, key):
        before = wait_for(self.latest_status, what='~/status')[key] if key else 0
        wait_for(lambda: publisher.get_subscription_count() > 0, what='the node subscribing')
        publisher.publish(msg)
        if key:
            wait_for(lambda: self.latest_status().get(key, 0) > before, 10.0,
                     f'~/status {key} to count the message')

    def positions(self):
        """Return {joint: position} of the newest /joint_states."""
        msg = wait_for(lambda: self.last(self.joint_states), what='/joint_states')
        return dict(zip(msg.name, msg.position))

    def positions_at(self, sim_time):
        """Wait until the newest /joint_states is stamped ``sim_time``; return its positions."""
        def ready():
            msg = self.last(self.joint_states)
            return msg if msg and abs(stamp(msg.header) - sim_time) < 1e-9 else None
        msg = wait_for(ready, what=f'/joint_states stamped t = {sim_time}')
        return dict(zip(msg.name, msg.position))

    def fresh_positions(self, min_time):
        """Return {joint: position} of a /joint_states stamped at or after ``min_time``."""
        def ready():
            msg = self.last(self.joint_states)
            return msg if msg and stamp(msg.header) >= min_time - 1e-9 else None
        msg = wait_for(ready, what=f'/joint_states at t >= {min_time}')
        return dict(zip(msg.name, msg.position))


class RosHarness:
    """An rclpy context, a probe, optionally the node in-process, spun in a thread."""

    def __init__(self, node_parameters=None):
        """Start; with ``node_parameters`` ({name: value}) also run the node in-process."""
        isolate_ros_domain()
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.node = None
        if node_parameters is not None:
            from quasistatic_drake.ros.node import QuasistaticSimNode
            self.node = QuasistaticSimNode(context=self.context, parameter_overrides=[
                Parameter(k, value=v) for k, v in node_parameters.items()])
            self.executor.add_node(self.node)
        self.probe = Probe(self.context)
        self.executor.add_node(self.probe)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self):
        while not self._stop.is_set() and self.context.ok():
            self.executor.spin_once(timeout_sec=0.05)

    def close(self):
        """Stop spinning (join the thread), then destroy the nodes and the context."""
        self._stop.set()
        self._thread.join(timeout=10.0)
        assert not self._thread.is_alive(), 'the executor thread did not stop'
        self.executor.shutdown(timeout_sec=2.0)
        for node in (self.probe, self.node):
            if node is not None:
                node.destroy_node()
        self.context.try_shutdown()


def stamp(header):
    """Return a message header's stamp in seconds."""
    return header.stamp.sec + 1e-9 * header.stamp.nanosec


def tf_children(messages):
    """Return {child frame: set of parents} over a list of TFMessages."""
    out = {}
    for msg in messages:
        for t in msg.transforms:
            out.setdefault(t.child_frame_id, set()).add(t.header.frame_id)
    return out


def transform_of(messages, child):
    """Return the newest TransformStamped of ``child`` in a list of TFMessages, or None."""
    for msg in reversed(messages):
        for t in msg.transforms:
            if t.child_frame_id == child:
                return t
    return None
