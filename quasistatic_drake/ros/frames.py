"""
ROS names for a scenario's Drake model: TF frames and /joint_states joints.

TF follows robot_state_publisher's conventions: the root frame is ``world``,
every other frame is ``<model instance>/<link>`` (the scenario's name of the
model, then the URDF/SDFormat link name, Drake's body name) with the node's
``frame_prefix`` in front, and every frame has exactly one parent, ``world``:
the node publishes each body's pose in the world, never a chain.  So Drake's
foam brick is ``brick/base_link``, not a second ``base_link``, and the
robot_description of a robot names its links the same way
(description.robot_descriptions).

* bodies welded to the world (the environment, a robot's base) go on
  /tf_static once;
* the other bodies of objects, and of robots with ``publish_robot_tf``, go on
  /tf at every publication.

With ``publish_robot_tf`` false, robot_state_publisher publishes the robot's
links from ``robot_description`` and /joint_states.  It starts at the URDF's
root link; when that root is not ``world`` (the scenario welds it at
``pose``), the node publishes world -> root on /tf_static, and nothing else of
that robot.

With ``model_prefix`` false, frames are bare link names, and a link name
used by two models (two objects from one file) is qualified as
``<model>/<link>`` in all of them, so no frame is published twice.  Joint
names (/joint_states) are bare unless two robots share one, then
``<robot>/<joint>``.  Nothing here imports rclpy.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Collection

import numpy as np
from pydrake.multibody.tree import BodyIndex

from quasistatic_drake.model import QuasistaticModel

WORLD = "world"


@dataclass(frozen=True)
class Frame:
    """A TF child frame: the Drake body it shows and its full ROS name."""

    name: str
    body_index: int
    model: str


@dataclass(frozen=True)
class FrameLayout:
    """Which bodies go on /tf_static and which on /tf, all children of ``world``."""

    static: tuple[Frame, ...]
    moving: tuple[Frame, ...]

    def all_names(self) -> list[str]:
        """Return every child frame name, static first."""
        return [f.name for f in (*self.static, *self.moving)]


@dataclass(frozen=True)
class JointLayout:
    """
    The robots' commanded joints (robots in scenario order), and the joints /joint_states shows.

    ``names``, ``q_idx``, ``v_idx`` and ``robot_slices`` are the commanded
    joints (the order of ~/velocity_commands); ``state_*`` add the coupled
    joints (URDF <mimic>), which follow their leaders and take no command.
    """

    names: tuple[str, ...]
    q_idx: np.ndarray
    v_idx: np.ndarray
    robot_slices: dict
    state_names: tuple[str, ...] = ()
    state_q_idx: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    state_v_idx: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))

    @property
    def size(self) -> int:
        """Return the number of joints."""
        return len(self.names)


def joint_layout(model: QuasistaticModel) -> JointLayout:
    """Return the robots' joints, names qualified as <robot>/<joint> only where they clash."""
    pairs = [(r.name, j) for r in model.robots for j in r.joint_names]
    followers = [(r.name, f) for r in model.robots for f in r.followers]
    counts = Counter([j for _, j in pairs] + [f.joint_name for _, f in followers])
    names = tuple(j if counts[j] == 1 else f"{robot}/{j}" for robot, j in pairs)
    coupled = tuple(f.joint_name if counts[f.joint_name] == 1 else f"{robot}/{f.joint_name}"
                    for robot, f in followers)
    slices, start = {}, 0
    for robot in model.robots:
        slices[robot.name] = slice(start, start + len(robot.joint_names))
        start += len(robot.joint_names)
    q_idx = np.concatenate([r.q_idx for r in model.robots]) if model.robots else np.zeros(0)
    v_idx = np.concatenate([r.v_idx for r in model.robots]) if model.robots else np.zeros(0)
    return JointLayout(
        names=names, q_idx=q_idx.astype(int), v_idx=v_idx.astype(int), robot_slices=slices,
        state_names=names + coupled,
        state_q_idx=np.array([*q_idx, *(f.q_idx for _, f in followers)], dtype=int),
        state_v_idx=np.array([*v_idx, *(f.v_idx for _, f in followers)], dtype=int))


class FrameNameClash(ValueError):
    """Bare link names that robot_state_publisher would publish twice; says how to fix it."""


def frame_layout(model: QuasistaticModel, frame_prefix: str = "",
                 publish_robot_tf: bool = True,
                 robots_rooted_at_world: Collection[str] = (),
                 model_prefix: bool = True) -> FrameLayout:
    """
    Return the frames the node publishes (module docstring).

    ``robots_rooted_at_world`` names the robots whose robot_description has
    the root link ``world`` (robot_state_publisher then publishes their
    base weld too); it matters only when ``publish_robot_tf`` is false.
    Raises FrameNameClash if ``model_prefix`` and ``publish_robot_tf`` are
    both false and a robot shares a link name with another model: the node
    would qualify it, robot_state_publisher (from the bare
    robot_description) would not.
    """
    plant = model.plant
    robots = {r.name for r in model.robots}
    welded = {int(b.index()) for b in plant.GetBodiesWeldedTo(plant.world_body())}
    bodies = [plant.get_body(BodyIndex(i)) for i in range(1, plant.num_bodies())]
    counts = Counter(b.name() for b in bodies)
    if not (model_prefix or publish_robot_tf):
        _refuse_shared_robot_links(plant, bodies, robots, counts)
    static, moving = [], []
    for body in bodies:
        index, owner = int(body.index()), plant.GetModelInstanceName(body.model_instance())
        qualified = model_prefix or counts[body.name()] > 1
        link = f"{owner}/{body.name()}" if qualified else body.name()
        frame = Frame(name=frame_prefix + link, body_index=index, model=owner)
        if owner in robots and not publish_robot_tf:
            if index in welded and _is_root(plant, body) and owner not in robots_rooted_at_world:
                static.append(frame)
            continue
        (static if index in welded else moving).append(frame)
    return FrameLayout(static=tuple(static), moving=tuple(moving))


def _refuse_shared_robot_links(plant, bodies, robots: set, counts: Counter) -> None:
    """Raise FrameNameClash for a robot link whose bare name another model's link has too."""
    for body in bodies:
        owner = plant.GetModelInstanceName(body.model_instance())
        if owner in robots and counts[body.name()] > 1:
            others = sorted({plant.GetModelInstanceName(b.model_instance()) for b in bodies
                             if b.name() == body.name()} - {owner})
            raise FrameNameClash(
                f"robot '{owner}' and model(s) {others} share the link name "
                f"'{body.name()}': with model_prefix false, robot_state_publisher would "
                f"publish it bare for each. Fix: set model_prefix true (frames "
                f"<model>/<link>), or publish_robot_tf true.")


def _is_root(plant, body) -> bool:
    """Return whether the body hangs directly from the world body."""
    for j in plant.GetJointIndices(body.model_instance()):
        joint = plant.get_joint(j)
        if joint.child_body().index() == body.index():
            return joint.parent_body().index() == plant.world_body().index()
    return True
