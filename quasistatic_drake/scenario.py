"""
Scenario: the YAML description of a quasistatic simulation, validated.

The keys, their types, defaults and checks are written once, as the
dataclasses below (schema.py reads them); the README's "Scenario files"
shows the schema.  In short::

    include: base.yaml               # optional: a scenario (or list) this one overrides
    time_step: 0.1
    formulation: qp
    packages: {name: path}           # optional package:// roots, relative to this file
    directives: [...]                # optional: Drake's model directives, or
    directives_file: scene.dmd.yaml  #   a .dmd.yaml file
    robots: [{name, file?, stiffness, initial_positions?, pose?, max_reference_lead?}]
    objects: [{name, file?, initial_pose?, initial_positions?, body?}]
    environment: [{name, file?, pose?}]
    miqp: {...}                      # optional: a formulation's settings block
    task: {...}                      # optional: what an application (the demo) needs
    nominal_commands: [{duration, velocities: {robot: [...]}}]   # optional (rollouts)

A model entry with ``file:`` loads that file as one model; an entry without
it names a model instance that the directives create.

Composition: ``include:`` names scenario files (relative to this one) that
are read first; this file's keys then override theirs.  Mappings merge key by
key (``miqp: {time_limit: 2}`` changes one setting), everything else (a
list of robots, say) is replaced.  Paths in an included file stay relative to
that file.

Every error is a :class:`ScenarioError` that names the file, the key path
(``robots[0].stiffness``), what was wrong and how to fix it.  This module
imports neither Drake nor ROS (Drake's directive schema is loaded only to
check directives).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Optional

import numpy as np
import yaml

from quasistatic_drake.drake_calls import call_drake
from quasistatic_drake.formulations import registry
from quasistatic_drake.paths import resolve_model_file
from quasistatic_drake.schema import (anything, checked, did_you_mean, flag, list_of,
                                      mapping_of, nested, number, optional, read, SchemaError,
                                      setting, text, vector)


class ScenarioError(ValueError):
    """A scenario that cannot be used; the message says where and how to fix it."""


class Tagged(dict):
    """A YAML mapping with a tag, as Drake's schemas write variants (``!Rpy {deg: [...]}``)."""

    def __init__(self, tag: str, value: dict):
        """Keep the tag and the mapping."""
        super().__init__(value)
        self.tag = tag


class _Loader(yaml.SafeLoader):
    """
    YAML's safe loader, keeping Drake's tags (``!Rpy``, ``!AngleAxis``...) on mappings.

    Two changes from PyYAML's YAML 1.1: numbers in exponent form without a
    dot (``1e-2``, ``1e3``) are floats, as YAML 1.2 and Drake's own parser
    read them (PyYAML read them as strings); and a key given twice in one
    mapping is refused (PyYAML let the last one win, silently).
    """

    def construct_mapping(self, node, deep=False):
        """Return the mapping, refusing a key that appears twice in it."""
        if isinstance(node, yaml.MappingNode):
            seen = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:                 # an unhashable key: PyYAML reports it
                    continue
                if first is not None:
                    raise yaml.constructor.ConstructorError(
                        "while reading a mapping", node.start_mark,
                        f"found the key {key!r} twice (first at line {first.line + 1}); a "
                        "key may appear once. Fix: delete one of them", key_node.start_mark)
                seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


class _Dumper(yaml.SafeDumper):
    """YAML's safe dumper, writing :class:`Tagged` mappings back with their tags."""


# YAML 1.2's floats: PyYAML's 1.1 resolver wants a dot (1.0e-2), and read 1e-2 as a string
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"""),
    list("-+0123456789"))
_Loader.add_multi_constructor("!", lambda loader, suffix, node: Tagged(
    "!" + suffix, loader.construct_mapping(node, deep=True)))
_Dumper.add_representer(Tagged, lambda dumper, data: dumper.represent_mapping(
    data.tag, dict(data)))


def dump_yaml(data: Any) -> str:
    """Return ``data`` as YAML, Drake's tags kept (to hand directives to Drake)."""
    return yaml.dump(data, Dumper=_Dumper)


def _model_name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"expected a non-empty name, got {value!r}.")
    return value


# the ranges the engine works in (issue 31: 1e300 s steps, 1e308 gravity, 1e-300 stiffness,
# 1e8 friction directions loaded, then failed every step or ran out of memory)
TIME_STEP_RANGE = (1e-5, 10.0)                 # [s]
GRAVITY_RANGE = (-1e3, 1e3)                    # [m/s^2], per component
STIFFNESS_RANGE = (1e-3, 1e9)                  # [N/m, N m/rad]
INERTIA_RATIO_RANGE = (1e-10, 1e3)
MAX_FRICTION_DIRECTIONS = 64


def _even_directions(value: Any, where: str) -> int:
    if (isinstance(value, bool) or not isinstance(value, int) or value < 2 or value % 2
            or value > MAX_FRICTION_DIRECTIONS):
        raise ValueError(f"expected an even integer from 2 to {MAX_FRICTION_DIRECTIONS} (a "
                         f"balanced set, Pang & Tedrake 2018, eq. 4), got {value!r}.")
    return value


def _formulation_name(value: Any, where: str) -> str:
    if value not in registry.names():
        raise ValueError(f"unknown formulation {value!r}. Available: {list(registry.names())}.")
    return value


_FILE = optional(text("a file path or package:// URI"))


@dataclass(frozen=True)
class Pose:
    """A pose given as translation xyz [m] and roll-pitch-yaw rpy [rad]."""

    xyz: np.ndarray = setting(check=vector(3), factory=lambda: np.zeros(3), doc="[m]")
    rpy: np.ndarray = setting(check=vector(3), factory=lambda: np.zeros(3), doc="[rad]")


@dataclass(frozen=True)
class RobotSpec:
    """An actuated model: every joint is a spring of stiffness K (Pang & Tedrake 2021)."""

    name: str = setting(check=_model_name, doc="the model instance's name")
    stiffness: np.ndarray = setting(check=vector(positive=True, within=STIFFNESS_RANGE),
                                    doc="K per commanded joint [N/m or N m/rad], 1e-3 to 1e9")
    file: Optional[str] = setting(None, _FILE, "the model file; left out: from the directives")
    initial_positions: Optional[np.ndarray] = setting(None, optional(vector()),
                                                      "per commanded joint [m or rad]")
    pose: Optional["Pose"] = setting(None, optional(nested(Pose)),
                                     "where a file's root link is welded to the world")
    max_reference_lead: Optional[np.ndarray] = setting(
        None, optional(vector(positive=True)), "per commanded joint [m or rad]")
    damping_ratio: Optional[float] = setting(
        None, number(positive=True, none_word="auto"),
        "robot_inertia: zeta of the impedance's damping D = 2 zeta sqrt(K M_ii) (auto: 1)")
    where: str = ""        # the file and key path, for messages


@dataclass(frozen=True)
class ObjectSpec:
    """An unactuated model: its DOFs move only under contact, gravity and applied forces."""

    name: str = setting(check=_model_name, doc="the model instance's name")
    file: Optional[str] = setting(None, _FILE, "the model file; left out: from the directives")
    initial_pose: Optional["Pose"] = setting(None, optional(nested(Pose)), "a free body's")
    initial_positions: Optional[np.ndarray] = setting(None, optional(vector()),
                                                      "a jointed object's")
    body: Optional[str] = setting(None, optional(text("a body name")),
                                  "the body object_pose reports (default: the heaviest)")
    where: str = ""


@dataclass(frozen=True)
class EnvironmentSpec:
    """A model welded to the world (at ``pose`` when loaded from ``file``)."""

    name: str = setting(check=_model_name, doc="the model instance's name")
    file: Optional[str] = setting(None, _FILE, "the model file; left out: from the directives")
    pose: "Pose" = setting(check=nested(Pose), factory=Pose, doc="where it is welded")
    where: str = ""


@dataclass(frozen=True)
class CommandSegment:
    """A stretch of the nominal command: joint velocities held for ``duration``."""

    duration: float = setting(check=number(positive=True), doc="[s]")
    velocities: Mapping[str, np.ndarray] = setting(
        check=mapping_of(vector(), "a robot name"), factory=dict,
        doc="{robot: joint velocities}; robots left out hold still [m/s or rad/s]")


@dataclass(frozen=True)
class Scenario:
    """A validated scenario.  Build it with :meth:`from_yaml` or :meth:`from_dict`."""

    time_step: float = setting(check=number(positive=True, within=TIME_STEP_RANGE),
                               doc="h [s], 1e-5 to 10")
    robots: tuple[RobotSpec, ...] = setting((), list_of(nested(RobotSpec)))
    objects: tuple[ObjectSpec, ...] = setting((), list_of(nested(ObjectSpec)))
    environment: tuple[EnvironmentSpec, ...] = setting((), list_of(nested(EnvironmentSpec)))
    formulation: str = setting("qp", _formulation_name, "qp, miqp or a registered plug-in")
    quasi_dynamic: bool = setting(False, flag(), "objects keep their mass matrix M_u")
    robot_inertia: bool = setting(
        False, flag(), "robots keep their mass matrix M_a and their impedance's damping D: "
        "they trail their reference where it accelerates (formulation qp)")
    friction_directions: int = setting(4, _even_directions, "n_d per contact")
    contact_detection_tolerance: float = setting(
        0.02, number(positive=True, infinite=True), "[m] pairs closer are contacts (.inf: all)")
    gravity: np.ndarray = setting(check=vector(3, within=GRAVITY_RANGE),
                                  factory=lambda: np.array([0.0, 0.0, -9.81]))
    default_friction: float = setting(0.5, number(nonnegative=True),
                                      "mu of collision geometry whose file gives none")
    quasi_static_inertia_ratio: float = setting(
        1e-6, number(positive=True, within=INERTIA_RATIO_RANGE),
        "r of the QP's regulariser eps M_u in quasi-static mode (velocities unique)")
    packages: Mapping[str, str] = setting(
        check=mapping_of(text("a directory path"), "a package name"), factory=dict,
        doc="package:// roots {name: directory}, relative to the scenario")
    directives: tuple[Mapping[str, Any], ...] = setting(
        (), list_of(anything()), "Drake's model directives (add_model, add_weld, ...)")
    directives_file: Optional[str] = setting(None, _FILE, "a .dmd.yaml file of directives")
    task: Mapping[str, Any] = setting(check=mapping_of(anything(), "a key"), factory=dict,
                                      doc="what an application needs (the demo's task:)")
    nominal_commands: tuple[CommandSegment, ...] = setting(
        (), list_of(nested(CommandSegment)),
        "the command `quasistatic-drake rollouts` perturbs (without it: the task's plan)")
    # the formulations' settings blocks given in the file, by formulation name (read only)
    formulation_settings: Mapping[str, Any] = field(default_factory=dict)
    source: str = "<dict>"
    # where the directives came from (the scenario, or its directives_file), for messages
    directives_source: str = ""

    @staticmethod
    def from_yaml(path: str | os.PathLike) -> "Scenario":
        """Load and validate a scenario YAML file (with the files it includes)."""
        path = Path(path)
        return Scenario.from_dict(_load_yaml(path, str(path), "the scenario file"),
                                  base_dir=path.parent, source=str(path))

    @staticmethod
    def from_dict(data: Any, base_dir: str | os.PathLike = ".",
                  source: str = "<dict>") -> "Scenario":
        """Validate a scenario given as a dict (the parsed YAML); paths relative to base_dir."""
        data = _composed(data, Path(base_dir), source, ())
        try:
            scenario = read(Scenario, data, "", extra=(*registry.names(), "include"),
                            source=source)
            return _completed(scenario, data, source, Path(base_dir))
        except SchemaError as err:
            raise ScenarioError(f"{source}: {err}") from None

    def model_names(self) -> list[str]:
        """Names of all models: robots, objects, then environment."""
        return ([r.name for r in self.robots] + [o.name for o in self.objects]
                + [e.name for e in self.environment])

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
            settings = checked(replace(current, **changes), name)
        except TypeError:
            unknown = sorted(set(changes) - set(vars(current)))
            raise ScenarioError(f"{self.source}: {name}: unknown key(s) {unknown}."
                                f"{did_you_mean(unknown, vars(current))} Allowed "
                                f"keys: {sorted(vars(current))}.") from None
        except SchemaError as err:
            raise ScenarioError(f"{self.source}: {err}") from None
        blocks = {**self.formulation_settings, name: settings}
        return replace(self, formulation=name, formulation_settings=blocks)


# ----- reading a file, and composing files ---------------------------------------------
def _load_yaml(path: Path, source: str, what: str) -> Any:
    """Return the parsed YAML of ``path`` (ScenarioError naming ``source`` if unusable)."""
    if not path.is_file():
        raise ScenarioError(f"{source}: {what} does not exist. Fix: pass the path of an "
                            "existing YAML file.")
    try:
        return yaml.load(path.read_text(), Loader=_Loader)
    except yaml.YAMLError as err:
        raise ScenarioError(f"{source}: {what} is not valid YAML{_yaml_position(err)}. Fix: "
                            "correct the syntax there, or name the YAML file meant.") from None
    except UnicodeDecodeError as err:
        raise ScenarioError(f"{source}: {what} is not a UTF-8 text file ({err.reason} at byte "
                            f"{err.start}). Fix: pass the YAML file, not a binary one.") from None
    except RecursionError:
        raise ScenarioError(f"{source}: {what} nests its lists or mappings too deeply to "
                            "read. Fix: flatten it (a scenario needs a few levels).") from None


def _yaml_position(err: yaml.YAMLError) -> str:
    """Return where and why PyYAML stopped, without quoting the file's text (it may be data)."""
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return where + (f" ({problem})" if problem else "")


def _composed(data: Any, base_dir: Path, source: str, chain: tuple) -> Any:
    """
    Return ``data`` with its relative paths made absolute and its includes merged under it.

    ``chain`` holds the files being read, to refuse an include cycle.
    """
    if not isinstance(data, dict):
        return data
    data = _absolute_paths(data, base_dir, models=bool(chain))
    includes = data.pop("include", [])
    if isinstance(includes, str):
        includes = [includes]
    if not isinstance(includes, list) or not all(isinstance(i, str) for i in includes):
        raise ScenarioError(f"{source}: include: expected a file path or a list of them, "
                            f"got {includes!r}.")
    merged: dict = {}
    for k, name in enumerate(includes):
        path = (base_dir / os.path.expanduser(name)).resolve()
        if str(path) in chain:
            raise ScenarioError(f"{source}: include[{k}]: '{name}' includes itself (through "
                                f"{[*chain, str(path)]}). Fix: remove the cycle.")
        included = _load_yaml(path, f"{source}: include[{k}]: {path}", "the included file")
        if not isinstance(included, dict):
            raise ScenarioError(f"{source}: include[{k}]: {path} is not a mapping of "
                                "scenario keys.")
        merged = _merged(merged, _composed(included, path.parent, str(path),
                                           (*chain, str(path))))
    return _merged(merged, data)


def _merged(base: dict, override: dict) -> dict:
    """Return ``base`` with ``override`` on top: mappings merge by key, the rest replaces."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out


def _absolute_paths(data: dict, base_dir: Path, models: bool) -> dict:
    """
    Return a copy whose relative paths (packages, directives, with ``models`` files) are absolute.

    The scenario's own model files stay as written, so that messages show
    them; they are resolved against its directory later (an included
    file's cannot be).
    """
    data = dict(data)
    for key in ("robots", "objects", "environment"):
        if models and isinstance(data.get(key), list):
            data[key] = [_absolute_entry(e, base_dir) for e in data[key]]
    if isinstance(data.get("packages"), dict):
        data["packages"] = {name: _absolute(path, base_dir)
                            for name, path in data["packages"].items()}
    if isinstance(data.get("directives_file"), str):
        data["directives_file"] = _absolute(data["directives_file"], base_dir)
    if isinstance(data.get("directives"), list):
        data["directives"] = [_absolute_directive(d, base_dir) for d in data["directives"]]
    return data


def _absolute_entry(entry: Any, base_dir: Path) -> Any:
    if isinstance(entry, dict) and isinstance(entry.get("file"), str):
        return {**entry, "file": _absolute(entry["file"], base_dir)}
    return entry


def _absolute_directive(directive: Any, base_dir: Path) -> Any:
    """Make a directive's relative ``file`` an absolute file:// URL (Drake needs URLs)."""
    if not isinstance(directive, dict) or len(directive) != 1:
        return directive
    (kind, body), = directive.items()
    if kind in ("add_model", "add_directives") and isinstance(body, dict) and isinstance(
            body.get("file"), str) and "://" not in body["file"]:
        return {kind: {**body, "file": "file://" + _absolute(body["file"], base_dir)}}
    return directive


def _absolute(path: str, base_dir: Path) -> str:
    if "://" in path or not path:
        return path
    try:
        return str((base_dir / os.path.expanduser(path)).resolve())
    except (ValueError, OSError):     # a NUL byte, a name too long: the loader names it
        return path


# ----- what the schema cannot say on its own ---------------------------------------------
def _completed(scenario: Scenario, data: dict, source: str, base_dir: Path) -> Scenario:
    """Resolve files, read the formulation blocks and directives, check across keys."""
    blocks = {}
    for name in registry.names():
        if name in data:
            blocks[name] = read(registry.settings_type(name), data[name], name)
    scenario = replace(scenario, formulation_settings=blocks, packages={
        name: _package_dir(path, f"packages.{name}") for name, path in
        scenario.packages.items()})
    directives, directives_source = _directives(scenario, source)
    models = {key: tuple(_placed(spec, f"{key}[{i}]", scenario, source, base_dir,
                                 bool(directives))
                         for i, spec in enumerate(getattr(scenario, key)))
              for key in ("robots", "objects", "environment")}
    scenario = replace(scenario, directives=directives, directives_source=directives_source,
                       **models)
    _check_models(scenario)
    return scenario


def _package_dir(path: str, where: str) -> str:
    if not Path(path).is_dir():
        raise SchemaError(where, f"'{path}' is not a directory. Fix: give the package's root "
                          "directory, relative to the scenario file.")
    return path


def _placed(spec, where: str, scenario: Scenario, source: str, base_dir: Path,
            has_directives: bool):
    """Return a model entry with its file resolved and its ``where`` set."""
    spec = replace(spec, where=f"{source}: {where}")
    if spec.file is not None and "::" in spec.name:
        raise SchemaError(f"{where}.name", f"expected a name without '::' for a model loaded "
                          f"from file:, got {spec.name!r} ('::' scopes model instances that "
                          "directives create).")
    if spec.file is None:
        if not has_directives:
            raise SchemaError(f"{where}.file", "is required when the scenario has no "
                              "directives. Fix: give the model's file, or add directives "
                              f"that create a model instance named '{spec.name}'.")
        if getattr(spec, "pose", None) is not None and isinstance(spec, RobotSpec):
            raise SchemaError(f"{where}.pose", "places a model loaded from 'file' only; the "
                              "directives place this one. Fix: weld it with add_weld.")
        return spec
    try:
        return replace(spec, file=resolve_model_file(spec.file, base_dir, scenario.packages))
    except FileNotFoundError as err:
        raise SchemaError(f"{where}.file", str(err)) from None


def _check_models(scenario: Scenario) -> None:
    """Refuse a repeated model name (naming both entries) and a scenario that cannot move."""
    first: dict[str, str] = {}
    for key in ("robots", "objects", "environment"):
        for i, spec in enumerate(getattr(scenario, key)):
            where = f"{key}[{i}].name"
            if spec.name in first:
                raise SchemaError(where, f"model names must be unique; repeated: "
                                  f"[{spec.name!r}] (also {first[spec.name]}). "
                                  "Fix: rename one of them.")
            first[spec.name] = where
    for i, spec in enumerate(scenario.robots):
        if spec.damping_ratio is not None and not scenario.robot_inertia:
            raise SchemaError(f"robots[{i}].damping_ratio", "sets the impedance's damping, "
                              "which only a robot with inertia has. Fix: add robot_inertia: "
                              "true, or remove damping_ratio.")
    for i, spec in enumerate(scenario.objects):
        if spec.initial_pose is not None and spec.initial_positions is not None:
            raise SchemaError(f"objects[{i}]", "give either initial_pose (free bodies) or "
                              "initial_positions (jointed objects), not both.")
    if not first:
        raise SchemaError("", "the scenario has no models. "
                          "Fix: add at least one entry under robots or objects.")
    if not scenario.robots and not scenario.objects:
        raise SchemaError("robots, objects", "both are empty, so nothing can move: every "
                          "model is welded. Fix: add a robot or an object.")


def _directives(scenario: Scenario, source: str) -> tuple[tuple, str]:
    """Return the scenario's directives (from the file or the list), checked, and their source."""
    if scenario.directives and scenario.directives_file:
        raise SchemaError("directives_file", "give either directives or directives_file, "
                          "not both. Fix: move the list into the file, or drop the file.")
    if not scenario.directives_file:
        _check_directives(scenario.directives, "directives")
        _check_nesting(scenario.directives, (), source, scenario.packages)
        return scenario.directives, source
    try:
        path = Path(resolve_model_file(scenario.directives_file, ".", scenario.packages))
    except FileNotFoundError as err:
        raise ScenarioError(f"{source}: directives_file: {err}") from None
    data = _load_yaml(path, f"{source}: directives_file: {path}", "the directives file")
    if not isinstance(data, dict) or set(data) != {"directives"} or not isinstance(
            data["directives"], list):
        raise ScenarioError(f"{source}: directives_file: {path} must hold one key, "
                            "'directives', with a list (Drake's .dmd.yaml format).")
    directives = tuple(_absolute_directive(d, path.parent) for d in data["directives"])
    try:
        _check_directives(directives, "directives")
    except SchemaError as err:
        raise ScenarioError(f"{path}: {err}") from None
    _check_nesting(directives, (path.resolve(),), str(path), scenario.packages)
    return directives, str(path)


def _check_nesting(directives, chain: tuple, where: str, packages) -> None:
    """
    Refuse an add_directives that includes a file already being read, or a missing one.

    Drake's ProcessModelDirectives follows add_directives without a check:
    a file that adds itself (directly or through others) recursed until the
    process died with a segmentation fault.  ``chain`` holds the files being
    read, outermost first.
    """
    base = chain[-1].parent if chain else Path(".")
    for k, directive in enumerate(directives):
        if not isinstance(directive, Mapping) or len(directive) != 1:
            continue
        (kind, body), = directive.items()
        if kind != "add_directives" or not isinstance(body, Mapping) or not isinstance(
                body.get("file"), str):
            continue
        at = f"{where}: directives[{k}] (add_directives)"
        try:
            resolved = resolve_model_file(body["file"], base, packages)
        except FileNotFoundError as err:
            raise ScenarioError(f"{at}: {err}") from None
        if resolved.startswith("package://"):
            continue                    # a ROS package's file: Drake's package map finds it
        path = Path(resolved).resolve()
        if path in chain:
            cycle = " -> ".join(str(p) for p in (*chain[chain.index(path):], path))
            raise ScenarioError(f"{at}: '{body['file']}' includes itself ({cycle}); Drake "
                                "would follow it until the process crashes. Fix: remove the "
                                "add_directives that closes the cycle.")
        data = _load_yaml(path, at, f"its file '{body['file']}'")
        nested = data.get("directives") if isinstance(data, Mapping) else None
        if isinstance(nested, list):
            for j, item in enumerate(nested):
                if isinstance(item, Mapping) and len(item) == 1:
                    (inner, inner_body), = item.items()
                    try:
                        _check_directive_values(inner_body, f"directives[{j}] ({inner})")
                    except SchemaError as err:
                        raise ScenarioError(f"{path}: {err}") from None
            _check_nesting(nested, (*chain, path), str(path), packages)


def _check_directives(directives: tuple, where: str) -> None:
    """Check each directive against Drake's ModelDirectives schema (naming the index)."""
    if not directives:
        return
    from pydrake.multibody.parsing import LoadModelDirectivesFromString
    for k, directive in enumerate(directives):
        kind = next(iter(directive), "?") if isinstance(directive, dict) else "?"
        if not isinstance(directive, dict) or len(directive) != 1:
            raise SchemaError(f"{where}[{k}]", "expected one directive (add_model, add_weld, "
                              "add_frame, add_directives, add_model_instance or "
                              f"add_collision_filter_group), got {directive!r}.")
        _check_directive_values(directive[kind], f"{where}[{k}] ({kind})")
        try:
            call_drake(LoadModelDirectivesFromString, dump_yaml({"directives": [directive]}))
        except RuntimeError as err:  # yaml_load_typed's RuntimeError, or a DrakeRefusal
            raise SchemaError(f"{where}[{k}] ({kind})", f"not in Drake's model directive "
                              f"syntax: {err} Fix: see Drake's "
                              "multibody/parsing/README_model_directives.md.") from None


# The largest magnitude of a number in a directive (a position in m, an angle): beyond it a
# pose leaves the range the contact kernels are exact in (a weld at 1e308 m ended in a
# numba SystemError).
DIRECTIVE_NUMBER_BOUND = 1e6


def _check_directive_values(value: Any, where: str) -> None:
    """
    Refuse what Drake would take silently or end the process on, in one directive's body.

    A number that is not finite (a NaN pose ended the process in SetPositions)
    or beyond DIRECTIVE_NUMBER_BOUND, and an ``!AngleAxis`` whose axis is
    zero (Drake turned it into the zero matrix: the table's geometry
    collapsed).
    """
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        if not np.isfinite(value) or abs(value) > DIRECTIVE_NUMBER_BOUND:
            raise SchemaError(where, f"expected a finite number within "
                              f"+-{DIRECTIVE_NUMBER_BOUND:g}, got {value!r}. Fix: give the "
                              "pose or position in metres and degrees (or radians).")
        return
    if isinstance(value, Mapping):
        if getattr(value, "tag", None) == "!AngleAxis" and isinstance(value.get("axis"), list):
            axis = value["axis"]
            _check_directive_values(axis, f"{where}.axis")
            if not any(isinstance(a, (int, float)) and a != 0 for a in axis):
                raise SchemaError(f"{where}.axis", f"is {axis}, which has no direction: "
                                  "Drake would make the rotation the zero matrix. Fix: give "
                                  "a non-zero axis, e.g. [0, 0, 1].")
        for key, item in value.items():
            _check_directive_values(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_directive_values(item, f"{where}[{i}]")
