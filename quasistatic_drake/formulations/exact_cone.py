r"""
The step with exact Coulomb cones: Anitescu's relaxation as a second-order cone program.

``qp: {friction_cone: exact}``.  The pyramid's rows (qp.py) become one cone
per contact (qsim's SOCP mode):

    minimise   1/2 v^T Q v + b^T v
    subject to (phi_i / h + mu_i s_i + J_n,i v,  mu_i J_t,i v) in SOC_3,

J_t,i the 2 x n_v Jacobian of the tangent plane (t1, t2 = n x t1).  With the
cone's multiplier z_i = (z_n, z_t), ||z_t|| <= z_n, stationarity reads
Q v + b = sum_i J_n,i^T z_n + mu_i J_t,i^T z_t: the contact impulse on B by A is
z_n n + mu (z_t1 t1 + z_t2 t2), inside the round cone, where the pyramid's
reaches sqrt(2) mu z_n between its directions (four of them).  s_i = 0: like
Anitescu's pyramid and qsim's SOCP mode, the cone lifts a contact sliding at
speed s by mu h s per step (the pyramid's lift is removed by
``sliding_lift.py``; for the cone that is not done yet, so the scenario must
say ``anitescu_lift: true``).  A frictionless contact keeps a single row
J_n,i v >= -phi_i / h.  With two friction directions (a planar scene) the
tangent plane is the one line t1 and the cone is the pyramid.

Solved by Clarabel (an interior-point conic solver, already pinned), chosen
by ``benchmarks/socp_solvers.py``.  This module imports neither Drake nor
ROS.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Optional

import numpy as np
from scipy import sparse

from quasistatic_drake.contact import ContactSet


@dataclass(frozen=True)
class ConeResult:
    """An SOCP solve: v (None on failure), the cones' multipliers per contact, status, time."""

    v: Optional[np.ndarray]
    z: Optional[np.ndarray]    # (n_c, 3): z_n, z_t1, z_t2 (z_t2 = 0 with one tangent)
    status: str
    solve_time: float
    iterations: int = 0


def tangent_jacobians(contacts: ContactSet) -> np.ndarray:
    """
    Return J_t (n_c, 2, n_v): the rows of t1 and t2 = n x t1, from the balanced J_f.

    d_j = cos(2 pi j / n_d) t1 + sin(2 pi j / n_d) t2 (contact.tangent_directions), so
    J_t1 = J_f,0 and J_t2 = (J_f,1 - cos(2 pi / n_d) J_f,0) / sin(2 pi / n_d); with
    n_d = 2 there is no t2 (its row is zero).
    """
    n_c, n_d = contacts.n_c, contacts.n_d
    J_f = contacts.J_f.reshape(n_c, n_d, -1)
    J_t = np.zeros((n_c, 2, contacts.J_n.shape[1]))
    if n_c == 0:
        return J_t
    J_t[:, 0] = J_f[:, 0]
    if n_d > 2:
        angle = 2.0 * math.pi / n_d
        J_t[:, 1] = (J_f[:, 1] - math.cos(angle) * J_f[:, 0]) / math.sin(angle)
    return J_t


def solve_cones(Q: np.ndarray, b: np.ndarray, contacts: ContactSet, h: float,
                v_lower: np.ndarray, v_upper: np.ndarray,
                speeds: Optional[np.ndarray] = None) -> ConeResult:
    """Solve the SOCP of the module docstring with Clarabel (``speeds``: the shift s)."""
    import clarabel
    n_v = Q.shape[0]
    speeds = np.zeros(contacts.n_c) if speeds is None else speeds
    J_t = tangent_jacobians(contacts)
    rows, rhs, cones = [], [], []
    for i in range(contacts.n_c):
        gap = contacts.phi[i] / h + contacts.mu[i] * speeds[i]
        if contacts.mu[i] > 0.0:
            rows.append(-np.vstack([contacts.J_n[i], contacts.mu[i] * J_t[i]]))
            rhs.extend([gap, 0.0, 0.0])
            cones.append(clarabel.SecondOrderConeT(3))
        else:
            rows.append(-contacts.J_n[i][None])
            rhs.append(gap)
            cones.append(clarabel.NonnegativeConeT(1))
    identity = np.eye(n_v)
    low, high = np.flatnonzero(np.isfinite(v_lower)), np.flatnonzero(np.isfinite(v_upper))
    if len(low) + len(high):
        rows.append(np.vstack([-identity[low], identity[high]]))
        rhs.extend([*(-v_lower[low]), *v_upper[high]])
        cones.append(clarabel.NonnegativeConeT(len(low) + len(high)))
    A = np.vstack(rows) if rows else np.zeros((0, n_v))
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = 1e-10
    start = time.perf_counter()
    solver = clarabel.DefaultSolver(sparse.csc_matrix(np.triu(Q)), np.asarray(b, float),
                                    sparse.csc_matrix(A), np.array(rhs, float), cones, settings)
    solution = solver.solve()
    spent = time.perf_counter() - start
    status = str(solution.status)
    if "Solved" not in status:
        return ConeResult(None, None, status, spent)
    z = np.zeros((contacts.n_c, 3))
    duals, k = np.asarray(solution.z), 0
    for i in range(contacts.n_c):
        size = 3 if contacts.mu[i] > 0.0 else 1
        z[i, :size] = duals[k:k + size]
        k += size
    return ConeResult(np.asarray(solution.x), z, "optimal", spent, solution.iterations)


def cone_impulses(contacts: ContactSet, z: np.ndarray) -> np.ndarray:
    """Return the impulse on B by A per contact, z_n n + mu (z_t1 t1 + z_t2 t2) (world)."""
    t1 = contacts.tangents_W[:, 0]
    t2 = np.cross(contacts.normal_W, t1)
    mu = contacts.mu[:, None]
    return z[:, :1] * contacts.normal_W + mu * (z[:, 1:2] * t1 + z[:, 2:3] * t2)
