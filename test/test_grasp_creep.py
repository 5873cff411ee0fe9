"""
A firm grasp holds its object: no creep across the fingers while the arm lifts and carries it.

The step's rows hold a sticking contact's relative velocity at zero to first
order only; the arm's joints swing its fingers along arcs, so without the
correction of ``quasistatic_drake/sticking.py`` the held object drifted
across the pads every step.  Measured on the arm demo before it (h = 0.1 s):
the cylinder slid 0.37 mm across the fingers during the 25 cm carry and
0.16 mm down them during the lift, and sat up to 0.15 mm into one pad (and
off the other) while the arm moved.  The goal is less than 0.1 mm.
"""

import os
from pathlib import Path
import sys

import numpy as np
import pytest

from conftest import REPO_ROOT
from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.apps.pick_and_place import plan_pick_and_place
from test_step_gradients import assert_close, central, scene, state

sys.path.insert(0, os.path.join(REPO_ROOT, 'benchmarks'))
import grasp_creep  # noqa: E402

CONFIG = Path(REPO_ROOT) / 'config'
CREEP_LIMIT = 1e-4          # [m] the object against the fingers over the lift and the carry


def held_motion(scenario):
    """Return drifts, largest turn, distance and results (``grasp_creep.held_motion``)."""
    return grasp_creep.held_motion(scenario)[:4]


def test_the_demo_cylinder_stays_put_in_the_fingers():
    """Check the demo's cylinder (0.4 kg, 10 N per finger) over its 15 cm lift and 25 cm carry."""
    scenario = Scenario.from_yaml(CONFIG / 'arm_pick_place.yaml')
    shifts, turn, distance, results = held_motion(scenario)
    assert distance > 0.35                                  # lifted and carried
    assert np.abs(shifts).max() < CREEP_LIMIT, np.abs(shifts).max(axis=0)
    assert turn < 1e-4                                      # [rad]
    assert sum(r.diagnostics.slip_correction is not None for r in results) > len(results) // 2


def test_a_light_brick_stays_put_in_the_fingers():
    """Check a 28 g foam brick squeezed with 10 N per finger (mu = 1): far inside its cone."""
    shifts, turn, distance, _ = held_motion(grasp_creep.brick_scenario())
    assert distance > 0.35
    assert np.abs(shifts).max() < CREEP_LIMIT, np.abs(shifts).max(axis=0)
    assert turn < 1e-4


def test_the_correction_moves_objects_only_and_keeps_the_step():
    """Check Delta: zero on the robots; v is the formulation's; q_next integrates v + Delta."""
    scenario = Scenario.from_yaml(CONFIG / 'arm_pick_place.yaml')
    sim = QuasistaticSimulator(scenario)
    plan, _, _ = plan_pick_and_place(sim)
    carry = plan.step_range('carry')
    k = (carry.start + carry.stop) // 2
    rollout = sim.rollout(sim.initial_state(), [plan.commands(j) for j in range(k)])
    q, q_ref = rollout.q[-1], rollout.q_ref[-1]
    result = sim.step(sim.initial_state(q, q_ref=q_ref), plan.commands(k))
    delta = result.diagnostics.slip_correction
    assert delta is not None and np.abs(delta).max() > 1e-6
    robot_v = sim.model.robots[0].v_idx
    np.testing.assert_array_equal(delta[robot_v], 0.0)
    np.testing.assert_array_equal(result.diagnostics.v, result.diagnostics.solution.v)
    sim.model.set_positions(q)
    v = result.diagnostics.v
    np.testing.assert_allclose(result.q_next, sim._integrate(q, v + delta), atol=1e-15)
    assert not np.allclose(result.q_next, sim._integrate(q, v), atol=1e-9)


@pytest.mark.parametrize('h', [0.05, 0.02])
def test_smaller_steps_stay_put_too(h):
    """Check the cylinder at h = 0.05 s and 0.02 s (before: 0.18 mm and 0.07 mm of creep)."""
    shifts, _, _, _ = held_motion(grasp_creep.cylinder_scenario(h))
    assert np.abs(shifts).max() < CREEP_LIMIT, np.abs(shifts).max(axis=0)


def test_command_gradients_of_a_carried_step_include_the_correction():
    """Check a carried step's command gradients (Delta differentiated too), central differences."""
    sim = QuasistaticSimulator(Scenario.from_yaml(CONFIG / 'arm_pick_place.yaml'))
    plan, _, _ = plan_pick_and_place(sim)
    carry = plan.step_range('carry')
    k = (carry.start + carry.stop) // 2
    s = sim.rollout(sim.initial_state(), [plan.commands(j) for j in range(k)]).final_state
    v_cmd = plan.commands(k)['iiwa']
    result = sim.step(s, {'iiwa': v_cmd}, gradients='commands')
    assert result.diagnostics.slip_correction is not None and not result.gradients.degenerate
    gradients = result.gradients
    for which, analytic in (('v_cmd', gradients.dq_next_dv_cmd),
                            ('q_ref', gradients.dq_next_dq_ref)):
        assert_close(analytic, central(sim, 'iiwa', s, v_cmd, which))


def test_all_gradients_of_a_turning_push_include_the_correction():
    """Check a finger pushing a box off-centre: it sticks while the box turns, Delta is active."""
    sim = scene('finger_push.yaml')
    command = np.array([0.1, 0.02, 0.0])
    s = state(sim, 'finger', [command] * 5)
    result = sim.step(s, {'finger': command}, gradients=True)
    slip = result.diagnostics.slip_correction
    assert slip is not None and np.abs(slip).max() > 1e-5
    assert not result.gradients.degenerate
    gradients = result.gradients
    for which, analytic in (('q', gradients.dq_next_dq), ('v_cmd', gradients.dq_next_dv_cmd),
                            ('q_ref', gradients.dq_next_dq_ref)):
        assert_close(analytic, central(sim, 'finger', s, command, which))
