"""
``quasistatic-drake convert-qsim Q_SYS.yml [-o OUT.yaml]``: a qsim scene as our scenario.

qsim (Tao Pang's quasistatic_simulator) describes a scene with a "q_sys"
YAML file (``models/q_sys/*.yml`` in its repository) read by
``qsim/parser.py`` (``QuasistaticParser``) and, in C++, by
``quasistatic_simulator_cpp/qsim/quasistatic_parser.cc``::

    model_directive: package://quasistatic_simulator/scene.yml   # Drake model directives
    robots:                       # model instances of the directives
      - {name: arm, Kp: [1000, 1000, 1000]}      # joint stiffness, one per velocity
    objects:                      # added from their own file, not from the directives
      - {name: box0, file: package://quasistatic_simulator/box.sdf}
    quasistatic_sim_params:       # fields of QuasistaticSimParameters
      h: 0.1                      # usually left out: qsim's caller passes it per step
      gravity: [0, 0, -10]
      nd_per_contact: 4
      contact_detection_tolerance: .inf
      is_quasi_dynamic: true
      unactuated_mass_scale: 5.

qsim resolves ``package://`` URIs with a fixed map (``qsim/model_paths.py``):
``quasistatic_simulator`` is its ``models/`` directory (which holds a
package.xml), ``drake_manipulation_models`` is Drake's manipulation/models
and ``iiwa_controller`` is robotics_utilities' models.  Here a package's
root is what ``--package NAME=DIR`` says, else the nearest package.xml
naming it in the q_sys file's directory, its parents or their
subdirectories; ``drake``, ``drake_models`` and ``quasistatic_drake`` need
no root.

The mapping (qsim key -> scenario key):

* ``model_directive`` -> ``directives: [- add_directives: {file: <the same URI>}]``;
* ``objects[i]: {name, file}`` -> ``directives: [- add_model: {name, file}]`` (before the
  add_directives, as qsim adds objects first) and ``objects[i]: {name}``;
* ``robots[i]: {name, Kp}`` -> ``robots[i]: {name, stiffness: Kp}``;
* every other model instance the directives create -> ``environment: [{name}]``; it
  must have no degrees of freedom (a free or jointed model that qsim lists neither as
  a robot nor as an object is an error: qsim's plant would have velocities no model owns);
* ``h`` -> ``time_step`` (or ``--time-step``; qsim files rarely give h, and the scenario
  needs one);
* ``gravity`` -> ``gravity`` (qsim's default, when left out, is 0: written as [0, 0, 0]);
* ``nd_per_contact`` -> ``friction_directions`` (an even integer >= 2);
* ``contact_detection_tolerance`` -> ``contact_detection_tolerance`` (.inf allowed);
* ``is_quasi_dynamic`` (qsim's default true) and ``unactuated_mass_scale`` s (NaN: off):
  true with s NaN -> ``quasi_dynamic: true`` (objects keep M_u); true with s > 0 ->
  ``quasi_dynamic: false, quasi_static_inertia_ratio: 1/s`` (both scale M_u to a largest
  value of h^2 min(K) / s: qsim each object's diagonal, every step; we all objects'
  eigenvalues, at the start; a note says so); false -> ``quasi_dynamic: false`` (qsim
  drops M_u, we keep a small eps M_u; a note says so);
* ``calc_contact_forces: true`` -> nothing to write (contact forces are always computed);
* the scenario also gets ``formulation: qp`` (qsim's default forward mode, kQpMp, is
  this QP) and ``default_friction: 1.0`` (Drake's friction for geometry whose file gives
  none, which qsim uses; our default is 0.5).

Refused, with a :class:`ConversionError` that names the file, line and key and
says how to fix it: any key qsim does not read; ``log_barrier_weight``,
``gradient_lstsq_tolerance``, ``forward_mode``, ``gradient_mode``,
``use_free_solvers`` and ``calc_contact_forces: false`` (no counterpart
here); ``unactuated_mass_scale`` 0, negative or inf (qsim then holds the
objects still, or refuses); ``model_namespace`` in add_directives (our
model names have no '::').

The directives are not copied: the scenario includes qsim's directives file
by its ``package://`` URI, so Drake reads that file itself (its ``!Rpy``
tags and nested add_directives included), the scene follows edits to it,
and the only file-system paths in the scenario are the ``packages:`` roots,
relative to the scenario file: a moved scenario needs only those, and a
``directives_file:`` could not hold qsim's objects anyway.

At module level only ``yaml``, ``argparse``, ``pathlib`` and ``os`` are imported
(``re``, ``sys`` and ``xml.etree`` where used): converting needs neither Drake
nor numpy.  Model files are read as XML (URDF, SDFormat) to count their
degrees of freedom; a weld child without '::' is found, as Drake does, as the
one model with a link or frame of that name.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import yaml

# package:// names Drake or this package resolve without a root under packages:
BUILTIN_PACKAGES = ("drake", "drake_models", "quasistatic_drake")
_TOP_KEYS = ("model_directive", "robots", "objects", "quasistatic_sim_params")
_ROBOT_KEYS = ("name", "Kp")
_OBJECT_KEYS = ("name", "file")
# quasistatic_sim_params that qsim's parsers read (the C++ one the first seven)
_PARAMS = ("h", "gravity", "nd_per_contact", "contact_detection_tolerance", "is_quasi_dynamic",
           "log_barrier_weight", "unactuated_mass_scale", "calc_contact_forces",
           "gradient_lstsq_tolerance", "forward_mode", "gradient_mode", "use_free_solvers")
_REFUSED_PARAMS = {
    "log_barrier_weight": "weighs qsim's log-barrier (smoothed) dynamics, which "
                          "quasistatic_drake does not have (it solves the exact QP or MIQP)",
    "gradient_lstsq_tolerance": "tunes qsim's dynamics gradients, which quasistatic_drake "
                                "does not compute",
    "forward_mode": "chooses qsim's forward dynamics; here the scenario's formulation "
                    "(qp or miqp) does, and the converter writes qp, qsim's default kQpMp",
    "gradient_mode": "chooses which dynamics gradients qsim computes; quasistatic_drake "
                     "computes none",
    "use_free_solvers": "chooses qsim's solvers; quasistatic_drake picks its own",
}
_DIRECTIVE_KINDS = ("add_model", "add_model_instance", "add_frame", "add_weld",
                    "add_collision_filter_group", "add_directives")
_DIRECTIVE_KEYS = {
    "add_model": ("name", "file", "default_joint_positions", "default_free_body_pose"),
    "add_model_instance": ("name",),
    "add_frame": ("name", "X_PF"),
    "add_weld": ("parent", "child", "X_PC"),
    "add_collision_filter_group": ("name", "members", "member_groups", "model_namespace",
                                   "ignored_collision_filter_groups"),
    "add_directives": ("file", "model_namespace"),
}
# velocities of each joint type (URDF, SDFormat and drake:joint)
_JOINT_DOFS = {"fixed": 0, "revolute": 1, "continuous": 1, "prismatic": 1, "screw": 1,
               "universal": 2, "revolute2": 2, "ball": 3, "planar": 3, "floating": 6}


class ConversionError(ValueError):
    """A qsim scene that cannot be converted; the message says where and how to fix it."""


def convert_qsim(q_sys_path, out_path=None, *, time_step=None, packages=None) -> dict:
    """
    Return the scenario (a dict) equivalent to a qsim q_sys file; write it to ``out_path``.

    With ``out_path``, the ``packages:`` roots are relative to its directory
    (as the scenario loader reads them) and the YAML written there starts
    with comments naming the source and the conversion's notes; without
    it, they are absolute.  ``time_step`` [s] replaces (or supplies) qsim's
    ``h``; ``packages`` maps package names to root directories, before any
    package.xml found near the q_sys file.  Raises :class:`ConversionError`.
    """
    scenario, notes = convert_with_notes(q_sys_path, out_path, time_step=time_step,
                                         packages=packages)
    if out_path is not None:
        write_scenario(scenario, out_path, q_sys_path, notes)
    return scenario


def convert_with_notes(q_sys_path, out_path=None, *, time_step=None,
                       packages=None) -> tuple[dict, list[str]]:
    """Return the scenario of :func:`convert_qsim` and the notes on what was converted how."""
    converter = _Converter(Path(q_sys_path), packages or {})
    scenario = converter.convert(time_step)
    roots = scenario["packages"]
    if out_path is not None:
        base = Path(out_path).absolute().parent
        roots = {name: Path(os.path.relpath(root, base)).as_posix()
                 for name, root in roots.items()}
    scenario["packages"] = roots
    return scenario, converter.notes


def write_scenario(scenario: dict, out_path, q_sys_path, notes) -> None:
    """Write a converted scenario as YAML, its notes as comments at the top."""
    out_path = Path(out_path)
    if out_path.absolute().resolve() == Path(q_sys_path).absolute().resolve():
        raise ConversionError(f"{out_path}: the output would overwrite the q_sys file. "
                              "Fix: pass another -o path.")
    source = os.path.relpath(Path(q_sys_path).absolute(), out_path.absolute().parent)
    lines = [f"# Converted from the qsim scene {Path(source).as_posix()}",
             "# by quasistatic-drake convert-qsim."]
    lines += [f"# Note: {note}" for note in notes]
    body = yaml.safe_dump(scenario, sort_keys=False, default_flow_style=None, width=99)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text("\n".join(lines) + "\n" + body)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the convert-qsim arguments to a (sub)command's parser."""
    from quasistatic_drake.apps.arguments import output_file   # stdlib only, like this module
    parser.add_argument("q_sys", type=Path, help="the qsim q_sys YAML file")
    parser.add_argument("-o", "--output", type=output_file(".yaml", ".yml"),
                        help="the scenario YAML to write (default: <q_sys stem>.scenario.yaml "
                             "in the current directory)")
    parser.add_argument("--time-step", type=float, metavar="H",
                        help="the time step h [s]; needed when the q_sys file gives no h "
                             "(qsim takes it from the caller), and replaces its h otherwise")
    parser.add_argument("--package", action="append", default=[], metavar="NAME=DIR",
                        help="the root directory of package://NAME/ (repeatable); default: "
                             "the nearest package.xml naming it, around the q_sys file")


def run(args: argparse.Namespace) -> int:
    """Convert as the parsed arguments say; print where it went and the notes; return 0 or 2."""
    import sys
    output = args.output or Path(f"{args.q_sys.stem}.scenario.yaml")
    try:
        packages = _package_options(args.package)
        scenario, notes = convert_with_notes(args.q_sys, output, time_step=args.time_step,
                                             packages=packages)
        write_scenario(scenario, output, args.q_sys, notes)
    except ConversionError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"error: {err.filename or ''}: {err.strerror or err}", file=sys.stderr)
        return 2
    print(f"wrote {output}")
    for note in notes:
        print(f"note: {note}")
    return 0


def main(argv=None) -> int:
    """Run ``quasistatic-drake convert-qsim``; return the exit code (2 on a bad scene)."""
    parser = argparse.ArgumentParser(
        prog="quasistatic-drake convert-qsim",
        description="Write a quasistatic_drake scenario from a qsim q_sys file and its "
                    "model directives.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


def _package_options(options) -> dict:
    """Return {name: directory} from NAME=DIR strings."""
    packages = {}
    for option in options:
        name, sep, directory = option.partition("=")
        if not sep or not name or not directory:
            raise ConversionError(f"--package {option}: expected NAME=DIR.")
        packages[name] = directory
    return packages


# ----- YAML with locations ------------------------------------------------------------
class _DrakeLoader(yaml.SafeLoader):
    """A safe YAML loader that reads Drake's tags (``!Rpy``, ``!AngleAxis``, ...) as plain."""


def _untagged(loader, suffix, node):
    """Construct a tagged node as if it had no tag."""
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_scalar(node)


_DrakeLoader.add_multi_constructor("!", _untagged)


class _YamlFile:
    """A parsed YAML file that can say at which line a key path is."""

    def __init__(self, path: Path, what: str, where: str):
        """Read ``path``; ``what`` and ``where`` (who named it) go into error messages."""
        self.path = path
        if not path.is_file():
            raise ConversionError(f"{where}: {what} {path} does not exist. Fix: create it, or "
                                  "correct the path.")
        try:
            text = path.read_text()
            self.node = yaml.compose(text, Loader=_DrakeLoader)
            self.data = yaml.load(text, Loader=_DrakeLoader)
        except (yaml.YAMLError, UnicodeDecodeError) as err:
            message = " ".join(str(err).split())
            raise ConversionError(f"{path}: not valid YAML: {message}. Fix: correct the "
                                  "syntax there.") from None

    def at(self, *keys) -> str:
        """Return 'file:line: a.b[0].c' for a key path (the line of its deepest known key)."""
        node, line = self.node, 1
        for key in keys:
            found = None
            if isinstance(node, yaml.MappingNode):
                found = next(((k, v) for k, v in node.value if k.value == key), None)
            elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and (
                    0 <= key < len(node.value)):
                found = (node.value[key], node.value[key])
            if found is None:
                break
            line, node = found[0].start_mark.line + 1, found[1]
        path = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in keys).lstrip(".")
        return f"{self.path}:{line}: {path or 'top level'}"


# ----- reading model files ------------------------------------------------------------
def _xml_root(path: Path):
    """Return the root element of a URDF or SDFormat file with namespace prefixes dropped."""
    import re
    import xml.etree.ElementTree as ElementTree
    if path.suffix.lower() not in (".urdf", ".sdf"):
        return None
    text = re.sub(r"<(/?)(\w+):", r"<\1\2_", path.read_text())
    text = re.sub(r"\sxmlns:\w+=\"[^\"]*\"", "", text)
    try:
        return ElementTree.fromstring(text)
    except ElementTree.ParseError:
        return None


class _Kinematics:
    """A model file's joints and root links, as far as its XML says."""

    def __init__(self, joints: list, roots: list):
        """Keep (name, type, dofs) per joint and the links no joint moves."""
        self.joints = joints
        self.roots = roots

    def dofs(self, welds: int) -> int:
        """Return the velocities once ``welds`` of the root links are welded."""
        return sum(d for _, _, d in self.joints) + 6 * max(0, len(self.roots) - welds)

    def describe(self, welds: int) -> str:
        """Say where the velocities come from (joints, free bodies)."""
        parts = [f"joint '{name}' ({kind})" for name, kind, d in self.joints if d]
        parts += [f"free body '{link}'" for link in self.roots[welds:]]
        return ", ".join(parts)


def _kinematics(path: Path):
    """Return the :class:`_Kinematics` of a URDF or SDFormat file, None if it cannot tell."""
    root = _xml_root(path)
    if root is None:
        return None
    if root.tag == "robot":
        links = [link.get("name", "") for link in root.findall("link")]
        joints = [(j.get("name", ""), j.get("type", ""), _link(j, "parent"), _link(j, "child"))
                  for j in root.findall("joint") + root.findall("drake_joint")]
    elif root.tag == "sdf":
        models = root.findall("model")
        if len(models) != 1 or models[0].find("model") is not None or models[0].find(
                "include") is not None:
            return None
        model = models[0]
        if (model.findtext("static") or "").strip().lower() in ("true", "1"):
            return _Kinematics([], [])
        links = [link.get("name", "") for link in model.findall("link")]
        joints = [(j.get("name", ""), j.get("type", ""),
                   (j.findtext("parent") or "").strip().split("::")[-1],
                   (j.findtext("child") or "").strip().split("::")[-1])
                  for j in model.findall("joint") + model.findall("drake_joint")]
    else:
        return None
    if any(kind not in _JOINT_DOFS for _, kind, _, _ in joints):
        return None
    moved = {child for _, _, _, child in joints}
    roots = [link for link in links if link != "world" and link not in moved]
    return _Kinematics([(name, kind, _JOINT_DOFS[kind]) for name, kind, _, _ in joints],
                       roots)


def _sdf_model_count(path: Path) -> int:
    """Return how many top-level models an SDFormat file holds (1 for other files)."""
    root = _xml_root(path)
    return len(root.findall("model")) if root is not None and root.tag == "sdf" else 1


def _frame_names(path: Path) -> set:
    """Return the link and frame names of a URDF or SDFormat file (empty if unreadable)."""
    root = _xml_root(path)
    if root is None:
        return set()
    model = root if root.tag == "robot" else root.find("model")
    if model is None:
        return set()
    return {e.get("name", "") for e in model.findall("link") + model.findall("frame")}


def _link(joint, key: str) -> str:
    """Return a URDF joint's parent or child link name."""
    element = joint.find(key)
    return "" if element is None else element.get("link", "")


def _package_name(path: Path):
    """Return the <name> of a package.xml, None if it has none."""
    import re
    try:
        match = re.search(r"<name>\s*([^<\s]+)\s*</name>", path.read_text())
    except (OSError, UnicodeDecodeError):
        return None
    return match.group(1) if match else None


def _package_uris(path: Path) -> list[str]:
    """Return the package names a text file refers to with package:// URIs."""
    import re
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        return []
    return sorted(set(re.findall(r"package://([^/\s\"'<>]+)/", text)))


def _is_number(value) -> bool:
    """Return whether a YAML value is a number (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# ----- the conversion -----------------------------------------------------------------
class _Model:
    """A model instance of the scene: where it was created and how it is attached."""

    def __init__(self, name: str, uri, path, where: str):
        """
        Keep the name, the file and where it was created.

        ``uri`` is None for an add_model_instance (no bodies); ``path`` is None
        also for a file of Drake's built-in packages, which cannot be read here.
        """
        self.name = name
        self.uri = uri
        self.path = path
        self.where = where
        self.welds: list[tuple[str, str]] = []     # (parent frame, where)


class _Converter:
    """Convert one q_sys file; collects notes on the way."""

    def __init__(self, q_sys: Path, packages: dict):
        """Start with the given package roots (name: directory)."""
        self.q_sys = q_sys
        self.roots = {name: Path(root).absolute().resolve()
                      for name, root in packages.items()}
        for name, root in self.roots.items():
            if not root.is_dir():
                raise ConversionError(f"--package {name}={packages[name]}: {root} is not a "
                                      "directory. Fix: give the package's root directory.")
        self.used: set[str] = set()
        self.notes: list[str] = []
        self.models: dict[str, _Model] = {}
        self.frames: dict[str, str] = {}            # add_frame name: base_frame
        self.object_names: set[str] = set()
        self.top_directives = None                  # the q_sys file's directives file
        self._package_xml: dict[Path, object] = {}

    # -- packages
    def resolve(self, uri, where: str, what: str, builtin_ok: bool = False):
        """
        Return the file a directive or q_sys URI names (ConversionError if missing).

        With ``builtin_ok``, a URI of Drake's built-in packages (no root given)
        returns None: Drake resolves it, this converter cannot read it.
        """
        if not isinstance(uri, str) or not uri:
            raise ConversionError(f"{where}: expected a package:// URI, got {uri!r}.")
        name = uri[len("package://"):].partition("/")[0]
        if builtin_ok and uri.startswith("package://") and name in BUILTIN_PACKAGES and (
                name not in self.roots):
            self.notes.append(f"{where}: {uri} is in Drake's (or quasistatic_drake's) own "
                              f"package '{name}', not checked here; pass --package {name}=DIR "
                              "to check it.")
            return None
        if uri.startswith("file://"):
            path = Path(uri[len("file://"):])
            self.notes.append(f"{where}: {uri} is an absolute path; the scenario works only "
                              "where that file is.")
        elif uri.startswith("package://"):
            path = self.package_root(name, where) / uri[len("package://") + len(name) + 1:]
        else:
            raise ConversionError(f"{where}: '{uri}' is not a package:// or file:// URI, which "
                                  "Drake's model directives need (and qsim too). Fix: write "
                                  "package://<package>/<path>.")
        if not path.is_file():
            raise ConversionError(f"{where}: {what} '{uri}' does not exist (looked at {path}). "
                                  "Fix: create it, or correct the URI.")
        return path

    def package_root(self, name: str, where: str, required: bool = True):
        """Return a package's root: --package, else the nearest package.xml naming it."""
        if name in BUILTIN_PACKAGES and name not in self.roots:
            raise ConversionError(f"{where}: package://{name}/ is built into Drake or "
                                  "quasistatic_drake; this converter cannot read its files "
                                  f"here. Fix: pass --package {name}=DIR with its directory.")
        if name not in self.roots:
            found = self.find_package(name)
            if found is None:
                if not required:
                    return None
                raise ConversionError(
                    f"{where}: no root for package://{name}/: no package.xml naming '{name}' "
                    f"near {self.q_sys} (qsim's own map, qsim/model_paths.py, does not apply "
                    f"here). Fix: pass --package {name}=DIR.")
            self.roots[name] = found
        self.used.add(name)
        return self.roots[name]

    def find_package(self, name: str):
        """Return the directory of the nearest package.xml naming ``name``, or None."""
        start = self.q_sys.absolute().resolve().parent
        for directory in (start, *start.parents):
            candidates = [directory / "package.xml"]
            try:
                candidates += sorted(directory.glob("*/package.xml"))
            except OSError:
                pass
            for candidate in candidates:
                if candidate not in self._package_xml:
                    self._package_xml[candidate] = (_package_name(candidate)
                                                    if candidate.is_file() else None)
                if self._package_xml[candidate] == name:
                    return candidate.parent
        return None

    def model_file_packages(self, path: Path) -> None:
        """Record the packages a model file uses (meshes, includes); note unknown ones."""
        for name in _package_uris(path):
            if name in BUILTIN_PACKAGES or name in self.used:
                continue
            if self.package_root(name, str(path), required=False) is None:
                self.notes.append(
                    f"{path} uses package://{name}/, which has no root here; Drake will look "
                    f"for it in ROS_PACKAGE_PATH. Pass --package {name}=DIR to record it.")

    # -- the q_sys file
    def convert(self, time_step) -> dict:
        """Return the scenario dict (package roots absolute)."""
        q_sys = _YamlFile(self.q_sys, "the q_sys file", "convert-qsim")
        data = q_sys.data
        if not isinstance(data, dict):
            raise ConversionError(f"{q_sys.at()}: expected a mapping with the keys "
                                  f"{list(_TOP_KEYS)}.")
        self.check_keys(q_sys, data, _TOP_KEYS, (), "qsim's parser (qsim/parser.py) reads")
        for key in ("model_directive", "robots", "quasistatic_sim_params"):
            if key not in data:
                raise ConversionError(f"{q_sys.at()}: '{key}' is missing; qsim's parser "
                                      f"requires it. Fix: add {key}.")
        params = self.sim_params(q_sys, data["quasistatic_sim_params"], time_step)
        objects = self.objects(q_sys, data.get("objects"))
        directive_uri = data["model_directive"]
        where = q_sys.at("model_directive")
        if not isinstance(directive_uri, str) or not directive_uri.startswith("package://"):
            raise ConversionError(f"{where}: expected a package:// URI (qsim resolves no "
                                  f"other), got {directive_uri!r}.")
        self.directives(directive_uri, where, ())
        robots = self.robots(q_sys, data["robots"])
        environment = self.environment(set(robots) | set(objects))
        directives = [{"add_model": {"name": name, "file": self.models[name].uri}}
                      for name in objects]
        directives.append({"add_directives": {"file": directive_uri}})
        if objects:
            self.notes.append(
                f"{q_sys.at('objects')}: a q_sys file carries no initial poses (qsim takes them "
                f"from the caller), so {sorted(objects)} start at the origin, where they may "
                "overlap the robots or the ground. Fix: give each an initial_pose under "
                "objects (or a default_free_body_pose in its add_model).")
        return {
            **params,
            "packages": {name: str(self.roots[name]) for name in sorted(self.used)},
            "directives": directives,
            "robots": [{"name": name, "stiffness": kp} for name, kp in robots.items()],
            "objects": [{"name": name} for name in objects],
            "environment": [{"name": name} for name in environment],
        }

    def check_keys(self, source: _YamlFile, data: dict, allowed, keys, who: str) -> None:
        """Refuse a key outside ``allowed`` (qsim would ignore or reject it)."""
        for key in data:
            if key not in allowed:
                raise ConversionError(
                    f"{source.at(*keys, key)}: unknown key '{key}'; {who} only "
                    f"{list(allowed)}, so its meaning is unknown. Fix: remove it, or move "
                    "its content where qsim reads it.")

    def sim_params(self, q_sys: _YamlFile, params, time_step) -> dict:
        """Map quasistatic_sim_params to the scenario's settings."""
        top = ("quasistatic_sim_params",)
        if not isinstance(params, dict):
            raise ConversionError(f"{q_sys.at(*top)}: expected a mapping of qsim's "
                                  f"QuasistaticSimParameters, got {params!r}.")
        self.check_keys(q_sys, params, _PARAMS, top,
                        "qsim's QuasistaticSimParameters has")
        for key, reason in _REFUSED_PARAMS.items():
            if key in params:
                raise ConversionError(f"{q_sys.at(*top, key)}: cannot be converted: it "
                                      f"{reason}. Fix: remove the key (convert a copy of the "
                                      "file if qsim still needs it).")
        if params.get("calc_contact_forces", True) is not True:
            raise ConversionError(f"{q_sys.at(*top, 'calc_contact_forces')}: quasistatic_drake "
                                  "always computes contact forces; only true converts. Fix: "
                                  "remove the key.")
        h = self.time_step(q_sys, params, time_step)
        quasi_dynamic, ratio = self.mass_mode(q_sys, params)
        out = {"time_step": h, "formulation": "qp", "quasi_dynamic": quasi_dynamic,
               "friction_directions": self.directions(q_sys, params),
               "contact_detection_tolerance": self.tolerance(q_sys, params),
               "gravity": self.gravity(q_sys, params), "default_friction": 1.0}
        if ratio is not None:
            out["quasi_static_inertia_ratio"] = ratio
        return out

    def time_step(self, q_sys: _YamlFile, params: dict, time_step) -> float:
        """Return h: ``time_step`` if given, else the file's h."""
        where = q_sys.at("quasistatic_sim_params", "h")
        h = params.get("h")
        if h is not None and not (_is_number(h) and 0 < h < float("inf")):
            raise ConversionError(f"{where}: expected a time step > 0 [s], got {h!r}. Fix: "
                                  "correct it.")
        if time_step is not None:
            if not (_is_number(time_step) and 0 < time_step < float("inf")):
                raise ConversionError(f"--time-step {time_step}: expected a number > 0 [s].")
            if h is not None and float(h) != float(time_step):
                self.notes.append(f"{where}: h = {h} replaced by --time-step {time_step}.")
            return float(time_step)
        if h is None:
            raise ConversionError(
                f"{q_sys.at('quasistatic_sim_params')}: no h; qsim takes the time step from "
                "its caller at each step, the scenario needs one. Fix: pass --time-step H "
                "(the h your qsim script uses), or add h to quasistatic_sim_params.")
        return float(h)

    def mass_mode(self, q_sys: _YamlFile, params: dict) -> tuple:
        """Return quasi_dynamic and quasi_static_inertia_ratio (None: the default)."""
        top = "quasistatic_sim_params"
        dynamic = params.get("is_quasi_dynamic", True)
        if not isinstance(dynamic, bool):
            raise ConversionError(f"{q_sys.at(top, 'is_quasi_dynamic')}: expected true or "
                                  f"false, got {dynamic!r}.")
        if "is_quasi_dynamic" not in params:
            self.notes.append(f"{q_sys.at(top)}: no is_quasi_dynamic; qsim's default is true "
                              "(the scenario's is false), written out.")
        scale = params.get("unactuated_mass_scale", float("nan"))
        where = q_sys.at(top, "unactuated_mass_scale")
        if not _is_number(scale):
            raise ConversionError(f"{where}: expected a number, got {scale!r}.")
        if scale == float("inf") or scale <= 0:
            raise ConversionError(
                f"{where}: {scale} cannot be converted: qsim holds the objects still when it "
                "is 0 or negative and refuses inf. Fix: weld the objects (list them in the "
                "directives as environment), or use a positive scale or .nan.")
        if not dynamic:
            self.notes.append(
                f"{q_sys.at(top, 'is_quasi_dynamic')}: false: qsim's objects have no "
                "inertia; quasistatic_drake's quasi-static objects keep eps M_u, eps = r h^2 "
                "min(K) / lambda_max(M_u), r = quasi_static_inertia_ratio (default 0.1).")
            if scale == scale:
                self.notes.append(f"{where}: {scale} has no effect in qsim when "
                                  "is_quasi_dynamic is false; not converted.")
            return False, None
        if scale != scale:                          # NaN: qsim leaves M_u as it is
            return True, None
        self.notes.append(
            f"{where}: {scale:g}: qsim scales each object's M_u to a largest diagonal entry "
            f"of h^2 min(K) / {scale:g}; written as quasi_dynamic: false with "
            f"quasi_static_inertia_ratio: 1/{scale:g}, which scales all objects' M_u together "
            "to a largest eigenvalue of r h^2 min(K), once, at the initial configuration.")
        return False, 1.0 / float(scale)

    def directions(self, q_sys: _YamlFile, params: dict) -> int:
        """Return nd_per_contact as friction_directions."""
        n_d = params.get("nd_per_contact")
        where = q_sys.at("quasistatic_sim_params", "nd_per_contact")
        if n_d is None:
            raise ConversionError(f"{q_sys.at('quasistatic_sim_params')}: no nd_per_contact; "
                                  "qsim's default 0 gives no friction directions. Fix: add "
                                  "nd_per_contact: 4 (2 for planar scenes).")
        if not _is_number(n_d) or n_d != int(n_d) or n_d < 2 or int(n_d) % 2:
            raise ConversionError(f"{where}: {n_d!r} cannot be converted: friction_directions "
                                  "must be an even integer >= 2 (a balanced set of friction "
                                  "directions). Fix: use 2, 4, 6, ...")
        return int(n_d)

    def tolerance(self, q_sys: _YamlFile, params: dict) -> float:
        """Return the contact detection tolerance: a distance > 0 [m], or inf."""
        value = params.get("contact_detection_tolerance")
        if value is None:
            raise ConversionError(
                f"{q_sys.at('quasistatic_sim_params')}: no contact_detection_tolerance; qsim "
                "leaves it NaN (unset). Fix: add contact_detection_tolerance (e.g. 0.02 [m], "
                "or .inf for every pair).")
        if not _is_number(value) or not value > 0:
            raise ConversionError(
                f"{q_sys.at('quasistatic_sim_params', 'contact_detection_tolerance')}: "
                f"expected a distance > 0 [m] or .inf, got {value!r}. Fix: correct it.")
        return float(value)

    def gravity(self, q_sys: _YamlFile, params: dict) -> list:
        """Return gravity [m/s^2] (qsim's default is 0)."""
        if "gravity" not in params:
            self.notes.append(f"{q_sys.at('quasistatic_sim_params')}: no gravity; qsim's "
                              "default is [0, 0, 0] (the scenario's is -9.81 in z), written "
                              "out.")
            return [0.0, 0.0, 0.0]
        value = params["gravity"]
        if not isinstance(value, list) or len(value) != 3 or not all(map(_is_number, value)):
            raise ConversionError(f"{q_sys.at('quasistatic_sim_params', 'gravity')}: expected "
                                  f"three numbers [m/s^2], got {value!r}.")
        return [float(g) for g in value]

    def objects(self, q_sys: _YamlFile, objects) -> list[str]:
        """Register qsim's objects as models (qsim adds them before the directives)."""
        if objects is None:
            return []
        if not isinstance(objects, list):
            raise ConversionError(f"{q_sys.at('objects')}: expected a list of "
                                  f"{{name, file}}, got {objects!r}.")
        names = []
        for i, entry in enumerate(objects):
            if not isinstance(entry, dict):
                raise ConversionError(f"{q_sys.at('objects', i)}: expected a mapping "
                                      "{name, file}.")
            self.check_keys(q_sys, entry, _OBJECT_KEYS, ("objects", i), "qsim reads")
            name = self.name(q_sys, entry, ("objects", i))
            where = q_sys.at("objects", i, "file")
            if not isinstance(entry.get("file"), str) or not entry["file"].startswith(
                    "package://"):
                raise ConversionError(f"{where}: expected a package:// URI (qsim resolves "
                                      f"no other), got {entry.get('file')!r}.")
            path = self.resolve(entry["file"], where, "the object's file")
            count = _sdf_model_count(path)
            if count != 1:
                raise ConversionError(f"{where}: {path} holds {count} models; qsim adds an "
                                      "object from a file of one model. Fix: split the file.")
            self.add_model(name, entry["file"], path, q_sys.at("objects", i))
            self.object_names.add(name)
            names.append(name)
        return names

    def name(self, source: _YamlFile, entry: dict, keys) -> str:
        """Return the entry's model name, checked: a non-empty string without '::'."""
        name = entry.get("name")
        if not isinstance(name, str) or not name or "::" in name:
            raise ConversionError(f"{source.at(*keys, 'name')}: expected a model name without "
                                  f"'::', got {name!r}.")
        return name

    def add_model(self, name: str, uri, path, where: str) -> None:
        """Register a model instance, refusing a repeated name."""
        if name in self.models:
            raise ConversionError(f"{where}: a model named '{name}' already exists "
                                  f"({self.models[name].where}); Drake refuses a second. Fix: "
                                  "rename one.")
        self.models[name] = _Model(name, uri, path, where)
        if path is not None:
            self.model_file_packages(path)

    def robots(self, q_sys: _YamlFile, robots) -> dict:
        """Return {name: stiffness} after checking each robot against the directives."""
        if not isinstance(robots, list) or not robots:
            raise ConversionError(f"{q_sys.at('robots')}: expected a list of {{name, Kp}} "
                                  "(qsim needs at least one robot).")
        out = {}
        for i, entry in enumerate(robots):
            if not isinstance(entry, dict):
                raise ConversionError(f"{q_sys.at('robots', i)}: expected a mapping "
                                      "{name, Kp}.")
            self.check_keys(q_sys, entry, _ROBOT_KEYS, ("robots", i), "qsim reads")
            name = self.name(q_sys, entry, ("robots", i))
            kp = entry.get("Kp")
            where = q_sys.at("robots", i, "Kp")
            if not isinstance(kp, list) or not kp or not all(
                    _is_number(k) and 0 < k < float("inf") for k in kp):
                raise ConversionError(f"{where}: expected a list of stiffnesses > 0 [N/m or "
                                      f"N m/rad], one per joint, got {kp!r}.")
            model = self.models.get(name)
            if name in self.object_names or name in out:
                raise ConversionError(f"{q_sys.at('robots', i, 'name')}: '{name}' is listed "
                                      "twice (robots, objects); a model is one robot or one "
                                      "object. Fix: remove one entry.")
            if model is None or model.uri is None:
                models = [m for m in self.models if m not in self.object_names]
                raise ConversionError(
                    f"{q_sys.at('robots', i, 'name')}: no model named '{name}' in the "
                    f"directives ({self.top_directives}); qsim looks robots up there. Models "
                    f"there: {models}. Fix: correct the name, or add the robot to the "
                    "directives with add_model.")
            kinematics = None if model.path is None else _kinematics(model.path)
            if kinematics is not None:
                dofs = kinematics.dofs(len(model.welds))
                if dofs != len(kp):
                    what = kinematics.describe(len(model.welds)) or "none"
                    raise ConversionError(
                        f"{where}: {len(kp)} values, but robot '{name}' ({model.uri}) has "
                        f"{dofs} degrees of freedom ({what}); qsim needs one Kp per velocity. "
                        f"Fix: give {dofs} values.")
            out[name] = [float(k) for k in kp]
        return out

    def environment(self, moving: set) -> list[str]:
        """Return the other models in order, refusing any that can move."""
        names = []
        for model in self.models.values():
            if model.name in moving:
                continue
            kinematics = None if model.path is None else _kinematics(model.path)
            welds = len(model.welds)
            if model.uri is not None and kinematics is None:
                self.notes.append(f"{model.where}: could not read '{model.name}' "
                                  f"({model.uri}) to check that it is welded; listed under "
                                  "environment.")
            elif kinematics is not None and kinematics.dofs(welds):
                raise ConversionError(
                    f"{model.where}: model '{model.name}' ({model.uri}) has "
                    f"{kinematics.dofs(welds)} degrees of freedom "
                    f"({kinematics.describe(welds)}) but the q_sys file lists it neither "
                    "under robots nor under objects, and the environment must be welded "
                    "(qsim fails on it too). Fix: add it to robots with Kp, move it from the "
                    "directives to objects ({name, file}), or weld it with add_weld.")
            for parent, where in model.welds:
                owner = self.frame_owner(parent)
                if owner in moving:
                    self.notes.append(f"{where}: '{model.name}' is welded to '{owner}', which "
                                      "moves; it is listed under environment.")
            names.append(model.name)
        return names

    def frame_owner(self, frame: str) -> str:
        """Return the model a frame belongs to, following add_frame ("world" for the world)."""
        seen = set()
        while frame in self.frames and frame not in seen:
            seen.add(frame)
            frame = self.frames[frame]
        return frame.rpartition("::")[0] if "::" in frame else "world"

    # -- the directives
    def directives(self, uri: str, where: str, chain: tuple) -> None:
        """Read a directives file and the files it includes; register models and welds."""
        path = self.resolve(uri, where, "the model directives file")
        if not chain:
            self.top_directives = str(path)
        if path in chain:
            raise ConversionError(f"{where}: '{uri}' includes itself (through "
                                  f"{[str(p) for p in (*chain, path)]}). Fix: remove the cycle.")
        source = _YamlFile(path, "the directives file", where)
        data = source.data
        if not isinstance(data, dict) or set(data) != {"directives"} or not isinstance(
                data["directives"], list):
            raise ConversionError(f"{source.at()}: a model directives file holds one key, "
                                  "'directives', with a list (Drake's ModelDirectives). Fix: "
                                  "correct the file.")
        for k, directive in enumerate(data["directives"]):
            keys = ("directives", k)
            if not isinstance(directive, dict) or len(directive) != 1 or next(
                    iter(directive)) not in _DIRECTIVE_KINDS:
                raise ConversionError(f"{source.at(*keys)}: expected one directive of "
                                      f"{list(_DIRECTIVE_KINDS)}, got {directive!r}.")
            (kind, body), = directive.items()
            if not isinstance(body, dict):
                raise ConversionError(f"{source.at(*keys, kind)}: expected a mapping, got "
                                      f"{body!r}.")
            for key in body:
                if key not in _DIRECTIVE_KEYS[kind]:
                    raise ConversionError(f"{source.at(*keys, kind, key)}: Drake's {kind} has "
                                          f"no '{key}' (only {list(_DIRECTIVE_KEYS[kind])}). "
                                          "Fix: remove it.")
            getattr(self, f"directive_{kind}")(source, keys + (kind,), body, (*chain, path))

    def directive_add_model(self, source: _YamlFile, keys, body: dict, chain) -> None:
        """Register an add_model."""
        name = self.name(source, body, keys)
        path = self.resolve(body.get("file"), source.at(*keys, "file"), "the model file",
                            builtin_ok=True)
        self.add_model(name, body["file"], path, source.at(*keys))

    def directive_add_model_instance(self, source: _YamlFile, keys, body: dict, chain) -> None:
        """Register an add_model_instance (an empty model instance)."""
        self.add_model(self.name(source, body, keys), None, None, source.at(*keys))

    def directive_add_frame(self, source: _YamlFile, keys, body: dict, chain) -> None:
        """Remember which frame a new frame is attached to."""
        base = (body.get("X_PF") or {}).get("base_frame") if isinstance(
            body.get("X_PF"), dict) else None
        if not isinstance(body.get("name"), str) or not isinstance(base, str):
            raise ConversionError(f"{source.at(*keys)}: add_frame needs name and "
                                  "X_PF.base_frame. Fix: add them.")
        self.frames[body["name"]] = base

    def directive_add_weld(self, source: _YamlFile, keys, body: dict, chain) -> None:
        """Record a weld on the model of its child frame."""
        parent, child = body.get("parent"), body.get("child")
        if not isinstance(parent, str) or not isinstance(child, str) or not child:
            raise ConversionError(f"{source.at(*keys)}: add_weld needs parent and child "
                                  "frames. Fix: add them.")
        model = child.rpartition("::")[0] if "::" in child else self.unscoped_owner(
            child, source.at(*keys, "child"))
        if model not in self.models:
            raise ConversionError(f"{source.at(*keys, 'child')}: '{child}' names model "
                                  f"'{model}', which no directive (or qsim object) before it "
                                  "creates. Fix: correct the name, or add the model first.")
        self.models[model].welds.append((parent, source.at(*keys)))

    def unscoped_owner(self, frame: str, where: str) -> str:
        """Return the model of an unscoped frame name, as Drake finds it: the only one."""
        if frame in self.frames:
            return self.frame_owner(frame)
        owners = [m.name for m in self.models.values()
                  if m.path is not None and frame in _frame_names(m.path)]
        if len(owners) != 1:
            raise ConversionError(
                f"{where}: '{frame}' has no model scope and is a link or frame of "
                f"{len(owners)} models {owners} (Drake needs exactly one). Fix: write "
                "'<model>::<frame>'.")
        return owners[0]

    def directive_add_collision_filter_group(self, source: _YamlFile, keys, body: dict,
                                             chain) -> None:
        """Accept a collision filter group (Drake applies it; nothing to convert)."""

    def directive_add_directives(self, source: _YamlFile, keys, body: dict, chain) -> None:
        """Read an included directives file (no model_namespace: our names have no '::')."""
        if "model_namespace" in body:
            raise ConversionError(
                f"{source.at(*keys, 'model_namespace')}: cannot be converted: it names the "
                "included models '<namespace>::<name>', and a scenario's model names have no "
                "'::'. Fix: remove model_namespace and give the included models unique names.")
        self.directives(body.get("file"), source.at(*keys, "file"), chain)


if __name__ == "__main__":
    raise SystemExit(main())
