"""
Where this package's data (urdf/, config/) lives, and model-file and package resolution.

In a source checkout or an editable install, the data is read from the
checkout itself (the directory holding package.xml next to this module), so
edits to urdf/ take effect at once.  In an installed ament package it is read
from ``share/quasistatic_drake``.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Mapping, Optional

PACKAGE_NAME = "quasistatic_drake"
PACKAGE_URI_PREFIX = f"package://{PACKAGE_NAME}/"


@lru_cache(maxsize=1)
def package_share_dir() -> Path:
    """Return the directory that holds package.xml, urdf/ and config/."""
    source_root = Path(__file__).resolve().parent.parent
    if (source_root / "package.xml").is_file():
        return source_root
    try:
        from ament_index_python.packages import get_package_share_directory
        return Path(get_package_share_directory(PACKAGE_NAME))
    except (ImportError, LookupError) as err:
        raise FileNotFoundError(
            f"cannot find the data directory of {PACKAGE_NAME}: no package.xml next to "
            f"{source_root} and no ament index entry. Fix: install the package with "
            "'pip install -e .' from a checkout, or with colcon.") from err


def resolve_model_file(file: str, base_dir: str | os.PathLike,
                       packages: Optional[Mapping[str, str]] = None) -> str:
    """
    Resolve a model file entry to something Drake's Parser can load.

    ``package://quasistatic_drake/...`` and ``package://<name>/...`` of the
    scenario's ``packages`` become absolute paths; other ``package://`` URIs
    are left for Drake's package map (ROS_PACKAGE_PATH); plain paths are taken
    relative to ``base_dir``.  Raises FileNotFoundError with the resolved path
    when a file is missing.
    """
    roots = {PACKAGE_NAME: str(package_share_dir()), **(packages or {})}
    if file.startswith("file://"):
        path = Path(file[len("file://"):])
    elif file.startswith("package://"):
        name, _, rest = file[len("package://"):].partition("/")
        if name not in roots:
            return file
        path = Path(roots[name]) / rest
        if ".." in Path(rest).parts:
            raise FileNotFoundError(
                f"model file '{file}' leaves its package with '..'. Fix: name a file inside "
                f"the package, or give the file's own path.")
    else:
        path = Path(base_dir) / os.path.expanduser(file)
    try:
        path = path.resolve()
        found = path.is_file()
    except (ValueError, OSError) as err:      # a NUL byte, a name too long, a loop
        raise FileNotFoundError(f"model file {file[:80]!r} is not a usable path ({err}). "
                                "Fix: give the path of an existing model file.") from None
    if not found:
        raise FileNotFoundError(
            f"model file '{file}' not found (looked at {path}). Fix: give a path relative "
            f"to the scenario file, an absolute path, or {PACKAGE_URI_PREFIX}<path> (or "
            "package://<name>/<path> with <name> under packages:).")
    return str(path)
