r"""
The quasi-static regulariser's drag on moving objects, removed by proximal-point iterates.

In quasi-static mode the objects have no inertia, and the step QP keeps its
Hessian positive definite with Q_uu = eps M_u (``qp.py``; Pang & Tedrake
2021, "Drawbacks": without it the solution need not be unique).  At the
solution the stationarity conditions read

    Q_0 v' + b + eps M_u v_u' = J^T beta,

so eps M_u v_u' / h is a force that resists every moving object: a drag of
up to r h min(K) |v_u'|, set by the softest robot spring in the scene, not
by anything touching the object (measured: 65 to 91 % of a 28 g brick's
weight in the arm's grasp, ten times a pushed box's weight behind a finger
of K = 1e5 N/m).

The proximal-point method (Rockafellar 1976) keeps the regulariser and
moves its centre: iterate k solves the same QP with the linear term

    b_k = b - eps M_u c_(k-1),     c_(k-1) = P v_u^(k-1),     c_(-1) = 0,

that is, the unregularised objective plus (eps / 2) |v_u - c_(k-1)|^2_{M_u}.
The Hessian, the rows and their conditioning are the plain step QP's at
every iterate; only b changes.  The drag left is eps M_u (v_u - c) / h.
In a direction that the robots' springs price through the contacts
(curvature c_s against eps M_u) it shrinks by eps / (eps + c_s) per
iterate: at most r / (1 + r) = 0.23 (r = 0.3) against the softest spring
of the scene, much less against a stiffer one.

P keeps translation only.  It is the M_u-orthogonal projection onto the
object velocities that turn no object body (J_w v_u = 0): a free body's
centre is its centre of mass's velocity with no rotation.  So the drag
force on each body's centre of mass goes, while the regulariser's torque
eps I omega / h stays as in the plain step QP.  With the pyramidal
friction cone nothing else prices an object's turn while it slides (a
box's sliding corners keep their pyramid edges as it turns); moving the
centre in rotation too let a box pushed through its centre by a point
finger tip off the table's side 7 mm before its centre of mass passed the
edge (measured; ``test_robustness.py``).  A joint that only turns (a
door's hinge) keeps its drag.

The number of iterates is fixed (``qp: {proximal_iterations: N}``, 6 by
default, with r = 0.3: ``benchmarks/regulariser.py``), not chosen by a
tolerance: each iterate is a continuous function
of the step's data, so the step stays continuous for planners and finite
differences (a stopping test on the drag made the box-turn plan's finite
differences fail: v jumped by 1 mm where the count changed).  A direction
that only the regulariser prices and a force pushes (an unsupported
object, one sliding down a slope with its friction at the cone's edge)
moves N + 1 times as fast as in the plain step QP: its speed was the
regulariser's to set in either case.  This module imports neither Drake
nor ROS.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

PROJECTION_RCOND = 1e-10     # relative: rotation rows below this are dependent
SETTLED = 1e-9               # drag over weight below which the next centre changes nothing


@dataclass(frozen=True)
class ObjectRuns:
    """Each object's run of the QP's object velocities and its mass (for the drag's scale)."""

    slices: tuple[slice, ...]        # each object's run in v_u (object_v_idx order)
    masses: np.ndarray               # [kg]
    gravity: float                   # |g| [m/s^2]


def translation_projection(M_u: np.ndarray, W: np.ndarray) -> np.ndarray:
    """
    Return P, the M_u-orthogonal projection onto {v_u : W v_u = 0} (module docstring).

    ``W`` stacks the moving bodies' angular-velocity Jacobians in the
    objects' columns: P v_u turns no body and is the nearest such velocity
    to v_u in kinetic energy.  Without rotation rows P is the identity.
    """
    n = M_u.shape[0]
    if n == 0 or not np.any(W):
        return np.eye(n)
    M_inv_Wt = np.linalg.solve(M_u, W.T)
    S = W @ M_inv_Wt
    return np.eye(n) - M_inv_Wt @ np.linalg.pinv(S, rcond=PROJECTION_RCOND, hermitian=True) @ W


def rotation_rows(J_w: np.ndarray, object_v_idx: np.ndarray) -> np.ndarray:
    """Return W: the bodies' angular-velocity Jacobians (n_b x 3 x n_v) in the objects' columns."""
    return J_w[:, :, object_v_idx].reshape(-1, len(object_v_idx))


def drag_fractions(eps: float, M_u: np.ndarray, P: np.ndarray, v_u: np.ndarray,
                   centre_u: np.ndarray, h: float, runs: ObjectRuns) -> np.ndarray:
    """
    Return each object's translational drag over its weight: eps |P (v_u - c)|_{M_o} / h.

    Against |g| sqrt(m_o) (a free body: the drag force on its centre of mass
    over m_o |g|); in zero gravity, against its momentum |P v_u|_{M_o} / h.
    """
    fractions = np.zeros(len(runs.slices))
    moving = P @ (v_u - centre_u)
    translating = P @ v_u
    for k, run in enumerate(runs.slices):
        M_o = M_u[run, run]
        drag = eps * np.sqrt(max(float(moving[run] @ M_o @ moving[run]), 0.0)) / h
        reference = (runs.gravity * np.sqrt(runs.masses[k]) if runs.gravity > 0.0 else
                     np.sqrt(max(float(translating[run] @ M_o @ translating[run]), 0.0)) / h)
        fractions[k] = drag / reference if reference > 0.0 else 0.0
    return fractions


def proximal_solve(solve_with: Callable[[Optional[object]], object],
                   iterations: int) -> object:
    """
    Return the last of at most ``iterations`` proximal iterates after the plain step QP.

    ``solve_with(previous)`` solves the step with its centre taken from the
    ``previous`` solution (None: the plain step QP) and records the
    ``drag_fraction`` it leaves.  An iterate whose drag is at most SETTLED of
    the weight is a fixed point of the iteration to that accuracy: the next
    centre would be its own, so the iteration stops there (an object at
    rest costs one solve).  A failed solve (v None) ends the iteration with
    the last solution that succeeded, or with the failure if it is the
    plain step's.
    """
    solution = solve_with(None)
    for _ in range(iterations):
        if solution.v is None or solution.drag_fraction <= SETTLED:
            break
        following = solve_with(solution)
        if following.v is None:
            break
        solution = following
    return solution


def object_runs(facts) -> ObjectRuns:
    """Return the objects' runs of v_u, their masses and |g| (``ModelFacts``)."""
    ends = np.cumsum((0,) + tuple(facts.object_sizes))
    return ObjectRuns(slices=tuple(slice(int(a), int(b)) for a, b in zip(ends[:-1], ends[1:])),
                      masses=np.asarray(facts.object_masses, dtype=float),
                      gravity=float(np.linalg.norm(facts.gravity)))
