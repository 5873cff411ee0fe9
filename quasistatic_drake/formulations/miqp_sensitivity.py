r"""
Derivatives of the MIQP step (Pang & Tedrake 2018, eq. 23) with its binaries fixed.

With the binaries z fixed at the solution, eq. 23 is a convex QP in
y = [x; P_n; P_f; Gamma]: each complementarity pair k (a row w_k of
R y + b and its variable lambda_k) keeps the side the solution chose,

    z_k = 0:  w_k = 0 (an equality),  0 <= lambda_k <= M_lambda,k,
    z_k = 1:  lambda_k = 0,           0 <= w_k <= M_w,k,

with the force balance (23a) as equalities, the impulse lower bounds of
eq. 23f and the joint limits on x.  A pair with both w_k and lambda_k zero
(biactive: a sticking contact at the edge of its cone, a touching contact
without force) could take either side under a small change, so it keeps
both, w_k >= 0 and lambda_k >= 0: the derivative is then that of the
union of the two sides near the solution.  If the solution is not
stationary for it with non-negative multipliers (``NotStationary``), a
change of the binaries lowers the cost at first order: the step's
derivative is one-sided.  If the derivative opens a pair that was closed on
both sides, ``qp_sensitivity`` finds it weakly active and says so.

Its objective ||x_a - xbar_a||^2 + eps ||x_u||^2 prices x only, so its
Hessian is singular in the impulses: x is unique, the impulses are not, and
the least-force stage of ``miqp_backends`` picks one of them.  The KKT derivative of
``qp_sensitivity`` is unique in x, which is all a step hands on
(q_next = q + N(q) x).

The multipliers are not the backends' (a MIQP has none): they are the
least-squares solution of the stationarity conditions of the fixed-binary
QP on the constraints tight at y, with the inequalities' multipliers
non-negative (``multipliers``).  This module imports neither Drake nor ROS.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy.optimize import lsq_linear

from quasistatic_drake.formulations.qp_sensitivity import (ACTIVE_TOL, active_set,
                                                           central_difference,
                                                           solution_derivative)

if TYPE_CHECKING:
    from quasistatic_drake.formulations.miqp_data import MiqpData

STATIONARITY_TOL = 1e-7   # relative: a larger residual means y is not the fixed-binary optimum
# A complementarity pair counts as biactive when both sides are within this of zero: the
# backends meet a row to Gurobi's feasibility tolerance (1e-6) and its binaries to their
# integrality tolerance, so a side 7e-7 from zero may be a zero.
BIACTIVE_TOL = 1e-6


@dataclass(frozen=True)
class FixedBinaryQp:
    """
    Eq. 23 with z fixed: minimise 1/2 y^T H y + f^T y over A y >= l (first n_eq rows: =).

    ``y_lower`` and ``y_upper`` are the variables' bounds (the joint limits on
    x; the impulses are bounded by rows).
    """

    H: np.ndarray
    f: np.ndarray
    A: np.ndarray
    lower: np.ndarray
    n_eq: int
    y_lower: np.ndarray
    y_upper: np.ndarray


def biactive_pairs(data: MiqpData, y: np.ndarray, tol: float = BIACTIVE_TOL) -> np.ndarray:
    """Return the mask of the complementarity pairs with both w_k and lambda_k zero at y."""
    scale = tol * (1.0 + np.abs(y).max(initial=0.0))
    return (np.abs(data.R @ y + data.b) <= scale) & (np.abs(y[data.n_v:]) <= scale)


def fixed_binary_qp(data: MiqpData, z: np.ndarray, free: np.ndarray) -> FixedBinaryQp:
    """
    Return eq. 23 with the binaries fixed at ``z`` (module docstring).

    The pairs in the mask ``free`` (``biactive_pairs``) keep both sides as
    inequalities, w_k >= 0 and lambda_k >= 0, whatever z_k says.
    """
    n_v, n_y = data.n_v, data.n_y
    lam = np.eye(n_y)[n_v:]                       # the rows selecting lambda from y
    on = np.asarray(z) > 0.5
    w_eq, lam_eq = ~on & ~free, on & ~free
    w_on, lam_on = on | free, ~on | free
    A = np.vstack([data.A_eq, data.R[w_eq], lam[lam_eq],               # equalities
                   data.R[w_on], -data.R[on], lam[lam_on], -lam[~on], data.A_lb])
    lower = np.concatenate([data.b_eq, -data.b[w_eq], np.zeros(lam_eq.sum()),
                            -data.b[w_on], data.b[on] - data.M_w[on],
                            np.zeros(lam_on.sum()), -data.M_lambda[~on], data.b_lb])
    weights = np.zeros(n_y)
    weights[data.idx_a] = 1.0
    weights[data.idx_u] = data.motion_weight
    f = np.zeros(n_y)
    f[data.idx_a] = -2.0 * data.xbar_a
    f[n_v:n_v + data.n_c] = data.impulse_weight
    infinite = np.full(n_y - n_v, np.inf)
    return FixedBinaryQp(H=np.diag(2.0 * weights), f=f, A=A, lower=lower,
                         n_eq=len(data.b_eq) + w_eq.sum() + lam_eq.sum(),
                         y_lower=np.concatenate([data.x_lower, -infinite]),
                         y_upper=np.concatenate([data.x_upper, infinite]))


class NotStationary(ValueError):
    """The MIQP's solution does not meet the fixed-binary QP's optimality conditions."""


def multipliers(qp: FixedBinaryQp, y: np.ndarray, tol: float = ACTIVE_TOL) -> np.ndarray:
    """
    Return multipliers of A's rows that make y stationary for ``qp`` (module docstring).

    Solves H y + f = A_T^T d + nu over the rows T tight at y (equalities
    free, inequalities d >= 0) and the variables at a bound (nu >= 0 at a
    lower bound, <= 0 at an upper one), in the least-squares sense; raises
    NotStationary when the residual is not zero (to STATIONARITY_TOL).
    """
    gradient = qp.H @ y + qp.f
    scale = 1.0 + np.abs(y).max(initial=0.0)
    slack = qp.A @ y - qp.lower
    tight = slack <= tol * scale * (1.0 + np.abs(qp.lower))
    tight[:qp.n_eq] = True
    rows = np.flatnonzero(tight)
    at_lower = np.flatnonzero(np.abs(y - qp.y_lower) <= tol * scale)
    at_upper = np.flatnonzero(np.abs(qp.y_upper - y) <= tol * scale)
    identity = np.eye(len(y))
    basis = np.vstack([qp.A[rows], identity[at_lower], -identity[at_upper]]).T
    low = np.concatenate([np.where(rows < qp.n_eq, -np.inf, 0.0),
                          np.zeros(len(at_lower) + len(at_upper))])
    if basis.shape[1] == 0:
        d = np.zeros(0)
    else:
        d = lsq_linear(basis, gradient, bounds=(low, np.full(len(low), np.inf)),
                       method="bvls", tol=1e-14).x
    residual = np.abs(basis @ d - gradient).max(initial=0.0) if basis.size else np.abs(
        gradient).max(initial=0.0)
    if residual > STATIONARITY_TOL * (1.0 + np.abs(gradient).max(initial=0.0)
                                      + np.abs(d).max(initial=0.0)):
        raise NotStationary(f"the MIQP's solution is not stationary with its binaries fixed "
                            f"(residual {residual:.2e})")
    duals = np.zeros(len(qp.lower))
    duals[rows] = d[:len(rows)]
    return duals


def fixed_binary_derivative(data: MiqpData, y: np.ndarray, z: np.ndarray, changed: list,
                            delta: float) -> tuple[np.ndarray, bool]:
    """
    Return dx/dtheta (n_v x k) of eq. 23's solution (y, z) with its binaries fixed.

    ``changed`` holds per parameter theta_j eq. 23's data at theta_j + delta
    and at theta_j - delta.  The derivative is the KKT derivative of
    ``qp_sensitivity`` on the fixed-binary QP (module docstring), with the
    data's central differences.  The flag says it is one-sided: a biactive
    pair's other side is better (``NotStationary``), a weakly active
    constraint would move, or a changed step has other rows (its column is
    then zero).
    """
    free = biactive_pairs(data, y)
    qp, degenerate = fixed_binary_qp(data, z, free), False
    try:
        duals = multipliers(qp, y)
    except NotStationary:
        free = np.zeros_like(free)
        qp, degenerate = fixed_binary_qp(data, z, free), True
        duals = multipliers(qp, y)
    active = active_set(qp.H, qp.f, qp.A, qp.lower, qp.y_lower, qp.y_upper, y, duals,
                        equalities=qp.n_eq)
    n, k = len(y), len(changed)
    df, dl = np.zeros((n, k)), np.zeros((len(qp.lower), k))
    d_lower, d_upper = np.zeros((n, k)), np.zeros((n, k))
    for j, pair in enumerate(changed):
        high, low = (fixed_binary_qp(step, z, free) for step in pair)
        if high.A.shape != qp.A.shape or low.A.shape != qp.A.shape:
            degenerate = True
            continue
        dH, d_f, dA, d_rows, d_lower[:, j], d_upper[:, j] = (
            central_difference(getattr(high, name), getattr(low, name), delta)
            for name in ("H", "f", "A", "lower", "y_lower", "y_upper"))
        df[:, j] = dH @ y + d_f - dA.T @ duals
        dl[:, j] = d_rows - dA @ y
    derivative = solution_derivative(qp.H, qp.A, active, df, dl, d_lower, d_upper)
    return derivative.dx[:data.n_v], derivative.degenerate or degenerate
