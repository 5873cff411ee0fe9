"""Check docstrings with ament_pep257 (the ROS 2 'ament' pydocstyle convention)."""

import os

from ament_pep257.main import main
import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Python code of the package; the ones that do not exist yet are skipped.
PYTHON_PATHS = ('quasistatic_drake', 'test', 'benchmarks', 'launch', 'setup.py')


def python_paths():
    """Return the entries of PYTHON_PATHS that exist, relative to the repo root."""
    return [p for p in PYTHON_PATHS if os.path.exists(os.path.join(REPO_ROOT, p))]


@pytest.mark.linter
@pytest.mark.pep257
def test_pep257(monkeypatch):
    monkeypatch.chdir(REPO_ROOT)
    rc = main(argv=python_paths())
    assert rc == 0, 'Found code style errors / warnings (see the captured output)'
