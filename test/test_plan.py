"""`quasistatic-drake plan`: the disk push (LCP) and the box turn (QP), solved through the step."""

import contextlib
import io
import json

import pytest

from quasistatic_drake.apps.cli import main
from quasistatic_drake.apps.plan import DISK_ANALYTIC_SPEED


@pytest.fixture(scope='module')
def summary(tmp_path_factory):
    """Run the console command once; return its JSON."""
    path = tmp_path_factory.mktemp('plan') / 'plan.json'
    with contextlib.redirect_stderr(io.StringIO()) as stderr:
        assert main(['plan', '--json', str(path)]) == 0
    return {**json.loads(path.read_text()), '_stderr': stderr.getvalue()}


def test_a_progress_bar_shows_each_stage(summary):
    """Issue 32: plan printed nothing for minutes; stderr now shows each stage as it starts."""
    assert 'plan: 0/4 stages' in summary['_stderr'] and 'plan: 4/4 stages' in summary['_stderr']
    assert '20 degrees (qp): finite differences' in summary['_stderr']


def test_the_binding_keys(summary):
    names = [row['name'] for row in summary['problems']]
    assert len(names) == 2 and 'disk' in names[0]
    for row in summary['problems']:
        assert {'name', 'parameters', 'terminal_error', 'iterations', 'method',
                'solve_time_s', 'fd_solve_time_s'} <= set(row)
    assert set(summary['problems'][0]['terminal_error']) == {'position_m'}
    assert set(summary['problems'][1]['terminal_error']) == {'position_m', 'angle_deg'}


def test_the_disk_speed_is_the_analytic_one(summary):
    disk = summary['problems'][0]
    assert disk['terminal_error']['position_m'] < 1e-9
    # the step adds the fingers' 0.1 mm radius and the lag of c = 1e-4
    assert -disk['parameters'][0] == pytest.approx(DISK_ANALYTIC_SPEED, abs=1e-4)
    assert disk['fd_parameters'] == pytest.approx(disk['parameters'], abs=1e-6)


def test_the_box_reaches_its_pose(summary):
    box = summary['problems'][1]
    assert box['terminal_error']['position_m'] <= 1e-3
    assert box['terminal_error']['angle_deg'] <= 0.5
    assert box['failed_steps'] == 0 and len(box['parameters']) == 8
    assert box['fd_terminal_error']['position_m'] <= 1e-3
