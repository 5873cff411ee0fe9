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

The same equations solve the active set that the last step's solution
names (``polish_guess``): with no method's point to stay near, every row
and multiplier is judged on its own terms, and the interior-point method
runs only where that fails.  An active row on one variable alone fixes the
variable, and its multiplier comes from that variable's stationarity.
This module imports neither Drake nor ROS.
"""

from __future__ import annotations

import math
from typing import Optional

import numba
import numpy as np

POLISH_TOL = 1e-9            # relative: how far a polished solution may leave a row
ON_BOUNDARY = 1e-6           # a cone's friction this close to its bound (relative) slides
DIRECTION_TOL = 1e-10        # a sliding force that changed less than this (relative) has settled
DIRECTION_ITERATIONS = 12
# from the last step's active set (``polish_guess``) at most these: every guess accepted on
# the two pads, the arm, the finger and the bin settled within them (the same steps bit for
# bit as with 12), and a wrong one's further iterations cost the bin's island of 50 cones
# 3 ms each (a step of 20.5 ms)
GUESS_ITERATIONS = 2
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
    ok, x_new, s_new, z_new = _polish(
        np.ascontiguousarray(P, dtype=float), np.ascontiguousarray(c, dtype=float),
        np.ascontiguousarray(G, dtype=float), np.ascontiguousarray(h, dtype=float), m_l,
        np.ascontiguousarray(cones, dtype=np.int64),
        np.ascontiguousarray(cone_t, dtype=np.int64), np.ascontiguousarray(x, dtype=float),
        np.ascontiguousarray(s, dtype=float), np.ascontiguousarray(z, dtype=float),
        DIRECTION_ITERATIONS)
    return (x_new, s_new, z_new) if ok else None


def polish_guess(P: np.ndarray, c: np.ndarray, G: np.ndarray, h: np.ndarray, m_l: int,
                 cones: np.ndarray, cone_t: np.ndarray, s: np.ndarray,
                 z: np.ndarray) -> Optional[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """
    Return (x, s, z) solved exactly on the active set that a guessed (s, z) says, or None.

    The guess is the last step's solution carried to this step's rows
    (``conic_step._guessed_point``).  Accepted on every optimality condition
    (``polish``'s), and, with no method's point to stay near, on each row's
    and each multiplier's sign judged on its own terms (``_row_by_row``):
    the conditions hold, so the point is the problem's solution.
    """
    ok, x_new, s_new, z_new = _polished(P, c, G, h, m_l, cones, cone_t, s, z,
                                        GUESS_ITERATIONS)
    if not ok or not _row_by_row(G, h, m_l, cones, x_new, s_new, z_new):
        return None
    return x_new, s_new, z_new


@numba.njit(cache=True)
def _row_by_row(G, h, m_l, cones, x, s, z) -> bool:
    """
    Return whether every row and cone holds to POLISH_TOL of its own terms' size.

    ``_accepted`` judges s against the largest |h|: one contact row with
    almost no Jacobian, scaled to unit norm, had h = 3e12 and let a row
    397 off through (an arm's joints at 170 rad/s, past their limits).
    Each s_r here is judged against 1 + |h_r| + sum_j |G_rj x_j|, and each
    multiplier's sign against the largest multiplier of the rows on more
    than one variable (a slack's price, 1e7 scaled, is not a contact's load).
    """
    m = h.shape[0]
    size = np.ones(m)
    load = 1.0
    for r in range(m):
        size[r] += abs(h[r])
        count = 0
        for j in range(G.shape[1]):
            if G[r, j] != 0.0:
                size[r] += abs(G[r, j] * x[j])
                count += 1
        if count > 1:
            load = max(load, abs(z[r]))
    tol_z = POLISH_TOL * load
    for r in range(m_l):
        if s[r] < -POLISH_TOL * size[r] or z[r] < -tol_z:
            return False
    for i in range(cones.shape[0]):
        a = cones[i]
        cone_size = size[a] + size[a + 1] + size[a + 2]
        if s[a] - math.hypot(s[a + 1], s[a + 2]) < -POLISH_TOL * cone_size:
            return False
        if z[a] - math.hypot(z[a + 1], z[a + 2]) < -tol_z:
            return False
    return True


@numba.njit(cache=True)
def _polish(P, c, G, h, m_l, cones, cone_t, x, s, z, iterations):
    """Return (accepted, x, s, z): ``polish`` compiled (its docstring)."""
    ok, x_new, s_new, z_new = _polished(P, c, G, h, m_l, cones, cone_t, s, z, iterations)
    if not ok or np.abs(x_new - x).max() > NEAR * (1.0 + np.abs(x).max()):
        return False, x, s, z                 # a guess far from the method's: refused
    return True, x_new, s_new, z_new


@numba.njit(cache=True)
def _polished(P, c, G, h, m_l, cones, cone_t, s, z, iterations):
    """
    Return (accepted, x, s, z) of ``polish`` but its nearness to the method's x.

    ``iterations`` bounds the sliding law's Newton iterations per active set.
    """
    n_c = cones.shape[0]
    active = np.empty(m_l + 3 * n_c, dtype=np.int64)
    n_a = 0
    for r in range(m_l):
        if z[r] > s[r]:
            active[n_a] = r
            n_a += 1
    sliding = np.zeros(n_c, dtype=np.bool_)
    for i in range(n_c):
        a = cones[i]
        margin = z[a] - math.hypot(z[a + 1], z[a + 2])
        if margin > ON_BOUNDARY * z[a]:      # the friction inside its bound: sticks
            active[n_a], active[n_a + 1], active[n_a + 2] = a, a + 1, a + 2
            n_a += 3
        else:
            sliding[i] = True
    active = active[:n_a]
    tol_z = POLISH_TOL * (1.0 + (np.abs(z).max() if z.shape[0] else 0.0))
    failed = (False, np.zeros(P.shape[0]), s, z)
    settled = False
    for _ in range(ACTIVE_SET_PASSES):
        ok, x_new, s_new, z_new = _on_active_set(P, c, G, h, active, cones, cone_t, sliding,
                                                 s, z, iterations)
        if not ok:
            return failed
        keep = np.ones(active.shape[0], dtype=np.bool_)
        for i in range(active.shape[0]):
            r = active[i]
            keep[i] = not (r < m_l and z_new[r] < -tol_z)
        if keep.all():
            settled = True
            break
        active = active[keep]
    if not settled:
        return failed
    # stationarity and the active rows, each to POLISH_TOL of the size of its own terms
    size_x = 1.0 + np.abs(c) + np.abs(P) @ np.abs(x_new) + np.abs(G.T) @ np.abs(z_new)
    if np.any(np.abs(P @ x_new + c + G.T @ z_new) > POLISH_TOL * size_x):
        return failed                         # e.g. the sliding law did not hold
    for r in active:
        size_s = 1.0 + abs(h[r])
        for j in range(G.shape[1]):
            size_s += abs(G[r, j]) * abs(x_new[j])
        if abs(s_new[r]) > POLISH_TOL * size_s:
            return failed
    for r in active:
        s_new[r] = 0.0
    if not _accepted(s_new, z_new, m_l, cones, sliding, h, z):
        return failed
    return True, x_new, s_new, z_new


@numba.njit(cache=True)
def _on_active_set(P, c, G, h, active, cones, cone_t, sliding, s, z, iterations):
    """
    Return (solved, x, s, z) with ``active`` rows held and ``sliding`` cones' law solved.

    An active row on one variable alone (a bound on v', a slack's sigma >= 0,
    a sticking cone's t) fixes that variable, and its multiplier follows
    from the variable's own stationarity once the rest is solved: a
    penetrating contact's slack row, whose multiplier is its price less its
    impulse (1e7 in the step's scaling), stays out of the equations, where
    it cost the velocities their last digits.
    """
    n, m = P.shape[0], h.shape[0]
    fixed_z = np.zeros(m)
    slips = np.zeros((cones.shape[0], 2))
    free = np.ones(n, dtype=np.bool_)
    for i in range(cones.shape[0]):
        if sliding[i]:
            a, t = cones[i], cone_t[i]
            slips[i, 0], slips[i, 1] = s[a + 1], s[a + 2]
            fixed_z[a:a + 3] = _sliding_force(c[t], -slips[i, 0], -slips[i, 1])
            free[t] = False                   # t = |u|, set once v is known
    fixes, x_fixed = _fixed_variables(G, h, active, free)
    free_idx = np.flatnonzero(free)
    rows = active[fixes < 0]
    G_A = np.empty((rows.shape[0], free_idx.shape[0]))
    h_A = np.empty(rows.shape[0])
    for i in range(rows.shape[0]):
        for j in range(free_idx.shape[0]):
            G_A[i, j] = G[rows[i], free_idx[j]]
        h_A[i] = h[rows[i]] - G[rows[i]] @ x_fixed
    x_new, s_new = np.zeros(n), np.zeros(m)
    multipliers = np.zeros(active.shape[0])
    failed = (False, x_new, s_new, fixed_z)
    last_change = np.inf
    for _ in range(iterations):
        hessian = P.copy()
        for i in range(cones.shape[0]):       # the sliding law's tangent stiffness
            if not sliding[i]:
                continue
            a, t = cones[i], cone_t[i]
            norm = math.hypot(slips[i, 0], slips[i, 1])
            if norm == 0.0:
                return failed
            e = slips[i] / norm
            cone_rows = G[a + 1:a + 3]
            stiffness = (c[t] / norm) * (np.eye(2) - np.outer(e, e))
            hessian += (cone_rows.T @ stiffness) @ cone_rows
        H = np.empty((free_idx.shape[0], free_idx.shape[0]))
        for i in range(free_idx.shape[0]):
            for j in range(free_idx.shape[0]):
                H[i, j] = hessian[free_idx[i], free_idx[j]]
        factor = _kkt_factor(H, G_A)
        if not factor[0]:
            return failed
        forces = c + G.T @ fixed_z                 # the cost's and the sliding cones' terms
        base = forces + hessian @ x_fixed
        r_x = np.empty(free_idx.shape[0])
        for j in range(free_idx.shape[0]):
            r_x[j] = -base[free_idx[j]]
        ok, x_free, y = _kkt_solve(H, G_A, factor, r_x, h_A)
        if not ok:
            return failed
        x_new = _with_free(x_fixed, free_idx, x_free)
        multipliers = _all_multipliers(hessian, forces, G, x_new, active, fixes, rows, y)
        if multipliers.shape[0] and multipliers.min() < 0.0:  # the least-norm ones leave
            z_near = np.empty(rows.shape[0])                  # their cone: nearest the method's
            for i in range(rows.shape[0]):
                z_near[i] = z[rows[i]]
            ok, x_free, y = _kkt_solve(H, G_A, factor, r_x - G_A.T @ z_near, h_A)
            if not ok:
                return failed
            x_new = _with_free(x_fixed, free_idx, x_free)
            multipliers = _all_multipliers(hessian, forces, G, x_new, active, fixes, rows,
                                           z_near + y)
        s_new = h - G @ x_new
        change = 0.0                          # of the sliding forces, relative to their bound
        for i in range(cones.shape[0]):
            if not sliding[i]:
                continue
            a, t = cones[i], cone_t[i]
            u0, u1 = s_new[a + 1], s_new[a + 2]
            x_new[t] = math.hypot(u0, u1)
            s_new[a] = x_new[t] + h[a]
            force = _sliding_force(c[t], -u0, -u1)
            change = max(change, np.abs(force - fixed_z[a:a + 3]).max() / max(c[t], 1.0))
            fixed_z[a:a + 3] = force
            slips[i, 0], slips[i, 1] = u0, u1
        if change <= DIRECTION_TOL or (change <= ROUND_OFF_PLATEAU
                                       and change > 0.5 * last_change):
            break                             # settled, or Newton stalls at round-off
        last_change = change
    # polish() checks stationarity with the last forces
    z_new = fixed_z.copy()
    for i in range(active.shape[0]):
        z_new[active[i]] = multipliers[i]
    return True, x_new, s_new, z_new


@numba.njit(cache=True)
def _fixed_variables(G, h, active, free):
    """
    Return which variable each active row fixes (-1: none) and the fixed values.

    A row fixes a variable where it is the row's only one and still free
    (``free`` is updated); the value holds the row, G_rj x_j = h_r.
    """
    n = G.shape[1]
    fixes = -np.ones(active.shape[0], dtype=np.int64)
    x_fixed = np.zeros(n)
    for i in range(active.shape[0]):
        r = active[i]
        only, count = -1, 0
        for j in range(n):
            if G[r, j] != 0.0:
                only = j
                count += 1
        if count == 1 and free[only]:
            free[only] = False
            fixes[i] = only
            x_fixed[only] = h[r] / G[r, only]
    return fixes, x_fixed


@numba.njit(cache=True)
def _with_free(x_fixed, free_idx, x_free):
    """Return x: the fixed values, with the free variables' solved values in place."""
    x = x_fixed.copy()
    for j in range(free_idx.shape[0]):
        x[free_idx[j]] = x_free[j]
    return x


@numba.njit(cache=True)
def _all_multipliers(hessian, forces, G, x, active, fixes, rows, y):
    """
    Return the active rows' multipliers: ``y`` of the solved ones, the rest from stationarity.

    The row that fixes variable j takes the multiplier that zeroes j's
    stationarity, (hessian x)_j + forces_j + G_j^T z = 0 (``forces``: the
    cost's linear term and the sliding cones' forces).
    """
    gradient = hessian @ x + forces
    for i in range(rows.shape[0]):
        for j in range(G.shape[1]):
            gradient[j] += G[rows[i], j] * y[i]
    out = np.empty(active.shape[0])
    k = 0
    for i in range(active.shape[0]):
        if fixes[i] < 0:
            out[i] = y[k]
            k += 1
    for i in range(active.shape[0]):
        j = fixes[i]
        if j >= 0:
            out[i] = -gradient[j] / G[active[i], j]
    return out


@numba.njit(cache=True)
def _sliding_force(w, d0, d1):
    """Return z = (w, w d / |d|) of a sliding cone (d the friction's direction)."""
    norm = math.hypot(d0, d1)
    if norm == 0.0:
        return np.array([w, 0.0, 0.0])
    return np.array([w, w * d0 / norm, w * d1 / norm])


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
    dropped): ``_kkt_factor``, then ``_kkt_solve``, refined against the
    residual of the original equations.
    """
    factor = _kkt_factor(P, A)
    if not factor[0]:
        return None
    ok, x, y = _kkt_solve(P, A, factor, r_x, b)
    if not ok:
        return None
    return x, y


@numba.njit(cache=True)
def _kkt_factor(P, A):
    """Return (ok, L, B, U, sigma, keep) of ``_least_norm_kkt`` (its docstring)."""
    n, k = A.shape[1], A.shape[0]
    H = P + A.T @ A
    L = np.zeros((n, n))
    if n:                                              # (none: every variable fixed)
        try:
            L = np.linalg.cholesky(H)
        except Exception:                              # noqa: B902 (numba: LinAlgError)
            return False, L, np.zeros((k, n)), np.zeros((k, 0)), np.zeros(0), \
                np.zeros(0, dtype=np.bool_)
    B = _lower_solve(L, A.T.copy()).T.copy()           # A L^-T
    if k == 0 or n == 0:
        U, sigma = np.zeros((k, 0)), np.zeros(0)
    else:
        U, sigma, _ = np.linalg.svd(B, full_matrices=False)
    keep = sigma > RCOND * max(sigma[0] if sigma.shape[0] else 0.0, 1e-300)
    return True, L, B, U, sigma, keep


@numba.njit(cache=True)
def _kkt_solve(P, A, factor, r_x, b):
    """Return (ok, x, y) of ``_least_norm_kkt`` from ``_kkt_factor``'s ``factor``."""
    _, L, B, U, sigma, keep = factor
    n, k = A.shape[1], A.shape[0]
    x = np.zeros(n)
    y = np.zeros(k)
    rhs_x, rhs_b = r_x.copy(), b.copy()
    scale = 1.0 + max(np.abs(r_x).max() if n else 0.0, np.abs(b).max() if k else 0.0)
    worst, last = np.inf, np.inf
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
        if _settled(P, A, x, y, r_x, b, rhs_x, rhs_b):
            return True, x, y
        if worst > 0.5 * last:
            break                                      # no better: the round-off floor
        last = worst
    return worst <= 1e3 * RESIDUAL * scale, x, y


@numba.njit(cache=True)
def _settled(P, A, x, y, r_x, b, rhs_x, rhs_b) -> bool:
    """
    Return whether each equation's residual is within RESIDUAL of the size of its own terms.

    Each equation on its own: a contact row's terms are 1e-20 where the
    friction's are 1e2, and a residual relative to the largest term left
    the rows 1e-12 off, a box's pitch 1e-8 rad/s once unscaled.
    """
    for i in range(rhs_x.shape[0]):
        size = 1.0 + abs(r_x[i])
        for j in range(x.shape[0]):
            size += abs(P[i, j] * x[j])
        for j in range(y.shape[0]):
            size += abs(A[j, i] * y[j])
        if abs(rhs_x[i]) > RESIDUAL * size:
            return False
    for i in range(rhs_b.shape[0]):
        size = 1.0 + abs(b[i])
        for j in range(x.shape[0]):
            size += abs(A[i, j] * x[j])
        if abs(rhs_b[i]) > RESIDUAL * size:
            return False
    return True


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


@numba.njit(cache=True)
def _accepted(s, z, m_l, cones, sliding, h, z_method) -> bool:
    """Return whether the polished point's s and z are in their cones (module docstring)."""
    tol_s = POLISH_TOL * (1.0 + (np.abs(h).max() if h.shape[0] else 0.0))
    tol_z = POLISH_TOL * (1.0 + (np.abs(z_method).max() if z_method.shape[0] else 0.0))
    for r in range(m_l):
        if s[r] < -tol_s or z[r] < -tol_z:
            return False
    for i in range(cones.shape[0]):
        a = cones[i]
        if s[a] - math.hypot(s[a + 1], s[a + 2]) < -tol_s:
            return False
        if z[a] - math.hypot(z[a + 1], z[a + 2]) < -tol_z:
            return False
        if sliding[i] and math.hypot(s[a + 1], s[a + 2]) <= tol_s:
            return False                      # slides at no speed: a guess near sticking
    return True
