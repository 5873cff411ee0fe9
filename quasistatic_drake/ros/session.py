"""
The node's simulation: a Diagram of QuasistaticPlant (and Meshcat) in a Simulator.

:class:`SimSession` owns the Diagram and the pydrake ``Simulator`` and
advances them one step h at a time: it fixes every robot's velocity command
port to the given command, then ``AdvanceTo((k + 1) h)``
(QuasistaticPlant's timing: the update at t_k = k h reads the command and
yields q_{k+1}).  A failed solve leaves q as it was (the plant's rule).  An
exception in the step, of any type but KeyboardInterrupt (pydrake raises
Drake's internal failures as SystemExit), puts back the time and the whole
state of before the step (q, q_ref, the MIP start and the last StepOutcome) and is
re-raised; the next call then takes exactly one step h from there.
:meth:`SimSession.reset` starts over at t = 0 from the scenario's initial
configuration.  No rclpy here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
from pydrake.geometry import Meshcat, MeshcatVisualizer, MeshcatVisualizerParams
from pydrake.math import RigidTransform
from pydrake.systems.analysis import Simulator
from pydrake.systems.framework import DiagramBuilder

from quasistatic_drake.contact_visualizer import (ContactForceVisualizer,
                                                  ContactForceVisualizerParams)
from quasistatic_drake.quasistatic_plant import QuasistaticPlant, StepOutcome
from quasistatic_drake.ros.frames import joint_layout, JointLayout
from quasistatic_drake.scenario import Scenario


@dataclass(frozen=True)
class JointSample:
    """The robots' joint positions and velocities at sim time ``time``."""

    time: float
    positions: np.ndarray
    velocities: np.ndarray


class SimSession:
    """A QuasistaticPlant Diagram and its Simulator, stepped on demand."""

    def __init__(self, scenario: Scenario, meshcat: Optional[Meshcat] = None):
        """Build the Diagram; with ``meshcat``, draw the scene and the contact forces in it."""
        builder = DiagramBuilder()
        self.plant = builder.AddSystem(QuasistaticPlant(scenario))
        self.plant.set_name("quasistatic_plant")
        self.meshcat = meshcat
        if meshcat is not None:
            MeshcatVisualizer.AddToBuilder(
                builder, self.plant.get_query_object_output_port(), meshcat,
                MeshcatVisualizerParams(publish_period=scenario.time_step))
            ContactForceVisualizer.AddToBuilder(
                builder, self.plant.get_contact_results_output_port(), meshcat,
                ContactForceVisualizerParams(publish_period=scenario.time_step))
        self.diagram = builder.Build()
        self.simulator = Simulator(self.diagram)
        self.context = self.simulator.get_mutable_context()
        self.plant_context = self.plant.GetMyMutableContextFromRoot(self.context)
        self.time_step = scenario.time_step
        self.joints: JointLayout = joint_layout(self.plant.engine.model)
        self._q0 = self.plant.engine.default_positions()
        self.steps = 0
        self._backup = self.diagram.AllocateContext()    # the state before the current step
        self.reset()

    @property
    def model(self):
        """Return the scenario's QuasistaticModel (plant, robots, objects)."""
        return self.plant.engine.model

    @property
    def time(self) -> float:
        """Return the simulated time [s]."""
        return self.context.get_time()

    def step(self, command: np.ndarray) -> StepOutcome:
        """Advance one step h under ``command`` (one velocity per joint); return its outcome."""
        self._fix_commands(np.asarray(command, dtype=float))
        self._backup.SetTimeStateAndParametersFrom(self.context)
        try:
            self.simulator.AdvanceTo((self.steps + 1) * self.time_step)
        except (Exception, SystemExit):   # noqa: B902 - restore on anything but Ctrl-C
            self._restore()
            raise
        self.steps += 1
        return self.outcome()

    def reset(self) -> None:
        """Start over: t = 0, the scenario's initial q, no spring preload."""
        self.steps = 0
        self.context.SetTime(0.0)
        self.plant.set_positions(self.plant_context, self._q0)
        self._fix_commands(np.zeros(self.joints.size))
        self.simulator.Initialize()

    def outcome(self) -> StepOutcome:
        """Return what the last step reported (status "initial" before any)."""
        return self.plant.get_step_status_output_port().Eval(self.plant_context)

    def joint_sample(self) -> JointSample:
        """Return the joint positions and last velocities /joint_states shows (state_names)."""
        q = self.plant.get_positions(self.plant_context)
        result = self.outcome().result
        joints = self.joints
        v = None if result is None else result.diagnostics.v
        v = v[joints.state_v_idx] if v is not None else np.zeros(len(joints.state_names))
        return JointSample(self.time, q[joints.state_q_idx], np.asarray(v, dtype=float))

    def body_poses(self) -> list[RigidTransform]:
        """Return every body's pose in the world, by BodyIndex."""
        return self.plant.get_body_poses_output_port().Eval(self.plant_context)

    def _fix_commands(self, command: np.ndarray) -> None:
        """Fix every robot's command port to its rows of ``command`` (joint order)."""
        for robot, rows in self.joints.robot_slices.items():
            self.plant.get_velocity_command_input_port(robot).FixValue(
                self.plant_context, command[rows])

    def _restore(self) -> None:
        """Put back the time and whole state of before a step that raised."""
        self.context.SetTimeStateAndParametersFrom(self._backup)
        # The Simulator requires Initialize() after its time moved back, and
        # re-arms the periodic update at the restored time.
        self.simulator.Initialize()
