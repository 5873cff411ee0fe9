"""
The ``quasistatic-drake-node`` console script: the node's main, or why it cannot start.

The ROS 2 wheels are in requirements-dev.txt; after ``make demo`` alone the
script says so (exit 2) instead of a ModuleNotFoundError traceback.
"""

import sys

from quasistatic_drake.optional import missing_message


def main(args=None) -> int:
    """Run the node (ros/node.py), or exit 2 naming the missing package."""
    try:
        import rclpy  # noqa: F401
    except ImportError:
        print(f"[quasistatic_sim] error: {missing_message('rclpy')}", file=sys.stderr)
        return 2
    from quasistatic_drake.ros.node import main as node_main
    return node_main(args)


if __name__ == "__main__":
    sys.exit(main())
