"""The MIQP step (Pang & Tedrake 2018, eq. 23) on Gurobi, SCIP and DAQP; the paper's 2D example."""

from dataclasses import replace
import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO_ROOT
from quasistatic_drake import CommandError, QuasistaticSimulator, Scenario, ScenarioError
from quasistatic_drake.apps import paper_2d as P
from quasistatic_drake.formulations.miqp import MiqpSettings, miqp_data
from quasistatic_drake.formulations.miqp_backends import (BACKENDS, GurobiBackend,
                                                          MiqpTooLarge)

TWO_PADS = f'{REPO_ROOT}/config/two_pads_lift.yaml'


@pytest.fixture(scope='module', params=['gurobi', 'daqp'])
def hand_written(request):
    """Pang & Tedrake 2018's example from eqs. 24-28, with Gurobi and with DAQP."""
    return request.param, P.run_hand_written(request.param)


def test_paper_2d_matches_the_paper(hand_written):
    _, a = hand_written
    assert a.touch_step == 21, 'the fingers touch the cylinder at step 21 (Sec. V-A)'
    squeezed = slice(21, 40)                      # steps 22..40: lifted with y_g
    np.testing.assert_allclose(a.cylinder_y[squeezed] - a.q[squeezed, 4], 0.03, atol=1e-9)
    assert a.cylinder_y.max() == pytest.approx(0.05 + 0.019, abs=1e-9)
    np.testing.assert_allclose(a.cylinder_y[41:], 0.05, atol=1e-9)   # teleports back to r
    # The fingers stop at the surface: the x command is not followed while squeezing.
    np.testing.assert_allclose(a.q[21:40, 2], -0.05, atol=1e-9)
    np.testing.assert_allclose(a.q[21:40, 3], 0.05, atol=1e-9)
    # Normal force = K * hypothetical penetration = 1e4 * 0.01 * 0.1 = 10 N (eq. 23f).
    np.testing.assert_allclose(a.normal_force[20:39], 10.0, atol=1e-6)
    np.testing.assert_allclose(a.normal_force[:20], 0.0, atol=1e-9)
    assert np.all(a.phi >= -1e-9)


@pytest.mark.parametrize('backend', ['gurobi', 'daqp'])
def test_lcp_scheme_leaves_the_cylinder_on_the_table(backend):
    lcp = P.run_hand_written(backend, lcp=True)
    np.testing.assert_allclose(lcp.cylinder_y, 0.05, atol=1e-9)
    np.testing.assert_allclose(lcp.normal_force, 0.0, atol=1e-9)
    np.testing.assert_allclose(lcp.q[-1, 4], 0.1 * 0.01 * 20, atol=1e-12)  # the gripper rose


def test_drake_path_agrees_with_the_hand_written_model(hand_written):
    backend, a = hand_written
    b = P.run_drake(backend)
    np.testing.assert_allclose(b.q, a.q, rtol=0, atol=1e-6)
    np.testing.assert_allclose(b.normal_force, a.normal_force, rtol=0, atol=1e-6)
    assert b.touch_step == 21


def test_daqp_and_gurobi_give_the_same_paper_2d_trajectory():
    """Check that DAQP's regularised eq. 23 moves the gripper and cylinder as Gurobi's (1e-8 m)."""
    gurobi, daqp = P.run_hand_written('gurobi'), P.run_hand_written('daqp')
    np.testing.assert_allclose(daqp.q, gurobi.q, rtol=0, atol=1e-8)
    np.testing.assert_allclose(daqp.normal_force, gurobi.normal_force, rtol=0, atol=1e-6)


def paper_problems():
    """Return MIQP data of the paper's example at several configurations."""
    settings = MiqpSettings()
    out = []
    for q, command in [(P.Q0, [0.1, -0.1, 0.1]),
                       (P.Q0 + [0, 0, 0.02, -0.02, 0.02], [0.1, -0.1, 0.1]),
                       (P.Q0 + [0, 0.01, 0.02, -0.02, 0.03], [0.1, -0.1, 0.1]),
                       (P.Q0 + [0, 0.01, 0.02, -0.02, 0.03], [-0.1, 0.1, 0.0])]:
        out.append(miqp_data(P.contact_set_eqs_24_28(np.array(q)), P.H, P.IDX_U, P.IDX_A,
                             P.H * np.array(command), np.array([0.0, -9.81]), settings,
                             np.full(5, -np.inf), np.full(5, np.inf), 0.05, 9.81))
    return out


@pytest.mark.parametrize('other', ['scip', 'daqp'])
def test_the_backends_agree_on_optimal_objectives(other):
    gurobi, solver = BACKENDS['gurobi'](), BACKENDS[other]()
    settings = MiqpSettings(least_force=False)
    for data in paper_problems():
        a, b = gurobi.solve(data, settings), solver.solve(data, settings)
        assert a.status == b.status == 'optimal'
        assert a.objective == pytest.approx(b.objective, abs=1e-12, rel=1e-5)
        np.testing.assert_allclose(a.x[P.IDX_A], b.x[P.IDX_A], atol=1e-6)


def test_tight_big_m_is_reported():
    data = paper_problems()[1]                      # squeezing: P_n >= 10 N * h = 0.1 N s
    small = replace(data, M_lambda=np.full_like(data.M_lambda, 0.1),
                    M_w=np.full_like(data.M_w, 0.1))
    answer = GurobiBackend().solve(small, MiqpSettings())
    assert answer.status == 'optimal'
    assert any(name.startswith('P_n') for name in answer.tight_big_m), answer.tight_big_m
    auto = GurobiBackend().solve(data, MiqpSettings())
    assert auto.tight_big_m == ()


def test_gurobi_size_limit_is_a_clear_error():
    # 16 friction directions: the pads' 12 contacts make 12 (2 + 16) + 12 + 4 > 200 variables.
    scenario = replace(Scenario.from_yaml(TWO_PADS), friction_directions=16)
    sim = QuasistaticSimulator(scenario.with_formulation('miqp', backend='gurobi'))
    q = sim.default_positions()
    with pytest.raises(MiqpTooLarge, match=r"allows only 200 variables in a model with a "
                                           r"quadratic objective.*Fix: fewer points per contact "
                                           r"patch \(miqp.max_points_per_pair: 3.*"
                                           r"miqp.backend: scip"):
        for _ in range(3):                           # the pads close on the box
            q = sim.step(sim.initial_state(q), {'pads': [0.0, 0.1, -0.1]}).q_next


@pytest.mark.parametrize('backend', ['scip', 'daqp'])
def test_miqp_pads_lift_the_box(backend):
    """The pads squeeze the box and lift it (eq. 29), every step cold, under SCIP and DAQP."""
    scenario = Scenario.from_yaml(TWO_PADS)
    scenario = scenario.with_formulation('miqp', backend=backend)
    sim = QuasistaticSimulator(scenario)
    q = sim.default_positions()
    for command, steps in (([0.0, 0.1, -0.1], 3), ([0.1, 0.1, -0.1], 4)):
        for _ in range(steps):
            result = sim.step(sim.initial_state(q), {'pads': command})   # squeeze, lift (eq. 29)
            assert result.success, result.status
            q = result.q_next
            assert sim.min_signed_distance(q) >= -1e-3
    box = sim.object_pose(q, 'box').translation()
    assert box[2] > 0.05 + 0.03, f'the squeezed box rises with the pads: {box}'


def test_delayed_lower_bound_still_lifts():
    scenario = Scenario.from_yaml(f'{REPO_ROOT}/config/paper_2d.yaml')
    scenario = scenario.with_formulation(delayed_lower_bound=True)
    sim = QuasistaticSimulator(scenario)
    q, q_ref, z = sim.default_positions(), None, None
    for step in range(1, 40):
        x_l, x_r, y_g = P.command_eq29(step)
        result = sim.step(sim.initial_state(q, q_ref=q_ref, warm_start=z),
                          {'gripper': [y_g, x_l, x_r]})
        assert result.success
        q, q_ref, z = result.q_next, result.state_next.q_ref, result.state_next.warm_start
    assert q[4] > 0.065, 'held by the one-step-delayed lower bound, the cylinder rises'


def test_bad_miqp_settings_are_clear(tmp_path):
    data = {'time_step': 0.01, 'formulation': 'miqp',
            'robots': [{'name': 'f', 'file': 'package://quasistatic_drake/urdf/finger.urdf',
                        'stiffness': [1, 1, 1]}]}
    for miqp, message in [({'backend': 'cplex'}, "unknown MIQP backend 'cplex'"),
                          ({'big_m': -1}, 'miqp.big_m: must be > 0'),
                          ({'big_m': 'large'}, 'miqp.big_m: expected a number'),
                          ({'time_limit': 0}, 'miqp.time_limit: must be > 0'),
                          ({'stiffness': 1}, "miqp: unknown key(s) ['stiffness']")]:
        with pytest.raises(ScenarioError, match=message.replace('(', r'\(').replace(
                ')', r'\)').replace('[', r'\[').replace(']', r'\]')):
            Scenario.from_dict({**data, 'miqp': miqp}, base_dir=tmp_path)


def test_paper_2d_cli_writes_json_and_png(tmp_path):
    out = tmp_path / 'paper.json'
    png = tmp_path / 'paper.png'
    done = subprocess.run([sys.executable, '-m', 'quasistatic_drake.apps.cli', 'paper-2d',
                           '--json', str(out), '--png', str(png)], capture_output=True, text=True,
                          timeout=600, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr
    summary = json.loads(out.read_text())
    assert summary['touch_step'] == 21
    assert len(summary['cylinder_y']) == 61 and len(summary['normal_force']) == 60
    assert max(summary['lcp_cylinder_y']) == pytest.approx(0.05, abs=1e-9)
    assert png.stat().st_size > 10_000


def test_a_contact_with_zero_jacobian_rows_is_handled_by_every_backend():
    contacts = P.contact_set_eqs_24_28(P.Q0)
    J_n, J_f = contacts.J_n.copy(), contacts.J_f.copy()
    J_n[0] = 0.0                                  # contact 1 cannot move: constant rows
    J_f[0:2] = 0.0
    contacts = replace(contacts, J_n=J_n, J_f=J_f)
    data = miqp_data(contacts, P.H, P.IDX_U, P.IDX_A, P.H * np.array([0.1, -0.1, 0.1]),
                     np.array([0.0, -9.81]), MiqpSettings(), np.full(5, -np.inf),
                     np.full(5, np.inf), 0.05, 9.81)
    answers = [BACKENDS[name]().solve(data, MiqpSettings()) for name in BACKENDS]
    assert [a.status for a in answers] == ['optimal'] * len(BACKENDS)
    for other in answers[1:]:
        assert answers[0].objective == pytest.approx(other.objective, abs=1e-12)


def tilted_box_contacts(tmp_path, pitch):
    """Return the manifold of a 0.2 x 0.1 x 0.1 box resting on one edge, tilted by pitch."""
    from conftest import ground_entry, make_sim, sdf_box_object, write
    sim = make_sim(tmp_path, {
        'objects': [{'name': 'box', 'file': write(tmp_path, 'box.sdf',
                                                  sdf_box_object('box', (0.2, 0.1, 0.1), 1.0)),
                     'initial_pose': {'xyz': [0, 0, 0.05 + 0.1 * np.sin(pitch)],
                                      'rpy': [0, pitch, 0]}}],
        'environment': [ground_entry(tmp_path)]})
    sim.model.set_positions(sim.default_positions())
    return sim.detector.detect(0.02)


@pytest.mark.parametrize('pitch, spread', [(0.001, np.hypot(0.2, 0.1)), (0.05, 0.1)])
def test_thin_contacts_keeps_the_deepest_and_the_touching_spread(tmp_path, pitch, spread):
    from quasistatic_drake.contact import thin_contacts
    full = tilted_box_contacts(tmp_path, pitch)
    assert full.n_c >= 4
    thin = thin_contacts(full, 2)
    assert thin.n_c == 2
    assert np.min(thin.phi) == np.min(full.phi), 'the deepest point is kept'
    # Nearly flat: the diagonal corner (all four touch); tilted: only the corners of
    # the low edge touch, and the second point is the other end of that edge.
    assert np.linalg.norm(thin.point_A_W[0] - thin.point_A_W[1]) == pytest.approx(spread,
                                                                                  abs=2e-3)
    rows = [np.flatnonzero(np.all(full.J_n == row, axis=1))[0] for row in thin.J_n]
    for k, i in enumerate(rows):
        np.testing.assert_array_equal(thin.J_f[k * full.n_d:(k + 1) * full.n_d],
                                      full.J_f[i * full.n_d:(i + 1) * full.n_d])
    assert thin_contacts(full, 10).n_c == full.n_c


def test_max_points_per_pair_is_checked(tmp_path):
    with pytest.raises(ScenarioError, match='max_points_per_pair: expected a positive integer'):
        Scenario.from_dict({'time_step': 0.1, 'miqp': {'max_points_per_pair': 0},
                            'objects': [{'name': 'box',
                                         'file': 'package://quasistatic_drake/urdf/box.urdf'}]})


def standing_cylinder_contacts(tmp_path):
    """Return the manifold of a cylinder (r 0.03 m) standing on the ground."""
    from conftest import ground_entry, make_sim, sdf_shape_object, write
    geometry = '<cylinder><radius>0.03</radius><length>0.14</length></cylinder>'
    sim = make_sim(tmp_path, {
        'objects': [{'name': 'can', 'file': write(tmp_path, 'can.sdf', sdf_shape_object(
            'can', geometry, 0.4, (7e-4, 7e-4, 2e-4))),
            'initial_pose': {'xyz': [0.1, 0.2, 0.07]}}],
        'environment': [ground_entry(tmp_path)]})
    sim.model.set_positions(sim.default_positions())
    return sim.detector.detect(0.02)


def centroid_depth_in_polygon(points_xy, centroid_xy):
    """Return how far centroid_xy lies inside the convex hull of points_xy (< 0: outside)."""
    from scipy.spatial import ConvexHull
    hull = ConvexHull(points_xy)
    # hull.equations: n . x + c <= 0 inside, n unit.
    return float(-np.max(hull.equations[:, :2] @ centroid_xy + hull.equations[:, 2]))


@pytest.mark.parametrize('per_pair', [3, 4])
def test_thin_contacts_keeps_the_centre_of_a_disc_inside_its_polygon(tmp_path, per_pair):
    from quasistatic_drake.contact import thin_contacts
    full = standing_cylinder_contacts(tmp_path)
    assert full.n_c > 4, 'the disc on the ground is a patch of many points'
    thin = thin_contacts(full, per_pair)
    assert thin.n_c == per_pair
    # The kept polygon holds the disc's centre well inside (a triangle of a diameter
    # and a point beside it had the centre on its edge: the can could tip into the ground).
    depth = centroid_depth_in_polygon(thin.point_A_W[:, :2], np.array([0.1, 0.2]))
    inscribed = 0.03 * np.cos(np.pi / per_pair)      # the regular polygon's inradius
    assert depth > 0.5 * inscribed


def test_thin_contacts_keeps_the_four_corners_of_a_face(tmp_path):
    from quasistatic_drake.contact import thin_contacts
    full = tilted_box_contacts(tmp_path, 0.001)
    thin = thin_contacts(full, 4)
    xy = thin.point_A_W[:, :2]
    np.testing.assert_allclose(np.abs(xy), np.tile([0.1, 0.05], (4, 1)), atol=2e-3)
    assert len({(np.sign(x), np.sign(y)) for x, y in xy}) == 4, 'one point per corner'


def pad_forces(per_pair):
    """Squeeze the two-pad scene's box under the MIQP; return each pad's total normal force."""
    scenario = Scenario.from_yaml(TWO_PADS)
    scenario = scenario.with_formulation('miqp', max_points_per_pair=per_pair)
    sim = QuasistaticSimulator(scenario)
    q = sim.default_positions()
    for _ in range(4):                                  # close, then squeeze into the box
        result = sim.step(sim.initial_state(q), {'pads': [0.0, 0.1, -0.1]})
        assert result.success, result.status
        q = result.q_next
    forces = {}
    for contact in result.contacts:
        pads = [b for b in (contact.body_a, contact.body_b) if 'pads::' in b]
        if pads:
            normal = abs(float(contact.force_W @ contact.normal_W))
            forces[pads[0]] = forces.get(pads[0], 0.0) + normal
    return result, forces


def test_normal_force_lower_bound_holds_per_body_pair():
    """Eq. 23f per pair: the squeeze force does not grow with the points sampled per pad."""
    two, forces_two = pad_forces(2)
    four, forces_four = pad_forces(4)
    # the points solved with
    assert four.diagnostics.solution.binaries > two.diagnostics.solution.binaries
    assert sorted(forces_two) == sorted(forces_four) and len(forces_two) == 2
    K, h = MiqpSettings().contact_stiffness, 0.1
    for pad, force in forces_two.items():
        assert force == pytest.approx(forces_four[pad], rel=1e-6)
        # The pads stop at the box; the command would have moved them h * 0.1 m further.
        assert force == pytest.approx(K * h * 0.1, rel=1e-6)


@pytest.mark.parametrize('backend', ['gurobi', 'scip', 'daqp'])
def test_an_infeasible_miqp_is_reported_and_the_state_is_kept(tmp_path, backend):
    """A box in mid-air has no contact to hold it: force balance (23a) is infeasible."""
    from conftest import ground_entry, make_sim, pads_robot, sdf_box_object, write
    sim = make_sim(tmp_path, {
        'formulation': 'miqp', 'miqp': {'backend': backend},
        'robots': [pads_robot(tmp_path, 0.8)],
        'objects': [{'name': 'box', 'file': write(tmp_path, 'box.sdf',
                                                  sdf_box_object('box', (0.1, 0.1, 0.1), 1.0)),
                     'initial_pose': {'xyz': [0.0, 0.0, 0.5]}}],
        'environment': [ground_entry(tmp_path)]})
    q = sim.default_positions()
    result = sim.step(sim.initial_state(q), {'pads': [0.0, 0.1, -0.1]})
    assert not result.success
    assert 'infeasible' in result.status
    np.testing.assert_array_equal(result.q_next, q)
    assert result.contact_set.n_c == 0 or np.all(result.forces_W == 0.0)


FINGER_PUSH = f'{REPO_ROOT}/config/finger_push.yaml'


def finger_push(formulation, command, steps):
    """Run the finger-push scene; return (sim, q, last result)."""
    sim = QuasistaticSimulator(replace(Scenario.from_yaml(FINGER_PUSH),
                                       formulation=formulation))
    q, q_ref, z = sim.default_positions(), None, None
    for _ in range(steps):
        result = sim.step(sim.initial_state(q, q_ref=q_ref, warm_start=z), {'finger': command})
        assert result.success, result.status
        q, q_ref, z = result.q_next, result.state_next.q_ref, result.state_next.warm_start
    return sim, q, result


def net_contact_force_on(result, body):
    """Return the sum of the contact forces on ``body`` [N]."""
    total = np.zeros(3)
    for contact in result.contacts:
        if contact.body_b == body:
            total += contact.force_W
        elif contact.body_a == body:
            total -= contact.force_W
    return total


def test_the_squeeze_and_lift_beyond_gurobis_licence_run_under_daqp():
    """
    The scene of test_gurobi_size_limit_is_a_clear_error (> 200 variables) under DAQP.

    The pads close on the box, squeeze it and lift it off the table (eq. 29's
    commands): every step succeeds, cold (no MIP start), and the box rises.
    """
    scenario = replace(Scenario.from_yaml(TWO_PADS), friction_directions=16)
    sim = QuasistaticSimulator(scenario.with_formulation('miqp', backend='daqp'))
    q = sim.default_positions()
    binaries = 0
    for command, steps in (([0.0, 0.1, -0.1], 4), ([0.1, 0.1, -0.1], 4)):   # squeeze, lift
        for _ in range(steps):
            result = sim.step(sim.initial_state(q), {'pads': command})
            assert result.success, result.status
            q = result.q_next
            binaries = max(binaries, result.diagnostics.solution.binaries)
            assert sim.min_signed_distance(q) >= -1e-3
    assert binaries * 2 + sim.model.n_v > 200, 'beyond the licence of the pip Gurobi'
    box = sim.object_pose(q, 'box').translation()
    assert box[2] > 0.05 + 0.03, f'the squeezed box rises with the pads: {box}'


def test_miqp_keeps_a_resting_box_at_rest():
    sim, q, result = finger_push('miqp', [0.0, 0.0, 0.0], 5)
    np.testing.assert_array_equal(q, sim.default_positions())
    weight = np.array([0.0, 0.0, 9.81])                    # the 1 kg box
    np.testing.assert_allclose(net_contact_force_on(result, 'box::box_link'), weight,
                               atol=1e-6)


def test_miqp_and_qp_agree_on_free_motion():
    """The finger rises away from the box: both follow the command exactly."""
    command = [0.0, 0.05, 0.1]
    _, q_qp, _ = finger_push('qp', command, 4)
    sim, q_miqp, _ = finger_push('miqp', command, 4)
    # Gurobi's continuous solutions are exact to about 1e-8 m (its tolerances are
    # absolute); DAQP's, the QP's, to 1e-15.
    np.testing.assert_allclose(q_miqp, q_qp, atol=1e-7)
    np.testing.assert_allclose(sim.robot_positions(q_miqp, 'finger'),
                               np.array([-0.08, 0.0, 0.05]) + 0.4 * np.array(command), atol=1e-7)


def test_miqp_pushes_the_box_like_the_qp_and_balances_its_forces():
    """A firm push through the box's centre: it slides straight ahead of the finger."""
    command = [0.1, 0.0, 0.0]
    sim_qp, q_qp, result_qp = finger_push('qp', command, 6)
    sim, q, result = finger_push('miqp', command, 6)
    box = sim.object_pose(q, 'box')
    finger_x = sim.robot_positions(q, 'finger')[0]
    # The MIQP's finger follows its command (-0.08 + 0.06) but for the tie-break's
    # pull, at most eps = 1e-6 of the box's travel; the box's face (0.05 from its
    # centre) stays on the finger's surface (radius 0.02).
    assert finger_x == pytest.approx(-0.02, abs=1e-6 * 0.05 + 1e-7)
    np.testing.assert_allclose(box.translation(), [finger_x + 0.02 + 0.05, 0.0, 0.05],
                               atol=1e-6)
    assert tilt_deg_of(box) < 1e-3
    # The QP's finger is a spring (K = 1000 N/m): it lags by its push force over K.
    push = sum(c.force_W[0] for c in result_qp.contacts if c.body_a.startswith('finger::'))
    x_qp = sim_qp.object_pose(q_qp, 'box').translation()[0]
    assert box.translation()[0] - x_qp == pytest.approx(push / 1000.0, abs=1e-3)
    # Quasistatic force balance on the box (23a): contact forces carry its weight.
    np.testing.assert_allclose(net_contact_force_on(result, 'box::box_link'),
                               [0.0, 0.0, 9.81], atol=1e-6)


def tilt_deg_of(X):
    """Return the angle between a pose's z axis and the world's, in degrees."""
    return float(np.degrees(np.arccos(np.clip(X.rotation().matrix()[2, 2], -1.0, 1.0))))


def test_the_mip_start_is_an_explicit_input_and_output():
    """Same arguments, same result, whatever was solved in between; bad starts are refused."""
    sim = QuasistaticSimulator(Scenario.from_yaml(f'{REPO_ROOT}/config/paper_2d.yaml'))
    q = sim.default_positions()
    command = {'gripper': [0.0, 0.1, -0.1]}
    first = sim.step(sim.initial_state(q), command)
    z = first.state_next.warm_start
    assert z is not None and z.size == first.contact_set.n_c * (2 + first.contact_set.n_d)
    assert set(np.unique(z)) <= {0.0, 1.0}
    again = sim.step(first.state_next, command)
    sim.step(sim.initial_state(q), {'gripper': [0.0, -0.1, 0.1]})              # unrelated solves
    sim.step(first.state_next.with_warm_start(1.0 - z), {'gripper': [0.1, 0.0, 0.0]})
    later = sim.step(first.state_next, command)
    for name, get in (('q_next', lambda r: r.q_next), ('q_ref', lambda r: r.state_next.q_ref),
                      ('v', lambda r: r.diagnostics.v), ('forces_W', lambda r: r.forces_W),
                      ('warm_start', lambda r: r.state_next.warm_start)):
        np.testing.assert_array_equal(get(again), get(later), err_msg=name)
    with pytest.raises(CommandError, match=r'a MIP start\) must hold only 0 and 1.*Fix'):
        sim.step(sim.initial_state(q, warm_start=[0.5] * z.size), command)
    with pytest.raises(CommandError, match=r'warm_start \(a MIP start\) must be a sequence.*Fix'):
        sim.step(sim.initial_state(q, warm_start='warm'), command)
    qp = QuasistaticSimulator(Scenario.from_yaml(FINGER_PUSH))
    with pytest.raises(CommandError, match=r"formulation 'qp' takes the ContactMemory of its "
                                           r"last step .* got ndarray. Fix"):
        qp.step(qp.initial_state(qp.default_positions(), warm_start=z), {})


def test_a_failed_miqp_step_hands_on_the_start_it_was_given(tmp_path):
    from conftest import ground_entry, make_sim, pads_robot, sdf_box_object, write
    sim = make_sim(tmp_path, {
        'formulation': 'miqp', 'robots': [pads_robot(tmp_path, 0.8)],
        'objects': [{'name': 'box', 'file': write(tmp_path, 'box.sdf',
                                                  sdf_box_object('box', (0.1, 0.1, 0.1), 1.0)),
                     'initial_pose': {'xyz': [0.0, 0.0, 0.5]}}],
        'environment': [ground_entry(tmp_path)]})
    start = np.array([1.0, 0.0, 1.0])
    result = sim.step(sim.initial_state(warm_start=start), {'pads': [0.0, 0.1, -0.1]})
    assert not result.success
    np.testing.assert_array_equal(result.state_next.warm_start, start)


def test_the_backends_do_not_import_the_formulation():
    """miqp_backends.py depends on eq. 23's data types (miqp_data.py), not on miqp.py."""
    done = subprocess.run([sys.executable, '-c', (
        'import sys, quasistatic_drake.formulations.miqp_backends as b; '
        'print(sorted(m for m in sys.modules if m.startswith("quasistatic_drake.formulations'
        '.miqp")))')], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr
    loaded = eval(done.stdout)
    assert 'quasistatic_drake.formulations.miqp_data' in loaded
    assert 'quasistatic_drake.formulations.miqp' not in loaded, loaded
