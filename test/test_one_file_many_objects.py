"""
One model file, many objects (issue 32, item 5): the entry's name names the instance.

Before: two entries with the same file failed with Drake's "This model
already contains a model instance named 'box'": Drake names an instance
after the file's model, and a bin of identical parts needed directives.
"""

import numpy as np

from conftest import REPO_ROOT
from quasistatic_drake import QuasistaticSimulator, Scenario

BOX = f'{REPO_ROOT}/urdf/box.urdf'


def name(k):
    """Return box k's name: the first as the file's model ('box'), the issue's failing case."""
    return 'box' if k == 0 else f'box_{k}'


def spot(k):
    """Return where box k rests: two rows of five on the table, clear of the pads."""
    return [-0.3 + 0.15 * (k % 5), 0.15 + 0.15 * (k // 5), 0.05]


def bin_of_boxes(count):
    """Return a scenario: `count` 10 cm boxes from one file, in a row on the table, a pad."""
    return Scenario.from_dict({
        'time_step': 0.1,
        'robots': [{'name': 'pads', 'file': f'{REPO_ROOT}/urdf/two_pads.urdf',
                    'stiffness': [1000, 1000, 1000], 'initial_positions': [0.3, -0.07, 0.07]}],
        'objects': [{'name': name(k), 'file': BOX,
                     'initial_pose': {'xyz': spot(k)}}
                    for k in range(count)],
        'environment': [{'name': 'table', 'file': f'{REPO_ROOT}/urdf/table.urdf',
                         'pose': {'xyz': [0, 0, -0.05]}}]}, base_dir=REPO_ROOT)


def test_a_bin_of_ten_identical_boxes_from_one_file():
    sim = QuasistaticSimulator(bin_of_boxes(10))
    names = [o.name for o in sim.model.objects]
    assert names == [name(k) for k in range(10)]
    plant = sim.model.plant
    assert sorted(plant.GetModelInstanceName(o.instance) for o in sim.model.objects) == \
        sorted(names)
    state = sim.initial_state()
    for _ in range(3):
        result = sim.step(state, {'pads': np.zeros(3)})
        assert result.success
        state = result.state_next
    for k in range(10):         # each rests where it was put, on the table
        pose = sim.object_pose(state.q, name(k))
        np.testing.assert_allclose(pose.translation(),
                                   spot(k), atol=1e-6)
