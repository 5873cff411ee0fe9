"""
Loading a scenario's models into a MultibodyPlant: files, Drake's model directives, packages.

One Drake ``PackageMap`` resolves every ``package://`` URI: this package,
the scenario's ``packages:``, then ``ROS_PACKAGE_PATH`` (Drake's own
``drake``/``drake_models`` entries stay unless one of those names a local
copy).  Model entries with ``file:`` are added one by one (robots, objects,
environment, in scenario order) and welded at their ``pose``; the
scenario's directives are then processed by Drake's own
``ProcessModelDirectives``, one directive at a time, so an error names the
directive.  Every model instance the directives create must be listed under
robots, objects or environment.

Used by QuasistaticModel (model.py) and by benchmarks/mbp_reference.py.
Raises ScenarioError naming the entry or directive and the fix.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
from pydrake.math import RigidTransform, RollPitchYaw
from pydrake.multibody.parsing import (LoadModelDirectivesFromString, PackageMap, Parser,
                                       ProcessModelDirectives)
from pydrake.multibody.plant import MultibodyPlant

from quasistatic_drake.drake_calls import call_drake
from quasistatic_drake.model_files import urdf_floating_joints
from quasistatic_drake.paths import PACKAGE_NAME, package_share_dir
from quasistatic_drake.scenario import dump_yaml, Pose, Scenario, ScenarioError


@dataclass
class LoadedModels:
    """What loading added: each entry's model instance and the file it came from."""

    instances: dict = field(default_factory=dict)     # name -> ModelInstanceIndex
    files: dict = field(default_factory=dict)         # name -> the model file's path
    package_map: Optional[PackageMap] = None


def make_package_map(scenario: Scenario) -> PackageMap:
    """Return a PackageMap configured for the scenario (:func:`configure_packages`)."""
    packages = PackageMap()
    configure_packages(packages, scenario)
    return packages


def configure_packages(packages: PackageMap, scenario: Scenario) -> None:
    """
    Add this package, the scenario's ``packages`` and ``ROS_PACKAGE_PATH`` to ``packages``.

    The scenario's packages win over ROS_PACKAGE_PATH, and both over
    Drake's defaults (a local ``drake_models`` replaces Drake's download).
    """
    _put(packages, PACKAGE_NAME, str(package_share_dir()))
    for name, path in scenario.packages.items():
        _put(packages, name, path)
    if os.environ.get("ROS_PACKAGE_PATH"):
        ros = PackageMap.MakeEmpty()
        ros.PopulateFromRosPackagePath()
        for name in ros.GetPackageNames():
            if name not in scenario.packages and name != PACKAGE_NAME:
                _put(packages, name, ros.GetPath(name))


def _put(packages: PackageMap, name: str, path: str) -> None:
    if packages.Contains(name):
        packages.Remove(name)
    packages.Add(name, path)


def load_scenario_models(plant: MultibodyPlant, scenario: Scenario,
                         robot_only: Optional[str] = None) -> LoadedModels:
    """
    Add the scenario's models to an unfinalized ``plant``; return what was added.

    Gravity is the scenario's.  With ``robot_only``, only that robot (a
    model entry with ``file:``).  A URDF floating joint in a robot or the
    environment is refused, because Drake's parser drops it and the model
    would be welded.
    """
    plant.mutable_gravity_field().set_gravity_vector(scenario.gravity)
    parser = Parser(plant)
    configure_packages(parser.package_map(), scenario)
    loaded = LoadedModels(package_map=parser.package_map())
    for spec in scenario.robots:
        if spec.file is not None and robot_only in (None, spec.name):
            _add_file_model(parser, spec, loaded)
            _refuse_floating_joints(loaded.files[spec.name], spec, _ROBOT_FLOATING)
            _weld_roots(plant, loaded.instances[spec.name], spec.pose or Pose(), spec.where)
    if robot_only is not None:
        if robot_only not in loaded.instances:
            raise ScenarioError(f"{scenario.source}: robot '{robot_only}' is not a model "
                                "entry with file:, so it cannot be loaded alone.")
        return loaded
    for spec in scenario.objects:
        if spec.file is not None:
            _add_file_model(parser, spec, loaded)
    for spec in scenario.environment:
        if spec.file is not None:
            _add_file_model(parser, spec, loaded)
            _refuse_floating_joints(loaded.files[spec.name], spec, _ENVIRONMENT_FLOATING)
            _weld_roots(plant, loaded.instances[spec.name], spec.pose, spec.where)
    _process_directives(plant, parser, scenario, loaded)
    return loaded


def add_scenario_models(plant: MultibodyPlant, scenario: Scenario,
                        robot_only: Optional[str] = None) -> dict:
    """Add the scenario's models (:func:`load_scenario_models`); return {name: instance}."""
    return load_scenario_models(plant, scenario, robot_only).instances


def pose_to_rigid_transform(pose: Pose) -> RigidTransform:
    """Convert a scenario Pose (xyz, rpy) to a Drake RigidTransform."""
    return RigidTransform(RollPitchYaw(pose.rpy), pose.xyz)


def pose_is_set(pose: Pose) -> bool:
    """Return whether a pose differs from the identity."""
    return bool(np.any(pose.xyz != 0.0) or np.any(pose.rpy != 0.0))


def root_bodies(plant: MultibodyPlant, instance) -> list:
    """Return the bodies of ``instance`` that are no joint's child (before Finalize)."""
    children = {plant.get_joint(j).child_body().index() for j in plant.GetJointIndices(instance)}
    return [plant.get_body(b) for b in plant.GetBodyIndices(instance) if b not in children]


def _add_file_model(parser: Parser, spec, loaded: LoadedModels) -> None:
    """
    Add one ``file:`` entry as one model instance named after the entry.

    The entry's ``name:`` names the instance (as ``add_model``'s does in
    directives), so one file can be loaded any number of times: Drake names
    a second instance of a file's model ``<model>_1`` while it is added.
    """
    file = spec.file
    parser.SetAutoRenaming(True)       # the same file again: named by the entry just below
    try:
        models = (call_drake(parser.AddModels, url=file) if "://" in file
                  else call_drake(parser.AddModels, file_name=file))
    except RuntimeError as err:  # Drake's RuntimeError, or a DrakeRefusal
        raise _drake_error(f"{spec.where}: Drake could not parse '{file}'", err,
                           fix=_MODEL_FIX) from None
    finally:
        parser.SetAutoRenaming(False)  # directives name their own instances
    if len(models) != 1:
        raise ScenarioError(
            f"{spec.where}: '{file}' defines {len(models)} models; an entry with file: loads "
            "exactly one. Fix: place the models with directives (add_model, add_weld) and "
            "name each instance under robots, objects or environment.")
    parser.plant().RenameModelInstance(models[0], spec.name)
    loaded.instances[spec.name] = models[0]
    loaded.files[spec.name] = (parser.package_map().ResolveUrl(file) if "://" in file
                               else file)


def _process_directives(plant: MultibodyPlant, parser: Parser, scenario: Scenario,
                        loaded: LoadedModels) -> None:
    """
    Process the scenario's directives with Drake; match their instances to the entries.

    Drake processes them in one call (``ProcessModelDirectives``; an add_weld
    updates what its add_model reported).  The checks Drake would end the
    process for are made first (``_check_welds``); on any other failure the
    directives are replayed on a scratch plant to name the one that fails.
    """
    if not scenario.directives:
        return
    _check_welds(scenario)
    before = {plant.GetModelInstanceName(i) for i in _instances(plant)}
    try:
        infos = call_drake(ProcessModelDirectives, _drake_directives(scenario.directives),
                           plant, parser)
    except RuntimeError as err:  # Drake's RuntimeError, or a DrakeRefusal
        raise _directive_error(scenario, err) from None
    for info in infos:
        loaded.files[info.model_name] = info.model_path
    created = {plant.GetModelInstanceName(i): i for i in _instances(plant)
               if plant.GetModelInstanceName(i) not in before}
    _match_entries(scenario, created, loaded)


def _drake_directives(directives):
    return call_drake(LoadModelDirectivesFromString, dump_yaml({"directives": list(directives)}))


def _check_welds(scenario: Scenario) -> None:
    """
    Refuse a weld Drake cannot report on: a frame welded twice, or a model it did not add.

    Drake's directive parser welds only models its own add_model (or
    add_directives) added, and ends the process otherwise.
    """
    from_files = {spec.name for spec in (*scenario.robots, *scenario.objects,
                                         *scenario.environment) if spec.file is not None}
    added, nested, welded = set(), False, {}
    for k, directive in enumerate(scenario.directives):
        (kind, body), = directive.items()
        where = f"{scenario.directives_source}: directives[{k}] ({kind})"
        if kind == "add_model":
            added.add(body.get("name"))
        elif kind == "add_directives":
            nested = True      # its models' names are known to Drake only
        elif kind == "add_weld":
            child = str(body.get("child", ""))
            model = child.rpartition("::")[0]
            if model in from_files or (model not in added and not nested):
                raise ScenarioError(
                    f"{where}: child '{child}' is not a frame of a model an earlier add_model "
                    "directive added; directives weld only their own models. Fix: add the "
                    "model with add_model (instead of file:), before the weld, and scope the "
                    "frame as 'model::frame'.")
            if child in welded:
                raise ScenarioError(
                    f"{where}: '{child}' is already welded by directives[{welded[child]}]; a "
                    "frame has one parent. Fix: remove one of the two add_weld directives.")
            welded[child] = k


def _directive_error(scenario: Scenario, err: Exception) -> ScenarioError:
    """Return a ScenarioError naming the first directive Drake refuses (replayed alone)."""
    from pydrake.multibody.plant import MultibodyPlant as Plant
    for k in range(len(scenario.directives)):
        plant = Plant(0.0)
        parser = Parser(plant)
        configure_packages(parser.package_map(), scenario)
        try:
            call_drake(ProcessModelDirectives, _drake_directives(scenario.directives[:k + 1]),
                       plant, parser)
        except RuntimeError:  # the first prefix that fails ends with the culprit
            kind = next(iter(scenario.directives[k]))
            return _drake_error(f"{scenario.directives_source}: directives[{k}] ({kind}): "
                                "Drake could not process it", err, fix=_DIRECTIVE_FIX)
    return _drake_error(f"{scenario.directives_source}: directives: Drake could not process "
                        "them", err, fix=_DIRECTIVE_FIX)


_MODEL_FIX = ("Fix: give a model file Drake reads (.urdf, .sdf, .xml for MuJoCo, .obj), "
              "and for package://<name>/ name the package under packages: or on "
              "ROS_PACKAGE_PATH.")
_DIRECTIVE_FIX = ("Fix: check the model and frame names it uses (scoped names are "
                  "'model::frame'; a frame must exist before it is used; directives weld only "
                  "models their own add_model added, not the entries with file:).")


def _match_entries(scenario: Scenario, created: dict, loaded: LoadedModels) -> None:
    """Give each entry without file: its instance; refuse an instance no entry names."""
    listed = set()
    for key in ("robots", "objects", "environment"):
        for spec in getattr(scenario, key):
            if spec.file is not None:
                continue
            if spec.name not in created:
                raise ScenarioError(
                    f"{spec.where}: no model instance '{spec.name}' comes from the "
                    f"directives; they create {sorted(created)}. Fix: use one of those "
                    "names, or add the model with add_model.")
            loaded.instances[spec.name] = created[spec.name]
            listed.add(spec.name)
    unlisted = sorted(set(created) - listed)
    if unlisted:
        raise ScenarioError(
            f"{scenario.source}: the directives create model instance(s) {unlisted} that no "
            "entry names. Fix: list each under robots (driven), objects (moved by contact) "
            "or environment (welded), as '- name: <instance>'.")


def _instances(plant: MultibodyPlant) -> list:
    from pydrake.multibody.tree import ModelInstanceIndex
    return [ModelInstanceIndex(i) for i in range(2, plant.num_model_instances())]


def _drake_error(what: str, err: Exception, fix: str = "") -> ScenarioError:
    """Return a ScenarioError for Drake's error; a failed drake_models download gets a fix."""
    text = str(err)
    if "drake_models" in text:
        return ScenarioError(
            f"{what}: package://drake_models is not available here (Drake downloads it on "
            "first use, and that failed).\nFix: packages: {drake_models: <a local copy of "
            "drake_models>} in the scenario, or ROS_PACKAGE_PATH pointing at one.")
    return ScenarioError(f"{what}: {text}" + (f" {fix}" if fix else ""))


_ROBOT_FLOATING = (
    "robots are welded at their 'pose' and driven through revolute and prismatic joints: a "
    "floating base cannot be commanded. Fix: remove the floating joint and set 'pose' to "
    "place the base, or list the model under objects if it should move freely.")
_ENVIRONMENT_FLOATING = (
    "the environment is welded at its 'pose'. Fix: remove the floating joint, or list the "
    "model under objects if it should move freely.")


def _refuse_floating_joints(path: str, spec, why: str) -> None:
    """Raise ScenarioError if the entry's URDF has a floating joint (Drake drops those)."""
    names = urdf_floating_joints(path)
    if names:
        raise ScenarioError(f"{spec.where}: joint(s) {names} in '{spec.file}' are of type "
                            "floating, which Drake's URDF parser turns into a free body, but "
                            f"{why}")


def _weld_roots(plant: MultibodyPlant, instance, pose: Pose, where: str) -> None:
    """Weld the model's root link to the world at ``pose`` (none if already attached)."""
    roots = root_bodies(plant, instance)
    if len(roots) > 1:
        raise ScenarioError(f"{where}: the model has {len(roots)} unconnected root "
                            f"links {[b.name() for b in roots]}; it must have one. Fix: "
                            "connect them with joints (type fixed to weld them) in the "
                            "file, or split them into separate entries.")
    for body in roots:
        plant.WeldFrames(plant.world_frame(), body.body_frame(), pose_to_rigid_transform(pose))
    if not roots and pose_is_set(pose):
        raise ScenarioError(f"{where}: the model is already attached to the world (a "
                            "joint to 'world', or <static>true</static> in SDFormat), "
                            "so 'pose' cannot place it. Fix: remove 'pose', or remove "
                            "the world joint or <static> from the file.")
