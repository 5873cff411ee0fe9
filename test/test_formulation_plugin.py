"""
A formulation added from outside the package: the registry, its settings block, the step loop.

The test-only formulation "kinematic" moves the robots exactly as commanded
and holds the objects still.  It fails a step when the penetration it is
asked to work off is deeper than its ``max_recovery`` setting, so the
engine's partial recovery must bisect; it counts its warm starts, so the
rollout must hand each step's on to the next.  Nothing in the QP's or the
MIQP's module or in the step loop knows of it.
"""

from dataclasses import dataclass

import numpy as np
import pytest

from conftest import ground_entry, make_sim, pads_robot, sdf_box_object, write
from quasistatic_drake import CommandError, ScenarioError
from quasistatic_drake.formulations import registry
from quasistatic_drake.formulations.base import (Formulation, one_step_reference,
                                                 StepSolution)
from quasistatic_drake.schema import number, setting


@dataclass(frozen=True)
class KinematicSettings:
    """The ``kinematic:`` block."""

    max_recovery: float = setting(1.0, number(positive=True),
                                  "[m] the deepest penetration a step may work off")
    speed_scale: float = setting(1.0, number(nonnegative=True), "robots move this x command")


@dataclass(frozen=True)
class KinematicSolution(StepSolution):
    """The kinematic step: v' and the count of steps so far (its warm start)."""

    count: int = 0

    @property
    def warm_start_next(self) -> int:
        """Return the next step's count."""
        return self.count + 1


class KinematicFormulation(Formulation):
    """Robots follow their command, objects stay; penetration beyond max_recovery fails."""

    name = 'kinematic'
    settings_type = KinematicSettings
    recovery_bisections = 4

    def solve(self, problem, contacts, warm_start=None):
        """Return v' with the robots' commanded velocities, or fail on deep penetration."""
        depth = float(np.max(-contacts.phi, initial=0.0))
        count = warm_start or 0
        if depth > self.settings.max_recovery:
            return KinematicSolution(None, np.zeros((contacts.n_c, 3)), 'infeasible', 0.0,
                                     count=count)
        v = np.zeros(self.facts.n_v)
        v[self.facts.robot_v_idx] = self.settings.speed_scale * problem.v_cmd
        return KinematicSolution(v, np.zeros((contacts.n_c, 3)), 'optimal', 0.0, count=count)

    def next_reference(self, problem, q_a_next, solution):
        """Return the one-step target, never bounded."""
        return one_step_reference(problem, self.facts.h), False

    def checked_warm_start(self, warm_start):
        """Return the count, or raise CommandError."""
        if warm_start is not None and (not isinstance(warm_start, int) or warm_start < 0):
            raise CommandError(f'warm_start: the kinematic count must be an int >= 0, got '
                               f'{warm_start!r}. Fix: start from a StepResult\'s state_next.')
        return warm_start


@pytest.fixture
def kinematic():
    """Register the formulation for one test."""
    registry.register(KinematicFormulation)
    yield
    registry.unregister('kinematic')


def scene(tmp_path, pad_x, block=None):
    """Return scenario data: pads (left pad at ``pad_x``) and a box on the ground."""
    robot = pads_robot(tmp_path, 0.8)
    robot['initial_positions'] = [0.05, pad_x, 0.2]
    data = {'formulation': 'kinematic', 'robots': [robot],
            'objects': [{'name': 'box', 'file': write(tmp_path, 'box.sdf', sdf_box_object(
                'box', [0.1] * 3, 1.0)), 'initial_pose': {'xyz': [0, 0, 0.05]}}],
            'environment': [ground_entry(tmp_path)]}
    if block is not None:
        data['kinematic'] = block
    return data


def test_a_registered_formulation_steps_and_rolls_out(tmp_path, kinematic):
    sim = make_sim(tmp_path, scene(tmp_path, -0.2, {'speed_scale': 0.5}))
    assert type(sim.formulation) is KinematicFormulation
    q0 = sim.default_positions()
    rollout = sim.rollout(sim.initial_state(q0), [{'pads': [0.1, 0.0, 0.0]}] * 3)
    assert rollout.failed_steps == 0
    counts = [r.diagnostics.solution.count for r in rollout.results]
    assert counts == [0, 1, 2], 'each step got the last one\'s warm start'
    assert rollout.final_state.warm_start == 3
    np.testing.assert_allclose(rollout.q[-1][0] - q0[0], 3 * 0.5 * 0.1 * sim.h)
    np.testing.assert_array_equal(rollout.q[-1][3:], q0[3:])      # the box stays
    np.testing.assert_allclose(rollout.q_ref[-1], rollout.q[-2][:3] + [0.1 * sim.h, 0, 0])
    with pytest.raises(CommandError, match='kinematic count'):
        sim.step(sim.initial_state(q0, warm_start=-1), {})


def test_a_formulation_without_gradients_refuses_them(tmp_path, kinematic):
    sim = make_sim(tmp_path, scene(tmp_path, -0.2))
    start = sim.initial_state()
    with pytest.raises(CommandError, match="formulation 'kinematic' gives no step gradients"):
        sim.step(start, {'pads': [0.1, 0.0, 0.0]}, gradients=True)
    assert sim.step(start, {'pads': [0.1, 0.0, 0.0]}).success      # nothing was lost


def test_its_block_is_read_by_its_settings_type(tmp_path, kinematic):
    with pytest.raises(ScenarioError, match=r'kinematic\.speed_scale: must be >= 0'):
        make_sim(tmp_path, scene(tmp_path, -0.2, {'speed_scale': -1}))
    with pytest.raises(ScenarioError, match=r"kinematic: unknown key\(s\) \['gain'\]"):
        make_sim(tmp_path, scene(tmp_path, -0.2, {'gain': 1}))
    sim = make_sim(tmp_path, scene(tmp_path, -0.2))
    assert sim.scenario.settings() == KinematicSettings()


def test_the_engine_recovers_partially_with_its_bisections(tmp_path, kinematic):
    """The left pad starts 8 mm inside the box; the formulation may work off 2.7 mm."""
    sim = make_sim(tmp_path, scene(tmp_path, -0.052, {'max_recovery': 0.0027}))
    result = sim.step(sim.initial_state(), {})
    assert result.success and result.diagnostics.recovery_dropped
    depth = -float(np.min(result.contact_set.phi))
    assert depth == pytest.approx(0.008, abs=1e-4)
    fractions = [k / 16 for k in range(16)]            # 4 bisections: multiples of 1/16
    expected = max(f for f in fractions if f * depth <= 0.0027)
    assert expected == 5 / 16 and result.diagnostics.recovery_fraction == expected


def test_an_unregistered_name_is_refused(tmp_path):
    with pytest.raises(ScenarioError, match="unknown formulation 'kinematic'"):
        make_sim(tmp_path, scene(tmp_path, -0.2))


def test_bad_registrations_are_refused():
    class Nameless(KinematicFormulation):
        """No usable name."""

        name = 'two words'

    class Unsettled(Formulation):
        """No settings type."""

        name = 'unsettled'

    with pytest.raises(ValueError, match="'name' that is an identifier"):
        registry.register(Nameless)
    with pytest.raises(ValueError, match="needs a class attribute 'settings_type'"):
        registry.register(Unsettled)
    assert 'unsettled' not in registry.names()


def test_with_formulation_checks_its_changes(tmp_path):
    from quasistatic_drake import Scenario
    scenario = Scenario.from_dict({'time_step': 0.1, 'robots': [pads_robot(tmp_path, 0.8)]},
                                  base_dir=tmp_path, source='s.yaml')
    miqp = scenario.with_formulation('miqp', backend='scip', time_limit=2)
    assert (miqp.formulation, miqp.settings().backend, miqp.settings().time_limit) == (
        'miqp', 'scip', 2.0)
    assert scenario.formulation == 'qp' and scenario.settings('miqp').backend == 'daqp'
    with pytest.raises(ScenarioError, match=r"s\.yaml: miqp\.backend: unknown MIQP backend"):
        scenario.with_formulation('miqp', backend='cplex')
    with pytest.raises(ScenarioError, match=r"s\.yaml: miqp: unknown key\(s\) \['gap'\]"):
        scenario.with_formulation('miqp', gap=0.1)
    with pytest.raises(ScenarioError, match="unknown formulation 'pgs'"):
        scenario.with_formulation('pgs')
