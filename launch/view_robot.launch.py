"""
Show a scenario's robots in RViz without simulating: robot_state_publisher + sliders.

    ros2 launch quasistatic_drake view_robot.launch.py [scenario:=PATH] [gui:=true|false]

robot_state_publisher gets a ROS-compatible copy of each robot's URDF
(quasistatic_drake.ros.description: Drake capsules become cylinders and
spheres); joint_state_publisher(_gui) publishes its joint states.  Both run
in the robot's namespace (``/<robot>/robot_description``, ``/<robot>/joint_states``).

What starts, with which parameters, is decided by
quasistatic_drake.ros.launch_plan.view_robot_nodes (tested without `launch`);
this file only declares its arguments and turns each planned node into a Node.
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from quasistatic_drake.ros.launch_plan import VIEW_ROBOT_ARGUMENTS, view_robot_nodes


def _nodes(context):
    """Return a Node for every node the plan starts with the performed arguments."""
    values = {a.name: LaunchConfiguration(a.name).perform(context)
              for a in VIEW_ROBOT_ARGUMENTS}
    return [Node(**node.launch_kwargs()) for node in view_robot_nodes(values)]


def generate_launch_description():
    """Return the launch description (module docstring)."""
    return LaunchDescription(
        [DeclareLaunchArgument(a.name, default_value=a.default, description=a.description)
         for a in VIEW_ROBOT_ARGUMENTS]
        + [OpaqueFunction(function=_nodes)])
