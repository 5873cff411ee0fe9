"""
Show a scenario's robots in RViz without simulating: robot_state_publisher + sliders.

    ros2 launch quasistatic_drake view_robot.launch.py [scenario:=PATH] [gui:=true|false]

robot_state_publisher gets a ROS-compatible copy of each robot's URDF
(quasistatic_drake.ros.description: Drake capsules become cylinders and
spheres); joint_state_publisher(_gui) publishes its joint states.  Both run
in the robot's namespace (``/<robot>/robot_description``, ``/<robot>/joint_states``).
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from quasistatic_drake.paths import package_share_dir
from quasistatic_drake.ros.description import robot_state_publisher_parameters
from quasistatic_drake.ros.params import DEFAULT_SCENARIO, scenario_path

SIM_PARAMS = str(package_share_dir() / 'config' / 'sim.yaml')


def _robot_nodes(context):
    """Per robot, in its namespace: robot_state_publisher and joint sliders."""
    scenario = scenario_path(LaunchConfiguration('scenario').perform(context))
    sliders = ('joint_state_publisher_gui'
               if LaunchConfiguration('gui').perform(context).lower() == 'true'
               else 'joint_state_publisher')
    nodes = []
    for robot, parameters in robot_state_publisher_parameters(scenario, SIM_PARAMS).items():
        nodes += [Node(package='robot_state_publisher', executable='robot_state_publisher',
                       namespace=robot, output='screen',
                       parameters=[{**parameters, 'use_sim_time': False}]),
                  Node(package=sliders, executable=sliders, namespace=robot)]
    return nodes


def generate_launch_description():
    """Return the launch description (module docstring)."""
    return LaunchDescription([
        DeclareLaunchArgument('scenario', default_value=DEFAULT_SCENARIO,
                              description='scenario YAML whose robots to show'),
        DeclareLaunchArgument('gui', default_value='true',
                              description='joint sliders (joint_state_publisher_gui)'),
        OpaqueFunction(function=_robot_nodes),
        Node(package='rviz2', executable='rviz2', arguments=['-f', 'world'], output='screen'),
    ])
