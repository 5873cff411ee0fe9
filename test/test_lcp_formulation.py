"""
formulation: lcp (Halm & Posa) through the engine: the theorems, the QP identity, the scenes.

Closed-form checks of the time-stepping LCP (eqs. 17-19, 31-38): M(cB) is
copositive with z^T M z = F_o^T A F_o + F_m^T c B F_m + gamma^T mu lambda_N
(eq. 19); the per-step form of Thm 2; one frictionless LCP step with
A = h (eps M_u)^-1 and c B = (h K)^-1 equals one quasi-static QP step
(Pang & Tedrake 2021) without preload.  Then the Drake path: the URDF
scenes of Sec. 6.1, the jam at c = 0, the labelling of scaled impulses,
the refusals of what the planar model cannot honour, and QuasistaticPlant
with Meshcat.
"""

import os

import numpy as np
import pytest
import yaml

from conftest import REPO_ROOT
from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.contact import ContactSet
from quasistatic_drake.formulations import registry
from quasistatic_drake.formulations.lcp import LcpFormulation, LcpSettings
from quasistatic_drake.formulations.lcp_math import (finite_feedback_lcp, PlanarContacts,
                                                     step_displacements)
from quasistatic_drake.formulations.lcp_solvers import solve_lcp
from quasistatic_drake.formulations.anitescu import solve_qp_step
from quasistatic_drake.formulations.qp import qp_cost
from quasistatic_drake.scenario import ScenarioError

CONFIG = os.path.join(REPO_ROOT, 'config')
PUSH = os.path.join(CONFIG, 'halm_posa_push.yaml')
WALL = os.path.join(CONFIG, 'halm_posa_wall.yaml')


def random_contacts(rng, n_c, n_o=3, n_m=4, frictionless=0):
    """Return random planar contact rows (n_c frictional, then ``frictionless`` rows)."""
    n_n = n_c + frictionless
    return PlanarContacts(phi=rng.uniform(0.0, 0.05, n_n),
                          J_n_o=rng.normal(size=(n_n, n_o)), J_n_m=rng.normal(size=(n_n, n_m)),
                          J_t_o=rng.normal(size=(2 * n_c, n_o)),
                          J_t_m=rng.normal(size=(2 * n_c, n_m)),
                          mu=rng.uniform(0.2, 1.0, n_c))


# ----- the theorems ------------------------------------------------------------------------
@pytest.mark.parametrize('seed', range(5))
def test_m_is_copositive_with_the_energy_of_eq_19(seed):
    rng = np.random.default_rng(seed)
    contacts = random_contacts(rng, 6, frictionless=2)
    G = rng.normal(size=(3, 3))
    A = G @ G.T + 0.1 * np.eye(3)
    cB = 0.3 * np.diag(rng.uniform(0.5, 2.0, 4))
    data = finite_feedback_lcp(contacts, A, cB, 0.05, rng.normal(size=4))
    n_rows = data.n_n + 2 * data.n_f
    for _ in range(200):
        z = rng.exponential(size=len(data.w)) * (rng.random(len(data.w)) < 0.6)
        impulses, gamma = z[:n_rows], z[n_rows:]
        F_o = np.vstack([contacts.J_n_o, contacts.J_t_o]).T @ impulses
        F_m = np.vstack([contacts.J_n_m, contacts.J_t_m]).T @ impulses
        energy = F_o @ A @ F_o + F_m @ cB @ F_m + gamma @ (contacts.mu * z[:data.n_f])
        assert z @ data.M @ z == pytest.approx(energy, rel=1e-9, abs=1e-9)
        assert z @ data.M @ z >= -1e-12


@pytest.mark.parametrize('seed', range(8))
def test_theorem_2_bounds_the_robot_deviation_per_step(seed):
    """Check ||dq_m - h u|| <= (lambda_max(B) / lambda_min(B)) h ||u|| when phi >= 0."""
    rng = np.random.default_rng(seed)
    contacts = random_contacts(rng, 8)
    B = np.diag(rng.uniform(0.2, 3.0, 4))
    h, u = 0.025, rng.normal(size=4)
    ratio = B.diagonal().max() / B.diagonal().min()
    for c in (1.0, 1e-2, 1e-4):
        data = finite_feedback_lcp(contacts, np.eye(3), c * B, h, u)
        result = solve_lcp(data.M, data.w)
        assert result.status == 'solved' and result.residual <= 1e-9
        _, dq_m = step_displacements(contacts, np.eye(3), c * B, h, u, result.z)
        assert np.linalg.norm(dq_m - h * u) <= ratio * h * np.linalg.norm(u) * (1 + 1e-9)


@pytest.mark.parametrize('seed', range(6))
def test_frictionless_lcp_step_equals_the_quasi_static_qp_step(seed):
    """Check that mu = 0, A = h (eps M_u)^-1 and c B = (h K)^-1 give the QP's dq = h v'."""
    rng = np.random.default_rng(seed)
    n_u, n_a, n_c, h = 3, 4, 5, 0.05
    n_v = n_u + n_a
    idx_u, idx_a = np.arange(n_u), np.arange(n_u, n_v)
    G = rng.normal(size=(n_u, n_u))
    inertia = G @ G.T + 0.5 * np.eye(n_u)       # eps M_u
    K = rng.uniform(100.0, 1000.0, n_a)
    v_cmd = rng.normal(size=n_a)
    J_n = rng.normal(size=(n_c, n_v))
    phi = rng.uniform(0.0, 0.02, n_c)
    normals = np.tile([0.0, 0.0, 1.0], (n_c, 1))
    tangents = np.tile([[[1.0, 0, 0], [-1.0, 0, 0]]], (n_c, 1, 1))
    contact_set = ContactSet(phi=phi, J_n=J_n, J_f=np.zeros((2 * n_c, n_v)), mu=np.zeros(n_c),
                             normal_W=normals, tangents_W=tangents,
                             point_A_W=np.zeros((n_c, 3)), point_B_W=np.zeros((n_c, 3)),
                             body_a=('a',) * n_c, body_b=('b',) * n_c)
    q_a = rng.normal(size=n_a)
    cost = qp_cost(n_v, h, idx_a, K, q_a, q_a + h * v_cmd, idx_u, inertia, np.zeros(n_u))
    qp = solve_qp_step(cost, contact_set, h, np.full(n_v, -np.inf), np.full(n_v, np.inf))
    assert qp.v is not None
    rows = PlanarContacts(phi=phi, J_n_o=J_n[:, idx_u], J_n_m=J_n[:, idx_a],
                          J_t_o=np.zeros((2 * n_c, n_u)), J_t_m=np.zeros((2 * n_c, n_a)),
                          mu=np.zeros(n_c))
    A, cB = h * np.linalg.inv(inertia), np.diag(1.0 / (h * K))
    data = finite_feedback_lcp(rows, A, cB, h, v_cmd)
    result = solve_lcp(data.M, data.w)
    assert result.status == 'solved'
    dq_o, dq_m = step_displacements(rows, A, cB, h, v_cmd, result.z)
    assert np.any(result.z[:n_c] > 1e-6), 'no contact was active: a weak test'
    np.testing.assert_allclose(dq_o, h * qp.v[idx_u], atol=1e-8)
    np.testing.assert_allclose(dq_m, h * qp.v[idx_a], atol=1e-8)


# ----- the Drake path ----------------------------------------------------------------------
def scene(path, **lcp):
    """Return the scenario at ``path`` with its lcp block changed."""
    scenario = Scenario.from_yaml(path)
    return scenario.with_formulation('lcp', **lcp) if lcp else scenario


def roll(sim, u, steps):
    """Step ``steps`` times under the fingers' command u; return the results."""
    q, results = sim.default_positions(), []
    for _ in range(steps):
        results.append(sim.step(sim.initial_state(q), {'fingers': u}))
        q = results[-1].q_next
    return results


def test_lcp_is_a_registered_plug_in_that_names_no_other_module():
    assert 'lcp' in registry.names()
    assert registry.formulation_class('lcp') is LcpFormulation
    assert registry.settings_type('lcp') is LcpSettings
    for module in ('qp.py', 'miqp.py', 'miqp_backends.py', 'qp_backends.py'):
        text = open(os.path.join(REPO_ROOT, 'quasistatic_drake', 'formulations', module)).read()
        for name in ('lcp_math', 'lcp_solvers', 'formulations.lcp', 'LcpFormulation'):
            assert name not in text, f'{module} names {name}'


def test_even_push_moves_the_disk_with_the_fingers():
    sim = QuasistaticSimulator(scene(PUSH, feedback_scale=2.0 ** -10))
    results = roll(sim, [0.0, -1.0, 0.0, -1.0], 200)
    assert all(r.success for r in results)
    q = results[-1].q_next
    disk = sim.object_pose(q, 'disk').translation()
    fingers = sim.robot_positions(q, 'fingers')
    # 5 s at 1 m/s: the fingers reach y = 0 (a lag of order c), the disk is pushed ahead of
    # them, straight down the middle
    np.testing.assert_allclose(fingers[[1, 3]], 0.0, atol=5e-3)
    assert disk[1] < fingers[1] - 0.8 and abs(disk[0]) < 1e-3
    touching = [c for c in results[-1].contacts if 'disk' in c.body_b or 'disk' in c.body_a]
    assert touching and all(c.force_W is None for c in touching)
    assert max(np.linalg.norm(c.scaled_impulse_W) for c in touching) > 0.0
    assert results[-1].forces_W is None and results[-1].scaled_impulses_W.shape == (
        results[-1].contact_set.n_c, 3)


def test_perfect_velocity_control_stops_at_the_jam_and_finite_gain_runs_through():
    perfect = QuasistaticSimulator(scene(WALL, feedback_scale=0.0))
    q = perfect.default_positions()
    for k in range(400):
        result = perfect.step(perfect.initial_state(q), {'fingers': [1.0, -1.0, 1.0, -1.0]})
        if not result.success:
            break
        q = result.q_next
    assert result.status == 'no solution', result.status
    assert 60 < k < 120                          # the fingers squeeze the disk on the wall
    np.testing.assert_array_equal(result.q_next, q)   # the last valid state is kept
    finite = QuasistaticSimulator(scene(WALL, feedback_scale=2.0 ** -6))
    results = roll(finite, [1.0, -1.0, 1.0, -1.0], 400)
    assert sum(not r.success for r in results) == 0
    disk = finite.object_pose(results[-1].q_next, 'disk').translation()
    assert disk[0] > 0.0 and disk[1] == pytest.approx(1.0, abs=5e-3)   # rolled along the wall
    assert min(r.diagnostics.min_phi_next for r in results) > -1e-6


def test_the_engine_honours_joint_limits_as_rows():
    data = yaml.safe_load(open(PUSH))
    data['robots'][0]['file'] = 'package://quasistatic_drake/urdf/halm_posa_fingers.urdf'
    sim = QuasistaticSimulator(Scenario.from_dict(data, CONFIG))
    q = sim.default_positions()
    q_ref = None
    # y1 is limited to +-100: commanding it past +100 m stops it there (the command is
    # saturated), the other joints go on
    q[sim.model.robots[0].q_idx[1]] = 99.99
    result = sim.step(sim.initial_state(q, q_ref=q_ref), {'fingers': [1.0, 100.0, 0.0, 0.0]})
    assert result.success
    after = sim.robot_positions(result.q_next, 'fingers')
    assert after[1] == pytest.approx(100.0, abs=1e-9)
    assert after[0] == pytest.approx(0.5 + 0.025, abs=1e-9)


@pytest.mark.parametrize('change, message', [
    ({'friction_directions': 4}, 'friction_directions: formulation lcp is planar'),
    ({'gravity': [0.0, -9.81, 0.0]}, 'gravity: gravity [0.0, -9.81, 0.0] has a component in '
                                     'the plane'),
    ({'quasi_dynamic': True}, 'quasi_dynamic: formulation lcp has no object inertia'),
    ({'lcp': {'relative_gains': {'hand': [1, 1]}}}, "lcp.relative_gains: no robot ['hand']"),
    ({'lcp': {'relative_gains': {'fingers': [1, 1]}}},
     'lcp.relative_gains.fingers: expected 4 values'),
    ({'lcp': {'relative_gains': {'fingers': [1, 1, 0, 1]}}}, 'must be > 0'),
    ({'lcp': {'limit_surface': {'box': [1, 1, 1]}}}, "lcp.limit_surface: no object ['box']"),
    ({'lcp': {'limit_surface': {'disk': [1, 1]}}}, 'expected 3 numbers'),
    ({'lcp': {'feedback_scale': -1}}, 'lcp.feedback_scale'),
    ({'lcp': {'backend': 'path'}}, 'lcp.backend'),
    ({'lcp': {'certify': 'cplex'}}, 'lcp.certify: unknown certifying MIP'),
    ({'lcp': {'feedback_gain': 1}}, 'feedback_gain'),
])
def test_what_the_planar_model_cannot_honour_is_refused(change, message):
    data = yaml.safe_load(open(PUSH))
    data.update(change)
    with pytest.raises(ScenarioError) as err:
        QuasistaticSimulator(Scenario.from_dict(data, CONFIG, source='push.yaml'))
    assert message in str(err.value) and 'push.yaml' in str(err.value)
    if 'formulation lcp' in message or 'gravity' in message:   # the model's own refusals
        assert 'Fix:' in str(err.value)


def test_an_object_on_two_joints_is_refused():
    data = yaml.safe_load(open(os.path.join(CONFIG, 'paper_2d.yaml')))
    data.update({'formulation': 'lcp', 'friction_directions': 2, 'gravity': [0, 0, -9.81]})
    data.pop('miqp')
    with pytest.raises(ScenarioError, match="object 'cylinder' has 2 velocities"):
        QuasistaticSimulator(Scenario.from_dict(data, CONFIG))


def test_an_anisotropic_limit_surface_turns_with_the_object():
    """A~ = diag(1, 4, 1): a push along the body's y axis takes a quarter of the impulse."""
    impulse = {}
    for yaw in (0.0, np.pi / 2):
        data = yaml.safe_load(open(PUSH))
        data['lcp'] = {'feedback_scale': 1e-6, 'limit_surface': {'disk': [1.0, 4.0, 1.0]}}
        # one finger touches the top of the disk and pushes along -y through the centre;
        # the other is far away
        data['robots'][0]['initial_positions'] = [0.0, 4.0001, 30.0, 30.0]
        data['objects'][0]['initial_positions'] = [0.0, 3.0, float(yaw)]
        sim = QuasistaticSimulator(Scenario.from_dict(data, CONFIG))
        result = sim.step(sim.initial_state(), {'fingers': [0.0, -1.0, 0.0, 0.0]})
        assert result.success
        # c ~ 0: the disk moves with the finger, whatever the impulse it takes
        moved = sim.object_pose(result.q_next, 'disk').translation() - [0.0, 3.0, 0.0]
        np.testing.assert_allclose(moved, [0.0, -0.025, 0.0], atol=1e-6)
        impulse[yaw] = np.linalg.norm(result.scaled_impulses_W.sum(axis=0))
    # dq = A J^T Lambda: along the body's y axis (yaw 0) a_y = 4, along its x axis a_x = 1
    assert impulse[0.0] == pytest.approx(0.025 / 4.0, rel=1e-6)
    assert impulse[np.pi / 2] == pytest.approx(0.025, rel=1e-6)


def test_quasistatic_plant_runs_the_push_in_a_diagram_with_meshcat():
    from pydrake.geometry import Meshcat, MeshcatVisualizer
    from pydrake.systems.analysis import Simulator
    from pydrake.systems.framework import DiagramBuilder
    from pydrake.systems.primitives import ConstantVectorSource
    from quasistatic_drake.contact_visualizer import ContactForceVisualizer
    from quasistatic_drake.quasistatic_plant import QuasistaticPlant
    engine = QuasistaticSimulator(scene(PUSH, feedback_scale=2.0 ** -8))
    builder = DiagramBuilder()
    plant = builder.AddSystem(QuasistaticPlant(engine))
    command = builder.AddSystem(ConstantVectorSource([0.0, -1.0, 0.0, -1.0]))
    builder.Connect(command.get_output_port(), plant.get_velocity_command_input_port('fingers'))
    meshcat = Meshcat()
    MeshcatVisualizer.AddToBuilder(builder, plant.get_query_object_output_port(), meshcat)
    ContactForceVisualizer.AddToBuilder(builder, plant.get_contact_results_output_port(),
                                        meshcat)
    simulator = Simulator(builder.Build())
    simulator.AdvanceTo(80 * 0.025)
    context = plant.GetMyContextFromRoot(simulator.get_context())
    # the same 80 steps taken directly
    direct = roll(QuasistaticSimulator(scene(PUSH, feedback_scale=2.0 ** -8)),
                  [0.0, -1.0, 0.0, -1.0], 80)
    np.testing.assert_allclose(plant.get_positions(context), direct[-1].q_next, atol=1e-9)
    disk = plant.get_object_pose_output_port('disk').Eval(context).translation()
    assert disk[1] < 3.0 - 0.8                   # pushed after the fingers' 1.06 m gap
    contacts = plant.get_contact_results_output_port().Eval(context)
    assert contacts and all(c.force_W is None and c.scaled_impulse_W is not None
                            for c in contacts)
    assert meshcat.HasPath('/drake/visualizer/disk')
    status = plant.get_step_status_output_port().Eval(context)
    assert (status.status, status.steps) == ('optimal', 80)
