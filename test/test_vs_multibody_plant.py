"""
Tests of benchmarks/vs_multibody_plant.py: its pure math, its input checks, and a smoke run.

The smoke run takes a few steps of every simulator of the benchmark on the
push scene (config/bench_pad_push.yaml) and checks that MultibodyPlant's
impedance-controlled robot tracks a joint reference in free space.
"""

import argparse
from dataclasses import replace
import math
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                'benchmarks'))

from mbp_reference import MbpSettings, run_mbp  # noqa: E402
from trajectory_metrics import (JointReference, PoseTrajectory, RunPoint,  # noqa: E402
                                integral_error, pareto_front, resample, rotation_angle,
                                speedup_at_equal_error, steps_for, tilt_angle, yaw_angle)
import vs_multibody_plant as bench  # noqa: E402

IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])


def _still(t, xyz, quat=IDENTITY):
    t = np.asarray(t, float)
    return PoseTrajectory(t, np.tile(xyz, (len(t), 1)), np.tile(quat, (len(t), 1)))


def _yaw_quat(angle):
    return np.array([math.cos(angle / 2), 0.0, 0.0, math.sin(angle / 2)])


# ----- pure math ------------------------------------------------------------------------------
def test_integral_error_of_identical_trajectories_is_zero():
    t = np.linspace(0.0, 2.0, 41)
    xyz = np.column_stack([np.sin(t), t ** 2, np.cos(t)])
    quat = np.array([_yaw_quat(0.3 * s) for s in t])
    traj = PoseTrajectory(t, xyz, quat)
    assert integral_error(traj, traj, 2.0) == pytest.approx(0.0, abs=1e-12)


def test_integral_error_of_shifted_and_turned_trajectories_is_known():
    # 2 cm off and 0.1 rad turned for 3 s: (0.02 + 0.1) * 3 = 0.36 (m + rad) s, whatever
    # the sampling of either trajectory.
    truth = _still(np.linspace(0.0, 3.0, 301), [0.1, 0.2, 0.3])
    shifted = _still([0.0, 0.7, 3.0], [0.1, 0.22, 0.3], _yaw_quat(0.1))
    assert integral_error(shifted, truth, 3.0) == pytest.approx(0.36, rel=1e-9)
    # a ramp error 0 -> 0.1 m over 2 s integrates to 0.1 (triangle)
    ramp = PoseTrajectory(np.array([0.0, 2.0]), np.array([[0.0, 0, 0], [0.1, 0, 0]]),
                          np.tile(IDENTITY, (2, 1)))
    assert integral_error(ramp, _still([0.0, 2.0], [0.0, 0, 0]), 2.0) == pytest.approx(0.1)


def test_resample_interpolates_and_holds_the_ends():
    traj = PoseTrajectory(np.array([0.0, 1.0]), np.array([[0.0, 0, 0], [1.0, 2.0, 0]]),
                          np.array([IDENTITY, -_yaw_quat(0.2)]))      # sign flipped on purpose
    out = resample(traj, np.array([-1.0, 0.5, 2.0]))
    np.testing.assert_allclose(out.xyz, [[0, 0, 0], [0.5, 1.0, 0], [1.0, 2.0, 0]])
    angles = rotation_angle(out.quat, np.tile(IDENTITY, (3, 1)))
    np.testing.assert_allclose(angles, [0.0, 0.1, 0.2], atol=1e-3)
    assert abs(yaw_angle(out.quat[1:2])[0]) == pytest.approx(0.1, abs=1e-3)
    assert tilt_angle(out.quat) == pytest.approx(0.0, abs=1e-7)


def test_pose_trajectory_rejects_bad_shapes_and_times():
    with pytest.raises(ValueError, match='expected'):
        PoseTrajectory(np.zeros(2), np.zeros((3, 3)), np.zeros((2, 4)))
    with pytest.raises(ValueError, match='increase'):
        PoseTrajectory(np.array([0.0, 0.0]), np.zeros((2, 3)), np.tile(IDENTITY, (2, 1)))


def test_joint_reference_step_velocity_averages_the_commands():
    ref = JointReference.from_velocities(np.array([1.0, 0.0]), np.array([[1.0, 0.0],
                                                                         [3.0, -1.0]]), 0.1)
    np.testing.assert_allclose(ref.q[-1], [1.4, -0.1])
    np.testing.assert_allclose(ref.step_velocity(0.0, 0.2), [2.0, -0.5])   # over both
    np.testing.assert_allclose(ref.step_velocity(0.05, 0.1), [2.0, -0.5])  # half of each
    np.testing.assert_allclose(ref.step_velocity(0.2, 0.1), [0.0, 0.0])    # held after
    np.testing.assert_allclose(ref.step_velocities(0.05, 5),
                               [[1, 0], [1, 0], [3, -1], [3, -1], [0, 0]])
    assert steps_for(0.3, 0.1) == 3 and steps_for(0.31, 0.1) == 4


def test_speedup_picks_the_smallest_mbp_error_the_qp_matches():
    mbp = [RunPoint('mbp 1e-4', 0.001, 10.0), RunPoint('mbp 1e-3', 0.01, 1.0),
           RunPoint('mbp 5e-3', 0.05, 0.2), RunPoint('mbp blew up', math.nan, 0.1)]
    qp = [RunPoint('qp 0.01', 0.008, 0.05), RunPoint('qp 0.1', 0.02, 0.005)]
    result = speedup_at_equal_error(mbp, qp)
    assert result.mbp.label == 'mbp 1e-3' and result.qp.label == 'qp 0.01'
    assert result.value == pytest.approx(1.0 / 0.05)
    # the fastest QP run at or below the chosen MBP error wins
    result = speedup_at_equal_error(mbp[1:], qp + [RunPoint('qp 0.05', 0.009, 0.01)])
    assert result.qp.label == 'qp 0.05' and result.value == pytest.approx(100.0)
    none = speedup_at_equal_error(mbp[:1], qp)
    assert none.value is None and 'below the best QP error' in none.reason


def test_pareto_front_keeps_only_undominated_points():
    points = [RunPoint('a', 1.0, 0.01), RunPoint('b', 2.0, 0.1), RunPoint('c', 0.5, 1.0),
              RunPoint('d', 0.1, 5.0), RunPoint('e', math.inf, 0.001)]
    assert [p.label for p in pareto_front(points)] == ['a', 'c', 'd']


def test_bad_command_line_input_is_a_clear_error():
    with pytest.raises(argparse.ArgumentTypeError, match='Known scenes'):
        bench.parse_scenes('pick_place,nope')
    with pytest.raises(argparse.ArgumentTypeError, match='--qs-h.*Fix'):
        bench.parse_steps('0.1,abc', '--qs-h')
    with pytest.raises(argparse.ArgumentTypeError, match='> 0'):
        bench.parse_steps('0.1,-1', '--mbp-h')
    with pytest.raises(SystemExit):
        bench.parser().parse_args(['--scenes', 'nope'])


# ----- smoke runs with real Drake -------------------------------------------------------------
@pytest.fixture(scope='module')
def push():
    """Return the push scene cut to its first 0.2 s (the pad holds still) plus 0.5 s settling."""
    scene = bench.push_scene()
    ref = scene.reference
    keep = ref.t <= 0.2 + 1e-9
    return replace(scene, reference=JointReference(ref.t[keep], ref.q[keep]))


@pytest.mark.parametrize('approximation', ['sap', 'tamsi'])
def test_impedance_controlled_robot_tracks_a_reference_in_free_space(push, approximation):
    # the left pad backs away from the box and the carriage rises: free space
    q0 = push.reference.q[0]
    ref = JointReference(np.array([0.0, 0.3, 0.5]),
                         np.array([q0, q0 + [0.05, -0.05, 0.0], q0 + [0.05, -0.05, 0.0]]))
    run = run_mbp(push.scenario, 'pads', 'box', ref, 0.6, MbpSettings(1e-3, approximation))
    assert run.status == 'ok'
    wanted = np.array([ref.at(t) for t in run.robot_t])
    error = np.abs(run.robot_q - wanted)
    assert np.max(error) < 5e-3                     # while moving at up to 0.25 m/s
    assert np.max(error[run.robot_t >= 0.55]) < 2e-4  # settled on the reference
    assert np.all(run.damping > 0.0)
    np.testing.assert_allclose(run.stiffness, [1000, 1000, 1000])


def test_a_few_steps_of_every_simulator_on_the_push_scene(push):
    truth_row, truth = bench.run_multibody(push, MbpSettings(2e-3), timeout=120.0)
    assert truth_row.status == 'ok', truth_row.status
    assert np.max(np.abs(truth.xyz - truth.xyz[0])) < 2e-3     # the box rests on the table
    rows = [bench.run_quasistatic(push, kind, 0.1) for kind in bench.QS_KINDS]
    rows.append(bench.run_multibody(push, MbpSettings(5e-3, 'tamsi'), timeout=120.0))
    for row, traj in rows:
        bench.evaluate(row, traj, push, truth)
        assert row.status == 'ok', (row.simulator, row.status)
        assert row.steps > 0 and row.wall_per_sim_s > 0.0
        # at rest, everyone agrees with the reference run to within 2 mm + 2 mrad
        assert 0.0 <= row.integral_error < 4e-3 * push.horizon, row
    summary = bench.scene_summary([row for row, _ in rows])
    assert summary['qs_real_time_factor_h0.1'] > 0.0
    assert summary['speedup_at_equal_error'] is None or summary['speedup_at_equal_error'] > 0.0


@pytest.mark.parametrize('kind', ['qs-qp-static', 'qs-qp-dynamic'])
def test_the_quasistatic_pick_and_place_succeeds_with_its_state_carried(kind):
    """
    The benchmark steps with the state it is handed back (the warm start bounds the friction).

    It once built a fresh state from q each step: the grasp's friction bound
    was lost every step, and the QP runs lifted the cylinder 0.0 cm.
    """
    scene = bench.pick_place_scene()
    row, traj = bench.run_quasistatic(scene, kind, 0.1)
    assert row.status == 'ok' and row.failed_steps == 0, row.status
    success, detail = scene.success(traj)
    assert success, detail
