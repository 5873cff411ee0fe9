"""
Small hand-built MIQPs (Pang & Tedrake 2018, eq. 23) whose solutions are known in closed form.

A 1 kg block on the ground (mu = 0.5, two friction directions per contact,
h = 0.1 s, K = 1e4 N/m) and a one-joint pusher that touches it (phi = 0):

* pushed sideways by a frictionless pusher, the block slides with it (by
  STEP / (1 + eps): the tie-break eps ||x_u||^2 of miqp.py prices the
  block's travel, so the pusher falls 1e-8 m short of its 1 cm command): the
  ground carries the weight m g h and resists with mu m g h, which the
  pusher supplies.  With friction at the pusher too (mu_p), the pusher may
  carry part of the weight, and the impulses are not unique; the least-force
  stage picks the least total normal impulse, in closed form
  P_n,ground = m g h / (1 + mu mu_p), P_n,pusher = mu P_n,ground;
* pulled away, the pusher leaves and the block stays at rest (no net friction);
* pressed down onto the block, the pusher cannot follow its command and
  eq. 23f's lower bound makes it press with K h |phibar| (Sec. IV-B).

Every backend must give these numbers.
"""

import numpy as np
import pytest

from quasistatic_drake.contact import ContactSet
from quasistatic_drake.formulations.miqp import MiqpSettings, miqp_data
from quasistatic_drake.formulations.miqp_backends import BACKENDS

MASS, G, MU, H, K = 1.0, 9.81, 0.5, 0.1, 1.0e4
STEP = 0.01                       # [m] the pusher's commanded displacement h vbar
IDX_U, IDX_A = np.array([0, 1]), np.array([2])     # v = [x_block, y_block, pusher]
X, Y = np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])


def contacts(pusher_normal_row, pusher_tangent_row, pusher_normal_W, pusher_tangent_W,
             pusher_mu=MU):
    """Return ground -> block (normal +y) and pusher -> block as given, both touching."""
    J_n = np.array([[0.0, 1.0, 0.0], pusher_normal_row])
    t = np.asarray(pusher_tangent_row, dtype=float)
    J_f = np.array([[1.0, 0.0, 0.0], [-1.0, 0.0, 0.0], t, -t])
    return ContactSet(
        phi=np.zeros(2), J_n=J_n, J_f=J_f, mu=np.array([MU, pusher_mu]),
        normal_W=np.array([Y, pusher_normal_W]),
        tangents_W=np.array([[X, -X], [pusher_tangent_W, -pusher_tangent_W]]),
        point_A_W=np.zeros((2, 3)), point_B_W=np.zeros((2, 3)),
        body_a=('ground', 'pusher'), body_b=('block', 'block'))


def side_pusher(pusher_mu=MU):
    """Return contacts of a pusher joint along +x, left of the block (phi_dot = v_bx - v_p)."""
    return contacts([1.0, 0.0, -1.0], [0.0, 1.0, 0.0], X, Y, pusher_mu)


def top_pusher():
    """Return contacts of a pusher joint along +y, above the block (phi_dot = v_p - v_by)."""
    return contacts([0.0, -1.0, 1.0], [1.0, 0.0, -0.0], -Y, X)


def solve(contact_set, command, backend):
    settings = MiqpSettings(contact_stiffness=K, backend=backend)
    data = miqp_data(contact_set, H, IDX_U, IDX_A, np.array([command]),
                     np.array([0.0, -MASS * G]), settings, np.full(3, -np.inf),
                     np.full(3, np.inf), point_reach=0.05, weight=MASS * G)
    answer = BACKENDS[backend]().solve(data, settings)
    assert answer.status == 'optimal', answer.status
    return answer


BACKEND_NAMES = ['gurobi', 'scip', 'daqp']


@pytest.mark.parametrize('backend', BACKEND_NAMES)
@pytest.mark.parametrize('pusher_mu', [0.0, MU])
def test_side_push_slides_the_block_with_the_pusher(backend, pusher_mu):
    answer = solve(side_pusher(pusher_mu), STEP, backend)
    pushed = STEP / (1.0 + MiqpSettings().object_motion_weight)   # (x - STEP)^2 + eps x^2
    np.testing.assert_allclose(answer.x, [pushed, 0.0, pushed], atol=1e-9)
    ground = MASS * G * H / (1.0 + MU * pusher_mu)
    np.testing.assert_allclose(answer.P_n, [ground, MU * ground], rtol=1e-6)
    # the ground's friction opposes the motion: all of it along -x (its second direction)
    np.testing.assert_allclose(answer.P_f[:2], [0.0, MU * ground], atol=1e-8)
    # the pusher's friction holds up the rest of the weight (its +y direction)
    np.testing.assert_allclose(answer.P_f[2] - answer.P_f[3], MASS * G * H - ground,
                               atol=1e-8)
    assert answer.gamma[0] == pytest.approx(pushed, abs=1e-9)  # the ground contact slides
    assert answer.gamma[1] == pytest.approx(0.0, abs=1e-8)     # the pusher sticks


@pytest.mark.parametrize('backend', BACKEND_NAMES)
def test_pulled_away_the_pusher_leaves_the_block_at_rest(backend):
    answer = solve(side_pusher(), -STEP, backend)
    np.testing.assert_allclose(answer.x, [0.0, 0.0, -STEP], atol=1e-8)
    np.testing.assert_allclose(answer.P_n, [MASS * G * H, 0.0], rtol=1e-6, atol=1e-10)
    # sticking friction along +-d is not unique (eq. 23 sums it); its net is zero
    np.testing.assert_allclose(answer.P_f[0::2] - answer.P_f[1::2], 0.0, atol=1e-8)
    assert answer.P_f[0] + answer.P_f[1] <= MU * MASS * G * H * (1 + 1e-9)
    assert answer.objective == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize('backend', BACKEND_NAMES)
def test_pressing_down_is_blocked_and_presses_with_k_h_phibar(backend):
    answer = solve(top_pusher(), -STEP, backend)
    np.testing.assert_allclose(answer.x, 0.0, atol=1e-8)      # neither can move
    press = K * H * STEP                                        # eq. 23f: P_n >= h K |phibar|
    np.testing.assert_allclose(answer.P_n, [press + MASS * G * H, press], rtol=1e-6)
    # the objective is the tracking error the block forces on the pusher
    assert answer.objective == pytest.approx(STEP ** 2, rel=1e-6)
