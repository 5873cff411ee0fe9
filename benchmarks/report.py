"""What a benchmark script records of the machine, and how it writes its JSON of figures."""

import json
import os
from pathlib import Path
import platform


def machine() -> dict:
    """Return the platform, the Python version and the number of CPUs."""
    return {'platform': platform.platform(), 'python': platform.python_version(),
            'cpus': os.cpu_count()}


def write_json(path: Path, data: dict, indent: int = 2) -> None:
    """Write ``data`` as JSON to ``path``, creating its folder; numpy scalars become floats."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=indent, default=float))


def write_results(summary: dict, json_path: Path, png_path: Path, draw) -> None:
    """Write the figures as JSON and ``draw(png_path)`` the plot; say where they went."""
    write_json(json_path, summary)
    png_path.parent.mkdir(parents=True, exist_ok=True)
    draw(png_path)
    print(f'wrote {json_path} and {png_path}')
