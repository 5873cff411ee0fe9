r"""
The step QP solved again after a change of its objects' linear term, on its active set.

The proximal iterates (``proximal_drag.py``) solve the step QP again and
again with only b_u changed.  On a fixed active set the solution is affine
in b: with E the strongly active rows and bounds held as equalities (the
sliding contacts' rows linearised as ``sliding_lift.newton_velocity`` does,
so that the rows' bounds follow the sliding speeds: the lift-free fixed
point), the KKT conditions

    Q v + b = E_s^T mu,    E_c v = e

give v(b_u + db_u) = v + S db_u, with S = dv/db_u from one null-space solve
(``qp_sensitivity.equality_constrained``) with n_u right-hand sides; the
multipliers are found by non-negative least squares on E_s^T mu = Q v + b
(the held rows may be dependent).  A predicted solution is accepted
only if it meets every condition of the full solve's solution: each row
and bound feasible (the rows' bounds taken at the predicted sliding speeds),
every held multiplier of the right sign, stationarity on E, and every
contact sliding along the same pyramid direction (or sticking) as at the
base, which the linearisation assumed.  Otherwise the caller solves in
full.  So the result is the full solve's to round-off, at a fraction of its
cost (a matrix product and the checks, against two or three QP solves and
a Newton update of the fixed point).  This module imports neither Drake
nor ROS.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
from scipy.optimize import nnls

from quasistatic_drake.contact import ContactSet
from quasistatic_drake.formulations.qp_sensitivity import (ACTIVE_TOL, active_set,
                                                           equality_constrained, held_rows)
from quasistatic_drake.formulations.sliding_lift import (binding_directions, constraint_rows,
                                                         LIFT_TOL, row_bounds, sliding_speeds)

STATIONARITY_TOL = 1e-8     # relative: the residual of Q v + b = E_s^T mu with signed mu


@dataclass(frozen=True)
class ActiveSetResponse:
    """A solution's active set, and its response S = dv/db_u and multiplier map on it."""

    v: np.ndarray                   # the base solution
    b: np.ndarray                   # its linear term
    rows: np.ndarray                # the held rows of A
    n_lower: int                    # how many held lower bounds follow the rows in E
    S: np.ndarray                   # n x n_u: dv / db_u
    E_s: np.ndarray                 # the held constraints' stationarity rows
    binding: Optional[np.ndarray]   # j* per contact at the base (None: Anitescu's rows)


def response(Q: np.ndarray, b: np.ndarray, A: np.ndarray, index: np.ndarray,
             contacts: ContactSet, h: float, v_lower: np.ndarray, v_upper: np.ndarray,
             v: np.ndarray, duals: np.ndarray, speeds: Optional[np.ndarray],
             object_v_idx: np.ndarray) -> Optional[ActiveSetResponse]:
    """
    Return the response of the solution (v, duals) with its sliding speeds (None: Anitescu's).

    None where the linearisation does not hold on both sides: two pyramid
    directions tie for a sliding contact.
    """
    lower = row_bounds(contacts, index, h, np.zeros(contacts.n_c) if speeds is None
                       else speeds)
    active = active_set(Q, b, A, lower, v_lower, v_upper, v, duals)
    binding, A_c = None, A
    if speeds is not None:
        A_c, tie = constraint_rows(contacts, A, index, v)
        if tie:
            return None
        binding = binding_directions(contacts, v)[0]
    E_c, E_s = (held_rows(m, active.rows, active.lower, active.upper) for m in (A_c, A))
    F = np.eye(len(v))[:, object_v_idx]
    S = equality_constrained(Q, E_c, np.zeros((E_c.shape[0], len(object_v_idx))), F, E_s)
    return ActiveSetResponse(v=v, b=b, rows=active.rows, n_lower=len(active.lower), S=S,
                             E_s=E_s, binding=binding)


def predicted(base: ActiveSetResponse, db_u: np.ndarray, Q: np.ndarray, A: np.ndarray,
              index: np.ndarray, contacts: ContactSet, h: float, v_lower: np.ndarray,
              v_upper: np.ndarray, object_v_idx: np.ndarray
              ) -> Optional[tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]]:
    """
    Return (v, duals on A's rows, sliding speeds) with b_u changed by db_u, or None.

    None when the prediction fails a condition of the module docstring.
    The speeds are those the linearised rows hold (the base's pyramid
    direction per sliding contact); they must equal the sliding speeds of
    v to the fixed point's LIFT_TOL.
    """
    dv = base.S @ db_u
    v = base.v + dv
    speeds = None
    if base.binding is not None:
        speeds = held_speeds(contacts, base.binding, v)
        gap = contacts.mu * h * (sliding_speeds(contacts, v) - speeds)
        if np.any(np.abs(gap) > LIFT_TOL):
            return None
        speeds = np.maximum(speeds, 0.0)
    scale = 1.0 + np.abs(v).max(initial=0.0)
    lower = row_bounds(contacts, index, h, np.zeros(contacts.n_c) if speeds is None
                       else speeds)
    if len(lower) and np.any(A @ v - lower < -ACTIVE_TOL * scale * (1.0 + np.abs(lower))):
        return None
    if np.any(v < v_lower - ACTIVE_TOL * scale) or np.any(v > v_upper + ACTIVE_TOL * scale):
        return None
    gradient = Q @ v + base.b
    gradient[object_v_idx] += db_u
    force = 1.0 + np.abs(gradient).max(initial=0.0)
    mu = _signed_multipliers(base.E_s, gradient, len(base.rows) + base.n_lower,
                             STATIONARITY_TOL * force)
    if mu is None:
        return None
    duals = np.zeros(len(lower))
    duals[base.rows] = np.maximum(mu[:len(base.rows)], 0.0)
    return v, duals, speeds


def held_speeds(contacts: ContactSet, binding: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Return -J_f,ij* v per contact along its base direction j* (0 where it stuck)."""
    speeds = np.zeros(contacts.n_c)
    sliding = np.flatnonzero(binding >= 0)
    if len(sliding):
        speeds[sliding] = -(contacts.J_f[sliding * contacts.n_d + binding[sliding]] @ v)
    return speeds


def _signed_multipliers(E_s: np.ndarray, gradient: np.ndarray, split: int,
                        tol: float) -> Optional[np.ndarray]:
    """
    Return multipliers mu with E_s^T mu = gradient, >= 0 before ``split``, <= 0 after, or None.

    The held rows may be dependent (a sticking contact's cone rows share its
    normal): least-norm multipliers can then leave a row negative though
    others balance the same force.  Non-negative least squares finds
    multipliers of the right signs where they exist.
    """
    if E_s.shape[0] == 0:      # scipy's nnls aborts the interpreter on an empty matrix
        return np.zeros(0) if np.abs(gradient).max(initial=0.0) <= tol else None
    if not (np.all(np.isfinite(E_s)) and np.all(np.isfinite(gradient))):
        return None
    signs = np.where(np.arange(E_s.shape[0]) < split, 1.0, -1.0)
    try:
        mu, residual = nnls(E_s.T * signs, gradient)
    except (RuntimeError, ValueError):      # its iteration limit: solve in full instead
        return None
    return mu * signs if residual <= tol else None
