"""Song, Kumar & Pang Sec. IV-A: the disk and ball BVPs against the paper and each other."""

import json

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from quasistatic_drake.apps import paper_bvp as pb


@pytest.fixture(scope="module")
def summary():
    return pb.reproduce()


def test_summary_keys_and_json(summary):
    json.dumps(summary)
    assert set(summary["disk"]) == {"analytic", "bvp", "simultaneous", "convergence"}
    assert set(summary["ball"]) == {"ivp_cone", "ivp_box", "bvp_consistent", "bvp_far"}
    for key in ("N", "h", "v0", "first_rolling_sample", "residuals"):
        assert key in summary["disk"]["bvp"]


def test_disk_analytic_matches_printed_digits(summary):
    block = summary["disk"]["analytic"]
    assert round(block["v0"], 4) == 1.2402
    assert round(block["tau"], 4) == 0.0114


def test_disk_analytic_by_integrating_both_phases():
    d = pb.Disk()
    v0, tau = pb.disk_analytic(d)

    def sliding(t, y):
        return [y[1], -d.mu * d.g, -d.cap * d.r / d.inertia]

    def rolls(t, y):
        return y[1] + d.r * y[2]
    rolls.terminal, rolls.direction = True, -1
    first = solve_ivp(sliding, (0.0, d.t_final), [d.x0, v0, d.omega0], events=rolls,
                      rtol=1e-12, atol=1e-14)
    assert first.t_events[0][0] == pytest.approx(tau, rel=1e-9)
    x_tau, v_tau, om_tau = first.y_events[0][0]
    assert v_tau + d.r * om_tau == pytest.approx(0.0, abs=1e-12)
    # rolling: no friction needed, constant velocity to T
    assert x_tau + v_tau * (d.t_final - tau) == pytest.approx(d.x_final, abs=1e-12)
    x, v, om = pb.disk_analytic_state(d, v0, np.array([d.t_final]))
    assert x[0] == pytest.approx(d.x_final, abs=1e-14)
    assert v[0] + d.r * om[0] == pytest.approx(0.0, abs=1e-13)


def test_printed_formula_has_a_slip():
    """Dropping T in c, as printed, gives a v0 that misses x(T)."""
    d = pb.Disk()
    v0, _ = pb.disk_analytic(d)
    x, _, _ = pb.disk_analytic_state(d, 2.8157, np.array([d.t_final]))
    assert abs(x[0] - d.x_final) > 1e-2
    assert abs(v0 - 2.8157) > 1.0


def test_disk_discrete_bvp(summary):
    d = pb.Disk()
    block = summary["disk"]["bvp"]
    assert block["N"] == 21 and block["h"] == pytest.approx(1e-3)
    run = pb.disk_rollout(d, block["v0"], 21)
    assert run.x.size == 23
    assert abs(run.x[-1] - 0.02) < 1e-10
    assert abs(run.slip[-1]) < 1e-12
    assert pb.complementarity_residual(run.slip[1:], run.force, d.cap) < 1e-12
    assert block["residuals"]["complementarity"] < 1e-12
    # sliding forward at full friction before the roll-over, sticking with no force after it
    k = block["first_rolling_sample"]
    assert k == 12 and run.t[k] >= summary["disk"]["analytic"]["tau"]
    assert np.all(run.slip[:k] > 0) and np.all(np.abs(run.slip[k:]) < 1e-12)
    assert np.allclose(run.force[:k - 1], -d.cap)
    assert np.allclose(run.force[k:], 0.0, atol=1e-9)


def test_step_modes_are_exclusive_and_complementary():
    hw, cap = 0.5, 2.0
    for slip in np.linspace(-3.0, 3.0, 61):
        f = pb.slip_step(slip, hw, cap)
        new = slip + hw * f
        assert abs(f) <= cap + 1e-15
        assert pb.complementarity_residual(np.array([new]), np.array([f]), cap) < 1e-14


def test_simultaneous_agrees_with_shooting(summary):
    shoot = summary["disk"]["bvp"]["v0"]
    sim = summary["disk"]["simultaneous"]
    assert sim["solver"] in ("gurobi", "highs")
    assert sim["v0"] == pytest.approx(shoot, rel=1e-6)


def test_convergence_to_analytic(summary):
    v0 = summary["disk"]["analytic"]["v0"]
    conv = summary["disk"]["convergence"]
    assert max(c["N"] for c in conv) >= 2100
    err = [abs(c["v0"] / v0 - 1.0) for c in conv]
    assert all(b < a for a, b in zip(err, err[1:]))
    assert err[-1] < 1e-3
    assert err[0] > 10 * err[-1]


def test_ball_cone_ivp_one_rollover(summary):
    run = pb.ball_ivp(cone=True)
    speed = np.linalg.norm(run.slip, axis=1)
    k = pb.first_rolling_sample(speed)
    assert summary["ball"]["ivp_cone"]["rolling_time"] == pytest.approx(k * 0.01)
    assert 0.4 < k * 0.01 < 0.55
    assert np.all(speed[:k] > 0) and np.all(speed[k:] < 1e-12)
    # the slip keeps its direction while sliding (Coulomb's cone)
    unit = run.slip[:k] / speed[:k, None]
    assert np.allclose(unit, unit[0])
    assert pb.ball_cone_residual(run) < 1e-12
    assert np.allclose(summary["ball"]["ivp_cone"]["final_dxdy"], run.p[-1], atol=1e-15)


def test_ball_cone_ivp_ends_where_the_paper_does():
    """Issue 30: within 2e-3 of the paper's (0.5632, -0.0534) at q^{N+1} (4.7e-3 at q^N)."""
    run = pb.ball_ivp(cone=True)
    assert len(run.p) == 102                           # q^0 .. q^{N+1}, N = 100
    assert np.linalg.norm(run.p[-1] - run.p[0] - [0.5632, -0.0534]) < 2e-3


def test_ball_box_ivp_two_rollovers(summary):
    block = summary["ball"]["ivp_box"]
    assert block["rolling_time_t"] == pytest.approx(0.30)
    assert block["rolling_time_o"] == pytest.approx(0.37)
    assert block["rolling_time_t"] != block["rolling_time_o"]
    cone = summary["ball"]["ivp_cone"]
    assert not np.allclose(block["final_dxdy"], cone["final_dxdy"], atol=1e-3)


def test_ball_consistent_bvp_recovers_v0(summary):
    block = summary["ball"]["bvp_consistent"]
    assert np.allclose(block["v0_xy"], [1.0, 0.5], atol=1e-6, rtol=0.0)


def test_ball_far_bvp_hits_target(summary):
    block = summary["ball"]["bvp_far"]
    run = pb.ball_ivp(block["v0_xy"])
    assert np.allclose(run.p[-1], [1.0, -0.1], atol=1e-8, rtol=0.0)
    assert np.linalg.norm(block["v0_xy"]) > np.linalg.norm([1.0, 0.5])
    assert np.linalg.norm(run.slip[-1]) < 1e-12      # rolling at T, as the paper's table asks


def test_plot_writes_png(summary, tmp_path):
    path = tmp_path / "paper_bvp.png"
    pb.plot(summary, path)
    assert path.stat().st_size > 10000
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_console_command_writes_the_binding_keys(tmp_path):
    """`quasistatic-drake paper-bvp --json --png` writes what the issue binds."""
    import json
    from quasistatic_drake.apps.cli import main
    import contextlib
    import io
    with contextlib.redirect_stderr(io.StringIO()) as stderr:
        assert main(['paper-bvp', '--json', str(tmp_path / 'b.json'),
                     '--png', str(tmp_path / 'b.png')]) == 0
    assert 'paper-bvp: 4/4 stages' in stderr.getvalue()            # issue 32: progress
    summary = json.loads((tmp_path / 'b.json').read_text())
    disk, ball = summary['disk'], summary['ball']
    assert {'v0', 'tau'} <= set(disk['analytic'])
    assert {'N', 'h', 'v0', 'first_rolling_sample', 'residuals'} <= set(disk['bvp'])
    assert {'v0', 'solver'} <= set(disk['simultaneous'])
    assert max(row['N'] for row in disk['convergence']) >= 2100
    assert {'final_dxdy', 'rolling_time'} <= set(ball['ivp_cone'])
    assert {'final_dxdy', 'rolling_time_t', 'rolling_time_o'} <= set(ball['ivp_box'])
    for block in ('bvp_consistent', 'bvp_far'):
        assert {'target', 'v0_xy'} <= set(ball[block])
    assert (tmp_path / 'b.png').stat().st_size > 20_000
