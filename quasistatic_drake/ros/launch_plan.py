"""
What launch/sim.launch.py and launch/view_robot.launch.py start, as plain data.

The launch files are thin: they declare the arguments of :data:`SIM_ARGUMENTS`
(or :data:`VIEW_ROBOT_ARGUMENTS`), perform them into a dict of strings in one
``OpaqueFunction``, and turn each :class:`NodeLaunch` that :func:`sim_nodes`
(or :func:`view_robot_nodes`) returns into one ``launch_ros.actions.Node``
with :meth:`NodeLaunch.launch_kwargs`.  Everything they decide is here, so it
is tested without ``launch`` (which is not on PyPI):

* the argument values are checked first: an unknown name, or a boolean that is
  not true or false, raises :class:`LaunchArgumentError` with the fix;
* the simulator node's parameters (the params file, then the overrides from
  the arguments; later entries win, as in ROS) are checked with the node's own
  :func:`~quasistatic_drake.ros.params.node_params` before any node is made;
* robot_state_publisher gets the parameters of
  :func:`quasistatic_drake.ros.description.robot_state_publisher_parameters`
  (its robot's URDF made urdfdom-friendly, the node's frame_prefix).

This module imports neither ``launch``, ``launch_ros``, rclpy, pydrake nor numba.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping, Optional, Sequence, Union

import yaml

from quasistatic_drake.paths import package_share_dir
from quasistatic_drake.ros.description import robot_state_publisher_parameters
from quasistatic_drake.ros.params import DEFAULT_SCENARIO, NODE_NAME, node_params, scenario_path

#: A ``parameters`` entry of a node: a params file path, or {name: value}.
ParameterEntry = Union[str, Mapping[str, Any]]

#: The params file of the simulator node, relative to the package's share directory.
SIM_PARAMS_FILE = Path('config') / 'sim.yaml'
_BOOLEANS = {'true': True, 'false': False}


class LaunchArgumentError(ValueError):
    """A launch argument a launch file cannot use; the message says which and how to fix it."""


@dataclass(frozen=True)
class LaunchArgument:
    """
    One argument of a launch file (``DeclareLaunchArgument``).

    ``default`` is a string, as every launch argument value is; ``boolean``
    arguments take true or false (any case).
    """

    name: str
    default: str
    description: str
    boolean: bool = False


@dataclass(frozen=True)
class NodeLaunch:
    """
    One node a launch file starts: the keyword arguments of ``launch_ros.actions.Node``.

    ``parameters`` are applied in order, later entries win: a params file path
    (str) or a {name: value} mapping with typed values.  ``remappings`` are
    (from, to) pairs.  Lists given are stored as tuples and mappings as
    read-only copies, so a NodeLaunch does not change.
    """

    package: str
    executable: str
    name: Optional[str] = None
    namespace: Optional[str] = None
    parameters: tuple[ParameterEntry, ...] = ()
    remappings: tuple[tuple[str, str], ...] = ()
    arguments: tuple[str, ...] = ()
    output: str = 'screen'

    def __post_init__(self):
        """Store the sequences as tuples and the parameter mappings as read-only copies."""
        parameters = tuple(p if isinstance(p, str) else MappingProxyType(dict(p))
                           for p in self.parameters)
        object.__setattr__(self, 'parameters', parameters)
        object.__setattr__(self, 'remappings', tuple(tuple(r) for r in self.remappings))
        object.__setattr__(self, 'arguments', tuple(self.arguments))

    def launch_kwargs(self) -> dict[str, Any]:
        """Return the keyword arguments of ``launch_ros.actions.Node`` (plain lists and dicts)."""
        return {'package': self.package, 'executable': self.executable,
                'name': self.name, 'namespace': self.namespace,
                'parameters': [p if isinstance(p, str) else dict(p) for p in self.parameters],
                'remappings': [tuple(r) for r in self.remappings],
                'arguments': list(self.arguments), 'output': self.output}


SIM_ARGUMENTS = (
    LaunchArgument('scenario', DEFAULT_SCENARIO, 'scenario YAML (a path or package:// URI)'),
    LaunchArgument('meshcat', 'true', 'draw the scene in Meshcat', boolean=True),
    LaunchArgument('rviz', 'false', 'start RViz', boolean=True),
    LaunchArgument('publish_robot_tf', 'true', 'the node publishes the robot links on /tf',
                   boolean=True),
)

VIEW_ROBOT_ARGUMENTS = (
    LaunchArgument('scenario', DEFAULT_SCENARIO, 'scenario YAML whose robots to show'),
    LaunchArgument('gui', 'true', 'joint sliders (joint_state_publisher_gui)', boolean=True),
)


def default_sim_params() -> Path:
    """Return the simulator node's params file: config/sim.yaml of the package."""
    return package_share_dir() / SIM_PARAMS_FILE


def sim_nodes(arguments: Mapping[str, str],
              sim_params: Union[str, Path, None] = None) -> list[NodeLaunch]:
    """
    Return the nodes sim.launch.py starts for these launch-argument values.

    In order: the simulator node ``quasistatic_sim`` with the params file
    (``sim_params``, default :func:`default_sim_params`) overridden by the
    scenario, meshcat and publish_robot_tf arguments; with
    publish_robot_tf:=false, one robot_state_publisher per robot of the
    scenario (namespace = the robot's name, on /joint_states and sim time);
    with rviz:=true, rviz2 on sim time.  Missing arguments take their
    defaults.  Raises LaunchArgumentError for a bad argument and ParameterError
    for a parameter the node would refuse.
    """
    values = _checked(arguments, SIM_ARGUMENTS, 'sim.launch.py')
    params_file = str(default_sim_params() if sim_params is None else sim_params)
    overrides = {'scenario': values['scenario'], 'meshcat': values['meshcat'],
                 'publish_robot_tf': values['publish_robot_tf']}
    simulator = NodeLaunch(package='quasistatic_drake', executable='quasistatic-drake-node',
                           name=NODE_NAME, parameters=(params_file, overrides))
    node_params(node_parameter_values(simulator.parameters))   # ParameterError if bad
    nodes = [simulator]
    if not values['publish_robot_tf']:
        by_robot = robot_state_publisher_parameters(scenario_path(values['scenario']),
                                                    params_file)
        nodes += [NodeLaunch(package='robot_state_publisher',
                             executable='robot_state_publisher', namespace=robot,
                             parameters=(parameters,),
                             remappings=(('joint_states', '/joint_states'),))
                  for robot, parameters in by_robot.items()]
    if values['rviz']:
        nodes.append(NodeLaunch(package='rviz2', executable='rviz2', arguments=('-f', 'world'),
                                parameters=({'use_sim_time': True},)))
    return nodes


def view_robot_nodes(arguments: Mapping[str, str],
                     sim_params: Union[str, Path, None] = None) -> list[NodeLaunch]:
    """
    Return the nodes view_robot.launch.py starts for these launch-argument values.

    Per robot of the scenario, in its namespace: robot_state_publisher (wall
    time, the frame_prefix of ``sim_params``) and joint_state_publisher_gui,
    or joint_state_publisher with gui:=false; then rviz2.  Missing arguments
    take their defaults.  Raises LaunchArgumentError for a bad argument.
    """
    values = _checked(arguments, VIEW_ROBOT_ARGUMENTS, 'view_robot.launch.py')
    params_file = str(default_sim_params() if sim_params is None else sim_params)
    sliders = 'joint_state_publisher_gui' if values['gui'] else 'joint_state_publisher'
    nodes = []
    by_robot = robot_state_publisher_parameters(scenario_path(values['scenario']), params_file)
    for robot, parameters in by_robot.items():
        nodes += [NodeLaunch(package='robot_state_publisher', executable='robot_state_publisher',
                             namespace=robot,
                             parameters=({**parameters, 'use_sim_time': False},)),
                  NodeLaunch(package=sliders, executable=sliders, namespace=robot,
                             output='log')]
    nodes.append(NodeLaunch(package='rviz2', executable='rviz2', arguments=('-f', 'world')))
    return nodes


def node_parameter_values(parameters: Sequence[ParameterEntry],
                          node_name: str = NODE_NAME) -> dict[str, Any]:
    """
    Return the parameter values a node gets from its ``parameters`` entries.

    As ROS applies them: in order, later entries win; a params file gives the
    ``ros__parameters`` of its ``/**``, ``<node_name>`` and ``/<node_name>``
    keys, in the file's order.
    """
    keys = ('/**', node_name, '/' + node_name)
    values: dict[str, Any] = {}
    for entry in parameters:
        if isinstance(entry, str):
            data = yaml.safe_load(Path(entry).read_text()) or {}
            for key, section in data.items():
                if key in keys:
                    values.update((section or {}).get('ros__parameters') or {})
        else:
            values.update(entry)
    return values


def _checked(arguments: Mapping[str, str], declared: Sequence[LaunchArgument],
             launch_file: str) -> dict[str, Any]:
    """Return the arguments' values (defaults filled in, booleans as bool), checked."""
    known = {a.name: a for a in declared}
    unknown = sorted(set(arguments) - set(known))
    if unknown:
        raise LaunchArgumentError(f"{launch_file}: unknown launch argument(s) {unknown}. "
                                  f"Its arguments are {list(known)}.")
    values: dict[str, Any] = {}
    for argument in declared:
        value = arguments.get(argument.name, argument.default)
        expected = 'true or false' if argument.boolean else 'a non-empty string'
        fix = (f"Fix: ros2 launch quasistatic_drake {launch_file} {argument.name}:="
               f"{'true' if argument.boolean else argument.default}")
        if not isinstance(value, str) or not value.strip():
            raise LaunchArgumentError(f"{launch_file}: launch argument '{argument.name}' must be "
                                      f"{expected}, got {value!r}. {fix}")
        if argument.boolean:
            if value.strip().lower() not in _BOOLEANS:
                raise LaunchArgumentError(f"{launch_file}: launch argument '{argument.name}' "
                                          f"must be true or false, got {value!r}. {fix} "
                                          "(or false).")
            value = _BOOLEANS[value.strip().lower()]
        values[argument.name] = value
    return values
