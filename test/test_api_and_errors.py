"""The public API and its clear errors: bad input is refused and nothing changes."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO_ROOT, ground_entry, make_sim, sdf_box_object, write
from quasistatic_drake import (CommandError, QuasistaticSimulator, Scenario, ScenarioError,
                               State, StepResult)

FINGER_PUSH = os.path.join(REPO_ROOT, 'config', 'finger_push.yaml')


@pytest.fixture(scope='module')
def sim():
    return QuasistaticSimulator(Scenario.from_yaml(FINGER_PUSH))


LAUNCH_IMPORTS = ('quasistatic_drake.paths', 'quasistatic_drake.ros.params',
                  'quasistatic_drake.ros.description', 'quasistatic_drake.ros.launch_plan')


def test_what_the_launch_files_import_loads_neither_pydrake_nor_numba():
    """A fresh interpreter imports the launch files' modules: no pydrake, no numba loaded."""
    code = ('import sys\n'
            + ''.join(f'import {m}\n' for m in LAUNCH_IMPORTS)
            + 'print(sorted(m for m in sys.modules if m.split(".")[0] in ("pydrake", "numba")))')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         check=True, cwd=REPO_ROOT).stdout
    assert out.strip() == '[]'


def test_the_package_exports_the_plant_and_refuses_unknown_names():
    import quasistatic_drake
    from quasistatic_drake import QuasistaticPlant
    from quasistatic_drake.quasistatic_plant import QuasistaticPlant as Plant
    assert QuasistaticPlant is Plant
    assert set(quasistatic_drake.__all__) <= set(dir(quasistatic_drake))
    with pytest.raises(AttributeError, match="no attribute 'QuasistaticPlnat'"):
        quasistatic_drake.QuasistaticPlnat


def test_api_shapes_and_names(sim):
    q = sim.default_positions()
    assert q.shape == (sim.model.n_q,)
    assert sim.robot_joint_names('finger') == ['finger_x', 'finger_y', 'finger_z']
    np.testing.assert_allclose(sim.robot_positions(q, 'finger'), [-0.08, 0.0, 0.05])
    np.testing.assert_allclose(sim.object_pose(q, 'box').translation(), [0, 0, 0.05])
    assert sim.min_signed_distance(q) == pytest.approx(0.0, abs=1e-9)


def test_step_result_fields(sim):
    state = sim.initial_state()
    q_copy = np.array(state.q)
    result = sim.step(state, {'finger': [0.1, 0, 0]})
    assert isinstance(result, StepResult) and isinstance(result.state_next, State)
    np.testing.assert_array_equal(state.q, q_copy)      # step never modifies its input
    assert result.q_next is result.state_next.q and result.status == 'optimal'
    assert result.diagnostics.solve_time > 0.0
    assert not result.state_next.q.flags.writeable       # a State is immutable
    assert 'optimal' in repr(result) and len(repr(result)) < 100
    for contact in result.contacts:
        assert isinstance(contact.body_a, str) and isinstance(contact.body_b, str)
        assert contact.point_W.shape == (3,) and contact.force_W.shape == (3,)
        assert np.linalg.norm(contact.normal_W) == pytest.approx(1.0)
        assert contact.phi <= 0.02
    pushes = [c for c in result.contacts if c.body_a == 'box::box_link'
              and c.body_b == 'table::table_top']
    assert pushes and all(c.force_W[2] < 0 for c in pushes), 'the box presses the table down'


def test_the_old_call_form_names_the_new_one(sim):
    """Check step(q, v_cmd, q_ref=...): refused with the State form to use instead."""
    q = sim.default_positions()
    for call in (lambda: sim.step(q, {'finger': [0.1, 0, 0]}),
                 lambda: sim.step(sim.initial_state(), {}, q_ref=q[:3]),
                 lambda: sim.rollout(q, [{}])):
        with pytest.raises(CommandError, match=r'sim\.initial_state\(q'):
            call()


@pytest.mark.parametrize('command, message', [
    ({'finger': [np.nan, 0, 0]}, 'not finite'),
    ({'finger': [0, np.inf, 0]}, 'not finite'),
    ({'finger': [0.1, 0]}, 'expected 3'),
    ({'finger': 'fast'}, 'must be 3 numbers'),
    ({'fingr': [0, 0, 0]}, "unknown robot(s) ['fingr']"),
    ([0.1, 0, 0], 'must map robot names'),
])
def test_bad_commands_are_refused_and_change_nothing(sim, command, message):
    first = sim.step(sim.initial_state(), {'finger': [0.1, 0, 0]})
    with pytest.raises(CommandError, match=re.escape(message)):
        sim.step(first.state_next, command)
    after_error = sim.step(first.state_next, {'finger': [0.1, 0, 0]})
    clean = sim.step(sim.initial_state(), {'finger': [0.1, 0, 0]})
    clean = sim.step(clean.state_next, {'finger': [0.1, 0, 0]})
    np.testing.assert_array_equal(after_error.q_next, clean.q_next)
    np.testing.assert_array_equal(after_error.state_next.q_ref, clean.state_next.q_ref)


@pytest.mark.parametrize('q, message', [
    (np.zeros(3), 'shape'),
    (np.full(10, np.nan), 'non-finite'),
])
def test_bad_configurations_are_refused(sim, q, message):
    with pytest.raises(CommandError, match=message):
        sim.initial_state(q)
    with pytest.raises(CommandError, match=message):
        sim.step(State(q=q, q_ref=np.zeros(3)), {})
    with pytest.raises(CommandError, match=message):
        sim.min_signed_distance(q)


def test_unknown_names_in_queries(sim):
    q = sim.default_positions()
    with pytest.raises(CommandError, match="unknown robot 'arm'"):
        sim.robot_positions(q, 'arm')
    with pytest.raises(CommandError, match="unknown object 'ball'"):
        sim.object_pose(q, 'ball')


def assert_same_step(a, b):
    """Assert two StepResults are identical in every array and the status."""
    assert a.status == b.status
    for name, x, y in (('q_next', a.q_next, b.q_next),
                       ('q_ref', a.state_next.q_ref, b.state_next.q_ref),
                       ('v', a.diagnostics.v, b.diagnostics.v),
                       ('forces_W', a.forces_W, b.forces_W)):
        np.testing.assert_array_equal(x, y, err_msg=name)


def test_a_step_depends_on_its_arguments_only(sim):
    """The same call before and after unrelated calls, and on a fresh engine: identical."""
    x = sim.step(sim.initial_state(), {'finger': [0.2, 0, 0]}).q_next   # a step that ends at x
    right_after = sim.step(sim.initial_state(x), {'finger': [0.0, 0, 0]})
    np.testing.assert_array_equal(right_after.state_next.q_ref, sim.robot_positions(x, 'finger'))
    sim.step(sim.initial_state(), {'finger': [0.0, 0.1, 0]})
    sim.min_signed_distance(sim.default_positions())
    sim.object_pose(x, 'box')
    later = sim.step(sim.initial_state(x), {'finger': [0.0, 0, 0]})
    fresh = QuasistaticSimulator(Scenario.from_yaml(FINGER_PUSH))
    assert_same_step(right_after, later)
    assert_same_step(right_after, fresh.step(fresh.initial_state(x), {'finger': [0.0, 0, 0]}))


def test_the_reference_is_part_of_the_state(sim):
    r1 = sim.step(sim.initial_state(), {'finger': [0.2, 0, 0]})
    np.testing.assert_allclose(r1.state_next.q_ref, [-0.06, 0.0, 0.05])
    r2 = sim.step(r1.state_next, {'finger': [0.0, 0, 0]})
    np.testing.assert_allclose(r2.state_next.q_ref, r1.state_next.q_ref)   # the preload carries
    r4 = sim.step(sim.initial_state(q_ref=[0.0, 0.0, 0.05]), {'finger': [0.0, 0, 0]})
    np.testing.assert_allclose(r4.state_next.q_ref, [0.0, 0.0, 0.05])
    with pytest.raises(CommandError, match='q_ref has 2 entries'):
        sim.initial_state(q_ref=[0.0, 0.0])


def test_rollout_hands_each_step_the_last_state(sim):
    start = sim.initial_state()
    commands = [{'finger': [0.2, 0, 0]}] * 3 + [{'finger': [0.0, 0, 0]}]
    rollout = sim.rollout(start, commands)
    assert rollout.q.shape == (5, start.q.size) and rollout.q_ref.shape == (5, 3)
    assert len(rollout.results) == 4 and rollout.failed_steps == 0
    np.testing.assert_array_equal(rollout.q[0], start.q)
    state = start
    for k, v_cmd in enumerate(commands):
        by_hand = sim.step(state, v_cmd)
        assert_same_step(rollout.results[k], by_hand)
        np.testing.assert_array_equal(rollout.q[k + 1], by_hand.q_next)
        state = by_hand.state_next
    np.testing.assert_array_equal(rollout.final_state.q, state.q)
    with pytest.raises(CommandError, match=r'commands\[1\]: .*not finite'):
        sim.rollout(start, [{'finger': [0.1, 0, 0]}, {'finger': [np.nan, 0, 0]}])


def scenario_dict(tmp_path, **changes):
    data = {'time_step': 0.1,
            'robots': [{'name': 'finger', 'stiffness': [100, 100, 100],
                        'file': 'package://quasistatic_drake/urdf/finger.urdf'}],
            'objects': [{'name': 'box', 'file': write(
                tmp_path, 'box.sdf', sdf_box_object('box', (0.1, 0.1, 0.1), 1.0)),
                'initial_pose': {'xyz': [0, 0, 0.05]}}],
            'environment': [ground_entry(tmp_path)]}
    data.update(changes)
    return data


@pytest.mark.parametrize('changes, message', [
    ({'tiem_step': 0.1}, "unknown key(s) ['tiem_step']"),
    ({'time_step': -0.1}, 'time_step: must be > 0'),
    ({'time_step': 'fast'}, 'time_step: expected a number'),
    ({'formulation': 'pgs'}, "unknown formulation 'pgs'"),
    ({'friction_directions': 3}, 'friction_directions: expected an even integer'),
    ({'gravity': [0, 0]}, 'gravity: expected 3 numbers'),
    ({'robots': [{'name': 'finger', 'file': 'nowhere.urdf', 'stiffness': [1, 1, 1]}]},
     "robots[0].file: model file 'nowhere.urdf' not found"),
    ({'robots': [{'name': 'finger', 'stiffness': [1, 1, 1],
                  'file': 'package://quasistatic_drake/urdf/finger.urdf', 'colour': 'red'}]},
     "robots[0]: unknown key(s) ['colour']"),
    ({'robots': [{'name': 'finger', 'stiffness': [1, 1],
                  'file': 'package://quasistatic_drake/urdf/finger.urdf'}]},
     'robots[0].stiffness: expected 3 values, one per actuated joint'),
    ({'robots': [{'name': 'finger', 'stiffness': [1, -1, 1],
                  'file': 'package://quasistatic_drake/urdf/finger.urdf'}]},
     r'robots[0].stiffness[1]: must be > 0'),
    ({'robots': [{'name': 'finger', 'stiffness': [1, 1, 1], 'initial_positions': [0, 0],
                  'file': 'package://quasistatic_drake/urdf/finger.urdf'}]},
     'robots[0].initial_positions: expected 3 values'),
    ({'objects': [{'name': 'box', 'file': 'box.sdf', 'initial_pose': {'xyz': [0, 0]}}]},
     'objects[0].initial_pose.xyz: expected 3 numbers'),
    ({'environment': [{'name': 'finger', 'file': 'ground.urdf'}]},
     "model names must be unique; repeated: ['finger']"),
    ({'robots': [{'name': 'finger', 'stiffness': [1, 1, 1], 'pose': {'xyz': [1, 0, 0]},
                  'file': 'package://quasistatic_drake/urdf/finger.urdf'}]},
     "robots[0]: the model is already attached to the world"),
])
def test_bad_scenarios_say_where_and_what(tmp_path, changes, message):
    data = scenario_dict(tmp_path, **changes)
    with pytest.raises(ScenarioError) as err:
        QuasistaticSimulator(Scenario.from_dict(data, base_dir=tmp_path, source='s.yaml'))
    assert message in str(err.value)
    assert str(err.value).startswith('s.yaml: ')


def test_missing_yaml_file_and_bad_yaml(tmp_path):
    with pytest.raises(ScenarioError, match='does not exist'):
        Scenario.from_yaml(tmp_path / 'missing.yaml')
    bad = tmp_path / 'bad.yaml'
    bad.write_text('time_step: [0.1\n')
    with pytest.raises(ScenarioError, match='not valid YAML'):
        Scenario.from_yaml(bad)


def test_unparsable_model_file(tmp_path):
    write(tmp_path, 'broken.urdf', '<robot name="x"><link name="a"></robot>')
    data = scenario_dict(tmp_path, environment=[{'name': 'broken', 'file': 'broken.urdf'}])
    with pytest.raises(ScenarioError, match="environment\\[0\\]: Drake could not parse"):
        QuasistaticSimulator(Scenario.from_dict(data, base_dir=tmp_path))


def test_halfspace_ground_is_refused_with_a_fix(tmp_path):
    write(tmp_path, 'plane.sdf', """
                                 <?xml version="1.0"?>
<sdf version="1.9"><model name="plane"><static>true</static><link name="plane">
<collision name="c"><geometry><plane><normal>0 0 1</normal><size>1 1</size></plane>
</geometry></collision></link></model></sdf>""")
    data = scenario_dict(tmp_path, environment=[{'name': 'plane', 'file': 'plane.sdf'}])
    with pytest.raises(ScenarioError, match='model the ground or table as a large box'):
        QuasistaticSimulator(Scenario.from_dict(data, base_dir=tmp_path))


def test_default_friction_applies_only_where_a_file_has_none(tmp_path):
    sim = make_sim(tmp_path, scenario_dict(tmp_path, default_friction=0.3))
    mu = {info.body_name: info.mu for info in sim.model.geometries.values()}
    assert mu['box::box_body'] == 0.3           # plain <box>, no drake:mu_dynamic
    assert mu['ground::slab'] == 0.5            # set in the file
    assert mu['finger::finger_tip'] == 0.5


def test_massless_object_is_refused(tmp_path):
    write(tmp_path, 'ghost.urdf', """<?xml version="1.0"?>
<robot name="ghost"><link name="ghost_link">
<collision><geometry><box size="0.1 0.1 0.1"/></geometry></collision></link></robot>""")
    data = scenario_dict(tmp_path, objects=[{'name': 'ghost', 'file': 'ghost.urdf',
                                             'initial_pose': {'xyz': [0, 0, 0.05]}}])
    with pytest.raises(ScenarioError, match="object 'ghost' has a singular mass matrix"):
        QuasistaticSimulator(Scenario.from_dict(data, base_dir=tmp_path))


def test_scenario_where_nothing_moves_is_refused(tmp_path):
    data = scenario_dict(tmp_path, robots=[], objects=[])
    with pytest.raises(ScenarioError, match='nothing can move'):
        QuasistaticSimulator(Scenario.from_dict(data, base_dir=tmp_path))
