"""
States, commands and forces a hostile caller hands the engine (issue 31, defects 5 to 8).

Before: a quaternion of norm 0 or 2 and a joint outside its limits in q were
accepted (a zero quaternion gave status "error", and in QuasistaticPlant it
was written before Drake refused it, so every later AdvanceTo raised); a
command of 1e20 m/s made every step "infeasible" and 1.8e308 raised a numba
SystemError inside the step; a 1e4 N lift of a 1 kg box moved it at 7.3 m/s
instead of 999 m/s, with status "optimal".  Now bad input is a CommandError
that names the entry and the fix, with nothing changed, and large forces move
objects as far as they should.
"""

from dataclasses import replace

import numpy as np
import pytest
from pydrake.systems.analysis import Simulator

from conftest import REPO_ROOT
from quasistatic_drake import CommandError, QuasistaticSimulator, Scenario
from quasistatic_drake.quasistatic_plant import QuasistaticPlant

TWO_PADS = f'{REPO_ROOT}/config/two_pads_lift.yaml'


@pytest.fixture(scope='module', params=[False, True], ids=['quasi_static', 'quasi_dynamic'])
def sim(request):
    scenario = replace(Scenario.from_yaml(TWO_PADS), quasi_dynamic=request.param)
    return QuasistaticSimulator(scenario)


def bad_positions(sim, kind):
    q = sim.default_positions()
    start = sim.model.quaternion_starts[0]
    if kind == 'zero quaternion':
        q[start:start + 4] = 0.0
    elif kind == 'quaternion of norm 2':
        q[start:start + 4] *= 2.0
    else:                                     # the lift 1 m above its upper limit
        q[0] = 2.0
    return q


MESSAGES = {'zero quaternion': r"q\[3:7\] is the orientation quaternion .*'box::box_link'; "
                               r"its norm is 0, not 1 \(within 0\.001\)\. Fix: divide it by "
                               r"its norm",
            'quaternion of norm 2': r'its norm is 2, not 1',
            'joint beyond its limit': r"q\[0\] = 2 puts joint 'pads::lift_z' outside its limits "
                                      r"\[-0\.5, 1\].*Fix: clip q"}


@pytest.mark.parametrize('kind', list(MESSAGES))
def test_a_bad_configuration_is_a_command_error(sim, kind):
    q = bad_positions(sim, kind)
    with pytest.raises(CommandError, match=MESSAGES[kind]):
        sim.initial_state(q)
    state = replace(sim.initial_state(), q=q)
    with pytest.raises(CommandError, match=MESSAGES[kind]):
        sim.step(state, {'pads': np.zeros(3)})


@pytest.mark.parametrize('kind', list(MESSAGES))
def test_a_refused_set_positions_leaves_the_plant_running(sim, kind):
    plant = QuasistaticPlant(sim)
    simulator = Simulator(plant)
    context = simulator.get_mutable_context()
    plant.get_velocity_command_input_port('pads').FixValue(context, [0.05, 0.0, 0.0])
    simulator.AdvanceTo(0.2)
    q, q_ref = plant.get_positions(context), plant.get_reference(context)
    with pytest.raises(CommandError, match=MESSAGES[kind]):
        plant.set_positions(context, bad_positions(sim, kind))
    np.testing.assert_array_equal(plant.get_positions(context), q)
    np.testing.assert_array_equal(plant.get_reference(context), q_ref)
    simulator.AdvanceTo(0.4)                 # every later step raised before
    assert plant.get_step_status_output_port().Eval(context).status == 'optimal'
    assert plant.get_positions(context)[0] > q[0]


@pytest.mark.parametrize('value', [1e7, -1.79e308, 1e20])
def test_an_extreme_command_is_a_command_error(sim, value):
    with pytest.raises(CommandError, match=r"v_cmd\['pads'\] is .* for lift_z, beyond the "
                                           r"largest magnitude accepted, 1e\+06 m/s or rad/s"):
        sim.step(sim.initial_state(), {'pads': np.array([value, 0.0, 0.0])})


def test_an_extreme_force_is_a_command_error(sim):
    with pytest.raises(CommandError, match=r"object_forces\['box'\] is 1e\+20 for v\[8\], "
                                           r"beyond .* 1e\+09 N or N m"):
        sim.step(sim.initial_state(), {'pads': np.zeros(3)},
                 object_forces={'box': np.array([0, 0, 0, 0, 0, 1e20])})


@pytest.mark.parametrize('force', [100.0, 1e3, 1e4, 1e6])
def test_a_large_lift_moves_the_box_as_far_as_the_force_takes_it(sim, force):
    """
    A vertical force F on the 1 kg box resting between open pads, for one step of h.

    Quasi-dynamic: from rest, v = h (F - m g) / m exactly (nothing else acts
    once it leaves the ground); the box rose 7.3 m/s at 1e4 N before, and
    its lift was capped at g h^2.  Quasi-static: the model has no speed of its
    own; the step moves it as dynamics would from rest with no gravity to
    oppose it, h^2 F / m, and so monotone in F.  No turn, no sideways drift.
    """
    state = sim.initial_state()
    result = sim.step(state, {'pads': np.zeros(3)},
                      object_forces={'box': np.array([0, 0, 0, 0, 0, force])})
    assert result.status == 'optimal'
    h, mass, g = sim.h, 1.0, 9.81
    rise = result.state_next.q[9] - state.q[9]
    expected = h * h * (force - mass * g) / mass if sim.scenario.quasi_dynamic \
        else h * h * force / mass
    assert rise == pytest.approx(expected, rel=1e-9)
    np.testing.assert_allclose(result.state_next.q[7:9], state.q[7:9], atol=1e-12 * rise)
    np.testing.assert_allclose(result.state_next.q[3:7], [1, 0, 0, 0], atol=1e-12)
