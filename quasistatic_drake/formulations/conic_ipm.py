r"""
A primal-dual interior-point method for the step's contact problem, compiled with numba.

The step problem (Pang & Tedrake 2021's QP with exact non-penetration and
friction bounded by a given normal impulse; ``conic_step.py``) is

    minimise    1/2 v^T Q v + c^T v + sum_k (w_k t_k + p_k sigma_k)
    subject to  J_n,k v + sigma_k >= -phi_k / h,   sigma_k >= 0     (contact k's normal)
                (t_k, J_t,k v) in SOC_3           (round friction: t_k >= |J_t,k v|)
                t_k + J_f,kj v >= 0 for each j     (or the pyramid's)
                v_lower <= v <= v_upper

over the velocities v (n_v, Hessian Q positive definite) and, per contact,
the friction epigraph t_k (when w_k > 0) and the recovery slack sigma_k
(only for a contact that penetrates: it lets the step work off less than
all of a penetration, at the price p_k per unit).  The auxiliary variables
of a contact appear in its own rows only.

The method is the Mehrotra predictor-corrector of CVXOPT's ``coneqp``
(Vandenberghe, "The CVXOPT linear and quadratic cone program solvers",
2010) on G x + s = h, s in K, with Nesterov-Todd scaling W:

1. residuals r_x = P x + c + G^T z, r_z = G x + s - h, gap mu = s^T z / nu;
   stop when both residuals and the gap are below the tolerances;
2. the scaling W at (s, z), and lambda = W z;
3. the affine direction from the KKT system
       P dx + G^T dz = -r_x,   G dx + ds = -r_z,   lambda o (W dz + W^-T ds) = -lambda o lambda,
   reduced to (P + G^T W^-2 G) dx = ...; each contact's auxiliary variables
   are eliminated on the spot (their blocks are diagonal), so the only
   factor is the n_v x n_v Cholesky factor of a sum of rank-3 terms over
   the columns each contact touches; the solve is refined on the unreduced
   equations;
4. sigma = (1 - alpha_aff)^3 and the combined direction with Mehrotra's
   second-order term;
5. a step of 0.99 of the largest one that keeps s and z inside their cones.

The KKT system at the solution also gives the solution's derivatives
(``conic_step.py``).  The kernels use numba's numpy error model: a division
by zero gives inf or nan, which the method reports as numerical trouble,
never an exception.  This module imports neither Drake nor ROS.
"""

from __future__ import annotations

import math

import numba
import numpy as np

MAX_ITERATIONS = 50
STEP_FRACTION = 0.99
REFINEMENTS = 1          # at most, per KKT solve: until the unreduced residual is round-off
FEASIBILITY_TOL = 1e-13  # relative residuals at which the method stops
GAP_TOL = 1e-13          # relative gap at which the method stops
HELD_SCALE = 1e-8        # W of a row the derivative holds active (its reciprocal: inactive)
# an iterate that cannot be improved (the arithmetic runs out: residuals grow again, as on a
# degenerate problem, where the gap falls only linearly: pads pressed together give four equal
# rows) is accepted if its residuals and gap are below these; the polish (conic_polish.py)
# then solves its active set exactly
ACCEPTABLE_FEASIBILITY = 1e-6
ACCEPTABLE_GAP = 1e-6

NONE, ROUND, PYRAMID = 0, 1, 2         # a contact's friction
OPTIMAL, ITERATION_LIMIT, NUMERICAL = 0, 1, 2
STATUS = {OPTIMAL: "optimal", ITERATION_LIMIT: "iteration limit",
          NUMERICAL: "numerical trouble"}


# ----- the cones: Jordan products, NT scaling, step lengths ---------------------------
@numba.njit(cache=True, error_model="numpy")
def _min_eigen(u, m_l, soc_start):
    """Return the least 'eigenvalue' of u over the cones (u0 - |u1| per SOC; < 0: outside)."""
    low = np.inf
    for r in range(m_l):
        low = min(low, u[r])
    for a in soc_start:
        low = min(low, u[a] - math.sqrt(u[a + 1] * u[a + 1] + u[a + 2] * u[a + 2]))
    return low


@numba.njit(cache=True, error_model="numpy")
def _add_identity(u, alpha, m_l, soc_start):
    """Add alpha e to u, e the cones' identity (1 on linear rows, (1, 0, 0) per SOC)."""
    for r in range(m_l):
        u[r] += alpha
    for a in soc_start:
        u[a] += alpha


@numba.njit(cache=True, error_model="numpy")
def _jordan(u, v, out, m_l, soc_start):
    """Set out = u o v: elementwise on linear rows, (u^T v, u0 v1 + v0 u1) per SOC."""
    for r in range(m_l):
        out[r] = u[r] * v[r]
    for a in soc_start:
        _jordan_soc(u, v, out, a)


@numba.njit(cache=True, error_model="numpy")
def _jordan_soc(u, v, out, a):
    """Set out = u o v on the SOC block at row a: (u^T v, u0 v1 + v0 u1)."""
    u0, v0 = u[a], v[a]
    out[a] = u0 * v0 + u[a + 1] * v[a + 1] + u[a + 2] * v[a + 2]
    out[a + 1] = u0 * v[a + 1] + v0 * u[a + 1]
    out[a + 2] = u0 * v[a + 2] + v0 * u[a + 2]


@numba.njit(cache=True, error_model="numpy")
def _jordan_inverse(lam, y, out, m_l, soc_start):
    """Set out = x with lam o x = y (lam inside the cones)."""
    for r in range(m_l):
        out[r] = y[r] / lam[r]
    for a in soc_start:
        _jordan_inverse_soc(lam, y, out, a)


@numba.njit(cache=True, error_model="numpy")
def _jordan_inverse_soc(lam, y, out, a):
    """Set out = x with lam o x = y on the SOC block at row a."""
    l0 = lam[a]
    dot = lam[a + 1] * y[a + 1] + lam[a + 2] * y[a + 2]
    norm = lam[a + 1] * lam[a + 1] + lam[a + 2] * lam[a + 2]
    x0 = (l0 * y[a] - dot) / max(l0 * l0 - norm, 1e-300)
    out[a] = x0
    out[a + 1] = (y[a + 1] - x0 * lam[a + 1]) / l0
    out[a + 2] = (y[a + 2] - x0 * lam[a + 2]) / l0


@numba.njit(cache=True, error_model="numpy")
def _max_step(u, du, m_l, soc_start):
    """Return the largest alpha in (0, 1 / STEP_FRACTION] with u + alpha du in the cones."""
    alpha = 1.0 / STEP_FRACTION
    for r in range(m_l):
        if du[r] < 0.0:
            alpha = min(alpha, -u[r] / du[r])
    for a in soc_start:
        u0, du0 = u[a], du[a]
        if du0 < 0.0:
            alpha = min(alpha, -u0 / du0)
        qa = du0 * du0 - du[a + 1] * du[a + 1] - du[a + 2] * du[a + 2]
        qb = u0 * du0 - u[a + 1] * du[a + 1] - u[a + 2] * du[a + 2]
        qc = u0 * u0 - u[a + 1] * u[a + 1] - u[a + 2] * u[a + 2]
        # f(alpha) = qa alpha^2 + 2 qb alpha + qc >= 0, with qc > 0 (u inside)
        if qa < 0.0:
            root = (-qb - math.sqrt(max(qb * qb - qa * qc, 0.0))) / qa
            if root > 0.0:
                alpha = min(alpha, root)
        elif qa > 0.0:
            disc = qb * qb - qa * qc
            if disc >= 0.0 and qb < 0.0:
                root = (-qb - math.sqrt(disc)) / qa
                if root > 0.0:
                    alpha = min(alpha, root)
        elif qb < 0.0:
            alpha = min(alpha, -qc / (2.0 * qb))
    return alpha


@numba.njit(cache=True, error_model="numpy")
def _soc_w(u, out, a, eta, wbar, inverse):
    """
    Set out = W u (or W^-1 u) on the SOC block at row a.

    W = eta [[w0, w1^T], [w1, I + w1 w1^T / (1 + w0)]] (Vandenberghe 2010);
    W^-1 has -w1 and 1 / eta.
    """
    w0, w1, w2 = wbar[a], wbar[a + 1], wbar[a + 2]
    dot = w1 * u[a + 1] + w2 * u[a + 2]
    sign = -1.0 if inverse else 1.0
    scale = 1.0 / eta if inverse else eta
    u0 = u[a]
    out[a] = scale * (w0 * u0 + sign * dot)
    ratio = dot / (1.0 + w0)
    out[a + 1] = scale * (sign * u0 * w1 + u[a + 1] + w1 * ratio)
    out[a + 2] = scale * (sign * u0 * w2 + u[a + 2] + w2 * ratio)


@numba.njit(cache=True, error_model="numpy")
def _scaling(s, z, m_l, soc_start, d_lin, eta, wbar, lam):
    """
    Compute the NT scaling W at (s, z) and lam = W z (False if a point left its cone).

    Linear rows: W = sqrt(s / z).  SOC blocks: sbar = s / sqrt(s^T J s), zbar
    likewise, gamma = sqrt((1 + zbar^T sbar) / 2), wbar = (sbar + J zbar) /
    (2 gamma), eta = (s^T J s / z^T J z)^(1/4).
    """
    for r in range(m_l):
        if s[r] <= 0.0 or z[r] <= 0.0:
            return False
        d_lin[r] = math.sqrt(s[r] / z[r])
        lam[r] = math.sqrt(s[r] * z[r])
    for k in range(soc_start.shape[0]):
        a = soc_start[k]
        sjs = s[a] * s[a] - s[a + 1] * s[a + 1] - s[a + 2] * s[a + 2]
        zjz = z[a] * z[a] - z[a + 1] * z[a + 1] - z[a + 2] * z[a + 2]
        if sjs <= 0.0 or zjz <= 0.0 or s[a] <= 0.0 or z[a] <= 0.0:
            return False
        sn, zn = math.sqrt(sjs), math.sqrt(zjz)
        dot = (s[a] * z[a] + s[a + 1] * z[a + 1] + s[a + 2] * z[a + 2]) / (sn * zn)
        gamma = math.sqrt(0.5 * (1.0 + dot))
        eta[k] = math.sqrt(sn / zn)
        wbar[a] = (s[a] / sn + z[a] / zn) / (2.0 * gamma)
        wbar[a + 1] = (s[a + 1] / sn - z[a + 1] / zn) / (2.0 * gamma)
        wbar[a + 2] = (s[a + 2] / sn - z[a + 2] / zn) / (2.0 * gamma)
        _soc_w(z, lam, a, eta[k], wbar, False)
    return True


@numba.njit(cache=True, error_model="numpy")
def _apply_w(u, out, inverse, m_l, soc_start, d_lin, eta, wbar):
    """Set out = W u, or W^-1 u (W is symmetric: W^-T = W^-1)."""
    for r in range(m_l):
        out[r] = u[r] / d_lin[r] if inverse else u[r] * d_lin[r]
    for k in range(soc_start.shape[0]):
        _soc_w(u, out, soc_start[k], eta[k], wbar, inverse)


@numba.njit(cache=True, error_model="numpy")
def _winv2(a, eta, wbar, out):
    """Set out (3 x 3) = W^-2 of the SOC block at row a (W^-1 in closed form, squared)."""
    w0, w1, w2 = wbar[a], wbar[a + 1], wbar[a + 2]
    c = 1.0 / (1.0 + w0)
    # W^-1 / eta = [[w0, -w1, -w2], [-w1, 1 + w1^2 c, w1 w2 c], [-w2, w1 w2 c, 1 + w2^2 c]]
    m00, m01, m02 = w0, -w1, -w2
    m11, m12, m22 = 1.0 + w1 * w1 * c, w1 * w2 * c, 1.0 + w2 * w2 * c
    inv2 = 1.0 / (eta * eta)
    out[0, 0] = inv2 * (m00 * m00 + m01 * m01 + m02 * m02)
    out[0, 1] = inv2 * (m00 * m01 + m01 * m11 + m02 * m12)
    out[0, 2] = inv2 * (m00 * m02 + m01 * m12 + m02 * m22)
    out[1, 0] = inv2 * (m01 * m00 + m11 * m01 + m12 * m02)
    out[1, 1] = inv2 * (m01 * m01 + m11 * m11 + m12 * m12)
    out[1, 2] = inv2 * (m01 * m02 + m11 * m12 + m12 * m22)
    out[2, 0] = inv2 * (m02 * m00 + m12 * m01 + m22 * m02)
    out[2, 1] = inv2 * (m02 * m01 + m12 * m11 + m22 * m12)
    out[2, 2] = inv2 * (m02 * m02 + m12 * m12 + m22 * m22)


# ----- the problem's structure: G x, G^T y, and the reduced KKT factor ---------------------
class Layout:
    """Index arithmetic of the rows and variables (documentation only; see ``layout``)."""


@numba.njit(cache=True, error_model="numpy")
def layout(kind, slack, n_d, n_v, lower, upper):
    """
    Return the row and variable offsets of a problem (module docstring).

    Rows: the linear ones first (each contact's normal row, then its slack row
    if any, then its pyramid rows if any; then the finite bounds), then one
    SOC block of 3 per contact with round friction.  Variables: v, then each
    contact's t (where it has friction), then its sigma (where it has a slack).
    Returns (normal_row, slack_row, fric_row, t_var, s_var, bound_var,
    bound_sign, m_l, soc_start, n_x).
    """
    K = kind.shape[0]
    normal_row = np.empty(K, dtype=np.int64)
    slack_row = -np.ones(K, dtype=np.int64)
    fric_row = -np.ones(K, dtype=np.int64)
    t_var = -np.ones(K, dtype=np.int64)
    s_var = -np.ones(K, dtype=np.int64)
    r = 0
    x = n_v
    for k in range(K):
        normal_row[k] = r
        r += 1
        if slack[k]:
            slack_row[k] = r
            r += 1
        if kind[k] == PYRAMID:
            fric_row[k] = r
            r += n_d
    n_bounds = 0
    for j in range(n_v):
        n_bounds += int(np.isfinite(lower[j])) + int(np.isfinite(upper[j]))
    bound_var = np.empty(n_bounds, dtype=np.int64)
    bound_sign = np.empty(n_bounds)
    b = 0
    for j in range(n_v):
        if np.isfinite(upper[j]):
            bound_var[b], bound_sign[b] = j, 1.0
            b += 1
        if np.isfinite(lower[j]):
            bound_var[b], bound_sign[b] = j, -1.0
            b += 1
    r += n_bounds
    m_l = r
    n_round = 0
    for k in range(K):
        n_round += kind[k] == ROUND
    soc_start = np.empty(n_round, dtype=np.int64)
    i = 0
    for k in range(K):
        if kind[k] == ROUND:
            fric_row[k] = r
            soc_start[i] = r
            r += 3
            i += 1
    for k in range(K):
        if kind[k] != NONE:
            t_var[k] = x
            x += 1
    for k in range(K):
        if slack[k]:
            s_var[k] = x
            x += 1
    return normal_row, slack_row, fric_row, t_var, s_var, bound_var, bound_sign, m_l, \
        soc_start, x


@numba.njit(cache=True, error_model="numpy")
def _g_times(x, out, cptr, cols, Jn, Jt, Jf, kind, n_d, normal_row, slack_row, fric_row,
             t_var, s_var, bound_var, bound_sign, m_l):
    """Set out = G x (the rows of the module docstring, as G x + s = h)."""
    K = kind.shape[0]
    for k in range(K):
        jn, j1, j2 = 0.0, 0.0, 0.0
        if kind[k] == ROUND:                   # the normal and tangent rows in one pass
            for p in range(cptr[k], cptr[k + 1]):
                xp = x[cols[p]]
                jn += Jn[p] * xp
                j1 += Jt[0, p] * xp
                j2 += Jt[1, p] * xp
        else:
            for p in range(cptr[k], cptr[k + 1]):
                jn += Jn[p] * x[cols[p]]
        sig = x[s_var[k]] if s_var[k] >= 0 else 0.0
        out[normal_row[k]] = -jn - sig
        if slack_row[k] >= 0:
            out[slack_row[k]] = -sig
        if kind[k] == ROUND:
            a = fric_row[k]
            out[a] = -x[t_var[k]]
            out[a + 1] = -j1
            out[a + 2] = -j2
        elif kind[k] == PYRAMID:
            a = fric_row[k]
            t = x[t_var[k]]
            for j in range(n_d):
                acc = 0.0
                for p in range(cptr[k], cptr[k + 1]):
                    acc += Jf[j, p] * x[cols[p]]
                out[a + j] = -acc - t
    b0 = m_l - bound_var.shape[0]
    for b in range(bound_var.shape[0]):
        out[b0 + b] = bound_sign[b] * x[bound_var[b]]


@numba.njit(cache=True, error_model="numpy")
def _gt_times(y, out, cptr, cols, Jn, Jt, Jf, kind, n_d, normal_row, slack_row, fric_row,
              t_var, s_var, bound_var, bound_sign, m_l):
    """Set out = G^T y."""
    out[:] = 0.0
    K = kind.shape[0]
    for k in range(K):
        yn = y[normal_row[k]]
        if kind[k] == ROUND:                   # the normal then the tangent rows, one pass
            a = fric_row[k]
            y1, y2 = y[a + 1], y[a + 2]
            for p in range(cptr[k], cptr[k + 1]):
                out[cols[p]] = (out[cols[p]] - Jn[p] * yn) - (Jt[0, p] * y1 + Jt[1, p] * y2)
        else:
            for p in range(cptr[k], cptr[k + 1]):
                out[cols[p]] -= Jn[p] * yn
        if s_var[k] >= 0:
            out[s_var[k]] -= yn + y[slack_row[k]]
        if kind[k] == ROUND:
            out[t_var[k]] -= y[fric_row[k]]
        elif kind[k] == PYRAMID:
            a = fric_row[k]
            for j in range(n_d):
                out[t_var[k]] -= y[a + j]
                for p in range(cptr[k], cptr[k + 1]):
                    out[cols[p]] -= Jf[j, p] * y[a + j]
    b0 = m_l - bound_var.shape[0]
    for b in range(bound_var.shape[0]):
        out[bound_var[b]] += bound_sign[b] * y[b0 + b]


@numba.njit(cache=True, error_model="numpy")
def _factor(Q, cptr, cols, Jn, Jt, Jf, kind, n_d, normal_row, slack_row, fric_row, t_var,
            s_var, bound_var, bound_sign, m_l, soc_start, d_lin, eta, wbar, t_prox,
            L, hvt, htt, hvs, hss):
    """
    Factor P + G^T W^-2 G with each contact's t and sigma eliminated on the spot.

    Per contact: hvt (its columns) and htt couple v and t, hvs and hss v and
    sigma; their Schur complements go into the reduced n_v x n_v matrix, whose
    lower Cholesky factor is left in L; only its lower triangle is summed
    (a contact's columns ascend: q <= p is cols[q] <= cols[p]), the only one
    the factorisation reads.  ``t_prox`` is added to htt (the start's unit
    proximal term: t has no Hessian of its own).
    """
    n_v = Q.shape[0]
    L[:, :] = Q
    K = kind.shape[0]
    M = np.empty((3, 3))
    soc = 0
    for k in range(K):
        c0, c1 = cptr[k], cptr[k + 1]
        dn = 1.0 / (d_lin[normal_row[k]] ** 2)
        if s_var[k] >= 0:                        # sigma: the normal row and its own row
            ds = 1.0 / (d_lin[slack_row[k]] ** 2)
            hss[k] = dn + ds
            dn_eff = dn * ds / (dn + ds)         # dn - dn^2 / (dn + ds)
            for p in range(c0, c1):
                hvs[p] = dn * Jn[p]              # (v, sigma): (-Jn) dn (-1)
        else:
            dn_eff = dn
        for p in range(c0, c1):
            a = dn_eff * Jn[p]
            for q in range(c0, p + 1):
                L[cols[p], cols[q]] += a * Jn[q]
        if kind[k] == ROUND:
            row = fric_row[k]
            _winv2(row, eta[soc], wbar, M)
            soc += 1
            htt[k] = M[0, 0] + t_prox
            # (v, t): sum_a (-Jt_a) M[a, 0] (-1);  (v, v): Jt^T M[1:, 1:] Jt, less the t part
            s11 = M[1, 1] - M[1, 0] * M[0, 1] / htt[k]
            s12 = M[1, 2] - M[1, 0] * M[0, 2] / htt[k]
            s22 = M[2, 2] - M[2, 0] * M[0, 2] / htt[k]
            for p in range(c0, c1):
                hvt[p] = Jt[0, p] * M[1, 0] + Jt[1, p] * M[2, 0]
                a1 = s11 * Jt[0, p] + s12 * Jt[1, p]
                a2 = s12 * Jt[0, p] + s22 * Jt[1, p]
                for q in range(c0, p + 1):
                    L[cols[p], cols[q]] += a1 * Jt[0, q] + a2 * Jt[1, q]
        elif kind[k] == PYRAMID:
            row = fric_row[k]
            total = t_prox
            for j in range(n_d):
                total += 1.0 / (d_lin[row + j] ** 2)
            htt[k] = total
            for p in range(c0, c1):
                acc = 0.0
                for j in range(n_d):
                    acc += Jf[j, p] / (d_lin[row + j] ** 2)
                hvt[p] = acc
            for j in range(n_d):
                dj = 1.0 / (d_lin[row + j] ** 2)
                for p in range(c0, c1):
                    a = dj * Jf[j, p]
                    for q in range(c0, p + 1):
                        L[cols[p], cols[q]] += a * Jf[j, q]
            for p in range(c0, c1):
                a = hvt[p] / total
                for q in range(c0, p + 1):
                    L[cols[p], cols[q]] -= a * hvt[q]
    b0 = m_l - bound_var.shape[0]
    for b in range(bound_var.shape[0]):
        j = bound_var[b]
        L[j, j] += 1.0 / (d_lin[b0 + b] ** 2)
    for j in range(n_v):                        # Cholesky in place (lower)
        acc = L[j, j]
        for k in range(j):
            acc -= L[j, k] * L[j, k]
        L[j, j] = math.sqrt(max(acc, 1e-300))
        for i in range(j + 1, n_v):
            acc = L[i, j]
            for k in range(j):
                acc -= L[i, k] * L[j, k]
            L[i, j] = acc / L[j, j]
        for i in range(j):
            L[i, j] = 0.0


@numba.njit(cache=True, error_model="numpy")
def _reduced_solve(L, rx, dx, work, cptr, cols, kind, t_var, s_var, hvt, htt, hvs, hss):
    """Solve (P + G^T W^-2 G) dx = rx, each contact's t and sigma eliminated (``_factor``)."""
    n_v = L.shape[0]
    for p in range(n_v):
        work[p] = rx[p]
    K = kind.shape[0]
    for k in range(K):
        if t_var[k] >= 0:
            coef = rx[t_var[k]] / htt[k]
            for p in range(cptr[k], cptr[k + 1]):
                work[cols[p]] -= hvt[p] * coef
        if s_var[k] >= 0:
            coef = rx[s_var[k]] / hss[k]
            for p in range(cptr[k], cptr[k + 1]):
                work[cols[p]] -= hvs[p] * coef
    for i in range(n_v):                        # L y = work
        acc = work[i]
        for k in range(i):
            acc -= L[i, k] * work[k]
        work[i] = acc / L[i, i]
    for i in range(n_v - 1, -1, -1):            # L^T dv = y
        acc = work[i]
        for k in range(i + 1, n_v):
            acc -= L[k, i] * dx[k]
        dx[i] = acc / L[i, i]
    for k in range(K):
        if t_var[k] >= 0:
            acc = rx[t_var[k]]
            for p in range(cptr[k], cptr[k + 1]):
                acc -= hvt[p] * dx[cols[p]]
            dx[t_var[k]] = acc / htt[k]
        if s_var[k] >= 0:
            acc = rx[s_var[k]]
            for p in range(cptr[k], cptr[k + 1]):
                acc -= hvs[p] * dx[cols[p]]
            dx[s_var[k]] = acc / hss[k]


# ----- the solver -----------------------------------------------------------------------
@numba.njit(cache=True, error_model="numpy")
def _max_abs(u):
    """Return max |u_i| as ``np.max(np.abs(u))`` (nan if any is), without a temporary."""
    top = abs(u[0])
    for i in range(1, u.shape[0]):
        value = abs(u[i])
        if value > top or value != value:
            top = value
            if value != value:
                return value
    return top


@numba.njit(cache=True, error_model="numpy")
def _finite(u):
    """Return whether every entry of u is finite."""
    for i in range(u.shape[0]):
        if not math.isfinite(u[i]):
            return False
    return True


@numba.njit(cache=True, error_model="numpy")
def _step(u, alpha, du):
    """Set u += alpha du in place."""
    for i in range(u.shape[0]):
        u[i] += alpha * du[i]


@numba.njit(cache=True, error_model="numpy")
def _p_times(Q, x, out):
    """Set out = P x (Q on v; the auxiliary variables have no Hessian)."""
    n_v = Q.shape[0]
    out[:] = 0.0
    for i in range(n_v):
        acc = 0.0
        for j in range(n_v):
            acc += Q[i, j] * x[j]
        out[i] = acc


@numba.njit(cache=True, error_model="numpy")
def solve_contact_qp(Q, c_v, lower, upper, cptr, cols, Jn, Jt, Jf, h_n, kind, n_d, w,
                     slack, penalty):
    """
    Return (x, s, z, status, iterations) of the problem of the module docstring.

    ``Q`` (n_v x n_v), ``c_v`` (n_v), ``lower``/``upper`` (n_v, +-inf: none);
    per contact k: its columns cols[cptr[k]:cptr[k+1]] with the values of its
    normal row ``Jn``, tangent rows ``Jt`` (2 x nnz, round friction) or
    pyramid rows ``Jf`` (n_d x nnz), ``h_n`` = phi_k / h, ``kind`` (NONE,
    ROUND, PYRAMID), the friction weight ``w`` (the t cost), and ``slack``
    (bool) with its ``penalty``.  x = (v, t, sigma) in ``layout``'s order;
    z holds the multipliers: a contact's normal row, its friction block
    (round: (w_k, f_1, f_2), the friction impulse f along J_t's rows), the bounds.
    """
    n_v = Q.shape[0]
    K = kind.shape[0]
    normal_row, slack_row, fric_row, t_var, s_var, bound_var, bound_sign, m_l, soc_start, n = \
        layout(kind, slack, n_d, n_v, lower, upper)
    m = m_l + 3 * soc_start.shape[0]
    nu = m_l + soc_start.shape[0]
    # the linear term and the right-hand side h
    c = np.zeros(n)
    c[:n_v] = c_v
    h = np.zeros(m)
    for k in range(K):
        h[normal_row[k]] = h_n[k]
        if t_var[k] >= 0:
            c[t_var[k]] = w[k]
        if s_var[k] >= 0:
            c[s_var[k]] = penalty[k]
    b0 = m_l - bound_var.shape[0]
    for b in range(bound_var.shape[0]):
        j = bound_var[b]
        h[b0 + b] = upper[j] if bound_sign[b] > 0.0 else -lower[j]
    structure = (cptr, cols, Jn, Jt, Jf, kind, n_d, normal_row, slack_row, fric_row, t_var,
                 s_var, bound_var, bound_sign, m_l)
    # the workspace
    d_lin = np.ones(m_l)
    eta = np.ones(soc_start.shape[0])
    wbar = np.zeros(m)
    for a in soc_start:
        wbar[a] = 1.0
    lam = np.zeros(m)
    L = np.empty((n_v, n_v))
    nnz = cols.shape[0]
    hvt, htt, hvs, hss = np.zeros(nnz), np.ones(K), np.zeros(nnz), np.ones(K)
    rx, rz, ll, corr, a_s, a_z = (np.empty(n), np.empty(m), np.empty(m), np.empty(m),
                                  np.empty(m), np.empty(m))
    dx_a, dz_a, ds_a = np.empty(n), np.empty(m), np.empty(m)
    dx, dz, ds = np.empty(n), np.empty(m), np.empty(m)
    work_n, work_m = np.empty((4, n)), np.empty((8, m))   # rows: contiguous
    x, s, z = np.zeros(n), np.empty(m), np.empty(m)
    # CVXOPT's start: W = I (and a unit proximal term on t), x from
    # (P + G^T G) x = -c + G^T h, s = h - G x, z = G x - h, each shifted so that its
    # least eigenvalue is at least 1 where it is not strictly inside
    _factor(Q, cptr, cols, Jn, Jt, Jf, kind, n_d, normal_row, slack_row, fric_row, t_var,
            s_var, bound_var, bound_sign, m_l, soc_start, d_lin, eta, wbar, 1.0,
            L, hvt, htt, hvs, hss)
    _gt_times(h, rx, *structure)
    rx -= c
    _reduced_solve(L, rx, x, work_n[0], cptr, cols, kind, t_var, s_var, hvt, htt, hvs, hss)
    _g_times(x, rz, *structure)
    for r in range(m):
        s[r] = h[r] - rz[r]
        z[r] = rz[r] - h[r]
    for u in (s, z):
        violation = -_min_eigen(u, m_l, soc_start)
        if violation >= -1e-8 * max(math.sqrt(u @ u), 1.0):
            _add_identity(u, 1.0 + violation, m_l, soc_start)
    scale_c = 1.0 + np.max(np.abs(c)) if n else 1.0
    scale_h = 1.0 + np.max(np.abs(h)) if m else 1.0
    status = ITERATION_LIMIT
    iterations = 0
    best = np.inf
    x_best, s_best, z_best = x.copy(), s.copy(), z.copy()
    for iterations in range(1, MAX_ITERATIONS + 1):
        _gt_times(z, rx, *structure)
        _p_times(Q, x, dx)
        rx += dx + c
        _g_times(x, rz, *structure)
        for r in range(m):
            rz[r] += s[r] - h[r]
        gap = s @ z
        mu = gap / max(nu, 1)
        objective = 0.5 * (x @ dx) + c @ x
        primal = _max_abs(rz) / scale_h if m else 0.0
        dual = _max_abs(rx) / scale_c if n else 0.0
        relative_gap = gap / (1.0 + abs(objective))
        quality = max(max(primal, dual) / ACCEPTABLE_FEASIBILITY, relative_gap / ACCEPTABLE_GAP)
        if quality < best:
            best = quality
            x_best[:], s_best[:], z_best[:] = x, s, z
        if primal <= FEASIBILITY_TOL and dual <= FEASIBILITY_TOL and relative_gap <= GAP_TOL:
            status = OPTIMAL
            break
        if best <= 1.0 and quality > 100.0 * best:
            break                        # the arithmetic runs out: residuals grow again
        if not _scaling(s, z, m_l, soc_start, d_lin, eta, wbar, lam):
            status = NUMERICAL
            break
        _factor(Q, cptr, cols, Jn, Jt, Jf, kind, n_d, normal_row, slack_row, fric_row, t_var,
                s_var, bound_var, bound_sign, m_l, soc_start, d_lin, eta, wbar, 0.0,
                L, hvt, htt, hvs, hss)
        _jordan(lam, lam, ll, m_l, soc_start)
        rx *= -1.0
        rz *= -1.0
        ll *= -1.0
        kkt_solve(Q, L, structure, soc_start, d_lin, eta, wbar, lam, hvt, htt, hvs, hss,
                  rx, rz, ll, dx_a, dz_a, ds_a, work_n, work_m)
        alpha = min(_max_step(s, ds_a, m_l, soc_start), _max_step(z, dz_a, m_l, soc_start),
                    1.0)
        sigma = (1.0 - alpha) ** 3
        # the combined direction, with Mehrotra's term (W^-T ds_a) o (W dz_a)
        for r in range(m_l):
            ll[r] -= (ds_a[r] / d_lin[r]) * (dz_a[r] * d_lin[r])
        for k in range(soc_start.shape[0]):
            a = soc_start[k]
            _soc_w(ds_a, a_s, a, eta[k], wbar, True)
            _soc_w(dz_a, a_z, a, eta[k], wbar, False)
            _jordan_soc(a_s, a_z, corr, a)
            for r in range(a, a + 3):
                ll[r] -= corr[r]
        _add_identity(ll, sigma * mu, m_l, soc_start)
        kkt_solve(Q, L, structure, soc_start, d_lin, eta, wbar, lam, hvt, htt, hvs, hss,
                  rx, rz, ll, dx, dz, ds, work_n, work_m)
        alpha = min(STEP_FRACTION * min(_max_step(s, ds, m_l, soc_start),
                                        _max_step(z, dz, m_l, soc_start)), 1.0)
        if not (alpha > 1e-14 and _finite(dx) and _finite(ds) and _finite(dz)):
            status = NUMERICAL
            break
        _step(x, alpha, dx)
        _step(s, alpha, ds)
        _step(z, alpha, dz)
    if status != OPTIMAL and best <= 1.0:
        status = OPTIMAL         # the best this arithmetic gives, within ACCEPTABLE_*
    return x_best, s_best, z_best, status, iterations


@numba.njit(cache=True, error_model="numpy")
def _kkt_once(Q, L, structure, soc_start, d_lin, eta, wbar, lam, hvt, htt, hvs, hss,
              bx, bz, bs, dx, dz, ds, work_n, work_m):
    """
    Solve  P dx + G^T dz = bx,  G dx + ds = bz,  lam o (W dz + W^-T ds) = bs.

    With u = lam <> bs: W^-1 ds = u - W dz, so ds = W (u - W dz), and
    G dx - W^2 dz = bz - W u =: r; dz = W^-2 (G dx - r), and
    (P + G^T W^-2 G) dx = bx + G^T W^-2 r.
    """
    m_l = structure[14]
    u, r, tmp, gdx = work_m[0], work_m[1], work_m[2], work_m[3]
    for i in range(m_l):                       # u = lam <> bs, r = bz - W u, gdx = W^-2 r
        u[i] = bs[i] / lam[i]
        r[i] = bz[i] - u[i] * d_lin[i]
        gdx[i] = (r[i] / d_lin[i]) / d_lin[i]
    for k in range(soc_start.shape[0]):        # the same, cone by cone
        a = soc_start[k]
        _jordan_inverse_soc(lam, bs, u, a)
        _soc_w(u, tmp, a, eta[k], wbar, False)
        for i in range(a, a + 3):
            r[i] = bz[i] - tmp[i]
        _soc_w(r, tmp, a, eta[k], wbar, True)
        _soc_w(tmp, gdx, a, eta[k], wbar, True)
    rhs, work = work_n[0], work_n[1]
    _gt_times(gdx, rhs, *structure)
    rhs += bx
    cptr, cols, kind, t_var, s_var = structure[0], structure[1], structure[5], \
        structure[10], structure[11]
    _reduced_solve(L, rhs, dx, work, cptr, cols, kind, t_var, s_var, hvt, htt, hvs, hss)
    _g_times(dx, gdx, *structure)
    for i in range(m_l):                       # dz = W^-2 (G dx - r), ds = W (u - W dz)
        gdx[i] -= r[i]
        dz[i] = (gdx[i] / d_lin[i]) / d_lin[i]
        u[i] -= dz[i] * d_lin[i]
        ds[i] = u[i] * d_lin[i]
    for k in range(soc_start.shape[0]):
        a = soc_start[k]
        for i in range(a, a + 3):
            gdx[i] -= r[i]
        _soc_w(gdx, tmp, a, eta[k], wbar, True)
        _soc_w(tmp, dz, a, eta[k], wbar, True)
        _soc_w(dz, tmp, a, eta[k], wbar, False)
        for i in range(a, a + 3):
            u[i] -= tmp[i]
        _soc_w(u, ds, a, eta[k], wbar, False)


@numba.njit(cache=True, error_model="numpy")
def kkt_solve(Q, L, structure, soc_start, d_lin, eta, wbar, lam, hvt, htt, hvs, hss,
              bx, bz, bs, dx, dz, ds, work_n, work_m):
    """
    ``_kkt_once``, refined on the unreduced equations until their residual is round-off.

    Near the solution P + G^T W^-2 G is ill-conditioned (W^-2 of an active row
    grows as 1 / mu): one solve leaves residuals that stall the method near
    1e-9, and a refinement or two with the same factor restores them.
    """
    m_l = structure[14]
    _kkt_once(Q, L, structure, soc_start, d_lin, eta, wbar, lam, hvt, htt, hvs, hss,
              bx, bz, bs, dx, dz, ds, work_n, work_m)
    e1, cx = work_n[2], work_n[3]
    e2, e3, cz, cs = work_m[4], work_m[5], work_m[6], work_m[7]
    scale = 1.0 + max(_max_abs(bx) if bx.shape[0] else 0.0,
                      _max_abs(bz) if bz.shape[0] else 0.0)
    for _ in range(REFINEMENTS):
        _gt_times(dz, e1, *structure)
        _p_times(Q, dx, cx)
        for i in range(e1.shape[0]):
            e1[i] = bx[i] - e1[i] - cx[i]
        _g_times(dx, e2, *structure)
        for i in range(e2.shape[0]):
            e2[i] = bz[i] - e2[i] - ds[i]
        worst = max(_max_abs(e1) if e1.shape[0] else 0.0,
                    _max_abs(e2) if e2.shape[0] else 0.0)
        if worst <= 1e-15 * scale:
            break
        for i in range(m_l):                   # e3 = bs - lam o (W dz + W^-1 ds)
            cs[i] = ds[i] / d_lin[i] + dz[i] * d_lin[i]
            e3[i] = bs[i] - lam[i] * cs[i]
        for k in range(soc_start.shape[0]):
            a = soc_start[k]
            _soc_w(dz, e3, a, eta[k], wbar, False)
            _soc_w(ds, cs, a, eta[k], wbar, True)
            for i in range(a, a + 3):
                cs[i] += e3[i]
            _jordan_soc(lam, cs, e3, a)
            for i in range(a, a + 3):
                e3[i] = bs[i] - e3[i]
        _kkt_once(Q, L, structure, soc_start, d_lin, eta, wbar, lam, hvt, htt, hvs, hss,
                  e1, e2, e3, cx, cz, cs, work_n, work_m)
        _step(dx, 1.0, cx)
        _step(dz, 1.0, cz)
        _step(ds, 1.0, cs)


# ----- the solution's derivatives (conic_step.island_derivative) -----------------------------
g_times = _g_times          # G x and G^T y of a problem's structure (``layout``'s arrays)
gt_times = _gt_times


@numba.njit(cache=True, error_model="numpy")
def dense_g(m, n_x, cptr, cols, Jn, Jt, Jf, kind, n_d, normal_row, slack_row, fric_row,
            t_var, s_var, bound_var, bound_sign, m_l):
    """Return G (m x n_x) as a dense array, column by column of ``_g_times``."""
    G = np.empty((m, n_x))
    unit, column = np.zeros(n_x), np.empty(m)
    for j in range(n_x):
        unit[j] = 1.0
        _g_times(unit, column, cptr, cols, Jn, Jt, Jf, kind, n_d, normal_row, slack_row,
                 fric_row, t_var, s_var, bound_var, bound_sign, m_l)
        G[:, j] = column
        unit[j] = 0.0
    return G


def bound_rows(structure: tuple, lower: np.ndarray, upper: np.ndarray) -> tuple:
    """Return the rows and variables of the finite upper bounds, then of the lower ones."""
    bound_var, bound_sign, m_l = structure[5], structure[6], structure[7]
    rows = m_l - len(bound_var) + np.arange(len(bound_var))
    up = bound_sign > 0.0
    return rows[up], bound_var[up], rows[~up], bound_var[~up]


@numba.njit(cache=True, error_model="numpy")
def solution_derivative(Q, cptr, cols, Jn, Jt, Jf, kind, n_d, slack, lower, upper, x, s, z,
                        RX, RZ, held, stuck):
    """
    Return DX solving P dx + G^T dz = RX[:, j], G dx - W^2 dz = RZ[:, j] for each column j.

    W is the Nesterov-Todd scaling at the solution (s, z): the KKT system of
    the method's last iterate, with ds = -W^2 dz (``conic_step.island_derivative``).
    A linear row r with held[r] = 1 is taken as active (W_rr = 0), with
    held[r] = 2 as inactive (W_rr infinite): a weakly active row's two
    sides.  A cone k with stuck[k] is taken as an equality (W = 0).
    """
    n_v = Q.shape[0]
    K = kind.shape[0]
    normal_row, slack_row, fric_row, t_var, s_var, bound_var, bound_sign, m_l, soc_start, n = \
        layout(kind, slack, n_d, n_v, lower, upper)
    m = m_l + 3 * soc_start.shape[0]
    structure = (cptr, cols, Jn, Jt, Jf, kind, n_d, normal_row, slack_row, fric_row, t_var,
                 s_var, bound_var, bound_sign, m_l)
    d_lin = np.ones(m_l)
    eta = np.ones(soc_start.shape[0])
    wbar = np.zeros(m)
    lam = np.zeros(m)
    DX = np.zeros((n, RX.shape[1]))
    if not _scaling(s, z, m_l, soc_start, d_lin, eta, wbar, lam):
        return DX
    for r in range(m_l):
        if held[r] == 1:
            d_lin[r] = min(d_lin[r], HELD_SCALE)
        elif held[r] == 2:
            d_lin[r] = max(d_lin[r], 1.0 / HELD_SCALE)
    for k in range(soc_start.shape[0]):
        if stuck[k]:
            eta[k] = min(eta[k], HELD_SCALE)
    L = np.empty((n_v, n_v))
    nnz = cols.shape[0]
    hvt, htt, hvs, hss = np.zeros(nnz), np.ones(K), np.zeros(nnz), np.ones(K)
    _factor(Q, cptr, cols, Jn, Jt, Jf, kind, n_d, normal_row, slack_row, fric_row, t_var,
            s_var, bound_var, bound_sign, m_l, soc_start, d_lin, eta, wbar, 0.0,
            L, hvt, htt, hvs, hss)
    dx, dz, ds, bs = np.empty(n), np.empty(m), np.empty(m), np.zeros(m)
    work_n, work_m = np.empty((4, n)), np.empty((8, m))   # rows: contiguous
    for j in range(RX.shape[1]):
        kkt_solve(Q, L, structure, soc_start, d_lin, eta, wbar, lam, hvt, htt, hvs, hss,
                  np.ascontiguousarray(RX[:, j]), np.ascontiguousarray(RZ[:, j]), bs,
                  dx, dz, ds, work_n, work_m)
        DX[:, j] = dx
    return DX


@numba.njit(cache=True, error_model="numpy")
def weak_rows(s, z, m_l, soc_start, ratio):
    """
    Return which linear rows, and whether any cone, are weakly active at (s, z).

    Strict complementarity leaves one of s and z far larger than the other
    (an active row: s ~ mu / z; an inactive one: z ~ mu / s); a row where
    the smaller is at least ``ratio`` of the larger is weakly active.  A cone
    likewise, with its slip (s's largest eigenvalue) against its friction's
    margin (z's least eigenvalue): a contact at the edge of sliding.
    """
    rows = np.zeros(m_l, dtype=np.bool_)
    for r in range(m_l):
        top = max(s[r], z[r])
        rows[r] = top > 0.0 and min(s[r], z[r]) >= ratio * top
    cone = False
    for k in range(soc_start.shape[0]):
        a = soc_start[k]
        slip = s[a] + math.sqrt(s[a + 1] * s[a + 1] + s[a + 2] * s[a + 2])
        margin = z[a] - math.sqrt(z[a + 1] * z[a + 1] + z[a + 2] * z[a + 2])
        top = max(slip, margin)
        if top > 0.0 and min(slip, margin) >= ratio * top:
            cone = True
    return rows, cone
