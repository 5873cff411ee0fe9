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
them) and its contact pairs' gap offsets (``step_loop.py``).
This module imports neither Drake nor ROS.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from quasistatic_drake.contact import ContactSet

MATCH_DISTANCE = 2e-3      # [m] a contact point moved no further than this is the same


@dataclass(frozen=True)
class ContactMemory:
    """The last step's contacts (their places) and impulses, and its sleeping objects."""

    geometry: np.ndarray        # (k, 2) int: the geometries each contact joins
    local_a: np.ndarray         # (k, 3) its point on A, in A's frame
    local_b: np.ndarray         # (k, 3) its point on B, in B's frame
    normal_impulse: np.ndarray  # (k,) [N s]
    impulse_W: np.ndarray       # (k, 3) on B by A [N s]
    asleep: frozenset = frozenset()   # names of the objects at rest
    velocity: Optional[np.ndarray] = None   # (n_v,) the last step's v' (the linearisation)
    offsets: Optional[dict] = None          # {geometry pair: gap offset [m]} (step_loop.py)

    @staticmethod
    def of(contacts: ContactSet, normal_impulse: np.ndarray, impulse_W: np.ndarray,
           asleep: frozenset = frozenset(),
           velocity: Optional[np.ndarray] = None) -> "ContactMemory":
        """Return the memory of ``contacts`` (those with known places) and their impulses."""
        if contacts.geometry_a is None:
            keep = np.zeros(contacts.n_c, dtype=bool)
        else:
            keep = contacts.geometry_a >= 0
        return ContactMemory(
            geometry=(np.zeros((0, 2), dtype=np.int64) if not keep.any() else
                      np.column_stack([contacts.geometry_a[keep], contacts.geometry_b[keep]])),
            local_a=np.zeros((0, 3)) if not keep.any() else contacts.local_a[keep],
            local_b=np.zeros((0, 3)) if not keep.any() else contacts.local_b[keep],
            normal_impulse=np.asarray(normal_impulse, dtype=float)[keep],
            impulse_W=np.asarray(impulse_W, dtype=float).reshape(-1, 3)[keep],
            asleep=frozenset(asleep), velocity=velocity)

    @property
    def size(self) -> int:
        """Return how many contacts are remembered."""
        return len(self.normal_impulse)


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
    geometry = np.column_stack([contacts.geometry_a, contacts.geometry_b])
    same = ((geometry[:, None, 0] == memory.geometry[None, :, 0])
            & (geometry[:, None, 1] == memory.geometry[None, :, 1])
            & (geometry[:, None, 0] >= 0))
    da = np.linalg.norm(contacts.local_a[:, None] - memory.local_a[None], axis=2)
    db = np.linalg.norm(contacts.local_b[:, None] - memory.local_b[None], axis=2)
    near, far = np.minimum(da, db), np.maximum(da, db)
    i, j = np.nonzero(same & (near <= MATCH_DISTANCE))
    found = -np.ones(contacts.n_c, dtype=np.int64)
    used = np.zeros(memory.size, dtype=bool)
    for k in np.argsort(near[i, j] + far[i, j], kind="stable"):
        if found[i[k]] < 0 and not used[j[k]]:
            found[i[k]], used[j[k]] = j[k], True
    return found
