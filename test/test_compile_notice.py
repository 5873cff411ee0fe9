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


def test_the_notice_waits_for_a_compilation(monkeypatch):
    """
    Issue 32: the notice fired on any load slower than 2 s, compiling or not.

    It now starts counting at numba's own "numba:compile" event: work that
    compiles nothing never logs it, however long; a compilation does (the
    delay set to 0 here, so the test waits for the log, not for a clock).
    """
    import threading

    import numba

    from quasistatic_drake import compile_notice as notice
    monkeypatch.setattr(notice, 'NOTICE_DELAY', 0.0)
    logged = threading.Event()
    monkeypatch.setattr(notice.LOGGER, 'warning', lambda text: logged.set())
    square = numba.njit(lambda x: x * x)
    square(2.0)                                      # compiled before: nothing to do inside
    with notice.compile_notice():
        square(3.0)
        assert not logged.wait(timeout=0.5)          # the old timer fired at once here
    with notice.compile_notice():
        numba.njit(lambda x: x + 1)(1)               # a new kernel: numba compiles
        assert logged.wait(timeout=60)
