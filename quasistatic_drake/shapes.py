"""
Primitive shapes: signed distance from points, and the feature points of a shape.

Pure numerics (numpy and numba), no Drake.  Everything is expressed in the
shape's own frame G with Drake's conventions: a box is centred with half
extents ``half``; a cylinder and a capsule are centred with their axis along z
and half length ``half_length``; a half space is z <= 0 with outward normal +z.

These functions build the contact manifold (manifold.py): the feature points
of one geometry (box vertices, cylinder rim points, capsule end spheres) are
tested against the exact signed distance field of the other, so a face
resting on a face yields several contact points instead of Drake's single
closest pair.  The distance fields are numba-compiled scalar functions, so the
manifold of a whole scene is computed in one compiled call (manifold.py holds
every compiled function: numba's cache is invalidated per source file only).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from quasistatic_drake.manifold import (  # noqa: F401  (the kinds are re-exported)
    BOX, CAPSULE, CYLINDER, distances, HALFSPACE, OTHER, SPHERE)

KIND_NAMES = ("box", "sphere", "cylinder", "capsule", "halfspace", "other")
RIM_SAMPLES = 8  # points per cylinder rim; the rims' extreme points are added exactly


@dataclass(frozen=True)
class ShapeSpec:
    """
    A primitive shape's kind and size, in metres.

    box: ``half`` = half extents; sphere: ``radius``; cylinder and capsule:
    ``radius`` and ``half_length``; halfspace: nothing; OTHER (mesh, convex,
    ellipsoid): no analytic field; a mesh's or convex's ``hull`` vertices serve
    as its feature points.
    """

    kind: int
    half: np.ndarray = field(default_factory=lambda: np.zeros(3))
    radius: float = 0.0
    half_length: float = 0.0
    hull: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))  # OTHER: hull vertices

    @property
    def has_distance_field(self) -> bool:
        """Whether :func:`signed_distance` supports this shape."""
        return self.kind != OTHER

    @property
    def params(self) -> np.ndarray:
        """Return the shape's size as [hx, hy, hz, radius, half_length] for the kernels."""
        return np.array([*self.half, self.radius, self.half_length], dtype=float)

    @property
    def bounding_radius(self) -> float:
        """Radius of a sphere about the frame origin that holds the shape (inf if unknown)."""
        if self.kind == BOX:
            return float(np.linalg.norm(self.half))
        if self.kind == SPHERE:
            return self.radius
        if self.kind == CYLINDER:
            return float(np.hypot(self.radius, self.half_length))
        if self.kind == CAPSULE:
            return self.radius + self.half_length
        if len(self.hull):
            return float(np.max(np.linalg.norm(self.hull, axis=1)))
        return np.inf


def signed_distance(shape: ShapeSpec, p_G: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """
    Return the signed distance of points p_G (k x 3) and its unit gradient (k x 3).

    The gradient is the outward surface normal at the closest surface point;
    distances are negative inside.
    """
    if not shape.has_distance_field:
        raise ValueError(f"no analytic signed distance for a {KIND_NAMES[shape.kind]}")
    p_G = np.atleast_2d(np.asarray(p_G, dtype=float))
    d = np.empty(len(p_G))
    grad = np.empty_like(p_G)
    distances(shape.kind, shape.params, p_G, d, grad)
    return d, grad


def feature_points(shape: ShapeSpec) -> tuple[np.ndarray, np.ndarray]:
    """
    Return the fixed feature points (k x 3, frame G) of a shape and their radii (k,).

    A feature is a sphere (centre, radius) on the shape's boundary whose signed
    distance to another geometry is ``d(centre) - radius``: box vertices and
    cylinder rim samples have radius 0, capsule end caps and a sphere's centre
    carry the shape's radius, and a mesh or convex shape offers the vertices of
    its convex hull (what Drake's point contact uses of it).  An ellipsoid
    offers nothing: only Drake's closest point covers it.
    """
    if shape.kind == BOX:
        signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
        return signs * shape.half, np.zeros(8)
    if shape.kind == CAPSULE:
        ends = np.array([[0.0, 0.0, shape.half_length], [0.0, 0.0, -shape.half_length]])
        return ends, np.full(2, shape.radius)
    if shape.kind == SPHERE:
        return np.zeros((1, 3)), np.array([shape.radius])
    if shape.kind == CYLINDER:
        angles = np.arange(RIM_SAMPLES) * (2.0 * np.pi / RIM_SAMPLES)
        circle = shape.radius * np.column_stack([np.cos(angles), np.sin(angles)])
        return _on_both_rims(circle, shape.half_length), np.zeros(2 * RIM_SAMPLES)
    return shape.hull, np.zeros(len(shape.hull))


def _on_both_rims(circle: np.ndarray, half_length: float) -> np.ndarray:
    top = np.column_stack([circle, np.full(len(circle), half_length)])
    bottom = np.column_stack([circle, np.full(len(circle), -half_length)])
    return np.vstack([top, bottom])
