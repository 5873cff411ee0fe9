"""benchmarks/miqp_runtime.py (Pang & Tedrake 2018, Table I): its output and argument errors."""

import json
from pathlib import Path
import subprocess
import sys

import pytest

from conftest import REPO_ROOT

SCRIPT = Path(REPO_ROOT) / 'benchmarks' / 'miqp_runtime.py'
ROW_KEYS = {'object', 'backend', 'binaries', 'avg_ms', 'worst_ms', 'median_ms', 'std_ms',
            'nodes_avg', 'failed_steps', 'place_error_m', 'step_avg_ms', 'lifted'}
REPLAY_KEYS = {'object', 'backend', 'miqps', 'avg_ms', 'worst_ms', 'median_ms', 'failed',
               'max_dx_vs_reference'}


def run_script(*args, timeout=600):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO_ROOT)


def test_short_run_prints_the_table_and_writes_json_and_png(tmp_path):
    json_path, png_path = tmp_path / 'rt.json', tmp_path / 'rt.png'
    done = run_script('--objects', 'cylinder', '--max-steps', '100', '--backends', 'gurobi',
                      'daqp', '--replay-backends', 'gurobi', 'scip', 'daqp', '--replay-every',
                      '25', '--json', str(json_path), '--png', str(png_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert 'paper: binaries, avg, worst, std' in done.stdout
    result = json.loads(json_path.read_text())
    rows = result['rows']
    assert [(r['object'], r['backend']) for r in rows] == [('cylinder', 'gurobi'),
                                                           ('cylinder', 'daqp')]
    for row in rows:
        assert ROW_KEYS <= set(row)
        assert row['steps'] == 100
        assert 0 < row['avg_ms'] <= row['worst_ms']
        assert row['binaries'] == 24, 'the cylinder on the table: 4 points, 6 binaries each'
        assert row['lifted'] is False, 'stopped before the grasp'
        assert row['failed_steps'] == 0
    # the same approach under both backends: the cylinder is not touched, it stays put
    assert rows[1]['place_vs_reference_m'] < 1e-6
    replayed = result['replay']
    assert [r['backend'] for r in replayed] == ['gurobi', 'scip', 'daqp']
    for row in replayed:
        assert REPLAY_KEYS <= set(row)
        assert row['miqps'] == 4 and row['failed'] == 0
        assert row['max_dx_vs_reference'] < 1e-6
    assert replayed[0]['max_dx_vs_reference'] < 1e-12, 'Gurobi again: the same solutions'
    assert png_path.stat().st_size > 10_000


@pytest.mark.parametrize('args, message', [
    (['--objects', 'teapot'], "--objects: unknown ['teapot']"),
    (['--time-step', '0'], '--time-step: must be positive'),
    (['--points-per-pair', '0'], '--points-per-pair: must be at least 1'),
    (['--max-steps', '-1'], '--max-steps: must be 0 (all) or positive'),
    (['--backends', 'cplex'], "--backends: unknown ['cplex']; choose from ['gurobi', 'scip', "
                              "'daqp']"),
    (['--replay-every', '0'], '--replay-every: must be at least 1'),
])
def test_bad_arguments_are_clear(args, message):
    done = run_script(*args, timeout=120)
    assert done.returncode == 2
    assert message in done.stderr
