"""
Several Contexts of one QuasistaticPlant: no state shared, outputs without side effects.

Drake keeps every bit of a System's changing state in its Contexts, so two
Simulators (or a MonteCarloSimulation) over one System must not interfere.
These tests advance Contexts of one plant interleaved, evaluating every
output port between steps, and compare each with its run alone; they check
that evaluating an output leaves the engine untouched, that a cloned
Context evolves on its own, and that MonteCarloSimulation's samples are
the samples run one by one.
"""

import numpy as np
import pytest
from pydrake.common import RandomGenerator
from pydrake.systems.analysis import MonteCarloSimulation, RandomSimulation, Simulator
from pydrake.systems.framework import DiagramBuilder

from conftest import ground_entry, make_sim, pads_robot, sdf_box_object, write
from quasistatic_drake.quasistatic_plant import QuasistaticPlant

STEPS = 12
MT19937_RANGE = 2.0 ** 32     # RandomGenerator() draws integers in [0, 2^32)


@pytest.fixture(scope='module')
def plant(tmp_path_factory):
    """Return one plant: pads that close on a box on the ground and lift it."""
    tmp_path = tmp_path_factory.mktemp('pads')
    box = write(tmp_path, 'box.sdf', sdf_box_object('box', [0.1] * 3, 1.0))
    engine = make_sim(tmp_path, {
        'robots': [pads_robot(tmp_path, 0.8)],
        'objects': [{'name': 'box', 'file': box, 'initial_pose': {'xyz': [0, 0, 0.05]}}],
        'environment': [ground_entry(tmp_path)]})
    return QuasistaticPlant(engine)


def commands(kind):
    """Return a command per step: 'lift' closes and lifts; 'slide' closes and pushes along y."""
    close = [[0.0, 0.1, -0.1]] * 3
    rest = [[0.1, 0.0, 0.0]] if kind == 'lift' else [[0.0, 0.05, -0.05]]
    return np.array(close + rest * (STEPS - 3))


def start(plant, offset):
    """Return a Simulator on a new Context of ``plant`` with the box moved by ``offset`` in x."""
    context = plant.CreateDefaultContext()
    q = plant.engine.default_positions()
    q[-3] += offset                      # the box's x (free body: quaternion, then xyz)
    plant.set_positions(context, q)
    simulator = Simulator(plant, context)
    simulator.Initialize()
    return simulator


def observe(plant, context):
    """Return every output's value at the Context's state, as comparable arrays."""
    poses = plant.get_body_poses_output_port().Eval(context)
    query = plant.get_query_object_output_port().Eval(context)
    inspector = query.inspector()
    geometry = min(inspector.GetAllGeometryIds(), key=lambda g: g.get_value())
    return {
        'q': plant.get_positions(context),
        'q_ref': plant.get_reference(context),
        'box_pose': plant.get_object_pose_output_port('box').Eval(context).GetAsMatrix4(),
        'body_poses': np.array([X.GetAsMatrix4() for X in poses]),
        'query_pose': query.GetPoseInWorld(geometry).GetAsMatrix4(),
        'forces': np.array([c.force_W for c in
                            plant.get_contact_results_output_port().Eval(context)]),
        'status': plant.get_step_status_output_port().Eval(context).status,
    }


def advance(plant, simulator, command, k):
    """Fix the pads' command and take step k + 1."""
    context = simulator.get_mutable_context()
    plant.get_velocity_command_input_port('pads').FixValue(context, command)
    simulator.AdvanceTo((k + 1) * plant.time_step)


def run_alone(plant, offset, kind):
    """Return the observations of one Context run by itself, one per step."""
    simulator = start(plant, offset)
    seen = []
    for k, command in enumerate(commands(kind)):
        advance(plant, simulator, command, k)
        seen.append(observe(plant, simulator.get_context()))
    return seen


def assert_same(a, b, where):
    """Assert two runs' observations are bitwise equal, step by step."""
    assert len(a) == len(b)
    for k, (x, y) in enumerate(zip(a, b)):
        for key in x:
            np.testing.assert_array_equal(x[key], y[key], err_msg=f'{where}, step {k}: {key}')


def test_two_interleaved_contexts_reproduce_their_separate_runs(plant):
    alone_a = run_alone(plant, 0.0, 'lift')
    alone_b = run_alone(plant, 0.01, 'slide')
    assert alone_a[-1]['q'][-1] > 0.1, 'context A lifts the box'
    assert abs(alone_b[-1]['q'][-1] - 0.05) < 1e-3, 'context B keeps it on the ground'
    sim_a, sim_b = start(plant, 0.0), start(plant, 0.01)
    seen_a, seen_b = [], []
    for k, (a, b) in enumerate(zip(commands('lift'), commands('slide'))):
        advance(plant, sim_a, a, k)
        seen_b.append(observe(plant, sim_b.get_context()))   # B's outputs before its step
        advance(plant, sim_b, b, k)
        seen_a.append(observe(plant, sim_a.get_context()))
        seen_b[-1] = observe(plant, sim_b.get_context())
    assert_same(seen_a, alone_a, 'context A')
    assert_same(seen_b, alone_b, 'context B')


def test_outputs_leave_the_engine_untouched(plant):
    """Evaluating an output of a Context at another q must not move the engine's model."""
    model = plant.engine.model
    context = plant.CreateDefaultContext()
    q = plant.engine.default_positions()
    q[-3] += 0.2
    plant.set_positions(context, q)
    before = model.plant.GetPositions(model.plant_context).copy()
    observe(plant, context)
    np.testing.assert_array_equal(model.plant.GetPositions(model.plant_context), before)
    pose = plant.get_object_pose_output_port('box').Eval(context)
    assert pose.translation()[0] == pytest.approx(0.2)


def test_a_cloned_context_evolves_on_its_own(plant):
    simulator = start(plant, 0.0)
    advance(plant, simulator, commands('lift')[0], 0)
    clone = simulator.get_context().Clone()
    other = Simulator(plant, clone)
    other.Initialize()
    for k, command in enumerate(commands('slide')[1:], start=1):
        advance(plant, other, command, k)
    for k, command in enumerate(commands('lift')[1:], start=1):
        advance(plant, simulator, command, k)
    lifted, slid = observe(plant, simulator.get_context()), observe(plant, clone)
    assert_same([lifted], run_alone(plant, 0.0, 'lift')[-1:], 'the original')
    assert slid['box_pose'][2, 3] == pytest.approx(0.05, abs=1e-3)
    assert lifted['box_pose'][2, 3] > 0.1


def test_monte_carlo_samples_equal_the_samples_run_one_by_one(plant):
    """Drake's MonteCarloSimulation builds one Simulator per sample on one Diagram."""
    builder = DiagramBuilder()
    builder.AddSystem(plant)
    diagram = builder.Build()
    final_time = 8 * plant.time_step

    def make_simulator(generator):
        """Return a Simulator: the box at a random x, pads closing and lifting at random speeds."""
        context = diagram.CreateDefaultContext()
        plant_context = plant.GetMyMutableContextFromRoot(context)
        q = plant.engine.default_positions()
        q[-3] += 0.02 * (generator() / MT19937_RANGE - 0.5)
        speed = 0.05 + 0.1 * generator() / MT19937_RANGE
        lift = 0.04 + 0.02 * generator() / MT19937_RANGE
        plant.set_positions(plant_context, q)
        plant.get_velocity_command_input_port('pads').FixValue(
            plant_context, [lift, speed, -speed])
        return Simulator(diagram, context)

    def box_height(system, context):
        """Return the box's final height."""
        return plant.get_positions(plant.GetMyContextFromRoot(context))[-1]

    results = MonteCarloSimulation(make_simulator=make_simulator, output=box_height,
                                   final_time=final_time, num_samples=4,
                                   generator=RandomGenerator(7))
    heights = [r.output for r in results]
    assert len(set(heights)) == 4, f'the samples differ: {heights}'
    assert max(heights) > 0.06, f'a squeezed box is lifted: {heights}'
    for result in results:
        alone = RandomSimulation(make_simulator=make_simulator, output=box_height,
                                 final_time=final_time, generator=result.generator_snapshot)
        assert alone == result.output
