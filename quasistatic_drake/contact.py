"""
ContactSet: the linearised contact constraints of one time step, as numpy arrays.

Conventions follow Pang & Tedrake 2018, Sec. III-B: for contact i between bodies A and B,
the normal n_i is the unit vector pointing from A to B, the relative velocity
is v_i = v_B - v_A at the contact points, and

    phi_dot_i = n_i^T v_i = J_n,i v           (eq. 3)
    nu_i      = d_i^T v_i = J_f,i v           (eq. 4)

with d_i = [d_i1 ... d_i,n_d] a *balanced* set of unit tangents (for every d,
-d is in the set).  A contact force on B by A is n_i lambda_n + d_i lambda_f.
This module imports neither Drake nor ROS.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional

import numba
import numpy as np


@dataclass(frozen=True)
class ContactSet:
    """All contacts of one configuration (n_c contacts, n_v velocities)."""

    phi: np.ndarray          # (n_c,) signed distances [m]
    J_n: np.ndarray          # (n_c, n_v) normal Jacobians, eq. 3
    J_f: np.ndarray          # (n_c * n_d, n_v) tangent Jacobians, eq. 4, grouped by contact
    mu: np.ndarray           # (n_c,) Coulomb friction coefficients
    normal_W: np.ndarray     # (n_c, 3) unit normals, from A to B
    tangents_W: np.ndarray   # (n_c, n_d, 3) the balanced tangent set d_i
    point_A_W: np.ndarray    # (n_c, 3) contact point on A
    point_B_W: np.ndarray    # (n_c, 3) contact point on B
    body_a: tuple[str, ...]  # body names, scoped as "model::body"
    body_b: tuple[str, ...]
    # Where each contact sits on its two geometries, for recognising it in the next step
    # (the QP's lagged friction, formulations/contact_memory.py): the geometries'
    # indices, and the contact points in each geometry's own frame.  None in sets built
    # by hand (such contacts are new every step).
    geometry_a: Optional[np.ndarray] = None   # (n_c,) int
    geometry_b: Optional[np.ndarray] = None
    local_a: Optional[np.ndarray] = None      # (n_c, 3) point_A in geometry A's frame
    local_b: Optional[np.ndarray] = None      # (n_c, 3) point_B in geometry B's frame

    @property
    def n_c(self) -> int:
        """Return the number of contacts."""
        return len(self.phi)

    @property
    def n_d(self) -> int:
        """Return the number of tangent directions per contact."""
        return self.tangents_W.shape[1]

    def take(self, indices: np.ndarray) -> "ContactSet":
        """Return the contacts ``indices`` (in that order), with their tangent rows."""
        keep = np.asarray(indices, dtype=int)
        rows = (keep[:, None] * self.n_d + np.arange(self.n_d)[None]).reshape(-1)
        return ContactSet(phi=self.phi[keep], J_n=self.J_n[keep], J_f=self.J_f[rows],
                          mu=self.mu[keep], normal_W=self.normal_W[keep],
                          tangents_W=self.tangents_W[keep], point_A_W=self.point_A_W[keep],
                          point_B_W=self.point_B_W[keep],
                          body_a=tuple(self.body_a[i] for i in keep),
                          body_b=tuple(self.body_b[i] for i in keep),
                          **{name: None if getattr(self, name) is None
                             else getattr(self, name)[keep] for name in _PLACES})

    def joined(self, other: "ContactSet") -> "ContactSet":
        """Return this set's contacts followed by ``other``'s (the same n_v and n_d)."""
        return ContactSet(phi=np.concatenate([self.phi, other.phi]),
                          J_n=np.vstack([self.J_n, other.J_n]),
                          J_f=np.vstack([self.J_f, other.J_f]),
                          mu=np.concatenate([self.mu, other.mu]),
                          normal_W=np.vstack([self.normal_W, other.normal_W]),
                          tangents_W=np.concatenate([self.tangents_W, other.tangents_W]),
                          point_A_W=np.vstack([self.point_A_W, other.point_A_W]),
                          point_B_W=np.vstack([self.point_B_W, other.point_B_W]),
                          body_a=self.body_a + other.body_a, body_b=self.body_b + other.body_b,
                          **{name: _joined_places(getattr(self, name), getattr(other, name),
                                                  self.n_c, other.n_c, name)
                             for name in _PLACES})

    def pair_keys(self) -> list:
        """Return each contact's geometry pair, (lower index, higher index)."""
        pairs = zip(self.geometry_a.tolist(), self.geometry_b.tolist())
        return [(min(a, b), max(a, b)) for a, b in pairs]

    def offset(self, offsets: dict) -> "ContactSet":
        """Return the contacts with each geometry pair's gaps shifted by ``offsets`` [m]."""
        if not offsets or not self.n_c or self.geometry_a is None:
            return self
        shift = np.array([offsets.get(key, 0.0) for key in self.pair_keys()])
        return replace(self, phi=self.phi + shift) if np.any(shift) else self

    @staticmethod
    def empty(n_v: int, n_d: int) -> "ContactSet":
        """Return a contact set with no contacts."""
        return ContactSet(phi=np.zeros(0), J_n=np.zeros((0, n_v)), J_f=np.zeros((0, n_v)),
                          mu=np.zeros(0), normal_W=np.zeros((0, 3)),
                          tangents_W=np.zeros((0, n_d, 3)), point_A_W=np.zeros((0, 3)),
                          point_B_W=np.zeros((0, 3)), body_a=(), body_b=())


_PLACES = ("geometry_a", "geometry_b", "local_a", "local_b")


def _joined_places(mine, theirs, n_mine: int, n_theirs: int, name: str):
    """Return two sets' place arrays joined (None only if both are None; else -1 / NaN fill)."""
    if mine is None and theirs is None:
        return None
    return np.concatenate([_place_or_unknown(mine, n_mine, name),
                           _place_or_unknown(theirs, n_theirs, name)])


def _place_or_unknown(array, n: int, name: str) -> np.ndarray:
    """Return ``array``, or n unknown places (-1 geometries, NaN points) when it is None."""
    if array is not None:
        return array
    return np.full((n, 3), np.nan) if name.startswith("local") else np.full(n, -1, np.int64)


@numba.njit(cache=True)
def tangent_directions(normals: np.ndarray, n_d: int) -> np.ndarray:
    """
    Return a balanced set of n_d unit tangents for each normal (k x 3) -> (k, n_d, 3).

    The tangents are evenly spaced in the tangent plane, d_j = cos(2 pi j / n_d) t1 +
    sin(2 pi j / n_d) t2, so for even n_d the set is balanced (Pang & Tedrake 2018, eq. 4).
    """
    out = np.empty((normals.shape[0], n_d, 3))
    for i in range(normals.shape[0]):
        nx, ny, nz = normals[i, 0], normals[i, 1], normals[i, 2]
        if abs(nx) < 0.9:                      # t1 = n x e_x
            t1 = np.array([0.0, nz, -ny])
        else:                                  # t1 = n x e_y
            t1 = np.array([-nz, 0.0, nx])
        t1 /= math.sqrt(t1 @ t1)
        t2 = np.array([ny * t1[2] - nz * t1[1], nz * t1[0] - nx * t1[2],
                       nx * t1[1] - ny * t1[0]])
        for j in range(n_d):
            angle = 2.0 * math.pi * j / n_d
            out[i, j] = math.cos(angle) * t1 + math.sin(angle) * t2
    return out


@numba.njit(cache=True)
def planar_tangents(normals: np.ndarray, plane_normal: np.ndarray) -> np.ndarray:
    """
    Return the two tangents +t, -t of each normal that lie in a plane of motion (k, 2, 3).

    For objects that move in the plane whose normal is p, friction acts along
    t = n x p / |n x p|, the one tangent direction in that plane.  A normal
    along p (no component in the plane) gets the tangents of
    :func:`tangent_directions` instead.
    """
    out = tangent_directions(normals, 2)
    px, py, pz = plane_normal[0], plane_normal[1], plane_normal[2]
    for i in range(normals.shape[0]):
        nx, ny, nz = normals[i, 0], normals[i, 1], normals[i, 2]
        t = np.array([ny * pz - nz * py, nz * px - nx * pz, nx * py - ny * px])
        size = math.sqrt(t @ t)
        if size > 1e-9:
            out[i, 0] = t / size
            out[i, 1] = -t / size
    return out


def combine_friction(mu_a: float, mu_b: float) -> float:
    """Drake's rule for two surfaces' friction: 2 mu_a mu_b / (mu_a + mu_b)."""
    total = mu_a + mu_b
    return 0.0 if total <= 0.0 else 2.0 * mu_a * mu_b / total


THIN_BAND = 1e-3    # [m] points this close to a pair's deepest one count as touching
LINE_WIDTH = 1e-3   # [m] a touching patch narrower than this is a line contact


def thin_contacts(contacts: ContactSet, per_pair: int,
                  reach: float = np.inf) -> ContactSet:
    """Return the contacts ``thinned_indices`` keeps (its docstring), in their order."""
    return contacts.take(thinned_indices(contacts, per_pair, reach))


def thinned_indices(contacts: ContactSet, per_pair: int, reach: float = np.inf) -> np.ndarray:
    """
    Return the points kept of each body pair, at most ``per_pair``, spread over its patch.

    The points within THIN_BAND of the pair's deepest (those touching) form
    the patch.  In the plane across the pair's mean normal, the kept points
    are the patch's support points in ``per_pair`` evenly spaced directions
    (the first towards the deepest point, which is kept when it is a corner of
    the patch): with ``per_pair`` 4, a disc keeps a square and a rectangle its
    corners.  A patch narrower than LINE_WIDTH is a line contact (a cylinder's side on a
    pad) and keeps its two ends only.  Farthest-point sampling over the patch
    fills up to ``per_pair``, then the next deepest points within ``reach``
    [m] of the patch's band (the default: any).

    The kept support polygon must hold the patch's centroid strictly inside:
    an object standing on a polygon whose edge passes under its centre of mass
    can tip about that edge into the table, where no kept point sees it.
    Farthest-point sampling kept a disc's diameter and one point beside it,
    and any three corners of a rectangle put the centroid on the diagonal, so
    face contacts need ``per_pair`` >= 4.  The MIQP's size grows with every
    point (6 binaries each with 4 friction directions); it keeps the patch
    only (``reach`` 0) and adds a dropped point back where its solution
    would pass through it (``formulations/miqp_points.py``).
    """
    keep = []
    pairs: dict = {}
    for i, pair in enumerate(zip(contacts.body_a, contacts.body_b)):
        pairs.setdefault(pair, []).append(i)
    for members in pairs.values():
        keep.extend(_thin_pair(contacts, np.array(members), per_pair, reach))
    return np.array(sorted(keep), dtype=int)


def _thin_pair(contacts: ContactSet, members: np.ndarray, per_pair: int,
               reach: float) -> list:
    phi = contacts.phi[members]
    order = members[np.argsort(phi, kind="stable")]
    patch = order[phi[np.argsort(phi, kind="stable")] <= phi.min() + THIN_BAND]
    chosen = _support_points(contacts, patch, per_pair)
    points = contacts.point_A_W
    touching = [int(i) for i in patch if int(i) not in chosen]
    while len(chosen) < per_pair and touching:
        gaps = [min(np.linalg.norm(points[i] - points[c]) for c in chosen) for i in touching]
        chosen.append(touching.pop(int(np.argmax(gaps))))
    reachable = order[contacts.phi[order] <= phi.min() + THIN_BAND + reach]
    rest = [int(i) for i in reachable if int(i) not in chosen]
    return chosen + rest[:per_pair - len(chosen)]


def _support_points(contacts: ContactSet, patch: np.ndarray, k: int) -> list:
    """Return the patch's support points in k evenly spaced directions (thin_contacts)."""
    if len(patch) <= 1:
        return [int(i) for i in patch]
    normal = contacts.normal_W[patch].mean(axis=0)
    normal /= max(np.linalg.norm(normal), 1e-12)
    t1, t2 = _plane_basis(normal)
    offsets = contacts.point_A_W[patch] - contacts.point_A_W[patch].mean(axis=0)
    uv = np.column_stack([offsets @ t1, offsets @ t2])
    axes = np.linalg.svd(uv, full_matrices=False)[2]
    across = uv @ axes[-1]
    if np.ptp(across) < LINE_WIDTH:           # a line contact: its two ends carry it
        along = uv @ axes[0]
        return list(dict.fromkeys([int(patch[np.argmin(along)]), int(patch[np.argmax(along)])]))
    first = int(np.argmin(contacts.phi[patch]))     # the deepest point sets the start
    if uv[first] @ uv[first] < 1e-12:
        first = int(np.argmax(np.einsum("ij,ij->i", uv, uv)))
    theta0 = np.arctan2(uv[first, 1], uv[first, 0])
    chosen: list = []
    for j in range(k):
        theta = theta0 + 2.0 * np.pi * j / k
        best = int(patch[int(np.argmax(uv @ np.array([np.cos(theta), np.sin(theta)])))])
        if best not in chosen:
            chosen.append(best)
    return chosen


def _plane_basis(normal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return two unit vectors spanning the plane across ``normal``."""
    helper = np.array([1.0, 0.0, 0.0]) if abs(normal[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    t1 = np.cross(normal, helper)
    t1 /= np.linalg.norm(t1)
    return t1, np.cross(normal, t1)
