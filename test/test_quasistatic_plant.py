"""QuasistaticPlant in real Drake Diagrams: ports, timing, equality with direct steps, errors."""

import numpy as np
import pytest
from pydrake.math import RigidTransform
from pydrake.systems.analysis import Simulator
from pydrake.systems.framework import DiagramBuilder
from pydrake.systems.primitives import TrajectorySource, VectorLogSink
from pydrake.trajectories import PiecewisePolynomial

from conftest import (ground_entry, make_sim, pads_robot, sdf_box_object, sdf_shape_object,
                      urdf_cartesian_robot, write)
from quasistatic_drake import CommandError
from quasistatic_drake.quasistatic_plant import QuasistaticPlant

H = 0.1


def pads_and_box(tmp_path, quasi_dynamic):
    """Scenario dict: generated pads squeezing a generated box on a ground slab."""
    return {'quasi_dynamic': quasi_dynamic, 'robots': [pads_robot(tmp_path, 0.8)],
            'objects': [{'name': 'box',
                         'file': write(tmp_path, 'box.sdf', sdf_box_object('box', [0.1] * 3, 1.0)),
                         'initial_pose': {'xyz': [0, 0, 0.05]}}],
            'environment': [ground_entry(tmp_path)]}


def finger_pads_and_cylinder(tmp_path):
    """Scenario dict with two robots (pads and a sphere finger) and a lying cylinder."""
    finger = urdf_cartesian_robot('finger', [
        ('fx', 'world', '1 0 0', None), ('fy', 'fx_link', '0 1 0', None),
        ('fz', 'fy_link', '0 0 1', '<geometry><sphere radius="0.02"/></geometry>')])
    cylinder = sdf_shape_object('cyl', '<cylinder><radius>0.04</radius><length>0.12</length>'
                                '</cylinder>', 0.5, (4e-4, 4e-4, 4e-4))
    return {'robots': [pads_robot(tmp_path, 0.8),
                       {'name': 'finger', 'file': write(tmp_path, 'finger.urdf', finger),
                        'stiffness': [500, 500, 500], 'initial_positions': [-0.3, 0.0, 0.04]}],
            'objects': [{'name': 'cyl', 'file': write(tmp_path, 'cyl.sdf', cylinder),
                         'initial_pose': {'xyz': [0, 0, 0.04], 'rpy': [1.5707963, 0, 0]}}],
            'environment': [ground_entry(tmp_path)]}


def command_schedule(n_steps, n_joints, seed):
    """Return a different piecewise-constant command for each step (n_steps x n_joints)."""
    rng = np.random.default_rng(seed)
    return 0.1 * rng.uniform(-1.0, 1.0, size=(n_steps, n_joints))


def zoh_source(commands):
    """Return a TrajectorySource holding commands[k] over [k H, (k + 1) H)."""
    times = H * np.arange(len(commands) + 1)
    values = np.vstack([commands, commands[-1:]]).T
    return TrajectorySource(PiecewisePolynomial.ZeroOrderHold(times, values))


def run_diagram(engine, schedules, steps):
    """Run QuasistaticPlant fed by ZOH sources in a Simulator; return q after ``steps``."""
    builder = DiagramBuilder()
    plant = builder.AddSystem(QuasistaticPlant(engine))
    for robot, commands in schedules.items():
        source = builder.AddSystem(zoh_source(commands))
        builder.Connect(source.get_output_port(), plant.get_velocity_command_input_port(robot))
    simulator = Simulator(builder.Build())
    simulator.AdvanceTo(steps * H)
    context = plant.GetMyContextFromRoot(simulator.get_context())
    return plant, context


def run_direct(engine, schedules, steps):
    """Step the engine directly with the same commands; return q and q_ref."""
    state = engine.initial_state()
    for k in range(steps):
        result = engine.step(state, {robot: c[k] for robot, c in schedules.items()})
        assert result.success
        state = result.state_next
    return state.q, state.q_ref


@pytest.mark.parametrize('quasi_dynamic', [False, True], ids=['quasi_static', 'quasi_dynamic'])
def test_diagram_matches_direct_stepping(tmp_path, quasi_dynamic):
    data = pads_and_box(tmp_path, quasi_dynamic)
    steps = 25
    close = np.tile([0.0, 0.1, -0.1], (3, 1))
    lift = np.tile([0.1, 0.0, 0.0], (10, 1))
    wiggle = command_schedule(steps - 13, 3, seed=1) * [1.0, 0.0, 0.0]
    schedules = {'pads': np.vstack([close, lift, wiggle])}
    plant, context = run_diagram(make_sim(tmp_path, data), schedules, steps)
    q_direct, q_ref_direct = run_direct(make_sim(tmp_path, data), schedules, steps)
    np.testing.assert_allclose(plant.get_positions(context), q_direct, rtol=0, atol=1e-9)
    np.testing.assert_allclose(plant.get_reference(context), q_ref_direct, rtol=0, atol=1e-9)
    assert plant.get_positions(context)[-1] > 0.1, 'the box was lifted in the diagram too'
    status = plant.get_step_status_output_port().Eval(context)
    assert (status.status, status.steps) == ('optimal', steps)


def test_two_robots_in_a_diagram_match_direct_stepping(tmp_path):
    data = finger_pads_and_cylinder(tmp_path)
    steps = 20
    push = np.tile([0.15, 0.0, 0.0], (steps, 1))
    schedules = {'finger': push, 'pads': command_schedule(steps, 3, seed=2) * 0.2}
    plant, context = run_diagram(make_sim(tmp_path, data), schedules, steps)
    q_direct, _ = run_direct(make_sim(tmp_path, data), schedules, steps)
    np.testing.assert_allclose(plant.get_positions(context), q_direct, rtol=0, atol=1e-9)
    cyl = plant.get_object_pose_output_port('cyl').Eval(context)
    assert cyl.translation()[0] > 0.01, 'the finger pushed the cylinder'


def test_ports_names_sizes_and_values(tmp_path):
    engine = make_sim(tmp_path, finger_pads_and_cylinder(tmp_path))
    plant = QuasistaticPlant(engine)
    inputs = {plant.get_input_port(i).get_name(): plant.get_input_port(i).size()
              for i in range(plant.num_input_ports())}
    assert inputs == {'pads_velocity_command': 3, 'finger_velocity_command': 3,
                      'pads_position_command': 3, 'finger_position_command': 3,
                      'cyl_generalized_force': 6}
    outputs = [plant.get_output_port(i).get_name() for i in range(plant.num_output_ports())]
    assert set(outputs) == {'positions', 'pads_positions', 'finger_positions', 'cyl_pose',
                            'cyl_pose_vector', 'state', 'body_poses', 'query_object',
                            'contact_results', 'step_status'}
    assert plant.get_robot_positions_output_port('finger').size() == 3
    assert plant.get_positions_output_port().size() == engine.model.n_q
    context = plant.CreateDefaultContext()
    q = engine.default_positions()
    np.testing.assert_array_equal(plant.get_robot_positions_output_port('finger').Eval(context),
                                  engine.robot_positions(q, 'finger'))
    X = plant.get_object_pose_output_port('cyl').Eval(context)
    assert isinstance(X, RigidTransform)
    assert X.IsExactlyEqualTo(engine.object_pose(q, 'cyl'))
    poses = plant.get_body_poses_output_port().Eval(context)
    body = engine.model.plant.GetBodyByName('cyl_body', engine.model.object('cyl').instance)
    assert len(poses) == engine.model.plant.num_bodies()
    assert poses[int(body.index())].IsExactlyEqualTo(X)
    query = plant.get_query_object_output_port().Eval(context)
    assert query.inspector().num_geometries() >= len(engine.model.geometries)
    status = plant.get_step_status_output_port().Eval(context)
    assert status.status == 'initial' and status.steps == 0
    assert status.min_signed_distance == pytest.approx(engine.min_signed_distance(q))
    for i in range(plant.num_input_ports()):        # outputs never feed through from inputs
        for j in range(plant.num_output_ports()):
            assert not plant.HasDirectFeedthrough(i, j)


def test_contact_results_balance_the_weight_of_a_resting_box(tmp_path):
    data = pads_and_box(tmp_path, False)
    data['robots'][0]['initial_positions'] = [0.05, -0.2, 0.2]      # pads far away
    plant, context = run_diagram(make_sim(tmp_path, data), {}, 2)
    contacts = plant.get_contact_results_output_port().Eval(context)
    assert contacts, 'the box rests on the ground'
    net = sum(c.force_W for c in contacts if c.body_b == 'box::box_body') - sum(
        c.force_W for c in contacts if c.body_a == 'box::box_body')
    np.testing.assert_allclose(net, [0, 0, 9.81], atol=1e-6)


def test_unconnected_command_port_holds_the_robot(tmp_path):
    engine = make_sim(tmp_path, pads_and_box(tmp_path, False))
    plant, context = run_diagram(engine, {}, 3)
    q0 = engine.default_positions()
    assert plant.get_step_status_output_port().Eval(context).steps == 3
    np.testing.assert_array_equal(plant.get_reference(context), engine.robot_positions(q0, 'pads'))
    np.testing.assert_allclose(plant.get_positions(context), q0, rtol=0, atol=1e-12)


def test_non_finite_command_is_refused_and_state_kept(tmp_path):
    plant = QuasistaticPlant(make_sim(tmp_path, pads_and_box(tmp_path, False)))
    simulator = Simulator(plant)
    context = simulator.get_mutable_context()
    port = plant.get_velocity_command_input_port('pads')
    port.FixValue(context, [0.0, 0.1, -0.1])
    simulator.AdvanceTo(2 * H)
    q, q_ref = plant.get_positions(context), plant.get_reference(context)
    status = plant.get_step_status_output_port().Eval(context)
    port.FixValue(context, [0.0, np.nan, np.inf])
    with pytest.raises(CommandError, match=r"'pads_velocity_command'.*not finite for joint\(s\) "
                                           r"\['left', 'right'\]"):
        simulator.AdvanceTo(4 * H)
    np.testing.assert_array_equal(plant.get_positions(context), q)
    np.testing.assert_array_equal(plant.get_reference(context), q_ref)
    assert plant.get_step_status_output_port().Eval(context) == status


def test_wrong_command_size_is_refused_by_name(tmp_path):
    plant = QuasistaticPlant(make_sim(tmp_path, pads_and_box(tmp_path, False)))
    context = plant.CreateDefaultContext()
    with pytest.raises(RuntimeError, match="size=3 for input port 'pads_velocity_command'"):
        plant.get_velocity_command_input_port('pads').FixValue(context, [0.1, 0.2])


def test_unknown_names_list_the_known_ones(tmp_path):
    plant = QuasistaticPlant(make_sim(tmp_path, pads_and_box(tmp_path, False)))
    with pytest.raises(CommandError, match=r"no robot 'arm'; its robots are \['pads'\]"):
        plant.get_velocity_command_input_port('arm')
    with pytest.raises(CommandError, match=r"no robot 'box'"):
        plant.get_robot_positions_output_port('box')
    with pytest.raises(CommandError, match=r"no object 'pads'; its objects are \['box'\]"):
        plant.get_object_pose_output_port('pads')


def test_set_positions_checks_and_resets_the_reference(tmp_path):
    engine = make_sim(tmp_path, pads_and_box(tmp_path, False))
    plant = QuasistaticPlant(engine)
    context = plant.CreateDefaultContext()
    q = engine.default_positions()
    q[0] = 0.2                                      # pads higher
    plant.set_positions(context, q)
    np.testing.assert_array_equal(plant.get_positions(context), q)
    np.testing.assert_array_equal(plant.get_reference(context), q[:3])
    bad = q.copy()
    bad[1] = np.nan
    with pytest.raises(CommandError, match='non-finite'):
        plant.set_positions(context, bad)
    with pytest.raises(CommandError, match='shape'):
        plant.set_positions(context, q[:-1])
    np.testing.assert_array_equal(plant.get_positions(context), q)


def test_logger_records_one_sample_per_step(tmp_path):
    data = pads_and_box(tmp_path, False)
    data['robots'][0]['initial_positions'] = [0.05, -0.2, 0.2]      # pads far from the box
    engine = make_sim(tmp_path, data)
    builder = DiagramBuilder()
    plant = builder.AddSystem(QuasistaticPlant(engine))
    logger = builder.AddSystem(VectorLogSink(engine.model.n_q, H))
    builder.Connect(plant.get_positions_output_port(), logger.get_input_port())
    source = builder.AddSystem(zoh_source(np.tile([0.1, 0.0, 0.0], (5, 1))))
    builder.Connect(source.get_output_port(), plant.get_velocity_command_input_port('pads'))
    simulator = Simulator(builder.Build())
    simulator.AdvanceTo(5 * H)
    log = logger.FindLog(simulator.get_context())
    lift = log.data()[0]
    # The sample at k H shows the state after k steps; the update at k H runs after it.
    np.testing.assert_allclose(log.sample_times(), H * np.arange(6), atol=1e-12)
    np.testing.assert_allclose(lift, 0.05 + 0.1 * H * np.arange(6), rtol=0, atol=1e-12)
