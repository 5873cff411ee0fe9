"""
Facts read from URDF/SDF text that Drake's parser does not keep.

Drake's parsers give every collision geometry a Coulomb friction: the file's
``drake:mu_dynamic`` (or ``drake:mu_static``, or SDFormat's
``surface/friction/ode/mu``) when present, otherwise a silent default of 1.0.
To apply the scenario's ``default_friction`` only where a file gives none, we
read which collision elements specify friction.  Drake registers a body's
collision geometries in document order, so a list of flags per link suffices.

Drake's URDF parser also drops a ``<joint type="floating">`` (with a warning)
and leaves its child link a free body; :func:`urdf_floating_joints` finds them.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Optional

_FRICTION_TAGS = ("drake_mu_dynamic", "drake_mu_static")


def collision_friction_flags(path: str) -> dict[str, list[bool]]:
    """
    Map each link name to one flag per collision element: whether it sets friction.

    Returns an empty dict for files that are not URDF or SDFormat XML.
    """
    root = _xml_root(path)
    if root is None:
        return {}
    return {link.get("name", ""): [_sets_friction(c) for c in link.findall("collision")]
            for link in root.iter("link")}


def urdf_floating_joints(path: str) -> list[str]:
    """
    Return the names of the joints of type "floating" in a URDF file.

    Returns an empty list for other files (SDFormat has no floating joint).
    """
    root = _xml_root(path)
    if root is None or root.tag != "robot":
        return []
    return [joint.get("name", "") for joint in root.iter("joint")
            if joint.get("type") == "floating"]


def _xml_root(path: str) -> Optional[ET.Element]:
    """Parse a URDF or SDFormat file, namespace prefixes dropped; None if it is not one."""
    if Path(path).suffix.lower() not in (".urdf", ".sdf", ".xml"):
        return None
    text = Path(path).read_text()
    text = re.sub(r"<(/?)(\w+):", r"<\1\2_", text)        # drop namespace prefixes
    text = re.sub(r"\sxmlns:\w+=\"[^\"]*\"", "", text)
    try:
        return ET.fromstring(text)
    except ET.ParseError:
        return None


def _sets_friction(collision: ET.Element) -> bool:
    if collision.find("surface/friction/ode/mu") is not None:
        return True
    return any(element.tag in _FRICTION_TAGS for element in collision.iter())
