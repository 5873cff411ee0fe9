r"""
The talk's QP: Anitescu's relaxation of the friction cone, as rows of a QP.

Pang & Tedrake 2021 (ICRA 2021 talk), "Modeling Coulomb friction as a convex
program": one row per extreme ray of the polyhedral cone,

    phi_i / h + (J_n,i + mu_i J_f,ij) v' >= 0    for all i, j,

whose multipliers beta_ij are the impulses along the rays.  A contact that
slides must separate at mu_i |v_t| (the relaxation's lift), which is why the
step itself uses exact normal rows (``conic_step.py``).  These rows remain
for the log-barrier form (qsim's smoothing for planners, ``log_barrier.py``),
and ``solve_qp_step`` solves the talk's QP with DAQP for the benchmarks and
the tests that compare against it (the frictionless identity with the LCP).
This module imports neither Drake nor ROS.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numba
import numpy as np

from quasistatic_drake.contact import ContactSet
from quasistatic_drake.formulations.qp_backends import QpSolverResult, solve_daqp


def friction_cone_rows(contacts: ContactSet) -> tuple[np.ndarray, np.ndarray]:
    """
    Return the rows J_n,i + mu_i J_f,ij of Anitescu's constraints and each row's (i, j).

    A frictionless contact gets a single row J_n,i (its n_d rows would coincide);
    its j is -1.
    """
    return _cone_rows(contacts.J_n, contacts.J_f, contacts.mu, contacts.n_d)


@numba.njit(cache=True)
def _cone_rows(J_n, J_f, mu, n_d):
    n_rows = 0
    for i in range(mu.shape[0]):
        n_rows += n_d if mu[i] > 0.0 else 1
    A = np.empty((n_rows, J_n.shape[1]))
    index = np.empty((n_rows, 2), dtype=np.int64)
    r = 0
    for i in range(mu.shape[0]):
        if mu[i] > 0.0:
            for j in range(n_d):
                A[r] = J_n[i] + mu[i] * J_f[i * n_d + j]
                index[r, 0], index[r, 1] = i, j
                r += 1
        else:
            A[r] = J_n[i]
            index[r, 0], index[r, 1] = i, -1
            r += 1
    return A, index


@dataclass(frozen=True)
class AnitescuSolution:
    """The talk's QP solved: v' (None on failure), impulses on B by A, status, rows, duals."""

    v: Optional[np.ndarray]
    impulses_W: np.ndarray
    status: str
    solve_time: float
    constraint_rows: int
    duals: Optional[np.ndarray] = None


def solve_qp_step(cost, contacts: ContactSet, h: float, v_lower: np.ndarray,
                  v_upper: np.ndarray, solver=solve_daqp) -> AnitescuSolution:
    """Solve the talk's QP with cost (Q, b) (``qp.QpCost``); v_lower <= v' <= v_upper."""
    A, index = friction_cone_rows(contacts)
    lower = -contacts.phi[index[:, 0]] / h if len(index) else np.zeros(0)
    result: QpSolverResult = solver(cost.Q, cost.b, A, lower, v_lower, v_upper)
    if not result.ok:
        return AnitescuSolution(None, np.zeros((contacts.n_c, 3)), result.status,
                                result.solve_time, len(lower))
    duals = np.maximum(result.duals, 0.0)
    return AnitescuSolution(result.x, contact_impulses(contacts, index, duals), "optimal",
                            result.solve_time, len(lower), duals)


def contact_impulses(contacts: ContactSet, index: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """Return the impulse on B by A per contact, sum_j beta_ij (n_i + mu_i d_ij), world frame."""
    return _impulses(contacts.normal_W, contacts.tangents_W, contacts.mu, index, beta)


@numba.njit(cache=True)
def _impulses(normal, tangents, mu, index, beta):
    impulses = np.zeros((normal.shape[0], 3))
    for r in range(index.shape[0]):
        i, j = index[r, 0], index[r, 1]
        impulses[i] += beta[r] * normal[i]
        if j >= 0:
            impulses[i] += beta[r] * mu[i] * tangents[i, j]
    return impulses
