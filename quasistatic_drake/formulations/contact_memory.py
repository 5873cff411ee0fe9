"""
What the QP's step remembers of its contacts: the warm start that bounds the next step's friction.

The step's friction is bounded by mu times the contact's normal impulse of
the last step (Drake's "lagged" approximation: exact non-penetration and a
convex problem, with no Anitescu lift; ``formulations/conic_step.py``).  So
each step hands on its contacts, each recognised by the two geometries it
joins and its points in their own frames, with their impulses
(:class:`ContactMemory`), and the next step finds its own contacts in it
(:func:`recall`).  A contact is the same when it joins the same geometries
and one of its two points has moved by at most MATCH_DISTANCE in its
geometry's frame: a box's corner sliding across a table keeps its place on
the box.  A contact not found is new: its first step has no friction bound,
as in Drake's lagged model, where a new contact's last normal force is zero.

It also holds which objects were asleep (``formulations/qp.py``: an island
with no robot in it that did not move sleeps until something wakes it), the
step's velocities (the next step linearises its contacts halfway along
them), which contacts slid (with the velocities and the impulses, the
active set the next step tries first: ``conic_step.Guess``) and its
contact pairs' gap offsets (``step_loop.py``).
This module imports neither Drake nor ROS.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numba
import numpy as np

from quasistatic_drake.contact import ContactSet

MATCH_DISTANCE = 2e-3      # [m] a contact point moved no further than this is the same


@dataclass(frozen=True)
class ContactMemory:
    """
    The last step's contacts (their places) and impulses, and its sleeping objects.

    Immutable and shared, not copied, when Drake copies a plant's state
    (``__deepcopy__``); treat its arrays as read-only.
    """

    geometry: np.ndarray        # (k, 2) int: the geometries each contact joins
    local_a: np.ndarray         # (k, 3) its point on A, in A's frame
    local_b: np.ndarray         # (k, 3) its point on B, in B's frame
    normal_impulse: np.ndarray  # (k,) [N s]
    impulse_W: np.ndarray       # (k, 3) on B by A [N s]
    asleep: frozenset = frozenset()   # names of the objects at rest
    velocity: Optional[np.ndarray] = None   # (n_v,) the last step's v' (the linearisation)
    offsets: Optional[dict] = None          # {geometry pair: gap offset [m]} (step_loop.py)
    # how far v' moved any point of any body in the last step, |h v_B| + h R_B |w_B| at its
    # linearisation [m] (step_loop.py; None: not known, measured again at q)
    sweep: Optional[float] = None
    sliding: Optional[np.ndarray] = None    # (k,) bool: its friction at its bound, slipping

    @staticmethod
    def of(contacts: ContactSet, normal_impulse: np.ndarray, impulse_W: np.ndarray,
           asleep: frozenset = frozenset(), velocity: Optional[np.ndarray] = None,
           sliding: Optional[np.ndarray] = None) -> "ContactMemory":
        """Return the memory of ``contacts`` (those with known places) and their impulses."""
        normal_impulse = np.asarray(normal_impulse, dtype=float)
        impulse_W = np.asarray(impulse_W, dtype=float).reshape(-1, 3)
        if contacts.geometry_a is None:
            geometry, local_a, local_b = (np.zeros((0, 2), dtype=np.int64), np.zeros((0, 3)),
                                          np.zeros((0, 3)))
            normal_impulse, impulse_W = normal_impulse[:0].copy(), impulse_W[:0].copy()
            sliding = None if sliding is None else sliding[:0].copy()
        else:
            geometry, local_a, local_b, normal_impulse, impulse_W = _placed(
                np.asarray(contacts.geometry_a, dtype=np.int64),
                np.asarray(contacts.geometry_b, dtype=np.int64),
                np.ascontiguousarray(contacts.local_a, dtype=float),
                np.ascontiguousarray(contacts.local_b, dtype=float), normal_impulse, impulse_W)
            if sliding is not None:
                sliding = sliding[np.asarray(contacts.geometry_a) >= 0]
        return ContactMemory(geometry=geometry, local_a=local_a, local_b=local_b,
                             normal_impulse=normal_impulse, impulse_W=impulse_W,
                             asleep=frozenset(asleep), velocity=velocity, sliding=sliding)

    def __deepcopy__(self, memo) -> "ContactMemory":
        """Share instead of copy: immutable, and Drake clones the plant's state every update."""
        return self

    @property
    def size(self) -> int:
        """Return how many contacts are remembered."""
        return len(self.normal_impulse)


@numba.njit(cache=True)
def _placed(geometry_a, geometry_b, local_a, local_b, normal_impulse, impulse_W):
    """Return ``ContactMemory.of``'s arrays of the contacts with known places (geometry >= 0)."""
    keep = np.flatnonzero(geometry_a >= 0)
    geometry = np.empty((keep.shape[0], 2), dtype=np.int64)
    a, b = np.empty((keep.shape[0], 3)), np.empty((keep.shape[0], 3))
    normal, impulse = np.empty(keep.shape[0]), np.empty((keep.shape[0], 3))
    for k in range(keep.shape[0]):
        i = keep[k]
        geometry[k, 0], geometry[k, 1] = geometry_a[i], geometry_b[i]
        a[k], b[k], impulse[k] = local_a[i], local_b[i], impulse_W[i]
        normal[k] = normal_impulse[i]
    return geometry, a, b, normal, impulse


def recall(memory, contacts: ContactSet) -> np.ndarray:
    """
    Return the index of each contact in ``memory`` (-1: a new contact).

    ``memory`` may be None (nothing remembered).  A contact and a remembered
    one that join the same geometries are candidates when one of their two
    points is within MATCH_DISTANCE (module docstring); the candidates are
    matched nearest first, by the sum of their two points' distances, each
    contact and each remembered one at most once: two contacts that share
    their point on a held brick are told apart by their points on the
    finger (matched by the nearer point alone, a finger's far face took
    its near face's impulse, and the brick slid).
    """
    if memory is None or memory.size == 0 or contacts.geometry_a is None or contacts.n_c == 0:
        return -np.ones(contacts.n_c, dtype=np.int64)
    return _match(np.ascontiguousarray(contacts.geometry_a, dtype=np.int64),
                  np.ascontiguousarray(contacts.geometry_b, dtype=np.int64),
                  np.ascontiguousarray(contacts.local_a, dtype=float),
                  np.ascontiguousarray(contacts.local_b, dtype=float),
                  np.ascontiguousarray(memory.geometry, dtype=np.int64),
                  np.ascontiguousarray(memory.local_a, dtype=float),
                  np.ascontiguousarray(memory.local_b, dtype=float), MATCH_DISTANCE)


@numba.njit(cache=True)
def _match(geometry_a, geometry_b, local_a, local_b, memory_geometry, memory_a, memory_b,
           match_distance):
    """Return ``recall``'s matching: candidates nearest first, each side used once."""
    n, m = geometry_a.shape[0], memory_geometry.shape[0]
    rows, cols = np.empty(n * m, dtype=np.int64), np.empty(n * m, dtype=np.int64)
    costs = np.empty(n * m)
    count = 0
    for i in range(n):
        if geometry_a[i] < 0:
            continue
        for j in range(m):
            if geometry_a[i] != memory_geometry[j, 0] or geometry_b[i] != memory_geometry[j, 1]:
                continue
            da = math.sqrt((local_a[i, 0] - memory_a[j, 0]) ** 2
                           + (local_a[i, 1] - memory_a[j, 1]) ** 2
                           + (local_a[i, 2] - memory_a[j, 2]) ** 2)
            db = math.sqrt((local_b[i, 0] - memory_b[j, 0]) ** 2
                           + (local_b[i, 1] - memory_b[j, 1]) ** 2
                           + (local_b[i, 2] - memory_b[j, 2]) ** 2)
            if min(da, db) <= match_distance:
                rows[count], cols[count], costs[count] = i, j, da + db
                count += 1
    found = -np.ones(n, dtype=np.int64)
    used = np.zeros(m, dtype=np.bool_)
    order = np.argsort(costs[:count], kind="mergesort")
    for k in order:
        if found[rows[k]] < 0 and not used[cols[k]]:
            found[rows[k]] = cols[k]
            used[cols[k]] = True
    return found
