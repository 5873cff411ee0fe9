"""
Start the quasistatic simulator node with config/sim.yaml; optionally RViz.

    ros2 launch quasistatic_drake sim.launch.py [scenario:=PATH] [meshcat:=true|false]
        [rviz:=true|false] [publish_robot_tf:=true|false]

The other nodes run on the simulator's /clock (use_sim_time).  With
publish_robot_tf:=false, one robot_state_publisher per robot (namespace = the
robot's name) publishes the robot's TF and robot_description from a
ROS-compatible copy of its URDF (quasistatic_drake.ros.description).

What starts, with which parameters, is decided by
quasistatic_drake.ros.launch_plan.sim_nodes (tested without `launch`); this
file only declares its arguments and turns each planned node into a Node.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from quasistatic_drake.ros.launch_plan import SIM_ARGUMENTS, sim_nodes


def _nodes(context):
    """Return a Node for every node the plan starts with the performed arguments."""
    values = {a.name: LaunchConfiguration(a.name).perform(context) for a in SIM_ARGUMENTS}
    return [Node(**node.launch_kwargs()) for node in sim_nodes(values)]


def generate_launch_description():
    """Return the launch description (module docstring)."""
    return LaunchDescription(
        [DeclareLaunchArgument(a.name, default_value=a.default, description=a.description)
         for a in SIM_ARGUMENTS]
        + [OpaqueFunction(function=_nodes)])
