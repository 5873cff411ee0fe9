"""
benchmarks/qp_solver_wrappers.py: the benchmark's other QP solvers keep our QP's conventions.

Each wrapper (DAQP, ProxQP, quadprog, Clarabel, OSQP through qpsolvers, and
Drake's MathematicalProgram) must return the minimiser of hand-built QPs and
the multipliers of the rows A x >= lower with our sign (H x + f = A^T duals,
duals >= 0), without the multipliers of the bounds, and report an infeasible
QP as a failure instead of raising.
"""

import os
import sys

import numpy as np
import pytest
import qpsolvers

from conftest import REPO_ROOT
from quasistatic_drake.formulations.anitescu import solve_qp_step
from test_math import wall_push

sys.path.insert(0, os.path.join(REPO_ROOT, 'benchmarks'))

from qp_solver_wrappers import QPSOLVERS_OPTIONS, SOLVERS  # noqa: E402

INF = np.inf
H = np.diag([2.0, 1.0])
F = np.array([-4.0, 1.0])     # unconstrained minimiser (2, -1)
ROW = np.array([[1.0, 1.0]])
# name: (A, lower, x_lower, x_upper, expected x, expected row duals)
CASES = {
    # x1 + x2 >= 2 active, finite bounds inactive: x = (7/3, -1/3), dual 2/3
    'row active': (ROW, [2.0], [-INF, -5.0], [10.0, INF], [7 / 3, -1 / 3], [2 / 3]),
    # also x1 <= 2 active: x = (2, 0); the row's dual is 1, the bound's (also 1) not in it
    'row and bound active': (ROW, [2.0], [-INF, -5.0], [2.0, INF], [2.0, 0.0], [1.0]),
    'no bounds': (ROW, [2.0], [-INF, -INF], [INF, INF], [7 / 3, -1 / 3], [2 / 3]),
    'no rows': (np.zeros((0, 2)), [], [-INF, -5.0], [1.0, INF], [1.0, -1.0], []),
}


def test_the_qpsolvers_solvers_are_installed():
    """Check that every solver the benchmark names is one qpsolvers can run here."""
    assert set(QPSOLVERS_OPTIONS) <= set(qpsolvers.available_solvers)
    assert set(SOLVERS) == set(QPSOLVERS_OPTIONS) | {'drake'}


@pytest.mark.parametrize('case', CASES)
@pytest.mark.parametrize('name', SOLVERS)
def test_wrapper_returns_the_minimiser_and_row_duals(name, case):
    """Check x and the row duals (our sign, no bound duals) on a QP with a known answer."""
    A, lower, x_lower, x_upper, x_expected, duals_expected = CASES[case]
    result = SOLVERS[name](H.copy(), F.copy(), A.copy(), np.array(lower, float),
                           np.array(x_lower, float), np.array(x_upper, float))
    assert result.ok and result.status == 'optimal'
    np.testing.assert_allclose(result.x, x_expected, atol=1e-6)
    assert result.duals.shape == (len(lower),)
    np.testing.assert_allclose(result.duals, duals_expected, atol=1e-6)


@pytest.mark.parametrize('name', SOLVERS)
def test_wrapper_reports_an_infeasible_qp_as_a_failure(name):
    """Check that x1 >= 1 with x1 <= 0 gives ok False, no x and a status, not an error."""
    result = SOLVERS[name](H.copy(), F.copy(), np.array([[1.0, 0.0]]), np.array([1.0]),
                           np.array([-INF, -INF]), np.array([0.0, INF]))
    assert not result.ok
    assert result.x is None and result.duals is None
    assert result.status != 'optimal'


@pytest.mark.parametrize('name', SOLVERS)
def test_wrapper_in_the_step_qp_gives_the_contact_forces(name):
    """Solve test_math's wall push with the wrapper: v' = 0, force K (qbar' - q_a)."""
    h, K = 0.1, 1000.0
    contacts, cost = wall_push(h, K)
    sol = solve_qp_step(cost, contacts, h, np.full(2, -INF), np.full(2, INF), SOLVERS[name])
    assert sol.status == 'optimal'
    np.testing.assert_allclose(sol.v, [0.0, 0.0], atol=1e-6)
    forces = sol.impulses_W / h
    np.testing.assert_allclose(forces[0], [K * 0.01, 0, 0], rtol=1e-5)
    np.testing.assert_allclose(forces[1], [K * 0.01, 0, 0], rtol=1e-5)
