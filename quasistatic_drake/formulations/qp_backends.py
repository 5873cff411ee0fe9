"""
Dense QP solvers behind one signature, so they can be measured side by side.

Every backend solves

    minimise  1/2 x^T H x + f^T x
    subject to  A x >= lower,   x_lower <= x <= x_upper   (bounds may be +-inf)

and returns a :class:`QpSolverResult` whose ``duals`` are the multipliers of
the rows of A, non-negative, so that H x + f = A^T duals at an optimum with
inactive bounds.  ``DEFAULT_BACKEND`` is the one the simulator uses; it was
chosen by ``benchmarks/qp_solvers.py`` (README, "Choice of QP solver").
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Optional

import numba
import numpy as np

DEFAULT_BACKEND = "daqp"
_INF = 1e30


@dataclass(frozen=True)
class QpSolverResult:
    """A backend's answer: x and row duals (None unless ok), status and time [s]."""

    ok: bool
    x: Optional[np.ndarray]
    duals: Optional[np.ndarray]
    status: str
    solve_time: float


def solve_daqp(H, f, A, lower, x_lower, x_upper) -> QpSolverResult:
    """
    Solve with DAQP, a dual active-set solver for small dense QPs, on an equilibrated problem.

    Variables are scaled so that H has a unit diagonal and constraint rows to
    unit norm; contact QPs mix spring terms (h^2 K ~ 10) with object inertias
    (~1e-4), and many sticking contacts make the active set degenerate.  The
    plain active-set solve is exact; should it fail, DAQP's proximal-point
    mode (``eps_prox``), robust on degenerate active sets, solves again.  (The
    proximal mode is not the first choice: its iterations stop with errors of
    ~3e-7 in v, which a free robot joint shows as not following its command.)
    """
    import daqp
    n = len(f)
    H_s, f_s, A_s, upper, low, col, row = _equilibrate(H, f, A, lower, x_lower, x_upper)
    start = time.perf_counter()
    for eps_prox in (0.0, DAQP_EPS_PROX):
        x, _, exitflag, info = daqp.solve(H_s, f_s, A_s, upper, low, eps_prox=eps_prox,
                                          primal_tol=DAQP_PRIMAL_TOL)
        if exitflag in (1, 2):
            break
    elapsed = time.perf_counter() - start
    if exitflag not in (1, 2):
        return QpSolverResult(False, None, None, _DAQP_STATUS.get(exitflag, str(exitflag)),
                              elapsed)
    duals = -np.asarray(info["lam"])[n:] * row
    return QpSolverResult(True, np.asarray(x) * col, duals, "optimal", elapsed)


DAQP_EPS_PROX = 1e-6       # the proximal weight of the fallback solve
# Feasibility tolerance of the scaled rows.  DAQP's default 1e-6 lets a resting
# box creep by ~5 nm per step in quasi-static mode; 1e-10 keeps it below 1e-11 m.
DAQP_PRIMAL_TOL = 1e-10


@numba.njit(cache=True)
def _equilibrate(H, f, A, lower, x_lower, x_upper):
    """Scale x by 1/sqrt(diag H) and each row of A to unit norm, for DAQP's bounds layout."""
    n, m = f.shape[0], lower.shape[0]
    col = 1.0 / np.sqrt(np.diag(H))
    H_s = H * np.outer(col, col)
    A_s = A * col
    row = np.empty(m)
    upper = np.full(n + m, _INF)
    low = np.full(n + m, -_INF)
    for r in range(m):
        row[r] = 1.0 / max(np.sqrt(A_s[r] @ A_s[r]), 1e-12)
        A_s[r] *= row[r]
        low[n + r] = lower[r] * row[r]
    for k in range(n):
        upper[k] = min(x_upper[k] / col[k], _INF)
        low[k] = max(x_lower[k] / col[k], -_INF)
    return H_s, f * col, A_s, upper, low, col, row


_DAQP_STATUS = {-1: "infeasible", -2: "cycling", -3: "unbounded", -4: "iteration limit",
                -5: "nonconvex", -6: "overdetermined initial active set"}


def solve_proxsuite(H, f, A, lower, x_lower, x_upper) -> QpSolverResult:
    """Solve with the dense ProxQP of ProxSuite (an augmented Lagrangian method)."""
    from proxsuite import proxqp
    n, m = len(f), len(lower)
    C = np.vstack([A, np.eye(n)]) if m else np.eye(n)
    l_c = np.concatenate([lower, np.maximum(x_lower, -_INF)])
    u_c = np.concatenate([np.full(m, _INF), np.minimum(x_upper, _INF)])
    start = time.perf_counter()
    qp = proxqp.dense.QP(n, 0, m + n)
    qp.settings.eps_abs = 1e-9
    qp.init(H, f, None, None, C, l_c, u_c)
    qp.solve()
    elapsed = time.perf_counter() - start
    status = qp.results.info.status
    if status != proxqp.PROXQP_SOLVED:
        return QpSolverResult(False, None, None, str(status), elapsed)
    return QpSolverResult(True, qp.results.x.copy(), -qp.results.z[:m].copy(), "optimal",
                          elapsed)


def solve_quadprog(H, f, A, lower, x_lower, x_upper) -> QpSolverResult:
    """Solve with quadprog (Goldfarb-Idnani); needs H positive definite."""
    import quadprog
    n = len(f)
    finite_lo = np.isfinite(x_lower) & (x_lower > -_INF)
    finite_hi = np.isfinite(x_upper) & (x_upper < _INF)
    C = np.vstack([A, np.eye(n)[finite_lo], -np.eye(n)[finite_hi]])
    b = np.concatenate([lower, x_lower[finite_lo], -x_upper[finite_hi]])
    start = time.perf_counter()
    try:
        x, *_, lagr, _ = quadprog.solve_qp(H, -f, C.T, b, 0)
    except ValueError as err:
        return QpSolverResult(False, None, None, str(err), time.perf_counter() - start)
    return QpSolverResult(True, x, lagr[:len(lower)], "optimal", time.perf_counter() - start)


def solve_clarabel(H, f, A, lower, x_lower, x_upper) -> QpSolverResult:
    """Solve with Clarabel, an interior-point conic solver (sparse)."""
    import clarabel
    from scipy import sparse
    n, m = len(f), len(lower)
    finite_lo = x_lower > -_INF
    finite_hi = x_upper < _INF
    G = np.vstack([-A, -np.eye(n)[finite_lo], np.eye(n)[finite_hi]])
    h = np.concatenate([-lower, -x_lower[finite_lo], x_upper[finite_hi]])
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    start = time.perf_counter()
    solver = clarabel.DefaultSolver(sparse.csc_matrix(np.triu(H)), f, sparse.csc_matrix(G),
                                    h, [clarabel.NonnegativeConeT(len(h))], settings)
    sol = solver.solve()
    elapsed = time.perf_counter() - start
    if str(sol.status) not in ("Solved", "AlmostSolved"):
        return QpSolverResult(False, None, None, str(sol.status), elapsed)
    return QpSolverResult(True, np.array(sol.x), np.array(sol.z)[:m], "optimal", elapsed)


def solve_osqp(H, f, A, lower, x_lower, x_upper) -> QpSolverResult:
    """Solve with OSQP, an ADMM first-order solver (sparse), at tight tolerances."""
    import osqp
    from scipy import sparse
    n, m = len(f), len(lower)
    C = sparse.csc_matrix(np.vstack([A, np.eye(n)]))
    low = np.concatenate([lower, np.maximum(x_lower, -_INF)])
    up = np.concatenate([np.full(m, _INF), np.minimum(x_upper, _INF)])
    start = time.perf_counter()
    solver = osqp.OSQP()
    solver.setup(sparse.csc_matrix(np.triu(H)), f, C, low, up, verbose=False,
                 eps_abs=1e-9, eps_rel=1e-9, polishing=True, max_iter=20000)
    res = solver.solve(raise_error=False)
    elapsed = time.perf_counter() - start
    if res.info.status not in ("solved", "solved inaccurate"):
        return QpSolverResult(False, None, None, res.info.status, elapsed)
    return QpSolverResult(True, res.x, -res.y[:m], "optimal", elapsed)


def solve_drake(H, f, A, lower, x_lower, x_upper) -> QpSolverResult:
    """Solve with Drake's MathematicalProgram and its automatic solver choice."""
    from pydrake.solvers import MathematicalProgram, Solve
    n, m = len(f), len(lower)
    start = time.perf_counter()
    prog = MathematicalProgram()
    x = prog.NewContinuousVariables(n, "x")
    prog.AddQuadraticCost(H, f, x, is_convex=True)
    rows = prog.AddLinearConstraint(A, lower, np.full(m, np.inf), x) if m else None
    lo, hi = np.maximum(x_lower, -np.inf), np.minimum(x_upper, np.inf)
    if np.isfinite(lo).any() or np.isfinite(hi).any():
        prog.AddBoundingBoxConstraint(lo, hi, x)
    result = Solve(prog)
    elapsed = time.perf_counter() - start
    if not result.is_success():
        return QpSolverResult(False, None, None, str(result.get_solution_result()), elapsed)
    duals = result.GetDualSolution(rows) if m else np.zeros(0)
    return QpSolverResult(True, result.GetSolution(x), np.asarray(duals), "optimal", elapsed)


BACKENDS: dict[str, Callable[..., QpSolverResult]] = {
    "daqp": solve_daqp, "proxsuite": solve_proxsuite, "quadprog": solve_quadprog,
    "clarabel": solve_clarabel, "osqp": solve_osqp, "drake": solve_drake,
}
