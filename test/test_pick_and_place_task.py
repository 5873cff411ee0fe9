"""
The demo for any arm and gripper: the task: block, its errors, the CLI options, the scenes.

config/arm_pick_place_directives.yaml assembles urdf/iiwa14_arm.urdf and
urdf/parallel_gripper.sdf (two robots, jaws closing in opposite directions)
with model directives; its task: block names the arm, the gripper, the TCP
and the fingers.  One demo run of it is shared by the tests that read it.
"""

from dataclasses import replace
import json
from pathlib import Path
import re

import numpy as np
import pytest

from conftest import REPO_ROOT
from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.apps import cli
from quasistatic_drake.apps.pick_and_place import (Finger, PickPlaceTask, plan_pick_and_place,
                                                   plan_task, run_pick_and_place)
from quasistatic_drake.apps.planning import PlanningError
from quasistatic_drake.scenario import ScenarioError

CONFIG = Path(REPO_ROOT) / 'config'
DIRECTIVES_SCENE = CONFIG / 'arm_pick_place_directives.yaml'
ARM_SCENES = ('arm_pick_place', 'arm_pick_place_box', 'arm_pick_place_rounded_box',
              'arm_pick_place_miqp')


@pytest.fixture(scope='module')
def scenario():
    """Return the directives scene."""
    return Scenario.from_yaml(DIRECTIVES_SCENE)


@pytest.fixture(scope='module')
def engine(scenario):
    """Return a simulator of the directives scene (for plans and the task's checks)."""
    return QuasistaticSimulator(scenario)


@pytest.fixture(scope='module')
def run(scenario):
    """Run the demo once on the directives scene, with the scenario's task."""
    return run_pick_and_place(scenario)


def with_task(scenario, **task):
    """Return the scenario with its task: block replaced."""
    return replace(scenario, task=task)


# ----- the directives scene ------------------------------------------------------------
def test_directives_scene_has_two_robots_and_its_task(scenario, engine):
    assert [r.name for r in engine.model.robots] == ['iiwa', 'gripper']
    assert engine.robot_joint_names('gripper') == ['left_jaw_joint', 'right_jaw_joint']
    task = PickPlaceTask.from_scenario(scenario)
    assert (task.robot, task.gripper_robot, task.tcp_frame, task.object) == (
        'iiwa', 'gripper', 'gripper::tcp', 'cylinder')
    assert task.fingers == (Finger('left_jaw_joint', 0.01, 0.06),
                            Finger('right_jaw_joint', -0.01, -0.06))
    # the rest are the defaults
    assert task.durations == PickPlaceTask().durations and task.squeeze == 0.01


def test_directives_scene_picks_and_places(run):
    summary = run.summary()
    assert summary['failed_steps'] == 0 and summary['steps'] == 165
    assert 0.14 <= summary['max_object_lift'] <= 0.16, summary['max_object_lift']
    assert summary['place_error_m'] <= 0.01, summary['place_error_m']
    assert summary['final_tilt_deg'] < 1.0
    assert summary['min_signed_distance'] >= -1e-3
    np.testing.assert_allclose(summary['place_target_xyz'], [0.55, 0.25, 0.07], atol=1e-9)


def test_directives_scene_plan_drives_both_robots(run):
    plan = run.plan
    assert plan.robots == (('iiwa', 7), ('gripper', 2))
    commands = plan.commands(0)
    assert set(commands) == {'iiwa', 'gripper'} and commands['gripper'].shape == (2,)
    # the jaws close in opposite directions, and squeeze 1 cm past the cylinder (r = 0.03)
    jaws = plan.q_ref[:, plan.robot_slices['gripper']]
    np.testing.assert_allclose(jaws[0], [0.01, -0.01])
    np.testing.assert_allclose(jaws[plan.step_range('lift').start], [0.04, -0.04], atol=1e-9)
    np.testing.assert_allclose(jaws[-1], [0.01, -0.01], atol=1e-9)
    # the simulated jaws stop on the cylinder while the reference squeezes past it
    held = [r.gripper for r in run.records if r.waypoint in ('lift', 'carry')]
    np.testing.assert_allclose(held, np.tile([0.03, -0.03], (len(held), 1)), atol=2e-3)


def test_directives_file_scene_is_the_same(scenario, engine):
    other = Scenario.from_yaml(CONFIG / 'arm_pick_place_directives_file.yaml')
    assert other.directives_source.endswith('arm_pick_place_directives.dmd.yaml')
    assert list(other.directives) == list(scenario.directives)
    assert other.task == scenario.task
    plan, target, name = plan_pick_and_place(QuasistaticSimulator(other))
    expected, _, _ = plan_pick_and_place(engine)
    np.testing.assert_array_equal(plan.velocities, expected.velocities)


def test_demo_command_on_the_directives_scene(tmp_path, capsys):
    out = tmp_path / 'd.json'
    assert cli.main(['demo', '--scenario', str(DIRECTIVES_SCENE), '--no-meshcat', '--json',
                     str(out)]) == 0
    summary = json.loads(out.read_text())
    assert summary['failed_steps'] == 0 and summary['max_object_lift'] >= 0.14
    assert summary['place_error_m'] <= 0.01
    assert '10.0/-10.0' in capsys.readouterr().out     # the jaws' open positions [mm]


# ----- scenarios compose ----------------------------------------------------------------
@pytest.mark.parametrize('name', ARM_SCENES)
def test_arm_scenes_share_the_base(name):
    text = (CONFIG / f'{name}.yaml').read_text()
    assert 'include: arm_' in text and 'robots:' not in text
    base = Scenario.from_yaml(CONFIG / 'arm_base.yaml')
    scene = Scenario.from_yaml(CONFIG / f'{name}.yaml')
    assert [(r.name, r.file) for r in scene.robots] == [(r.name, r.file) for r in base.robots]
    np.testing.assert_array_equal(scene.robots[0].stiffness, base.robots[0].stiffness)
    assert [(e.name, e.file, tuple(e.pose.xyz)) for e in scene.environment] == [
        (e.name, e.file, tuple(e.pose.xyz)) for e in base.environment]
    assert len(scene.objects) == 1
    assert scene.settings('miqp') == base.settings('miqp')


# ----- the task: block's errors -----------------------------------------------------------
def test_task_block_keys_are_checked(scenario, tmp_path):
    bad = tmp_path / 'bad.yaml'
    bad.write_text(f'include: {DIRECTIVES_SCENE}\ntask: {{grip: gripper}}\n')
    with pytest.raises(ScenarioError, match=r"bad.yaml: task: unknown key\(s\) \['grip'\]. "
                                            r"Did you mean 'gripper' for 'grip'\? "
                                            r"Allowed keys: \[.*'gripper'"):
        PickPlaceTask.from_scenario(Scenario.from_yaml(bad))
    cases = [
        ({'fingers': [{'joint': 'left_jaw_joint', 'open': 'wide', 'closed': 0.06}]},
         r"task.fingers\[0\].open: expected a number, got 'wide'"),
        ({'fingers': [{'joint': 'left_jaw_joint', 'open': 0.01}]},
         r"task.fingers\[0\].closed: is required but missing"),
        ({'fingers': []}, r'task.fingers: expected at least one finger'),
        ({'fingers': [{'joint': 'left_jaw_joint', 'open': 0.01, 'closed': 0.01}]},
         r'task.fingers\[0\]: open and closed are both 0.01'),
        ({'durations': {'lift': 1.0, 'wiggle': 1.0}},
         r"task.durations: unknown waypoint\(s\) \['wiggle'\]"),
        ({'squeeze': -0.01}, r'task.squeeze: must be >= 0'),
        ({'arm': ''}, r"task.arm: expected a robot name, got ''"),
    ]
    for task, message in cases:
        with pytest.raises(ScenarioError, match=message):
            PickPlaceTask.from_scenario(with_task(scenario, **task))


def test_task_errors_against_the_models(scenario, engine):
    fingers = [{'joint': 'left_jaw_joint', 'open': 0.01, 'closed': 0.06},
               {'joint': 'right_jaw_joint', 'open': -0.01, 'closed': -0.06}]
    good = dict(scenario.task)
    cases = [
        ({'arm': 'kuka'}, r"task.arm: no robot 'kuka'; the robots are \['iiwa', 'gripper'\]"),
        ({'gripper': 'hand'}, r"task.gripper: no robot 'hand'"),
        ({'object': 'teapot'}, r"task.object: no object 'teapot' to pick; the objects are "
                               r"\['cylinder'\]"),
        ({'tcp_frame': 'gripper::tool0'},
         r"task.tcp_frame: model 'gripper' has no frame 'tool0'; its frames: \[.*'tcp'"),
        ({'tcp_frame': 'tool0'},
         r"task.tcp_frame: robot 'iiwa'/'gripper' has no frame 'tool0'"),
        ({'tcp_frame': 'table::arm_table_top'},
         r"task.tcp_frame: frame 'table::arm_table_top' does not move with the joints of the "
         r"arm 'iiwa'"),
        ({'fingers': [{**fingers[0], 'joint': 'jaw'}]},
         r"task.fingers\[0\].joint: robot 'gripper' has no joint 'jaw'; its joints are "
         r"\['left_jaw_joint', 'right_jaw_joint'\]"),
        ({'fingers': [{**fingers[0], 'joint': 'iiwa_joint_7'}]},
         r"task.fingers\[0\].joint: robot 'gripper' has no joint 'iiwa_joint_7' \(it is a "
         r"joint of \['iiwa'\]: set task.gripper\)"),
        ({'fingers': [fingers[0], {**fingers[1], 'closed': -0.08}]},
         r"task.fingers\[1\].closed: -0.08 is outside the limits \[-0.06, 0\] of joint "
         r"'right_jaw_joint'"),
        ({'fingers': [{**fingers[0], 'open': 0.06, 'closed': 0.01}]},
         r"task.fingers\[0\]: from open \(0.06\) to closed \(0.01\) finger 'left_jaw_joint' "
         r"moves away from the TCP"),
    ]
    for change, message in cases:
        task = PickPlaceTask.from_scenario(with_task(scenario, **{**good, **change}))
        with pytest.raises(PlanningError, match=message):
            plan_pick_and_place(engine, task)


def test_scene_without_a_task_block_refuses_the_wsg_defaults(scenario, engine):
    """The defaults name the WSG: a scene of another gripper must say its fingers."""
    with pytest.raises(PlanningError, match=r"task.fingers\[0\].joint: robot 'iiwa' has no "
                                            r"joint 'wsg_left_finger_joint'"):
        plan_pick_and_place(engine, PickPlaceTask.from_scenario(with_task(scenario)))


# ----- the CLI options override the task ------------------------------------------------
def test_demo_options_override_the_task(tmp_path, capsys):
    out = tmp_path / 'wide.json'
    code = cli.main(['demo', '--scenario', str(DIRECTIVES_SCENE), '--no-meshcat', '--json',
                     str(out), '--finger', 'left_jaw_joint:0.0:0.06',
                     '--finger', 'right_jaw_joint:-0.0:-0.06'])
    printed = capsys.readouterr().out
    assert code == 0, printed
    rows = [line for line in printed.splitlines() if 'pre-grasp' in line]
    # the jaws opened to 0 mm, not to the scenario's 10 mm
    assert rows and re.search(r' -?0\.0/-?0\.0 ', rows[0]), rows
    summary = json.loads(out.read_text())
    assert summary['failed_steps'] == 0 and summary['place_error_m'] <= 0.01


def test_demo_option_errors_name_the_task_key(capsys):
    scene = ['demo', '--scenario', str(DIRECTIVES_SCENE), '--no-meshcat']
    assert cli.main(scene + ['--tcp-frame', 'gripper::nose']) == 2
    assert "task.tcp_frame: model 'gripper' has no frame 'nose'" in capsys.readouterr().err
    assert cli.main(scene + ['--gripper', 'iiwa']) == 2
    assert "task.fingers[0].joint: robot 'iiwa' has no joint 'left_jaw_joint' (it is a joint " \
        "of ['gripper']" in capsys.readouterr().err
    assert cli.main(scene + ['--arm', 'gripper', '--object', 'cylinder']) == 2
    assert "task.fingers: every joint of the arm 'gripper' is a finger" in \
        capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        cli.main(scene + ['--finger', 'left_jaw_joint:0.01'])
    assert exit_.value.code == 2
    assert 'expected JOINT:OPEN:CLOSED' in capsys.readouterr().err


def test_wsg_scene_task_from_the_options(tmp_path, capsys):
    """The default scene with its task given by options: the same as the defaults."""
    code = cli.main(['demo', '--no-meshcat', '--arm', 'iiwa', '--tcp-frame', 'iiwa::gripper_tcp',
                     '--finger', 'wsg_left_finger_joint:0.05:0',
                     '--finger', 'wsg_right_finger_joint:0.05:0', '--json',
                     str(tmp_path / 'wsg.json')])
    assert code == 0, capsys.readouterr().err
    summary = json.loads((tmp_path / 'wsg.json').read_text())
    assert summary['steps'] == 165 and summary['failed_steps'] == 0
    assert summary['max_object_lift'] == pytest.approx(0.1471, abs=1e-3)


# ----- a gripper with coupled jaws ------------------------------------------------------
@pytest.fixture(scope='module')
def mimic_scene(tmp_path_factory):
    """
    Return the directives scene with the right jaw coupled to the left one (drake:mimic).

    The gripper is then one commanded joint (left_jaw_joint); right_jaw_joint
    follows it with multiplier -1, so the task lists only the left jaw.
    """
    folder = tmp_path_factory.mktemp('mimic')
    sdf = (Path(REPO_ROOT) / 'urdf' / 'parallel_gripper.sdf').read_text().replace(
        '      <child>right_jaw</child>\n',
        '      <child>right_jaw</child>\n'
        '      <drake:mimic joint="left_jaw_joint" multiplier="-1" offset="0"/>\n')
    (folder / 'gripper.sdf').write_text(sdf)
    text = DIRECTIVES_SCENE.read_text().replace(
        'include: arm_base.yaml', f'include: {CONFIG / "arm_base.yaml"}').replace(
        'package://quasistatic_drake/urdf/parallel_gripper.sdf', str(folder / 'gripper.sdf'))
    for old, new in (('stiffness: [1000, 1000]', 'stiffness: [1000]'),
                     ('initial_positions: [0.01, -0.01]', 'initial_positions: [0.01]'),
                     ('    - {joint: right_jaw_joint, open: -0.01, closed: -0.06}\n', '')):
        assert old in text
        text = text.replace(old, new)
    (folder / 'scene.yaml').write_text(text)
    return Scenario.from_yaml(folder / 'scene.yaml')


def test_coupled_jaws_pick_and_place(mimic_scene):
    run = run_pick_and_place(mimic_scene)
    summary = run.summary()
    assert run.plan.robots == (('iiwa', 7), ('gripper', 1))
    assert summary['failed_steps'] == 0 and summary['max_object_lift'] >= 0.14
    assert summary['place_error_m'] <= 0.01


def test_coupled_jaw_is_not_a_finger_to_command(mimic_scene):
    engine = QuasistaticSimulator(mimic_scene)
    fingers = [{'joint': 'left_jaw_joint', 'open': 0.01, 'closed': 0.06},
               {'joint': 'right_jaw_joint', 'open': -0.01, 'closed': -0.06}]
    task = PickPlaceTask.from_scenario(mimic_scene, fingers=fingers)
    with pytest.raises(PlanningError, match=r"task.fingers\[1\].joint: 'right_jaw_joint' "
                                            r"follows 'left_jaw_joint' \(a coupled joint\)"):
        plan_pick_and_place(engine, task)


def test_a_coupled_jaw_counts_among_the_fingers(mimic_scene):
    """Its geometry is kept above the table too, though the task lists only its leader."""
    planned = plan_task(QuasistaticSimulator(mimic_scene))
    plant = planned.planner.plant
    gripper = plant.GetModelInstanceByName('gripper')
    jaws = {int(plant.GetBodyByName(name, gripper).index()) for name in ('left_jaw', 'right_jaw')}
    assert jaws <= planned.fingers
