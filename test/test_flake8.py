"""Lint the package's Python code with ament_flake8 (the ROS 2 flake8 setup)."""

import os

from ament_flake8.main import main_with_errors
import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Python code of the package; the ones that do not exist yet are skipped.
PYTHON_PATHS = ('quasistatic_drake', 'test', 'benchmarks', 'launch', 'setup.py')


def python_paths():
    """Return the entries of PYTHON_PATHS that exist, relative to the repo root."""
    return [p for p in PYTHON_PATHS if os.path.exists(os.path.join(REPO_ROOT, p))]


@pytest.mark.flake8
@pytest.mark.linter
def test_flake8(monkeypatch):
    # ament_flake8 resolves paths and excludes (dirs starting with '.' or '_')
    # against the working directory.
    monkeypatch.chdir(REPO_ROOT)
    rc, errors = main_with_errors(argv=python_paths())
    assert rc == 0, \
        'Found %d code style errors / warnings:\n' % len(errors) + \
        '\n'.join(errors)
