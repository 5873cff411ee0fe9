"""Scenario YAML (issue 31, defect 13): 1e-2 is a number; a key given twice is refused."""

from pathlib import Path

import pytest

from quasistatic_drake import Scenario, ScenarioError

REPO_ROOT = Path(__file__).resolve().parents[1]
PUSH = (REPO_ROOT / 'config' / 'finger_push.yaml').read_text()


def load(tmp_path, text: str) -> Scenario:
    """Return the scenario of ``text`` written to a file."""
    path = tmp_path / 'scene.yaml'
    path.write_text(text)
    return Scenario.from_yaml(path)


def test_numbers_in_exponent_form_are_numbers(tmp_path):
    """time_step: 1e-2 and stiffness: [1e3, ...] load as the floats they are."""
    text = PUSH.replace('time_step: 0.1', 'time_step: 1e-2').replace(
        'stiffness: [1000, 1000, 1000]', 'stiffness: [1e3, 2E+3, -.5e1]')
    assert text != PUSH
    with pytest.raises(ScenarioError, match='stiffness'):     # -5: a number, but not > 0
        load(tmp_path, text)
    scenario = load(tmp_path, text.replace('-.5e1', '3e3'))
    assert scenario.time_step == 0.01
    assert list(scenario.robots[0].stiffness) == [1000.0, 2000.0, 3000.0]


def test_words_that_look_like_numbers_stay_words(tmp_path):
    """A name such as 1e3x is not a number, and e3 alone is not either."""
    text = PUSH.replace('- name: box', '- name: 1e3x')
    assert load(tmp_path, text).objects[0].name == '1e3x'


@pytest.mark.parametrize('duplicate, key', [
    ('time_step: 0.1\ntime_step: 0.2\n', 'time_step'),
    ('qp: {friction_cone: exact, friction_cone: pyramid}\n', 'friction_cone')])
def test_a_key_given_twice_is_refused_with_its_lines(tmp_path, duplicate, key):
    """The last one used to win silently; now the error names the key and both lines."""
    text = PUSH.replace('time_step: 0.1\n', duplicate)
    expected = rf"'{key}' twice \(first at line \d+\).*Fix: delete one of them"
    with pytest.raises(ScenarioError, match=expected):
        load(tmp_path, text)
