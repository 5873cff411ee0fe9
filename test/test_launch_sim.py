"""
A real launch_testing test of launch/sim.launch.py (runs on a ROS 2 install).

`launch_testing`, `launch` and `launch_ros` are not on PyPI, so where they
are missing this module is skipped with that reason; it is never faked.  On
a ROS 2 install (with this package built by colcon) it launches sim.launch.py
headless and checks that /joint_states arrives with the arm's joint names.
"""

import os
import time
import unittest

import pytest

launch_testing = pytest.importorskip(
    'launch_testing', reason='launch_testing is not installed (it is not on PyPI; install '
    'ros-<distro>-launch-testing on a ROS 2 install to run launch/sim.launch.py)')
import launch  # noqa: E402
from launch.launch_description_sources import PythonLaunchDescriptionSource  # noqa: E402
import launch_testing.actions  # noqa: E402
import rclpy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

LAUNCH_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           'launch', 'sim.launch.py')


@pytest.mark.launch_test
def generate_test_description():
    """Launch sim.launch.py without Meshcat or RViz."""
    return launch.LaunchDescription([
        launch.actions.IncludeLaunchDescription(
            PythonLaunchDescriptionSource(LAUNCH_FILE),
            launch_arguments={'meshcat': 'false', 'rviz': 'false'}.items()),
        launch_testing.actions.ReadyToTest(),
    ])


class TestSimLaunch(unittest.TestCase):
    """The launched node publishes /joint_states with the arm's URDF joint names."""

    def test_joint_states(self):
        rclpy.init()
        node = rclpy.create_node('launch_probe')
        received = []
        node.create_subscription(JointState, '/joint_states', received.append, 10)
        try:
            deadline = time.monotonic() + 60.0
            while not received and time.monotonic() < deadline:
                rclpy.spin_once(node, timeout_sec=0.1)
        finally:
            node.destroy_node()
            rclpy.shutdown()
        self.assertTrue(received, 'no /joint_states from sim.launch.py')
        self.assertEqual(received[0].name[0], 'iiwa_joint_1')
