"""
step(gradients=True): dq_next/dq, dq_next/dv_cmd and dq_next/dq_ref against central differences.

The QP on the scenes of config/: a finger pushing a box across the table
(the box a free body: quaternion coordinates), and two pads squeezing a
lifted box.  Central differences of whole steps (q_next at q +- 1e-6 e_i)
are the reference.
"""

import os

import numpy as np
import pytest

from conftest import REPO_ROOT
from quasistatic_drake import CommandError, QuasistaticSimulator, Scenario, State, Tangents
from quasistatic_drake.records import changed

EPS = 1e-6


def scene(name, formulation=None):
    scenario = Scenario.from_yaml(os.path.join(REPO_ROOT, 'config', name))
    return QuasistaticSimulator(scenario if formulation is None
                                else scenario.with_formulation(formulation))


def state(sim, robot, commands, warm=True):
    """Return the State after stepping through ``commands`` (``warm``: with warm starts)."""
    s = sim.initial_state()
    for command in commands:
        result = sim.step(s, {robot: command})
        assert result.success
        s = result.state_next if warm else result.state_next.with_warm_start(None)
    return s


def central(sim, robot, s, v_cmd, which):
    """Return the central differences of q_next in q, v_cmd or q_ref (the rest held)."""
    base = {'q': s.q, 'v_cmd': np.asarray(v_cmd, float), 'q_ref': s.q_ref}[which]
    columns = []
    for e in np.eye(len(base)):
        ends = []
        for sign in (1.0, -1.0):
            args = {'q': s.q, 'v_cmd': v_cmd, 'q_ref': s.q_ref}
            args[which] = base + sign * EPS * e
            start = State(q=args['q'], q_ref=args['q_ref'], warm_start=s.warm_start)
            ends.append(sim.step(start, {robot: args['v_cmd']}).q_next)
        columns.append((ends[0] - ends[1]) / (2 * EPS))
    return np.array(columns).T


def assert_close(analytic, fd):
    np.testing.assert_allclose(analytic, fd, rtol=1e-5, atol=1e-5 * np.abs(fd).max())


def test_pushed_box_gradients_match_central_differences():
    sim = scene('finger_push.yaml')
    s = state(sim, 'finger', [[0.1, 0.0, 0.0]] * 8)
    v_cmd = np.array([0.1, 0.0, 0.0])
    result = sim.step(s, {'finger': v_cmd}, gradients=True)
    assert result.success and not result.gradients.degenerate
    assert result.contact_set.n_c >= 2                   # finger-box and box-table
    n_q, n_a = len(s.q), 3
    assert result.gradients.dq_next_dq.shape == (n_q, n_q)
    gradients = result.gradients
    assert gradients.dq_next_dv_cmd.shape == gradients.dq_next_dq_ref.shape == (n_q, n_a)
    assert_close(result.gradients.dq_next_dq, central(sim, 'finger', s, v_cmd, 'q'))
    assert_close(result.gradients.dq_next_dv_cmd, central(sim, 'finger', s, v_cmd, 'v_cmd'))
    assert_close(result.gradients.dq_next_dq_ref, central(sim, 'finger', s, v_cmd, 'q_ref'))
    # the push moves the box: its x follows the finger's command
    box_x = sim.model.objects[0].q_idx[4]
    assert result.gradients.dq_next_dv_cmd[box_x, 0] > 0.01


def test_squeezed_box_command_gradients_and_the_changing_manifold():
    """
    Check the squeezed box: command gradients match, dq_next/dq is flagged.

    The pads' faces lie flat on the box's, held by friction: tilted, the box slips on
    one side or the other, and the forward and backward differences differ (a kink):
    dq_next/dq is one-sided there and the step says so.  (The pads' far corners, at
    the detection tolerance, come and go under a change of q; they do not matter.)
    """
    sim = scene('two_pads_lift.yaml')
    s = state(sim, 'pads', [[0.0, 0.2, -0.2]] * 3 + [[0.05, 0.0, 0.0]] * 2)
    v_cmd = np.array([0.05, 0.01, -0.01])
    result = sim.step(s, {'pads': v_cmd}, gradients=True)
    assert result.success and np.linalg.norm(result.forces_W, axis=1).max() > 1.0
    assert result.gradients.degenerate
    assert_close(result.gradients.dq_next_dv_cmd, central(sim, 'pads', s, v_cmd, 'v_cmd'))
    assert_close(result.gradients.dq_next_dq_ref, central(sim, 'pads', s, v_cmd, 'q_ref'))
    # squeezed, the box rises with the lift command: h / (1 + r), with the quasi-static
    # inertia ratio r (the objects' inertia eps M_u against the springs)
    r = sim.scenario.quasi_static_inertia_ratio
    box_z = sim.model.objects[0].q_idx[6]
    assert result.gradients.dq_next_dv_cmd[box_z, 0] == pytest.approx(sim.h / (1 + r),
                                                                      rel=1e-6)


def test_a_step_without_gradients_has_none():
    sim = scene('finger_push.yaml')
    result = sim.step(sim.initial_state(), {'finger': [0.1, 0.0, 0.0]})
    assert result.gradients is None


@pytest.mark.parametrize('name, steps, command', [
    ('halm_posa_push.yaml', 60, [0.05, -1.0, -0.02, -1.0]),
    ('halm_posa_wall.yaml', 110, [1.0, -1.0, 1.0, -1.0])])
def test_lcp_gradients_match_central_differences(name, steps, command):
    """formulation: lcp on Halm & Posa's disk: pushed by two fingers, and rolled on the wall."""
    sim = QuasistaticSimulator(Scenario.from_yaml(os.path.join(REPO_ROOT, 'config', name))
                               .with_formulation('lcp', feedback_scale=2.0 ** -4))
    s = state(sim, 'fingers', [command] * steps)
    v_cmd = np.array(command)
    result = sim.step(s, {'fingers': v_cmd}, gradients=True)
    assert result.success and not result.gradients.degenerate
    assert result.scaled_impulses_W.any(), 'not in contact: a weak test'
    assert_close(result.gradients.dq_next_dq, central(sim, 'fingers', s, v_cmd, 'q'))
    assert_close(result.gradients.dq_next_dv_cmd,
                 central(sim, 'fingers', s, v_cmd, 'v_cmd'))
    # the LCP's reference is q_a + h u: no q_ref enters the step
    np.testing.assert_array_equal(result.gradients.dq_next_dq_ref, 0.0)


def test_log_barrier_smoothing_gives_gradients_before_contact():
    """
    Check qsim's smoothing: a push's effect reaches the box before the finger does.

    The finger starts short of the box and moves 1 mm in the step: under the QP the
    box cannot feel it (d box_x / d v_cmd = 0); under the log barrier (qp:
    log_barrier_weight) the finger's row pushes at a distance and the derivative is
    informative.  The barrier's gradients match central differences of whole steps.
    """
    v_cmd = np.array([0.01, 0.0, 0.0])
    derivative = {}
    for kappa in (None, 1000.0):
        sim = scene('finger_push.yaml')
        if kappa is not None:
            sim = QuasistaticSimulator(sim.scenario.with_formulation(
                'qp', log_barrier_weight=kappa))
        s = sim.initial_state()
        result = sim.step(s, {'finger': v_cmd}, gradients=True)
        assert result.success
        gap = [phi for a, b, phi in zip(result.contact_set.body_a, result.contact_set.body_b,
                                        result.contact_set.phi) if 'finger' in a + b]
        assert gap and min(gap) > 1e-3                  # the finger does not reach the box
        box_x = sim.model.objects[0].q_idx[4]
        derivative[kappa] = result.gradients.dq_next_dv_cmd[box_x, 0]
        if kappa is not None:
            assert not result.gradients.degenerate
            assert_close(result.gradients.dq_next_dv_cmd,
                         central(sim, 'finger', s, v_cmd, 'v_cmd'))
            assert_close(result.gradients.dq_next_dq, central(sim, 'finger', s, v_cmd, 'q'))
    assert abs(derivative[None]) < 1e-12
    assert derivative[1000.0] > 1e-3


def test_a_bad_log_barrier_weight_is_refused():
    from quasistatic_drake.scenario import ScenarioError
    scenario = Scenario.from_yaml(os.path.join(REPO_ROOT, 'config', 'finger_push.yaml'))
    with pytest.raises(ScenarioError, match='qp.log_barrier_weight'):
        scenario.with_formulation('qp', log_barrier_weight=-1.0)


def test_arm_gradients_match_central_differences():
    """
    Check the arm scene (config/arm_pick_place.yaml) at its start, the arm in free space.

    The cylinder stands on the table: tilted either way, its rim's other points hold it
    and it is set back upright, so the active rows differ on the two sides and the KKT
    derivative is one-sided; solving again at +- 1e-6 shows that both sides agree
    (step_gradients.sides_compared), and every column matches.
    """
    sim = scene('arm_pick_place.yaml')
    s = sim.initial_state()
    v_cmd = 0.02 * np.ones(len(s.q_ref))    # inside the fingers' limits (0.05 reaches one)
    result = sim.step(s, {'iiwa': v_cmd}, gradients=True)
    assert result.success and not result.gradients.degenerate
    fd = central(sim, 'iiwa', s, v_cmd, 'q')
    np.testing.assert_allclose(result.gradients.dq_next_dq, fd, atol=1e-8)
    cylinder = sim.model.objects[0].q_idx
    assert np.abs(fd[:, cylinder]).max() > 0.1, 'the cylinder columns carry no information'
    assert_close(result.gradients.dq_next_dv_cmd, central(sim, 'iiwa', s, v_cmd, 'v_cmd'))
    assert_close(result.gradients.dq_next_dq_ref, central(sim, 'iiwa', s, v_cmd, 'q_ref'))
    # in free space each joint follows its command: dq_a' / dv_cmd = h I
    arm = sim.model.robots[0].q_idx
    block = result.gradients.dq_next_dv_cmd[arm]
    np.testing.assert_allclose(block, sim.h * np.eye(len(arm)), atol=1e-9)


def test_a_box_resting_flat_is_two_sided_when_its_sides_are_compared(monkeypatch):
    """
    Check a box at rest on the table (finger_push.yaml at its start).

    Its four corners share its weight (their impulses are not unique), so a tilt
    might unload some of them on one side only: the columns that change the rows
    are solved again on both sides; here they agree, and all of dq_next/dq matches.
    Without that check those columns stay one-sided.
    """
    sim = scene('finger_push.yaml')
    s = sim.initial_state()
    v_cmd = np.array([0.01, 0.0, 0.0])
    fd = central(sim, 'finger', s, v_cmd, 'q')
    result = sim.step(s, {'finger': v_cmd}, gradients=True)
    assert result.success and not result.gradients.degenerate
    assert_close(result.gradients.dq_next_dq, fd)
    monkeypatch.setattr(sim.formulation, 'checks_one_sided_by_solving', False)
    alone = sim.step(s, {'finger': v_cmd}, gradients=True)
    assert alone.gradients.degenerate


@pytest.mark.parametrize('name, robot, command, steps', [
    ('finger_push.yaml', 'finger', [0.01, 0.0, 0.0], 0),          # the box resting on 4 corners
    ('finger_push.yaml', 'finger', [0.1, 0.0, 0.0], 8),           # pushed, still on 4 corners
    ('two_pads_lift.yaml', 'pads', [0.02, 0.05, -0.05], 8)])      # squeezed, lifted
def test_commands_are_two_sided_by_the_conditions_where_loads_are_shared(
        monkeypatch, name, robot, command, steps):
    """
    Issue 30: a command moves no active row, so shared loads cannot unload under it.

    Before, every command column was flagged wherever contacts shared a load
    and solved again on both sides (2 solves per column: 7x a plain step).
    Now the conditions alone give them, two-sided, with no solve again, and
    they match central differences.
    """
    sim = scene(name)
    s = state(sim, robot, [command] * steps)
    monkeypatch.setattr(sim.formulation, 'checks_one_sided_by_solving', False)
    result = sim.step(s, {robot: command}, gradients='commands')
    assert result.success and not result.gradients.degenerate
    assert_close(result.gradients.dq_next_dv_cmd, central(sim, robot, s, command, 'v_cmd'))
    assert_close(result.gradients.dq_next_dq_ref, central(sim, robot, s, command, 'q_ref'))


def test_command_gradients_alone_equal_the_full_ones():
    """
    gradients="commands" (qsim's kBOnly): the same dv_cmd and q_ref columns, no dq_next_dq.

    Under True the command columns are solved in one least-squares solve with
    the q columns, so the two agree to that solve's round-off: the data's
    differences at 1e-6 carry eps / 1e-6 ~ 1e-10 of their scale (the pads'
    q_ref columns are such round-off, 1e-9 at most), not bit for bit.
    """
    for name, robot, command, formulation in [
            ('finger_push.yaml', 'finger', [0.1, 0.0, 0.0], None),
            ('two_pads_lift.yaml', 'pads', [0.02, 0.05, -0.05], None),
            ('finger_push.yaml', 'finger', [0.1, 0.05, -0.05], 'miqp')]:
        sim = scene(name, formulation)
        s = state(sim, robot, [command] * 4)
        full = sim.step(s, {robot: command}, gradients=True)
        alone = sim.step(s, {robot: command}, gradients='commands')
        assert alone.gradients.dq_next_dq is None and full.gradients.dq_next_dq is not None
        for which in ('dq_next_dv_cmd', 'dq_next_dq_ref'):
            np.testing.assert_allclose(getattr(alone.gradients, which),
                                       getattr(full.gradients, which), rtol=1e-9, atol=1e-8)
        np.testing.assert_array_equal(alone.q_next, full.q_next)


@pytest.mark.parametrize('name, robot, command, steps, formulation', [
    ('finger_push.yaml', 'finger', [0.1, 0.0, 0.0], 8, None),          # a quaternion body
    ('two_pads_lift.yaml', 'pads', [0.02, 0.05, -0.05], 8, None),
    ('finger_push.yaml', 'finger', [0.1, 0.05, -0.05], 4, 'miqp')])
def test_directions_give_dq_next_dq_times_them(name, robot, command, steps, formulation):
    """
    gradients=S (forward mode): dq_next/dq @ S from 2k detector runs, not 2 n_q.

    The same as the whole Jacobian times S, to the central differences'
    accuracy, and the command gradients are the same as ever.
    """
    sim = scene(name, formulation)
    s = state(sim, robot, [command] * steps)
    n_q = len(s.q)
    S = np.random.default_rng(30).normal(size=(n_q, 2))
    S[:, 1] = np.eye(n_q)[:, n_q - 1]                      # and one coordinate alone
    full = sim.step(s, {robot: command}, gradients=True)
    along = sim.step(s, {robot: command}, gradients=S)
    assert along.success and along.gradients.dq_next_dq is None
    assert full.gradients.dq_next_dq_along is None
    expected = full.gradients.dq_next_dq @ S
    np.testing.assert_allclose(along.gradients.dq_next_dq_along, expected, rtol=1e-6,
                               atol=1e-6 * np.abs(expected).max())
    for which in ('dq_next_dv_cmd', 'dq_next_dq_ref'):
        np.testing.assert_allclose(getattr(along.gradients, which),
                                   getattr(full.gradients, which), atol=1e-12)
    np.testing.assert_array_equal(along.q_next, full.q_next)


@pytest.mark.parametrize('name, robot, command, steps, formulation', [
    ('finger_push.yaml', 'finger', [0.1, 0.0, 0.0], 8, None),
    ('two_pads_lift.yaml', 'pads', [0.02, 0.05, -0.05], 8, None),
    ('halm_posa_push.yaml', 'fingers', [0.0, -1.0, 0.0, -1.0], 5, 'lcp'),
    ('finger_push.yaml', 'finger', [0.1, 0.05, -0.05], 4, 'miqp')])
def test_tangents_give_the_jacobian_vector_product(name, robot, command, steps, formulation):
    """
    gradients=Tangents(dq, dv_cmd, dq_ref): dq_next along each, and nothing else.

    Equal to dq_next/dq dq + dq_next/dv_cmd dv_cmd + dq_next/dq_ref dq_ref
    from the whole Jacobians, with a zero tangent giving zero.
    """
    sim = scene(name, formulation)
    s = state(sim, robot, [command] * steps)
    n_q, n_a = len(s.q), len(command)
    rng = np.random.default_rng(31)
    tangents = Tangents(rng.normal(size=(n_q, 3)), rng.normal(size=(n_a, 3)),
                        rng.normal(size=(n_a, 3)))
    tangents.dq[:, 2] = tangents.dv_cmd[:, 2] = tangents.dq_ref[:, 2] = 0.0
    full = sim.step(s, {robot: command}, gradients=True)
    jvp = sim.step(s, {robot: command}, gradients=tangents)
    assert jvp.success and jvp.gradients.dq_next_dq is None
    assert jvp.gradients.dq_next_dv_cmd is None and jvp.gradients.dq_next_dq_ref is None
    chain = full.gradients
    expected = (chain.dq_next_dq @ tangents.dq + chain.dq_next_dv_cmd @ tangents.dv_cmd
                + chain.dq_next_dq_ref @ tangents.dq_ref)
    np.testing.assert_allclose(jvp.gradients.dq_next_tangents, expected, rtol=1e-6,
                               atol=1e-6 * np.abs(expected).max())
    assert not np.any(jvp.gradients.dq_next_tangents[:, 2])
    np.testing.assert_array_equal(jvp.q_next, full.q_next)


def test_bad_tangents_are_refused_by_part():
    sim = scene('finger_push.yaml')
    s = sim.initial_state()
    good = np.zeros((3, 2))
    for bad, why in ((Tangents(np.ones((10, 2)), np.ones((3, 1)), good),
                      r'Tangents.dv_cmd: directions must be 3 x 2 .*got shape \(3, 1\)'),
                     (Tangents(np.ones((9, 2)), good, good), r'Tangents.dq: .*must be 10 x k'),
                     (Tangents(np.ones((10, 2)), good, np.full((3, 2), np.inf)),
                      r'Tangents.dq_ref: directions hold NaN or inf')):
        with pytest.raises(CommandError, match=why):
            sim.step(s, {'finger': [0.1, 0.0, 0.0]}, gradients=bad)


def test_a_bad_gradients_value_is_refused_and_changes_nothing():
    sim = scene('finger_push.yaml')
    s = sim.initial_state()
    before = sim.step(s, {'finger': [0.1, 0.0, 0.0]})
    for bad in ('all', 1, None):
        with pytest.raises(CommandError, match="gradients must be True, False, 'commands', an "
                                               "n_q x k array of directions or Tangents"):
            sim.step(s, {'finger': [0.1, 0.0, 0.0]}, gradients=bad)
    for bad, why in ((np.ones(10), r'must be 10 x k with k >= 1 .*got shape \(10,\)'),
                     (np.ones((9, 2)), r'got shape \(9, 2\)'),
                     (np.ones((10, 0)), r'got shape \(10, 0\)'),
                     (np.full((10, 1), np.nan), 'NaN or inf'),
                     ([['a'] * 2] * 10, 'array of numbers')):
        with pytest.raises(CommandError, match=why):
            sim.step(s, {'finger': [0.1, 0.0, 0.0]}, gradients=bad)
    np.testing.assert_array_equal(sim.step(s, {'finger': [0.1, 0.0, 0.0]}).q_next, before.q_next)


@pytest.mark.parametrize('name', ['arm_pick_place.yaml', 'finger_push.yaml'])
def test_the_integrations_velocity_jacobian_matches_its_central_differences(name):
    """The integration's d q_next / dv: h N(q) for the joints, the screw's for free bodies."""
    from quasistatic_drake.step_gradients import _integration_jacobians
    sim = scene(name)
    loop, q = sim.loop, sim.initial_state().q
    v = np.random.default_rng(30).normal(scale=2.0, size=loop.model.n_v)   # turning fast
    loop.model.set_positions(q)
    _, dI_dv = _integration_jacobians(loop, q, v, None)
    step = 1e-6
    fd = np.array([(loop.integrate(q, v + step * e) - loop.integrate(q, v - step * e))
                   / (2 * step) for e in np.eye(len(v))]).T
    np.testing.assert_allclose(dI_dv, fd, rtol=1e-7, atol=1e-8)
    assert len(loop.model.floating_starts)       # a free body's screw is among the rows


def test_command_columns_are_the_differences_of_the_steps_own_data():
    """
    The QP's command columns: b's and the trust bounds' central differences, all at once.

    Compared with the step's own data (QpFormulation._cost, _trust_bounds) at
    each side, on the pads squeezing a box (rho follows the commands there,
    so the bounds move).  A column whose problem differs in anything but the
    commands (here the trust share) is not taken as a command's: it keeps
    its own data.
    """
    sim = scene('two_pads_lift.yaml')
    command = np.array([0.02, 0.05, -0.05])
    s = state(sim, 'pads', [command] * 6)
    qp, loop = sim.formulation, sim.loop
    problem = loop.problem(s.q, s.q, s.q_ref, command, None, None)
    contacts = loop.contacts(s.q, sim.scenario.contact_detection_tolerance)
    delta = 1e-6
    directions = np.eye(6)[:, [0, 1, 2, 5]]
    changes = [tuple((changed(problem, v_cmd=problem.v_cmd + sign * delta * d[:3],
                              q_ref=problem.q_ref + sign * delta * d[3:]), contacts)
                     for sign in (1.0, -1.0)) for d in directions.T]
    changes.append(((changed(problem, trust=0.5), contacts), (problem, contacts)))
    commands, db, dlower, dupper = qp._command_derivatives(problem, contacts, changes, delta,
                                                           qp._trust_radius(problem))
    np.testing.assert_array_equal(commands, [True, True, True, True, False])
    for j, ((plus, _), (minus, _)) in enumerate(changes[:4]):
        expected_b = (qp._cost(plus).b - qp._cost(minus).b) / (2 * delta)
        np.testing.assert_allclose(db[:, j], expected_b, rtol=1e-9, atol=1e-9)
        (low_p, up_p), (low_m, up_m) = qp._trust_bounds(plus), qp._trust_bounds(minus)
        np.testing.assert_allclose(dlower[:, j], (low_p - low_m) / (2 * delta), atol=1e-6)
        np.testing.assert_allclose(dupper[:, j], (up_p - up_m) / (2 * delta), atol=1e-6)
    assert np.abs(dupper[:, :4]).max() > 1.0, 'no column moved the trust bounds'
    assert not db[:, 4].any() and not dupper[:, 4].any()
