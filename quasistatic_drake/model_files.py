"""
Facts read from URDF/SDF text that Drake's parser does not keep.

Drake's parsers give every collision geometry a Coulomb friction: the file's
``drake:mu_dynamic`` (or ``drake:mu_static``, or SDFormat's
``surface/friction/ode/mu``) when present, otherwise a silent default of 1.0.
To apply the scenario's ``default_friction`` only where a file gives none, we
read which collision elements specify friction, in the file and in the
files it includes (SDFormat ``<include><uri>``).  Drake registers a body's
collision geometries in document order, so a list of flags per link suffices.

Drake's URDF parser also drops a ``<joint type="floating">`` (with a warning)
and leaves its child link a free body; :func:`urdf_floating_joints` finds them.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Callable, Optional

_FRICTION_TAGS = ("drake_mu_dynamic", "drake_mu_static")


def collision_friction_flags(path: str, resolve_url: Optional[Callable[[str], str]] = None,
                             _seen: tuple = ()) -> dict[str, list[bool]]:
    """
    Map each link name to one flag per collision element: whether it sets friction.

    Follows SDFormat ``<include><uri>`` (``resolve_url`` turns a package://
    URI into a path; a relative uri is taken from the including file's
    directory).  Returns an empty dict for files that are not URDF or
    SDFormat XML.
    """
    root = _xml_root(path)
    if root is None or path in _seen:
        return {}
    flags = {link.get("name", ""): [_sets_friction(c) for c in link.findall("collision")]
             for link in root.iter("link")}
    for include in root.iter("include"):
        uri = (include.findtext("uri") or "").strip()
        included = _included_path(uri, Path(path).parent, resolve_url)
        if included:
            for link, link_flags in collision_friction_flags(
                    included, resolve_url, (*_seen, path)).items():
                flags.setdefault(link, link_flags)
    return flags


def _included_path(uri: str, base: Path, resolve_url) -> Optional[str]:
    """Return the model file an SDFormat include names (its model.sdf for a directory)."""
    if not uri:
        return None
    if "://" in uri and not uri.startswith("file://"):
        if resolve_url is None:
            return None
        try:
            uri = resolve_url(uri)
        except Exception:  # an unresolvable include: Drake would have refused it
            return None
    path = Path(uri[len("file://"):] if uri.startswith("file://") else uri)
    path = path if path.is_absolute() else base / path
    if path.is_dir():
        path = path / "model.sdf"
    return str(path) if path.is_file() else None


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
    try:
        text = Path(path).read_text()
    except OSError:
        return None
    text = re.sub(r"<(/?)(\w+):", r"<\1\2_", text)        # drop namespace prefixes
    text = re.sub(r"\sxmlns:\w+=\"[^\"]*\"", "", text)
    text = re.sub(r"(\s)(\w+):(\w+)=", r"\1\2_\3=", text)    # and attributes' prefixes
    try:
        return ET.fromstring(text)
    except ET.ParseError:
        return None


def _sets_friction(collision: ET.Element) -> bool:
    if collision.find("surface/friction/ode/mu") is not None:
        return True
    return any(element.tag in _FRICTION_TAGS for element in collision.iter())


def mimic_joints(path: str) -> list[tuple[str, str, float, float]]:
    """
    Return (follower, leader, ratio, offset) of each coupled joint: q_f = ratio q_l + offset.

    URDF ``<mimic joint multiplier offset>``; SDFormat ``<axis><mimic joint>``
    with ``<multiplier>``, ``<offset>`` and ``<reference>`` (q_f = m (q_l -
    reference) + offset), and Drake's ``<drake:mimic joint multiplier offset>``.
    """
    root = _xml_root(path)
    if root is None:
        return []
    found = []
    for joint in root.iter("joint"):
        for mimic in joint.iter():
            if mimic.tag not in ("mimic", "drake_mimic") or not mimic.get("joint"):
                continue
            ratio = float(mimic.get("multiplier", mimic.findtext("multiplier") or 1.0))
            offset = float(mimic.get("offset", mimic.findtext("offset") or 0.0))
            reference = float(mimic.findtext("reference") or 0.0)
            found.append((joint.get("name", ""), mimic.get("joint"), ratio,
                          offset - ratio * reference))
    return found
