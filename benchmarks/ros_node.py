"""
Time the ROS 2 node: steps per second while publishing, and command-to-/joint_states latency.

The node runs as a subprocess from the console script (quasistatic-drake-node)
on config/arm_pick_place.yaml without Meshcat, in its own DDS domain with
localhost-only discovery; a probe node in this process subscribes and
publishes over real FastDDS.

throughput: real_time_rate 0 (as fast as possible) with /joint_states, /tf and
~/status at publish_rate 50 Hz and /clock at 100 Hz; the steps per wall
second come from ~/status over ``--seconds``.

latency: the probe publishes a velocity command for joint 1 (alternating
sign, so each is new) and times the first /joint_states whose velocity shows
it.  At real_time_rate 1 it includes waiting for the next step (h = 0.1 s of
wall time) and the next publication (20 ms); at real_time_rate 0 only the
next publication.

    .venv/bin/python benchmarks/ros_node.py [--seconds 10] [--trials 40]
        [--json out/ros_node.json] [--png out/ros_node.png]
"""

import argparse
import json
import os
from pathlib import Path
import platform
import signal
import subprocess
import sys
import threading
import time

import matplotlib
import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String

from quasistatic_drake.paths import package_share_dir

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the Agg backend)

NODE_SCRIPT = os.path.join(os.path.dirname(sys.executable), 'quasistatic-drake-node')
SCENARIO = package_share_dir() / 'config' / 'arm_pick_place.yaml'
N_JOINTS = 9
SPEED = 0.05             # [rad/s] of joint 1 in the latency commands


class Probe(Node):
    """Records ~/status and the arrival times of /joint_states; publishes commands."""

    def __init__(self, context):
        """Subscribe and create the command publisher."""
        super().__init__('ros_node_benchmark', context=context)
        self.lock = threading.Lock()
        self.status, self.joint_states = [], []
        self.create_subscription(String, '/quasistatic_sim/status', self._on_status, 50)
        self.create_subscription(JointState, '/joint_states', self._on_joint_states, 50)
        self.commands = self.create_publisher(Float64MultiArray,
                                              '/quasistatic_sim/velocity_commands', 10)

    def _on_status(self, msg):
        with self.lock:
            self.status.append((time.monotonic(), json.loads(msg.data)))

    def _on_joint_states(self, msg):
        with self.lock:
            self.joint_states.append((time.monotonic(), msg.velocity[0]))


def start_node(rate: float) -> subprocess.Popen:
    """Start the node at ``real_time_rate``, publishing at 50 Hz."""
    return subprocess.Popen(
        [NODE_SCRIPT, '--ros-args', '-p', f'scenario:={SCENARIO}', '-p', 'meshcat:=false',
         '-p', f'real_time_rate:={rate}', '-p', 'publish_rate:=50.0', '-p', 'clock_rate:=100.0',
         '-p', 'command_timeout:=100.0'],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def stop_node(node: subprocess.Popen) -> None:
    """Stop the node with Ctrl-C; raise if it did not exit cleanly."""
    node.send_signal(signal.SIGINT)
    _, err = node.communicate(timeout=30)
    if node.returncode != 0:
        raise RuntimeError(f'the node exited with {node.returncode}: {err}')


def wait_until(predicate, timeout: float, what: str):
    """Poll until ``predicate`` is truthy; raise after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.001)
    raise RuntimeError(f'timed out waiting for {what}')


def throughput(probe: Probe, seconds: float) -> dict:
    """Return steps per wall second and the publication rates over ``seconds``."""
    node = start_node(0.0)
    try:
        wait_until(lambda: len(probe.status) > 10, 60.0, '~/status')
        with probe.lock:
            probe.status.clear()
            probe.joint_states.clear()
        time.sleep(seconds)
        with probe.lock:
            status, joint_states = list(probe.status), list(probe.joint_states)
    finally:
        stop_node(node)
    (w0, s0), (w1, s1) = status[0], status[-1]
    steps_per_s = (s1['steps'] - s0['steps']) / (w1 - w0)
    return {'steps_per_second': steps_per_s,
            'real_time_factor': (s1['time'] - s0['time']) / (w1 - w0),
            'joint_states_hz': (len(joint_states) - 1) / (joint_states[-1][0]
                                                          - joint_states[0][0]),
            'status_hz': (len(status) - 1) / (w1 - w0),
            'failed_steps': s1['failed_steps'],
            'wall_seconds': w1 - w0}


def latency(probe: Probe, rate: float, trials: int) -> np.ndarray:
    """Return the command -> /joint_states latencies [s] at ``rate``."""
    node = start_node(rate)
    out, rng = [], np.random.default_rng(0)
    try:
        wait_until(lambda: probe.commands.get_subscription_count() > 0 and probe.joint_states,
                   60.0, 'the node')
        for k in range(trials):
            v = SPEED if k % 2 == 0 else -SPEED
            command = np.zeros(N_JOINTS)
            command[0] = v
            with probe.lock:
                probe.joint_states.clear()
            sent = time.monotonic()
            probe.commands.publish(Float64MultiArray(data=command.tolist()))
            arrived = wait_until(lambda: next((t for t, v0 in list(probe.joint_states)
                                               if abs(v0 - v) < 1e-9), None), 10.0,
                                 '/joint_states showing the command')
            out.append(arrived - sent)
            time.sleep(0.02 + 0.15 * rng.random())     # a random phase against the steps
    finally:
        stop_node(node)
    return np.array(out)


def summary(values: np.ndarray) -> dict:
    """Return median, p90 and max in milliseconds."""
    ms = values * 1e3
    return {'median_ms': float(np.median(ms)), 'p90_ms': float(np.percentile(ms, 90)),
            'max_ms': float(np.max(ms)), 'trials': int(len(ms))}


def plot(latencies: dict, rates: dict, path: Path) -> None:
    """Write the latency histograms and the throughput figures."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for label, values in latencies.items():
        axes[0].hist(values * 1e3, bins=30, alpha=0.6, label=label)
    axes[0].set_xlabel('command -> /joint_states [ms]')
    axes[0].set_ylabel('trials')
    axes[0].legend()
    axes[0].set_title('latency')
    axes[1].bar(list(rates), list(rates.values()), color='tab:blue')
    axes[1].set_ylabel('per wall second')
    axes[1].set_title('real_time_rate 0, publishing at 50 Hz')
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    """Measure, print and save."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--seconds', type=float, default=10.0)
    parser.add_argument('--trials', type=int, default=40)
    parser.add_argument('--json', type=Path, default=Path('out/ros_node.json'))
    parser.add_argument('--png', type=Path, default=Path('out/ros_node.png'))
    args = parser.parse_args()
    os.environ['ROS_DOMAIN_ID'] = str(1 + os.getpid() % 100)
    os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
    context = rclpy.Context()
    rclpy.init(context=context)
    executor = SingleThreadedExecutor(context=context)
    probe = Probe(context)
    executor.add_node(probe)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        rates = throughput(probe, args.seconds)
        latencies = {f'real_time_rate {r:g}': latency(probe, r, args.trials) for r in (1.0, 0.0)}
    finally:
        executor.shutdown(timeout_sec=2.0)
        context.try_shutdown()
    print('quasistatic_sim on the arm scene (h = 0.1 s), publishing at 50 Hz')
    print(f"  steps per second (real_time_rate 0): {rates['steps_per_second']:.0f} "
          f"(real-time factor {rates['real_time_factor']:.0f}); /joint_states at "
          f"{rates['joint_states_hz']:.1f} Hz, ~/status at {rates['status_hz']:.1f} Hz; "
          f"{rates['failed_steps']} failed steps")
    print(f"{'latency':>24} {'median [ms]':>12} {'p90 [ms]':>9} {'max [ms]':>9}")
    stats = {label: summary(values) for label, values in latencies.items()}
    for label, s in stats.items():
        print(f"{label:>24} {s['median_ms']:12.1f} {s['p90_ms']:9.1f} {s['max_ms']:9.1f}")
    result = {'machine': {'platform': platform.platform(), 'python': platform.python_version(),
                          'cpus': os.cpu_count()},
              'throughput': rates, 'latency': stats}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2))
    args.png.parent.mkdir(parents=True, exist_ok=True)
    plot(latencies, {'steps': rates['steps_per_second'],
                     '/joint_states': rates['joint_states_hz']}, args.png)
    print(f'wrote {args.json} and {args.png}')


if __name__ == '__main__':
    main()
