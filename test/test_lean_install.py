"""
The library and the demo without requirements-dev.txt (issue 32, item 1).

``make demo`` installs requirements.txt only.  A feature that needs a
package of requirements-dev.txt says which and names the file (exit 2), and
the demo's code path imports none of them.  The packages are hidden from a
fresh interpreter (``sys.modules[name] = None``), as in a venv without them.
"""

import subprocess
import sys
from pathlib import Path

from conftest import REPO_ROOT

DEV_ONLY = ('matplotlib', 'gurobipy', 'pyscipopt', 'ray', 'rclpy', 'clarabel', 'qpsolvers',
            'proxsuite', 'osqp', 'quadprog', 'pytest', 'playwright')


def run_without_dev(code: str):
    hide = '; '.join(f'sys.modules[{name!r}] = None' for name in DEV_ONLY)
    return subprocess.run([sys.executable, '-c', f'import sys; {hide}; {code}'],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)


def test_requirements_txt_is_complete_and_pinned():
    lines = [line.split('#')[0].strip() for line in
             (Path(REPO_ROOT) / 'requirements.txt').read_text().splitlines()]
    pins = [line for line in lines if line]
    assert pins and all('==' in line for line in pins)
    names = {line.split('==')[0].lower() for line in pins}
    assert not names & {name.lower() for name in DEV_ONLY}
    assert {'drake', 'numpy', 'numba', 'llvmlite'} <= names


def test_the_demo_runs_without_the_dev_packages(tmp_path):
    html = tmp_path / 'replay.html'
    done = run_without_dev('from quasistatic_drake.apps.cli import main; '
                           f"sys.exit(main(['demo', '--no-meshcat', '--html', '{html}']))")
    assert done.returncode == 0, done.stderr[-3000:]
    assert 'failed steps 0' in done.stdout and html.stat().st_size > 100_000


def test_a_figure_without_matplotlib_names_the_file(tmp_path):
    done = run_without_dev('from quasistatic_drake.apps.cli import main; '
                           f"sys.exit(main(['paper-bvp', '--png', '{tmp_path / 'b.png'}']))")
    assert done.returncode == 2, done.stderr[-3000:]
    assert "the figures (--png) and the benchmark plots needs the Python package " \
           "'matplotlib'" in done.stderr
    assert 'pip install -r requirements-dev.txt' in done.stderr and 'Traceback' not in done.stderr


def test_the_node_without_rclpy_names_the_file():
    done = run_without_dev('from quasistatic_drake.ros.entry import main; sys.exit(main())')
    assert done.returncode == 2 and 'Traceback' not in done.stderr
    assert "the ROS 2 node needs the Python package 'rclpy'" in done.stderr
