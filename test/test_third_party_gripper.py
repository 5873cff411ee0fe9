"""
A third party's gripper in the demo (issue 32, item 4): Drake's iiwa 14 + WSG 50 + foam brick.

test/data/iiwa_wsg_brick.yaml attaches the WSG 50 "with tip" of drake_models
(a local stand-in, test/data/drake_models) to the iiwa 14 by model
directives, with a TCP frame added by add_frame.  The WSG's fingers reach
8.2 cm beyond its palm, further than the brick (5 cm) is tall: a grasp
that kept the palm ``palm_clearance`` above the brick pressed the
fingertips into the table.  The TCP's convention is checked at load; the
summary reports the brick's tilt and slip while it is held.
"""

import json
from pathlib import Path
import re

import numpy as np
from pydrake.math import RigidTransform, RollPitchYaw, RotationMatrix
from pydrake.multibody.tree import BodyIndex
import pytest

from conftest import REPO_ROOT
from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.apps import cli
from quasistatic_drake.apps.gripper import grasp_slip, principal_axis, tcp_axis_fix
from quasistatic_drake.apps.pick_and_place import (HELD, PickPlaceTask, plan_pick_and_place,
                                                   plan_task, run_pick_and_place)
from quasistatic_drake.apps.planning import PlanningError
from quasistatic_drake.scenario import ScenarioError

DATA = Path(REPO_ROOT) / 'test' / 'data'
SCENE = DATA / 'iiwa_wsg_brick.yaml'
TCP_ROTATION = 'rotation: !Rpy {deg: [-90, 0, 0]}'     # the scene's add_frame: z along the fingers
FINGER_CLEARANCE = PickPlaceTask().finger_clearance


@pytest.fixture(scope='module')
def scenario():
    """Return the iiwa + WSG 50 + brick scene."""
    return Scenario.from_yaml(SCENE)


@pytest.fixture(scope='module')
def run(scenario):
    """Run the demo once on the scene, with its task."""
    return run_pick_and_place(scenario)


def scene_with_tcp_rotation(tmp_path, rotation):
    """Return the scene with its TCP frame's add_frame rotation replaced (a wrong TCP)."""
    text = SCENE.read_text()
    for old, new in ((TCP_ROTATION, rotation),
                     ('include: ../../config/', f'include: {REPO_ROOT}/config/'),
                     ('drake_models: drake_models', f'drake_models: {DATA / "drake_models"}'),
                     ('file: foam_brick.urdf', f'file: {DATA / "foam_brick.urdf"}')):
        assert old in text
        text = text.replace(old, new)
    (tmp_path / 'scene.yaml').write_text(text)
    return Scenario.from_yaml(tmp_path / 'scene.yaml')


# ----- the fingers stay above the table ---------------------------------------------------
def test_the_wsg_grasps_as_low_as_its_fingers_allow(scenario):
    """The palm would stop 2.5 cm above the brick: the fingertips 7 mm inside the table."""
    planned = plan_task(QuasistaticSimulator(scenario))
    grasp = planned.grasp
    assert grasp.limited_by == 'fingers'
    assert grasp.fingers_above_support == pytest.approx(FINGER_CLEARANCE, abs=1e-9)
    assert grasp.support_height == pytest.approx(0.0, abs=1e-9)         # the table's top
    # the palm's face (0.03625 m in front of the WSG's body frame) is 8.29 cm above the
    # fingertips (the lowest tip spheres, 0.077133 + 0.041 + 0.001 m in front of it)
    reach = 0.077133 + 0.041 + 0.001 - 0.03625
    assert grasp.palm_above_top == pytest.approx(FINGER_CLEARANCE + reach - 0.05, abs=1e-9)


def test_no_finger_geometry_goes_below_the_table_at_any_step(scenario):
    """Drake's signed distance from every finger geometry to the table, at every step."""
    sim = QuasistaticSimulator(scenario)
    planned = plan_task(sim)
    model, plant = sim.model, sim.model.plant
    table = plant.GetModelInstanceByName('table')
    table_ids = [g for g, info in model.geometries.items()
                 if plant.get_body(BodyIndex(info.body_index)).model_instance() == table]
    finger_ids = [g for g, info in model.geometries.items() if info.body_index in planned.fingers]
    assert len(table_ids) == 1 and len(finger_ids) == 10      # 2 boxes and 8 tip spheres
    rollout = sim.rollout(sim.initial_state(),
                          [planned.plan.commands(k) for k in range(planned.plan.steps)])
    assert rollout.failed_steps == 0
    lowest = []
    for q in rollout.q:
        model.set_positions(q)
        query = model.query_object()
        lowest.append(min(query.ComputeSignedDistancePairClosestPoints(f, t).distance
                          for f in finger_ids for t in table_ids))
    # planned 5 mm above the table; the arm's springs give way by less than half a millimetre
    assert min(lowest) >= FINGER_CLEARANCE - 5e-4, min(lowest)


def test_the_run_picks_places_and_reports_the_fingers_clearance(run):
    summary = run.summary()
    assert summary['failed_steps'] == 0 and summary['steps'] == 165
    assert summary['max_object_lift'] >= 0.14
    assert summary['place_error_m'] <= 0.02
    assert summary['min_signed_distance'] >= -1e-3
    clearances = [r.finger_clearance for r in run.records]
    assert summary['min_finger_clearance_m'] == min(clearances)
    assert FINGER_CLEARANCE - 5e-4 <= min(clearances) <= FINGER_CLEARANCE + 1e-6
    assert summary['grasp'] == {'limited_by': 'fingers',
                                'palm_above_top_m': run.grasp.palm_above_top,
                                'fingers_above_support_m': run.grasp.fingers_above_support}


# ----- the summary's tilt and slip are the carry's ----------------------------------------
def test_the_summary_tilt_is_the_largest_while_held_not_the_last(run):
    summary = run.summary()
    held = [r.tilt_deg for r in run.records if r.waypoint in HELD]
    assert len(held) == 70                               # lift 20, carry 30, place 20 steps
    assert summary['max_carry_tilt_deg'] == max(held)
    assert summary['final_tilt_deg'] == pytest.approx(run.records[-1].tilt_deg)
    # the brick is set down flat (0 degrees): the final tilt alone would hide the
    # carry's (measured: 0.024 degrees)
    assert summary['max_carry_tilt_deg'] > summary['final_tilt_deg']


def test_the_tip_spheres_hold_the_brick_level_and_in_place(run):
    """
    The brick stays level in the WSG's tip spheres and is placed upright.

    Each finger's squeeze sat on one of its four spheres (the others 6 to
    13 nm off the brick), and only that sphere had friction: the brick
    turned about the grasp axis, 15 degrees in the lift and 100 in the
    carry (20 mm and 100 degrees of slip in the grasp), and was placed on
    its side.  The finger's impulse is now shared by its touching spheres
    (formulations/qp.py, ``lagged_impulses``; test_tip_spheres.py).
    Measured: 0.024 degrees, 0.093 mm, as the box pads without the spheres.
    """
    summary = run.summary()
    assert summary['max_carry_tilt_deg'] < 0.5
    assert summary['grasp_slip_mm'] < 0.5 and summary['grasp_slip_deg'] < 0.5
    assert summary['final_tilt_deg'] < 0.5
    assert summary['place_error_m'] < 1e-3


def test_the_summary_slip_is_the_object_in_the_tcp_frame_while_held(run):
    summary = run.summary()
    labels = [r.waypoint for r in run.records]
    closed = max(k for k, label in enumerate(labels) if label == 'close')
    released = labels.index('open')
    first = run.records[closed].object_in_tcp
    shifts = [np.linalg.norm(r.object_in_tcp.translation() - first.translation())
              for r in run.records[closed:released]]
    assert summary['grasp_slip_mm'] == pytest.approx(1e3 * max(shifts), rel=1e-12)
    # the brick turned with respect to the fingers as much as it tilted in the world: the
    # TCP stays pointing down
    assert summary['grasp_slip_deg'] == pytest.approx(summary['max_carry_tilt_deg'], abs=1.0)


def test_the_demo_command_prints_the_carry(tmp_path, capsys):
    out = tmp_path / 'wsg.json'
    assert cli.main(['demo', '--scenario', str(SCENE), '--no-meshcat', '--json', str(out)]) == 0
    printed = capsys.readouterr().out
    summary = json.loads(out.read_text())
    assert (f"Held: largest tilt {summary['max_carry_tilt_deg']:.2f} deg (lift to place); "
            f"slip in the grasp {summary['grasp_slip_mm']:.2f} mm") in printed
    assert "fingers' lowest point 5.0 mm above the table" in printed
    assert 'grasped as low as the fingers allow, 5.0 mm above the table' in printed


def test_the_default_demo_grasp_is_still_the_palms():
    """The demo's own WSG-like fingers reach 9 cm; the cylinder is 14 cm tall."""
    engine = QuasistaticSimulator(Scenario.from_yaml(Path(REPO_ROOT) / 'config' /
                                                     'arm_pick_place.yaml'))
    grasp = plan_task(engine, PickPlaceTask()).grasp
    assert grasp.limited_by == 'palm'
    assert grasp.palm_above_top == pytest.approx(PickPlaceTask().palm_clearance, abs=1e-9)
    assert grasp.fingers_above_support == pytest.approx(0.14 + 0.025 - 0.09, abs=1e-9)


# ----- the TCP convention is checked at load ----------------------------------------------
@pytest.mark.parametrize('rotation, message', [
    ('rotation: !Rpy {deg: [0, 0, 0]}',
     r"task.tcp_frame: frame 'wsg::tcp': the fingers point along its \+y axis, not along its "
     r"z axis\. .* Fix: rotate the frame -90 degrees about its own x axis \(for a frame added "
     r"by add_frame: compose its X_PF rotation with !Rpy \{deg: \[-90, 0, 0\]\}\)"),
    ('rotation: !Rpy {deg: [90, 0, 0]}',
     r"task.tcp_frame: frame 'wsg::tcp': its z axis points away from the fingers \(from the "
     r"fingertips back to the palm: up, when the gripper grasps from above\)\. .* Fix: rotate "
     r"the frame 180 degrees about its own x axis"),
    ('rotation: !Rpy {deg: [0, 90, 0]}',
     r"task.tcp_frame: frame 'wsg::tcp': the fingers point along its \+y axis, not along its "
     r"z axis, and the fingers close along its z axis\. .* Fix: rotate the frame -90 degrees "
     r"about its own x axis"),
])
def test_a_tcp_with_a_wrong_axis_is_refused(tmp_path, rotation, message):
    """A ScenarioError (and a PlanningError, as the task's other checks) before any IK."""
    scenario = scene_with_tcp_rotation(tmp_path, rotation)
    engine = QuasistaticSimulator(scenario)
    with pytest.raises(ScenarioError) as err:
        plan_pick_and_place(engine)
    assert isinstance(err.value, PlanningError)
    assert re.search(message, str(err.value)), str(err.value)
    assert str(err.value).startswith(f'{scenario.source}: task.tcp_frame: ')


def test_the_rotation_the_error_names_fixes_the_frame(tmp_path):
    """Composing the wrong frame's rotation with the one the error names gives the scene's."""
    wrong = RotationMatrix(RollPitchYaw(np.radians([90, 0, 0])))
    fix = RotationMatrix(RollPitchYaw(np.radians([180, 0, 0])))
    right = RotationMatrix(RollPitchYaw(np.radians([-90, 0, 0])))
    np.testing.assert_allclose(wrong.multiply(fix).col(2), right.col(2), atol=1e-12)
    scenario = scene_with_tcp_rotation(tmp_path, 'rotation: !Rpy {deg: [-90, 0, 0]}')
    assert plan_pick_and_place(QuasistaticSimulator(scenario))[2] == 'brick'


def test_tcp_axis_fix_turns_z_onto_the_fingers():
    """Each fix, applied to the frame, points its z axis where the fingers point."""
    for index in range(3):
        for sign in (1, -1):
            message = tcp_axis_fix((index, sign), closes_along_z=False)
            if (index, sign) == (2, 1):
                assert message is None
                continue
            rpy = re.search(r'!Rpy \{deg: \[(-?\d+), (-?\d+), (-?\d+)\]\}', message).groups()
            R = RotationMatrix(RollPitchYaw(np.radians([float(a) for a in rpy])))
            expected = np.zeros(3)
            expected[index] = sign
            np.testing.assert_allclose(R.col(2), expected, atol=1e-12)
    assert 'close along its z axis' in tcp_axis_fix((2, 1), closes_along_z=True)
    assert principal_axis(np.array([0.1, -0.9, 0.3])) == (1, -1)


def test_grasp_slip_is_the_largest_move_from_the_first_pose():
    first = RigidTransform(RollPitchYaw(0.1, 0.0, 0.0), [0.0, 0.0, 0.01])
    turned = RigidTransform(RollPitchYaw(0.1, 0.0, 0.0).ToRotationMatrix().multiply(
        RotationMatrix.MakeZRotation(np.radians(30))), [0.003, 0.004, 0.01])
    back = RigidTransform(RollPitchYaw(0.1, 0.0, 0.0), [0.0, 0.0, 0.012])
    shift, turn = grasp_slip([first, turned, back])
    assert shift == pytest.approx(0.005, abs=1e-15) and turn == pytest.approx(30.0, abs=1e-9)
    assert grasp_slip([]) == (0.0, 0.0)


# ----- the new errors ---------------------------------------------------------------------
def test_an_object_too_short_for_the_fingers_is_refused(scenario):
    engine = QuasistaticSimulator(scenario)
    task = PickPlaceTask.from_scenario(scenario, finger_clearance=0.05)
    with pytest.raises(ScenarioError, match=r"task.finger_clearance: object 'brick' is 50.0 mm "
                                            r"tall; with the fingers kept 50.0 mm above the "
                                            r"surface it rests on they would not reach its "
                                            r"sides. Fix: a smaller task.finger_clearance"):
        plan_pick_and_place(engine, task)


def test_finger_clearance_is_a_checked_task_key(scenario):
    with pytest.raises(ScenarioError, match=r'task.finger_clearance: must be >= 0'):
        PickPlaceTask.from_scenario(scenario, finger_clearance=-0.001)
    task = PickPlaceTask.from_scenario(scenario, finger_clearance=0.01)
    assert task.finger_clearance == 0.01
    grasp = plan_task(QuasistaticSimulator(scenario), task).grasp
    assert grasp.fingers_above_support == pytest.approx(0.01, abs=1e-9)
