"""The arm's pick-and-place driven only over ~/velocity_commands lifts the cylinder."""

import numpy as np
import pytest

from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.apps.pick_and_place import PickPlaceTask, plan_pick_and_place, \
    run_pick_and_place
from test_ros_helpers import ARM_SCENARIO, RosHarness, transform_of, wait_for


@pytest.fixture(scope='module')
def ros():
    """Run the node on the arm scene and a probe; the test steps it in lockstep."""
    harness = RosHarness({'scenario': ARM_SCENARIO, 'meshcat': False, 'real_time_rate': 0.0,
                          'publish_rate': 200.0, 'command_timeout': 10.0})
    yield harness
    harness.close()


def cylinder_xyz(probe, t):
    """Return the cylinder's position on /tf at sim time t."""
    def at_t():
        msg = transform_of(list(probe.tf), 'cylinder_link')
        stamp = msg and msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        return msg if msg and abs(stamp - t) < 1e-9 else None
    p = wait_for(at_t, what=f'/tf of the cylinder at t = {t}').transform.translation
    return np.array([p.x, p.y, p.z])


def test_pick_and_place_over_velocity_commands(ros):
    scenario = Scenario.from_yaml(ARM_SCENARIO)
    plan, _, _ = plan_pick_and_place(QuasistaticSimulator(scenario), PickPlaceTask())
    probe = ros.probe
    assert probe.pause(True).success
    probe.clear()
    assert probe.reset().success
    start = cylinder_xyz(probe, 0.0)
    heights = []
    for k, velocity in enumerate(plan.velocities):
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
