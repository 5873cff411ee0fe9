r"""
The QP step of one contact island: exact normal rows, friction bounded by a lagged impulse.

For the velocities v' of one island (``islands.py``) and its contacts i:

    minimise    1/2 v'^T Q v' + b^T v' + sum_i mu_i lambda_i^- |J_t,i v'| + sum_i p_i sigma_i
    subject to  phi_i / h + J_n,i v' + sigma_i >= 0,   sigma_i >= 0 (sigma only where phi_i < 0)
                v_lower <= v' <= v_upper

Q and b are Pang & Tedrake 2021's (robots as springs, objects quasi-static
or quasi-dynamic; ``qp.py``).  Each contact's normal row is exact: a
contact that slides does not lift (Anitescu's relaxation, the talk's
convex QP, lifts it by mu h |v_t|).  Its friction is the maximum-dissipation
term mu_i lambda_i^- |J_t,i v'| with lambda_i^- the contact's normal impulse
in the last step (``contact_memory.py``): Drake's "lagged" approximation,
which keeps the step convex.  |.| is the round Coulomb cone's norm (the
default; ``friction_cone: pyramid``: the pyramid's, max_j -J_f,ij v').  Its
dual is the friction impulse f_i with |f_i| <= mu_i lambda_i^-, opposite to
the slip where the contact slides.  A penetrating contact gets a slack
sigma_i priced at p_i per unit: where working off all of the penetration
in one step is impossible (velocity limits, contradictory demands), the
step works off what it can.

The problem goes to the interior-point method of ``conic_ipm.py`` with the
velocities scaled to a unit diagonal of Q and every contact's rows to unit
norm.  This module imports neither Drake nor ROS.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numba
import numpy as np
from scipy.linalg import lapack

from quasistatic_drake.formulations import conic_ipm
from quasistatic_drake.formulations.conic_polish import ON_BOUNDARY, polish, polish_guess

ROUND, PYRAMID = conic_ipm.ROUND, conic_ipm.PYRAMID


@dataclass(frozen=True)
class IslandData:
    """One island's problem in plain arrays (its velocities and contacts only)."""

    Q: np.ndarray               # (n, n)
    b: np.ndarray               # (n,)
    lower: np.ndarray           # (n,) bounds on v' (-inf / inf: none)
    upper: np.ndarray
    phi_h: np.ndarray           # (k,) phi / h
    J_n: np.ndarray             # (k, n)
    J_t: np.ndarray             # (k, 2, n): the tangent plane's rows (round cone)
    J_f: np.ndarray             # (k, n_d, n): the pyramid's rows
    friction: np.ndarray        # (k,) mu_i lambda_i^-, the friction bound [N s]
    cone: int                   # ROUND or PYRAMID
    penalty: float              # p of a penetrating contact's slack [N s per m/s]
    guess: Optional["Guess"] = None   # the last step's solution, carried to these contacts


@dataclass(frozen=True)
class Guess:
    """The last step's solution on an island's velocities and contacts (``solve_island``)."""

    v: np.ndarray               # (n,) v' of the last step
    normal: np.ndarray          # (k,) normal impulses [N s] (0: a new contact)
    friction: np.ndarray        # (k, 2) friction impulses along J_t's rows [N s]
    sliding: np.ndarray         # (k,) bool: at its friction bound, slipping


@dataclass(frozen=True)
class CostChange:
    """
    The derivatives of an island's b and bounds along some parameters, its rows and Q held.

    The commands' columns (``island_derivative``): the robots' commands
    enter the step's b and the trust region's bounds only.
    """

    columns: np.ndarray         # (k_c,) the columns they are
    db: np.ndarray              # (n, k_c)
    dlower: np.ndarray          # (n, k_c)
    dupper: np.ndarray          # (n, k_c)


@dataclass(frozen=True)
class ConicPoint:
    """The interior-point method's solution (x, s, z) of the scaled problem, and its scales."""

    x: np.ndarray
    s: np.ndarray
    z: np.ndarray
    scale_v: np.ndarray         # v = scale_v x[:n]
    scale_n: np.ndarray         # each contact's normal row divided by this...
    scale_f: np.ndarray         # ...and its friction rows by this (both reciprocals)


@dataclass(frozen=True)
class IslandSolution:
    """The island's v' (None on failure), impulses and how far each penetration was relaxed."""

    v: Optional[np.ndarray]
    normal: np.ndarray          # (k,) normal impulses [N s]
    friction: np.ndarray        # (k, 2) along J_t's rows (round) or (k, n_d) per pyramid row
    slack: np.ndarray           # (k,) sigma [m/s]
    status: str
    iterations: int
    point: Optional[ConicPoint] = None


def tangent_rows(J_f: np.ndarray, n_c: int, n_d: int) -> np.ndarray:
    """
    Return J_t (n_c, 2, n_v): the rows of t1 and t2 = n x t1, from the balanced J_f.

    d_j = cos(2 pi j / n_d) t1 + sin(2 pi j / n_d) t2 (contact.tangent_directions),
    so J_t1 = J_f,0 and J_t2 = (J_f,1 - cos(2 pi / n_d) J_f,0) / sin(2 pi / n_d);
    with n_d = 2 (a planar scene) there is no t2 and its row is zero.
    """
    return _tangent_rows(np.ascontiguousarray(J_f, dtype=float), n_c, n_d)


@numba.njit(cache=True)
def _tangent_rows(J_f, n_c, n_d):
    """Return ``tangent_rows`` (its docstring)."""
    n_v = J_f.shape[1]
    J_t = np.zeros((n_c, 2, n_v))
    angle = 2.0 * math.pi / n_d
    cos, sin = math.cos(angle), math.sin(angle)
    for i in range(n_c):
        for j in range(n_v):
            J_t[i, 0, j] = J_f[i * n_d, j]
            if n_d > 2:
                J_t[i, 1, j] = (J_f[i * n_d + 1, j] - cos * J_f[i * n_d, j]) / sin
    return J_t


@dataclass(frozen=True)
class _Compact:
    """An island's problem as ``conic_ipm.solve_contact_qp`` takes it (scaled, sparse rows)."""

    Q: np.ndarray
    c_v: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    cptr: np.ndarray
    cols: np.ndarray
    Jn: np.ndarray
    Jt: np.ndarray
    Jf: np.ndarray
    h_n: np.ndarray
    kind: np.ndarray
    w: np.ndarray
    slack: np.ndarray
    penalty: np.ndarray


def _scales(data: IslandData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return v's scale (Q's unit diagonal) and each contact's normal and friction row scales."""
    return _scales_of(data.Q, data.J_n, data.J_t if data.cone == ROUND else data.J_f)


@numba.njit(cache=True)
def _numpy_sum(a):
    """Return the sum of the contiguous a in numpy's pairwise order (bit for bit ``np.sum``)."""
    n = a.shape[0]
    if n < 8:
        total = 0.0
        for i in range(n):
            total += a[i]
        return total
    if n > 128:                                      # numpy's blocks: halves, 8-aligned
        half = n // 2
        half -= half % 8
        return _numpy_sum(a[:half]) + _numpy_sum(a[half:])
    r = a[:8].copy()
    i = 8
    while i < n - n % 8:
        for j in range(8):
            r[j] += a[i + j]
        i += 8
    total = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
    while i < n:
        total += a[i]
        i += 1
    return total


@numba.njit(cache=True)
def _scaled_norm(row, scale):
    """Return |row * scale| as ``np.linalg.norm`` gives it."""
    squares = np.empty(row.shape[0])
    for j in range(row.shape[0]):
        value = row[j] * scale[j]
        squares[j] = value * value
    return math.sqrt(_numpy_sum(squares))


@numba.njit(cache=True)
def _scales_of(Q, J_n, J_friction):
    """Return ``_scales`` from Q, J_n and the friction rows (J_t, or the pyramid's J_f)."""
    n, k = Q.shape[0], J_n.shape[0]
    scale_v = np.empty(n)
    for j in range(n):
        scale_v[j] = 1.0 / math.sqrt(max(Q[j, j], 1e-300))
    scale_n, scale_f = np.empty(k), np.empty(k)
    for i in range(k):
        scale_n[i] = 1.0 / max(_scaled_norm(J_n[i], scale_v), 1e-12)
        top = -np.inf
        for a in range(J_friction.shape[1]):
            top = max(top, _scaled_norm(J_friction[i, a], scale_v))
        scale_f[i] = 1.0 / max(top, 1e-12)
    return scale_v, scale_n, scale_f


def _pattern(data: IslandData) -> np.ndarray:
    """Return the (k, n) mask of the columns each contact's rows touch."""
    return _pattern_of(data.J_n, data.J_t, data.J_f)


@numba.njit(cache=True)
def _pattern_of(J_n, J_t, J_f):
    """Return ``_pattern`` of the rows."""
    k, n = J_n.shape
    pattern = np.empty((k, n), dtype=np.bool_)
    for i in range(k):
        for j in range(n):
            total = abs(J_n[i, j])
            tangent = 0.0
            for a in range(J_t.shape[1]):
                tangent += abs(J_t[i, a, j])
            pyramid = 0.0
            for a in range(J_f.shape[1]):
                pyramid += abs(J_f[i, a, j])
            pattern[i, j] = (total + tangent) + pyramid > 0.0
    return pattern


def _compact(data: IslandData, scales: tuple, pattern: np.ndarray, kind: np.ndarray,
             slack: np.ndarray) -> _Compact:
    """Return the island's problem scaled by ``scales``, its rows on ``pattern``."""
    scale_v, scale_n, scale_f = scales
    Q, c_v, lower, upper, cptr, cols, Jn, Jt, Jf, h_n, w, penalty = _compact_of(
        data.Q, data.b, data.lower, data.upper, data.phi_h, data.J_n, data.J_t, data.J_f,
        data.friction, float(data.penalty), scale_v, scale_n, scale_f, pattern)
    return _Compact(Q=Q, c_v=c_v, lower=lower, upper=upper, cptr=cptr, cols=cols, Jn=Jn,
                    Jt=Jt, Jf=Jf, h_n=h_n, kind=kind, w=w, slack=slack, penalty=penalty)


@numba.njit(cache=True)
def _compact_of(Q, b, lower, upper, phi_h, J_n, J_t, J_f, friction, penalty, scale_v,
                scale_n, scale_f, pattern):
    """Return ``_Compact``'s arrays but kind and slack (the rows on ``pattern``, scaled)."""
    k, n = J_n.shape
    n_d = J_f.shape[1]
    Q_s = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            Q_s[i, j] = Q[i, j] * (scale_v[i] * scale_v[j])
    cptr = np.zeros(k + 1, dtype=np.int64)
    for i in range(k):
        cptr[i + 1] = cptr[i] + pattern[i].sum()
    nnz = cptr[k]
    cols = np.empty(nnz, dtype=np.int64)
    Jn, Jt, Jf = np.empty(nnz), np.empty((2, nnz)), np.empty((n_d, nnz))
    p = 0
    for i in range(k):
        for j in range(n):
            if not pattern[i, j]:
                continue
            cols[p] = j
            Jn[p] = J_n[i, j] * scale_v[j] * scale_n[i]
            for a in range(2):
                Jt[a, p] = J_t[i, a, j] * scale_v[j] * scale_f[i]
            for a in range(n_d):
                Jf[a, p] = J_f[i, a, j] * scale_v[j] * scale_f[i]
            p += 1
    return (Q_s, b * scale_v, lower / scale_v, upper / scale_v, cptr, cols, Jn, Jt, Jf,
            phi_h * scale_n, friction / scale_f, penalty / scale_n)


@numba.njit(cache=True)
def _prepared(Q, b, lower, upper, phi_h, J_n, J_t, J_f, friction, penalty, cone):
    """
    Return an island's scales, kinds, slacks and scaled rows, in one call.

    (scale_v, scale_n, scale_f, kind, slack, then ``_compact_of``'s arrays):
    ``_scales``, ``_structure``, ``_pattern`` and ``_compact`` of the data.
    """
    scale_v, scale_n, scale_f = _scales_of(Q, J_n, J_t if cone == ROUND else J_f)
    kind, slack = _kinds(friction, phi_h, cone)
    return (scale_v, scale_n, scale_f, kind, slack) + _compact_of(
        Q, b, lower, upper, phi_h, J_n, J_t, J_f, friction, penalty, scale_v, scale_n, scale_f,
        _pattern_of(J_n, J_t, J_f))


@numba.njit(cache=True)
def _dense_layout(Q, c_v, lower, upper, cptr, cols, Jn, Jt, Jf, h_n, w, penalty, kind, slack,
                  n_d, data_lower, data_upper):
    """Return ``conic_ipm.layout`` of an island and its dense problem (``_dense``)."""
    layout = conic_ipm.layout(kind, slack, n_d, Q.shape[0], data_lower, data_upper)
    return layout, _dense_of(Q, c_v, lower, upper, cptr, cols, Jn, Jt, Jf, h_n, w, penalty,
                             kind, n_d, *layout)


def _structure(data: IslandData) -> tuple[np.ndarray, np.ndarray]:
    """Return each contact's friction kind (none where its bound is 0) and slack mask."""
    return _kinds(data.friction, data.phi_h, data.cone)


@numba.njit(cache=True)
def _kinds(friction, phi_h, cone):
    """Return ``_structure``: the cone where the friction bound is positive, the slacks."""
    kind = np.empty(friction.shape[0], dtype=np.int64)
    slack = np.empty(friction.shape[0], dtype=np.bool_)
    for i in range(friction.shape[0]):
        kind[i] = cone if friction[i] > 0.0 else conic_ipm.NONE
        slack[i] = phi_h[i] < 0.0
    return kind, slack


def _dense(p: _Compact, kind: np.ndarray, n_d: int, structure: tuple) -> tuple:
    """Return the scaled problem's P, c, G and h as dense arrays (``conic_ipm``'s rows)."""
    return _dense_of(p.Q, p.c_v, p.lower, p.upper, p.cptr, p.cols, p.Jn, p.Jt, p.Jf, p.h_n,
                     p.w, p.penalty, kind, n_d, *structure)


@numba.njit(cache=True)
def _dense_of(Q, c_v, lower, upper, cptr, cols, Jn, Jt, Jf, h_n, w, penalty, kind, n_d,
              normal_row, slack_row, fric_row, t_var, s_var, bound_var, bound_sign, m_l,
              soc_start, n_x):
    """Return ``_dense`` of the compact problem's arrays and its ``conic_ipm.layout``."""
    m = m_l + 3 * soc_start.shape[0]
    G = conic_ipm.dense_g(m, n_x, cptr, cols, Jn, Jt, Jf, kind, n_d, normal_row, slack_row,
                          fric_row, t_var, s_var, bound_var, bound_sign, m_l)
    n_v = Q.shape[0]
    P = np.zeros((n_x, n_x))
    P[:n_v, :n_v] = Q
    c = np.zeros(n_x)
    c[:n_v] = c_v
    for i in range(kind.shape[0]):
        if t_var[i] >= 0:
            c[t_var[i]] = w[i]
        if s_var[i] >= 0:
            c[s_var[i]] = penalty[i]
    h = np.zeros(m)
    for i in range(kind.shape[0]):
        h[normal_row[i]] = h_n[i]
    b0 = m_l - bound_var.shape[0]
    for r in range(bound_var.shape[0]):
        j = bound_var[r]
        h[b0 + r] = upper[j] if bound_sign[r] > 0.0 else -lower[j]
    n_round = 0
    for i in range(kind.shape[0]):
        n_round += kind[i] == ROUND
    cones, cone_t = np.empty(n_round, dtype=np.int64), np.empty(n_round, dtype=np.int64)
    r = 0
    for i in range(kind.shape[0]):
        if kind[i] == ROUND:
            cones[r], cone_t[r] = fric_row[i], t_var[i]
            r += 1
    return P, c, G, h, cones, cone_t


def solve_island(data: IslandData) -> IslandSolution:
    """
    Solve one island's problem (module docstring).

    1. The last step's solution, carried to this step's rows (``data.guess``),
       says which rows are active and which cones slide; that set is solved
       as equations (``conic_polish.polish_guess``).  If every optimality
       condition holds there, that is the solution.
    2. Otherwise the interior-point method solves the problem
       (``conic_ipm.solve_contact_qp``), and its active set is solved as
       equations (``conic_polish.polish``).
    """
    n, k = len(data.b), len(data.phi_h)
    n_d = data.J_f.shape[1]
    prepared = _prepared(data.Q, data.b, data.lower, data.upper, data.phi_h, data.J_n,
                         data.J_t, data.J_f, data.friction, float(data.penalty), data.cone)
    scale_v, scale_n, scale_f, kind, slack = prepared[:5]
    p = prepared[5:]                  # _Compact's arrays, in its order, less kind and slack
    layout, (P, c, G, h, cones, cone_t) = _dense_layout(*p, kind, slack, n_d, data.lower,
                                                        data.upper)
    exact, iterations = None, 0
    guess = data.guess
    if guess is not None and data.cone == ROUND:
        s, z = _guessed_point(G, h, c, *layout[:5], scale_v, scale_n, scale_f, guess.v,
                              guess.normal, guess.friction, guess.sliding)
        exact = polish_guess(P, c, G, h, layout[7], cones, cone_t, s, z)
    if exact is None:
        x, s, z, status, iterations = conic_ipm.solve_contact_qp(
            *p[:10], kind, n_d, p[10], slack, p[11])
        if status != conic_ipm.OPTIMAL:
            return IslandSolution(None, np.zeros(k),
                                  np.zeros((k, 2 if data.cone == ROUND else n_d)),
                                  np.zeros(k), conic_ipm.STATUS[status], iterations)
        exact = polish(P, c, G, h, layout[7], cones, cone_t, x, s, z)
    if exact is not None:
        x, s, z = exact
    normal, friction, sigma = _impulses(x, z, kind, layout[0], layout[2], layout[4], scale_n,
                                        scale_f, 2 if data.cone == ROUND else n_d,
                                        data.cone == ROUND)
    return IslandSolution(scale_v * x[:n], normal, friction, sigma, "optimal", iterations,
                          ConicPoint(x, s, z, scale_v, scale_n, scale_f))


STICKING = 1.0 - 1e-3     # a guessed sticking cone's friction at most this share of its bound


@numba.njit(cache=True)
def _guessed_point(G, h, c, normal_row, slack_row, fric_row, t_var, s_var, scale_v, scale_n,
                   scale_f, v, normal, friction, sliding):
    """
    Return (s, z) of the scaled problem at the last step's solution (``Guess``).

    x holds v (scaled), each cone's t = |slip| and each slack's sigma where
    its normal row is violated; s = h - G x.  z holds the last normal
    impulses, a slack row's sigma price less its normal impulse, each cone's
    bound w with its friction on the bound where it slid (the polish takes a
    cone as sliding there) and strictly inside it where it stuck.
    """
    n_x, m = G.shape[1], G.shape[0]
    x = np.zeros(n_x)
    for j in range(v.shape[0]):
        x[j] = v[j] / scale_v[j]
    s = h - G @ x
    z = np.zeros(m)
    for k in range(normal_row.shape[0]):
        r = normal_row[k]
        z[r] = normal[k] / scale_n[k]
        if s_var[k] >= 0:
            sigma = max(0.0, -s[r])
            x[s_var[k]] = sigma
            s[r] += sigma
            s[slack_row[k]] = sigma
            z[slack_row[k]] = max(c[s_var[k]] - z[r], 0.0)
        if t_var[k] >= 0:
            a, w = fric_row[k], c[t_var[k]]
            s[a] = h[a] + math.hypot(s[a + 1], s[a + 2])
            f1, f2 = friction[k, 0] / scale_f[k], friction[k, 1] / scale_f[k]
            size = math.hypot(f1, f2)
            if sliding[k] and size > 0.0:
                f1, f2 = w * f1 / size, w * f2 / size
            elif size > STICKING * w:
                f1, f2 = STICKING * w * f1 / size, STICKING * w * f2 / size
            z[a], z[a + 1], z[a + 2] = w, f1, f2
    return s, z


@numba.njit(cache=True)
def _impulses(x, z, kind, normal_row, fric_row, s_var, scale_n, scale_f, width, round_cone):
    """Return the normal impulses, the friction impulses and the slacks of a solution."""
    k = kind.shape[0]
    normal, sigma = np.empty(k), np.empty(k)
    friction = np.zeros((k, width))
    for i in range(k):
        normal[i] = scale_n[i] * z[normal_row[i]]
        if kind[i] != conic_ipm.NONE:
            start = fric_row[i] + (1 if round_cone else 0)
            for j in range(width):
                friction[i, j] = scale_f[i] * z[start + j]
        sigma[i] = (x[s_var[i]] if s_var[i] >= 0 else 0.0) / scale_n[i]
    return normal, friction, sigma


# a row or cone is weakly active where the smaller of its s and z is at least this fraction of
# the larger (conic_ipm.weak_rows); its two sides' derivatives agree when they are this close,
# relative to the largest entry
WEAK = 1e-3
SIDES_AGREE = 1e-6
RCOND = 1e-12      # the linearised conditions' singular values below this (relative) are null


def _reduced_conditions(G: np.ndarray, Q: np.ndarray, point: ConicPoint, m_l: int,
                        soc_start: np.ndarray, RX: np.ndarray, RZ: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """
    Return the optimality conditions linearised at the solution, reduced to (dx, dz_kept).

    The conditions in (dx, dz, ds), with G's m rows and P = Q on the velocities:

        P dx + G^T dz = RX,   G dx + ds = RZ,   L(s) dz + L(z) ds = 0,

    L(u) u's arrow matrix (u_r on a linear row; [[u0, u1^T], [u1, u0 I]] on a
    cone): s o z = 0 linearised, built from s and z themselves, not from
    their scaling (a sliding contact has s and z on their cones' boundaries,
    where s^T J s is all round-off), each row at unit size.  ds = RZ - G dx
    is eliminated.  So is dz_r of each strictly inactive linear row
    (z_r < WEAK s_r: the trust region's bounds, contacts apart): its row
    gives dz_r = (z_r / s_r)(G_r dx - RZ_r), which adds G_r^T (z_r / s_r) G_r
    to P and G_r^T (z_r / s_r) RZ_r to RX.  What is left, over the kept rows K,

        [P + G_E^T D G_E   G_K^T ] [dx  ]   [RX + G_E^T D RZ_E]
        [-L_K(z) G_K       L_K(s)] [dz_K] = [-L_K(z) RZ_K     ],

    has the same dx, from n_x + |K| rows instead of n_x + 2 m.  Returns the
    matrix, the right-hand sides and K's indices among the m rows.
    """
    return _reduced_arrays(G, Q, point.s, point.z, m_l, np.asarray(soc_start, dtype=np.int64),
                           np.ascontiguousarray(RX), np.ascontiguousarray(RZ), WEAK)


@numba.njit(cache=True)
def _reduced_arrays(G, Q, s, z, m_l, soc_start, RX, RZ, weak):
    """Return ``_reduced_conditions``' matrix, right-hand sides and kept rows."""
    m, n_x, n, k = G.shape[0], G.shape[1], Q.shape[0], RX.shape[1]
    drop = np.zeros(m, dtype=np.bool_)
    for r in range(m_l):
        drop[r] = s[r] > 0.0 and z[r] < weak * s[r]
    kept = np.flatnonzero(~drop)
    n_k = kept.shape[0]
    A = np.zeros((n_x + n_k, n_x + n_k))
    rhs = np.zeros((n_x + n_k, k))
    rhs[:n_x] = RX
    for r in range(m):                     # the eliminated rows: G_r^T (z_r / s_r) G_r
        if drop[r]:
            d = z[r] / s[r]
            for i in range(n_x):
                g = G[r, i] * d
                if g != 0.0:
                    for j in range(n_x):
                        A[i, j] += g * G[r, j]
                    for c in range(k):
                        rhs[i, c] += g * RZ[r, c]
    A[:n, :n] += Q
    L_s, L_z = np.zeros((n_k, n_k)), np.zeros((n_k, n_k))
    for p in range(n_k):
        r = kept[p]
        for i in range(n_x):
            A[i, n_x + p] = G[r, i]
        if r < m_l:                        # a linear row: s_r and z_r at unit size
            top = max(max(abs(s[r]), abs(z[r])), 1e-300)
            L_s[p, p], L_z[p, p] = s[r] / top, z[r] / top
    linear = n_k - (m - m_l)
    for a in soc_start:                    # each cone's arrow, at unit size
        at = linear + a - m_l
        top = 1e-300
        for i in range(3):
            top = max(top, max(abs(s[a + i]), abs(z[a + i])))
        for u, L in ((s, L_s), (z, L_z)):
            for i in range(3):
                L[at + i, at + i] = u[a] / top
            for i in (1, 2):
                L[at, at + i] = u[a + i] / top
                L[at + i, at] = u[a + i] / top
    for p in range(n_k):                   # -L_z G_K dx + L_s dz_K = -L_z RZ_K
        for q in range(n_k):
            lz = L_z[p, q]
            A[n_x + p, n_x + q] = L_s[p, q]
            if lz != 0.0:
                r = kept[q]
                for i in range(n_x):
                    A[n_x + p, i] -= lz * G[r, i]
                for c in range(k):
                    rhs[n_x + p, c] -= lz * RZ[r, c]
    return A, rhs, kept


def _unloading_columns(G: np.ndarray, point: ConicPoint, m_l: int, soc_start: np.ndarray,
                       RZ: np.ndarray) -> np.ndarray:
    """
    Return the columns whose change of the active rows may unload one of them.

    A box's four corners on a table, or a pad's on a box, hold it with
    impulses that are not unique: the active rows G_A are dependent.  A
    change whose linearised rows G_A dx = RZ_A can all be met (RZ_A in the
    range of G_A: a lift, a push) keeps every row active, with the loads
    shared anew, and has a two-sided derivative.  One that cannot (a tilt
    that lifts one corner) unloads a row on one side and not the other:
    such a column is checked by solving again (``step_gradients.sides_compared``).
    Changes of inactive rows (a trust-region bound far away) and of the
    cost alone never unload one.
    """
    return _unloading(G, point.s, point.z, m_l, np.asarray(soc_start, dtype=np.int64),
                      np.ascontiguousarray(RZ), RCOND, SIDES_AGREE, ON_BOUNDARY)


@numba.njit(cache=True)
def _unloading(G, s, z, m_l, soc_start, RZ, rcond, agree, on_boundary):
    """Return ``_unloading_columns``: the active rows' range, and each column's miss."""
    k = RZ.shape[1]
    unloading = np.zeros(k, dtype=np.bool_)
    is_active = np.zeros(G.shape[0], dtype=np.bool_)
    for r in range(m_l):
        is_active[r] = z[r] > s[r]
    for a in soc_start:
        if z[a] - math.hypot(z[a + 1], z[a + 2]) > on_boundary * z[a]:
            is_active[a:a + 3] = True
    active = np.flatnonzero(is_active)
    if active.shape[0] == 0:
        return unloading
    G_A, R_A = G[active], RZ[active]
    if not np.any(R_A != 0.0):
        return unloading                        # the active rows do not change (a command)
    U, sigma, _ = np.linalg.svd(G_A, full_matrices=False)
    rank = int(np.sum(sigma > rcond * max(sigma.max() if sigma.shape[0] else 0.0, 1e-300)))
    if rank == active.shape[0]:
        return unloading                        # independent rows: unique loads
    U = np.ascontiguousarray(U[:, :rank])
    missed = R_A - U @ (U.T @ R_A)
    for c in range(k):
        size, miss = 1e-300, 0.0
        for r in range(active.shape[0]):
            size = max(size, abs(R_A[r, c]))
            miss = max(miss, abs(missed[r, c]))
        unloading[c] = miss > agree * size
    return unloading


def least_norm(matrix: np.ndarray, right: np.ndarray) -> np.ndarray:
    """
    Return the least-norm least-squares solution of a square matrix x = right (columns).

    LAPACK's complete orthogonal factorisation (gelsy, singular values below
    RCOND of the largest taken as zero), called directly: scipy.linalg.lstsq
    around it cost half as much again as the factorisation of the 61 rows of
    the two pads' island.
    """
    n = matrix.shape[0]
    lwork = int(lapack.dgelsy_lwork(n, n, right.shape[1], RCOND)[0])
    x, info = lapack.dgelsy(matrix, right, np.zeros(n, dtype=np.int32), RCOND, lwork)[1::3]
    if info != 0:
        raise np.linalg.LinAlgError(f"gelsy failed: info = {info}")
    return x


def _bound_change(m: int, bounds: tuple, dupper: np.ndarray, dlower: np.ndarray) -> np.ndarray:
    """Return dh over the m rows from the bounds' derivatives (the other rows zero; columns)."""
    dh = np.zeros((m,) + dupper.shape[1:])
    dh[bounds[0]] = dupper[bounds[1]]
    dh[bounds[2]] = -dlower[bounds[3]]
    return dh


def island_derivative(data: IslandData, solution: IslandSolution, changes: list,
                      delta: float, costs: Optional[CostChange] = None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """
    Return dv'/dtheta (n x k) of a solved island, and which columns are one-sided.

    ``changes`` holds per theta_j the island's data at theta_j + delta and
    theta_j - delta (the same contacts, in the same order), or None where
    only its b and bounds change (a command's column: their derivatives in
    ``costs``).  The solution's
    conditions P x + c + G^T z = 0, G x + s = h, s o z = 0 (s, z in their
    cones) differentiate to

        P dx + G^T dz = -(dP x + dc + dG^T z),   G dx + ds = dh - dG x,
        L(s) dz + L(z) ds = 0           (``_reduced_conditions``),

    with dP, dc, dG, dh the central differences of the data (the friction
    bounds, the lagged impulses, held).  Where a row is weakly active (a
    contact just touching with no impulse) its two sides are solved, the row
    held active and inactive, and a column where they differ is one-sided;
    where a cone is (a contact at the edge of sliding), every column that
    moves the island is; where the active rows are dependent (contacts that
    share a load), every column whose change they cannot all meet is
    (``_unloading_columns``).
    """
    point = solution.point
    n, k, n_d = len(data.b), len(changes), data.J_f.shape[1]
    scales = (point.scale_v, point.scale_n, point.scale_f)
    pattern = _pattern(data)
    for change in changes:
        if change is not None:
            pattern = pattern | _pattern(change[0]) | _pattern(change[1])
    kind, slack = _structure(data)
    base = _compact(data, scales, pattern, kind, slack)
    structure = conic_ipm.layout(kind, slack, n_d, n, data.lower, data.upper)
    m_l, soc_start, n_x = structure[7], structure[8], structure[9]
    m = m_l + 3 * len(soc_start)
    RX, RZ = np.zeros((n_x, k)), np.zeros((m, k))
    zeros = np.zeros_like(base.Jn), np.zeros_like(base.Jt), np.zeros_like(base.Jf)
    constant_gt, constant_g = np.empty(n_x), np.empty(m)
    fixed = structure[:7] + (m_l,)
    conic_ipm.gt_times(point.z, constant_gt, base.cptr, base.cols, *zeros, kind, n_d, *fixed)
    conic_ipm.g_times(point.x, constant_g, base.cptr, base.cols, *zeros, kind, n_d, *fixed)
    gt, g = np.empty(n_x), np.empty(m)
    bounds = conic_ipm.bound_rows(structure, data.lower, data.upper)
    if costs is not None:                         # the commands: the same rows, new b and bounds
        scale = point.scale_v[:, None]
        RX[:n, costs.columns] = -costs.db * scale
        RZ[:, costs.columns] = _bound_change(m, bounds, costs.dupper / scale, costs.dlower / scale)
    for j, change in enumerate(changes):
        if change is None:
            continue
        plus, minus = change
        high = _compact(plus, scales, pattern, kind, slack)
        low = _compact(minus, scales, pattern, kind, slack)
        dJn, dJt, dJf = ((high.Jn - low.Jn) / (2 * delta), (high.Jt - low.Jt) / (2 * delta),
                         (high.Jf - low.Jf) / (2 * delta))
        conic_ipm.gt_times(point.z, gt, base.cptr, base.cols, dJn, dJt, dJf, kind, n_d,
                           *fixed)
        conic_ipm.g_times(point.x, g, base.cptr, base.cols, dJn, dJt, dJf, kind, n_d, *fixed)
        RX[:, j] = -(gt - constant_gt)
        RX[:n, j] -= ((high.Q - low.Q) @ point.x[:n] + high.c_v - low.c_v) / (2 * delta)
        dh = _bound_change(m, bounds, (high.upper - low.upper) / (2 * delta),
                           (high.lower - low.lower) / (2 * delta))
        dh[structure[0]] = (high.h_n - low.h_n) / (2 * delta)
        RZ[:, j] = dh - (g - constant_g)
    RX[~np.isfinite(RX)] = 0.0
    RZ[~np.isfinite(RZ)] = 0.0

    G = _dense(base, kind, n_d, structure)[2]
    A, rhs, kept = _reduced_conditions(G, base.Q, point, m_l, soc_start, RX, RZ)
    position = np.full(m, -1)
    position[kept] = n_x + np.arange(len(kept))

    def solve(held: np.ndarray) -> np.ndarray:
        matrix, right = A.copy(), rhs.copy()
        for r in np.flatnonzero(held):            # a row's side: ds_r = 0 or dz_r = 0
            p = position[r]                       # weakly active rows are kept
            matrix[p], right[p] = 0.0, 0.0
            if held[r] == 1:                      # ds_r = RZ_r - G_r dx = 0
                matrix[p, :n_x], right[p] = G[r], RZ[r]
            else:
                matrix[p, p] = 1.0
        # least squares: where contacts share a load (a box's four corners on a
        # table) their impulses are not unique and the matrix is singular; v' is
        # unique all the same, and the least-norm solution has it
        # (LAPACK's complete orthogonal factorisation, gelsy: half gelsd's SVD cost)
        return least_norm(matrix, right)[:n]
    rows, cone = conic_ipm.weak_rows(point.s, point.z, m_l, soc_start, WEAK)
    DX = solve(np.zeros(m_l, dtype=np.int64))
    one_sided = np.full(k, cone) & np.any(DX != 0.0, axis=0)
    one_sided |= _unloading_columns(G, point, m_l, soc_start, RZ)
    if rows.any():
        active = solve(np.where(rows, 1, 0))
        inactive = solve(np.where(rows, 2, 0))
        size = 1.0 + np.abs(DX).max(axis=0)
        one_sided |= np.abs(active - inactive).max(axis=0) > SIDES_AGREE * size
    return point.scale_v[:, None] * DX, one_sided
