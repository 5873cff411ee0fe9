"""The first run in a new environment says that the kernels compile, instead of sitting silent."""

import os
import subprocess
import sys

from conftest import REPO_ROOT

BUILD = ("from quasistatic_drake import QuasistaticSimulator, Scenario; "
         "QuasistaticSimulator(Scenario.from_yaml('config/finger_push.yaml')); print('built')")


def test_a_cold_numba_cache_prints_a_progress_message(tmp_path):
    """With an empty NUMBA_CACHE_DIR every kernel compiles (~30 s): stderr says so first."""
    env = {**os.environ, 'NUMBA_CACHE_DIR': str(tmp_path)}
    done = subprocess.run([sys.executable, '-c', BUILD], capture_output=True, text=True,
                          timeout=600, cwd=REPO_ROOT, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == 'built'
    assert 'compiling the contact kernels with numba' in done.stderr
    assert str(tmp_path) in done.stderr, 'it says where the kernels are cached'
    assert any(tmp_path.rglob('*.nbi')), 'the kernels were cached there'
