r"""
The finite-feedback time-stepping LCP of Halm & Posa, as pure functions of arrays.

Halm & Posa, "A Quasi-static Model and Simulation Approach for Pushing,
Grasping, and Jamming" (seed 004), Sec. 5.  Planar objects q_o = [x, y,
theta] (each object three coordinates), robot joints q_m, and m contacts,
each with a normal row and two tangent rows (+t_i, -t_i) in the plane of
motion.  With the impulses z = [Lambda_N; Lambda_T; gamma] over one step h,

    dq_o = A (J_N,o^T Lambda_N + J_T,o^T Lambda_T)                  (eq. 32)
    dq_m = c B (J_N,m^T Lambda_N + J_T,m^T Lambda_T) + h u         (eq. 33)

and the complementarity conditions (eqs. 34-36) give LCP(M(cB), w) with

    M(cB) = [[J_o A J_o^T + J_m cB J_m^T,  [0; E]],
             [[mu, -E^T],                  0     ]]                 (eqs. 17, 37)
    w     = [J_N,m h u + phi;  J_T,m h u;  0]                       (eqs. 18, 38)

where J_o = [J_N,o; J_T,o], J_m = [J_N,m; J_T,m] and E (eq. 1) sums each
contact's two tangent rows.  The extraction of the paper prints eq. 33
without the factor c; the authors' code (``finiteFBTS.m``) multiplies B by
c, as eq. 17 does, and so do we.  A is the limit-surface matrix of eq. 12,
R(theta) A~ R(theta)^T per object.  The impulses are scaled by the unknown
limit-surface factor k of eq. 10: they are "scaled impulses", not N s.

Rows without friction (joint limits, velocity bounds) are normal rows with
no tangent rows and no gamma: ``PlanarContacts.frictional`` says which
normal rows have tangents.  This module imports neither Drake nor ROS.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PlanarContacts:
    """
    The contact rows of one step (Halm & Posa, eqs. 7-9 and 31).

    The first ``n_f`` normal rows are frictional contacts, each with two
    tangent rows (+t_i then -t_i, interleaved: rows 2i and 2i + 1 of the
    tangent Jacobians); any further normal rows are frictionless (no tangent
    rows).  ``phi`` holds the signed distances (the gaps of the
    frictionless rows).  Columns: the objects' coordinates (J_*_o), the
    robots' joints (J_*_m).
    """

    phi: np.ndarray     # (n_n,) signed distances [m]
    J_n_o: np.ndarray   # (n_n, n_o)
    J_n_m: np.ndarray   # (n_n, n_m)
    J_t_o: np.ndarray   # (2 n_f, n_o)
    J_t_m: np.ndarray   # (2 n_f, n_m)
    mu: np.ndarray      # (n_f,) friction coefficients of the frictional rows

    @property
    def n_f(self) -> int:
        """Return the number of frictional contacts (those with tangent rows)."""
        return len(self.mu)

    @property
    def n_n(self) -> int:
        """Return the number of normal rows (frictional contacts, then frictionless rows)."""
        return len(self.phi)


@dataclass(frozen=True)
class LcpData:
    """LCP(M, w): find z >= 0 with M z + w >= 0 and z^T (M z + w) = 0 (Halm & Posa, Def. 1)."""

    M: np.ndarray
    w: np.ndarray
    n_n: int            # z = [Lambda_N (n_n); Lambda_T (2 n_f); gamma (n_f)]
    n_f: int


def finite_feedback_lcp(contacts: PlanarContacts, A: np.ndarray, cB: np.ndarray, h: float,
                        u: np.ndarray) -> LcpData:
    """
    Return LCP(M~(cB), w~(u)) of one time step (Halm & Posa, eqs. 37-38).

    ``A`` is the objects' limit-surface matrix (n_o x n_o, eq. 12), ``cB``
    the scaled relative feedback gains (n_m x n_m, eq. 16; c = 0 gives
    perfect velocity control), ``u`` the commanded robot velocities.
    """
    n_n, n_f = contacts.n_n, contacts.n_f
    J_o = np.vstack([contacts.J_n_o, contacts.J_t_o])
    J_m = np.vstack([contacts.J_n_m, contacts.J_t_m])
    n_rows = n_n + 2 * n_f
    M = np.zeros((n_rows + n_f, n_rows + n_f))
    M[:n_rows, :n_rows] = J_o @ A @ J_o.T + J_m @ cB @ J_m.T
    E = tangent_sum_matrix(n_f)
    M[n_n:n_rows, n_rows:] = E
    M[n_rows:, :n_f] = np.diag(contacts.mu)
    M[n_rows:, n_n:n_rows] = -E.T
    w = np.zeros(n_rows + n_f)
    w[:n_rows] = command_rhs(contacts, h, u)
    w[:n_n] += contacts.phi
    return LcpData(M=M, w=w, n_n=n_n, n_f=n_f)


def command_rhs(contacts: PlanarContacts, h: float, u: np.ndarray) -> np.ndarray:
    """
    Return the commanded part of w~ (Halm & Posa, eq. 38): J_m h u over the contact rows.

    w~ is linear in u, so this is also its change under a command's change.
    """
    return np.vstack([contacts.J_n_m, contacts.J_t_m]) @ (h * u)


def tangent_sum_matrix(n_f: int) -> np.ndarray:
    """Return E (Halm & Posa, eq. 1): 2 n_f x n_f, a column [1; 1] per contact."""
    return np.repeat(np.eye(n_f), 2, axis=0)


def step_displacements(contacts: PlanarContacts, A: np.ndarray, cB: np.ndarray, h: float,
                       u: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (dq_o, dq_m) of a solved step (Halm & Posa, eqs. 32-33)."""
    impulses = z[:contacts.n_n + 2 * contacts.n_f]
    J_o = np.vstack([contacts.J_n_o, contacts.J_t_o])
    J_m = np.vstack([contacts.J_n_m, contacts.J_t_m])
    return A @ (J_o.T @ impulses), cB @ (J_m.T @ impulses) + h * u


def limit_surface_matrix(A_body: np.ndarray, theta: float) -> np.ndarray:
    """
    Return A = R(theta) A~ R(theta)^T for one planar object (Halm & Posa, eq. 12).

    ``A_body`` is A~ (3 x 3) over the body-frame wrench [f_x, f_y, tau];
    R(theta) turns its first two coordinates into the world frame.
    """
    c, s = np.cos(theta), np.sin(theta)
    R = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    return R @ A_body @ R.T


@dataclass(frozen=True)
class LcpDerivative:
    """dz/dp (n x k) of an LCP solution through its basis, and whether it is one-sided."""

    dz: np.ndarray
    degenerate: bool


def lcp_solution_derivative(M: np.ndarray, w: np.ndarray, z: np.ndarray, dw: np.ndarray,
                            tol: float = 1e-9) -> LcpDerivative:
    """
    Return dz/dp of a solution z of LCP(M, w(p)) for dw = dw/dp (n x k), through its basis.

    With the basic set a = {z_i > 0} (where s_i = (M z + w)_i = 0) held, z_a
    follows M_aa dz_a = -dw_a and z stays 0 elsewhere.  An index with
    z_i = 0 and s_i = 0 is weakly active.  Its s_i = 0 is first held too
    (the equations M_wa dz_a = -dw_w added, solved in least squares): M_aa is
    often singular, and the weak rows are what fix the rest (a contact that
    does not touch has a basic gamma, its sliding speed, set by the tangent
    row with zero impulse).  If all the equations hold, the derivative is
    two-sided.  If they cannot, only one-sided derivatives exist
    (``degenerate``): the one given holds the basic set only.
    """
    s = M @ z + w
    scale = 1.0 + np.abs(z).max(initial=0.0)
    basic = np.flatnonzero(z > tol * scale)
    weak = np.flatnonzero((z <= tol * scale) & (np.abs(s) <= tol * (1.0 + np.abs(w))))
    dz = np.zeros((len(z), dw.shape[1]))
    if not len(basic):
        return LcpDerivative(dz, bool(np.any(np.abs(dw[weak]) > 0.0)))
    held = np.concatenate([basic, weak])
    dz[basic] = np.linalg.lstsq(M[np.ix_(held, basic)], -dw[held], rcond=None)[0]
    size = 1.0 + np.abs(dz).max(initial=0.0) + np.abs(dw).max(initial=0.0)
    if np.all(np.abs(M[held] @ dz + dw[held]) <= 1e-9 * size):
        return LcpDerivative(dz, False)
    dz[basic] = np.linalg.lstsq(M[np.ix_(basic, basic)], -dw[basic], rcond=None)[0]
    return LcpDerivative(dz, True)


def command_derivative(contacts: PlanarContacts, data: LcpData, A: np.ndarray, cB: np.ndarray,
                       h: float, z: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """
    Return d(dq_o)/du, d(dq_m)/du of a solved step and whether they are one-sided.

    u enters w~ as [J_N,m h u; J_T,m h u; 0] (eq. 38) and dq_m as h u (eq. 33).
    """
    J_o = np.vstack([contacts.J_n_o, contacts.J_t_o])
    J_m = np.vstack([contacts.J_n_m, contacts.J_t_m])
    dw = np.zeros((len(data.w), J_m.shape[1]))
    dw[:J_m.shape[0]] = h * J_m
    derivative = lcp_solution_derivative(data.M, data.w, z, dw)
    d_impulses = derivative.dz[:J_m.shape[0]]
    return (A @ J_o.T @ d_impulses, cB @ J_m.T @ d_impulses + h * np.eye(J_m.shape[1]),
            derivative.degenerate)
