"""
The quasistatic-drake-node console script on Halm & Posa's two-finger push (formulation: lcp).

A subprocess, with Meshcat on (Meshcat must be driven from the thread that
made it, the node's main thread).  Paused, then stepped through ~/step.
"""

import os
import signal
import subprocess

import pytest

from conftest import REPO_ROOT
from test_ros_helpers import NODE_SCRIPT, stamp, transform_of, wait_for, wait_for_node

PUSH = os.path.join(REPO_ROOT, 'config', 'halm_posa_push.yaml')
H = 0.025
STEPS = 80


def test_the_node_pushes_the_disk_under_the_lcp_with_meshcat(harness):
    node = subprocess.Popen([NODE_SCRIPT, '--ros-args', '-p', f'scenario:={PUSH}',
                             '-p', 'meshcat:=true', '-p', 'command_timeout:=60.0'],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        probe = harness.probe
        msg = wait_for_node(probe, node)
        assert list(msg.name) == ['x1', 'y1', 'x2', 'y2']
        assert probe.pause(True).success
        assert probe.reset().success
        start = probe.positions_at(0.0)
        probe.send_velocities([0.0, -1.0, 0.0, -1.0])
        for _ in range(STEPS):
            assert probe.step().success
        end = probe.fresh_positions(STEPS * H)
        # the fingers follow the command, reach the disk (1.06 m below them) and push it;
        # they lag the command by the feedback's c B F_m (c = 2^-4: a few cm), never lead it
        assert -STEPS * H - 1e-9 <= end['y1'] - start['y1'] < -0.95 * STEPS * H
        assert end['x1'] == pytest.approx(start['x1'], abs=1e-3)

        def disk_pushed():
            t = transform_of(list(probe.tf), 'disk/disk')
            return t if t is not None and stamp(t.header) >= STEPS * H - 1e-9 else None
        disk = wait_for(disk_pushed, what='/tf of the disk after the push')
        assert disk.header.frame_id == 'world'
        p = disk.transform.translation
        assert p.y < 3.0 - 0.8 and abs(p.x) < 1e-3
        status = probe.wait_status(lambda s: s['steps'] == STEPS, f'{STEPS} steps')
        assert status['status'] == 'optimal' and status['contacts'] >= 2
        assert node.poll() is None
    finally:
        node.send_signal(signal.SIGINT)
        out, err = node.communicate(timeout=30)
    assert node.returncode == 0, err
    assert 'Meshcat: open http' in out + err
    assert 'the step raised' not in out + err
