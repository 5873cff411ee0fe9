"""
The dense QP solver of the step QP: DAQP on an equilibrated problem.

:func:`solve_daqp` solves

    minimise  1/2 x^T H x + f^T x
    subject to  A x >= lower,   x_lower <= x <= x_upper   (bounds may be +-inf)

and returns a :class:`QpSolverResult` whose ``duals`` are the multipliers of
the rows of A, non-negative, so that H x + f = A^T duals at an optimum with
inactive bounds.  ``formulations/qp.py`` calls it through ``solve_qp_step``.
DAQP was chosen by ``benchmarks/qp_solvers.py``, which measures it against
other solvers (through qpsolvers and Drake, ``benchmarks/qp_solver_wrappers.py``)
on QPs recorded from real steps (docs/performance.md, "Choice of QP solver").
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

import numba
import numpy as np

_INF = 1e30


@dataclass(frozen=True)
class QpSolverResult:
    """A solver's answer: x and row duals (None unless ok), status and time [s]."""

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
