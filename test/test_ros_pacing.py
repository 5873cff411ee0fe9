"""
The node's pacing: at real_time_rate > 0 the simulated clock never runs ahead of the wall's.

The pacer's arithmetic (due steps against injected wall times) is checked
in test_ros_units.py; here the running node: its timer and pacer take a live
rate change, and its clock keeps below rate x wall time at every status
while it advances (a loaded machine may only make it slower: the test
waits on the clock's progress, not on a wall-clock rate).

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


def advance_within_the_rate(ros, sim_seconds, rate, wall_start, sim_start):
    """
    Wait until ~/status time passes sim_start + sim_seconds; check it never ran ahead.

    The pacer takes step n no earlier than its anchor + n h / rate: the
    simulated time at any wall time w is at most sim_start + rate (w -
    wall_start) + h, where wall_start was read before the anchor was set.
    A loaded machine can only make it slower; the wait is for the event.
    """
    h = ros.node.session.time_step
    while True:
        status = ros.probe.wait_status(lambda s: s['time'] > sim_start, 'a newer status',
                                       timeout=120)
        wall = time.monotonic()
        assert status['time'] <= sim_start + rate * (wall - wall_start) + h + 1e-9
        if status['time'] >= sim_start + sim_seconds:
            return status['time']
        sim_start_seen = status['time']
        ros.probe.wait_status(lambda s, t=sim_start_seen: s['time'] > t, 'progress',
                              timeout=120)


def test_real_time_rate_paces_the_steps_and_a_live_change_applies():
    """At real_time_rate 1 the clock never runs ahead of the wall; set to 3, it is 3 times."""
    wall_start = time.monotonic()
    ros = RosHarness({'scenario': TWO_PADS, 'meshcat': False, 'real_time_rate': 1.0,
                      'publish_rate': 50.0})
    try:
        assert ros.node._step_timer.timer_period_ns == pytest.approx(0.1e9)
        advance_within_the_rate(ros, 1.0, 1.0, wall_start, 0.0)
        wall_change = time.monotonic()
        result = ros.node.set_parameters([Parameter('real_time_rate', value=3.0)])[0]
        sim_change = ros.node.session.time
        assert result.successful and ros.node.params.real_time_rate == 3.0
        assert ros.node.pacer.rate == 3.0
        assert ros.node._step_timer.timer_period_ns == pytest.approx(0.1e9 / 3.0)
        advance_within_the_rate(ros, 2.0, 3.0, wall_change, sim_change)
    finally:
        ros.close()
