"""
The node exits 0 on SIGINT and SIGTERM, however it was started (issue 31, defect 9).

Before: SIGTERM under load ended the node with exit 1 when a publish timer
fired after rclpy's own signal handler had shut the context down (RCLError:
publisher's context is invalid); started with ``&`` from a script, SIGINT
exited 1 with an RCLError traceback.  Each case starts the console script,
waits until it has taken steps (its own ~/status says so), sends the signal,
and reads the exit code: directly, or from the shell that started it in the
background (``$!`` and ``wait``).
"""

import os
import signal
import subprocess

import pytest

from conftest import REPO_ROOT
from test_ros_helpers import NODE_SCRIPT, wait_for_node

TWO_PADS = os.path.join(REPO_ROOT, 'config', 'two_pads_lift.yaml')
# as fast as it can, publishing often: a timer is likely to be due when the signal comes
ARGS = ['--ros-args', '-p', f'scenario:={TWO_PADS}', '-p', 'meshcat:=false',
        '-p', 'real_time_rate:=0.0', '-p', 'publish_rate:=500.0', '-p', 'clock_rate:=500.0']


def start(background):
    """Start the node; return (the process to wait on, the node's pid)."""
    if not background:
        node = subprocess.Popen([NODE_SCRIPT, *ARGS], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        return node, node.pid
    command = ' '.join(f"'{a}'" for a in (NODE_SCRIPT, *ARGS))
    shell = subprocess.Popen(['bash', '-c', f'{command} & echo $!; wait $!; echo "rc=$?"'],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return shell, int(shell.stdout.readline())


@pytest.mark.parametrize('background', [False, True], ids=['direct', 'background'])
@pytest.mark.parametrize('signum', [signal.SIGINT, signal.SIGTERM], ids=['SIGINT', 'SIGTERM'])
def test_the_node_exits_0_on_a_signal(harness, signum, background):
    process, pid = start(background)
    try:
        wait_for_node(harness.probe, process)
        harness.probe.wait_status(lambda s: s['steps'] >= 20, 'twenty steps', timeout=120)
        os.kill(pid, signum)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.kill(pid, signal.SIGKILL)
            process.communicate()
    code = int(out.rsplit('rc=', 1)[1]) if background else process.returncode
    assert code == 0, err
    assert 'Traceback' not in err + out
