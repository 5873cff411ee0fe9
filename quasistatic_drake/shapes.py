"""
Primitive shapes: signed distance from points, and the feature points of a shape.

Pure numerics (numpy and numba), no Drake.  Everything is expressed in the
shape's own frame G with Drake's conventions: a box is centred with half
extents ``half``; a cylinder and a capsule are centred with their axis along z
and half length ``half_length``; a half space is z <= 0 with outward normal +z;
a convex mesh (Drake's Convex, and a Mesh, of which Drake's proximity queries
use the convex hull) is its hull's vertices and outward face planes.

These functions build the contact manifold (manifold.py): the feature points
of one geometry (box vertices, cylinder rim points, capsule end spheres) are
tested against the signed distance field of the other, so a face
resting on a face yields several contact points instead of Drake's single
closest pair.  The distance fields are numba-compiled scalar functions, so the
manifold of a whole scene is computed in one compiled call (manifold.py holds
every compiled function: numba's cache is invalidated per source file only).

The fields of the primitives are exact.  A convex mesh's field is the largest
distance to its face planes, d(p) = max_i (n_i . p - o_i) with gradient n_i of
that plane: exact inside and wherever the closest surface point is on a face;
outside near an edge or a vertex it is smaller than the true distance (it
measures to the farthest face plane), so contacts are seen early, never late.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from quasistatic_drake.manifold import (  # noqa: F401  (the kinds are re-exported)
    BOX, CAPSULE, CONVEX, CYLINDER, distances, HALFSPACE, OTHER, SPHERE)

KIND_NAMES = ("box", "sphere", "cylinder", "capsule", "halfspace", "other", "convex")
RIM_SAMPLES = 8  # points per cylinder rim; the rims' extreme points are added exactly


@dataclass(frozen=True)
class ShapeSpec:
    """
    A primitive shape's kind and size, in metres.

    box: ``half`` = half extents; sphere: ``radius``; cylinder and capsule:
    ``radius`` and ``half_length``; halfspace: nothing; CONVEX (a convex mesh):
    its ``hull`` vertices, which serve as its feature points, its outward face
    ``planes`` (rows [n_x, n_y, n_z, offset], :func:`hull_planes`), which give
    its distance field, and its ``edges`` (pairs of hull vertex indices;
    :func:`convex_spec` builds all three); OTHER (an ellipsoid): no field and
    no feature points.
    """

    kind: int
    half: np.ndarray = field(default_factory=lambda: np.zeros(3))
    radius: float = 0.0
    half_length: float = 0.0
    hull: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))     # hull vertices
    planes: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))   # CONVEX face planes
    edges: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), dtype=np.int64))

    def __post_init__(self):
        """Check that a convex mesh comes with its face planes."""
        if self.kind == CONVEX and len(self.planes) < 4:
            raise ValueError("a convex shape needs at least 4 face planes")

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
    distances are negative inside.  For a convex mesh it is the normal of the
    farthest face plane, and outside near an edge or a vertex the distance is
    the one to that plane, an underestimate (module docstring).
    """
    if not shape.has_distance_field:
        raise ValueError(f"no analytic signed distance for a {KIND_NAMES[shape.kind]}")
    p_G = np.atleast_2d(np.asarray(p_G, dtype=float))
    d = np.empty(len(p_G))
    grad = np.empty_like(p_G)
    distances(shape.kind, shape.params, shape.planes, p_G, d, grad)
    return d, grad


def feature_points(shape: ShapeSpec) -> tuple[np.ndarray, np.ndarray]:
    """
    Return the fixed feature points (k x 3, frame G) of a shape and their radii (k,).

    A feature is a sphere (centre, radius) on the shape's boundary whose signed
    distance to another geometry is ``d(centre) - radius``: box vertices and
    cylinder rim samples have radius 0, capsule end caps and a sphere's centre
    carry the shape's radius, and a convex mesh offers the vertices of its
    convex hull (what Drake's point contact uses of it).  An ellipsoid offers
    nothing: only Drake's closest point covers it.
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


def convex_spec(vertices: np.ndarray, faces) -> ShapeSpec:
    """
    Return the CONVEX ShapeSpec of a convex polyhedron: hull vertices, face planes, edges.

    ``vertices`` (k x 3) and ``faces`` (lists of vertex indices, polygons in
    either winding) describe a convex hull, such as Drake's ``GetConvexHull()``.
    """
    vertices = np.asarray(vertices, dtype=float).reshape(-1, 3)
    planes, plane_of_face = hull_planes(vertices, faces)
    return ShapeSpec(CONVEX, hull=vertices, planes=planes,
                     edges=_hull_edges(faces, plane_of_face))


def hull_planes(vertices: np.ndarray, faces) -> tuple[np.ndarray, list]:
    """
    Return the outward face planes [n_x, n_y, n_z, offset] (m x 4) of a convex polyhedron.

    ``vertices`` (k x 3) and ``faces`` (lists of vertex indices, polygons in
    either winding) describe its convex hull.  Each face's normal comes from
    Newell's method and is turned to point away from the vertices' centroid,
    an interior point; a point p lies on the plane where n . p = offset.  A face
    whose corners all lie on an earlier face's plane (a triangulated quad, say)
    adds no plane, and degenerate faces are skipped.  Also returns each face's
    row in the planes (-1 for a degenerate face).  Raises ValueError if the
    planes do not bound a solid that holds every vertex.
    """
    vertices = np.asarray(vertices, dtype=float)
    centroid = vertices.mean(axis=0)
    scale = max(float(np.max(np.linalg.norm(vertices - centroid, axis=1), initial=0.0)), 1e-12)
    on_plane = 1e-8 * scale     # a face whose corners are this close to a plane is on it
    planes, plane_of_face = [], []
    for face in faces:
        corners = vertices[np.asarray(face, dtype=int)]
        edges = corners - corners.mean(axis=0)
        normal = np.cross(edges, np.roll(edges, -1, axis=0)).sum(axis=0)   # Newell
        norm = np.linalg.norm(normal)
        if len(corners) < 3 or norm <= 1e-12 * scale * scale:
            plane_of_face.append(-1)
            continue
        normal /= norm
        offset = float(np.mean(corners @ normal))
        if offset - normal @ centroid < 0.0:
            normal, offset = -normal, -offset
        same = [k for k, (n, o) in enumerate(planes)
                if normal @ n > 0.999 and np.max(np.abs(corners @ n - o)) <= on_plane]
        if not same:
            same = [len(planes)]
            planes.append((normal, offset))
        plane_of_face.append(same[0])
    out = np.array([[*n, o] for n, o in planes]).reshape(-1, 4)
    if len(out) < 4 or np.max(vertices @ out[:, :3].T - out[:, 3]) > 1e-7 * scale:
        raise ValueError("the faces do not bound a convex solid holding all its vertices")
    return np.ascontiguousarray(out), plane_of_face


def _hull_edges(faces, plane_of_face) -> np.ndarray:
    """Return the hull's edges (e x 2 vertex indices), without those inside a merged face."""
    planes_of_edge: dict = {}
    for face, plane in zip(faces, plane_of_face):
        face = [int(v) for v in face]
        for a, b in zip(face, face[1:] + face[:1]):
            planes_of_edge.setdefault((min(a, b), max(a, b)), set()).add(plane)
    edges = [e for e, planes in planes_of_edge.items() if len(planes) > 1 or -1 in planes]
    return np.array(sorted(edges), dtype=np.int64).reshape(-1, 2)


def face_planes(shape: ShapeSpec) -> np.ndarray:
    """
    Return the outward face planes [n_x, n_y, n_z, offset] (m x 4) of a box or a convex mesh.

    Other shapes have none.  A box's six planes are n . p = half along each axis.
    """
    if shape.kind == CONVEX:
        return shape.planes
    if shape.kind == BOX:
        axes = np.vstack([np.eye(3), -np.eye(3)])
        return np.column_stack([axes, np.concatenate([shape.half, shape.half])])
    return np.zeros((0, 4))


def feature_edges(shape: ShapeSpec) -> np.ndarray:
    """
    Return the feature edges (e x 2 x 3, endpoints in frame G) of a box or a convex mesh.

    Against a box's or a convex mesh's field (pair_manifolds), an edge yields
    the points where it crosses from one face plane's region to another's:
    where a table's top edge passes under a box that overhangs it, or a pad's
    face edge leaves the flat face of a rounded box.  Those corners of a
    face-on-face contact are neither shape's vertex.  Other shapes have none.
    """
    if shape.kind == BOX:
        corners, _ = feature_points(shape)
        pairs = [(i, i | bit) for i in range(8) for bit in (1, 2, 4) if not i & bit]
        return np.array([[corners[a], corners[b]] for a, b in pairs])
    if shape.kind == CONVEX:
        return shape.hull[shape.edges].reshape(-1, 2, 3)
    return np.zeros((0, 2, 3))
