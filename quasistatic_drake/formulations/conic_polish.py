r"""
The interior-point solution made exact: its active set solved as equations.

An interior-point method stops on the central path, a gap of mu from the
solution: its x is exact to about sqrt(mu) in the directions the cost
prices weakly (the yaw of a box sliding under a finger moved 2e-7 rad/s
between two runs of the same step).  Once it has stopped, each row and
cone of the problem (``conic_ipm.py``: P, c, G, h, s, z) is classified by
which of s and z is larger:

* a linear row is active where z > s: G_r x = h_r;
* a friction cone sticks where its friction is inside its bound (z's least
  eigenvalue above ON_BOUNDARY of its largest): its three rows hold (t = 0,
  no slip); a grasp at the edge of its friction slides at 1e-7 m/s, with
  the friction at its bound to 1e-9;
* a cone that slides keeps the friction at its bound against the slip,
  z = (w, -w u / |u|) with u the slip: Newton's method on that law, its
  tangent stiffness (w / |u|) (I - u u^T / |u|^2) added to the Hessian,
  from the method's slip, until the direction settles.

The active rows and the sliding cones' forces give one linear system, the
optimality conditions on that set (Nocedal & Wright, eq. 16.4); a row
guessed active whose multiplier comes out negative is dropped and the set
solved again.  The solution is accepted if it satisfies every optimality
condition to POLISH_TOL of the size of its own terms (stationarity, the
active rows, every slack and multiplier in its cone, each sliding cone's
force against its slip) and lies within NEAR of the method's (a wrong
guess, near a change of active set, moves it further, and is refused: the
method's own solution is kept).  Where contacts share a load (a box's
four corners on a table) the multipliers are not unique: the polished ones
are the least-norm ones (``_least_norm_kkt``), or, where those leave their
cone, the nearest the method's, which are centred among them.  Solved
exactly, the step repeats to round-off under a small change of its data,
and its derivatives (``conic_step.py``) are those of its active set.
This module imports neither Drake nor ROS.
"""

from __future__ import annotations

from typing import Optional

import numba
import numpy as np

POLISH_TOL = 1e-9            # relative: how far a polished solution may leave a row
ON_BOUNDARY = 1e-6           # a cone's friction this close to its bound (relative) slides
DIRECTION_TOL = 1e-10        # a sliding force that changed less than this (relative) has settled
DIRECTION_ITERATIONS = 12
ACTIVE_SET_PASSES = 3
NEAR = 1e-6                  # relative: how far it may move from the method's (else: refused)
ROUND_OFF_PLATEAU = 1e-7     # a force change below this that stopped halving: round-off
# the optimality conditions on an active set (``_least_norm_kkt``): the multipliers' least-norm
# solution drops the singular values below RCOND (relative); refined to RESIDUAL
RCOND = 1e-13
REFINEMENTS = 4              # at most; refinement stops at RESIDUAL
RESIDUAL = 1e-14             # relative to the right-hand side


def polish(P: np.ndarray, c: np.ndarray, G: np.ndarray, h: np.ndarray, m_l: int,
           cones: np.ndarray, cone_t: np.ndarray, x: np.ndarray, s: np.ndarray,
           z: np.ndarray) -> Optional[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """
    Return (x, s, z) solved exactly on the active set of (x, s, z), or None (module docstring).

    ``cones`` holds each friction cone's first row, ``cone_t`` its t variable.
    A linear row guessed active whose multiplier comes out negative is
    dropped and the set solved again (at most ACTIVE_SET_PASSES times).
    """
    active = list(np.flatnonzero(z[:m_l] > s[:m_l]))
    sliding = []
    for a, t in zip(cones, cone_t):
        margin = z[a] - np.hypot(z[a + 1], z[a + 2])
        if margin > ON_BOUNDARY * z[a]:      # the friction inside its bound: sticks
            active.extend((a, a + 1, a + 2))
        else:
            sliding.append((a, t))
    tol_z = POLISH_TOL * (1.0 + np.abs(z).max(initial=0.0))
    for _ in range(ACTIVE_SET_PASSES):
        active = np.array(active, dtype=int)
        solved = _on_active_set(P, c, G, h, active, sliding, x, s, z)
        if solved is None:
            return None
        x_new, s_new, z_new = solved
        pulling = [r for r in active if r < m_l and z_new[r] < -tol_z]
        if not pulling:
            break
        active = [r for r in active if r not in pulling]
    else:
        return None
    # stationarity and the active rows, each to POLISH_TOL of the size of its own terms
    size_x = 1.0 + np.abs(c) + np.abs(P) @ np.abs(x_new) + np.abs(G.T) @ np.abs(z_new)
    if np.any(np.abs(P @ x_new + c + G.T @ z_new) > POLISH_TOL * size_x):
        return None                           # e.g. the sliding law did not hold
    size_s = 1.0 + np.abs(h[active]) + np.abs(G[active]) @ np.abs(x_new)
    if np.any(np.abs(s_new[active]) > POLISH_TOL * size_s):
        return None
    s_new[active] = 0.0
    if not _accepted(s_new, z_new, m_l, cones, sliding, h, z):
        return None
    if np.abs(x_new - x).max(initial=0.0) > NEAR * (1.0 + np.abs(x).max(initial=0.0)):
        return None                           # a guess far from the method's: refused
    return x_new, s_new, z_new


def _on_active_set(P, c, G, h, active, sliding, x, s,
                   z) -> Optional[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Return (x, s, z) with ``active`` rows held and ``sliding`` cones' law solved, or None."""
    fixed_z, slips = np.zeros(len(h)), {}
    free = np.ones(len(x), dtype=bool)
    for a, t in sliding:
        slips[a] = s[a + 1:a + 3].copy()
        fixed_z[a:a + 3] = _sliding_force(c[t], -slips[a])
        free[t] = False                       # t = |u|, set once v is known
    last_change = np.inf
    for _ in range(DIRECTION_ITERATIONS):
        hessian = P.copy()
        for a, t in sliding:                  # the sliding law's tangent stiffness
            u = slips[a]
            norm = np.hypot(*u)
            if norm == 0.0:
                return None
            e = u / norm
            rows = G[a + 1:a + 3]
            hessian += rows.T @ ((c[t] / norm) * (np.eye(2) - np.outer(e, e))) @ rows
        solved = _solve_on(hessian, c, G, h, active, free, fixed_z, np.zeros(len(active)))
        if solved is None:
            return None
        x_new, multipliers = solved
        if multipliers.min(initial=0.0) < 0.0:   # the least-norm ones leave their cone
            solved = _solve_on(hessian, c, G, h, active, free, fixed_z, z[active])
            if solved is None:
                return None
            x_new, multipliers = solved
        s_new = h - G @ x_new
        change = 0.0                          # of the sliding forces, relative to their bound
        for a, t in sliding:
            u = s_new[a + 1:a + 3]
            x_new[t] = np.hypot(*u)
            s_new[a] = x_new[t] + h[a]
            force = _sliding_force(c[t], -u)
            change = max(change, np.abs(force - fixed_z[a:a + 3]).max() / max(c[t], 1.0))
            fixed_z[a:a + 3] = force
            slips[a] = u.copy()
        if change <= DIRECTION_TOL or (change <= ROUND_OFF_PLATEAU
                                       and change > 0.5 * last_change):
            break                             # settled, or Newton stalls at round-off
        last_change = change
    # polish() checks stationarity with the last forces
    z_new = fixed_z.copy()
    z_new[active] = multipliers
    return x_new, s_new, z_new


def _sliding_force(w: float, direction: np.ndarray) -> np.ndarray:
    """Return z = (w, w d / |d|) of a sliding cone (d the friction's direction)."""
    norm = np.hypot(*direction)
    if norm == 0.0:
        return np.array([w, 0.0, 0.0])
    return np.array([w, w * direction[0] / norm, w * direction[1] / norm])


def _solve_on(P, c, G, h, active, free, fixed_z,
              z_near) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """
    Return x and the active rows' multipliers of P x + c + G^T z = 0, G_A x = h_A, or None.

    Of the multipliers that solve it (a shared load's are many), those
    nearest ``z_near``, the method's (``_refined_solve``).  None: the
    system has no solution (the active set guessed is not one).
    """
    G_A = np.ascontiguousarray(G[active][:, free])
    r_x = -(c + G.T @ fixed_z)[free] - G_A.T @ z_near
    solved = _least_norm_kkt(np.ascontiguousarray(P[np.ix_(free, free)]), G_A, r_x,
                             np.ascontiguousarray(h[active]))
    if solved is None:
        return None
    x = np.zeros(len(free))
    x[free] = solved[0]
    return x, z_near + solved[1]


@numba.njit(cache=True)
def _least_norm_kkt(P: np.ndarray, A: np.ndarray, r_x: np.ndarray,
                    b: np.ndarray) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """
    Return (x, y) solving P x + A^T y = r_x, A x = b with the least-norm y, or None.

    x is unique (P is positive definite on the null space of A), y need not
    be (dependent rows: a shared load).  With H = P + A^T A (positive
    definite; the same solutions, as A x = b) and H = L L^T, B = A L^-T:
    B B^T y = A H^-1 (r_x + A^T b) - b, whose least-norm solution comes from
    the thin SVD of B (k x n; singular values below RCOND of the largest
    dropped).  Refined against the residual of the original equations.
    """
    n, k = A.shape[1], A.shape[0]
    H = P + A.T @ A
    try:
        L = np.linalg.cholesky(H)
    except Exception:                                  # noqa: B902 (numba: LinAlgError)
        return None
    B = _lower_solve(L, A.T.copy()).T.copy()           # A L^-T
    if k == 0:
        U, sigma = np.zeros((0, 0)), np.zeros(0)
    else:
        U, sigma, _ = np.linalg.svd(B, full_matrices=False)
    keep = sigma > RCOND * max(sigma[0] if sigma.shape[0] else 0.0, 1e-300)
    x = np.zeros(n)
    y = np.zeros(k)
    rhs_x, rhs_b = r_x.copy(), b.copy()
    scale = 1.0 + max(np.abs(r_x).max() if n else 0.0, np.abs(b).max() if k else 0.0)
    for _ in range(REFINEMENTS):
        g = rhs_x + A.T @ rhs_b
        w = np.ascontiguousarray(_lower_solve(L, g.reshape(-1, 1))[:, 0])   # L^-1 g
        t = B @ w - rhs_b                              # A H^-1 g - b
        coef = np.ascontiguousarray(U.T) @ t
        dy = np.zeros(k)
        for i in range(sigma.shape[0]):
            if keep[i]:
                dy += U[:, i] * (coef[i] / (sigma[i] * sigma[i]))
        dx = _upper_solve(L, (w - B.T @ dy).reshape(-1, 1))[:, 0]   # L^-T (...)
        x += dx
        y += dy
        rhs_x = r_x - P @ x - A.T @ y
        rhs_b = b - A @ x
        worst = max(np.abs(rhs_x).max() if n else 0.0, np.abs(rhs_b).max() if k else 0.0)
        if worst <= RESIDUAL * scale:
            return x, y
    if worst <= 1e3 * RESIDUAL * scale:
        return x, y
    return None


@numba.njit(cache=True)
def _lower_solve(L: np.ndarray, R: np.ndarray) -> np.ndarray:
    """Return L^-1 R (L lower triangular)."""
    n, m = R.shape
    out = R.copy()
    for j in range(m):
        for i in range(n):
            acc = out[i, j]
            for p in range(i):
                acc -= L[i, p] * out[p, j]
            out[i, j] = acc / L[i, i]
    return out


@numba.njit(cache=True)
def _upper_solve(L: np.ndarray, R: np.ndarray) -> np.ndarray:
    """Return L^-T R (L lower triangular)."""
    n, m = R.shape
    out = R.copy()
    for j in range(m):
        for i in range(n - 1, -1, -1):
            acc = out[i, j]
            for p in range(i + 1, n):
                acc -= L[p, i] * out[p, j]
            out[i, j] = acc / L[i, i]
    return out


def _accepted(s, z, m_l, cones, sliding, h, z_method) -> bool:
    """Return whether the polished point's s and z are in their cones (module docstring)."""
    tol_s = POLISH_TOL * (1.0 + np.abs(h).max(initial=0.0))
    tol_z = POLISH_TOL * (1.0 + np.abs(z_method).max(initial=0.0))
    if s[:m_l].min(initial=0.0) < -tol_s or z[:m_l].min(initial=0.0) < -tol_z:
        return False
    for a in cones:
        if s[a] - np.hypot(s[a + 1], s[a + 2]) < -tol_s:
            return False
        if z[a] - np.hypot(z[a + 1], z[a + 2]) < -tol_z:
            return False
    for a, _ in sliding:
        if np.hypot(s[a + 1], s[a + 2]) <= tol_s:
            return False                      # slides at no speed: a guess near sticking
    return True
