"""
The CLI tells the user what they need (issue 32, item 8).

Before: ``paper-2d --backend scip`` printed a cross-check of 1e-3 m and 9.81 N
(against Gurobi's 4e-16) and exited 0; a typo'd key got no "did you mean";
``info`` showed no friction.
"""

import subprocess
import sys

import pytest

from conftest import REPO_ROOT
from quasistatic_drake import Scenario, ScenarioError


def cli(*args):
    return subprocess.run([sys.executable, '-m', 'quasistatic_drake.apps.cli', *args],
                          capture_output=True, text=True, timeout=600, cwd=REPO_ROOT)


def test_paper_2d_fails_when_its_cross_check_fails(tmp_path):
    done = cli('paper-2d', '--backend', 'scip', '--png', str(tmp_path / 'p.png'))
    assert done.returncode == 1, done.stdout + done.stderr
    assert 'FAILED, beyond the tolerance 1e-06' in done.stdout
    assert 'the example is not reproduced' in done.stderr


@pytest.mark.parametrize('data,message', [
    ({'time_stp': 0.1}, r"unknown key\(s\) \['time_stp'\]\. Did you mean 'time_step' for "
                        r"'time_stp'\?"),
    ({'time_step': 0.1, 'robots': [{'name': 'a', 'file': 'a.urdf', 'stifness': [1]}]},
     r"robots\[0\]: unknown key\(s\) \['stifness'\]\. Did you mean 'stiffness'"),
    ({'time_step': 0.1, 'qp': {'log_barier_weight': 1.0}},
     r"qp: unknown key\(s\) \['log_barier_weight'\]\. Did you mean 'log_barrier_weight'"),
])
def test_a_typo_gets_a_did_you_mean(data, message):
    with pytest.raises(ScenarioError, match=message):
        Scenario.from_dict(data)


def test_nothing_close_gets_no_guess():
    with pytest.raises(ScenarioError) as err:
        Scenario.from_dict({'time_step': 0.1, 'zzzz': 1})
    assert 'Did you mean' not in str(err.value)


def test_info_lists_the_friction_of_each_geometry():
    done = cli('info', f'{REPO_ROOT}/config/finger_push.yaml')
    assert done.returncode == 0, done.stderr
    assert 'finger::finger_tip: sphere, mu = 0.5' in done.stdout
    assert 'table::table_top: box, mu = 0.5 (welded)' in done.stdout
