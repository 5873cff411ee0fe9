"""
Compose QuasistaticPlant with other Drake systems: the example a Drake user copies.

The Diagram, built with DiagramBuilder:

    TrajectorySource (joint velocity commands, held over each step)
        -> QuasistaticPlant "iiwa_velocity_command"
    QuasistaticPlant "query_object"     -> MeshcatVisualizer (optional)
    QuasistaticPlant "contact_results"  -> ContactForceVisualizer (optional; the forces)
    QuasistaticPlant "iiwa_positions"   -> VectorLogSink (the arm's joints)
    QuasistaticPlant "cylinder_pose"    -> read after the run

The commands come from the project's planner (differential IK over the
pick-and-place waypoints); any source of joint velocities works, e.g. a
controller that reads "iiwa_positions" back (outputs never feed through from
inputs, so that is no algebraic loop).

    .venv/bin/python examples/diagram_composition.py            # with Meshcat
    .venv/bin/python examples/diagram_composition.py --no-meshcat --seconds 8
"""

import argparse
from typing import Optional

import numpy as np
from pydrake.geometry import Meshcat, MeshcatVisualizer
from pydrake.systems.analysis import Simulator
from pydrake.systems.framework import DiagramBuilder
from pydrake.systems.primitives import VectorLogSink

from quasistatic_drake import QuasistaticPlant, Scenario
from quasistatic_drake.contact_visualizer import ContactForceVisualizer
from quasistatic_drake.paths import package_share_dir
from quasistatic_drake.apps.pick_and_place import PickPlaceTask, plan_pick_and_place


def build(scenario: Scenario, meshcat: Optional[Meshcat]):
    """Return (diagram, plant, logger) for the arm scene driven by the planner's commands."""
    builder = DiagramBuilder()
    plant = builder.AddSystem(QuasistaticPlant(scenario))
    plant.set_name('quasistatic_plant')
    plan, _, _ = plan_pick_and_place(plant.engine, PickPlaceTask())
    commands = builder.AddSystem(plan.command_source())
    commands.set_name('velocity_commands')
    builder.Connect(commands.get_output_port(), plant.get_velocity_command_input_port('iiwa'))
    n_joints = plant.get_robot_positions_output_port('iiwa').size()
    logger = builder.AddSystem(VectorLogSink(n_joints, scenario.time_step))
    logger.set_name('iiwa_logger')
    builder.Connect(plant.get_robot_positions_output_port('iiwa'), logger.get_input_port())
    if meshcat is not None:
        MeshcatVisualizer.AddToBuilder(builder, plant.get_query_object_output_port(), meshcat)
        ContactForceVisualizer.AddToBuilder(builder, plant.get_contact_results_output_port(),
                                            meshcat)
    return builder.Build(), plant, logger


def main() -> None:
    """Run the example and print what the logger and the output ports saw."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--no-meshcat', action='store_true')
    parser.add_argument('--seconds', type=float, default=16.5, help='simulated time [s]')
    args = parser.parse_args()
    scenario = Scenario.from_yaml(package_share_dir() / 'config' / 'arm_pick_place.yaml')
    meshcat = None if args.no_meshcat else Meshcat()
    if meshcat is not None:
        print(f'Meshcat: {meshcat.web_url()}')
    diagram, plant, logger = build(scenario, meshcat)
    simulator = Simulator(diagram)
    simulator.set_target_realtime_rate(0.0 if meshcat is None else 1.0)
    simulator.AdvanceTo(args.seconds)
    context = plant.GetMyContextFromRoot(simulator.get_context())
    log = logger.FindLog(simulator.get_context())
    cylinder = plant.get_object_pose_output_port('cylinder').Eval(context).translation()
    status = plant.get_step_status_output_port().Eval(context)
    print(f'{status.steps} steps; last status {status.status}, min signed distance '
          f'{status.min_signed_distance * 1e3:.3f} mm')
    print(f'logged {log.data().shape[1]} samples of the {log.data().shape[0]} arm joints; '
          f'joint 1 moved {np.ptp(log.data()[0]):.3f} rad')
    print(f'cylinder at {np.round(cylinder, 4).tolist()} m')


if __name__ == '__main__':
    main()
