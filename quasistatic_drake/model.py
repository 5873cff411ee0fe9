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
from pydrake.multibody.plant import AddMultibodyPlantSceneGraph, MultibodyPlant
from pydrake.multibody.tree import BodyIndex, JacobianWrtVariable, JointIndex, ModelInstanceIndex
from pydrake.systems.framework import DiagramBuilder

from quasistatic_drake.manifold import shifted_jacobians
from quasistatic_drake.loading import (load_scenario_models, pose_to_rigid_transform,
                                       root_bodies)
from quasistatic_drake.coupling import Follower
from quasistatic_drake.drake_calls import call_drake
from quasistatic_drake.joint_limits import LIMIT_SLACK
from quasistatic_drake.model_files import collision_friction_flags, mimic_joints
from quasistatic_drake.scenario import Scenario, ScenarioError
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
    followers: tuple[Follower, ...] = ()   # coupled joints (URDF <mimic>): not commanded


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
        return convex_spec(vertices, hull_faces(hull.face_data()))
    return ShapeSpec(OTHER)


def hull_faces(face_data) -> list[np.ndarray]:
    """
    Return a PolygonSurfaceMesh's faces from its ``face_data()``.

    Drake stores each face as its corner count followed by its corners'
    vertex indices; reading them there is about 5 times faster than one
    ``element(f).vertex(j)`` call per corner (8 ms per 3000-face hull).
    """
    data = np.asarray(face_data, dtype=np.int64)
    faces, i = [], 0
    while i < data.size:
        n = int(data[i])
        faces.append(data[i + 1:i + 1 + n])
        i += n + 1
    return faces


class QuasistaticModel:
    """Builds the plant for a Scenario and partitions its DOFs."""

    def __init__(self, scenario: Scenario):
        self.scenario = scenario
        builder = DiagramBuilder()
        self.plant: MultibodyPlant
        self.scene_graph: SceneGraph
        self.plant, self.scene_graph = AddMultibodyPlantSceneGraph(builder, 0.0)
        loaded = load_scenario_models(self.plant, scenario)
        instances = loaded.instances
        self.files = loaded.files          # model name -> the file it was loaded from
        self.package_map = loaded.package_map
        self._set_object_poses(instances)
        self._finalize()
        self.diagram = builder.Build()
        self.context = self.diagram.CreateDefaultContext()
        self.plant_context = self.plant.GetMyMutableContextFromRoot(self.context)
        self._query = None          # SceneGraph's QueryObject at the set q
        self._poses: dict = {}      # {GeometryId: X_WG (3 x 4)} at the set q
        self.robots = tuple(self._robot_info(s, instances[s.name]) for s in scenario.robots)
        self.objects = tuple(self._object_info(s, instances[s.name]) for s in scenario.objects)
        self._check_environment(instances)
        self._check_constraints()
        self._check_objects_can_be_touched()
        self._set_initial_positions(instances)
        self._check_joint_limits()
        self._check_object_inertia()
        self.geometries = self._geometry_infos(instances)
        self.candidate_pairs = self._candidate_pairs()
        self.box_pairs = self._box_pairs()
        self.moving_bodies = self._moving_bodies()
        self.moving_slot = {int(body.index()): k for k, (body, _) in enumerate(self.moving_bodies)}
        self.moving_radii = np.array([r for _, r in self.moving_bodies])
        self._leaf_frames, self._source, self._columns = self._jacobian_plan()
        # "model::body" -> its row of body_jacobians() and body_poses(), for moving bodies
        self.moving_slot_by_name = {info.body_name: self.moving_slot[info.body_index]
                                    for info in self.geometries.values() if info.moves}
        self._jacobians = None
        self.quaternion_starts = self._quaternion_starts()
        self.floating_starts = self._floating_starts()
        # friction_directions: 2 only: the normal of the plane the objects move in
        self.motion_plane_normal = self._motion_plane_normal()
        self.q_default = self.plant.GetPositions(self.plant_context).copy()
        self._q_set: Optional[bytes] = None   # q.tobytes() of the set q
        self._query, self._poses = None, {}

    # ----- sizes and indices -------------------------------------------------
    @property
    def n_q(self) -> int:
        """Return the number of configuration variables."""
        return self.plant.num_positions()

    @property
    def n_v(self) -> int:
        """Return the number of generalized velocities."""
        return self.plant.num_velocities()

    def file_of(self, name: str) -> str:
        """Return the file a model was loaded from (for messages)."""
        return self.files.get(name, "<directives>")

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
        self._query = None
        self._poses = {}

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
                for frame in self._leaf_frames]).reshape(-1, 6, self.n_v)
            origins = np.array([plant.EvalBodyPoseInWorld(context, body).translation()
                                for body, _ in self.moving_bodies]).reshape(-1, 3)
            self._jacobians = (*shifted_jacobians(J, origins, *self._source, self._columns),
                               origins)
        return self._jacobians

    def _jacobian_plan(self) -> tuple[list, tuple[np.ndarray, np.ndarray], np.ndarray]:
        """
        Return the frames ``body_jacobians`` asks Drake for, each body's source, its columns.

        With only v_j nonzero, everything outboard of joint j moves as one
        rigid body.  So on the columns of the joints between the world and
        moving body b, b's Jacobian at its origin is that of any body L
        outboard of it, shifted from L's origin to b's
        (manifold.shifted_jacobians); it is zero on the others.  L is a
        moving body with no moving body outboard of it (a leaf): the arm's
        11 bodies take 3 of Drake's Jacobians (the two fingers' and the
        cylinder's), not 11.  Returns the leaves' frames, per body (its
        leaf's row among them, the leaf's row among the moving bodies), and
        the (bodies x n_v) mask of its joints' columns.
        """
        plant = self.plant
        inboard = {}                  # body index -> (parent body index, its joint's columns)
        for j in plant.GetJointIndices():
            joint = plant.get_joint(j)
            start = joint.velocity_start()
            inboard[int(joint.child_body().index())] = (
                int(joint.parent_body().index()), range(start, start + joint.num_velocities()))
        world = int(plant.world_body().index())
        paths, columns = [], np.zeros((len(self.moving_bodies), self.n_v), dtype=np.bool_)
        for k, (body, _) in enumerate(self.moving_bodies):
            path, b = set(), int(body.index())
            while b != world and b in inboard:
                b, joint_columns = inboard[b]
                path.add(b)
                columns[k, list(joint_columns)] = True
            paths.append(path)
        indices = [int(body.index()) for body, _ in self.moving_bodies]
        leaves = [k for k, b in enumerate(indices) if not any(b in path for path in paths)]
        leaf_of = [next(leaf for leaf in leaves if leaf == k or b in paths[leaf])
                   for k, b in enumerate(indices)]
        return ([self.moving_bodies[leaf][0].body_frame() for leaf in leaves],
                (np.array([leaves.index(leaf) for leaf in leaf_of], dtype=np.int64),
                 np.array(leaf_of, dtype=np.int64)), columns)

    def body_poses(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Return R (k x 3 x 3) and p (k x 3) of the moving bodies ``slots`` at the set q."""
        plant, context = self.plant, self.plant_context
        poses = [plant.EvalBodyPoseInWorld(context, self.moving_bodies[s][0]) for s in slots]
        return (np.array([X.rotation().matrix() for X in poses]).reshape(-1, 3, 3),
                np.array([X.translation() for X in poses]).reshape(-1, 3))

    def query_object(self):
        """Return SceneGraph's QueryObject at the current configuration (kept until q changes)."""
        if self._query is None:
            self._query = self.plant.get_geometry_query_input_port().Eval(self.plant_context)
        return self._query

    def geometry_pose(self, geometry) -> np.ndarray:
        """Return X_WG (3 x 4, read-only) of a geometry at the set q (kept until q changes)."""
        pose = self._poses.get(geometry)
        if pose is None:
            pose = self._poses[geometry] = self.query_object().GetPoseInWorld(
                geometry).GetAsMatrix34()
            pose.flags.writeable = False
        return pose

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
        followers = self._followers(spec, instance)
        following = {f.joint_name for f in followers}
        joints = [j for j in self._dof_joints(instance) if j.name() not in following]
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
            max_lead=self._max_lead(spec, joints), followers=followers)

    def _followers(self, spec, instance) -> tuple[Follower, ...]:
        """Return the robot's coupled joints, read from its file (Drake's coupler constraints)."""
        out = []
        for follower, leader, ratio, offset in mimic_joints(self.files.get(spec.name, "")):
            try:
                f = self.plant.GetJointByName(follower, instance)
                l_ = self.plant.GetJointByName(leader, instance)
            except RuntimeError:
                raise ScenarioError(
                    f"{spec.where}: joint '{follower}' mimics '{leader}', which is not a joint "
                    f"of '{spec.name}'. Fix: couple joints of one model only.") from None
            out.append(Follower(follower, f.position_start(), f.velocity_start(), leader,
                                l_.position_start(), l_.velocity_start(), ratio, offset))
        if any(f.leader_name in {g.joint_name for g in out} for f in out):
            raise ScenarioError(f"{spec.where}: a mimic joint follows another mimic joint. "
                                "Fix: let every mimic joint follow a driven joint.")
        return tuple(out)

    def _check_constraints(self) -> None:
        """Refuse a constraint the engine does not honour (only robots' couplers are)."""
        honoured = sum(len(r.followers) for r in self.robots)
        for name, path in self.files.items():
            if mimic_joints(path) and name not in {r.name for r in self.robots}:
                spec = self._entry(name)
                raise ScenarioError(f"{spec.where}: '{path}' couples joints (<mimic>), which "
                                    "the engine honours only in robots. Fix: remove the "
                                    "mimic, or drive the model as a robot.")
        extra = self.plant.num_constraints() - honoured
        if extra:
            raise ScenarioError(
                f"{self.scenario.source}: the models add {extra} constraint(s) the engine "
                "does not honour (a ball, distance or weld constraint, or a coupler it "
                "cannot read). Fix: remove them from the model files; only joint couplers "
                "(<mimic>) of robots are honoured.")

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
        return ObjectInfo(name=spec.name, instance=instance, q_idx=q_idx, v_idx=v_idx,
                          base_body=self._reported_body(spec, instance))

    def _reported_body(self, spec, instance) -> str:
        """
        Return the body whose pose stands for the object: ``body:``, else the heaviest.

        A jointed object may hang its physical body from massless links (qsim's
        planar objects: x, y and yaw "ghost" links at the origin); the body
        that carries the mass is the object.  Ties go to the first body.
        """
        bodies = [self.plant.get_body(b) for b in self.plant.GetBodyIndices(instance)]
        if spec.body is not None:
            names = [b.name() for b in bodies]
            if spec.body not in names:
                raise ScenarioError(f"{spec.where}.body: object '{spec.name}' has no body "
                                    f"{spec.body!r}; its bodies are {names}.")
            return spec.body
        masses = [b.default_mass() for b in bodies]
        return bodies[int(np.argmax(masses))].name()

    def _finalize(self) -> None:
        """Finalize the plant; a refusal by Drake (two parents of a body) is a ScenarioError."""
        try:
            call_drake(self.plant.Finalize)
        except RuntimeError as err:  # Drake's RuntimeError, or a DrakeRefusal
            raise ScenarioError(f"{self.scenario.source}: Drake could not finalize the models: "
                                f"{err} Fix: check the welds in the directives and the files "
                                "(each body has one parent).") from None

    def _check_joint_limits(self) -> None:
        """Refuse an initial position outside its joint's limits (the joint would stay there)."""
        q = self.plant.GetPositions(self.plant_context)
        lower, upper = self.plant.GetPositionLowerLimits(), self.plant.GetPositionUpperLimits()
        entries = {**{r.instance: (r, s) for r, s in zip(self.robots, self.scenario.robots)},
                   **{o.instance: (o, s) for o, s in zip(self.objects, self.scenario.objects)}}
        for j in range(self.plant.num_joints()):
            joint = self.plant.get_joint(JointIndex(j))
            if joint.num_positions() != 1 or joint.model_instance() not in entries:
                continue
            k = joint.position_start()
            if lower[k] - LIMIT_SLACK <= q[k] <= upper[k] + LIMIT_SLACK:
                continue
            info, spec = entries[joint.model_instance()]
            given = ("initial_positions" if spec.initial_positions is not None
                     else "its default position in the file")
            raise ScenarioError(
                f"{spec.where}: joint '{joint.name()}' starts at {q[k]:.6g}, outside its limits "
                f"[{lower[k]:.6g}, {upper[k]:.6g}] ({given}); the engine would hold it there. "
                "Fix: give an initial position within the limits (initial_positions), or "
                "widen the limits in the file.")

    def _motion_plane_normal(self) -> Optional[np.ndarray]:
        """
        Return the normal of the one plane every object moves in (friction_directions: 2).

        Two friction directions are a balanced set only in a plane of motion:
        each contact's tangents are then +-(n x p) for the plane normal p
        (contact.planar_tangents).  An object moves in a plane when its
        joints are a planar joint, or prismatic joints along the plane and
        revolute joints about its normal.  Scenarios without objects take
        the robots' joints.  None for other friction_directions.
        """
        if self.scenario.friction_directions != 2:
            return None
        movers = list(zip(self.objects, self.scenario.objects)) or list(
            zip(self.robots, self.scenario.robots))
        normal = None
        for info, spec in movers:
            p = self._plane_of(info.instance)
            if p is None:
                raise ScenarioError(
                    f"{self.scenario.source}: friction_directions: 2 is a balanced set only "
                    f"for motion in a plane, but '{spec.name}' does not move in one plane (a "
                    "free body, or joints that leave it). Fix: friction_directions: 4 (or "
                    "more), or give it a planar joint (or prismatic joints in a plane and "
                    "revolute joints about its normal).")
            if normal is not None and abs(normal @ p) < 1.0 - 1e-9:
                raise ScenarioError(
                    f"{self.scenario.source}: friction_directions: 2 needs one plane of "
                    f"motion, but '{spec.name}' moves in the plane with normal "
                    f"{np.round(p, 6).tolist()} and others in the plane with normal "
                    f"{np.round(normal, 6).tolist()}. Fix: friction_directions: 4 (or more).")
            normal = p
        return normal

    def _plane_of(self, instance) -> Optional[np.ndarray]:
        """Return the unit normal of the plane a model's joints move it in, or None."""
        sliding, turning = [], []
        for joint in self._dof_joints(instance):
            R_WF = joint.frame_on_parent().CalcPoseInWorld(self.plant_context).rotation()
            kind = joint.type_name()
            if kind == "planar":
                turning.append(R_WF.col(2))
            elif kind == "prismatic":
                sliding.append(R_WF @ joint.translation_axis())
            elif kind == "revolute":
                turning.append(R_WF @ joint.revolute_axis())
            else:
                return None
        if turning:
            normal = turning[0] / np.linalg.norm(turning[0])
        else:
            axes = np.array(sliding).reshape(-1, 3)
            if np.linalg.matrix_rank(axes, tol=1e-9) != 2:
                return None
            _, _, vt = np.linalg.svd(axes)
            normal = vt[-1]
        if any(abs(normal @ t) < 1.0 - 1e-9 for t in turning) or any(
                abs(normal @ a) > 1e-9 * np.linalg.norm(a) for a in sliding):
            return None
        return normal

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
                        f"link(s) {[b.name() for b in bodies]} of "
                        f"'{self.file_of(spec.name)}', so nothing "
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
                f"in '{self.file_of(spec.name)}'. Fix: give every link of the object a "
                "positive mass and "
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
            for f in robot.followers:
                q[f.q_idx] = f.ratio * q[f.leader_q_idx] + f.offset
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
        infos = {}
        for name, instance in instances.items():
            flags = self._friction_flags(name)
            for b in self.plant.GetBodyIndices(instance):
                body = self.plant.get_body(b)
                gids = self.plant.GetCollisionGeometriesForBody(body)
                has_mu = flags.get(body.name(), [])
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

    def _friction_flags(self, name: str) -> dict:
        """Return which collision elements of a model's file (and its includes) set friction."""
        if name not in self.files:
            return {}
        return collision_friction_flags(self.files[name], self.package_map.ResolveUrl)

    def _friction(self, inspector, gid, file_sets_one: bool) -> float:
        """
        Return a geometry's Coulomb friction: the file's, else the scenario's default_friction.

        Drake's parsers give a geometry whose file sets no friction exactly
        mu = 1.0 (static and dynamic).  Any other value came from the file.
        A 1.0 came from the file only where the file states it
        (``model_files.collision_friction_flags``, which follows includes).
        """
        props = inspector.GetProximityProperties(gid)
        if props is None or not props.HasProperty("material", "coulomb_friction"):
            return self.scenario.default_friction
        friction = props.GetProperty("material", "coulomb_friction")
        if (friction.static_friction(), friction.dynamic_friction()) != _DRAKE_DEFAULT_FRICTION:
            return friction.dynamic_friction()
        return friction.dynamic_friction() if file_sets_one else self.scenario.default_friction

    def _check_halfspaces(self, infos: dict) -> None:
        """Refuse a HalfSpace when any other shape than a Sphere is in the scene."""
        kinds = {info.shape.kind for info in infos.values()}
        if HALFSPACE in kinds and kinds - {HALFSPACE, SPHERE}:
            body = next(i.body_name for i in infos.values() if i.shape.kind == HALFSPACE)
            spec = self._entry(body.split("::")[0])
            raise ScenarioError(
                f"{spec.where}: '{body}' in '{self.file_of(spec.name)}' has a HalfSpace "
                "collision geometry "
                "(an SDFormat <plane>), but Drake's signed-distance query pairs a HalfSpace "
                "only with a Sphere, and this scenario has other shapes. Fix: model the "
                "ground or table as a large box.")

    def _entry(self, name: str):
        """Return the scenario entry (robot, object or environment spec) of a model."""
        scenario = self.scenario
        return _by_name((*scenario.robots, *scenario.objects, *scenario.environment),
                        name, "model")

    def _floating_starts(self) -> np.ndarray:
        """Return (position start, velocity start) of each quaternion floating joint."""
        starts = [(self.plant.get_joint(j).position_start(),
                   self.plant.get_joint(j).velocity_start())
                  for j in self.plant.GetJointIndices()
                  if self.plant.get_joint(j).type_name() == "quaternion_floating"]
        return np.array(starts, dtype=int).reshape(-1, 2)

    def _quaternion_starts(self) -> np.ndarray:
        starts = [self.plant.get_joint(j).position_start()
                  for j in self.plant.GetJointIndices()
                  if self.plant.get_joint(j).type_name() == "quaternion_floating"]
        return np.array(starts, dtype=int)


_ORIGIN = np.zeros(3)
# What Drake's parsers give a collision geometry whose file sets no friction (static, dynamic).
_DRAKE_DEFAULT_FRICTION = (1.0, 1.0)


def _by_name(items, name: str, kind: str):
    for item in items:
        if item.name == name:
            return item
    raise KeyError(f"unknown {kind} {name!r}. {kind.capitalize()}s in this scenario: "
                   f"{[i.name for i in items]}.")
