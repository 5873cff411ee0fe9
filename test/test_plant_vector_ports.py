"""
Drake-shaped ports (issue 32, item 6): what a Drake user tries first works.

Before: ``LogVectorOutput(plant.get_object_pose_output_port("box"), builder)``
failed ("cannot mix vector-valued and abstract-valued ports"), there was no
vector state port, and ``print()`` of a step outcome printed 121 KB.
"""

import numpy as np
from pydrake.systems.analysis import Simulator
from pydrake.systems.framework import DiagramBuilder
from pydrake.systems.primitives import ConstantVectorSource, LogVectorOutput

from conftest import REPO_ROOT
from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.quasistatic_plant import QuasistaticPlant

TWO_PADS = f'{REPO_ROOT}/config/two_pads_lift.yaml'


def logged_run(steps=6):
    """Close the pads and lift for `steps` steps, logging the state and the box's pose."""
    builder = DiagramBuilder()
    plant = builder.AddSystem(QuasistaticPlant(QuasistaticSimulator(
        Scenario.from_yaml(TWO_PADS))))
    command = builder.AddSystem(ConstantVectorSource([0.05, 0.1, -0.1]))
    builder.Connect(command.get_output_port(), plant.get_velocity_command_input_port('pads'))
    pose_log = LogVectorOutput(plant.get_object_pose_vector_output_port('box'), builder)
    state_log = LogVectorOutput(plant.get_state_output_port(), builder)
    diagram = builder.Build()
    simulator = Simulator(diagram)
    simulator.AdvanceTo(steps * plant.time_step)
    root = simulator.get_context()
    return plant, plant.GetMyContextFromRoot(root), pose_log.FindLog(root), \
        state_log.FindLog(root)


def test_loggers_record_the_pose_and_the_state_vectors():
    plant, context, pose_log, state_log = logged_run()
    pose = plant.get_object_pose_output_port('box').Eval(context)
    np.testing.assert_allclose(pose_log.data()[:3, -1], pose.translation(), atol=1e-15)
    np.testing.assert_allclose(pose_log.data()[3:, -1],
                               pose.rotation().ToQuaternion().wxyz(), atol=1e-15)
    q, q_ref = plant.get_positions(context), plant.get_reference(context)
    np.testing.assert_array_equal(state_log.data()[:, -1], np.concatenate([q, q_ref]))
    assert state_log.data().shape[0] == len(q) + 3
    assert pose_log.data().shape == (7, state_log.data().shape[1])


def test_a_step_outcome_prints_on_one_short_line():
    plant, context, _, _ = logged_run(3)
    outcome = plant.get_step_status_output_port().Eval(context)
    text = repr(outcome)
    assert '\n' not in text and len(text) < 300, text
    assert text.startswith("StepOutcome(status='optimal', time=0.2 s, steps=3, ")  # at t_2
    assert f'contacts={len(outcome.contacts)}' in text and str(outcome) == text
