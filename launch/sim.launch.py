"""
Start the quasistatic simulator node with config/sim.yaml; optionally RViz.

    ros2 launch quasistatic_drake sim.launch.py [scenario:=PATH] [meshcat:=true|false]
        [rviz:=true|false] [publish_robot_tf:=true|false]

The other nodes run on the simulator's /clock (use_sim_time).  With
publish_robot_tf:=false, one robot_state_publisher per robot (namespace = the
robot's name) publishes the robot's TF and robot_description from a
ROS-compatible copy of its URDF (quasistatic_drake.ros.description).
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from quasistatic_drake.paths import package_share_dir
from quasistatic_drake.ros.description import robot_state_publisher_parameters
from quasistatic_drake.ros.params import DEFAULT_SCENARIO, scenario_path

SIM_PARAMS = str(package_share_dir() / 'config' / 'sim.yaml')


def _robot_state_publishers(context):
    if LaunchConfiguration('publish_robot_tf').perform(context).lower() == 'true':
        return []
    scenario = scenario_path(LaunchConfiguration('scenario').perform(context))
    return [Node(package='robot_state_publisher', executable='robot_state_publisher',
                 namespace=robot, output='screen', parameters=[parameters],
                 remappings=[('joint_states', '/joint_states')])
            for robot, parameters in robot_state_publisher_parameters(
                scenario, SIM_PARAMS).items()]


def generate_launch_description():
    """Return the launch description (module docstring)."""
    return LaunchDescription([
        DeclareLaunchArgument('scenario', default_value=DEFAULT_SCENARIO,
                              description='scenario YAML (a path or package:// URI)'),
        DeclareLaunchArgument('meshcat', default_value='true',
                              description='draw the scene in Meshcat'),
        DeclareLaunchArgument('rviz', default_value='false', description='start RViz'),
        DeclareLaunchArgument('publish_robot_tf', default_value='true',
                              description='the node publishes the robot links on /tf'),
        Node(package='quasistatic_drake', executable='quasistatic-drake-node',
             name='quasistatic_sim', output='screen',
             parameters=[SIM_PARAMS, {'scenario': LaunchConfiguration('scenario'),
                                      'meshcat': LaunchConfiguration('meshcat'),
                                      'publish_robot_tf': LaunchConfiguration(
                                          'publish_robot_tf')}]),
        OpaqueFunction(function=_robot_state_publishers),
        Node(package='rviz2', executable='rviz2', arguments=['-f', 'world'], output='screen',
             parameters=[{'use_sim_time': True}],
             condition=IfCondition(LaunchConfiguration('rviz'))),
    ])
