"""
Deep penetration under the MIQP (issue 33, item 5): a finger 16.6 mm inside the held cylinder.

The standing fuzz of ``config/arm_pick_place_miqp.yaml`` (h = 0.01 s) once
injected the left finger 16.6 mm into the cylinder it held; under Gurobi every
MIQP from there was infeasible as posed and its recovery solves (fractions of
the penetration) ran into the 2 s time limit, so the steps failed and kept q;
keeping the best solution at the limit worked it off in one run and stalled
in another (docs/robustness.md).  Under the default backend, daqp, each
recovery solve is settled by a candidate mode (no search cut by time), so
the recovery is the same on every run: the step loop's bisection works off
the largest fraction the fingers' velocity limit (0.21 m/s, 2.1 mm a step
each) allows.
"""

import numpy as np
import pytest

from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.apps.pick_and_place import PickPlaceTask, plan_pick_and_place
from quasistatic_drake.paths import package_share_dir

DEPTH = 16.6e-3          # [m] the fuzz's injection
STEPS = 5                # the bound
WORKED_OFF = -1e-5       # [m] what is left after STEPS steps, at most (measured: 1e-6)
FINGERS = {'left': 7, 'right': 8}    # wsg_left_finger_joint, wsg_right_finger_joint in q


@pytest.fixture(scope='module')
def held():
    """Return (sim, task, plan, k, state): the pick task run until the cylinder is 2 cm up."""
    scenario = Scenario.from_yaml(package_share_dir() / 'config' / 'arm_pick_place_miqp.yaml')
    sim = QuasistaticSimulator(scenario)
    assert sim.scenario.settings().backend == 'daqp', 'the default backend'
    task = PickPlaceTask()
    plan, _, name = plan_pick_and_place(sim, task)
    state = sim.initial_state()
    z0 = sim.object_pose(state.q, name).translation()[2]
    for k in range(plan.steps):
        result = sim.step(state, {task.robot: plan.velocities[k]})
        assert result.success, (k, result.status)
        state = result.state_next
        if sim.object_pose(state.q, name).translation()[2] - z0 > 0.02:
            return sim, task, plan, k + 1, state, name, z0
    raise AssertionError('the cylinder was never lifted 2 cm')


def recover(sim, task, plan, k, state):
    """Return the states and results of STEPS steps of the plan from ``state``."""
    phis, results = [], []
    for j in range(k, k + STEPS):
        result = sim.step(state, {task.robot: plan.velocities[j]})
        results.append(result)
        state = result.state_next
        phis.append(sim.min_signed_distance(state.q))
    return np.array(phis), results, state


@pytest.mark.parametrize('finger', sorted(FINGERS))
def test_a_finger_injected_16_6_mm_into_the_held_cylinder_is_worked_off_in_5_steps(held, finger):
    sim, task, plan, k, state, name, z0 = held
    q = state.q.copy()
    q[FINGERS[finger]] -= DEPTH
    injected = sim.initial_state(q, q_ref=state.q_ref, warm_start=state.warm_start)
    assert sim.min_signed_distance(q) == pytest.approx(-DEPTH, abs=1e-5)
    backend = sim.formulation.backend
    backend.stats.clear()
    phis, results, end = recover(sim, task, plan, k, injected)
    assert all(r.success for r in results), [r.status for r in results]
    assert np.all(np.diff(np.concatenate([[-DEPTH], phis])) > 0.0), phis   # out every step
    assert phis[-1] >= WORKED_OFF, f'after {STEPS} steps: {phis * 1e3} mm'
    assert sim.object_pose(end.q, name).translation()[2] - z0 > 0.015, 'still held'
    # settled without DAQP's whole-tree search, the one part cut by time
    assert backend.stats['search'] == 0, dict(backend.stats)
    # the same on every run
    again, _, end_again = recover(sim, task, plan, k, injected)
    np.testing.assert_array_equal(again, phis)
    np.testing.assert_array_equal(end_again.q, end.q)
