"""
Contact islands: the parts of a step that can be solved on their own.

The step's convex problem couples two velocities only through the Hessian
(an object's own velocities through its mass matrix; a robot's through its
inertia, under ``robot_inertia``) or through a contact whose rows touch
both.  So the models (robots and objects) fall into islands: two models are
in one island when a contact joins them, directly or through others.
Contacts with the environment join nothing.  Each island's problem is the
whole problem's block, and solving it alone gives the same answer: a pile
resting far from a push changes nothing of the push, and an island in which
nothing moves need not be solved at all (``formulations/qp.py``: islands at
rest sleep).  This module imports neither Drake nor ROS.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np


@dataclass(frozen=True)
class Island:
    """One island: its models, velocities (sorted) and contacts (in detection order)."""

    units: np.ndarray          # the models (indices into the unit list)
    v_idx: np.ndarray          # their velocities
    contacts: np.ndarray       # the contacts whose rows touch them
    driven: bool               # a robot is among its models


@numba.njit(cache=True)
def _find(parent, i):
    root = i
    while parent[root] != root:
        root = parent[root]
    while parent[i] != root:
        parent[i], i = root, parent[i]
    return root


@numba.njit(cache=True)
def _labels(n_units, unit_of_v, rows):
    """Union the units of every contact row's nonzero columns; return each unit's root."""
    parent = np.arange(n_units)
    n_c = rows.shape[0]
    first = -np.ones(n_c, dtype=np.int64)
    for c in range(n_c):
        for j in range(rows.shape[1]):
            if rows[c, j] != 0.0:
                unit = unit_of_v[j]
                if unit < 0:
                    continue
                if first[c] < 0:
                    first[c] = unit
                else:
                    a, b = _find(parent, first[c]), _find(parent, unit)
                    if a != b:
                        parent[max(a, b)] = min(a, b)
    for u in range(n_units):
        parent[u] = _find(parent, u)
    return parent, first


@numba.njit(cache=True)
def rows_times(A, x):
    """
    Return A @ x, each row summed in column order.

    An island's rows have zeros in every other island's columns, and adding
    zeros in order changes no bit of a sum; BLAS's blocked sums group the
    nonzero terms by the row's length instead, so a pile elsewhere in the
    scene changed a push's gaps by 1e-21 m, and its solution by 1e-10.
    """
    out = np.zeros(A.shape[0])
    for i in range(A.shape[0]):
        total = 0.0
        for j in range(A.shape[1]):
            total += A[i, j] * x[j]
        out[i] = total
    return out


def find_islands(unit_of_v: np.ndarray, n_units: int, robot_units: np.ndarray,
                 rows: np.ndarray) -> list[Island]:
    """
    Return the islands, in the order of their first model.

    ``unit_of_v`` gives each velocity's model (-1: none), ``robot_units`` the
    robots' models, and ``rows`` (n_c x n_v) the contacts' rows: any matrix
    whose entry (c, j) is nonzero where contact c involves velocity j (the
    normal and tangent Jacobians' magnitudes summed).
    """
    robots = np.zeros(n_units, dtype=np.bool_)
    robots[robot_units] = True
    unit_ptr, units, v_ptr, v_idx, c_ptr, contacts, driven = _members(
        n_units, np.asarray(unit_of_v, dtype=np.int64), np.ascontiguousarray(rows, dtype=float),
        robots)
    return [Island(units=units[unit_ptr[i]:unit_ptr[i + 1]],
                   v_idx=v_idx[v_ptr[i]:v_ptr[i + 1]],
                   contacts=contacts[c_ptr[i]:c_ptr[i + 1]], driven=bool(driven[i]))
            for i in range(len(driven))]


@numba.njit(cache=True)
def _members(n_units, unit_of_v, rows, robots):
    """
    Return the islands' units, velocities and contacts, each sorted, as flat arrays.

    Island i (in the order of its first unit) holds units[unit_ptr[i]:unit_ptr[i + 1]],
    and likewise its velocities and contacts; ``driven`` says which have a robot.
    """
    root, v_root, contact_root = _roots(n_units, unit_of_v, rows)
    island = -np.ones(n_units, dtype=np.int64)         # each root's island
    count = np.int64(0)   # not the literal 0: one compilation of _grouped
    for u in range(n_units):
        if root[u] == u:
            island[u] = count
            count += 1
    driven = np.zeros(count, dtype=np.bool_)
    for u in range(n_units):
        driven[island[root[u]]] |= robots[u]
    return (*_grouped(island, root, count), *_grouped(island, v_root, count),
            *_grouped(island, contact_root, count), driven)


@numba.njit(cache=True)
def _grouped(island, roots, count):
    """Return (ptr, items): the indices of ``roots`` grouped by their root's island, sorted."""
    sizes = np.zeros(count + 1, dtype=np.int64)
    for i in range(roots.shape[0]):
        if roots[i] >= 0:
            sizes[island[roots[i]] + 1] += 1
    ptr = np.cumsum(sizes)
    items = np.empty(ptr[count], dtype=np.int64)
    fill = ptr[:count].copy()
    for i in range(roots.shape[0]):
        if roots[i] >= 0:
            k = island[roots[i]]
            items[fill[k]] = i
            fill[k] += 1
    return ptr, items


@numba.njit(cache=True)
def _roots(n_units, unit_of_v, rows):
    """Return the island root of each unit, of each velocity and of each contact (-1: none)."""
    root, first = _labels(n_units, unit_of_v, rows)
    v_root = -np.ones(unit_of_v.shape[0], dtype=np.int64)
    for j in range(unit_of_v.shape[0]):
        if unit_of_v[j] >= 0:
            v_root[j] = root[unit_of_v[j]]
    contact_root = -np.ones(first.shape[0], dtype=np.int64)
    for c in range(first.shape[0]):
        if first[c] >= 0:
            contact_root[c] = root[first[c]]
    return root, v_root, contact_root
