"""
Other QP solvers behind the signature of the engine's ``solve_daqp`` (benchmarks/qp_solvers.py).

Every wrapper solves

    minimise  1/2 x^T H x + f^T x
    subject to  A x >= lower,   x_lower <= x <= x_upper   (bounds may be +-inf)

and returns a ``QpSolverResult`` (``quasistatic_drake/formulations/qp_backends.py``)
whose ``duals`` are the multipliers of the rows of A, non-negative, so that
H x + f = A^T duals at an optimum with inactive bounds.

The solvers DAQP, ProxQP, quadprog, Clarabel and OSQP are called through the
pinned ``qpsolvers`` (requirements.txt), which writes inequalities as G x <= h:
A x >= lower becomes -A x <= -lower, and its duals ``Solution.z`` of those
rows, z >= 0 with P x + q + G^T z = 0 (bounds inactive), are our ``duals``
as they are.  The bounds go to qpsolvers' lb and ub, infinite entries
included.  ``solve_drake`` uses Drake's MathematicalProgram and its
automatic solver choice.  The library itself uses none of this.
"""

import time
from typing import Callable
import warnings

import numpy as np

from quasistatic_drake.formulations.qp_backends import QpSolverResult

# Solver options passed on by qpsolvers (the tolerances the earlier hand-written
# wrappers used; DAQP, quadprog and Clarabel run with their defaults).
QPSOLVERS_OPTIONS = {
    'daqp': {},
    'proxqp': {'eps_abs': 1e-9},
    'quadprog': {},
    'clarabel': {},
    'osqp': {'eps_abs': 1e-9, 'eps_rel': 1e-9, 'polishing': True, 'max_iter': 20000,
             'raise_error': False},
}


def qpsolvers_solver(name: str, **options) -> Callable[..., QpSolverResult]:
    """Return a function solving our QP with qpsolvers' solver ``name`` and ``options``."""
    def solve(H, f, A, lower, x_lower, x_upper) -> QpSolverResult:
        """Solve min 1/2 x'Hx + f'x s.t. A x >= lower, x_lower <= x <= x_upper."""
        from qpsolvers import Problem, solve_problem
        m = len(lower)
        start = time.perf_counter()
        problem = Problem(H, f, -A if m else None, -lower if m else None,
                          lb=x_lower if np.isfinite(x_lower).any() else None,
                          ub=x_upper if np.isfinite(x_upper).any() else None)
        with warnings.catch_warnings():     # OSQP and Clarabel warn on every failure
            warnings.simplefilter('ignore')
            solution = solve_problem(problem, name, **options)
        elapsed = time.perf_counter() - start
        if not solution.found:
            return QpSolverResult(False, None, None, _status(solution), elapsed)
        duals = np.asarray(solution.z, float) if m else np.zeros(0)
        return QpSolverResult(True, np.asarray(solution.x, float), duals, 'optimal',
                              elapsed)

    solve.__name__ = f'solve_qpsolvers_{name}'
    return solve


def _status(solution) -> str:
    """Return the solver's own status of a failed qpsolvers Solution, if it gives one."""
    extras = solution.extras or {}
    if 'info' in extras:                # ProxQP and OSQP
        return str(extras['info'].status)
    if 'status' in extras:              # Clarabel
        return str(extras['status'])
    return 'not found'


def solve_drake(H, f, A, lower, x_lower, x_upper) -> QpSolverResult:
    """Solve with Drake's MathematicalProgram and its automatic solver choice."""
    from pydrake.solvers import MathematicalProgram, Solve
    n, m = len(f), len(lower)
    start = time.perf_counter()
    prog = MathematicalProgram()
    x = prog.NewContinuousVariables(n, 'x')
    prog.AddQuadraticCost(H, f, x, is_convex=True)
    rows = prog.AddLinearConstraint(A, lower, np.full(m, np.inf), x) if m else None
    if np.isfinite(x_lower).any() or np.isfinite(x_upper).any():
        prog.AddBoundingBoxConstraint(x_lower, x_upper, x)
    result = Solve(prog)
    elapsed = time.perf_counter() - start
    if not result.is_success():
        return QpSolverResult(False, None, None, str(result.get_solution_result()), elapsed)
    duals = result.GetDualSolution(rows) if m else np.zeros(0)
    return QpSolverResult(True, result.GetSolution(x), np.asarray(duals), 'optimal', elapsed)


# The wrappers by name: qpsolvers' solver names, and 'drake'.
SOLVERS: dict[str, Callable[..., QpSolverResult]] = {
    **{name: qpsolvers_solver(name, **options) for name, options in QPSOLVERS_OPTIONS.items()},
    'drake': solve_drake,
}
