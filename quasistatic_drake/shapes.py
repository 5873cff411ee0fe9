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
import itertools
from typing import NamedTuple

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
    """Return the circle's points (k x 2) on the top rim, then on the bottom one (2k x 3)."""
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
    corners, sizes = _flat_faces(faces)
    planes, plane_of_face = _hull_planes(vertices, corners, sizes)
    return ShapeSpec(CONVEX, hull=vertices, planes=planes,
                     edges=_hull_edges(corners, sizes, plane_of_face))


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

    The planes come in the order of the faces that start them: plane i is the
    plane of the first face not on planes 0 to i - 1, and a face joins the
    first plane it lies on (normals within ``PLANE_COS`` and every corner
    within ``ON_PLANE`` times the hull's size of that plane).  The work is
    vectorised: only faces with nearly the same normal are compared.
    """
    vertices = np.asarray(vertices, dtype=float)
    corners, sizes = _flat_faces(faces)
    planes, plane_of_face = _hull_planes(vertices, corners, sizes)
    return planes, plane_of_face.tolist()


PLANE_COS = 0.999   # faces whose unit normals' dot product exceeds this may share a plane
ON_PLANE = 1e-8     # ... if their corners lie this close (times the hull's size) to it
INSIDE = 1e-7       # how far (times the hull's size) a vertex may lie outside a plane
NORMAL_RADIUS = np.sqrt(2.0 * (1.0 - PLANE_COS)) * (1.0 + 1e-6)   # |n - m| for PLANE_COS
SPLIT = 32          # split the faces when they have more neighbours than this each
_NEIGHBOURS = np.array(list(itertools.product((-1, 0, 1), repeat=3)))   # grid cubes


def _flat_faces(faces) -> tuple[np.ndarray, np.ndarray]:
    """Return the faces' vertex indices end to end (int64) and each face's number of them."""
    if isinstance(faces, np.ndarray) and faces.ndim == 2:
        return (faces.astype(np.int64).ravel(),
                np.full(len(faces), faces.shape[1], dtype=np.int64))
    faces = list(faces)
    sizes = np.fromiter(map(len, faces), dtype=np.int64, count=len(faces))
    corners = np.fromiter(itertools.chain.from_iterable(faces), dtype=np.int64,
                          count=int(sizes.sum()))
    return corners, sizes


def _hull_planes(vertices: np.ndarray, corners: np.ndarray,
                 sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return :func:`hull_planes` of faces given as :func:`_flat_faces`; plane_of_face as int64."""
    centroid = vertices.mean(axis=0)
    scale = max(float(np.max(np.linalg.norm(vertices - centroid, axis=1), initial=0.0)), 1e-12)
    normals, offsets = _face_normals(vertices, corners, sizes, centroid, scale)
    faces = _Faces(vertices, corners, sizes, np.cumsum(sizes) - sizes, normals, offsets,
                   ON_PLANE * scale)
    owner = _plane_owners(faces, np.flatnonzero(~np.isnan(offsets)))
    is_first = owner == np.arange(len(sizes))
    row = np.cumsum(is_first) - 1
    plane_of_face = np.where(owner >= 0, row[owner], -1)
    planes = np.ascontiguousarray(np.column_stack([normals[is_first], offsets[is_first]]))
    if len(planes) < 4 or _max_excess(vertices, planes) > INSIDE * scale:
        raise ValueError("the faces do not bound a convex solid holding all its vertices")
    return planes, plane_of_face


def _face_normals(vertices, corners, sizes, centroid, scale) -> tuple[np.ndarray, np.ndarray]:
    """
    Return each face's outward unit normal (f x 3) and offset (f,), Newell's method.

    Faces of the same number of corners are done together.  A degenerate face
    (fewer than 3 corners, or a vanishing normal) has the offset NaN.
    """
    normals = np.zeros((len(sizes), 3))
    offsets = np.full(len(sizes), np.nan)
    starts = np.cumsum(sizes) - sizes
    for size in np.unique(sizes[sizes >= 3]):
        faces = np.flatnonzero(sizes == size)
        points = vertices[corners[starts[faces, None] + np.arange(size)]]    # (g, size, 3)
        edges = points - points.mean(axis=1, keepdims=True)
        normal = np.cross(edges, np.roll(edges, -1, axis=1)).sum(axis=1)
        norm = np.linalg.norm(normal, axis=1)
        keep = norm > 1e-12 * scale * scale
        faces, points, normal = faces[keep], points[keep], normal[keep] / norm[keep, None]
        offset = np.einsum('fkc,fc->fk', points, normal).mean(axis=1)
        flip = offset - normal @ centroid < 0.0
        normal[flip], offset[flip] = -normal[flip], -offset[flip]
        normals[faces], offsets[faces] = normal, offset
    return normals, offsets


class _Faces(NamedTuple):
    """The faces of a hull, flat (:func:`_flat_faces`), with their planes."""

    vertices: np.ndarray   # (k, 3)
    corners: np.ndarray    # the faces' vertex indices end to end
    sizes: np.ndarray      # each face's number of corners
    starts: np.ndarray     # where each face's corners start in ``corners``
    normals: np.ndarray    # (f, 3) outward unit normals (zero for a degenerate face)
    offsets: np.ndarray    # (f,) offsets (NaN for a degenerate face)
    on_plane: float        # how close to a plane a face's corners must be to lie on it


def _plane_owners(faces: _Faces, valid: np.ndarray) -> np.ndarray:
    """
    Return for each face the face that starts its plane (itself if it starts one; -1: none).

    The greedy rule of :func:`hull_planes`: in order, a face joins the first
    plane it lies on, or else starts a plane.  Only faces whose normals fall
    in the same or neighbouring cubes of a grid (:func:`_near`) are compared.
    """
    owner = np.full(len(faces.sizes), -1, dtype=np.int64)
    _settle(faces, valid, owner)
    return owner


def _settle(faces: _Faces, block: np.ndarray, owner: np.ndarray) -> np.ndarray:
    """
    Set ``owner`` of the faces ``block`` (ascending), which lie on no earlier plane.

    Return the faces of ``block`` that start a plane.  When many faces have
    nearly the same normal (a triangulated flat face), comparing them all would
    take time quadratic in their number: then the first half is settled, the
    second half compared with its planes and the rest settled in turn.
    """
    cubes = _cubes(faces.normals[block])
    near = _near(cubes, cubes)
    if len(block) > 2 * SPLIT and near[1].sum() > 2 * SPLIT * len(block):
        half = len(block) // 2
        planes = _settle(faces, block[:half], owner)
        rest = _join(faces, block[half:], planes, owner)
        return np.concatenate([planes, _settle(faces, rest, owner)])
    earlier, later = _pairs(*near)
    earlier, later = earlier[earlier < later], later[earlier < later]
    on = _lies_on(faces, block[later], block[earlier])
    owner[block] = block[_first_planes(len(block), earlier[on], later[on])]
    return block[owner[block] == block]


def _join(faces: _Faces, block: np.ndarray, planes: np.ndarray, owner: np.ndarray) -> np.ndarray:
    """Set ``owner`` of the faces ``block`` that lie on a face of ``planes`` (all earlier)."""
    face, plane = _pairs(*_near(_cubes(faces.normals[block]), _cubes(faces.normals[planes])))
    plane = planes[plane]
    on = _lies_on(faces, block[face], plane)
    first = np.full(len(block), len(faces.sizes), dtype=np.int64)
    np.minimum.at(first, face[on], plane[on])          # the first plane it lies on
    joins = first < len(faces.sizes)
    owner[block[joins]] = first[joins]
    return block[~joins]


def _cubes(normals: np.ndarray) -> np.ndarray:
    """Return the grid cube (k x 3 indices, cubes NORMAL_RADIUS wide) of each unit normal."""
    return np.floor(normals / NORMAL_RADIUS).astype(np.int64)


def _near(cubes: np.ndarray, others: np.ndarray) -> tuple:
    """
    Return where each of ``cubes`` finds ``others`` in the same or a neighbouring cube.

    Normals close enough to share a plane are in such cubes.  The answer is
    (start, count, order): in ``order``, the others sorted by cube, those in
    cube ``cubes[i] + _NEIGHBOURS[d]`` are ``count[d, i]`` from ``start[d, i]`` on.
    """
    if len(cubes) == 0 or len(others) == 0:
        empty = np.zeros((len(_NEIGHBOURS), len(cubes)), dtype=np.int64)
        return empty, empty, np.zeros(0, dtype=np.int64)
    low = np.minimum(cubes.min(axis=0), others.min(axis=0)) - 1    # a margin of one cube
    shape = np.maximum(cubes.max(axis=0), others.max(axis=0)) + 2 - low
    steps = np.array([shape[1] * shape[2], shape[2], 1])
    where = (others - low) @ steps
    count = np.bincount(where, minlength=int(np.prod(shape)))
    start = np.cumsum(count) - count
    targets = ((cubes - low) @ steps)[None, :] + (_NEIGHBOURS @ steps)[:, None]
    return start[targets], count[targets], np.argsort(where, kind='stable')


def _pairs(start: np.ndarray, count: np.ndarray, order: np.ndarray) -> tuple:
    """Return the index pairs (into cubes, into others) that :func:`_near` found."""
    count = count.ravel()
    row = np.repeat(np.arange(len(count)), count)
    first = np.cumsum(count) - count
    other = order[start.ravel()[row] + np.arange(len(row)) - first[row]]
    return row % start.shape[1], other


def _lies_on(faces: _Faces, face: np.ndarray, plane: np.ndarray) -> np.ndarray:
    """
    Return whether each ``face`` lies on the plane of the face ``plane`` (element-wise).

    That is: their normals' dot product exceeds PLANE_COS and every corner of
    ``face`` is within ``on_plane`` of the plane.
    """
    close = np.einsum('pc,pc->p', faces.normals[face], faces.normals[plane]) > PLANE_COS
    face, plane = face[close], plane[close]
    if len(face) == 0:
        return close
    # Every corner of each face against its plane, the pairs end to end.
    counts = faces.sizes[face]
    pair = np.repeat(np.arange(len(face)), counts)
    first = np.cumsum(counts) - counts
    index = faces.starts[face][pair] + np.arange(len(pair)) - first[pair]
    height = np.einsum('pc,pc->p', faces.vertices[faces.corners[index]],
                       faces.normals[plane][pair]) - faces.offsets[plane][pair]
    close[close] = np.maximum.reduceat(np.abs(height), first) <= faces.on_plane
    return close


def _first_planes(n: int, earlier: np.ndarray, later: np.ndarray) -> np.ndarray:
    """
    Return for each of n faces the face that starts its plane, in the greedy order.

    ``later[i]`` lies on the plane of ``earlier[i]`` (< later[i]); the faces
    lie on no earlier plane.  A face starts a plane unless it lies on the
    plane of an earlier face that starts one, and then it joins the first
    such.  Usually the earliest face a face lies on starts a plane itself
    (lying on a plane is transitive); the other faces are settled one by one.
    """
    owner = np.arange(n)
    first = np.full(n, n, dtype=np.int64)
    np.minimum.at(first, later, earlier)
    joined = np.flatnonzero(first < n)
    starts = np.ones(n, dtype=bool)
    starts[joined] = False
    settled = starts[first[joined]]     # the earliest face it lies on starts a plane
    owner[joined[settled]] = first[joined[settled]]
    unsettled = joined[~settled]
    if len(unsettled):
        pick = np.isin(later, unsettled)
        order = np.lexsort((earlier[pick], later[pick]))
        candidates = np.split(earlier[pick][order],
                              np.flatnonzero(np.diff(later[pick][order])) + 1)
        for face, on in zip(unsettled, candidates):      # unsettled is sorted, as later is
            plane = next((f for f in on if starts[f]), None)
            if plane is None:
                starts[face] = True
            else:
                owner[face] = plane
    return owner


def _max_excess(vertices: np.ndarray, planes: np.ndarray, block: int = 1024) -> float:
    """Return the largest n . v - offset over the vertices v and the planes, in blocks."""
    homogeneous = np.column_stack([vertices, np.full(len(vertices), -1.0)])   # [v, -1]
    return max(float(np.max(homogeneous @ planes[k:k + block].T))
               for k in range(0, len(planes), block))


def _hull_edges(corners: np.ndarray, sizes: np.ndarray, plane_of_face) -> np.ndarray:
    """
    Return the hull's edges (e x 2 vertex indices, sorted), without those inside a merged face.

    An edge is kept if the faces around it lie on more than one plane, or if
    one of them is degenerate.
    """
    starts = np.cumsum(sizes) - sizes
    following = np.arange(1, len(corners) + 1)
    ends = starts + sizes - 1
    following[ends[sizes > 0]] = starts[sizes > 0]
    a, b = corners, corners[following]
    low, high = np.minimum(a, b), np.maximum(a, b)
    plane = np.repeat(np.asarray(plane_of_face, dtype=np.int64), sizes)
    order = np.lexsort((plane, high, low))
    low, high, plane = low[order], high[order], plane[order]
    new = np.ones(len(low), dtype=bool)
    new[1:] = (low[1:] != low[:-1]) | (high[1:] != high[:-1])
    first = np.flatnonzero(new)
    last = np.append(first[1:], len(low)) - 1
    keep = (plane[first] != plane[last]) | (plane[first] == -1)
    return np.column_stack([low[first][keep], high[first][keep]]).astype(np.int64).reshape(-1, 2)


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
