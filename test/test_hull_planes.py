"""
hull_planes and convex_spec against the first, one face at a time, algorithm (the oracle).

The vectorised hull_planes must give what the quadratic loop it replaced gave:
the same planes (within 1e-12) in the same order, the same partition of the
faces into planes, the same degenerate faces, the same edges and the same
ValueError, on cubes, rounded boxes, random hulls, polygons of either winding
and hulls whose coplanarity is not transitive.
"""

import importlib.util
import os

import numpy as np
from pydrake.geometry import Convex
import pytest
from scipy.spatial import ConvexHull, Delaunay

from conftest import REPO_ROOT
from quasistatic_drake import shapes
from quasistatic_drake.model import shape_spec
from quasistatic_drake.shapes import convex_spec, hull_planes

ROUNDED_BOX_OBJ = os.path.join(REPO_ROOT, 'urdf', 'meshes', 'rounded_box.obj')
CUBE_CORNERS = np.array([[x, y, z] for z in (-1, 1) for y in (-1, 1) for x in (-1, 1)], float)
CUBE_TRIANGLES = [(0, 2, 3), (0, 3, 1), (4, 5, 7), (4, 7, 6), (0, 1, 5), (0, 5, 4),
                  (2, 6, 7), (2, 7, 3), (0, 4, 6), (0, 6, 2), (1, 3, 7), (1, 7, 5)]


# ----- the oracle: hull_planes and _hull_edges as they were, one face at a time ---------------

def oracle_hull_planes(vertices, faces):
    """Return the planes and plane_of_face of the original O(faces x planes) loop."""
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


def oracle_hull_edges(faces, plane_of_face):
    """Return the hull's edges as the original dict-of-sets loop found them."""
    planes_of_edge: dict = {}
    for face, plane in zip(faces, plane_of_face):
        face = [int(v) for v in face]
        for a, b in zip(face, face[1:] + face[:1]):
            planes_of_edge.setdefault((min(a, b), max(a, b)), set()).add(plane)
    edges = [e for e, planes in planes_of_edge.items() if len(planes) > 1 or -1 in planes]
    return np.array(sorted(edges), dtype=np.int64).reshape(-1, 2)


def oracle_lies_on(vertices, face, plane_face):
    """Return whether ``face`` lies on ``plane_face``'s plane by the oracle's rule."""
    vertices = np.asarray(vertices, dtype=float)
    centroid = vertices.mean(axis=0)
    scale = float(np.max(np.linalg.norm(vertices - centroid, axis=1)))
    (n, o), (normal, _) = (oracle_face_plane(vertices, f, centroid) for f in (plane_face, face))
    corners = vertices[np.asarray(face)]
    return bool(normal @ n > 0.999 and np.max(np.abs(corners @ n - o)) <= 1e-8 * scale)


def oracle_face_plane(vertices, face, centroid):
    """Return a face's outward unit normal and offset as the oracle computes them."""
    corners = vertices[np.asarray(face, dtype=int)]
    edges = corners - corners.mean(axis=0)
    normal = np.cross(edges, np.roll(edges, -1, axis=0)).sum(axis=0)
    normal /= np.linalg.norm(normal)
    offset = float(np.mean(corners @ normal))
    if offset - normal @ centroid < 0.0:
        normal, offset = -normal, -offset
    return normal, offset


# ----- comparing ------------------------------------------------------------------------------

def partition(plane_of_face):
    """Return the faces grouped by plane, as a set of frozensets, and the degenerate faces."""
    groups: dict = {}
    for face, plane in enumerate(plane_of_face):
        groups.setdefault(int(plane), set()).add(face)
    degenerate = frozenset(groups.pop(-1, ()))
    return {frozenset(g) for g in groups.values()}, degenerate


def assert_agrees(vertices, faces):
    """Check hull_planes and convex_spec against the oracle; return the oracle's answer."""
    planes, plane_of_face = hull_planes(vertices, faces)
    expected, expected_of_face = oracle_hull_planes(vertices, list(faces))
    assert isinstance(plane_of_face, list) and len(plane_of_face) == len(faces)
    assert partition(plane_of_face) == partition(expected_of_face)
    # The same set of planes: the planes of the same groups of faces agree.
    assert planes.shape == expected.shape and planes.flags.c_contiguous
    rows = {plane: face for face, plane in enumerate(plane_of_face) if plane >= 0}
    new = np.array([planes[p] for p in sorted(rows)])
    old = np.array([expected[expected_of_face[rows[p]]] for p in sorted(rows)])
    np.testing.assert_allclose(new, old, rtol=0.0, atol=1e-12)
    # ... and in the same order: plane i is started by the first face not on planes < i.
    assert plane_of_face == expected_of_face
    np.testing.assert_allclose(planes, expected, rtol=0.0, atol=1e-12)
    spec = convex_spec(vertices, faces)
    np.testing.assert_array_equal(spec.edges, oracle_hull_edges(list(faces), expected_of_face))
    np.testing.assert_allclose(spec.planes, expected, rtol=0.0, atol=1e-12)
    return expected, expected_of_face


# ----- meshes ---------------------------------------------------------------------------------

def read_obj(path):
    """Return the vertices (k x 3) and the faces (0-based lists) of an OBJ file."""
    vertices, faces = [], []
    with open(path) as f:
        for line in f:
            words = line.split()
            if words and words[0] == 'v':
                vertices.append([float(w) for w in words[1:4]])
            elif words and words[0] == 'f':
                faces.append([int(w.split('/')[0]) - 1 for w in words[1:]])
    return np.array(vertices), faces


def make_rounded_box():
    """Return the module tools/make_rounded_box.py."""
    path = os.path.join(REPO_ROOT, 'tools', 'make_rounded_box.py')
    spec = importlib.util.spec_from_file_location('make_rounded_box', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def triangulated(faces):
    """Return the faces fanned into triangles."""
    return [[f[0], f[k], f[k + 1]] for f in faces for k in range(1, len(f) - 1)]


def random_hull(seed, points, shape):
    """Return the hull of random points on an ellipsoid or a capsule, rounded as in an OBJ."""
    rng = np.random.default_rng(seed)
    unit = rng.normal(size=(points, 3))
    unit /= np.linalg.norm(unit, axis=1)[:, None]
    if shape == 'ellipsoid':
        cloud = unit * [0.05, 0.04, 0.03]
    else:                                   # a capsule: half its points on the cylinder
        cloud = 0.05 * unit
        cloud[:, 2] += np.where(unit[:, 2] >= 0.0, 0.1, -0.1)
        side = rng.random(points) < 0.5
        angle = rng.uniform(0.0, 2.0 * np.pi, points)
        cloud[side] = np.column_stack([0.05 * np.cos(angle), 0.05 * np.sin(angle),
                                       rng.uniform(-0.1, 0.1, points)])[side]
    cloud = np.round(cloud, 9)
    return cloud, ConvexHull(cloud).simplices          # scipy's winding is mixed


def tessellated_hull(seed, facets_points=12, per_facet=60):
    """
    Return a random convex hull whose every facet is cut into many coplanar triangles.

    Each facet of the hull of ``facets_points`` random points gets ``per_facet``
    random points inside and their Delaunay triangulation, whose windings mix.
    """
    rng = np.random.default_rng(seed)
    unit = rng.normal(size=(facets_points, 3))
    corners = unit / np.linalg.norm(unit, axis=1)[:, None]
    hull = ConvexHull(corners)
    vertices, faces = list(corners), []
    for simplex in hull.simplices:
        weights = rng.dirichlet(np.ones(3), size=per_facet)
        first = len(vertices)
        vertices.extend(weights @ corners[simplex])
        ids = [*simplex, *range(first, first + per_facet)]
        flat = np.vstack([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0], weights[:, :2]])
        faces += [[ids[i] for i in t] for t in Delaunay(flat).simplices]
    return np.array(vertices), faces, len(hull.simplices)


def staircase():
    """
    Return a box whose top is 12 strips on a slightly curved roof: coplanarity not transitive.

    The roof is z = 1 - c x^2.  A strip lies on its neighbour's plane (its far
    corners are 0.6 of the tolerance away) but not on the plane of the strip
    two over (1.8 of it): the loop merges strips in pairs, and a third strip
    lies on the plane of the second, which starts none.  The sides in y are
    polygons of 15 corners.
    """
    strips = 12
    x = np.linspace(-1.0, 1.0, strips + 1)
    width = x[1] - x[0]
    base = 2 * len(x)
    bottom = [[x0, y, -1.0] for x0 in (-1.0, 1.0) for y in (-1.0, 1.0)]
    c = 0.0
    for _ in range(2):                      # the tolerance, 1e-8 times the hull's size
        roof = [[xi, y, 1.0 - c * xi ** 2] for xi in x for y in (-1.0, 1.0)]   # 2 i + (y > 0)
        vertices = np.array(roof + bottom)
        scale = np.max(np.linalg.norm(vertices - vertices.mean(axis=0), axis=1))
        c = 0.6 * 1e-8 * scale / (2.0 * width ** 2)
    faces = []
    for i in range(strips):
        a, b, c_, d = 2 * i, 2 * i + 2, 2 * i + 3, 2 * i + 1
        faces += [[a, b, c_], [a, c_, d]]
    faces += [[base, base + 2, base + 3], [base, base + 3, base + 1]]               # bottom
    faces += [[base, base + 1, 1, 0], [base + 2, 2 * strips, 2 * strips + 1, base + 3]]
    faces += [[base, 0] + list(range(2, 2 * strips + 1, 2)) + [base + 2]]          # y = -1
    faces += [[base + 1, base + 3] + list(range(2 * strips + 1, 0, -2))]           # y = +1
    return vertices, faces


# ----- the tests ------------------------------------------------------------------------------

@pytest.mark.parametrize('flip', [(), (1, 4, 9), tuple(range(0, 12, 2))],
                         ids=['outwards', 'three_flipped', 'every_other_flipped'])
def test_cube_of_twelve_triangles_has_six_planes(flip):
    """Check a cube given as 12 triangles, in either winding, off the origin: 6 planes."""
    faces = [t[::-1] if k in flip else t for k, t in enumerate(CUBE_TRIANGLES)]
    planes, plane_of_face = assert_agrees(0.5 * CUBE_CORNERS + [1.0, 2.0, 3.0], faces)
    assert len(planes) == 6
    assert plane_of_face == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]


def test_rounded_box_obj():
    """Check the rounded box of urdf/ (triangles and quads), as written and triangulated."""
    vertices, faces = read_obj(ROUNDED_BOX_OBJ)
    planes, _ = assert_agrees(vertices, faces)
    assert len(planes) == len(faces)                       # its faces are not coplanar
    merged, plane_of_face = assert_agrees(vertices, triangulated(faces))
    np.testing.assert_allclose(merged, planes, atol=1e-12)  # each quad's two halves merge
    assert len(set(plane_of_face)) == len(faces)


@pytest.mark.parametrize('segments', [1, 2, 6])
def test_rounded_boxes_of_make_rounded_box(segments):
    """Check rounded boxes of several arc resolutions from tools/make_rounded_box.py."""
    vertices, faces = make_rounded_box().rounded_box([0.06, 0.05, 0.12], 0.01, segments)
    planes, _ = assert_agrees(np.array(vertices), faces)
    assert len(planes) == len(faces)
    assert len(assert_agrees(np.array(vertices), triangulated(faces))[0]) == len(faces)


@pytest.mark.parametrize('points, seed', [(27, 1), (102, 2), (502, 3), (1502, 4)],
                         ids=['50_faces', '200_faces', '1000_faces', '3000_faces'])
@pytest.mark.parametrize('shape', ['ellipsoid', 'capsule'])
def test_random_convex_hulls(points, seed, shape):
    """Check random hulls of 50 to 3000 triangles of mixed winding, as arrays and as lists."""
    vertices, simplices = random_hull(seed, points, shape)
    assert len(simplices) == 2 * points - 4
    assert_agrees(vertices, simplices)
    assert_agrees(vertices, simplices.tolist())


def test_random_hulls_with_coplanar_triangles_merge(monkeypatch):
    """Check hulls with ~120 coplanar triangles a facet, where the faces are split in halves."""
    calls = []
    join = shapes._join
    monkeypatch.setattr(shapes, '_join', lambda *args: calls.append(1) or join(*args))
    for seed in range(3):
        vertices, faces, facets = tessellated_hull(seed)
        planes, _ = assert_agrees(vertices, faces)
        assert len(planes) == facets and len(faces) > 20 * facets
    assert calls, 'the halving of crowded faces was not exercised'


def test_polygons_with_mixed_winding():
    """Check polygons of 3 to 64 corners, some reversed: Drake's hulls and the rounded box."""
    rng = np.random.default_rng(8)
    vertices, faces = read_obj(ROUNDED_BOX_OBJ)
    flipped = [f[::-1] if rng.random() < 0.5 else f for f in faces]
    assert_agrees(vertices, flipped)
    angle = np.arange(64) * 2.0 * np.pi / 64
    ring = np.column_stack([np.cos(angle), 0.7 * np.sin(angle), np.zeros(64)])
    prism = np.vstack([ring + [0.0, 0.0, 0.5], ring - [0.0, 0.0, 0.5]])
    sides = [[k, (k + 1) % 64, 64 + (k + 1) % 64, 64 + k] for k in range(64)]
    faces = [list(range(64)), list(range(127, 63, -1))] + sides
    for k in range(0, len(faces), 3):
        faces[k] = faces[k][::-1]
    planes, _ = assert_agrees(prism, faces)
    assert len(planes) == 66
    assert_agrees(prism, [np.array(f) for f in faces])        # faces as arrays


def test_drake_hull_polygons(tmp_path):
    """Check Drake's GetConvexHull polygons of an OBJ, reversed or not, and shape_spec."""
    vertices, simplices = random_hull(5, 400, 'capsule')
    obj = tmp_path / 'capsule.obj'
    obj.write_text(''.join('v %.9f %.9f %.9f\n' % tuple(v) for v in vertices)
                   + ''.join('f %d %d %d\n' % tuple(s + 1) for s in simplices))
    for path in (str(obj), ROUNDED_BOX_OBJ):
        hull = Convex(path).GetConvexHull()
        points = np.array([hull.vertex(i) for i in range(hull.num_vertices())])
        faces = [[hull.element(f).vertex(j) for j in range(hull.element(f).num_vertices())]
                 for f in range(hull.num_faces())]
        planes, _ = assert_agrees(points, faces)
        assert_agrees(points, [f[::-1] for f in faces])
        np.testing.assert_allclose(shape_spec(Convex(path)).planes, planes, atol=1e-12)


def test_degenerate_faces_are_skipped():
    """Check faces of 1 and 2 corners, repeated, collinear and nearly collinear corners: -1."""
    # 8: the middle of edge 0-1; 9: 1e-13 inside the middle of edge 2-3, a sliver's tip.
    vertices = np.vstack([CUBE_CORNERS, [[0.0, -1.0, -1.0], [0.0, 1.0 - 1e-13, -1.0 + 1e-13]]])
    degenerate = [[3], [0, 1], [0, 0, 1], [0, 8, 1], [2, 2, 2, 2], [2, 9, 3]]
    faces = CUBE_TRIANGLES[:5] + degenerate + CUBE_TRIANGLES[5:]
    planes, plane_of_face = assert_agrees(vertices, faces)
    assert len(planes) == 6
    assert [k for k, p in enumerate(plane_of_face) if p < 0] == list(range(5, 11))
    edges = {tuple(e) for e in convex_spec(vertices, faces).edges}
    assert {(3, 3), (0, 1), (0, 0), (0, 8), (1, 8), (2, 2), (2, 9), (3, 9)} <= edges


@pytest.mark.parametrize('case', ['missing_faces', 'vertex_outside', 'too_few_planes',
                                  'all_degenerate', 'no_faces'])
def test_faces_that_bound_no_solid_raise_value_error(case):
    """Check the ValueError when the planes do not bound a solid holding every vertex."""
    vertices, faces = CUBE_CORNERS, CUBE_TRIANGLES
    if case == 'missing_faces':
        faces = CUBE_TRIANGLES[:6]
    elif case == 'vertex_outside':
        vertices = np.vstack([CUBE_CORNERS, [[0.0, 0.0, 1.0 + 1e-6]]])
    elif case == 'too_few_planes':
        faces = CUBE_TRIANGLES[:6] * 3
    elif case == 'all_degenerate':
        faces = [[0, 1], [0, 0, 1], [5]]
    else:
        faces = []
    with pytest.raises(ValueError, match='do not bound a convex solid'):
        oracle_hull_planes(vertices, faces)
    with pytest.raises(ValueError, match='do not bound a convex solid'):
        hull_planes(vertices, faces)
    with pytest.raises(ValueError, match='do not bound a convex solid'):
        convex_spec(vertices, faces)


def test_vertex_just_inside_the_tolerance_is_accepted():
    """Check that a vertex 1e-8 times the size outside a face is still held (the oracle too)."""
    scale = np.sqrt(3.0)
    vertices = np.vstack([CUBE_CORNERS, [[0.0, 0.0, 1.0 + 1e-8 * scale]]])
    assert len(assert_agrees(vertices, CUBE_TRIANGLES)[0]) == 6


def test_coplanarity_that_is_not_transitive():
    """Check the roof of strips where a face lies on the plane of a face that starts none."""
    vertices, faces = staircase()
    planes, plane_of_face = assert_agrees(vertices, faces)
    assert len(planes) == 6 + 1 + 4         # the roof's strips merge in pairs
    assert plane_of_face[:8] == [0, 0, 0, 0, 1, 1, 1, 1]
    # Strip 2's first triangle (face 4) lies on strip 1's plane (face 2), which joined
    # strip 0's (face 0), and not on face 0's plane: the greedy order decides.
    assert oracle_lies_on(vertices, faces[4], faces[2])
    assert not oracle_lies_on(vertices, faces[4], faces[0])
    assert plane_of_face[2] == plane_of_face[0] != plane_of_face[4]


def sliver_cube(tilt, rotation):
    """
    Return a cube whose top is 4 triangles about a point 1e-8 above it, one a sliver.

    The sliver (face 1) is the triangle of the top's edge y = -1 and that
    point, 1e-8 / tilt inside the edge: its normal is ``tilt`` radians off the
    top's, and its corners are within the tolerance of the top's plane, which
    face 0 starts.  The cube is turned by ``rotation`` (3 x 3).
    """
    m = [0.0, -1.0 + 1e-8 / np.tan(tilt), 1.0 + 1e-8]
    vertices = np.vstack([CUBE_CORNERS, [m]]) @ np.asarray(rotation).T
    top = [[8, 7, 6], [4, 5, 8], [4, 8, 6], [8, 5, 7]]         # 4 5 7 6: the top, z = 1
    sides = [f for f in CUBE_TRIANGLES if not set(f) <= {4, 5, 6, 7}]
    return vertices, top + sides


@pytest.mark.parametrize('tilt, joins', [(0.04, True), (0.05, False)],
                         ids=['within_0.999', 'beyond_0.999'])
def test_slivers_tilted_near_the_normal_threshold(tilt, joins):
    """Check a sliver whose normal is 0.04 or 0.05 rad off its plane's, turned many ways."""
    angle = -0.01        # the top's normal has y 0.01, the sliver's -0.03: other grid cubes
    turns = [np.eye(3), [[1.0, 0.0, 0.0], [0.0, np.cos(angle), -np.sin(angle)],
                         [0.0, np.sin(angle), np.cos(angle)]]]
    turns += [np.linalg.qr(np.random.default_rng(seed).normal(size=(3, 3)))[0]
              for seed in range(12)]
    for rotation in turns:
        vertices, faces = sliver_cube(tilt, rotation)
        planes, plane_of_face = assert_agrees(vertices, faces)
        assert (plane_of_face[1] == plane_of_face[0]) == joins
        assert len(planes) == 7 - joins


def test_the_plane_order_and_the_edges_follow_the_faces():
    """Check that reordering the faces reorders the planes as the loop did."""
    vertices, simplices = random_hull(6, 200, 'capsule')
    order = np.random.default_rng(6).permutation(len(simplices))
    planes, _ = assert_agrees(vertices, simplices)
    shuffled, _ = assert_agrees(vertices, simplices[order])
    assert not np.allclose(planes, shuffled)
    np.testing.assert_array_equal(convex_spec(vertices, simplices).edges,
                                  convex_spec(vertices, simplices[order]).edges)
