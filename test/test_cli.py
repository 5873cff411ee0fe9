"""The quasistatic-drake console script, run as a user runs it."""

import json
import os
import subprocess
import sys

from conftest import REPO_ROOT

CLI = [sys.executable, '-m', 'quasistatic_drake.apps.cli']


def run_cli(*args):
    return subprocess.run([*CLI, *args], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=300)


def test_push_demo_pushes_the_box_and_reports(tmp_path):
    summary_path = tmp_path / 'push.json'
    done = run_cli('push', '--json', str(summary_path))
    assert done.returncode == 0, done.stderr
    assert 'Finger pushes a box' in done.stdout and 'Box moved' in done.stdout
    summary = json.loads(summary_path.read_text())
    assert summary['box_displacement'][0] > 0.15
    assert abs(summary['box_displacement'][1]) < 1e-6
    assert abs(summary['box_final_yaw_deg']) < 1e-3
    assert summary['min_signed_distance'] > -1e-3


def test_info_describes_a_scenario():
    done = run_cli('info', os.path.join('config', 'two_pads_lift.yaml'))
    assert done.returncode == 0, done.stderr
    assert "robot pads: joints ['lift_z', 'left_x', 'right_x']" in done.stdout
    assert 'object box' in done.stdout


def test_bad_arguments_get_clear_errors(tmp_path):
    missing = run_cli('info', str(tmp_path / 'nothere.yaml'))
    assert missing.returncode == 2
    assert 'nothere.yaml' in missing.stderr and 'does not exist' in missing.stderr
    bad_speed = run_cli('push', '--speed', '-1')
    assert bad_speed.returncode == 2 and 'must be a positive number' in bad_speed.stderr
    bad_yaml = tmp_path / 'bad.yaml'
    bad_yaml.write_text('time_step: 0.1\nrobotz: []\n')
    unknown = run_cli('info', str(bad_yaml))
    assert unknown.returncode == 2 and "unknown key(s) ['robotz']" in unknown.stderr


def test_convert_qsim_subcommand_writes_a_scenario_that_loads(tmp_path):
    out = tmp_path / 'pusher.yaml'
    q_sys = os.path.join(REPO_ROOT, 'test', 'data', 'qsim', 'models', 'q_sys', 'pusher_box.yml')
    done = run_cli('convert-qsim', q_sys, '--time-step', '0.1', '-o', str(out))
    assert done.returncode == 0, done.stderr
    info = run_cli('info', str(out))
    assert info.returncode == 0, info.stderr
    assert 'robot pusher' in info.stdout and 'object box' in info.stdout
    missing = run_cli('convert-qsim', str(tmp_path / 'nowhere.yml'))
    assert missing.returncode == 2 and 'does not exist' in missing.stderr
