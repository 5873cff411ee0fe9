"""Lint the package's Python code with ament_flake8 (the ROS 2 flake8 setup)."""

from ament_flake8.main import main_with_errors
import pytest

from conftest import python_paths, REPO_ROOT


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
