"""
A ``robot_description`` that robot_state_publisher (urdfdom) and RViz accept.

Drake reads URDF extensions that urdfdom refuses: ``<drake:capsule>`` in a
``<geometry>`` makes urdfdom fail ("Unknown geometry type").  :func:`ros_urdf`
rewrites a Drake URDF into plain URDF:

* a capsule (``drake:capsule`` or ``capsule``) becomes a cylinder of the same
  radius and length plus two spheres at its ends, as three visual (or
  collision) elements with the same origin, material and name prefix;
* a ``drake:ellipsoid`` becomes a sphere of its largest semi-axis;
* every other element or attribute in Drake's namespace is removed
  (``drake:proximity_properties``, ``drake:collision_filter_group``, ...).

Links, joints and limits are kept.  :func:`robot_descriptions` does this
for the robots of a scenario file and names links and joints as the node's
TF frames and /joint_states do (frames.py): ``<robot>/<link>`` (``world``
stays ``world``; with the node's ``model_prefix`` false, the bare link name),
and ``<robot>/<joint>`` for a joint name two robots share.
:func:`robot_state_publisher_parameters` gives the parameters the launch
files give robot_state_publisher.  No rclpy.
"""

from __future__ import annotations

import copy
import math
import re
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Optional

import numpy as np
import yaml

NODE_NAME = "quasistatic_sim"
WORLD_LINK = "world"        # the root frame: never prefixed
DRAKE_NS = "http://drake.mit.edu"
_DRAKE = "{" + DRAKE_NS + "}"
_URDF_SHAPES = ("box", "cylinder", "sphere", "mesh")


class DescriptionError(ValueError):
    """A model that cannot become a robot_description; the message says how to fix it."""


def ros_urdf(urdf_text: str, source: str = "<urdf>", link_prefix: str = "",
             joint_names: Optional[dict] = None) -> str:
    """
    Return ``urdf_text`` rewritten as plain URDF (module docstring).

    Every link but ``world`` is renamed ``link_prefix + name``; joints named
    in ``joint_names`` ({old: new}) are renamed, with the mimics that follow
    them.
    """
    root = _parse(urdf_text, source)
    if root.tag != "robot":
        raise DescriptionError(f"{source}: the root element is <{root.tag}>, not <robot>. "
                               "Fix: robot_state_publisher needs a URDF file.")
    for link in root.iter("link"):
        for kind in ("visual", "collision"):
            for element in list(link.findall(kind)):
                _convert_shape(link, element, source)
    _strip_drake(root)
    _rename(root, link_prefix, joint_names or {})
    return ET.tostring(root, encoding="unicode")


def _rename(root: ET.Element, link_prefix: str, joint_names: dict) -> None:
    """Rename links (all but ``world``) and the joints of ``joint_names``, where used."""
    def link(name: Optional[str]) -> Optional[str]:
        return name if name in (None, WORLD_LINK) else link_prefix + name

    for element in root.iter("link"):
        element.set("name", link(element.get("name")))
    for joint in root.iter("joint"):
        if joint.get("name") in joint_names:
            joint.set("name", joint_names[joint.get("name")])
        for end in ("parent", "child"):
            element = joint.find(end)
            if element is not None and element.get("link") is not None:
                element.set("link", link(element.get("link")))
        mimic = joint.find("mimic")
        if mimic is not None and mimic.get("joint") in joint_names:
            mimic.set("joint", joint_names[mimic.get("joint")])


def moving_joints(urdf_text: str, source: str = "<urdf>") -> list[str]:
    """Return the names of a URDF's joints that are not fixed (those /joint_states carries)."""
    return [j.get("name") for j in _parse(urdf_text, source).iter("joint")
            if j.get("type") != "fixed" and j.get("name")]


def root_link(urdf_text: str) -> str:
    """Return the URDF's root link: the one link that is no joint's child."""
    root = _parse(urdf_text, "<urdf>")
    children = {j.find("child").get("link") for j in root.iter("joint")
                if j.find("child") is not None}
    roots = [link.get("name") for link in root.iter("link") if link.get("name") not in children]
    return roots[0] if len(roots) == 1 else ""


def robots_rooted_at_world(scenario) -> set[str]:
    """
    Return the robots of a Scenario whose URDF root link is ``world``.

    robot_state_publisher publishes those robots' base weld itself, so the
    node must not (frames.frame_layout).  A file that is not URDF, or cannot
    be read, counts as not rooted at ``world``.
    """
    rooted = set()
    for spec in scenario.robots:
        try:
            path = robot_file(scenario, spec)
            if path.endswith(".urdf") and root_link(Path(path).read_text()) == "world":
                rooted.add(spec.name)
        except (OSError, DescriptionError):
            pass
    return rooted


def robot_file(scenario, spec) -> str:
    """
    Return the path of a robot's model file: its ``file:``, or its directive's add_model.

    ``package://`` URIs resolve through the scenario's one PackageMap
    (``loading.make_package_map``: this package, ``packages:``,
    ROS_PACKAGE_PATH), which loads pydrake for that call only.
    """
    url = spec.file
    if url is None:
        models = [d["add_model"] for d in scenario.directives
                  if isinstance(d, dict) and isinstance(d.get("add_model"), dict)
                  and d["add_model"].get("name") == spec.name]
        if not models:
            raise DescriptionError(f"{spec.where}: robot '{spec.name}' is not added by an "
                                   "add_model directive of the scenario (nested directives are "
                                   "not read here). Fix: keep publish_robot_tf true (the node "
                                   "publishes the robot's TF).")
        url = models[0]["file"]
    if url.startswith("file://"):
        return url[len("file://"):]
    if "://" in url:
        from quasistatic_drake.loading import make_package_map
        return make_package_map(scenario).ResolveUrl(url)
    return url


def robot_descriptions(scenario_file: str | Path, model_prefix: bool = True) -> dict[str, str]:
    """
    Return {robot name: plain URDF} for every robot of a scenario YAML file.

    Its links and joints are named as the node's TF frames and /joint_states
    (module docstring; ``model_prefix`` as the node's parameter).
    """
    from quasistatic_drake.scenario import Scenario   # validates; ScenarioError if bad
    scenario = Scenario.from_yaml(scenario_file)
    texts = {}
    for robot in scenario.robots:
        path = robot_file(scenario, robot)
        if not path.endswith(".urdf"):
            raise DescriptionError(f"{robot.where}: '{path}' is not a URDF file; "
                                   "robot_state_publisher needs URDF. Fix: keep "
                                   "publish_robot_tf true (the node publishes the robot's TF).")
        texts[robot.name] = (Path(path).read_text(), robot.where)
    counts = Counter(j for text, where in texts.values() for j in moving_joints(text, where))
    if not model_prefix:
        _refuse_shared_links(texts)
    out = {}
    for name, (text, where) in texts.items():
        shared = {j: f"{name}/{j}" for j in moving_joints(text, where) if counts[j] > 1}
        out[name] = ros_urdf(text, where, f"{name}/" if model_prefix else "", shared)
    return out


def _refuse_shared_links(texts: dict) -> None:
    """Raise DescriptionError if two robots' URDFs share a link name (but ``world``)."""
    owners: dict = {}
    for name, (text, where) in texts.items():
        for link in _parse(text, where).iter("link"):
            if link.get("name") != WORLD_LINK:
                owners.setdefault(link.get("name"), []).append(name)
    shared = {link: robots for link, robots in owners.items() if len(robots) > 1}
    if shared:
        link, robots = next(iter(shared.items()))
        raise DescriptionError(f"robots {robots} share the link name '{link}': with "
                               "model_prefix false, their robot_state_publishers would both "
                               "publish that frame. Fix: set model_prefix true (frames "
                               "<robot>/<link>).")


def robot_state_publisher_parameters(scenario_file: str | Path,
                                     sim_params_file: str | Path) -> dict[str, dict]:
    """
    Return {robot: robot_state_publisher parameters} for a scenario's robots.

    ``robot_description`` is the robot's from :func:`robot_descriptions`,
    named as the node names its frames; ``frame_prefix`` is the node's, and
    ``model_prefix`` too is read from the params file (``quasistatic_sim:
    ros__parameters:``); ``use_sim_time`` is true.
    """
    data = yaml.safe_load(Path(sim_params_file).read_text()) or {}
    node = (data.get(NODE_NAME) or {}).get("ros__parameters") or {}
    prefix = str(node.get("frame_prefix", ""))
    model_prefix = node.get("model_prefix", True) is not False
    return {robot: {"robot_description": xml, "frame_prefix": prefix, "use_sim_time": True}
            for robot, xml in robot_descriptions(scenario_file, model_prefix).items()}


def _parse(text: str, source: str) -> ET.Element:
    if "drake:" in text and "xmlns:drake" not in text:
        text = re.sub(r"<robot\b", f'<robot xmlns:drake="{DRAKE_NS}"', text, count=1)
    try:
        return ET.fromstring(text)
    except ET.ParseError as err:
        raise DescriptionError(f"{source}: not well-formed XML: {err}") from err


def _convert_shape(link: ET.Element, element: ET.Element, source: str) -> None:
    """Replace a Drake-only shape of a visual or collision element by URDF shapes."""
    geometry = element.find("geometry")
    shapes = list(geometry) if geometry is not None else []
    if len(shapes) != 1 or shapes[0].tag in _URDF_SHAPES:
        return
    shape = shapes[0]
    name = shape.tag.replace(_DRAKE, "")
    if name == "capsule":
        radius, length = _float(shape, "radius", source), _float(shape, "length", source)
        _set_shape(geometry, shape, "cylinder", radius=radius, length=length)
        for side, sign in (("top", 1.0), ("bottom", -1.0)):
            cap = copy.deepcopy(element)
            _set_shape(cap.find("geometry"), cap.find("geometry")[0], "sphere", radius=radius)
            _shift_origin(cap, sign * 0.5 * length)
            if cap.get("name"):
                cap.set("name", f"{cap.get('name')}_{side}")
            link.insert(list(link).index(element) + 1, cap)
    elif name == "ellipsoid":
        radius = max(_float(shape, axis, source) for axis in ("a", "b", "c"))
        _set_shape(geometry, shape, "sphere", radius=radius)
    else:
        link.remove(element)


def _set_shape(geometry: ET.Element, old: ET.Element, tag: str, **sizes: float) -> None:
    geometry.remove(old)
    ET.SubElement(geometry, tag, {k: repr(v) for k, v in sizes.items()})


def _shift_origin(element: ET.Element, dz: float) -> None:
    """Move the element's origin by dz along its own z axis."""
    origin = element.find("origin")
    if origin is None:
        origin = ET.SubElement(element, "origin")
    xyz = np.array([float(x) for x in origin.get("xyz", "0 0 0").split()])
    rpy = [float(x) for x in origin.get("rpy", "0 0 0").split()]
    xyz = xyz + _rotation(*rpy) @ np.array([0.0, 0.0, dz])
    origin.set("xyz", " ".join(repr(float(x)) for x in xyz))


def _rotation(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """Return the rotation of URDF's fixed-axis rpy: R = Rz(yaw) Ry(pitch) Rx(roll)."""
    cr, sr, cp, sp = math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch)
    cy, sy = math.cos(yaw), math.sin(yaw)
    return (np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
            @ np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
            @ np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]]))


def _float(shape: ET.Element, key: str, source: str) -> float:
    value: Optional[str] = shape.get(key)
    try:
        return float(value)
    except (TypeError, ValueError):
        raise DescriptionError(f"{source}: <{shape.tag.replace(_DRAKE, 'drake:')}> needs a "
                               f"numeric '{key}', got {value!r}.") from None


def _strip_drake(element: ET.Element) -> None:
    """Remove every element and attribute in Drake's namespace, recursively."""
    for child in list(element):
        if child.tag.startswith(_DRAKE):
            element.remove(child)
        else:
            _strip_drake(child)
    for key in [k for k in element.attrib if k.startswith(_DRAKE)]:
        del element.attrib[key]
