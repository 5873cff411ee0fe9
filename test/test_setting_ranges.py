"""Absurd finite settings (issue 31, defect 12) are refused at load, with the accepted range."""

import re
from pathlib import Path

import pytest
import yaml

from quasistatic_drake import QuasistaticSimulator, Scenario, ScenarioError

REPO_ROOT = Path(__file__).resolve().parents[1]


def scene(**changes) -> dict:
    """Return config/finger_push.yaml as a dict, with top-level keys or the robot's changed."""
    data = yaml.safe_load((REPO_ROOT / 'config' / 'finger_push.yaml').read_text())
    for key, value in changes.items():
        if key == 'stiffness':
            data['robots'][0]['stiffness'] = value
        else:
            data[key] = value
    return data


@pytest.mark.parametrize('changes, where, accepted', [
    ({'time_step': 1e300}, 'time_step', r'\[1e-05, 10\]'),
    ({'time_step': 1e-300}, 'time_step', r'\[1e-05, 10\]'),
    ({'gravity': [0, 0, -1e308]}, r'gravity\[2\]', r'\[-1000, 1000\]'),
    ({'stiffness': [1000, 1e-300, 1000]}, r'stiffness\[1\]', r'\[0.001, 1e\+09\]'),
    ({'quasi_static_inertia_ratio': 1e-300}, 'quasi_static_inertia_ratio',
     r'\[1e-10, 1000\]'),
    ({'friction_directions': 100000000}, 'friction_directions', 'from 2 to 64')])
def test_a_setting_outside_the_engines_range_is_refused(changes, where, accepted):
    """Each loaded, then every step failed (or memory ran out); now refused, with its range."""
    with pytest.raises(ScenarioError, match=where) as refused:
        Scenario.from_dict(scene(**changes), base_dir=REPO_ROOT / 'config')
    assert re.search(accepted, str(refused.value)), str(refused.value)


def test_the_ends_of_the_ranges_load_and_step():
    """The ends of the accepted ranges are usable: a step at h = 10 s and at 1e-5 s succeeds."""
    for h in (10.0, 1e-5):
        sim = QuasistaticSimulator(Scenario.from_dict(scene(time_step=h),
                                                      base_dir=REPO_ROOT / 'config'))
        assert sim.step(sim.initial_state(), {'finger': [0.01, 0, 0]}).success, h
