"""Check docstrings with ament_pep257 (the ROS 2 'ament' pydocstyle convention)."""

from ament_pep257.main import main
import pytest

from conftest import python_paths, REPO_ROOT


@pytest.mark.linter
@pytest.mark.pep257
def test_pep257(monkeypatch):
    monkeypatch.chdir(REPO_ROOT)
    rc = main(argv=python_paths())
    assert rc == 0, 'Found code style errors / warnings (see the captured output)'
