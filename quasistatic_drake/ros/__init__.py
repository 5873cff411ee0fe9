"""
The ROS 2 bridge: the ``quasistatic_sim`` node and its pure helpers.

Only :mod:`quasistatic_drake.ros.node` imports rclpy.  The other modules are
plain functions and dataclasses that the tests (and the launch files) use
without spinning anything:

* :mod:`.params`       the node's parameters, defaults and validation;
* :mod:`.frames`       TF frame and joint names from the Drake model;
* :mod:`.commands`     the velocity command buffer (checks, timeout);
* :mod:`.conversions`  Drake values to ROS messages;
* :mod:`.pacing`       real-time pacing of the steps;
* :mod:`.session`      the Diagram (QuasistaticPlant + Meshcat) and its Simulator;
* :mod:`.description`  a robot_description that urdfdom accepts, for launch files;
* :mod:`.launch_plan`  the nodes each launch file starts, from its arguments.
"""
