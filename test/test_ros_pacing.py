"""
The node's pacing: at real_time_rate > 0 the simulated clock keeps pace with the wall clock.

In a module of its own: the node of test_ros_node.py (module-scoped, running
as fast as it can) publishes on the same ROS domain while that module runs.
"""

import os
import time

import pytest
from rclpy.parameter import Parameter

from conftest import REPO_ROOT
from test_ros_helpers import RosHarness

TWO_PADS = os.path.join(REPO_ROOT, 'config', 'two_pads_lift.yaml')


def sim_rate(probe, sim_seconds):
    """Return simulated over wall time while the node's ~/status time advances by sim_seconds."""
    start = probe.latest_status()['time']
    wall = time.monotonic()
    probe.wait_status(lambda s: s['time'] >= start + sim_seconds,
                      f'~/status time {start + sim_seconds:g}')
    return (probe.latest_status()['time'] - start) / (time.monotonic() - wall)


def test_real_time_rate_paces_the_steps_and_a_live_change_applies():
    """At real_time_rate 1 the clock keeps wall time; set to 3 while running, 3 times faster."""
    ros = RosHarness({'scenario': TWO_PADS, 'meshcat': False, 'real_time_rate': 1.0,
                      'publish_rate': 50.0})
    try:
        probe = ros.probe
        probe.wait_status(lambda s: s['steps'] >= 2, 'two steps')
        assert sim_rate(probe, 2.0) == pytest.approx(1.0, rel=0.2)
        result = ros.node.set_parameters([Parameter('real_time_rate', value=3.0)])[0]
        assert result.successful and ros.node.params.real_time_rate == 3.0
        assert sim_rate(probe, 6.0) == pytest.approx(3.0, rel=0.2)
    finally:
        ros.close()
