"""Unreadable scenario files (issue 31, defect 11): a ScenarioError, not a traceback."""

from pathlib import Path

import pytest

from quasistatic_drake import Scenario, ScenarioError

REPO_ROOT = Path(__file__).resolve().parents[1]
PUSH = (REPO_ROOT / 'config' / 'finger_push.yaml').read_text()


def test_a_missing_directives_file_names_the_key(tmp_path):
    """A missing file raised FileNotFoundError; now the key and the path looked at."""
    scene = tmp_path / 'scene.yaml'
    scene.write_text('time_step: 0.1\ndirectives_file: nowhere.dmd.yaml\nobjects: [{name: box}]\n')
    with pytest.raises(ScenarioError, match=r'directives_file: .*nowhere\.dmd\.yaml.*not found'):
        Scenario.from_yaml(scene)


def test_a_binary_file_is_refused_as_not_text(tmp_path):
    """A binary file raised UnicodeDecodeError; now a ScenarioError: not text."""
    scene = tmp_path / 'scene.yaml'
    scene.write_bytes(b'\x89PNG\r\n\x1a\n\xff\xfe' + bytes(range(256)))
    with pytest.raises(ScenarioError, match='not a UTF-8 text file'):
        Scenario.from_yaml(scene)


def test_a_3000_deep_nesting_is_refused(tmp_path):
    """Deep nesting raised RecursionError; now a ScenarioError: too deeply."""
    scene = tmp_path / 'scene.yaml'
    scene.write_text(PUSH + 'extra: ' + '[' * 3000 + ']' * 3000 + '\n')
    with pytest.raises(ScenarioError, match='too deeply'):
        Scenario.from_yaml(scene)


def test_an_included_file_that_is_not_yaml_is_named_not_quoted(tmp_path):
    """The error quoted a line of the file (it may be a key or a password): now where it fails."""
    secret = tmp_path / 'notes.txt'
    secret.write_text('user: alice\npassword: s3cr3t: hunter2\n')
    scene = tmp_path / 'scene.yaml'
    scene.write_text(f'include: {secret}\n' + PUSH)
    with pytest.raises(ScenarioError, match=r'include\[0\]: .*notes\.txt: the included file is '
                                            r'not valid YAML at line 2, column 17') as err:
        Scenario.from_yaml(scene)
    assert 'hunter2' not in str(err.value) and 's3cr3t' not in str(err.value)
