r"""
The log-barrier form of the step QP, and its derivatives: smoothed contact for planners.

qsim's relaxation for gradient-based planning (Pang, Suh, Yang & Tedrake,
"Global planning for contact-rich manipulation via local smoothing of
quasi-dynamic contact models"): the complementarity of the step QP is
replaced by a log barrier of weight 1 / kappa,

    minimise_x  F(x) = 1/2 x^T H x + f^T x - (1/kappa) sum_r log(s_r),
                s = G x - g > 0,

where G x >= g stacks the QP's rows A x >= l and its finite bounds.  F is
strictly convex, and its minimiser is smooth in the data: a contact pushes
before it touches (each row carries the impulse 1 / (kappa s_r), which
falls off with its slack), so a robot command has an effect on an object
it has not reached yet, and the derivatives stay informative before
contact is made.  As kappa -> infinity the minimiser tends to the QP's.

Solved by Newton's method from a strictly feasible start (the QP solved
with its rows pushed in by a small margin), with a backtracking line search
that keeps s > 0.  The derivative differentiates grad F = 0:

    (H + (1/kappa) G^T S^-2 G) dx = -(dH x + df)
                                    + (1/kappa) (dG^T s^-1 - G^T S^-2 (dG x - dg)).

This module imports neither Drake nor ROS.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from quasistatic_drake.formulations.qp_backends import solve_daqp

MAX_NEWTON = 100
NEWTON_TOL = 1e-14        # stop when the Newton decrement^2 / 2 is below this (relative)
START_MARGINS = (1e-6, 1e-8, 1e-10)   # [row units] how far inside the rows the start lies


@dataclass(frozen=True)
class BarrierResult:
    """The minimiser x (None on failure), the rows' multipliers 1 / (kappa s), status."""

    x: Optional[np.ndarray]
    duals: Optional[np.ndarray]     # one per row of A (the bounds' are not returned)
    status: str
    iterations: int


def stacked_rows(A: np.ndarray, lower: np.ndarray, x_lower: np.ndarray,
                 x_upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return G, g: the rows A x >= l, then x_i >= x_lower_i and -x_i >= -x_upper_i if finite."""
    n = A.shape[1]
    low, high = np.flatnonzero(np.isfinite(x_lower)), np.flatnonzero(np.isfinite(x_upper))
    G = np.vstack([A, np.eye(n)[low], -np.eye(n)[high]]).reshape(-1, n)
    return G, np.concatenate([lower, x_lower[low], -x_upper[high]])


def solve_log_barrier(H: np.ndarray, f: np.ndarray, A: np.ndarray, lower: np.ndarray,
                      x_lower: np.ndarray, x_upper: np.ndarray,
                      kappa: float) -> BarrierResult:
    """Minimise F (module docstring) by Newton's method from a strictly feasible start."""
    G, g = stacked_rows(A, lower, x_lower, x_upper)
    x = _start(H, f, A, lower, x_lower, x_upper)
    if x is None:
        return BarrierResult(None, None, "no strictly feasible start", 0)
    for iteration in range(MAX_NEWTON):
        s = G @ x - g
        gradient = H @ x + f - (G.T @ (1.0 / s)) / kappa
        hessian = H + (G.T * (1.0 / (kappa * s * s))) @ G
        step = -np.linalg.solve(hessian, gradient)
        decrement = -gradient @ step
        if decrement / 2.0 <= NEWTON_TOL * (1.0 + abs(_objective(H, f, G, g, kappa, x))):
            s = G @ x - g
            return BarrierResult(x, 1.0 / (kappa * s[:len(lower)]), "optimal", iteration)
        x = _line_search(H, f, G, g, kappa, x, step, gradient)
    return BarrierResult(None, None, "Newton iteration limit", MAX_NEWTON)


def barrier_derivative(H: np.ndarray, G: np.ndarray, g: np.ndarray, kappa: float,
                       x: np.ndarray, dF: np.ndarray, dG: list, dg: np.ndarray) -> np.ndarray:
    """
    Return dx/dp (n x k) at the minimiser x: module docstring's formula.

    ``dF`` (n x k) is dH x + df per parameter, ``dG`` a list of k changes of
    G, ``dg`` (rows x k) the changes of g.
    """
    s = G @ x - g
    hessian = H + (G.T * (1.0 / (kappa * s * s))) @ G
    rhs = -dF.copy()
    for j, dG_j in enumerate(dG):
        rhs[:, j] += (dG_j.T @ (1.0 / s) - G.T @ ((dG_j @ x - dg[:, j]) / (s * s))) / kappa
    return np.linalg.solve(hessian, rhs)


def _objective(H, f, G, g, kappa, x) -> float:
    s = G @ x - g
    if np.any(s <= 0.0):
        return np.inf
    return float(0.5 * x @ H @ x + f @ x - np.sum(np.log(s)) / kappa)


def _line_search(H, f, G, g, kappa, x, step, gradient) -> np.ndarray:
    """Return x + t step, t halved until inside the rows and F decreases enough (Armijo)."""
    value, t = _objective(H, f, G, g, kappa, x), 1.0
    for _ in range(60):
        trial = x + t * step
        if _objective(H, f, G, g, kappa, trial) <= value + 0.25 * t * (gradient @ step):
            return trial
        t *= 0.5
    return x


def _start(H, f, A, lower, x_lower, x_upper) -> Optional[np.ndarray]:
    """Return a point strictly inside the rows and bounds (the QP with its rows pushed in)."""
    for margin in START_MARGINS:
        width = np.where(np.isfinite(x_lower) & np.isfinite(x_upper), x_upper - x_lower, np.inf)
        pad = np.minimum(margin, 0.25 * width)
        result = solve_daqp(H, f, A, lower + margin, x_lower + pad, x_upper - pad)
        if result.ok:
            G, g = stacked_rows(A, lower, x_lower, x_upper)
            if np.all(G @ result.x - g > 0.0):
                return result.x
    return None
