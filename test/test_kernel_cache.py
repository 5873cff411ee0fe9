"""
Issue 32: ``make demo`` compiles the demo's numba kernels on every core before the demo runs.

quasistatic_drake/kernel_cache.py compiles the roots listed in
kernel_signatures.json in parallel processes.  The list is only worth
something if it covers what the demo compiles: the end-to-end test warms an
empty numba cache from it and then runs the demo, counting numba's own
compile events.
"""

import json
import os
import subprocess
import sys

import pytest
from numba.core import types

from conftest import REPO_ROOT
from quasistatic_drake import kernel_cache
from quasistatic_drake.kernel_cache import RootKernel

COUNT_COMPILES = r"""
import sys
from numba.core import event
compiled = []
class Count(event.Listener):
    def on_start(self, ev):
        f = ev.data["dispatcher"].py_func
        if f.__module__.startswith("quasistatic_drake."):
            compiled.append(f"{f.__module__}:{f.__qualname__}")
    def on_end(self, ev):
        pass
event.register("numba:compile", Count())
from quasistatic_drake.apps.cli import main
code = main(["demo", "--no-meshcat"])
print("COMPILED", sorted(set(compiled)))
sys.exit(code or 0)
"""


@pytest.mark.parametrize('numba_type', [
    types.Array(types.float64, 1, 'C'), types.Array(types.float64, 3, 'C'),
    types.Array(types.int64, 2, 'F'), types.Array(types.boolean, 2, 'A'),
    types.boolean, types.int64, types.float64])
def test_argument_types_survive_the_text_form(numba_type):
    """type_text writes numba's signature syntax, and parse_args reads it back exactly."""
    text = kernel_cache.type_text(numba_type)
    assert kernel_cache.parse_args(f"({text}, int64)") == (numba_type, types.int64)


def test_an_argument_type_without_a_text_form_is_refused_by_name():
    with pytest.raises(TypeError, match=r"UniTuple.*extend type_text"):
        kernel_cache.type_text(types.UniTuple(types.float64, 3))


def test_shares_hold_every_root_once_and_balance_the_recorded_time():
    """Longest first onto the least-loaded process: no share exceeds the mean by a root."""
    roots = tuple(RootKernel(f"m:k{i}", "(int64)", s)
                  for i, s in enumerate([18.7, 16.4, 13.3, 10.6, 3.4, 3.1, 2.4, 2.2, 0.9, 0.4]))
    for jobs in (1, 2, 3, 20):
        shares = kernel_cache.shares(roots, jobs)
        assert len(shares) == min(jobs, len(roots))
        assert sorted(r.kernel for share in shares for r in share) == sorted(
            r.kernel for r in roots)
        totals = [sum(r.seconds for r in share) for share in shares]
        mean = sum(totals) / len(totals)
        assert max(totals) - mean <= max(r.seconds for r in roots) + 1e-9


def test_the_recorded_list_names_real_kernels_with_types_that_parse():
    roots = kernel_cache.load()
    assert len(roots) >= 10
    for root in roots:
        dispatcher = kernel_cache.dispatcher_of(root.kernel)
        params = dispatcher.py_func.__code__.co_argcount
        assert len(kernel_cache.parse_args(root.args)) == params, root.kernel


def test_a_stale_entry_is_reported_with_the_fix_and_the_others_still_compile():
    """A renamed kernel or changed arguments: a warning naming the entry and --record."""
    good = next(r for r in kernel_cache.load() if r.kernel.endswith(':tangent_directions'))
    stale = [RootKernel('quasistatic_drake.contact:no_such_kernel', '(int64)', 0.1),
             RootKernel(good.kernel, '(int64)', 0.1),
             good]
    messages = kernel_cache.compile_share(stale)
    assert len(messages) == 2
    assert "no kernel 'quasistatic_drake.contact:no_such_kernel'" in messages[0]
    assert 'tangent_directions(int64) no longer compiles' in messages[1]
    assert all('--record' in m for m in messages)


def test_an_unreadable_list_is_an_error_that_names_the_file(tmp_path, capsys):
    broken = tmp_path / 'kernel_signatures.json'
    broken.write_text(json.dumps({'roots': [{'kernel': 'm:k'}]}))
    with pytest.raises(kernel_cache.StaleKernelList, match=r'kernel_signatures.json.*--record'):
        kernel_cache.load(broken)
    with pytest.raises(SystemExit) as exit_info:
        kernel_cache.main(['--jobs', '0'])
    assert exit_info.value.code == 2
    assert '--jobs must be at least 1 (got 0)' in capsys.readouterr().err


def test_after_the_warm_up_the_demo_compiles_nothing(tmp_path):
    """
    The real check: an empty numba cache, warmed in two processes, then the demo.

    Fails when a kernel the demo calls is missing from the list or listed with
    other argument types (then it would compile during the demo, one core).
    """
    env = {**os.environ, 'NUMBA_CACHE_DIR': str(tmp_path)}
    warm = subprocess.run([sys.executable, '-m', 'quasistatic_drake.kernel_cache', '--jobs', '2'],
                          capture_output=True, text=True, timeout=900, cwd=REPO_ROOT, env=env)
    assert warm.returncode == 0, warm.stderr
    count = len(kernel_cache.load())
    assert f'{count} of {count} kernels compiled or loaded' in warm.stdout, warm.stderr
    assert 'warning' not in warm.stderr
    demo = subprocess.run([sys.executable, '-c', COUNT_COMPILES], capture_output=True,
                          text=True, timeout=900, cwd=REPO_ROOT, env=env)
    assert demo.returncode == 0, demo.stderr
    assert 'COMPILED []' in demo.stdout, (
        f'{demo.stdout.splitlines()[-1]}: the demo compiled kernels the warm-up did not; '
        "run 'python -m quasistatic_drake.kernel_cache --record'")
    assert 'compiling the contact kernels' not in demo.stderr
