"""Primitive shapes: signed distance from points, and the feature points of a shape.

Pure numpy, no Drake.  Everything is expressed in the shape's own frame G, with
Drake's conventions: a box is centred with half extents ``half``; a cylinder and
a capsule are centred with their axis along z and half length ``half_length``;
a half space is z <= 0 with outward normal +z.

These functions build the contact manifold (see contact_detection.py): the
feature points of one geometry (box vertices, cylinder rim points, capsule end
spheres) are tested against the exact signed distance field of the other, so a
face resting on a face yields several contact points instead of Drake's single
closest pair.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

BOX, SPHERE, CYLINDER, CAPSULE, HALFSPACE, OTHER = (
    "box", "sphere", "cylinder", "capsule", "halfspace", "other")
RIM_SAMPLES = 8  # points per cylinder rim; the rims' extreme points are added exactly


@dataclass(frozen=True)
class ShapeSpec:
    """A primitive shape's kind and size, in metres.

    box: ``half`` = half extents; sphere: ``radius``; cylinder and capsule:
    ``radius`` and ``half_length``; halfspace: nothing; other (ellipsoid, mesh,
    convex): no analytic field, only Drake's closest point is used.
    """

    kind: str
    half: np.ndarray = field(default_factory=lambda: np.zeros(3))
    radius: float = 0.0
    half_length: float = 0.0

    @property
    def has_distance_field(self) -> bool:
        """True when :func:`signed_distance` supports this shape."""
        return self.kind != OTHER


def signed_distance(shape: ShapeSpec, p_G: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return the signed distance of points p_G (k x 3) and its unit gradient (k x 3).

    The gradient is the outward surface normal at the closest surface point;
    distances are negative inside.
    """
    p_G = np.atleast_2d(p_G)
    if shape.kind == BOX:
        return _box_distance(shape.half, p_G)
    if shape.kind == SPHERE:
        d, g = _unit(p_G)
        return d - shape.radius, g
    if shape.kind == CYLINDER:
        return _cylinder_distance(shape.radius, shape.half_length, p_G)
    if shape.kind == CAPSULE:
        axis_point = np.zeros_like(p_G)
        axis_point[:, 2] = np.clip(p_G[:, 2], -shape.half_length, shape.half_length)
        d, g = _unit(p_G - axis_point)
        return d - shape.radius, g
    if shape.kind == HALFSPACE:
        g = np.zeros_like(p_G)
        g[:, 2] = 1.0
        return p_G[:, 2].copy(), g
    raise ValueError(f"no analytic signed distance for shape kind {shape.kind!r}")


def feature_points(shape: ShapeSpec,
                   direction_G: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray]:
    """Return the feature points (k x 3, frame G) of a shape and their radii (k,).

    A feature is a sphere (centre, radius) on the shape's boundary whose signed
    distance to another geometry is ``d(centre) - radius``: box vertices and
    cylinder rim points have radius 0, capsule end caps have the capsule radius.
    ``direction_G`` (unit, frame G) is the direction towards the other geometry;
    for a cylinder it adds each rim's extreme point along it, so a cylinder
    lying on its side gets its exact line contact.  Spheres and shapes without
    features return nothing: Drake's closest point already covers them.
    """
    if shape.kind == BOX:
        return _box_vertices(shape.half), np.zeros(8)
    if shape.kind == CAPSULE:
        ends = np.array([[0.0, 0.0, shape.half_length], [0.0, 0.0, -shape.half_length]])
        return ends, np.full(2, shape.radius)
    if shape.kind == CYLINDER:
        points = _rim_points(shape.radius, shape.half_length, direction_G)
        return points, np.zeros(len(points))
    return np.zeros((0, 3)), np.zeros(0)


def _unit(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Norms of the rows of v and the rows normalised (an arbitrary unit where zero)."""
    norm = np.linalg.norm(v, axis=1)
    g = np.empty_like(v)
    ok = norm > 1e-12
    g[ok] = v[ok] / norm[ok, None]
    g[~ok] = (0.0, 0.0, 1.0)
    return norm, g


def _sign(x: np.ndarray) -> np.ndarray:
    return np.where(x >= 0.0, 1.0, -1.0)


def _box_distance(half: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    excess = np.abs(p) - half                         # > 0 beyond a face
    outside = np.maximum(excess, 0.0)
    out_norm, out_dir = _unit(outside * _sign(p))
    axis = np.argmax(excess, axis=1)                  # nearest face when inside
    rows = np.arange(len(p))
    in_dir = np.zeros_like(p)
    in_dir[rows, axis] = _sign(p[rows, axis])
    inside = excess.max(axis=1) <= 0.0
    d = np.where(inside, excess.max(axis=1), out_norm)
    return d, np.where(inside[:, None], in_dir, out_dir)


def _cylinder_distance(radius: float, half_length: float,
                       p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rho, radial = _unit(np.column_stack([p[:, 0], p[:, 1], np.zeros(len(p))]))
    radial[rho <= 1e-12] = (1.0, 0.0, 0.0)
    w = np.column_stack([rho - radius, np.abs(p[:, 2]) - half_length])
    outside = np.maximum(w, 0.0)
    out_norm = np.linalg.norm(outside, axis=1)
    inside = w.max(axis=1) <= 0.0
    grad_2d = np.where(inside[:, None], np.eye(2)[np.argmax(w, axis=1)],
                       outside / np.maximum(out_norm, 1e-300)[:, None])
    d = np.where(inside, w.max(axis=1), out_norm)
    axial = np.zeros_like(p)
    axial[:, 2] = _sign(p[:, 2])
    return d, grad_2d[:, :1] * radial + grad_2d[:, 1:] * axial


def _box_vertices(half: np.ndarray) -> np.ndarray:
    signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)],
                     dtype=float)
    return signs * half


def _rim_points(radius: float, half_length: float,
                direction_G: Optional[np.ndarray]) -> np.ndarray:
    angles = np.arange(RIM_SAMPLES) * (2.0 * np.pi / RIM_SAMPLES)
    circle = radius * np.column_stack([np.cos(angles), np.sin(angles)])
    if direction_G is not None:
        planar = np.asarray(direction_G, dtype=float)[:2]
        norm = np.linalg.norm(planar)
        if norm > 1e-9:
            circle = np.vstack([circle, radius * planar / norm])
    top = np.column_stack([circle, np.full(len(circle), half_length)])
    bottom = np.column_stack([circle, np.full(len(circle), -half_length)])
    return np.vstack([top, bottom])
