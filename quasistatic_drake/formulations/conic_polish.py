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
optimality conditions on that set (Nocedal & Wright, eq. 16.4); its
solution is accepted if it leaves no row by more than POLISH_TOL and lies
within NEAR of the method's (a wrong guess, near a change of active set,
moves it further, and is refused: the method's own solution is kept).
Where contacts share a load (a box's four corners on a table) the
multipliers are not unique: the polished ones are the nearest the method's,
which are centred among them.  Solved exactly, the step repeats to round-off
under a small change of its data, and its derivatives (``conic_step.py``)
are those of its active set.  This module imports neither Drake nor ROS.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

POLISH_TOL = 1e-9            # relative: how far a polished solution may leave a row
NEAR = 1e-6                  # relative: how far it may move from the method's (else: refused)
ON_BOUNDARY = 1e-6           # a cone's friction this close to its bound (relative) slides
DIRECTION_TOL = 1e-10        # a sliding force that changed less than this (relative) has settled
DIRECTION_ITERATIONS = 12
REFINEMENTS = 2


def polish(P: np.ndarray, c: np.ndarray, G: np.ndarray, h: np.ndarray, m_l: int,
           cones: np.ndarray, cone_t: np.ndarray, x: np.ndarray, s: np.ndarray,
           z: np.ndarray) -> Optional[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """
    Return (x, s, z) solved exactly on the active set of (x, s, z), or None (module docstring).

    ``cones`` holds each friction cone's first row, ``cone_t`` its t variable.
    """
    m = len(h)
    active = list(np.flatnonzero(z[:m_l] > s[:m_l]))
    sliding, fixed_z, slips = [], np.zeros(m), {}
    for a, t in zip(cones, cone_t):
        margin = z[a] - np.hypot(z[a + 1], z[a + 2])
        if margin > ON_BOUNDARY * z[a]:      # the friction inside its bound: sticks
            active.extend((a, a + 1, a + 2))
        else:
            sliding.append((a, t))
            slips[a] = s[a + 1:a + 3].copy()
            fixed_z[a:a + 3] = _sliding_force(c[t], -slips[a])
    active = np.array(active, dtype=int)
    free = np.ones(len(x), dtype=bool)
    for _, t in sliding:
        free[t] = False                       # t = |u|, set once v is known
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
        x_new, multipliers = _solve_on(hessian, c, G, h, active, free, fixed_z,
                                       np.zeros(len(active)))
        if multipliers.min(initial=0.0) < 0.0:   # the least-norm ones leave their cone
            x_new, multipliers = _solve_on(hessian, c, G, h, active, free, fixed_z, z[active])
        s_new = h - G @ x_new
        settled = True
        for a, t in sliding:
            u = s_new[a + 1:a + 3]
            x_new[t] = np.hypot(*u)
            s_new[a] = x_new[t] + h[a]
            force = _sliding_force(c[t], -u)
            settled &= np.abs(force - fixed_z[a:a + 3]).max() <= DIRECTION_TOL * max(c[t], 1.0)
            fixed_z[a:a + 3] = force
            slips[a] = u.copy()
        if settled:
            break
    z_new = fixed_z.copy()
    z_new[active] = multipliers
    s_new[active] = 0.0
    if not _accepted(x_new, s_new, z_new, m_l, cones, sliding, h, x, z):
        return None
    return x_new, s_new, z_new


def _sliding_force(w: float, direction: np.ndarray) -> np.ndarray:
    """Return z = (w, w d / |d|) of a sliding cone (d the friction's direction)."""
    norm = np.hypot(*direction)
    if norm == 0.0:
        return np.array([w, 0.0, 0.0])
    return np.array([w, w * direction[0] / norm, w * direction[1] / norm])


def _solve_on(P, c, G, h, active, free, fixed_z, z_near) -> tuple[np.ndarray, np.ndarray]:
    """
    Return x and the active rows' multipliers of P x + c + G^T z = 0, G_A x = h_A.

    Of the multipliers that solve it (a shared load's are many), those
    nearest ``z_near``, the method's: its correction is the least-norm one.
    """
    n, k = int(free.sum()), len(active)
    G_A = G[active][:, free]
    K = np.zeros((n + k, n + k))
    K[:n, :n] = P[np.ix_(free, free)]
    K[:n, n:] = G_A.T
    K[n:, :n] = G_A
    rhs = np.concatenate([-(c + G.T @ fixed_z)[free] - G_A.T @ z_near, h[active]])
    solution = np.linalg.lstsq(K, rhs, rcond=1e-13)[0]
    for _ in range(REFINEMENTS):             # iterative refinement: its residual to round-off
        solution += np.linalg.lstsq(K, rhs - K @ solution, rcond=1e-13)[0]
    x = np.zeros(len(free))
    x[free] = solution[:n]
    return x, z_near + solution[n:]


def _accepted(x, s, z, m_l, cones, sliding, h, x_method, z_method) -> bool:
    """Return whether the polished point is in its cones and near the method's (docstring)."""
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
    return np.abs(x - x_method).max(initial=0.0) <= NEAR * (1.0 + np.abs(x_method).max())
