"""
Robots with inertia (the scenario's ``robot_inertia``): an impedance-controlled arm's lag.

MultibodyPlant's arm under tau = K (q_ref - q) + D (v_ref - v) trails its
reference where the reference accelerates, through its mass matrix, and
follows it exactly at constant speed.  The step QP then adds M_a and h D to
the robots' Hessian (``formulations/qp.py``).  The oracle is the continuous
critically damped joint: a reference that starts moving at speed v from rest
gives the error e(t) = q_ref - q = v t exp(-omega t), omega = sqrt(K / m),
largest v / (e omega) at t = 1 / omega.
"""

from pathlib import Path

import numpy as np
import pytest

from conftest import REPO_ROOT
from pydrake.systems.analysis import Simulator
from pydrake.systems.framework import DiagramBuilder
from quasistatic_drake import QuasistaticPlant, QuasistaticSimulator, Scenario
from quasistatic_drake.errors import CommandError
from quasistatic_drake.scenario import ScenarioError

CONFIG = Path(REPO_ROOT) / 'config'
FINGER = 'package://quasistatic_drake/urdf/finger.urdf'
MASS_X = 0.3            # [kg] the finger's x joint moves its three 0.1 kg links
OMEGA = 10.0            # [rad/s] sqrt(K / m) of the x joint
SPEED = 0.1             # [m/s]


def finger_alone(h: float, inertia: bool = True, **robot) -> QuasistaticSimulator:
    """Return the finger of finger.urdf alone in space, K_x = m omega^2."""
    k = MASS_X * OMEGA ** 2
    return QuasistaticSimulator(Scenario.from_dict({
        'time_step': h, 'robot_inertia': inertia,
        'robots': [{'name': 'finger', 'file': FINGER, 'stiffness': [k, 1000.0, 1000.0],
                    'initial_positions': [0.0, 0.0, 0.5], **robot}]},
        base_dir=CONFIG, source='finger alone'))


def lag_after_start(sim: QuasistaticSimulator, duration: float) -> tuple[np.ndarray, np.ndarray]:
    """Return the times and the x joint's lag q_ref - q under a reference moving at SPEED."""
    steps = round(duration / sim.h)
    run = sim.rollout(sim.initial_state(), [{'finger': [SPEED, 0.0, 0.0]}] * steps)
    assert run.failed_steps == 0
    return sim.h * np.arange(steps + 1), run.q_ref[:, 0] - run.q[:, 0]


def test_the_lag_follows_the_critically_damped_joint():
    """Check e(t) = v t exp(-omega t) at h = 1 ms (implicit Euler: O(h omega) = 1 %)."""
    t, lag = lag_after_start(finger_alone(1e-3), 0.4)
    expected = SPEED * t * np.exp(-OMEGA * t)
    assert lag.max() == pytest.approx(SPEED / (np.e * OMEGA), rel=0.02)
    assert t[lag.argmax()] == pytest.approx(1.0 / OMEGA, rel=0.03)
    np.testing.assert_allclose(lag, expected, atol=0.02 * expected.max())


def test_at_constant_speed_the_lag_dies_out_and_without_inertia_there_is_none():
    """Check the lag after 10 time constants (h = 0.02 s), and robot_inertia: false."""
    _, lag = lag_after_start(finger_alone(0.02), 1.0)
    assert lag.max() > 2e-3 and abs(lag[-1]) < 1e-5
    _, none = lag_after_start(finger_alone(0.02, inertia=False), 1.0)
    assert np.abs(none).max() < 1e-12


def test_the_damping_ratio_sets_the_overshoot():
    """Check zeta = 0.2: the joint overshoots by exp(-pi zeta / sqrt(1 - zeta^2)) of its lag."""
    zeta = 0.2
    _, lag = lag_after_start(finger_alone(1e-3, damping_ratio=zeta), 1.0)
    # e(t) = v / omega_d exp(-zeta omega t) sin(omega_d t): the first trough over the peak
    ratio = -lag.min() / lag.max()
    assert ratio == pytest.approx(np.exp(-np.pi * zeta / np.sqrt(1 - zeta ** 2)), rel=0.05)


def test_the_plant_carries_the_robot_velocity_in_its_context():
    """Check QuasistaticPlant: the same trajectory as rollout; set_positions zeroes v_a."""
    sim = finger_alone(0.01)
    builder = DiagramBuilder()
    plant = builder.AddSystem(QuasistaticPlant(sim))
    diagram = builder.Build()
    simulator = Simulator(diagram)
    context = plant.GetMyContextFromRoot(simulator.get_mutable_context())
    plant.get_velocity_command_input_port('finger').FixValue(context, [SPEED, 0.0, 0.0])
    simulator.AdvanceTo(0.1 + 1e-9)          # 11 updates: t = 0, 0.01, ..., 0.1
    run = sim.rollout(sim.initial_state(), [{'finger': [SPEED, 0.0, 0.0]}] * 11)
    np.testing.assert_allclose(plant.get_positions(context), run.q[-1], atol=1e-12)
    np.testing.assert_allclose(plant.get_robot_velocities(context), run.robot_velocity[-1],
                               atol=1e-12)
    assert plant.get_robot_velocities(context)[0] > 0.5 * SPEED
    plant.set_positions(context, sim.default_positions())
    assert not plant.get_robot_velocities(context).any()


def test_a_rollout_resumes_from_the_velocity_it_was_given():
    """Check step(robot_velocity=...): two half rollouts chained equal the whole one."""
    sim = finger_alone(0.01)
    commands = [{'finger': [SPEED, 0.0, 0.0]}] * 20
    whole = sim.rollout(sim.initial_state(), commands)
    first = sim.rollout(sim.initial_state(), commands[:10])
    second = sim.rollout(first.final_state, commands[10:])
    np.testing.assert_allclose(second.q[-1], whole.q[-1], atol=1e-12)


def test_bad_uses_are_refused_with_the_fix():
    """Check: a velocity without robot_inertia, a wrong length, gradients, miqp, damping."""
    plain = finger_alone(0.01, inertia=False)
    with pytest.raises(CommandError, match='robot_inertia: true'):
        plain.step(plain.initial_state(plain.default_positions(), robot_velocity=np.zeros(3)), {})
    sim = finger_alone(0.01)
    with pytest.raises(CommandError, match='robot_velocity'):
        sim.step(sim.initial_state(sim.default_positions(), robot_velocity=np.zeros(2)), {})
    with pytest.raises(CommandError, match='gradients=False'):
        sim.step(sim.initial_state(), {}, gradients=True)
    with pytest.raises(ScenarioError, match=r'robots\[0\]\.damping_ratio.*robot_inertia: true'):
        finger_alone(0.01, inertia=False, damping_ratio=0.5)
    with pytest.raises(ScenarioError, match='formulation: qp'):
        QuasistaticSimulator(Scenario.from_dict({
            'include': 'finger_push.yaml', 'robot_inertia': True, 'formulation': 'miqp'},
            base_dir=CONFIG, source='miqp with inertia'))
