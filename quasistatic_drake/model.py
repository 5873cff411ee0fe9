"""
The Drake model of a scenario: MultibodyPlant + SceneGraph and the DOF partition.

Robots are actuated: each of their joints is a 1-DOF joint with a stiffness.
Objects are unactuated (free bodies get Drake's quaternion floating joint).
The environment is welded to the world.  Geometry facts needed every step
(shape, friction, body) are gathered once here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
from pydrake.geometry import (Box, Capsule, Convex, Cylinder, HalfSpace, Mesh, SceneGraph,
                              Sphere)
from pydrake.math import RigidTransform, RollPitchYaw
from pydrake.multibody.parsing import Parser
from pydrake.multibody.plant import AddMultibodyPlantSceneGraph, MultibodyPlant
from pydrake.multibody.tree import BodyIndex, JacobianWrtVariable, ModelInstanceIndex
from pydrake.systems.framework import DiagramBuilder

from quasistatic_drake.model_files import collision_friction_flags
from quasistatic_drake.paths import PACKAGE_NAME, package_share_dir
from quasistatic_drake.scenario import Pose, Scenario, ScenarioError
from quasistatic_drake.shapes import (BOX, CAPSULE, convex_spec, CYLINDER, HALFSPACE, OTHER,
                                      SPHERE, ShapeSpec)


@dataclass(frozen=True)
class RobotInfo:
    """An actuated model: joints in velocity order, their indices and stiffness."""

    name: str
    instance: ModelInstanceIndex
    joint_names: tuple[str, ...]
    q_idx: np.ndarray
    v_idx: np.ndarray
    stiffness: np.ndarray


@dataclass(frozen=True)
class ObjectInfo:
    """An unactuated model and the indices of its DOFs."""

    name: str
    instance: ModelInstanceIndex
    q_idx: np.ndarray
    v_idx: np.ndarray
    base_body: str


@dataclass(frozen=True)
class GeometryInfo:
    """A collision geometry: its body, shape, friction and whether it can move."""

    index: int                  # its position in QuasistaticModel.geometries
    body_index: int
    body_name: str
    shape: ShapeSpec
    mu: float
    moves: bool


def pose_to_rigid_transform(pose: Pose) -> RigidTransform:
    """Convert a scenario Pose (xyz, rpy) to a Drake RigidTransform."""
    return RigidTransform(RollPitchYaw(pose.rpy), pose.xyz)


def shape_spec(shape) -> ShapeSpec:
    """
    Describe a Drake shape for the distance fields in shapes.py.

    A Convex or a Mesh becomes a CONVEX shape: Drake's proximity queries use a
    mesh's convex hull, whose vertices, outward face planes and edges we take
    from ``GetConvexHull()`` (scale applied).
    """
    if isinstance(shape, Box):
        return ShapeSpec(BOX, half=0.5 * np.asarray(shape.size()))
    if isinstance(shape, Sphere):
        return ShapeSpec(SPHERE, radius=shape.radius())
    if isinstance(shape, Cylinder):
        return ShapeSpec(CYLINDER, radius=shape.radius(), half_length=0.5 * shape.length())
    if isinstance(shape, Capsule):
        return ShapeSpec(CAPSULE, radius=shape.radius(), half_length=0.5 * shape.length())
    if isinstance(shape, HalfSpace):
        return ShapeSpec(HALFSPACE)
    if isinstance(shape, (Convex, Mesh)):
        hull = shape.GetConvexHull()
        vertices = np.array([hull.vertex(i) for i in range(hull.num_vertices())])
        faces = [[hull.element(f).vertex(j) for j in range(hull.element(f).num_vertices())]
                 for f in range(hull.num_faces())]
        return convex_spec(vertices, faces)
    return ShapeSpec(OTHER)


class QuasistaticModel:
    """Builds the plant for a Scenario and partitions its DOFs."""

    def __init__(self, scenario: Scenario):
        self.scenario = scenario
        builder = DiagramBuilder()
        self.plant: MultibodyPlant
        self.scene_graph: SceneGraph
        self.plant, self.scene_graph = AddMultibodyPlantSceneGraph(builder, 0.0)
        instances = add_scenario_models(self.plant, scenario)
        self._set_object_poses(instances)
        self.plant.Finalize()
        self.diagram = builder.Build()
        self.context = self.diagram.CreateDefaultContext()
        self.plant_context = self.plant.GetMyMutableContextFromRoot(self.context)
        self.robots = tuple(self._robot_info(s, instances[s.name]) for s in scenario.robots)
        self.objects = tuple(self._object_info(s, instances[s.name]) for s in scenario.objects)
        self._check_environment(instances)
        self._set_initial_positions(instances)
        self.geometries = self._geometry_infos(instances)
        self.candidate_pairs = self._candidate_pairs()
        self.moving_bodies = self._moving_bodies()
        self.moving_slot = {int(body.index()): k for k, (body, _) in enumerate(self.moving_bodies)}
        self.moving_radii = np.array([r for _, r in self.moving_bodies])
        self._moving_frames = [body.body_frame() for body, _ in self.moving_bodies]
        self._jacobians = None
        self.quaternion_starts = self._quaternion_starts()
        self.q_default = self.plant.GetPositions(self.plant_context).copy()
        self._q_set: Optional[bytes] = None   # q.tobytes() of the set q

    # ----- sizes and indices -------------------------------------------------
    @property
    def n_q(self) -> int:
        """Return the number of configuration variables."""
        return self.plant.num_positions()

    @property
    def n_v(self) -> int:
        """Return the number of generalized velocities."""
        return self.plant.num_velocities()

    def robot(self, name: str) -> RobotInfo:
        """Return a robot by name, or raise KeyError listing the robots."""
        return _by_name(self.robots, name, "robot")

    def object(self, name: str) -> ObjectInfo:
        """Return an object by name, or raise KeyError listing the objects."""
        return _by_name(self.objects, name, "object")

    def set_positions(self, q: np.ndarray) -> None:
        """Set the plant's configuration, skipping the work when q is unchanged."""
        key = np.asarray(q, dtype=float).tobytes()
        if key == self._q_set:
            return
        self.plant.SetPositions(self.plant_context, q)
        self._q_set = key
        self._jacobians = None

    def body_jacobians(self) -> tuple:
        """
        Return J_w, J_v (n_b x 3 x n_v) and origins (n_b x 3) of the moving bodies.

        The rows follow ``moving_bodies``; the spatial velocity of body b's origin
        in the world is (J_w[b] v, J_v[b] v).  Cached until the positions change.
        """
        if self._jacobians is None:
            plant, context = self.plant, self.plant_context
            world = plant.world_frame()
            J = np.array([plant.CalcJacobianSpatialVelocity(
                context, JacobianWrtVariable.kV, frame, _ORIGIN, world, world)
                for frame in self._moving_frames]).reshape(-1, 6, self.n_v)
            origins = np.array([plant.EvalBodyPoseInWorld(context, body).translation()
                                for body, _ in self.moving_bodies]).reshape(-1, 3)
            self._jacobians = (np.ascontiguousarray(J[:, :3]), np.ascontiguousarray(J[:, 3:]),
                               origins)
        return self._jacobians

    def query_object(self):
        """Return SceneGraph's QueryObject at the current configuration."""
        return self.plant.get_geometry_query_input_port().Eval(self.plant_context)

    # ----- construction helpers ----------------------------------------------
    def _set_object_poses(self, instances) -> None:
        for spec in self.scenario.objects:
            if spec.initial_pose is None:
                continue
            roots = root_bodies(self.plant, instances[spec.name])
            if len(roots) != 1:
                raise ScenarioError(f"{spec.where}.initial_pose: applies to a free body, but "
                                    f"'{spec.name}' is attached by a joint. Fix: use "
                                    "initial_positions for jointed objects.")
            self.plant.SetDefaultFloatingBaseBodyPose(
                roots[0], pose_to_rigid_transform(spec.initial_pose))

    def _dof_joints(self, instance) -> list:
        joints = [self.plant.get_joint(j) for j in self.plant.GetJointIndices(instance)]
        return sorted((j for j in joints if j.num_velocities() > 0),
                      key=lambda j: j.velocity_start())

    def _robot_info(self, spec, instance) -> RobotInfo:
        joints = self._dof_joints(instance)
        bad = [f"{j.name()} ({j.type_name()})" for j in joints
               if j.num_positions() != 1 or j.num_velocities() != 1]
        if bad:
            raise ScenarioError(f"{spec.where}: robot joints must be 1-DOF (revolute or "
                                f"prismatic); found {bad}. A floating base is welded at "
                                "'pose'; other multi-DOF joints are not supported.")
        names = [j.name() for j in joints]
        if not joints:
            raise ScenarioError(f"{spec.where}: robot '{spec.name}' has no movable joints. "
                                "Fix: list it under environment instead.")
        if len(spec.stiffness) != len(joints):
            raise ScenarioError(f"{spec.where}.stiffness: expected {len(joints)} values, one "
                                f"per actuated joint {names}, got {len(spec.stiffness)}.")
        return RobotInfo(
            name=spec.name, instance=instance, joint_names=tuple(names),
            q_idx=np.array([j.position_start() for j in joints], dtype=int),
            v_idx=np.array([j.velocity_start() for j in joints], dtype=int),
            stiffness=np.asarray(spec.stiffness, dtype=float))

    def _object_info(self, spec, instance) -> ObjectInfo:
        joints = self._dof_joints(instance)
        if not joints:
            raise ScenarioError(f"{spec.where}: object '{spec.name}' cannot move (it is "
                                "welded). Fix: list it under environment instead.")
        q_idx = np.concatenate([np.arange(j.position_start(),
                                          j.position_start() + j.num_positions())
                                for j in joints])
        v_idx = np.concatenate([np.arange(j.velocity_start(),
                                          j.velocity_start() + j.num_velocities())
                                for j in joints])
        base = self._root_bodies_after_finalize(instance)
        return ObjectInfo(name=spec.name, instance=instance, q_idx=q_idx, v_idx=v_idx,
                          base_body=base)

    def _root_bodies_after_finalize(self, instance) -> str:
        bodies = [self.plant.get_body(b) for b in self.plant.GetBodyIndices(instance)]
        for body in bodies:
            joint_parent = [self.plant.get_joint(j) for j in self.plant.GetJointIndices(instance)
                            if self.plant.get_joint(j).child_body().index() == body.index()]
            if not joint_parent or joint_parent[0].parent_body().index() == 0:
                return body.name()
        return bodies[0].name()

    def _check_environment(self, instances) -> None:
        for spec in self.scenario.environment:
            if self._dof_joints(instances[spec.name]):
                raise ScenarioError(f"{spec.where}: environment model '{spec.name}' has "
                                    "movable joints. Fix: list it under objects or robots.")

    def _set_initial_positions(self, instances) -> None:
        q = self.plant.GetPositions(self.plant_context).copy()
        for robot, spec in zip(self.robots, self.scenario.robots):
            if spec.initial_positions is not None:
                q[robot.q_idx] = self._checked_initial(spec, robot.q_idx.size)
        for obj, spec in zip(self.objects, self.scenario.objects):
            if spec.initial_positions is not None:
                q[obj.q_idx] = self._checked_initial(spec, obj.q_idx.size)
        self.plant.SetPositions(self.plant_context, q)
        self.plant.SetDefaultPositions(q)

    @staticmethod
    def _checked_initial(spec, size: int) -> np.ndarray:
        if len(spec.initial_positions) != size:
            raise ScenarioError(f"{spec.where}.initial_positions: expected {size} values, "
                                f"got {len(spec.initial_positions)}.")
        return spec.initial_positions

    def _geometry_infos(self, instances) -> dict:
        inspector = self.scene_graph.model_inspector()
        welded = {b.index() for b in self.plant.GetBodiesWeldedTo(self.plant.world_body())}
        welded.add(self.plant.world_body().index())
        files = {spec.name: spec.file for spec in (*self.scenario.robots,
                                                   *self.scenario.objects,
                                                   *self.scenario.environment)}
        infos = {}
        for name, instance in instances.items():
            flags = collision_friction_flags(files[name]) if "://" not in files[name] else {}
            for b in self.plant.GetBodyIndices(instance):
                body = self.plant.get_body(b)
                gids = self.plant.GetCollisionGeometriesForBody(body)
                has_mu = flags.get(body.name(), [True] * len(gids))
                for k, gid in enumerate(gids):
                    infos[gid] = GeometryInfo(
                        index=len(infos), body_index=int(b), body_name=f"{name}::{body.name()}",
                        shape=shape_spec(inspector.GetShape(gid)),
                        mu=self._friction(inspector, gid, k < len(has_mu) and has_mu[k]),
                        moves=b not in welded)
        self._check_halfspaces(infos)
        return infos

    def _moving_bodies(self) -> list:
        """
        Return (body, radius) for each movable body with collision geometry.

        The radius about the body's origin holds all of its geometry; it bounds
        how far its points move in a step (manifold.sweep_lengths).
        """
        inspector = self.scene_graph.model_inspector()
        radius = {}
        for gid, info in self.geometries.items():
            if info.moves:
                offset = np.linalg.norm(inspector.GetPoseInFrame(gid).translation())
                extent = info.shape.bounding_radius
                radius[info.body_index] = max(radius.get(info.body_index, 0.0),
                                              offset + extent)
        return [(self.plant.get_body(BodyIndex(b)), r) for b, r in sorted(radius.items())]

    def _candidate_pairs(self) -> list:
        """Geometry pairs that may touch: not filtered by Drake, at least one moving."""
        inspector = self.scene_graph.model_inspector()
        ids = sorted(self.geometries, key=lambda g: g.get_value())
        return [(a, b) for i, a in enumerate(ids) for b in ids[i + 1:]
                if (self.geometries[a].moves or self.geometries[b].moves)
                and not inspector.CollisionFiltered(a, b)]

    def _friction(self, inspector, gid, file_sets_it: bool) -> float:
        if not file_sets_it:
            return self.scenario.default_friction
        props = inspector.GetProximityProperties(gid)
        if props is None or not props.HasProperty("material", "coulomb_friction"):
            return self.scenario.default_friction
        return props.GetProperty("material", "coulomb_friction").dynamic_friction()

    @staticmethod
    def _check_halfspaces(infos: dict) -> None:
        kinds = {info.shape.kind for info in infos.values()}
        if HALFSPACE in kinds and kinds - {HALFSPACE, SPHERE}:
            raise ScenarioError(
                "a HalfSpace collision geometry is present, but Drake's signed-distance "
                "query pairs a HalfSpace only with a Sphere. Fix: model the ground or "
                "table as a large box.")

    def _quaternion_starts(self) -> np.ndarray:
        starts = [self.plant.get_joint(j).position_start()
                  for j in self.plant.GetJointIndices()
                  if self.plant.get_joint(j).type_name() == "quaternion_floating"]
        return np.array(starts, dtype=int)


_ORIGIN = np.zeros(3)


# ----- loading a scenario's models into a plant (also used by benchmarks/mbp_reference.py) ----
def add_scenario_models(plant: MultibodyPlant, scenario: Scenario,
                        robot_only: Optional[str] = None) -> dict:
    """
    Add the scenario's models to an unfinalized ``plant``; return {name: ModelInstanceIndex}.

    Gravity is the scenario's.  Robots, then objects, then the environment are
    added in scenario order (so q is ordered alike in every plant built this
    way); robots are welded at ``pose`` (the world origin when not set) and
    the environment at its ``pose``.  With ``robot_only``, only that robot.
    Raises ScenarioError naming the entry and the fix.
    """
    plant.mutable_gravity_field().set_gravity_vector(scenario.gravity)
    parser = Parser(plant)
    parser.package_map().Add(PACKAGE_NAME, str(package_share_dir()))
    instances = {}
    for spec in scenario.robots:
        if robot_only is None or spec.name == robot_only:
            instances[spec.name] = _add_model(parser, spec.name, spec.file, spec.where)
            _weld_roots(plant, instances[spec.name], spec.pose or Pose(), spec.where)
    if robot_only is not None:
        return instances
    for spec in scenario.objects:
        instances[spec.name] = _add_model(parser, spec.name, spec.file, spec.where)
    for spec in scenario.environment:
        instances[spec.name] = _add_model(parser, spec.name, spec.file, spec.where)
        _weld_roots(plant, instances[spec.name], spec.pose, spec.where)
    return instances


def root_bodies(plant: MultibodyPlant, instance) -> list:
    """Return the bodies of ``instance`` that are no joint's child (before Finalize)."""
    children = {plant.get_joint(j).child_body().index() for j in plant.GetJointIndices(instance)}
    return [plant.get_body(b) for b in plant.GetBodyIndices(instance) if b not in children]


def _add_model(parser: Parser, name: str, file: str, where: str):
    try:
        if "://" in file:
            models = parser.AddModels(url=file)
        else:
            models = parser.AddModels(file_name=file)
    except Exception as err:  # Drake raises RuntimeError with its own text
        raise ScenarioError(f"{where}: Drake could not parse '{file}': {err}") from err
    if len(models) != 1:
        raise ScenarioError(f"{where}: '{file}' defines {len(models)} models; "
                            "each scenario entry must load exactly one.")
    parser.plant().RenameModelInstance(models[0], name)
    return models[0]


def _weld_roots(plant: MultibodyPlant, instance, pose: Pose, where: str) -> None:
    roots = root_bodies(plant, instance)
    if len(roots) > 1:
        raise ScenarioError(f"{where}: the model has {len(roots)} unconnected root "
                            f"links {[b.name() for b in roots]}; it must have one.")
    for body in roots:
        plant.WeldFrames(plant.world_frame(), body.body_frame(), pose_to_rigid_transform(pose))
    if not roots and pose_is_set(pose):
        raise ScenarioError(f"{where}: the model is already attached to the world (a "
                            "joint to 'world', or <static>true</static> in SDFormat), "
                            "so 'pose' cannot place it. Fix: remove 'pose', or remove "
                            "the world joint or <static> from the file.")


def _by_name(items, name: str, kind: str):
    for item in items:
        if item.name == name:
            return item
    raise KeyError(f"unknown {kind} {name!r}. {kind.capitalize()}s in this scenario: "
                   f"{[i.name for i in items]}.")


def pose_is_set(pose: Pose) -> bool:
    """Return whether a pose differs from the identity."""
    return bool(np.any(pose.xyz != 0.0) or np.any(pose.rpy != 0.0))
