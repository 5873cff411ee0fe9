"""
The explicit state (issue 30, item 3): the simplest loop a user writes is the right one.

``result = sim.step(state, v_cmd)``, then ``state = result.state_next``.  The
state carries the robots' spring reference, so the preload that squeezes a
grasp or pushes a box survives from step to step.  Before, the loop every
user wrote first, ``q = sim.step(q, v_cmd).q_next``, dropped the reference
each step: a finger (K = 1000 N/m, h = 0.05 s) pushed a 1 kg box 3.6 mm
instead of 19 cm over 40 steps, and two pads lifted a box 1.1 cm of the 5 cm
commanded.
"""

from dataclasses import replace
import os

import numpy as np
import pytest

from conftest import REPO_ROOT
from quasistatic_drake import CommandError, QuasistaticSimulator, Scenario, State

CONFIG = os.path.join(REPO_ROOT, 'config')


def finger_push(h: float = 0.05) -> QuasistaticSimulator:
    return QuasistaticSimulator(Scenario.from_dict(
        {'include': 'finger_push.yaml', 'time_step': h}, base_dir=CONFIG, source='push'))


def simplest_loop(sim, robot, command, steps):
    """Return the states of the loop a user writes first."""
    state, states = sim.initial_state(), []
    for _ in range(steps):
        result = sim.step(state, {robot: command})
        assert result.success, result.status
        state = result.state_next
        states.append(state)
    return states


def test_the_simplest_loop_pushes_the_box_as_the_rollout_does():
    """Check the finger push: 19 cm in 40 steps, bit for bit the rollout's."""
    sim = finger_push()
    command = [0.1, 0.0, 0.0]
    states = simplest_loop(sim, 'finger', command, 40)
    rollout = sim.rollout(sim.initial_state(), [{'finger': command}] * 40)
    np.testing.assert_array_equal(np.array([s.q for s in states]), rollout.q[1:])
    np.testing.assert_array_equal(rollout.final_state.q_ref, states[-1].q_ref)
    start = sim.object_pose(sim.default_positions(), 'box').translation()
    moved = sim.object_pose(states[-1].q, 'box').translation() - start
    # the finger's 20 cm, less the 1 cm gap before its sphere (r = 2 cm, at x = -0.08)
    # touches the box's face (x = -0.05), less the spring's lag behind its reference
    # while it pushes against the table's friction, mu m g / K = 0.5 * 9.81 / 1000
    assert moved[0] == pytest.approx(0.2 - 0.01 - 0.5 * 9.81 / 1000, abs=1e-4)


def test_dropping_the_reference_is_what_loses_the_push():
    """Check the trap the state removes: restarting from q alone every step barely pushes."""
    sim = finger_push()
    q = sim.default_positions()
    for _ in range(40):
        q = sim.step(sim.initial_state(q), {'finger': [0.1, 0.0, 0.0]}).q_next
    start = sim.object_pose(sim.default_positions(), 'box').translation()
    assert sim.object_pose(q, 'box').translation()[0] - start[0] < 0.01


def test_the_simplest_loop_lifts_the_squeezed_box_as_commanded():
    """
    Check the two pads: close 3 cm (a 2 cm squeeze), lift 5 cm: the box rises with them.

    The lift joint's spring (K = 1000 N/m) carries the 1 kg box's weight, so the
    pads trail their reference by m g / K = 9.81 mm: the box rises 5 cm less that.
    """
    sim = QuasistaticSimulator(Scenario.from_yaml(os.path.join(CONFIG, 'two_pads_lift.yaml')))
    state = simplest_loop(sim, 'pads', [0.0, 0.1, -0.1], 3)[-1]
    z0 = sim.object_pose(state.q, 'box').translation()[2]
    for _ in range(5):
        state = sim.step(state, {'pads': [0.1, 0.0, 0.0]}).state_next
    rise = sim.object_pose(state.q, 'box').translation()[2] - z0
    assert rise == pytest.approx(0.05 - 9.81 / 1000, abs=1e-4)


def test_a_state_is_immutable_and_checked():
    """Check State: read-only arrays; initial_state and step refuse bad parts, naming them."""
    sim = finger_push()
    state = sim.initial_state()
    with pytest.raises(ValueError):
        state.q[0] = 1.0
    np.testing.assert_array_equal(state.q_ref, sim.robot_positions(state.q, 'finger'))
    assert state.robot_velocity is None
    # the QP's warm start: the scene's contacts at rest (the box's four corners and the
    # finger 1 cm off its face), whose normal impulses bound the first step's friction
    assert state.warm_start.size == 5
    np.testing.assert_allclose(sorted(state.warm_start.normal_impulse)[-4:], [9.81 * 0.05 / 4] * 4)
    with pytest.raises(CommandError, match='q_ref has 2 entries'):
        sim.step(State(q=state.q, q_ref=[0.0, 0.0]), {})
    with pytest.raises(CommandError, match='robot_velocity: only a scenario with robot_inertia'):
        sim.initial_state(robot_velocity=[0.0, 0.0, 0.0])
    with pytest.raises(CommandError, match="formulation 'qp' takes the ContactMemory"):
        sim.step(state.with_warm_start(3), {})
    result = sim.step(state, {'finger': [0.1, 0.0, 0.0]})
    assert result.success and result.state_next is not state     # nothing was changed


def fast_lift(sim, carried: bool) -> list:
    """Return the states of two pads squeezing the box, then lifting it at 0.5 m/s."""
    state, states = simplest_loop(sim, 'pads', [0.0, 0.1, -0.1], 3)[-1], []
    for _ in range(6):
        if not carried:                       # the warm start as one built by hand
            state = state.with_warm_start(replace(state.warm_start, sweep=None))
        result = sim.step(state, {'pads': [0.5, 0.0, 0.0]})
        assert result.success, result.status
        state = result.state_next
        states.append(state)
    return states


def test_the_warm_start_carries_how_far_the_step_moved_any_point():
    """
    The next step's linearisation is shortened by the sweep the step hands on.

    The sweep is max_B h (|v_B| + R_B |w_B|) of v' (B the moving bodies, R_B
    their geometry's radius about their origin), here checked against Drake's
    own body velocities.  The box is lifted straight up, so where v' was
    solved does not change it: a warm start without it (measured again at q)
    gives the same steps bit for bit, and the lift is fast enough that the
    half-step is shortened (h |v| / 2 beyond the detection tolerance).
    """
    sim = QuasistaticSimulator(Scenario.from_yaml(os.path.join(CONFIG, 'two_pads_lift.yaml')))
    plant, context = sim.model.plant, sim.model.plant.CreateDefaultContext()
    carried = fast_lift(sim, carried=True)
    for state in carried:
        memory = state.warm_start
        plant.SetPositions(context, state.q)
        plant.SetVelocities(context, memory.velocity)
        h = sim.h
        velocities = [body.EvalSpatialVelocityInWorld(context)
                      for body, _ in sim.model.moving_bodies]
        sweep = max(h * (np.linalg.norm(V.translational()) + R * np.linalg.norm(V.rotational()))
                    for V, R in zip(velocities, sim.model.moving_radii))
        assert memory.sweep == pytest.approx(sweep, rel=1e-9, abs=1e-15)
    assert max(0.5 * state.warm_start.sweep for state in carried) > \
        sim.scenario.contact_detection_tolerance
    for with_sweep, measured in zip(carried, fast_lift(sim, carried=False)):
        np.testing.assert_array_equal(with_sweep.q, measured.q)
