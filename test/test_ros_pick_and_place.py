"""
The arm's pick-and-place driven only over ~/velocity_commands lifts and places the cylinder.

Two scenes: config/arm_pick_place.yaml (one robot, arm and WSG-like gripper in one
URDF) and config/arm_pick_place_directives.yaml (the arm and a separate gripper
assembled by directives: two robots, whose joints share the command vector in the
node's joint order).  Each scene has its node; one at a time.
"""

import os

import numpy as np
import pytest

from conftest import REPO_ROOT
from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.apps.pick_and_place import plan_pick_and_place, run_pick_and_place
from test_ros_helpers import ARM_SCENARIO, RosHarness, transform_of, wait_for

DIRECTIVES_SCENARIO = os.path.join(REPO_ROOT, 'config', 'arm_pick_place_directives.yaml')


@pytest.fixture(scope='module', params=[ARM_SCENARIO, DIRECTIVES_SCENARIO],
                ids=['wsg', 'directives'])
def ros(request):
    """
    Run the node on an arm scene and a probe; the test steps it in lockstep, paused.

    real_time_rate 1, not 0: paused, the node takes steps only on ~/step, but at
    rate 0 (unlimited) its step timer has period 0 and keeps the executor busy,
    so every service call waits (about 1 s per step instead of 20 ms).
    """
    harness = RosHarness({'scenario': request.param, 'meshcat': False, 'real_time_rate': 1.0,
                          'publish_rate': 200.0, 'command_timeout': 10.0})
    harness.scenario = request.param
    yield harness
    harness.close()


def cylinder_xyz(probe, t):
    """Return the cylinder's position on /tf at sim time t."""
    def at_t():
        with probe.lock:
            recent = probe.tf[-20:]    # the newest messages: /tf grows at publish_rate
        msg = transform_of(recent, 'cylinder/cylinder_link')
        stamp = msg and msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        return msg if msg and abs(stamp - t) < 1e-9 else None
    p = wait_for(at_t, what=f'/tf of the cylinder at t = {t}').transform.translation
    return np.array([p.x, p.y, p.z])


def node_commands(plan, layout):
    """Return the plan's commands as the node takes them: every robot's joints, its order."""
    out = np.zeros((plan.steps, layout.size))
    for robot, columns in plan.robot_slices.items():
        out[:, layout.robot_slices[robot]] = plan.velocities[:, columns]
    return out


def test_pick_and_place_over_velocity_commands(ros):
    scenario = Scenario.from_yaml(ros.scenario)
    plan, _, _ = plan_pick_and_place(QuasistaticSimulator(scenario))   # the scenario's task
    layout = ros.node.session.joints
    assert [robot for robot, _ in plan.robots] == list(layout.robot_slices)
    commands = node_commands(plan, layout)
    probe = ros.probe
    assert probe.pause(True).success
    probe.clear()
    assert probe.reset().success
    start = cylinder_xyz(probe, 0.0)
    heights = []
    for k, velocity in enumerate(commands):
        probe.send_velocities(velocity)            # waits until ~/status counts it
        reply = probe.step()
        assert reply.success, reply.message
        if plan.labels[k] in ('lift', 'carry'):
            heights.append(cylinder_xyz(probe, (k + 1) * scenario.time_step)[2])
    end = cylinder_xyz(probe, plan.steps * scenario.time_step)
    assert max(heights) - start[2] > 0.12            # lifted (the plan lifts 15 cm)
    # the same commands in a Diagram (the demo) end at the same place: nothing lost on the wire
    demo = run_pick_and_place(scenario)
    assert np.allclose(end, demo.object_final_xyz, atol=1e-9)
    assert np.linalg.norm(end[:2] - demo.place_target_xyz[:2]) < 0.01
    assert probe.latest_status()['failed_steps'] == 0
    # /joint_states shows every robot's joints, at the plan's final reference (nothing held)
    joints = probe.positions_at(plan.steps * scenario.time_step)
    assert list(joints) == list(layout.state_names)
    for robot, columns in plan.robot_slices.items():
        names = layout.names[layout.robot_slices[robot]]
        np.testing.assert_allclose([joints[n] for n in names], plan.q_ref[-1, columns],
                                   atol=1e-3, err_msg=robot)
