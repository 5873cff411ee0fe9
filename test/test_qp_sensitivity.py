"""
QP solution derivatives from the KKT conditions (formulations/qp_sensitivity.py).

Each QP is built around a known solution: x*, the strongly active rows S
with multipliers beta_S > 0, a lower bound with multiplier nu > 0, and
f = -H x* + A_S^T beta_S + nu e_k, so the KKT conditions hold by
construction.  Its data then depend on parameters p (f = f0 + F p,
l = l0 + L p), and dx*/dp is checked against central differences of DAQP's
solutions (the engine's solver).
"""

import numpy as np
import pytest

from quasistatic_drake.formulations.qp_backends import solve_daqp
from quasistatic_drake.formulations.qp_sensitivity import active_set, solution_derivative

N, M, K = 6, 8, 3


def known_qp(seed, duplicate=False, weak=False, bound=True):
    """Return (H, f0, F, A, l0, L, x_lower, x_upper, x_star) with a known KKT point."""
    rng = np.random.default_rng(seed)
    G = rng.normal(size=(N, N))
    H = G @ G.T + np.eye(N)
    A = rng.normal(size=(M, N))
    if duplicate:
        A[1] = A[0]                                  # parallel rows: E is rank-deficient
    x_star = rng.normal(size=N)
    active = [0, 1, 2]
    beta = np.zeros(M)
    beta[active] = rng.uniform(0.5, 2.0, len(active))
    slack = rng.uniform(0.2, 1.0, M)
    slack[active] = 0.0
    if weak:
        slack[5] = 0.0                              # tight, zero multiplier
    x_lower, x_upper = np.full(N, -np.inf), np.full(N, np.inf)
    f0 = -H @ x_star + A.T @ beta
    if bound:
        x_lower[4] = x_star[4]
        f0[4] += 0.7                                 # nu = 0.7 > 0 on the lower bound
    l0 = A @ x_star - slack
    return H, f0, rng.normal(size=(N, K)), A, l0, rng.normal(size=(M, K)), x_lower, \
        x_upper, x_star


def solve(H, f, A, rows_lower, x_lower, x_upper):
    result = solve_daqp(H, f, A, rows_lower, x_lower, x_upper)
    assert result.ok, result.status
    return result


def central_difference(H, f0, F, A, l0, L, x_lower, x_upper, eps=1e-6):
    columns = []
    for j in range(K):
        p = np.zeros(K)
        p[j] = eps
        plus = solve(H, f0 + F @ p, A, l0 + L @ p, x_lower, x_upper).x
        minus = solve(H, f0 - F @ p, A, l0 - L @ p, x_lower, x_upper).x
        columns.append((plus - minus) / (2 * eps))
    return np.array(columns).T


@pytest.mark.parametrize('seed', range(6))
@pytest.mark.parametrize('duplicate', [False, True], ids=['independent', 'parallel_rows'])
def test_derivative_matches_central_differences(seed, duplicate):
    H, f0, F, A, l0, L, x_lower, x_upper, x_star = known_qp(seed, duplicate)
    if duplicate:
        L[1] = L[0]                                  # the parallel rows move together
    result = solve(H, f0, A, l0, x_lower, x_upper)
    np.testing.assert_allclose(result.x, x_star, atol=1e-8)
    active = active_set(H, f0, A, l0, x_lower, x_upper, result.x, result.duals)
    assert set(active.rows) == {0, 1, 2} and list(active.lower) == [4]
    assert not len(active.weak_rows) and not len(active.weak_lower)
    derivative = solution_derivative(H, A, active, F, L, np.zeros((N, K)), np.zeros((N, K)))
    assert not derivative.degenerate
    dx = derivative.dx
    fd = central_difference(H, f0, F, A, l0, L, x_lower, x_upper)
    np.testing.assert_allclose(dx, fd, rtol=1e-5, atol=1e-7 * np.abs(fd).max())
    # the active rows and the bound stay tight to first order
    np.testing.assert_allclose(A[[0, 1, 2]] @ dx, L[[0, 1, 2]], atol=1e-9)
    np.testing.assert_allclose(dx[4], 0.0, atol=1e-12)


def test_a_free_qp_is_minus_h_inverse_df():
    rng = np.random.default_rng(7)
    G = rng.normal(size=(N, N))
    H = G @ G.T + np.eye(N)
    F = rng.normal(size=(N, K))
    active = active_set(H, np.zeros(N), np.zeros((0, N)), np.zeros(0), np.full(N, -np.inf),
                        np.full(N, np.inf), np.zeros(N), np.zeros(0))
    dx = solution_derivative(H, np.zeros((0, N)), active, F, np.zeros((0, K)),
                             np.zeros((N, K)), np.zeros((N, K))).dx
    np.testing.assert_allclose(dx, -np.linalg.solve(H, F), rtol=1e-12)


def test_a_weakly_active_row_that_would_move_is_flagged():
    H, f0, F, A, l0, L, x_lower, x_upper, _ = known_qp(3, weak=True)
    result = solve(H, f0, A, l0, x_lower, x_upper)
    active = active_set(H, f0, A, l0, x_lower, x_upper, result.x, result.duals)
    assert list(active.weak_rows) == [5] and 5 not in active.rows
    derivative = solution_derivative(H, A, active, F, L, np.zeros((N, K)), np.zeros((N, K)))
    assert derivative.degenerate
    # a change that leaves the weak row's slack alone is two-sided
    G = np.zeros((M, K))
    G[5] = A[5] @ derivative.dx - L[5]
    assert not solution_derivative(H, A, active, F, L + G, np.zeros((N, K)),
                                   np.zeros((N, K))).degenerate
