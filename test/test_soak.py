"""benchmarks/soak.py: a tiny soak writes its figures, and its two repetitions are identical."""

import json
from pathlib import Path
import subprocess
import sys

import pytest

from conftest import REPO_ROOT

SCRIPT = Path(REPO_ROOT) / 'benchmarks' / 'soak.py'
SCENE_KEYS = {'steps', 'sim_hours', 'wall_s', 'steps_per_s', 'failed_steps', 'min_phi',
              'rss_start_mb', 'rss_end_mb', 'rss_slope_bytes_per_1000_steps',
              'max_repeat_diff', 'bitwise_identical', 'repetitions'}
SERIES_KEYS = {'step', 'rss_mb', 'steps_per_s', 'failed_steps', 'min_phi'}


def run_script(*args, timeout=300):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO_ROOT)


def test_tiny_soak_writes_json_and_png_and_repeats_bitwise(tmp_path):
    json_path, png_path = tmp_path / 'soak.json', tmp_path / 'soak.png'
    # 0.003 h = 108 steps of h = 0.1 s: the pads grasp and lift the box twice
    done = run_script('--sim-hours', '0.003', '--checkpoint-every', '25', '--repeats', '2',
                      '--json', str(json_path), '--png', str(png_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert 'bitwise identical' in done.stdout
    summary = json.loads(json_path.read_text())
    assert summary['rss_source'].startswith('current RSS')
    assert set(summary['scenes']) == {'two_pads_lift', 'arm_pick_place'}
    for name, scene in summary['scenes'].items():
        assert SCENE_KEYS <= set(scene), name
        assert scene['steps'] == 108
        assert scene['failed_steps'] == 0, scene['repetitions'][0]['errors']
        assert scene['bitwise_identical'] is True
        assert scene['max_repeat_diff'] == 0.0
        first, second = scene['repetitions']
        assert first['trajectory_sha256'] == second['trajectory_sha256']
        series = second['checkpoints']
        assert SERIES_KEYS <= set(series)
        assert series['step'] == [0, 25, 50, 75, 100, 108]
        assert series['repeat_diff'] == [0.0] * 6
        assert scene['rss_slope_bytes_per_1000_steps'] is not None
    pads = summary['scenes']['two_pads_lift']
    assert pads['cycles_held'] >= 1 and pads['min_held_lift_mm'] > 10.0, 'the box was lifted'
    assert pads['min_phi'] > -1e-3
    assert png_path.stat().st_size > 10_000


@pytest.mark.parametrize('args, message', [
    (['--sim-hours', '0'], '--sim-hours: must be positive'),
    (['--repeats', '0'], '--repeats: must be at least 1'),
    (['--checkpoint-every', '0'], '--checkpoint-every: must be at least 1'),
    (['--scenes', 'config/no_such_scene.yaml'], '--scenes: no such file'),
])
def test_bad_arguments_are_clear(args, message):
    done = run_script(*args, timeout=120)
    assert done.returncode == 2
    assert message in done.stderr
