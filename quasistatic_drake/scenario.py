"""
Scenario: the YAML description of a quasistatic simulation, validated.

The schema (README, section "Scenario files") is::

    time_step: 0.1
    formulation: qp
    quasi_dynamic: false
    friction_directions: 4
    contact_detection_tolerance: 0.02
    gravity: [0, 0, -9.81]
    default_friction: 0.5            # optional
    quasi_static_inertia_ratio: 0.1  # optional, see formulations/qp.py
    miqp: {contact_stiffness, big_m, ...}   # optional: a formulation's block, read by
                                            # its settings type (formulations/miqp.py)
    robots: [{name, file, stiffness, initial_positions?, pose?, max_reference_lead?}]
    objects: [{name, file, initial_pose?, initial_positions?}]
    environment: [{name, file, pose?}]

Every error is a :class:`ScenarioError` that names the file, the key path
(``robots[0].stiffness``), what was wrong and how to fix it.  This module
imports neither Drake nor ROS.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Optional

import numpy as np
import yaml

from quasistatic_drake.formulations import registry
from quasistatic_drake.formulations.settings import (checked_settings, read_settings,
                                                     SettingsError)
from quasistatic_drake.paths import resolve_model_file

# Besides these, each formulation's name is a key: its settings block.
_TOP_KEYS = {
    "time_step", "formulation", "quasi_dynamic", "friction_directions",
    "contact_detection_tolerance", "gravity", "default_friction",
    "quasi_static_inertia_ratio", "robots", "objects", "environment",
}
_ROBOT_KEYS = {"name", "file", "stiffness", "initial_positions", "pose", "max_reference_lead"}
_OBJECT_KEYS = {"name", "file", "initial_pose", "initial_positions"}
_ENVIRONMENT_KEYS = {"name", "file", "pose"}
_POSE_KEYS = {"xyz", "rpy"}


class ScenarioError(ValueError):
    """A scenario that cannot be used; the message says where and how to fix it."""


@dataclass(frozen=True)
class Pose:
    """A pose given as translation xyz [m] and roll-pitch-yaw rpy [rad]."""

    xyz: np.ndarray = field(default_factory=lambda: np.zeros(3))
    rpy: np.ndarray = field(default_factory=lambda: np.zeros(3))


@dataclass(frozen=True)
class RobotSpec:
    """An actuated model: every joint is a spring of stiffness K (Pang & Tedrake 2021)."""

    name: str
    file: str
    stiffness: np.ndarray
    initial_positions: Optional[np.ndarray] = None
    pose: Optional[Pose] = None
    where: str = ""
    max_reference_lead: Optional[np.ndarray] = None   # per joint [m or rad]; None: defaults


@dataclass(frozen=True)
class ObjectSpec:
    """An unactuated model: its DOFs move only under contact and gravity."""

    name: str
    file: str
    initial_pose: Optional[Pose] = None
    initial_positions: Optional[np.ndarray] = None
    where: str = ""


@dataclass(frozen=True)
class EnvironmentSpec:
    """A model welded to the world at ``pose``."""

    name: str
    file: str
    pose: Pose = field(default_factory=Pose)
    where: str = ""


@dataclass(frozen=True)
class Scenario:
    """A validated scenario.  Build it with :meth:`from_yaml` or :meth:`from_dict`."""

    time_step: float
    robots: tuple[RobotSpec, ...]
    objects: tuple[ObjectSpec, ...] = ()
    environment: tuple[EnvironmentSpec, ...] = ()
    formulation: str = "qp"
    quasi_dynamic: bool = False
    friction_directions: int = 4
    contact_detection_tolerance: float = 0.02
    gravity: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, -9.81]))
    default_friction: float = 0.5
    quasi_static_inertia_ratio: float = 0.1
    # the formulations' settings blocks given in the file, by formulation name (read only)
    formulation_settings: Mapping[str, Any] = field(default_factory=dict)
    source: str = "<dict>"

    def settings(self, formulation: Optional[str] = None) -> Any:
        """
        Return the settings of a formulation (default: the scenario's formulation).

        A formulation whose block the file leaves out has its defaults.
        """
        name = formulation or self.formulation
        if name in self.formulation_settings:
            return self.formulation_settings[name]
        try:
            return registry.settings_type(name)()
        except KeyError as err:
            raise ScenarioError(f"{self.source}: formulation: {err.args[0]}") from None

    def with_formulation(self, formulation: Optional[str] = None, **changes: Any) -> "Scenario":
        """
        Return a copy that uses ``formulation`` (default: the same), its settings changed.

        ``changes`` are keys of that formulation's block, checked as in the
        file: ``scenario.with_formulation("miqp", backend="scip")``.
        """
        name = formulation or self.formulation
        current = self.settings(name)
        try:
            settings = checked_settings(replace(current, **changes), name)
        except TypeError:
            unknown = sorted(set(changes) - set(vars(current)))
            raise ScenarioError(f"{self.source}: {name}: unknown key(s) {unknown}. Allowed "
                                f"keys: {sorted(vars(current))}.") from None
        except SettingsError as err:
            raise ScenarioError(f"{self.source}: {err}") from None
        blocks = {**self.formulation_settings, name: settings}
        return replace(self, formulation=name, formulation_settings=blocks)

    @staticmethod
    def from_yaml(path: str | os.PathLike) -> "Scenario":
        """Load and validate a scenario YAML file."""
        path = Path(path)
        if not path.is_file():
            raise ScenarioError(
                f"{path}: the scenario file does not exist. "
                "Fix: pass the path of an existing YAML file.")
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError as err:
            raise ScenarioError(f"{path}: not valid YAML: {err}\nFix: correct the "
                                "syntax at the line and column shown.") from err
        return Scenario.from_dict(data, base_dir=path.parent, source=str(path))

    @staticmethod
    def from_dict(data: Any, base_dir: str | os.PathLike = ".",
                  source: str = "<dict>") -> "Scenario":
        """Validate a scenario given as a dict (the parsed YAML)."""
        return _Reader(source, Path(base_dir)).scenario(data)

    def model_names(self) -> list[str]:
        """Names of all models: robots, objects, then environment."""
        return ([r.name for r in self.robots] + [o.name for o in self.objects]
                + [e.name for e in self.environment])


class _Reader:
    """Reads one scenario dict, tracking the key path for error messages."""

    def __init__(self, source: str, base_dir: Path):
        self.source = source
        self.base_dir = base_dir

    def fail(self, where: str, message: str) -> ScenarioError:
        return ScenarioError(f"{self.source}: {where}: {message}")

    def check_keys(self, data: Any, allowed: set[str], where: str,
                   required: tuple[str, ...] = ()) -> dict:
        if not isinstance(data, dict):
            raise self.fail(where or "top level",
                            f"expected a mapping, got {type(data).__name__}.")
        unknown = sorted(set(map(str, data)) - allowed)
        if unknown:
            raise self.fail(where or "top level",
                            f"unknown key(s) {unknown}. Allowed keys: {sorted(allowed)}.")
        for key in required:
            if key not in data:
                raise self.fail(_join(where, key), "is required but missing.")
        return data

    def number(self, value: Any, where: str, positive: bool = False,
               nonnegative: bool = False) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(where, f"expected a number, got {value!r}.")
        value = float(value)
        if not math.isfinite(value):
            raise self.fail(where, f"must be finite, got {value}.")
        if positive and value <= 0.0:
            raise self.fail(where, f"must be > 0, got {value}.")
        if nonnegative and value < 0.0:
            raise self.fail(where, f"must be >= 0, got {value}.")
        return value

    def vector(self, value: Any, where: str, size: Optional[int] = None,
               positive: bool = False) -> np.ndarray:
        if not isinstance(value, (list, tuple)):
            raise self.fail(where, f"expected a list of numbers, got {value!r}.")
        out = np.array([self.number(x, f"{where}[{i}]", positive=positive)
                        for i, x in enumerate(value)], dtype=float)
        if size is not None and out.size != size:
            raise self.fail(where, f"expected {size} numbers, got {out.size}.")
        return out

    def flag(self, value: Any, where: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(where, f"expected true or false, got {value!r}.")
        return value

    def pose(self, data: Any, where: str) -> Pose:
        self.check_keys(data, _POSE_KEYS, where)
        return Pose(xyz=self.vector(data.get("xyz", [0, 0, 0]), _join(where, "xyz"), 3),
                    rpy=self.vector(data.get("rpy", [0, 0, 0]), _join(where, "rpy"), 3))

    def name(self, value: Any, where: str) -> str:
        if not isinstance(value, str) or not value or "::" in value:
            raise self.fail(where, f"expected a non-empty name without '::', got {value!r}.")
        return value

    def file(self, value: Any, where: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(where, f"expected a file path or package:// URI, got {value!r}.")
        try:
            return resolve_model_file(value, self.base_dir)
        except FileNotFoundError as err:
            raise self.fail(where, str(err)) from err

    def model_list(self, data: Any, key: str) -> list:
        if data is None:
            return []
        if not isinstance(data, list):
            raise self.fail(key, f"expected a list of models, got {type(data).__name__}.")
        return data

    def robot(self, data: Any, where: str) -> RobotSpec:
        self.check_keys(data, _ROBOT_KEYS, where, ("name", "file", "stiffness"))
        initial = data.get("initial_positions")
        return RobotSpec(
            name=self.name(data["name"], _join(where, "name")),
            file=self.file(data["file"], _join(where, "file")),
            stiffness=self.vector(data["stiffness"], _join(where, "stiffness"), positive=True),
            initial_positions=(None if initial is None else
                               self.vector(initial, _join(where, "initial_positions"))),
            pose=None if "pose" not in data else self.pose(data["pose"], _join(where, "pose")),
            where=f"{self.source}: {where}",
            max_reference_lead=(None if "max_reference_lead" not in data else self.vector(
                data["max_reference_lead"], _join(where, "max_reference_lead"), positive=True)))

    def object(self, data: Any, where: str) -> ObjectSpec:
        self.check_keys(data, _OBJECT_KEYS, where, ("name", "file"))
        if "initial_pose" in data and "initial_positions" in data:
            raise self.fail(where, "give either initial_pose (free bodies) or "
                            "initial_positions (jointed objects), not both.")
        initial = data.get("initial_positions")
        return ObjectSpec(
            name=self.name(data["name"], _join(where, "name")),
            file=self.file(data["file"], _join(where, "file")),
            initial_pose=(None if "initial_pose" not in data else
                          self.pose(data["initial_pose"], _join(where, "initial_pose"))),
            initial_positions=(None if initial is None else
                               self.vector(initial, _join(where, "initial_positions"))),
            where=f"{self.source}: {where}")

    def environment(self, data: Any, where: str) -> EnvironmentSpec:
        self.check_keys(data, _ENVIRONMENT_KEYS, where, ("name", "file"))
        return EnvironmentSpec(
            name=self.name(data["name"], _join(where, "name")),
            file=self.file(data["file"], _join(where, "file")),
            pose=self.pose(data.get("pose", {}), _join(where, "pose")),
            where=f"{self.source}: {where}")

    def scenario(self, data: Any) -> Scenario:
        self.check_keys(data, _TOP_KEYS | set(registry.names()), "", ("time_step",))
        formulation = data.get("formulation", "qp")
        if formulation not in registry.names():
            raise self.fail("formulation", f"unknown formulation {formulation!r}. "
                            f"Available: {list(registry.names())}.")
        n_d = data.get("friction_directions", 4)
        if isinstance(n_d, bool) or not isinstance(n_d, int) or n_d < 2 or n_d % 2:
            raise self.fail("friction_directions", f"expected an even integer >= 2 "
                            f"(a balanced set, Pang & Tedrake 2018, eq. 4), got {n_d!r}.")
        robots = [self.robot(r, f"robots[{i}]")
                  for i, r in enumerate(self.model_list(data.get("robots"), "robots"))]
        objects = [self.object(o, f"objects[{i}]")
                   for i, o in enumerate(self.model_list(data.get("objects"), "objects"))]
        environment = [self.environment(e, f"environment[{i}]") for i, e in
                       enumerate(self.model_list(data.get("environment"), "environment"))]
        scenario = Scenario(
            time_step=self.number(data["time_step"], "time_step", positive=True),
            formulation=formulation,
            quasi_dynamic=self.flag(data.get("quasi_dynamic", False), "quasi_dynamic"),
            friction_directions=n_d,
            contact_detection_tolerance=self.number(
                data.get("contact_detection_tolerance", 0.02),
                "contact_detection_tolerance", positive=True),
            gravity=self.vector(data.get("gravity", [0.0, 0.0, -9.81]), "gravity", 3),
            default_friction=self.number(data.get("default_friction", 0.5),
                                         "default_friction", nonnegative=True),
            quasi_static_inertia_ratio=self.number(
                data.get("quasi_static_inertia_ratio", 0.1),
                "quasi_static_inertia_ratio", positive=True),
            formulation_settings=self.formulation_blocks(data),
            robots=tuple(robots), objects=tuple(objects), environment=tuple(environment),
            source=self.source)
        self.check_models(scenario)
        return scenario

    def formulation_blocks(self, data: dict) -> Mapping[str, Any]:
        """Read each formulation's block in the file with that formulation's settings type."""
        blocks = {}
        for name in registry.names():
            if name in data:
                try:
                    blocks[name] = read_settings(registry.settings_type(name), data[name], name)
                except SettingsError as err:
                    raise self.fail(err.key, err.message) from None
        return blocks

    def check_models(self, scenario: Scenario) -> None:
        """Refuse a repeated model name (naming both entries) and a scenario that cannot move."""
        first: dict[str, str] = {}
        for key in ("robots", "objects", "environment"):
            for i, spec in enumerate(getattr(scenario, key)):
                where = f"{key}[{i}].name"
                if spec.name in first:
                    raise self.fail(where, f"model names must be unique; repeated: "
                                    f"[{spec.name!r}] (also {first[spec.name]}). "
                                    "Fix: rename one of them.")
                first[spec.name] = where
        if not first:
            raise self.fail("top level", "the scenario has no models. "
                            "Fix: add at least one entry under robots or objects.")
        if not scenario.robots and not scenario.objects:
            raise self.fail("robots, objects", "both are empty, so nothing can move: every "
                            "model is welded. Fix: add a robot or an object.")


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key
