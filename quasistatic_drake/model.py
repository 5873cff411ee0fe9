"""
The Drake model of a scenario: MultibodyPlant + SceneGraph and the DOF partition.

Robots are actuated: each of their joints is a 1-DOF joint with a stiffness.
Objects are unactuated (free bodies get Drake's quaternion floating joint).
The environment is welded to the world.  Geometry facts needed every step
(shape, friction, body) are gathered once here.

Loading refuses, with a ScenarioError that starts with the file and the
entry (``objects[0]: ...``) and gives a fix, what the engine cannot simulate
as the file says: a URDF floating joint in a robot or the environment, a
multi-DOF robot joint, an object part without collision geometry (it would
fall forever), an object without mass or rotational inertia, and a HalfSpace
next to shapes other than spheres.  A robot without collision geometry is
fine: it follows its command and touches nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
from pydrake.geometry import (Box, Capsule, CollisionFilterDeclaration, Convex, Cylinder,
                              GeometrySet, HalfSpace, Mesh, SceneGraph, Sphere)
from pydrake.math import RigidTransform, RollPitchYaw
from pydrake.multibody.parsing import Parser
from pydrake.multibody.plant import AddMultibodyPlantSceneGraph, MultibodyPlant
from pydrake.multibody.tree import BodyIndex, JacobianWrtVariable, ModelInstanceIndex
from pydrake.systems.framework import DiagramBuilder

from quasistatic_drake.model_files import collision_friction_flags, urdf_floating_joints
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
    max_lead: np.ndarray        # per joint: the reference's largest lead [m or rad]


# The reference's largest lead over a joint when the scenario gives none
# (RobotSpec.max_reference_lead): 5 cm of a prismatic joint, 0.25 rad of a revolute one.
DEFAULT_MAX_LEAD = {"prismatic": 0.05, "revolute": 0.25}


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


@dataclass(frozen=True)
class BoxPairs:
    """The candidate pairs of two box geometries, which the engine measures itself."""

    ids: tuple            # the boxes' GeometryIds; slot k is ids[k]
    pairs: tuple          # (id_A, id_B) per pair, id_A < id_B as in Drake's results
    slot_a: np.ndarray    # per pair, the slot of each box
    slot_b: np.ndarray
    half: np.ndarray      # (boxes, 3) half sizes
    moving: tuple         # the slots of the boxes that move
    static_R: np.ndarray  # (boxes, 3, 3), (boxes, 3): the welded boxes' poses (others: any)
    static_o: np.ndarray


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
        self._check_objects_can_be_touched()
        self._set_initial_positions(instances)
        self._check_object_inertia()
        self.geometries = self._geometry_infos(instances)
        self.candidate_pairs = self._candidate_pairs()
        self.box_pairs = self._box_pairs()
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
            raise ScenarioError(f"{spec.where}: robot '{spec.name}' has multi-DOF joint(s) "
                                f"{bad}, but a robot is driven through 1-DOF (revolute or "
                                "prismatic) joints, one stiffness and one velocity command "
                                "each. Fix: model each such joint as a chain of revolute or "
                                "prismatic joints, or list the model under objects if it is "
                                "not driven.")
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
            stiffness=np.asarray(spec.stiffness, dtype=float),
            max_lead=self._max_lead(spec, joints))

    @staticmethod
    def _max_lead(spec, joints) -> np.ndarray:
        """Return the robot's max_reference_lead, or DEFAULT_MAX_LEAD by joint type."""
        names = [j.name() for j in joints]
        if spec.max_reference_lead is None:
            return np.array([DEFAULT_MAX_LEAD["revolute" if "revolute" in j.type_name()
                                              else "prismatic"] for j in joints])
        if len(spec.max_reference_lead) != len(joints):
            raise ScenarioError(
                f"{spec.where}.max_reference_lead: expected {len(joints)} values, one per "
                f"actuated joint {names}, got {len(spec.max_reference_lead)}. Fix: give one "
                "lead [m or rad] per joint, or leave the key out for the defaults.")
        return np.asarray(spec.max_reference_lead, dtype=float)

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

    def _check_objects_can_be_touched(self) -> None:
        """
        Refuse an object part that has no collision geometry: it would fall forever.

        A part is a body jointed to the world with every body hanging from it
        by joints; one collision geometry anywhere in the part suffices (a
        body without geometry moves with the bodies it is jointed to).
        """
        for obj, spec in zip(self.objects, self.scenario.objects):
            for bodies in self._parts(obj.instance):
                if not any(self.plant.GetCollisionGeometriesForBody(b) for b in bodies):
                    raise ScenarioError(
                        f"{spec.where}: object '{spec.name}' has no collision geometry on "
                        f"link(s) {[b.name() for b in bodies]} of '{spec.file}', so nothing "
                        "can touch it and it would fall forever. Fix: add a <collision> "
                        "element to the link, or list the model under environment if it is "
                        "only a visual.")

    def _parts(self, instance) -> list:
        """Group the bodies of ``instance`` by their ancestor that is jointed to the world."""
        world = self.plant.world_body().index()
        parent = {}
        for j in self.plant.GetJointIndices(instance):
            joint = self.plant.get_joint(j)
            parent[joint.child_body().index()] = joint.parent_body().index()
        parts = {}
        for b in self.plant.GetBodyIndices(instance):
            root = b
            while parent.get(root, world) != world:
                root = parent[root]
            parts.setdefault(root, []).append(self.plant.get_body(b))
        return list(parts.values())

    def _check_object_inertia(self) -> None:
        """
        Refuse an object whose mass matrix is singular at the initial configuration.

        A singular block means a motion that costs nothing: a link without mass
        or rotational inertia.  The message names such links.
        """
        M = self.plant.CalcMassMatrix(self.plant_context)
        for obj, spec in zip(self.objects, self.scenario.objects):
            block = M[np.ix_(obj.v_idx, obj.v_idx)]
            if np.linalg.eigvalsh(block)[0] > 1e-12 * max(1.0, np.abs(block).max()):
                continue
            links = self._links_without_inertia(obj.instance)
            culprit = (f"link(s) {links} have no mass or no rotational inertia" if links else
                       "its links' masses and inertias leave a motion without inertia")
            raise ScenarioError(
                f"{spec.where}: object '{spec.name}' has a singular mass matrix: {culprit} "
                f"in '{spec.file}'. Fix: give every link of the object a positive mass and "
                "a positive definite rotational inertia (<inertial> in URDF and SDFormat).")

    def _links_without_inertia(self, instance) -> list[str]:
        """Return the links of ``instance`` with zero mass or a singular inertia about the COM."""
        names = []
        for b in self.plant.GetBodyIndices(instance):
            body = self.plant.get_body(b)
            M = body.default_spatial_inertia()
            inertia = M.Shift(M.get_com()).CalcRotationalInertia().CopyToFullMatrix3()
            moments = np.linalg.eigvalsh(inertia)
            if M.get_mass() <= 0.0 or moments[0] <= 1e-12 * max(1.0, moments[-1]):
                names.append(body.name())
        return names

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

    def _box_pairs(self) -> "BoxPairs":
        """
        Return the candidate pairs of two boxes, and hide them from Drake's distance queries.

        Drake's signed distance of two boxes within 1e-14 m of touching runs
        BoxBoxGradient, whose checks raise SystemExit or, in one branch, call
        std::abort (the process exits with 134 and nothing can catch it).  So
        the model's SceneGraph context filters every box-box pair, and the
        engine measures them itself (contact_detection.proximity_pairs,
        manifold.box_box_pairs).  The filter is on this model's context only:
        a QueryObject from it, such as QuasistaticPlant's query_object port,
        reports no box-box pairs.
        """
        pairs = [(a, b) for a, b in self.candidate_pairs
                 if self.geometries[a].shape.kind == BOX and self.geometries[b].shape.kind == BOX]
        boxes = sorted({g for pair in pairs for g in pair}, key=lambda g: g.get_value())
        slot = {g: k for k, g in enumerate(boxes)}
        manager = self.scene_graph.collision_filter_manager(
            self.scene_graph.GetMyMutableContextFromRoot(self.context))
        for a, b in pairs:
            manager.Apply(CollisionFilterDeclaration().ExcludeBetween(GeometrySet(a),
                                                                      GeometrySet(b)))
        half = np.array([self.geometries[g].shape.half for g in boxes]).reshape(-1, 3)
        query = self.query_object()
        poses = np.array([query.GetPoseInWorld(g).GetAsMatrix34() for g in boxes]).reshape(
            -1, 3, 4)
        return BoxPairs(ids=tuple(boxes), pairs=tuple(pairs),
                        slot_a=np.array([slot[a] for a, _ in pairs], dtype=np.int64),
                        slot_b=np.array([slot[b] for _, b in pairs], dtype=np.int64),
                        half=half,
                        moving=tuple(k for k, g in enumerate(boxes) if self.geometries[g].moves),
                        static_R=np.ascontiguousarray(poses[:, :, :3]),
                        static_o=np.ascontiguousarray(poses[:, :, 3]))

    def _friction(self, inspector, gid, file_sets_it: bool) -> float:
        if not file_sets_it:
            return self.scenario.default_friction
        props = inspector.GetProximityProperties(gid)
        if props is None or not props.HasProperty("material", "coulomb_friction"):
            return self.scenario.default_friction
        return props.GetProperty("material", "coulomb_friction").dynamic_friction()

    def _check_halfspaces(self, infos: dict) -> None:
        """Refuse a HalfSpace when any other shape than a Sphere is in the scene."""
        kinds = {info.shape.kind for info in infos.values()}
        if HALFSPACE in kinds and kinds - {HALFSPACE, SPHERE}:
            body = next(i.body_name for i in infos.values() if i.shape.kind == HALFSPACE)
            spec = self._entry(body.split("::")[0])
            raise ScenarioError(
                f"{spec.where}: '{body}' in '{spec.file}' has a HalfSpace collision geometry "
                "(an SDFormat <plane>), but Drake's signed-distance query pairs a HalfSpace "
                "only with a Sphere, and this scenario has other shapes. Fix: model the "
                "ground or table as a large box.")

    def _entry(self, name: str):
        """Return the scenario entry (robot, object or environment spec) of a model."""
        scenario = self.scenario
        return _by_name((*scenario.robots, *scenario.objects, *scenario.environment),
                        name, "model")

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
    A URDF floating joint in a robot or the environment is refused, because
    Drake's parser drops it and the model would be welded.  Raises
    ScenarioError naming the entry and the fix.
    """
    plant.mutable_gravity_field().set_gravity_vector(scenario.gravity)
    parser = Parser(plant)
    parser.package_map().Add(PACKAGE_NAME, str(package_share_dir()))
    instances = {}
    for spec in scenario.robots:
        if robot_only is None or spec.name == robot_only:
            instances[spec.name] = _add_model(parser, spec.name, spec.file, spec.where)
            _refuse_floating_joints(parser, spec, _ROBOT_FLOATING)
            _weld_roots(plant, instances[spec.name], spec.pose or Pose(), spec.where)
    if robot_only is not None:
        return instances
    for spec in scenario.objects:
        instances[spec.name] = _add_model(parser, spec.name, spec.file, spec.where)
    for spec in scenario.environment:
        instances[spec.name] = _add_model(parser, spec.name, spec.file, spec.where)
        _refuse_floating_joints(parser, spec, _ENVIRONMENT_FLOATING)
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


_ROBOT_FLOATING = (
    "robots are welded at their 'pose' and driven through revolute and prismatic joints: a "
    "floating base cannot be commanded. Fix: remove the floating joint and set 'pose' to "
    "place the base, or list the model under objects if it should move freely.")
_ENVIRONMENT_FLOATING = (
    "the environment is welded at its 'pose'. Fix: remove the floating joint, or list the "
    "model under objects if it should move freely.")


def _refuse_floating_joints(parser: Parser, spec, why: str) -> None:
    """Raise ScenarioError if the entry's URDF has a floating joint (Drake drops those)."""
    file = parser.package_map().ResolveUrl(spec.file) if "://" in spec.file else spec.file
    names = urdf_floating_joints(file)
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


def _by_name(items, name: str, kind: str):
    for item in items:
        if item.name == name:
            return item
    raise KeyError(f"unknown {kind} {name!r}. {kind.capitalize()}s in this scenario: "
                   f"{[i.name for i in items]}.")


def pose_is_set(pose: Pose) -> bool:
    """Return whether a pose differs from the identity."""
    return bool(np.any(pose.xyz != 0.0) or np.any(pose.rpy != 0.0))
