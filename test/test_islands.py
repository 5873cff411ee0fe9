"""Contact islands (issue 30): what shares no contact with a moving body changes nothing of it."""

from pathlib import Path

import numpy as np
import pytest
import yaml

from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.islands import rows_times
REPO_ROOT = Path(__file__).resolve().parents[1]

PUSH = {'finger': [0.1, 0.0, 0.0]}
STEPS = 15


def push_scene(tmp_path, pile: bool, quasi_dynamic: bool) -> QuasistaticSimulator:
    """Return config/finger_push.yaml, with a pile of two boxes 0.3 m to the side if ``pile``."""
    data = yaml.safe_load((REPO_ROOT / 'config' / 'finger_push.yaml').read_text())
    data['quasi_dynamic'] = quasi_dynamic
    box = (REPO_ROOT / 'urdf' / 'box.urdf').read_text()
    data['objects'][0]['file'] = str(REPO_ROOT / 'urdf' / 'box.urdf')
    for entry in data['robots'] + data['environment']:
        entry['file'] = entry['file'].replace('package://quasistatic_drake', str(REPO_ROOT))
    if pile:
        for level in range(2):                # on the table (it spans y = -0.4 to 0.4)
            name = f'pile_{level}'
            (tmp_path / f'{name}.urdf').write_text(box.replace('robot name="box"',
                                                               f'robot name="{name}"'))
            data['objects'].append({'name': name, 'file': str(tmp_path / f'{name}.urdf'),
                                    'initial_pose': {'xyz': [0.0, 0.3, 0.05 + 0.1 * level]}})
    return QuasistaticSimulator(Scenario.from_dict(data, base_dir=tmp_path))


def push(sim: QuasistaticSimulator) -> tuple:
    """Return the pushed box's and the finger's q after each step, and the last result."""
    columns = np.concatenate([sim.model.objects[0].q_idx, sim.model.robots[0].q_idx])
    state, out = sim.initial_state(), []
    for _ in range(STEPS):
        result = sim.step(state, PUSH)
        assert result.success
        state = result.state_next
        out.append(state.q[columns])
    return np.array(out), result


@pytest.mark.parametrize('quasi_dynamic', [False, True])
def test_a_resting_pile_elsewhere_changes_nothing_of_the_push(tmp_path, quasi_dynamic):
    """The pile is an island at rest: the push is the same to 1e-12, and the pile sleeps."""
    alone, _ = push(push_scene(tmp_path, pile=False, quasi_dynamic=quasi_dynamic))
    with_pile = push_scene(tmp_path, pile=True, quasi_dynamic=quasi_dynamic)
    trajectory, last = push(with_pile)
    assert alone[-1, 0] > 0.1, 'the box was pushed'
    assert np.abs(trajectory - alone).max() <= 1e-12
    assert last.diagnostics.solution.sleeping >= 1, 'the pile at rest is not solved'
    start = with_pile.initial_state().q
    for pile in with_pile.model.objects[1:]:
        assert np.array_equal(last.state_next.q[pile.q_idx], start[pile.q_idx])


def test_rows_times_ignores_the_zero_columns_of_other_islands():
    """Adding zero columns leaves every bit of A @ x: the sum runs in column order."""
    rng = np.random.default_rng(3)
    A, x = rng.normal(size=(7, 9)), rng.normal(size=9)
    wide = np.hstack([A, np.zeros((7, 23))])
    wide_x = np.concatenate([x, rng.normal(size=23)])
    assert np.array_equal(rows_times(wide, wide_x), rows_times(A, x))
    np.testing.assert_allclose(rows_times(A, x), A @ x, rtol=1e-14, atol=1e-14)
