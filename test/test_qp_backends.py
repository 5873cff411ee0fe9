"""
The engine's QP solver, solve_daqp: its proximal-point fallback solves what the exact solve cannot.

solve_daqp equilibrates the QP, solves it with DAQP's exact active set
(eps_prox = 0) and, only if that fails, again in DAQP's proximal-point mode
(eps_prox = DAQP_EPS_PROX).  The QP here has a singular Hessian: the exact
solve needs H positive definite and fails ("nonconvex"); the proximal mode
regularises it and, since the rows bound the free direction, finds the
(unique) minimiser.
"""

import daqp
import numpy as np

from quasistatic_drake.formulations.qp_backends import (_equilibrate, DAQP_EPS_PROX,
                                                        DAQP_PRIMAL_TOL, solve_daqp)

# minimise 1/2 (2 x1 + x2)^2 - 2 x1   s.t.   2 x1 >= 0,  3 x2 >= 0.
# H = [[4, 2], [2, 1]] is singular (free direction (1, -2)); equilibrated (x1 scaled
# by 1/2) it is [[1, 1], [1, 1]].  With s = 2 x1 + x2 >= 2 x1 the objective is at least
# s^2 / 2 - s >= -1/2, reached only at x = (1/2, 0).  Stationarity: H x + f = (0, 1)
# = A^T duals, so duals = (0, 1/3): the second row is active.
H = np.array([[4.0, 2.0], [2.0, 1.0]])
F = np.array([-2.0, 0.0])
A = np.array([[2.0, 0.0], [0.0, 3.0]])
LOWER = np.zeros(2)
X_LOWER, X_UPPER = np.full(2, -np.inf), np.full(2, np.inf)
X_STAR = np.array([0.5, 0.0])
DUALS_STAR = np.array([0.0, 1.0 / 3.0])
TOL = 1e-6      # the proximal mode stops with errors of ~3e-7 (qp_backends.solve_daqp)


def daqp_on_equilibrated(eps_prox):
    """Return DAQP's exit flag and x (unscaled) on the equilibrated QP, as solve_daqp calls it."""
    H_s, f_s, A_s, upper, low, col, _ = _equilibrate(H, F, A, LOWER, X_LOWER, X_UPPER)
    np.testing.assert_allclose(H_s, [[1.0, 1.0], [1.0, 1.0]])   # singular after scaling
    x, _, exitflag, _ = daqp.solve(H_s, f_s, A_s, upper, low, eps_prox=eps_prox,
                                   primal_tol=DAQP_PRIMAL_TOL)
    return exitflag, np.asarray(x) * col


def test_the_exact_solve_fails_on_the_singular_hessian():
    """Check that DAQP with eps_prox = 0 fails here, so the fallback is what gets tested."""
    exitflag, _ = daqp_on_equilibrated(0.0)
    assert exitflag not in (1, 2)          # so solve_daqp must take the fallback
    assert exitflag == -5                  # DAQP: "nonconvex" (H not positive definite)


def test_the_proximal_solve_alone_finds_the_minimiser():
    """Check that DAQP's proximal-point mode alone solves the QP."""
    exitflag, x = daqp_on_equilibrated(DAQP_EPS_PROX)
    assert exitflag in (1, 2)
    np.testing.assert_allclose(x, X_STAR, atol=TOL)


def test_solve_daqp_falls_back_and_satisfies_the_kkt_conditions():
    """Check that solve_daqp succeeds and its x and duals satisfy the KKT conditions."""
    result = solve_daqp(H, F, A, LOWER, X_LOWER, X_UPPER)
    assert result.ok and result.status == 'optimal'
    x, duals = result.x, result.duals
    slack = A @ x - LOWER
    assert np.all(slack >= -TOL)                                        # primal feasible
    assert np.all(duals >= -TOL)                                        # dual feasible
    np.testing.assert_allclose(H @ x + F, A.T @ duals, atol=TOL)        # stationarity
    np.testing.assert_allclose(duals * slack, 0.0, atol=TOL)            # complementarity
    np.testing.assert_allclose(x, X_STAR, atol=TOL)
    np.testing.assert_allclose(duals, DUALS_STAR, atol=TOL)
