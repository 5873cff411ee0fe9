r"""
The step QP without Anitescu's lift while sliding: a fixed point on the rows' bounds.

Anitescu's relaxation (the QP's rows phi_i / h + (J_n,i + mu_i J_f,ij) v >= 0,
``qp.py``) couples the normal and the tangential motion: a contact sliding at
speed s_i must separate at mu_i s_i, so a pushed box rides mu h s above the
table (5 mm at h = 0.1 s, 0.1 m/s, mu = 0.5).  With the sliding speed of the
pyramid,

    s_i(v) = max(0, max_j -J_f,ij v)      (the row that binds a sliding contact),

the rows' bounds are shifted by the speed the step slides at,

    phi_i / h + (J_n,i + mu_i J_f,ij) v >= -mu_i s_i,

and s_i is found by a fixed point.  At the fixed point the binding row of a
sliding contact reads phi_i / h + J_n,i v >= 0: no lift and no penetration;
its multiplier is the Coulomb force on the pyramid's edge that opposes the
sliding.  A contact that sticks (s_i = 0) keeps its rows, so the force
balance at rest is exactly the QP's.

Each iteration is one QP solve (DAQP) with s^k, until mu_i h |s_i(v^k) -
s^k_i| <= LIFT_TOL for every contact.  The plain update s^(k+1) = s(v^k)
contracts by about mu^2 per solve (a pushed box at mu = 0.5 took 15 to 17
solves to 1e-12 m).  On a fixed active set the map is affine, so the update
is Newton's instead (``newton_velocity``): the rows that bind at v^k, with
s_i(v) = -J_f,ij* v substituted, give v* in one linear solve, and
s^(k+1) = s(v*); a pushed box takes 2 or 3 solves.  Where the active set
changes from one solve to the next, Newton's update can cycle (measured: a
fuzzed pads scene, 0.8 m/s commands, 53 contacts, never converged); when
one does not halve the residual, the plain update takes over (13 solves
there).  After MAX_LIFT_ITERATIONS the safe iterate that lifts least is kept
(``fixed_point``).

For the step gradients, the bounds depend on v: a tight row r of a sliding
contact i linearises to (A_r - mu_i J_f,ij*) dv = ..., with j* the binding
direction, while the stationarity conditions keep A_r
(``constraint_rows``; ``qp_sensitivity`` takes the two apart).  This module
imports neither Drake nor ROS.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from quasistatic_drake.contact import ContactSet
from quasistatic_drake.formulations.qp_sensitivity import (ActiveSet, equality_constrained,
                                                           held_rows)

LIFT_TOL = 1e-10          # [m] mu h |s^(k+1) - s^k| at the fixed point (round-off: ~1e-12)
MAX_LIFT_ITERATIONS = 25  # a fixed point not met by then keeps its best safe iterate
NEWTON_PROGRESS = 0.5     # Newton updates stop when one does not halve the residual
TIE = 1e-9                # relative: two pyramid directions this close both bind


def sliding_speeds(contacts: ContactSet, v: np.ndarray) -> np.ndarray:
    """Return s_i = max(0, max_j -J_f,ij v) per contact (0 where mu_i = 0)."""
    if contacts.n_c == 0:
        return np.zeros(0)
    slip = -(contacts.J_f @ v).reshape(contacts.n_c, contacts.n_d)
    return np.where(contacts.mu > 0.0, np.maximum(slip.max(axis=1), 0.0), 0.0)


def row_bounds(contacts: ContactSet, index: np.ndarray, h: float,
               speeds: np.ndarray) -> np.ndarray:
    """Return the rows' lower bounds -phi_i / h - mu_i s_i (index: each row's contact)."""
    if len(index) == 0:
        return np.zeros(0)
    i = index[:, 0]
    return -contacts.phi[i] / h - contacts.mu[i] * speeds[i]


def binding_directions(contacts: ContactSet, v: np.ndarray) -> tuple[np.ndarray, bool]:
    """
    Return j* per contact (-1 where it sticks), and whether two directions tie for it.

    A tie (the sliding direction between two of the pyramid's) makes s_i a
    kink in v: its derivative is one-sided.
    """
    speeds = sliding_speeds(contacts, v)
    if contacts.n_c == 0:
        return np.zeros(0, dtype=int), False
    slip = -(contacts.J_f @ v).reshape(contacts.n_c, contacts.n_d)
    binding = np.where(speeds > 0.0, slip.argmax(axis=1), -1)
    ordered = np.sort(slip, axis=1)
    scale = TIE * (1.0 + np.abs(slip).max(initial=0.0))
    tie = bool(np.any((speeds > scale) & (ordered[:, -1] - ordered[:, -2] <= scale)))
    return binding, tie


def newton_velocity(H: np.ndarray, f: np.ndarray, A: np.ndarray, index: np.ndarray,
                    contacts: ContactSet, h: float, v: np.ndarray, active: ActiveSet,
                    v_lower: np.ndarray, v_upper: np.ndarray) -> np.ndarray:
    """
    Return v* of the fixed point on ``active``'s rows and bounds (module docstring).

    The binding rows, linearised as ``constraint_rows``, meet -phi_i / h; the
    stationarity conditions keep A's rows (``equality_constrained``).
    """
    A_c, _ = constraint_rows(contacts, A, index, v)
    rows = active.rows
    E_c, E_s = (held_rows(m, rows, active.lower, active.upper) for m in (A_c, A))
    e = np.concatenate([-contacts.phi[index[rows, 0]] / h, v_lower[active.lower],
                        v_upper[active.upper]])
    return equality_constrained(H, E_c, e[:, None], f[:, None], E_s)[:, 0]


def constraint_rows(contacts: ContactSet, A: np.ndarray, index: np.ndarray,
                    v: np.ndarray) -> tuple[np.ndarray, bool]:
    """
    Return the rows A_r - mu_i J_f,ij* linearised at v (module docstring), and any tie.

    Rows of contacts that stick or are frictionless are A's own.
    """
    binding, tie = binding_directions(contacts, v)
    A_c = A.copy()
    if len(index):
        i = index[:, 0]
        rows = np.flatnonzero(binding[i] >= 0)
        sliding = i[rows]
        tangent_rows = sliding * contacts.n_d + binding[sliding]
        A_c[rows] -= contacts.mu[sliding, None] * contacts.J_f[tangent_rows]
    return A_c, tie


def fixed_point(solve_with, newton_with, contacts: ContactSet, h: float,
                start: Optional[np.ndarray] = None):
    """
    Return (solution, speeds it was solved with, iterations, residual lift [m]).

    ``solve_with(speeds)`` solves the QP with the rows' bounds shifted by
    ``speeds``; ``newton_with(solution, speeds)`` returns the v of the Newton
    update (module docstring; None if it has none).  The iteration stops when
    the lift it leaves, max_i mu_i h |s_i(v) - speeds_i|, is at most LIFT_TOL.
    If it has not after MAX_LIFT_ITERATIONS (the active set cycles: fast
    commands in a crowded scene), the iterate kept is the safe one that lifts
    least: safe means speeds_i <= s_i(v) for every contact, so a sliding
    contact may lift by mu_i h (s_i - speeds_i) but never penetrate.  The
    first iterate (no shift: Anitescu's rows) is safe.  ``start``: the speeds
    to begin with (a nearby problem's fixed point, as the proximal iterates'
    in ``proximal_drag.py``); if that run ends with no safe iterate, it runs
    again from zero.
    """
    speeds = np.zeros(contacts.n_c) if start is None else start.copy()
    best, newton, last = None, True, np.inf
    for iteration in range(1, MAX_LIFT_ITERATIONS + 1):
        solution = solve_with(speeds)
        if solution.v is None:
            return solution, speeds, iteration, 0.0
        updated = sliding_speeds(contacts, solution.v)
        gap = contacts.mu * h * (updated - speeds)        # > 0: lift; < 0: penetration
        residual = float(np.max(np.abs(gap), initial=0.0))
        if residual <= LIFT_TOL:
            return solution, speeds, iteration, residual
        if np.all(gap >= -LIFT_TOL) and (best is None or residual < best[3]):
            best = (solution, speeds, iteration, residual)
        if iteration == MAX_LIFT_ITERATIONS:
            if best is None:          # possible only from a start: from zero, the first is safe
                return fixed_point(solve_with, newton_with, contacts, h)
            return best[0], best[1], iteration, best[3]
        newton = newton and residual < NEWTON_PROGRESS * last     # else: plain updates
        last = residual
        predicted = newton_with(solution, speeds) if newton else None
        speeds = updated if predicted is None else sliding_speeds(contacts, predicted)
