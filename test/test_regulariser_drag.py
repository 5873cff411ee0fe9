"""
The quasi-static regulariser leaves at most 1 % of an object's weight as drag while it moves.

In quasi-static mode the step QP keeps eps M_u in its Hessian; the force
eps M_u v_u / h then resists every moving object, with eps set by the
softest robot spring in the scene (``formulations/qp.py``).  Measured
before ``formulations/proximal_drag.py`` (``benchmarks/grasp_creep.py``,
net force on the object over its weight): a 28 g brick in the arm's grasp
65 % (median) to 91 %, the demo's cylinder 4.6 to 6.3 %, a box pushed at
0.1 m/s by a finger of K = 1e3 N/m 10 % and of K = 1e5 N/m 1019 %.
"""

import os
from pathlib import Path
import sys

import numpy as np
import pytest

from conftest import REPO_ROOT
from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.apps.pick_and_place import plan_pick_and_place
import quasistatic_drake.formulations.qp as qp_module
from quasistatic_drake.scenario import ScenarioError
from quasistatic_drake.formulations.proximal_drag import proximal_solve, translation_projection
from test_step_gradients import assert_close, central, scene, state

sys.path.insert(0, os.path.join(REPO_ROOT, 'benchmarks'))
import grasp_creep  # noqa: E402

CONFIG = Path(REPO_ROOT) / 'config'
DRAG_LIMIT = 0.01       # of the object's weight


def stiff_push(changes=None) -> QuasistaticSimulator:
    """Return config/finger_push.yaml with a finger of K = 1e5 N/m, scenario keys changed."""
    return QuasistaticSimulator(Scenario.from_dict({
        'include': 'finger_push.yaml', **(changes or {}),
        'robots': [{'name': 'finger', 'file': 'package://quasistatic_drake/urdf/finger.urdf',
                    'stiffness': [1e5] * 3, 'initial_positions': [-0.08, 0.0, 0.05]}]},
        base_dir=CONFIG, source='finger push, K = 1e5'))


class _Solution:
    """A hand-built step's solution: v and the drag it leaves over the weight."""

    def __init__(self, v, drag_fraction):
        self.v, self.drag_fraction = v, drag_fraction


def _one_object_qp(curvature: float, force: float, eps: float, h: float = 0.1):
    """
    Return solve_with for min 1/2 c v^2 - f v + eps/2 (v - centre)^2 (one object, m = 1, g = 10).

    Its iterates in closed form: v_k = (f + eps v_(k-1)) / (c + eps), v_0 = f / (c + eps).
    """
    def solve_with(previous):
        centre = 0.0 if previous is None else previous.v[0]
        v = (force + eps * centre) / (curvature + eps)
        return _Solution(np.array([v]), eps * abs(v - centre) / h / 10.0)
    return solve_with


def test_the_iterates_follow_the_proximal_point_recursion():
    """Check a priced direction: v_N = f / c (1 - rho^(N+1)), rho = eps / (c + eps)."""
    eps, curvature, force = 0.3, 1.0, 2.0
    rho = eps / (curvature + eps)
    for n in range(4):
        result = proximal_solve(_one_object_qp(curvature, force, eps), n)
        assert result.v[0] == pytest.approx(force / curvature * (1 - rho ** (n + 1)), rel=1e-12)
        # the drag left shrinks by rho per iterate: eps (v_N - v_(N-1)) / (h m g)
        assert result.drag_fraction == pytest.approx(
            eps * force / curvature * (1 - rho) * rho ** n / 0.1 / 10.0, rel=1e-9)


def test_at_rest_the_plain_step_is_kept():
    """Check a step without object motion: no iterate after the plain QP (SETTLED)."""
    calls = []

    def solve_with(previous):
        calls.append(previous)
        return _Solution(np.zeros(1), 0.0)
    assert proximal_solve(solve_with, 6).v[0] == 0.0 and calls == [None]


def test_a_failed_iterate_keeps_the_last_solution():
    """Check: an iterate whose solve fails ends the iteration with the one before it."""
    def solve_with(previous):
        return _Solution(None, 0.0) if previous is not None else _Solution(np.ones(1), 1.0)
    assert proximal_solve(solve_with, 3).v[0] == 1.0


def test_the_centre_keeps_translation_only():
    """Check P on a free body whose centre of mass is off its origin (closed form)."""
    m, p = 2.0, np.array([0.1, -0.05, 0.2])
    I_c = np.diag([0.01, 0.02, 0.03])
    cross = np.array([[0, -p[2], p[1]], [p[2], 0, -p[0]], [-p[1], p[0], 0]])
    J = np.block([[np.eye(3), np.zeros((3, 3))], [-cross, np.eye(3)]])   # [w; v_o] -> [w; v_c]
    M = J.T @ np.block([[I_c, np.zeros((3, 3))], [np.zeros((3, 3)), m * np.eye(3)]]) @ J
    W = np.hstack([np.eye(3), np.zeros((3, 3))])
    P = translation_projection(M, W)
    v = np.array([0.3, -0.2, 0.5, 0.1, 0.2, -0.3])
    v_com = v[3:] + np.cross(v[:3], p)
    np.testing.assert_allclose(P @ v, np.concatenate([np.zeros(3), v_com]), atol=1e-12)
    np.testing.assert_allclose(P @ P, P, atol=1e-12)
    np.testing.assert_allclose(M @ P, (M @ P).T, atol=1e-12)      # M-orthogonal
    np.testing.assert_allclose(translation_projection(M, np.zeros((3, 6))), np.eye(6))


@pytest.mark.parametrize('make', [grasp_creep.brick_scenario, grasp_creep.cylinder_scenario],
                         ids=['28 g brick', 'demo cylinder'])
def test_a_held_object_feels_at_most_one_percent_of_its_weight_as_drag(make):
    """Check the net force on a held object over its lift and carry (before: 65 % and 4.6 %)."""
    shifts, _, distance, results, name, sim = grasp_creep.held_motion(make())
    fractions = [grasp_creep.net_force_fraction(sim, r, name) for r in results]
    assert distance > 0.35
    assert max(fractions) <= DRAG_LIMIT, max(fractions)
    assert np.abs(shifts).max() < 1e-4                       # and it still does not creep


@pytest.mark.parametrize('stiffness', [1e3, 1e5])
def test_a_pushed_box_feels_at_most_one_percent_whatever_the_finger_stiffness(stiffness):
    """Check the box pushed at 0.1 m/s once it slides (before: 10 % and 1019 %)."""
    fractions = grasp_creep.push_drag(stiffness)[3:]
    assert max(fractions) <= DRAG_LIMIT, max(fractions)


def test_zero_iterates_keep_the_old_drag():
    """Check proximal_iterations: 0: one solve per step, and the stiff finger's drag is back."""
    sim = stiff_push({'qp': {'proximal_iterations': 0}})
    q, q_ref = sim.default_positions(), None
    for _ in range(6):
        result = sim.step(sim.initial_state(q, q_ref=q_ref), {'finger': np.array([0.1, 0.0, 0.0])})
        q, q_ref = result.q_next, result.state_next.q_ref
    solution = result.diagnostics.solution
    assert solution.proximal_previous is None and solution.drag_fraction is None
    assert grasp_creep.net_force_fraction(sim, result, 'box') > 1.0


def test_an_iterate_predicted_on_the_active_set_is_the_full_solve(monkeypatch):
    """Check active_set_step: the carried cylinder's steps with and without prediction agree."""
    sim = QuasistaticSimulator(grasp_creep.cylinder_scenario())
    plan, _, _ = plan_pick_and_place(sim)
    carry = plan.step_range('carry')
    k = (carry.start + carry.stop) // 2
    run = sim.rollout(sim.initial_state(), [plan.commands(j) for j in range(k)])
    fast = sim.step(sim.initial_state(run.q[-1], q_ref=run.q_ref[-1]), plan.commands(k))
    monkeypatch.setattr(qp_module, 'predicted', lambda *args: None)
    full = sim.step(sim.initial_state(run.q[-1], q_ref=run.q_ref[-1]), plan.commands(k))
    chain, s = [], fast.diagnostics.solution
    while s is not None:
        chain.append(s.lift_iterations)
        s = s.proximal_previous
    assert 0 in chain                         # at least one iterate was predicted
    np.testing.assert_allclose(fast.diagnostics.v, full.diagnostics.v, rtol=0,
                               atol=1e-9 * np.abs(full.diagnostics.v).max())
    np.testing.assert_allclose(fast.q_next, full.q_next, atol=1e-10)


def test_the_pushed_box_ends_where_the_finger_takes_it_and_on_the_table():
    """Check the stiff push: the box keeps pace with the finger's 0.1 m/s, on the table."""
    sim = stiff_push()
    q, q_ref = sim.default_positions(), None
    x = []
    for _ in range(15):
        result = sim.step(sim.initial_state(q, q_ref=q_ref), {'finger': np.array([0.1, 0.0, 0.0])})
        q, q_ref = result.q_next, result.state_next.q_ref
        x.append(sim.object_pose(q, 'box').translation())
    speeds = np.diff(np.array(x)[5:, 0]) / sim.h
    assert np.allclose(speeds, 0.1, rtol=2e-3), speeds
    assert result.diagnostics.min_phi_next > -1e-6


def test_gradients_through_the_iterates_match_central_differences():
    """Check a turning push in quasi-static mode where the iterates run: all three gradients."""
    sim = scene('finger_push.yaml')
    command = np.array([0.1, 0.02, 0.0])
    s = state(sim, 'finger', [command] * 5)
    result = sim.step(s, {'finger': command}, gradients=True)
    assert result.diagnostics.solution.proximal_previous is not None   # a proximal iterate
    assert not result.gradients.degenerate
    gradients = result.gradients
    for which, analytic in (('q', gradients.dq_next_dq), ('v_cmd', gradients.dq_next_dv_cmd),
                            ('q_ref', gradients.dq_next_dq_ref)):
        assert_close(analytic, central(sim, 'finger', s, command, which))


@pytest.mark.parametrize('value', [-1, 1.5, 'yes', True])
def test_a_bad_proximal_iterations_is_refused_with_the_key(value):
    """Check proximal_iterations: a whole number >= 0; the error names the key."""
    with pytest.raises(ScenarioError, match=r'qp\.proximal_iterations.*whole number'):
        QuasistaticSimulator(Scenario.from_dict({
            'include': 'finger_push.yaml', 'qp': {'proximal_iterations': value}},
            base_dir=CONFIG, source='bad iterates'))


def test_a_prediction_without_held_constraints_does_not_end_the_process():
    """Check the multipliers of an empty held set (scipy's nnls aborts on an empty matrix)."""
    from quasistatic_drake.formulations.active_set_step import _signed_multipliers
    assert _signed_multipliers(np.zeros((0, 3)), np.zeros(3), 0, 1e-9).shape == (0,)
    assert _signed_multipliers(np.zeros((0, 3)), np.ones(3), 0, 1e-9) is None
    assert _signed_multipliers(np.ones((1, 3)), np.full(3, np.nan), 1, 1e-9) is None
    mu = _signed_multipliers(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([2.0, -3.0]), 1, 1e-9)
    np.testing.assert_allclose(mu, [2.0, -3.0])             # a row's >= 0, a bound's <= 0
