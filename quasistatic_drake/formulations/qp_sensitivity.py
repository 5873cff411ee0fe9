r"""
Derivatives of a QP's solution with respect to its data, from the KKT conditions.

For the QP of ``qp_backends.solve_daqp``,

    minimise  1/2 x^T H x + f(p)^T x
    subject to  A x >= l(p),   x_lower(p) <= x <= x_upper(p),

at a solution x* with multipliers beta >= 0 on the rows and nu on the
bounds, the constraints that are *strongly* active (tight with a positive
multiplier) stay tight under a small change of p, and the rest stay slack.
With E the strongly active rows and bounds stacked as equalities E x = e(p),
the KKT conditions H x + f = E^T mu, E x = e differentiate to

    H dx + df = E^T dmu,    E dx = de.

E may be rank-deficient (two sticking contacts on one face give parallel
rows, Anitescu's cone rows share a normal): its multipliers are then not
unique, but dx is.  It is solved in the null space of E: a particular
solution dx_p = E^+ de (least squares), Z a basis of null(E), and

    dx = dx_p - Z (Z^T H Z)^-1 Z^T (H dx_p + df).

A tight row with a zero multiplier that the strongly active rows span is
redundant (a parallel row; DAQP gives one of two parallel rows all the
multiplier): it stays tight with them and joins E.  Any other constraint
that is tight with a zero multiplier is weakly active.  If the derivative
computed without it keeps it tight (a sticking contact's cone rows without
multiplier), that derivative is two-sided; if it would move it, it turns
active or slack depending on the direction of the change, only one-sided
derivatives exist, and the result says so (``degenerate``; the derivative
given is the one with that constraint left slack).

Equality rows (``equalities``: the first rows of A, A x = l) are always in
E.  H may be singular where the objective does not price some variables (the
MIQP's impulses with its binaries fixed, ``miqp_sensitivity``): dx is then
unique only up to directions in null(H) and null(E), which change no priced
variable; the least-norm one is given.  A weakly active constraint that such a
direction can keep tight does not make the derivative one-sided: if E with the
weak constraints added is consistent and its solution differs from dx only
in null(H), that solution is optimal too (the objective's change along a
direction n in null(H) and null(E) is (H dx + df)^T n = dmu^T E n = 0) and
two-sided.  This module imports neither Drake nor ROS.  (The step gradients
of Song, Kumar & Pang's planning, and qsim's ``get_Dq_nextDqa_cmd``, are
built on this.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

ACTIVE_TOL = 1e-9       # relative: a slack or multiplier this small counts as zero


@dataclass(frozen=True)
class ActiveSet:
    """The constraints of a QP solution that stay tight, and those only weakly active."""

    rows: np.ndarray        # rows of A tight with a positive multiplier (or spanned by those)
    lower: np.ndarray       # variables at their lower bound with a positive multiplier
    upper: np.ndarray       # variables at their upper bound with a positive multiplier
    weak_rows: np.ndarray   # tight rows with a zero multiplier that the others do not span
    weak_lower: np.ndarray  # variables at a bound with a zero multiplier
    weak_upper: np.ndarray


@dataclass(frozen=True)
class Derivative:
    """dx/dp (n x k), and per column whether it is one-sided (a weak constraint would move)."""

    dx: np.ndarray
    one_sided: np.ndarray     # (k,) bool

    @property
    def degenerate(self) -> bool:
        """Return whether any column is one-sided."""
        return bool(self.one_sided.any())


def active_set(H: np.ndarray, f: np.ndarray, A: np.ndarray, lower: np.ndarray,
               x_lower: np.ndarray, x_upper: np.ndarray, x: np.ndarray,
               duals: np.ndarray, tol: float = ACTIVE_TOL, equalities: int = 0) -> ActiveSet:
    """
    Return the strongly and weakly active constraints of the solution x (``duals`` on rows).

    The bounds' multipliers follow from stationarity: nu = H x + f - A^T duals
    (positive at an active lower bound, negative at an active upper one).
    The first ``equalities`` rows of A are equalities: always strongly active.
    """
    scale = 1.0 + np.abs(x).max(initial=0.0)
    force = 1.0 + np.abs(H @ x + f).max(initial=0.0) + np.abs(duals).max(initial=0.0)
    slack = A @ x - lower if len(lower) else np.zeros(0)
    tight = slack <= tol * scale * (1.0 + np.abs(lower))
    positive = duals > tol * force
    tight[:equalities] = positive[:equalities] = True
    nu = H @ x + f - A.T @ duals
    at_lower = np.abs(x - x_lower) <= tol * scale
    at_upper = np.abs(x_upper - x) <= tol * scale
    lower_on = at_lower & (nu > tol * force)
    upper_on = at_upper & (-nu > tol * force)
    rows = np.flatnonzero(tight & positive)
    identity = np.eye(len(x))
    E = np.vstack([A[rows], identity[np.flatnonzero(lower_on)],
                   identity[np.flatnonzero(upper_on)]])
    # a tight row without multiplier that the strong rows span is redundant (a parallel
    # row): it stays tight with them
    candidates = np.flatnonzero(tight & ~positive)
    spanned = _spanned(E, A[candidates])
    return ActiveSet(rows=np.sort(np.concatenate([rows, candidates[spanned]])),
                     lower=np.flatnonzero(lower_on), upper=np.flatnonzero(upper_on),
                     weak_rows=candidates[~spanned],
                     weak_lower=np.flatnonzero(at_lower & ~lower_on),
                     weak_upper=np.flatnonzero(at_upper & ~upper_on))


def solution_derivative(H: np.ndarray, A: np.ndarray, active: ActiveSet, df: np.ndarray,
                        dl: np.ndarray, dx_lower: np.ndarray, dx_upper: np.ndarray,
                        A_constraint: Optional[np.ndarray] = None) -> Derivative:
    """
    Return dx/dp (n x k) for changes df (n x k), dl (m x k) and of the bounds (n x k each).

    The null-space solve of the module docstring on ``active``'s strong
    equalities.  The weakly active constraints are then checked: if dx keeps
    each of them tight for every column, dx is the two-sided derivative (a
    sticking contact's cone rows without multiplier are such), and so is the
    solution that keeps them tight through unpriced directions (module
    docstring); otherwise only one-sided derivatives exist and ``degenerate``
    is True.  ``A_constraint``: the rows' linearisation where a row's bound
    depends on x too (``sliding_lift.constraint_rows``); the stationarity
    conditions keep A's rows.
    """
    A_c = A if A_constraint is None else A_constraint
    E, E_s = (held_rows(m, active.rows, active.lower, active.upper) for m in (A_c, A))
    de = np.vstack([dl[active.rows], dx_lower[active.lower], dx_upper[active.upper]])
    dx = equality_constrained(H, E, de, df, E_s)
    W, W_s = (held_rows(m, active.weak_rows, active.weak_lower, active.weak_upper)
              for m in (A_c, A))
    dw = np.vstack([dl[active.weak_rows], dx_lower[active.weak_lower],
                    dx_upper[active.weak_upper]])
    size = 1.0 + np.abs(dx).max(initial=0.0)
    moved = np.any(np.abs(W @ dx - dw) > 1e-7 * size, axis=0)
    if not moved.any():
        return Derivative(dx, moved)
    # the weak constraints move: unless directions the objective does not price can
    # keep them tight (module docstring), only one-sided derivatives exist
    E_all, de_all = np.vstack([E, W]), np.vstack([de, dw])
    kept = equality_constrained(H, E_all, de_all, df, np.vstack([E_s, W_s]))
    consistent = np.abs(E_all @ kept - de_all).max(axis=0, initial=0.0) <= 1e-9 * size
    unpriced = np.abs(H @ (kept - dx)).max(axis=0, initial=0.0) <= 1e-9 * size * (
        1.0 + np.abs(H).max(initial=0.0))
    rescued = moved & consistent & unpriced
    return Derivative(np.where(rescued, kept, dx), moved & ~rescued)


def held_rows(matrix: np.ndarray, rows: np.ndarray, at_lower: np.ndarray,
              at_upper: np.ndarray) -> np.ndarray:
    """Return ``matrix``'s rows and the bounds' unit rows stacked: constraints held as E x = e."""
    identity = np.eye(matrix.shape[1])
    return np.vstack([matrix[rows], identity[at_lower], identity[at_upper]])


def equality_constrained(H: np.ndarray, E: np.ndarray, de: np.ndarray, df: np.ndarray,
                         E_s: Optional[np.ndarray] = None) -> np.ndarray:
    """
    Return the least-norm dx with E dx = de and H dx + df in the row space of E_s.

    With E_s = E (the default) that is the minimiser of 1/2 dx^T H dx + df^T dx
    subject to E dx = de; with E_s the rows of the stationarity conditions
    where they differ from the constraints' linearisation.
    """
    if E.shape[0] == 0:
        return np.linalg.lstsq(H, -df, rcond=None)[0]
    dx_p = np.linalg.lstsq(E, de, rcond=None)[0]
    Z = _null_space(E)
    if Z.shape[1] == 0:
        return dx_p
    Y = Z if E_s is None else _null_space(E_s)
    return dx_p - Z @ np.linalg.lstsq(Y.T @ H @ Z, Y.T @ (H @ dx_p + df), rcond=None)[0]


def central_difference(high: np.ndarray, low: np.ndarray, delta: float) -> np.ndarray:
    """Return (high - low) / (2 delta), 0 where both are the same infinite bound."""
    change = np.zeros(np.shape(high))
    np.subtract(high, low, out=change, where=np.isfinite(high) & np.isfinite(low))
    return change / (2.0 * delta)


def _spanned(E: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Return which of ``rows`` lie in the row space of E (to a relative 1e-9)."""
    if E.shape[0] == 0 or rows.shape[0] == 0:
        return np.zeros(rows.shape[0], dtype=bool)
    _, s, vt = np.linalg.svd(E, full_matrices=False)
    basis = vt[s > s.max(initial=0.0) * max(E.shape) * np.finfo(float).eps * 1e3]
    residual = rows - (rows @ basis.T) @ basis
    return np.linalg.norm(residual, axis=1) <= 1e-9 * np.linalg.norm(rows, axis=1)


def _null_space(E: np.ndarray) -> np.ndarray:
    """Return an orthonormal basis of E's null space (rank by a relative singular-value cut)."""
    _, s, vt = np.linalg.svd(E)
    rank = int(np.sum(s > s.max(initial=0.0) * max(E.shape) * np.finfo(float).eps * 1e3))
    return vt[rank:].T
