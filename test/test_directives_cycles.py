"""Directives that add themselves (issue 31, defect 3): a ScenarioError, not a segfault."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SCENE = """
time_step: 0.1
directives:
{directives}
robots:
  - name: finger
    file: package://quasistatic_drake/urdf/finger.urdf
    stiffness: [1000, 1000, 1000]
    initial_positions: [-0.08, 0.0, 0.05]
objects:
  - name: box
    file: package://quasistatic_drake/urdf/box.urdf
    initial_pose: {{xyz: [0, 0, 0.05]}}
"""


def load_in_a_process(path: Path) -> subprocess.CompletedProcess:
    """Load the scenario in a child process (a regression would crash it, not the tests)."""
    code = ("import sys\nfrom quasistatic_drake import QuasistaticSimulator, Scenario, "
            "ScenarioError\ntry:\n    QuasistaticSimulator(Scenario.from_yaml(sys.argv[1]))\n"
            "except ScenarioError as err:\n    print(err)\n    sys.exit(2)\n")
    return subprocess.run([sys.executable, '-c', code, str(path)], capture_output=True,
                          text=True, timeout=300, cwd=REPO_ROOT)


def self_adding(tmp_path, through_another: bool) -> Path:
    """Write a .dmd.yaml that adds itself, directly or through a second file."""
    first, second = tmp_path / 'first.dmd.yaml', tmp_path / 'second.dmd.yaml'
    target = second if through_another else first
    first.write_text(f'directives:\n  - add_directives: {{file: "file://{target}"}}\n')
    second.write_text(f'directives:\n  - add_directives: {{file: "file://{first}"}}\n')
    return first


@pytest.mark.parametrize('through_another', [False, True])
@pytest.mark.parametrize('how', ['directives', 'directives_file'])
def test_a_directives_file_that_adds_itself_is_refused(tmp_path, how, through_another):
    """Drake followed the cycle until the process died (exit 139); now exit 2 and the chain."""
    dmd = self_adding(tmp_path, through_another)
    if how == 'directives':
        text = SCENE.format(directives=f'  - add_directives: {{file: "file://{dmd}"}}')
    else:
        text = SCENE.format(directives='  []').replace('directives:\n  []',
                                                       f'directives_file: {dmd}')
    scene = tmp_path / 'scene.yaml'
    scene.write_text(text)
    done = load_in_a_process(scene)
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert 'includes itself' in done.stdout and 'first.dmd.yaml' in done.stdout
    assert 'Fix: remove the add_directives that closes the cycle' in done.stdout


def test_a_missing_nested_directives_file_is_named(tmp_path):
    """A nested add_directives file that does not exist is a ScenarioError naming it."""
    dmd = tmp_path / 'outer.dmd.yaml'
    dmd.write_text(f'directives:\n  - add_directives: {{file: "file://{tmp_path}/nope.yaml"}}\n')
    scene = tmp_path / 'scene.yaml'
    scene.write_text(SCENE.format(directives=f'  - add_directives: {{file: "file://{dmd}"}}'))
    done = load_in_a_process(scene)
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert 'nope.yaml' in done.stdout and 'directives[0] (add_directives)' in done.stdout
