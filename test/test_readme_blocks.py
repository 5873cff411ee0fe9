"""
Every fenced ``python`` block of README.md, and every script in examples/, runs as written.

Issue 32: of the README's executable blocks, two failed with NameError, and
the batch block needed an ``if __name__ == "__main__":`` guard that only
docs/batch.md mentioned.  Each block runs in a fresh interpreter from the
repository root, as a user pastes it into a file.  A block preceded by
``<!-- continues the block above -->`` runs after the block above it.
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT

ROOT = Path(REPO_ROOT)
CONTINUES = '<!-- continues the block above -->'


def readme_blocks():
    """Return [(name, code)]: each python block (indented ones too), continuations joined."""
    text = (ROOT / 'README.md').read_text()
    blocks = []
    pattern = re.compile(r'^( *)```python\n(.*?)^\1```', re.S | re.M)
    for match in pattern.finditer(text):
        indent = len(match.group(1))
        code = '\n'.join(line[indent:] for line in match.group(2).splitlines())
        line = text.count('\n', 0, match.start()) + 1
        before = text[:match.start()].rstrip().splitlines()[-1].strip()
        if before == CONTINUES:
            name, previous = blocks.pop()
            blocks.append((f'{name}+{line}', previous + '\n' + code))
        else:
            blocks.append((f'README.md:{line}', code))
    return blocks


BLOCKS = readme_blocks()
EXAMPLES = sorted((ROOT / 'examples').glob('*.py'))


def test_the_readme_has_its_blocks():
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize('name,code', BLOCKS, ids=[name for name, _ in BLOCKS])
def test_a_readme_block_runs(tmp_path, name, code):
    script = tmp_path / 'block.py'
    script.write_text(code + '\n')
    done = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, f'{name}:\n{code}\n--- stderr:\n{done.stderr[-3000:]}'


@pytest.mark.parametrize('example', EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_an_example_runs(example):
    done = subprocess.run([sys.executable, str(example)], cwd=ROOT, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
