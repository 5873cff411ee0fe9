"""
The parameters of the ``quasistatic_sim`` node: names, defaults, checks.

This is the one place that lists them.  The node declares exactly
:data:`PARAMETERS`; the launch-file tests check that the launch files and
``config/sim.yaml`` use only these names, with values :func:`node_params`
accepts.  No rclpy here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Mapping

from quasistatic_drake.paths import PACKAGE_URI_PREFIX, package_share_dir

NODE_NAME = "quasistatic_sim"
DEFAULT_SCENARIO = PACKAGE_URI_PREFIX + "config/arm_pick_place.yaml"


class ParameterError(ValueError):
    """A parameter value the node cannot use; the message says which and how to fix it."""


@dataclass(frozen=True)
class NodeParams:
    """
    The node's parameters, checked.

    ``real_time_rate``: simulated seconds per wall second, 0 = as fast as possible.
    ``publish_rate``: /joint_states, /tf and ~/status per wall second [Hz].
    ``clock_rate``: /clock messages per wall second [Hz].
    ``command_timeout``: wall seconds after which a joint's command is stale (zero).
    ``meshcat_port``: 0 = the first free port from 7000.
    ``meshcat_host``: the interface Meshcat listens on ("*": every one).
    ``frame_prefix``: put before every TF frame name except the root ``world``.
    ``model_prefix``: each link's TF frame is ``<model instance>/<link>`` (false:
    the bare link name, qualified only where two models share it).
    ``publish_robot_tf``: world -> robot links on /tf (false: robot_state_publisher's job).
    """

    scenario: str = DEFAULT_SCENARIO
    real_time_rate: float = 1.0
    publish_rate: float = 50.0
    clock_rate: float = 100.0
    command_timeout: float = 0.5
    meshcat: bool = True
    meshcat_port: int = 0
    meshcat_host: str = "localhost"
    frame_prefix: str = ""
    model_prefix: bool = True
    publish_robot_tf: bool = True


#: Parameters that may change while the node runs (``ros2 param set``).
DYNAMIC = ("real_time_rate", "command_timeout")

DESCRIPTIONS = {
    "scenario": "scenario YAML: a path, or package://quasistatic_drake/<path>",
    "real_time_rate": "simulated seconds per wall second; 0 = as fast as possible",
    "publish_rate": "/joint_states, /tf and ~/status per wall second [Hz]",
    "clock_rate": "/clock messages per wall second [Hz]",
    "command_timeout": "a joint's velocity command is zeroed this many wall seconds after it "
                       "arrived [s]",
    "meshcat": "draw the scene in Meshcat (the URL is logged)",
    "meshcat_port": "Meshcat's port; 0 = the first free one from 7000",
    "meshcat_host": "the interface Meshcat listens on: localhost (this machine only), an "
                    "address, or '*' (every interface)",
    "frame_prefix": "prefix of every TF frame except 'world'",
    "model_prefix": "TF frames and robot_description links are <model>/<link> (false: bare "
                    "link names, <model>/<link> only where two models share a link name)",
    "publish_robot_tf": "publish world -> robot links on /tf (false: leave them to "
                        "robot_state_publisher)",
}

#: name -> default, in declaration order.
PARAMETERS = {f.name: f.default for f in fields(NodeParams)}


def node_params(values: Mapping[str, Any]) -> NodeParams:
    """Check parameter values (missing ones take defaults); raise ParameterError."""
    unknown = sorted(set(values) - set(PARAMETERS))
    if unknown:
        raise ParameterError(f"unknown parameter(s) {unknown} for node '{NODE_NAME}'. "
                             f"Its parameters are {list(PARAMETERS)}.")
    merged = {**PARAMETERS, **values}
    return NodeParams(
        scenario=_text(merged, "scenario", allow_empty=False),
        real_time_rate=_rate(merged, "real_time_rate", zero_allowed=True),
        publish_rate=_rate(merged, "publish_rate", zero_allowed=False),
        clock_rate=_rate(merged, "clock_rate", zero_allowed=False),
        command_timeout=_number(merged, "command_timeout", minimum=0.0, strict=True),
        meshcat=_flag(merged, "meshcat"),
        meshcat_port=_port(merged, "meshcat_port"),
        meshcat_host=_text(merged, "meshcat_host", allow_empty=False),
        frame_prefix=_text(merged, "frame_prefix", allow_empty=True),
        model_prefix=_flag(merged, "model_prefix"),
        publish_robot_tf=_flag(merged, "publish_robot_tf"))


def scenario_path(value: str) -> Path:
    """Resolve the ``scenario`` parameter: package://quasistatic_drake/... or a file path."""
    if value.startswith(PACKAGE_URI_PREFIX):
        return package_share_dir() / value[len(PACKAGE_URI_PREFIX):]
    return Path(value).expanduser()


def _fail(name: str, value: Any, expected: str) -> ParameterError:
    return ParameterError(f"parameter '{name}' of node '{NODE_NAME}' must be {expected}, got "
                          f"{value!r}. Fix: pass e.g. --ros-args -p {name}:="
                          f"{_example(name)}, or set it in the params file.")


def _example(name: str) -> str:
    default = PARAMETERS[name]
    if isinstance(default, bool):
        return str(default).lower()
    return str(default) if default != "" else "my_"


def _number(values: Mapping[str, Any], name: str, minimum: float, strict: bool) -> float:
    value = values[name]
    relation = ">" if strict else ">="
    expected = f"a finite number {relation} {minimum:g}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(name, value, expected)
    value = float(value)
    if not math.isfinite(value) or value < minimum or (strict and value == minimum):
        raise _fail(name, value, expected)
    return value


# Rates (real_time_rate, publish_rate, clock_rate) lie within these bounds: a timer's period
# is a whole number of nanoseconds (rclpy raised TypeError at 1e-300, and the node died).
RATE_RANGE = (1e-6, 1e6)


def _rate(values: Mapping[str, Any], name: str, zero_allowed: bool) -> float:
    low, high = RATE_RANGE
    expected = (f"{'0 (as fast as possible) or ' if zero_allowed else ''}a number from "
                f"{low:g} to {high:g}")
    value = _number(values, name, minimum=0.0, strict=not zero_allowed)
    if (value != 0.0 or not zero_allowed) and not low <= value <= high:
        raise _fail(name, value, expected)
    return value


def _flag(values: Mapping[str, Any], name: str) -> bool:
    value = values[name]
    if not isinstance(value, bool):
        raise _fail(name, value, "true or false")
    return value


def _text(values: Mapping[str, Any], name: str, allow_empty: bool) -> str:
    value = values[name]
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        raise _fail(name, value, "a string" if allow_empty else "a non-empty string")
    return value


def _port(values: Mapping[str, Any], name: str) -> int:
    value = values[name]
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
        raise _fail(name, value, "an integer port in 0..65535 (0: the first free from 7000)")
    return value
