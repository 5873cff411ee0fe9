"""
The CLI's output paths and numbers are checked before anything runs (issue 31, defects 10, 14).

Before: ``rollouts --out /dev/full`` wrote /dev/full.npz while printing
"written to /dev/full"; ``--out DIR`` wrote DIR.npz and ``paper-bvp --png
DIR`` DIR.png; an unwritable ``--json`` failed with a traceback after the
whole computation; ``push --speed 1e300``, ``rollouts --seed -5`` and
``--samples 2000000000`` ended in tracebacks.  Each is now exit 2 with one
error line, at once, and nothing is written.
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT

PADS = f'{REPO_ROOT}/config/two_pads_lift.yaml'
ROLLOUTS = ['rollouts', PADS, '--samples', '2', '--noise', '0.01']


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, '-m', 'quasistatic_drake.apps.cli', *args],
                          capture_output=True, text=True, timeout=300, cwd=cwd)


CASES = {
    'a device as --out': (lambda d: [*ROLLOUTS, '--out', '/dev/full'],
                          r'--out: /dev/full: the file name must end in \.npz'),
    'a directory as --out': (lambda d: [*ROLLOUTS, '--out', str(d)],
                             r'--out: .* is a directory; give a file in it'),
    'a directory as --png': (lambda d: ['paper-bvp', '--png', str(d)],
                             r'--png: .* is a directory'),
    'a --json under a file': (lambda d: ['paper-bvp', '--json', str(d / 'file.txt' / 'x.json')],
                              r'--json: .* cannot be created: .*file\.txt is not a writable '
                              'directory'),
    'a --png of another kind': (lambda d: ['paper-jamming', '--png', str(d / 'figure.pdf')],
                                r'--png: .*figure\.pdf: the file name must end in \.png'),
    'a negative seed': (lambda d: [*ROLLOUTS, '--seed', '-5', '--out', str(d / 'x.npz')],
                        r'--seed: must be an integer >= 0, got -5'),
    'a speed of 1e300': (lambda d: ['push', '--speed', '1e300'],
                         r'--speed: must be at most 1e\+06 m/s'),
    'a push of no step': (lambda d: ['push', '--speed', '100'],
                          r'is 0 steps of h = 0\.1 s; the push takes 1 to 100000'),
    'two billion samples': (lambda d: ['rollouts', PADS, '--samples', '2000000000', '--noise',
                                       '0.01', '--out', str(d / 'x.npz')],
                            r'--samples 2000000000 rollouts of \d+ steps need about .* GB'),
}


@pytest.mark.parametrize('case', list(CASES))
def test_a_bad_argument_exits_2_at_once_and_writes_nothing(tmp_path, case):
    arguments, message = CASES[case]
    (tmp_path / 'file.txt').write_text('a file, not a directory')
    before = sorted(p.name for p in tmp_path.iterdir())
    done = cli(*arguments(tmp_path), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert 'Traceback' not in done.stderr
    assert re.search(message, done.stderr), done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert not Path('/dev/full.npz').exists()


def test_the_file_written_is_the_path_given(tmp_path):
    """`--out` without .npz was refused above; with it, exactly that file is written."""
    out = tmp_path / 'new' / 'batch.npz'
    done = cli(*ROLLOUTS, '--steps', '2', '--backend', 'serial', '--out', str(out))
    assert done.returncode == 0, done.stderr
    assert out.is_file() and f'written to {out}' in done.stdout
    assert sorted(p.name for p in out.parent.iterdir()) == ['batch.npz']
