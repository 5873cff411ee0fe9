"""
Compiled kernels that turn geometry into contact rows: the manifold and the Jacobians.

Pure numerics (numba), no Drake; contact_detection.py feeds them from SceneGraph
and MultibodyPlant.  Every compiled function of the contact pipeline lives in
this one file on purpose: numba's on-disk cache is invalidated per source file,
so a compiled caller in one file would keep a stale copy of a callee changed in
another.  shapes.py describes the shapes these distance fields measure.

Conventions follow Pang & Tedrake 2018, Sec. III-B: the normal n of a contact points from
body A to body B, and the rows are

    J_n,i  = n_i^T (J_B(p_B) - J_A(p_A))          (eq. 3)
    J_f,ij = d_ij^T (J_B(p_B) - J_A(p_A))         (eq. 4)

where J_X(p) is the translational Jacobian of the point p fixed to body X.

A *block* tests the feature points of one geometry of a pair (box vertices,
cylinder rim samples, capsule end caps, convex hull vertices;
shapes.feature_points) against the distance field of the other.  Geometry
frames are passed once per step as stacked rotations R (g x 3 x 3) and origins
o (g x 3), indexed by slot.

A shape is its kind and 5 floats, [hx, hy, hz, radius, half_length].  A convex
mesh (CONVEX) also has face planes: rows [n_x, n_y, n_z, offset] of one global
planes array (m x 4), of which a field geometry's block names the range
(start, count).  Its field is d(p) = max_i (n_i . p - offset_i) (_convex).
"""

from __future__ import annotations

import math

import numba
import numpy as np

# Shape kinds, as small integers so that compiled kernels can switch on them.
BOX, SPHERE, CYLINDER, CAPSULE, HALFSPACE, OTHER, CONVEX = range(7)
MERGE_DISTANCE = 1e-3      # [m] points of one pair closer than this are one contact
MERGE_COS = math.cos(math.radians(5.0))
FACE_PHI_TOLERANCE = 1e-6  # [m] feature points this close to the closest pair's phi share its face
# [m] a point this close outside a box or cylinder takes the nearest face's normal: the
# direction of a sub-nanometre offset is round-off, not geometry.
_ON_SURFACE = 1e-9
# [m] in the manifold, a BOX or CONVEX field's face planes this close to the point's own
# distance (or the pair's penetration) may give a contact's normal (_polyhedron_towards): a
# pad's corner on a box's edge takes the face the pad presses on.
TIE_BAND = 1e-3
# [m] two boxes' centres this close along their axis of least overlap are centred on each
# other: either way out is as deep, and the commanded motion picks it (_box_box_sat).
CENTRED = 1e-9


@numba.njit(cache=True)
def distances(kind, params, planes, points, d, grad):
    """Write the signed distances and gradients of points (k x 3) to one shape."""
    for k in range(points.shape[0]):
        d[k] = point_signed_distance(kind, params, planes, points[k, 0], points[k, 1],
                                     points[k, 2], grad[k])


@numba.njit(cache=True)
def point_signed_distance(kind, params, planes, x, y, z, grad):
    """
    Signed distance of point (x, y, z) to a shape; writes the unit gradient to grad.

    ``planes`` (m x 4) are the shape's own face planes if it is CONVEX (else unused).
    """
    if kind == BOX:
        return _box(params[0], params[1], params[2], x, y, z, grad)
    if kind == SPHERE:
        return _unit(x, y, z, grad) - params[3]
    if kind == CYLINDER:
        return _cylinder(params[3], params[4], x, y, z, grad)
    if kind == CAPSULE:
        return _unit(x, y, z - min(max(z, -params[4]), params[4]), grad) - params[3]
    if kind == CONVEX:
        return _convex(planes, x, y, z, grad)
    grad[0], grad[1], grad[2] = 0.0, 0.0, 1.0      # HALFSPACE
    return z


@numba.njit(cache=True)
def _unit(x, y, z, out):
    """Write (x, y, z) normalised to out (+z where it is zero) and return its norm."""
    norm = math.sqrt(x * x + y * y + z * z)
    if norm <= 1e-12:
        out[0], out[1], out[2] = 0.0, 0.0, 1.0
    else:
        out[0], out[1], out[2] = x / norm, y / norm, z / norm
    return norm


@numba.njit(cache=True)
def _box(hx, hy, hz, x, y, z, grad):
    ex, ey, ez = abs(x) - hx, abs(y) - hy, abs(z) - hz     # > 0 beyond a face
    sx, sy, sz = math.copysign(1.0, x), math.copysign(1.0, y), math.copysign(1.0, z)
    if max(ex, ey, ez) > _ON_SURFACE:
        return _unit(sx * max(ex, 0.0), sy * max(ey, 0.0), sz * max(ez, 0.0), grad)
    grad[0], grad[1], grad[2] = 0.0, 0.0, 0.0      # inside or on the surface: nearest face
    if ex >= ey and ex >= ez:
        grad[0] = sx
        return ex
    if ey >= ez:
        grad[1] = sy
        return ey
    grad[2] = sz
    return ez


@numba.njit(cache=True)
def _convex(planes, x, y, z, grad):
    """
    Return max_i (n_i . p - offset_i) over a convex polyhedron's face planes; grad = n_i.

    Exact inside (there the nearest face is the deepest plane's) and outside
    wherever the closest surface point lies on a face.  Outside near an edge or
    a vertex it is the distance to the farthest face plane, which is less than
    the true distance (beside an edge at least cos(half the angle between the
    two faces' normals) times it): contact detection sees such a point a little
    early, never late.  The first of equally far planes gives the gradient.
    """
    best = -np.inf
    k = 0
    for i in range(planes.shape[0]):
        d = _plane_distance(planes, i, x, y, z)
        if d > best:
            best, k = d, i
    grad[0], grad[1], grad[2] = planes[k, 0], planes[k, 1], planes[k, 2]
    return best


@numba.njit(cache=True)
def _plane_distance(planes, i, x, y, z):
    """Return n_i . p - o_i, the signed distance of p = (x, y, z) from plane i."""
    return planes[i, 0] * x + planes[i, 1] * y + planes[i, 2] * z - planes[i, 3]


@numba.njit(cache=True)
def _polyhedron_towards(planes, x, y, z, prefer, depth, grad):
    """
    Return a BOX or CONVEX field's distance at a point, with the normal a contact there takes.

    ``planes`` are the field's face planes; ``prefer`` is the unit direction
    from the field towards the other geometry of the pair (field frame,
    _pair_direction), ``depth`` the pair's penetration (its Drake signed
    distance when negative, else 0).

    Outside, the distance is the farthest face plane's (_convex: exact
    wherever the nearest surface point is on a face, less than the true
    distance beside an edge or a vertex), and the normal is that of the plane
    most aligned with ``prefer`` among the planes within TIE_BAND of the
    farthest.  So a contact's normal is always a face normal: a pad's corner
    on a box's edge takes the face the pad presses on, and a pad rising 1 cm
    beside a box is not taken to approach the box's bottom edge along the
    diagonal (a linearised 45 degree normal lifted the box with the pad).

    Inside (or on) the surface, the nearest face is not always the way out:
    a pad pushed 6 cm into a 10 cm slab has its lower corners nearer the
    slab's bottom face, and pushing them down while its upper corners are
    pushed up wedges it.  A point inside takes the face most aligned with
    ``prefer`` among the faces it lies at most max(|d|, |depth|) + TIE_BAND
    beneath, and that face's depth as its distance: every point of the pair
    is pushed out along one consistent direction, by no more than the pair's
    own penetration.  Of equally aligned faces the nearest wins.
    """
    d = _convex(planes, x, y, z, grad)
    floor = d - TIE_BAND if d > 0.0 else min(d, depth) - TIE_BAND
    score = -np.inf
    k = -1
    d_k = -np.inf
    for i in range(planes.shape[0]):
        d_i = _plane_distance(planes, i, x, y, z)
        if d_i < floor:
            continue
        along = planes[i, 0] * prefer[0] + planes[i, 1] * prefer[1] + planes[i, 2] * prefer[2]
        if along > score + 1e-12 or (along >= score - 1e-12 and d_i > d_k):
            score, k, d_k = along, i, d_i
    grad[0], grad[1], grad[2] = planes[k, 0], planes[k, 1], planes[k, 2]
    return d if d > 0.0 else d_k


@numba.njit(cache=True)
def _cylinder(radius, half_length, x, y, z, grad):
    rho = math.sqrt(x * x + y * y)
    ux, uy = (x / rho, y / rho) if rho > 1e-12 else (1.0, 0.0)
    w_r, w_z = rho - radius, abs(z) - half_length
    s_z = math.copysign(1.0, z)
    if max(w_r, w_z) > _ON_SURFACE:
        g_r, g_z = max(w_r, 0.0), max(w_z, 0.0)
        d = math.sqrt(g_r * g_r + g_z * g_z)
        g_r, g_z = g_r / d, g_z / d
    elif w_r >= w_z:
        d, g_r, g_z = w_r, 1.0, 0.0
    else:
        d, g_r, g_z = w_z, 0.0, 1.0
    grad[0], grad[1], grad[2] = g_r * ux, g_r * uy, g_z * s_z
    return d


@numba.njit(cache=True)
def _cylinder_towards(radius, half_length, x, y, z, prefer, depth, grad):
    """
    Return a cylinder's distance at a point, with the normal a contact there takes.

    Outside and up to TIE_BAND inside it is the exact field (_cylinder): a
    box's corner on the rim keeps the cap's normal or the side's, whichever
    is nearer (its vertex and its edges may give both rows).  Deeper, as for
    a polyhedron (_polyhedron_towards), the nearest surface is not always
    the way out: a table's edge 6 mm inside an arm's short link is nearest
    its cap, and pushing the link along its axis, through the table,
    contradicts every other contact of the pair.  Such a point takes, among
    the side and the two caps it lies at most max(|d|, |depth|) + TIE_BAND
    beneath, the surface most in line with ``prefer`` (field frame), and that
    surface's depth; of equally aligned surfaces the nearest.
    """
    d = _cylinder(radius, half_length, x, y, z, grad)
    if d > -TIE_BAND:
        return d
    rho = math.sqrt(x * x + y * y)
    ux, uy = (x / rho, y / rho) if rho > 1e-12 else (1.0, 0.0)
    floor = min(d, depth) - TIE_BAND
    best, chosen = -np.inf, d
    for side in range(3):              # the side, the top cap, the bottom cap
        if side == 0:
            d_i, nx, ny, nz = rho - radius, ux, uy, 0.0
        else:
            sign = 1.0 if side == 1 else -1.0
            d_i, nx, ny, nz = sign * z - half_length, 0.0, 0.0, sign
        if d_i < floor:
            continue
        along = nx * prefer[0] + ny * prefer[1] + nz * prefer[2]
        if along > best + 1e-12 or (along >= best - 1e-12 and d_i > chosen):
            best, chosen = along, d_i
            grad[0], grad[1], grad[2] = nx, ny, nz
    return chosen


@numba.njit(cache=True)
def pair_manifolds(R, o, pair_A, pair_B, pair_normal, has_closest, closest_phi, closest_A,
                   closest_B,
                   block_pair, block_feature, block_field, block_a_is_feature,
                   block_feature_kind, block_feature_params, block_field_kind,
                   block_field_params, block_field_planes, block_start, centres_G, radii,
                   block_edge_start, edges_G, planes, tolerance):
    """
    Return the contact points (phi, p_A, p_B, n_AB, pair) of all geometry pairs.

    Pair k joins geometry slots ``pair_A[k]`` and ``pair_B[k]``; its Drake closest
    points ``closest_A[k]``, ``closest_B[k]`` are in those geometries' frames.

    Block b tests feature points ``block_start[b]:block_start[b+1]`` of geometry
    slot ``block_feature[b]`` against slot ``block_field[b]``, whose face planes
    (a BOX or CONVEX field) are rows ``block_field_planes[b]`` = (start, count)
    of ``planes``; a cylinder's two rim points farthest towards the field
    geometry (against the field's distance gradient at the cylinder's centre)
    are added exactly, so a cylinder lying on its side gets its line contact.
    Against a BOX or CONVEX field, the block's feature edges
    ``block_edge_start[b]:block_edge_start[b+1]`` of ``edges_G`` (endpoints in
    the feature geometry's frame) add the points where they cross from one
    face plane's region to the next (_test_edge): the corners of a
    face-on-face contact that are neither shape's vertex, such as where a
    table's top edge passes under a box that overhangs it.  Against a BOX or
    CONVEX field, a point's distance and normal follow the pair's direction
    (Drake's normal, else the field's gradient at the feature geometry's
    origin) and its penetration (_polyhedron_towards).  Points within
    ``tolerance`` become contacts.  A pair's Drake closest point (``has_closest``)
    is added unless three feature points already lie on its face: then it would
    sit at an arbitrary spot of a face-on-face overlap, a redundant and
    asymmetric row.  Last, a point is dropped when a deeper twin of the same
    pair lies within MERGE_DISTANCE with a normal within 5 degrees (of equally
    deep twins the first is kept).
    """
    n_blocks = block_pair.shape[0]
    n_max = centres_G.shape[0] + 2 * n_blocks + has_closest.shape[0]
    for b in range(n_blocks):        # an edge crosses at most (planes - 1) plane boundaries
        n_max += (block_edge_start[b + 1] - block_edge_start[b]) * max(
            block_field_planes[b, 1] - 1, 1)
    n_max *= 2                       # a point at a cylinder's rim adds a second row
    phi = np.empty(n_max)
    p_A = np.empty((n_max, 3))
    p_B = np.empty((n_max, 3))
    normal = np.empty((n_max, 3))
    pair = np.empty(n_max, dtype=np.int64)
    count = np.int64(0)   # not the literal 0: one compilation of each callee
    extremes = np.empty((2, 3))
    lines = np.empty((2, planes.shape[0]))
    work = np.empty((5, 3))
    prefer = np.zeros(3)
    for b in range(n_blocks):
        f, s, k = block_feature[b], block_field[b], block_pair[b]
        first = block_field_planes[b, 0]
        field_planes = planes[first:first + block_field_planes[b, 1]]
        depth = min(closest_phi[k], 0.0) if has_closest[k] else 0.0
        if block_field_kind[b] in (CONVEX, BOX, CYLINDER):
            _pair_direction(R[s], o[s], o[f], has_closest[k], pair_normal[k],
                            block_a_is_feature[b], block_field_kind[b], block_field_params[b],
                            field_planes, prefer)
        for i in range(block_start[b], block_start[b + 1]):
            count = _test_point(R[f], o[f], centres_G[i], radii[i], R[s], o[s],
                                block_field_kind[b], block_field_params[b], field_planes,
                                prefer, depth, block_a_is_feature[b], k, tolerance,
                                work, phi, p_A, p_B, normal, pair, count)
        if block_feature_kind[b] == CYLINDER:
            towards = _towards_field(o[f], R[s], o[s], block_field_kind[b],
                                     block_field_params[b], field_planes)
            n_ext = _rim_extremes(R[f], towards, block_feature_params[b], extremes)
            for i in range(n_ext):
                count = _test_point(R[f], o[f], extremes[i], 0.0, R[s], o[s],
                                    block_field_kind[b], block_field_params[b], field_planes,
                                    prefer, depth, block_a_is_feature[b], k, tolerance,
                                    work, phi, p_A, p_B, normal, pair, count)
        for e in range(block_edge_start[b], block_edge_start[b + 1]):
            if block_field_kind[b] == CYLINDER or block_field_kind[b] == CAPSULE:
                count = _test_edge_on_curve(R[f], o[f], edges_G[e], R[s], o[s],
                                            block_field_kind[b], block_field_params[b],
                                            prefer, depth, block_a_is_feature[b], k,
                                            tolerance, work, phi, p_A, p_B, normal, pair,
                                            count)
            else:
                count = _test_edge(R[f], o[f], edges_G[e], R[s], o[s], field_planes, prefer,
                                   depth, block_a_is_feature[b], k, tolerance, lines, work,
                                   phi, p_A, p_B, normal, pair, count)
    count = _add_closest_points(R, o, pair_A, pair_B, has_closest, closest_phi, closest_A,
                                closest_B, pair_normal, phi, p_A, p_B, normal, pair, count)
    keep = _without_twins(phi[:count], p_A[:count], normal[:count], pair[:count])
    return (phi[:count][keep], p_A[:count][keep], p_B[:count][keep], normal[:count][keep],
            pair[:count][keep])


@numba.njit(cache=True)
def _test_point(R_F, o_F, centre_G, radius, R_S, o_S, field_kind, field_params, field_planes,
                prefer, depth, a_is_feature, k, tolerance, work, phi, p_A, p_B, normal, pair,
                count):
    """
    Append the contact of one feature sphere against a field if within tolerance.

    Against a BOX or CONVEX field the distance and normal are _polyhedron_towards's,
    against a CYLINDER _cylinder_towards's.  ``work`` (5 x 3) is scratch space.
    """
    c, local, grad = work[0], work[1], work[4]
    for r in range(3):
        c[r] = o_F[r] + R_F[r, 0] * centre_G[0] + R_F[r, 1] * centre_G[1] \
            + R_F[r, 2] * centre_G[2]
    for r in range(3):
        local[r] = (R_S[0, r] * (c[0] - o_S[0]) + R_S[1, r] * (c[1] - o_S[1])
                    + R_S[2, r] * (c[2] - o_S[2]))
    if field_kind == CONVEX or field_kind == BOX:
        d = _polyhedron_towards(field_planes, local[0], local[1], local[2], prefer, depth,
                                grad)
    elif field_kind == CYLINDER:
        d = _cylinder_towards(field_params[3], field_params[4], local[0], local[1], local[2],
                              prefer, depth, grad)
    else:
        d = point_signed_distance(field_kind, field_params, field_planes, local[0], local[1],
                                  local[2], grad)
    if d - radius > tolerance:
        return count
    count = _append(c, d, radius, grad, R_S, a_is_feature, k, phi, p_A, p_B, normal, pair,
                    count)
    if field_kind == CYLINDER:
        d_rim = _rim_second(field_params[3], field_params[4], local[0], local[1], local[2], d,
                            grad)
        if d_rim <= 0.0:
            count = _append(c, d_rim, radius, grad, R_S, a_is_feature, k, phi, p_A, p_B,
                            normal, pair, count)
    return count


@numba.njit(cache=True)
def _append(c, d, radius, grad, R_S, a_is_feature, k, phi, p_A, p_B, normal, pair, count):
    """Append the contact of a sphere of ``radius`` at c (world) at distance d along grad."""
    for r in range(3):
        out = R_S[r, 0] * grad[0] + R_S[r, 1] * grad[1] + R_S[r, 2] * grad[2]
        on_feature = c[r] - radius * out
        on_field = c[r] - d * out
        if a_is_feature:
            p_A[count, r], p_B[count, r], normal[count, r] = on_feature, on_field, -out
        else:
            p_A[count, r], p_B[count, r], normal[count, r] = on_field, on_feature, out
    phi[count] = d - radius
    pair[count] = k
    return count + 1


@numba.njit(cache=True)
def _rim_second(radius, half_length, x, y, z, d, grad):
    """
    Return the depth below a cylinder's other surface at its rim, or +inf; writes its normal.

    A point on or inside a cylinder within TIE_BAND of both its side and a
    cap touches the rim: it needs both rows, for either surface can be the
    one it goes through (a finger's corner on the rim of a rolling cylinder
    went 1.3 mm through the cap that its single side row did not see).  The
    first row has the exact field's normal, the nearer surface (``d``); this
    is the other one's.  Outside the cylinder, or away from the rim: +inf.
    """
    if d > _ON_SURFACE:
        return np.inf
    rho = math.sqrt(x * x + y * y)
    w_r, w_z = rho - radius, abs(z) - half_length
    if min(w_r, w_z) < -TIE_BAND:
        return np.inf
    if w_r >= w_z:                       # the side was taken: now the cap
        grad[0], grad[1], grad[2] = 0.0, 0.0, math.copysign(1.0, z)
        return w_z
    ux, uy = (x / rho, y / rho) if rho > 1e-12 else (1.0, 0.0)
    grad[0], grad[1], grad[2] = ux, uy, 0.0
    return w_r


@numba.njit(cache=True)
def _edge_in_field_frame(R_F, o_F, edge_G, R_S, o_S, c0, c1, p0, dp):
    """Write an edge's ends (world) to c0, c1, and its start p0 and span dp (field frame)."""
    for r in range(3):
        c0[r] = o_F[r] + R_F[r, 0] * edge_G[0, 0] + R_F[r, 1] * edge_G[0, 1] \
            + R_F[r, 2] * edge_G[0, 2]
        c1[r] = o_F[r] + R_F[r, 0] * edge_G[1, 0] + R_F[r, 1] * edge_G[1, 1] \
            + R_F[r, 2] * edge_G[1, 2]
    for r in range(3):
        p0[r] = R_S[0, r] * (c0[0] - o_S[0]) + R_S[1, r] * (c0[1] - o_S[1]) \
            + R_S[2, r] * (c0[2] - o_S[2])
        dp[r] = R_S[0, r] * (c1[0] - c0[0]) + R_S[1, r] * (c1[1] - c0[1]) \
            + R_S[2, r] * (c1[2] - c0[2])


@numba.njit(cache=True)
def _test_edge(R_F, o_F, edge_G, R_S, o_S, planes, prefer, depth, a_is_feature, k, tolerance,
               lines, work, phi, p_A, p_B, normal, pair, count):
    """
    Append the points where an edge crosses between face planes of a BOX or CONVEX field.

    Along the edge p(t) = p0 + t (p1 - p0), t in [0, 1], the largest of the
    face-plane distances is the upper envelope of the lines a_i + b_i t of the
    planes, convex and piecewise linear.  We walk the envelope from t = 0: the
    next breakpoint is the earliest crossing of the active line by a steeper
    one.  Every breakpoint strictly inside the edge with a distance within
    ``tolerance`` becomes a contact, measured like a feature point
    (_polyhedron_towards with ``prefer`` and ``depth``): where a table's top
    edge passes under a box's bottom face, or a pad's edge leaves a rounded
    box's flat face, both planes are tied and the face along the pair's
    direction wins.  The ends are vertices, tested as feature points.
    ``lines`` (2 x planes) and ``work`` (5 x 3) are scratch space.
    """
    c0, c1, p0, dp, grad = work[0], work[1], work[2], work[3], work[4]
    _edge_in_field_frame(R_F, o_F, edge_G, R_S, o_S, c0, c1, p0, dp)
    active = 0
    bound = -np.inf      # no point of the edge is nearer than any one line's minimum
    for i in range(planes.shape[0]):
        a = planes[i, 0] * p0[0] + planes[i, 1] * p0[1] + planes[i, 2] * p0[2] - planes[i, 3]
        b = planes[i, 0] * dp[0] + planes[i, 1] * dp[1] + planes[i, 2] * dp[2]
        lines[0, i], lines[1, i] = a, b
        bound = max(bound, min(a, a + b))
        if a > lines[0, active] or (a == lines[0, active] and b > lines[1, active]):
            active = i
    if bound > tolerance:
        return count
    t = 0.0
    while True:
        a_k, b_k = lines[0, active], lines[1, active]
        if b_k >= 0.0 and a_k + b_k * t > tolerance:
            return count     # rising, and already beyond the tolerance
        t_next = np.inf
        j = -1
        for i in range(planes.shape[0]):
            b_i = lines[1, i]
            if b_i > b_k:
                t_i = (a_k - lines[0, i]) / (b_i - b_k)
                if t_i < t_next or (t_i == t_next and b_i > lines[1, j]):
                    t_next, j = t_i, i
        if j < 0 or t_next >= 1.0 - 1e-9:
            return count
        t_next = max(t_next, t)
        if a_k + b_k * t_next <= tolerance and t_next > 1e-9:
            d = _polyhedron_towards(planes, p0[0] + t_next * dp[0], p0[1] + t_next * dp[1],
                                    p0[2] + t_next * dp[2], prefer, depth, grad)
            if d <= tolerance:
                for r in range(3):
                    c = c0[r] + t_next * (c1[r] - c0[r])
                    out = R_S[r, 0] * grad[0] + R_S[r, 1] * grad[1] + R_S[r, 2] * grad[2]
                    if a_is_feature:
                        p_A[count, r], p_B[count, r], normal[count, r] = c, c - d * out, -out
                    else:
                        p_A[count, r], p_B[count, r], normal[count, r] = c - d * out, c, out
                phi[count] = d
                pair[count] = k
                count += 1
        t, active = t_next, j


GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
# golden-section steps: a 1.4 m table edge's bracket shrinks to 0.3 um; at a smooth minimum
# the depth's error is second order in that, at a rim's kink first order.
EDGE_SEARCH_STEPS = 32


@numba.njit(cache=True)
def _curved_distance(field_kind, params, p0, dp, t, grad):
    """Return a cylinder's or capsule's exact signed distance at p0 + t dp (its frame)."""
    x, y, z = p0[0] + t * dp[0], p0[1] + t * dp[1], p0[2] + t * dp[2]
    if field_kind == CYLINDER:
        return _cylinder(params[3], params[4], x, y, z, grad)
    return _unit(x, y, z - min(max(z, -params[4]), params[4]), grad) - params[3]


@numba.njit(cache=True)
def _nearest_the_axis(field_kind, params, p0, dp, t_search):
    """
    Return where along the edge p0 + t dp its distance to the curved field is least.

    The golden-section search places it to about 1e-7 of the edge's length,
    which tilts a long edge's normal by microradians (a cylinder lying across
    a 1.2 m table's edge rolled on it); where the side decides the distance,
    the least is exactly where the edge passes nearest the axis: a capsule's
    always, a cylinder's when its side term there is at least its caps' term.
    """
    axis0 = np.array([0.0, 0.0, -params[4]])
    axis1 = np.array([0.0, 0.0, params[4]])
    _, t, _ = _segment_params(p0, p0 + dp, axis0, axis1)
    if field_kind != CYLINDER:
        return t
    x, y, z = p0[0] + t * dp[0], p0[1] + t * dp[1], p0[2] + t * dp[2]
    if math.sqrt(x * x + y * y) - params[3] >= abs(z) - params[4]:
        return t
    return t_search


@numba.njit(cache=True)
def _test_edge_on_curve(R_F, o_F, edge_G, R_S, o_S, field_kind, field_params, prefer, depth,
                        a_is_feature, k, tolerance, work, phi, p_A, p_B, normal, pair, count):
    """
    Append an edge's deepest point against a cylinder or capsule field, if within tolerance.

    A box's or hull's straight edge touches a curved side at one point that
    is no vertex of either shape: the table's top edge under a cylinder lying
    across it.  The signed distance to a convex shape is convex along a line,
    so a golden-section search over the edge finds its minimum.  A minimum at
    an end is that end's vertex, tested as a feature point already.  Inside
    a cylinder the point's normal and depth follow the pair's direction
    (_cylinder_towards with ``prefer`` and ``depth``).  ``work`` (5 x 3) is
    scratch space.
    """
    c0, c1, p0, dp, grad = work[0], work[1], work[2], work[3], work[4]
    _edge_in_field_frame(R_F, o_F, edge_G, R_S, o_S, c0, c1, p0, dp)
    reach = math.sqrt(field_params[3] ** 2 + field_params[4] ** 2) + tolerance
    if field_kind == CAPSULE:
        reach = field_params[3] + field_params[4] + tolerance
    dp_sq = dp[0] * dp[0] + dp[1] * dp[1] + dp[2] * dp[2]
    t_line = -(p0[0] * dp[0] + p0[1] * dp[1] + p0[2] * dp[2]) / max(dp_sq, 1e-300)
    t_line = min(max(t_line, 0.0), 1.0)
    nx, ny, nz = p0[0] + t_line * dp[0], p0[1] + t_line * dp[1], p0[2] + t_line * dp[2]
    if nx * nx + ny * ny + nz * nz > reach * reach:
        return count                   # the whole edge is beyond the tolerance
    lo, hi = 0.0, 1.0
    a, b = hi - GOLDEN * (hi - lo), lo + GOLDEN * (hi - lo)
    f_a = _curved_distance(field_kind, field_params, p0, dp, a, grad)
    f_b = _curved_distance(field_kind, field_params, p0, dp, b, grad)
    for _ in range(EDGE_SEARCH_STEPS):
        if f_a <= f_b:
            hi, b, f_b = b, a, f_a
            a = hi - GOLDEN * (hi - lo)
            f_a = _curved_distance(field_kind, field_params, p0, dp, a, grad)
        else:
            lo, a, f_a = a, b, f_b
            b = lo + GOLDEN * (hi - lo)
            f_b = _curved_distance(field_kind, field_params, p0, dp, b, grad)
    t = _nearest_the_axis(field_kind, field_params, p0, dp, 0.5 * (lo + hi))
    if t < 1e-6 or t > 1.0 - 1e-6:
        return count
    local = p0 + t * dp
    d = _curved_distance(field_kind, field_params, p0, dp, t, grad)
    if field_kind == CYLINDER:
        d = _cylinder_towards(field_params[3], field_params[4], local[0], local[1], local[2],
                              prefer, depth, grad)
    if d > tolerance:
        return count
    c = o_S + R_S @ local
    count = _append(c, d, 0.0, grad, R_S, a_is_feature, k, phi, p_A, p_B, normal, pair, count)
    if field_kind == CYLINDER:
        d_rim = _rim_second(field_params[3], field_params[4], local[0], local[1], local[2], d,
                            grad)
        if d_rim <= 0.0:
            count = _append(c, d_rim, 0.0, grad, R_S, a_is_feature, k, phi, p_A, p_B,
                            normal, pair, count)
    return count


@numba.njit(cache=True)
def _pair_direction(R_S, o_S, o_F, has_closest, pair_normal, a_is_feature, field_kind,
                    field_params, field_planes, out):
    """
    Write the unit direction from a field geometry towards a feature geometry (field frame).

    Drake's normal of the pair if it has one (``pair_normal`` points from A to
    B), else the field's gradient at the feature geometry's origin: above a
    table's top face that is the top face's normal, wherever the table's own
    origin is.
    """
    if has_closest:
        sign = -1.0 if a_is_feature else 1.0
        for r in range(3):
            out[r] = sign * (R_S[0, r] * pair_normal[0] + R_S[1, r] * pair_normal[1]
                             + R_S[2, r] * pair_normal[2])
        return
    local = R_S.T @ (o_F - o_S)
    point_signed_distance(field_kind, field_params, field_planes, local[0], local[1], local[2],
                          out)


@numba.njit(cache=True)
def _towards_field(point, R_S, o_S, field_kind, field_params, field_planes):
    """Return the unit direction from a point towards a field geometry (minus its gradient)."""
    local = R_S.T @ (point - o_S)
    grad = np.empty(3)
    point_signed_distance(field_kind, field_params, field_planes, local[0], local[1], local[2],
                          grad)
    return -(R_S @ grad)


@numba.njit(cache=True)
def _rim_extremes(R_F, towards_W, params, out):
    """Write a cylinder's two rim points farthest along towards_W (frame G); return 0-2."""
    x = R_F[0, 0] * towards_W[0] + R_F[1, 0] * towards_W[1] + R_F[2, 0] * towards_W[2]
    y = R_F[0, 1] * towards_W[0] + R_F[1, 1] * towards_W[1] + R_F[2, 1] * towards_W[2]
    norm = math.sqrt(x * x + y * y)
    if norm < 1e-9:
        return 0                       # along the axis: the rim samples cover it
    for i, z in enumerate((params[4], -params[4])):
        out[i, 0], out[i, 1], out[i, 2] = params[3] * x / norm, params[3] * y / norm, z
    return 2


@numba.njit(cache=True)
def _add_closest_points(R, o, pair_A, pair_B, has_closest, closest_phi, closest_A,
                        closest_B, pair_normal, phi, p_A, p_B, normal, pair, count):
    """
    Append each pair's Drake closest point (given in A's and B's frames) where needed.

    Where fewer than three feature points share its phi and normal; a
    penetrating pair's only where none does: Drake's witnesses of a
    penetration need not lie where the depth is (a box sunk 3 mm by one edge
    into a slab had them under its centre).
    """
    on_face = np.zeros(has_closest.shape[0], dtype=np.int64)
    for i in range(count):
        j = pair[i]
        if abs(phi[i] - closest_phi[j]) <= FACE_PHI_TOLERANCE and (
                normal[i, 0] * pair_normal[j, 0] + normal[i, 1] * pair_normal[j, 1]
                + normal[i, 2] * pair_normal[j, 2] > MERGE_COS):
            on_face[j] += 1
    for j in range(has_closest.shape[0]):
        if has_closest[j] and (on_face[j] == 0 or (closest_phi[j] >= 0.0 and on_face[j] < 3)):
            phi[count], pair[count] = closest_phi[j], j
            p_A[count] = R[pair_A[j]] @ closest_A[j] + o[pair_A[j]]
            p_B[count] = R[pair_B[j]] @ closest_B[j] + o[pair_B[j]]
            normal[count] = pair_normal[j]
            count += 1
    return count


@numba.njit(cache=True)
def _without_twins(phi, p_A, normal, pair):
    keep = np.ones(phi.shape[0], dtype=np.bool_)
    for i in range(phi.shape[0]):
        for j in range(phi.shape[0]):
            if j == i or pair[j] != pair[i] or not (phi[j] < phi[i] or (phi[j] == phi[i]
                                                                        and j < i)):
                continue
            gap = 0.0
            cos = 0.0
            for r in range(3):
                gap += (p_A[i, r] - p_A[j, r]) ** 2
                cos += normal[i, r] * normal[j, r]
            if gap < MERGE_DISTANCE ** 2 and cos > MERGE_COS:
                keep[i] = False
                break
    return keep


@numba.njit(cache=True)
def contact_jacobians(p_A, p_B, normal, tangents, body_A, body_B, J_w, J_v, origins):
    """
    Return J_n (n_c x n_v) and J_f (n_c n_d x n_v), eqs. 3-4 (module docstring).

    ``body_A``/``body_B`` index the stacked body-origin Jacobians ``J_w``, ``J_v``
    (each n_b x 3 x n_v) and ``origins`` (n_b x 3); -1 marks a body that cannot
    move.  The velocity of a point p on a body is v_o + w x (p - o), so
    u^T J(p) = u^T J_v + ((p - o) x u)^T J_w.
    """
    n_c, n_d = tangents.shape[0], tangents.shape[1]
    n_v = J_v.shape[2]
    J_n = np.zeros((n_c, n_v))
    J_f = np.zeros((n_c * n_d, n_v))
    for i in range(n_c):
        for side in range(2):
            body = body_B[i] if side == 0 else body_A[i]
            if body < 0:
                continue
            sign = 1.0 if side == 0 else -1.0
            point = p_B[i] if side == 0 else p_A[i]
            r = point - origins[body]
            _add_row(J_n, i, normal[i], r, J_w[body], J_v[body], sign)
            for j in range(n_d):
                _add_row(J_f, i * n_d + j, tangents[i, j], r, J_w[body], J_v[body], sign)
    return J_n, J_f


@numba.njit(cache=True)
def _add_row(J, row, u, r, J_w, J_v, sign):
    c0 = r[1] * u[2] - r[2] * u[1]
    c1 = r[2] * u[0] - r[0] * u[2]
    c2 = r[0] * u[1] - r[1] * u[0]
    for v in range(J.shape[1]):
        J[row, v] += sign * (u[0] * J_v[0, v] + u[1] * J_v[1, v] + u[2] * J_v[2, v]
                             + c0 * J_w[0, v] + c1 * J_w[1, v] + c2 * J_w[2, v])


@numba.njit(cache=True)
def sweep_lengths(J_w, J_v, radii, v, h):
    """
    Return how far any point of each body can move in one step: h (|v_o| + R |w|).

    ``J_w``, ``J_v`` (n_b x 3 x n_v) map v to each body origin's spatial velocity,
    ``radii`` (n_b) bound the bodies' geometry about their origins.
    """
    shift, turn = body_motions(J_w, J_v, radii, v, h)
    out = np.empty(radii.shape[0])
    for b in range(radii.shape[0]):
        out[b] = math.sqrt(shift[b] @ shift[b]) + turn[b]
    return out


@numba.njit(cache=True)
def body_motions(J_w, J_v, radii, v, h):
    """
    Return each body origin's displacement in one step, h v_o (n_b x 3), and h R |w| (n_b).

    A point of body b moves by at most |shift_b| + turn_b; two points of bodies
    a and b close in by at most |shift_a - shift_b| + turn_a + turn_b.
    """
    shift = np.empty((radii.shape[0], 3))
    turn = np.empty(radii.shape[0])
    for b in range(radii.shape[0]):          # J_w[b] v and J_v[b] v, looped: 3 x n_v each is
        w0 = w1 = w2 = s0 = s1 = s2 = 0.0     # too small for BLAS's call to pay
        for j in range(v.shape[0]):
            x = v[j]
            w0 += J_w[b, 0, j] * x
            w1 += J_w[b, 1, j] * x
            w2 += J_w[b, 2, j] * x
            s0 += J_v[b, 0, j] * x
            s1 += J_v[b, 1, j] * x
            s2 += J_v[b, 2, j] * x
        shift[b, 0], shift[b, 1], shift[b, 2] = h * s0, h * s1, h * s2
        turn[b] = h * radii[b] * math.sqrt(w0 * w0 + w1 * w1 + w2 * w2)
    return shift, turn


@numba.njit(cache=True)
def shifted_jacobians(J, origins, source, source_slot, columns):
    """
    Return J_w, J_v (n_b x 3 x n_v) of each body at its origin, from its source's (model.py).

    J holds the sources' spatial velocity Jacobians at their origins (rows
    w then v); body b takes row ``source[b]``, whose origin is
    ``origins[source_slot[b]]``: on its ``columns`` J_w,b = J_w,L and
    J_v,b = J_v,L + J_w,L x (o_b - o_L), zero elsewhere.
    """
    n_b, n_v = columns.shape
    J_w, J_v = np.zeros((n_b, 3, n_v)), np.zeros((n_b, 3, n_v))
    for b in range(n_b):
        L, s = source[b], source_slot[b]
        rx, ry, rz = origins[b, 0] - origins[s, 0], origins[b, 1] - origins[s, 1], \
            origins[b, 2] - origins[s, 2]
        for j in range(n_v):
            if columns[b, j]:
                wx, wy, wz = J[L, 0, j], J[L, 1, j], J[L, 2, j]
                J_w[b, 0, j], J_w[b, 1, j], J_w[b, 2, j] = wx, wy, wz
                J_v[b, 0, j] = J[L, 3, j] + (wy * rz - wz * ry)
                J_v[b, 1, j] = J[L, 4, j] + (wz * rx - wx * rz)
                J_v[b, 2, j] = J[L, 5, j] + (wx * ry - wy * rx)
    return J_w, J_v


# ----- box against box: Drake's touching box-box code aborts (BoxBoxGradient) -------------
_BOX_EDGES = np.array([(i, i | bit) for i in range(8) for bit in (1, 2, 4) if not i & bit],
                      dtype=np.int64)


@numba.njit(cache=True)
def box_box_pairs(R, o, half, slot_a, slot_b, tolerance, drift):
    """
    Return the signed distance of box pairs, as Drake's query would, for those within tolerance.

    Box k of a pair is slot ``slot_a[k]`` / ``slot_b[k]`` of the stacked
    rotations R (n x 3 x 3), origins o (n x 3) and half sizes (n x 3).
    Returns, per pair, the signed distance (inf beyond ``tolerance``), the
    witness points in A's and B's frames, and the unit normal from B to A in
    the world.  Penetrating boxes: the separating-axis test over the 15 axes
    gives the exact depth and its axis (_box_box_penetration).  Separated
    boxes: the exact distance is the least over each box's vertices against
    the other's exact field and the 144 edge pairs (_box_box_separation); its
    normal is the line between the witness points, or below 1e-6 m, where
    that line is round-off, the axis of largest separation.

    ``drift`` (n x 3) is each box centre's commanded velocity, zero where
    none is known.  Boxes centred on each other along their axis of least
    overlap (pads buried exactly halfway through a table) are equally deep
    both ways: the way out is the way B is commanded relative to A
    (_box_box_sat).  Also returns, per pair, whether it was such a tie.
    """
    n = slot_a.shape[0]
    tied = np.zeros(n, dtype=np.bool_)
    distance = np.full(n, np.inf)
    p_A = np.zeros((n, 3))
    p_B = np.zeros((n, 3))
    nhat = np.zeros((n, 3))
    axes = np.empty_like(R)                       # rows: each box's axes in the world
    corners = np.empty((R.shape[0], 8, 3))
    for i in range(R.shape[0]):
        axes[i] = R[i].T
        corners[i] = _box_corners(axes[i], o[i], half[i])
    for k in range(n):
        a, b = slot_a[k], slot_b[k]
        reach = math.sqrt(half[a] @ half[a]) + math.sqrt(half[b] @ half[b]) + tolerance
        apart = o[b] - o[a]
        if apart @ apart > reach * reach:
            continue                       # their bounding spheres are beyond the tolerance
        A, B = axes[a], axes[b]
        gap, axis, tied[k] = _box_box_sat(A, o[a], half[a], B, o[b], half[b],
                                          drift[b] - drift[a])
        if gap > tolerance:
            continue
        if gap <= 0.0:
            d, wa, wb = _box_box_penetration(A, o[a], half[a], B, o[b], half[b], axis, -gap)
            normal = -axis
        else:
            d, wa, wb = _box_box_separation(A, o[a], half[a], corners[a], B, o[b], half[b],
                                            corners[b], gap)
            if d > tolerance:
                continue
            normal = (wa - wb) / d if d >= 1e-6 else -axis
        distance[k] = d
        p_A[k] = A @ (wa - o[a])
        p_B[k] = B @ (wb - o[b])
        nhat[k] = normal
    return distance, p_A, p_B, nhat, tied


@numba.njit(cache=True)
def _box_box_sat(A, o_A, h_A, B, o_B, h_B, drift):
    """
    Return the largest separation of two boxes over the 15 separating axes, its axis, a tie.

    ``A`` and ``B`` hold each box's axes as rows.  The returned axis is a
    unit vector oriented from A towards B.  A positive value is a lower
    bound of the distance; otherwise its negative is the penetration depth
    (the least overlap), exact for boxes.  Where the centres are within
    CENTRED of each other along the axis, either orientation is as deep:
    the axis takes the way of ``drift``, B's commanded velocity relative to
    A's (if none, +), and the third value is True.
    """
    dx, dy, dz = o_B[0] - o_A[0], o_B[1] - o_A[1], o_B[2] - o_A[2]
    best = -np.inf
    best_along = 1.0
    best_axis = np.array([0.0, 0.0, 1.0])
    for k in range(15):
        if k < 3:
            ux, uy, uz = A[k, 0], A[k, 1], A[k, 2]
        elif k < 6:
            ux, uy, uz = B[k - 3, 0], B[k - 3, 1], B[k - 3, 2]
        else:
            a, b = A[(k - 6) // 3], B[(k - 6) % 3]
            ux, uy, uz = a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], \
                a[0] * b[1] - a[1] * b[0]
            norm = math.sqrt(ux * ux + uy * uy + uz * uz)
            if norm < 1e-9:
                continue                   # parallel edges: a face axis covers it
            ux, uy, uz = ux / norm, uy / norm, uz / norm
        r = 0.0
        for i in range(3):
            r += h_A[i] * abs(ux * A[i, 0] + uy * A[i, 1] + uz * A[i, 2])
            r += h_B[i] * abs(ux * B[i, 0] + uy * B[i, 1] + uz * B[i, 2])
        along = ux * dx + uy * dy + uz * dz
        gap = abs(along) - r
        if gap > best + 1e-15:             # the face axes win ties
            best, best_along = gap, along
            best_axis[0], best_axis[1], best_axis[2] = ux, uy, uz
    tie = abs(best_along) <= CENTRED
    if tie:
        best_along = best_axis @ drift
    if best_along < 0.0:
        best_axis *= -1.0
    return best, best_axis, tie


@numba.njit(cache=True)
def _support_centre(axes, o, h, direction):
    """Return the centre of a box's feature farthest along direction (a face, edge or vertex)."""
    out = o.copy()
    for i in range(3):
        along = axes[i] @ direction
        if abs(along) > 1e-12:
            out += math.copysign(h[i], along) * axes[i]
    return out


@numba.njit(cache=True)
def _box_box_penetration(A, o_A, h_A, B, o_B, h_B, axis, depth):
    """
    Return (-depth, witness on A, witness on B) of penetrating boxes along the SAT axis.

    Along a face normal of A, B's witness is the centre of its feature
    deepest into A (the axis points from A to B) and A's lies ``depth`` back
    along the axis, on A's supporting plane; along a face normal of B only,
    the other way round, so that both witnesses lie on or in their boxes (a
    box resting on one edge on a slab had its witness under its centre,
    outside it, and that point held it up).  For an edge-edge axis the
    witnesses are the two edges' closest points.
    """
    face_A, face_B = False, False
    for i in range(3):
        face_A |= abs(A[i] @ axis) >= 1.0 - 1e-12
        face_B |= abs(B[i] @ axis) >= 1.0 - 1e-12
    if face_B and not face_A:                     # A's edge or vertex into B's face
        on_A = _support_centre(A, o_A, h_A, axis)
        on_B = on_A - depth * axis
    else:                                         # B's feature into A's face
        on_B = _support_centre(B, o_B, h_B, -axis)
        on_A = on_B + depth * axis
    edge_A, edge_B = -1, -1
    for i in range(3):
        if abs(A[i] @ axis) <= 1e-12:
            edge_A = i if edge_A < 0 else 3           # 3: a face, not an edge
        if abs(B[i] @ axis) <= 1e-12:
            edge_B = i if edge_B < 0 else 3
    if 0 <= edge_A < 3 and 0 <= edge_B < 3:
        centre_A = _support_centre(A, o_A, h_A, axis)
        _, on_A, on_B = _segment_closest(centre_A - h_A[edge_A] * A[edge_A],
                                         centre_A + h_A[edge_A] * A[edge_A],
                                         on_B - h_B[edge_B] * B[edge_B],
                                         on_B + h_B[edge_B] * B[edge_B])
    return -depth, on_A, on_B


@numba.njit(cache=True)
def _box_box_separation(A, o_A, h_A, corners_A, B, o_B, h_B, corners_B, lower):
    """
    Return the exact distance of separated boxes and its witness points (world).

    ``lower`` is the separating-axis gap, a lower bound of the distance.  A
    vertex's distance is an upper bound; when it meets the lower one it is
    exact (a pad parallel to the table, above it), and the 144 edge pairs
    are skipped.
    """
    grad = np.empty(3)
    best = np.inf
    on_A = np.zeros(3)
    on_B = np.zeros(3)
    for side in range(2):
        corners = corners_B if side == 0 else corners_A
        axes, o_S, h_S = (A, o_A, h_A) if side == 0 else (B, o_B, h_B)
        for v in range(8):
            cx, cy, cz = corners[v, 0] - o_S[0], corners[v, 1] - o_S[1], corners[v, 2] - o_S[2]
            d = _box(h_S[0], h_S[1], h_S[2], axes[0, 0] * cx + axes[0, 1] * cy + axes[0, 2] * cz,
                     axes[1, 0] * cx + axes[1, 1] * cy + axes[1, 2] * cz,
                     axes[2, 0] * cx + axes[2, 1] * cy + axes[2, 2] * cz, grad)
            if d < best:
                best = d
                corner = corners[v].copy()
                surface = corner - d * (axes.T @ grad)
                if side == 0:
                    on_B, on_A = corner, surface
                else:
                    on_A, on_B = corner, surface
    if best <= lower + 1e-12 * max(1.0, lower):
        return best, on_A, on_B
    best_sq, edge_e, edge_f, best_s, best_t = best * best, -1, -1, 0.0, 0.0
    for e in range(12):
        for f in range(12):
            d_sq, s_e, t_f = _segment_params(
                corners_A[_BOX_EDGES[e, 0]], corners_A[_BOX_EDGES[e, 1]],
                corners_B[_BOX_EDGES[f, 0]], corners_B[_BOX_EDGES[f, 1]])
            if d_sq < best_sq:
                best_sq, edge_e, edge_f, best_s, best_t = d_sq, e, f, s_e, t_f
    if edge_e >= 0:
        a0, a1 = corners_A[_BOX_EDGES[edge_e, 0]], corners_A[_BOX_EDGES[edge_e, 1]]
        b0, b1 = corners_B[_BOX_EDGES[edge_f, 0]], corners_B[_BOX_EDGES[edge_f, 1]]
        on_A = a0 + best_s * (a1 - a0)
        on_B = b0 + best_t * (b1 - b0)
        best = math.sqrt(best_sq)
    return best, on_A, on_B


@numba.njit(cache=True)
def _box_corners(axes, o, h):
    """Return a box's 8 corners (world), corner v at signs from v's bits (x: 4, y: 2, z: 1)."""
    out = np.empty((8, 3))
    for v in range(8):
        out[v] = o
        for i in range(3):
            out[v] += (h[i] if (v >> (2 - i)) & 1 else -h[i]) * axes[i]
    return out


@numba.njit(cache=True)
def _segment_closest(p1, q1, p2, q2):
    """Return the distance between segments p1q1 and p2q2 and their closest points."""
    d_sq, s, t = _segment_params(p1, q1, p2, q2)
    return math.sqrt(d_sq), p1 + s * (q1 - p1), p2 + t * (q2 - p2)


@numba.njit(cache=True)
def _segment_params(p1, q1, p2, q2):
    """
    Return the squared distance of segments p1q1 and p2q2, and where it is (s, t in [0, 1]).

    Scalar arithmetic only: it runs 144 times for each pair of separated boxes.
    """
    d1x, d1y, d1z = q1[0] - p1[0], q1[1] - p1[1], q1[2] - p1[2]
    d2x, d2y, d2z = q2[0] - p2[0], q2[1] - p2[1], q2[2] - p2[2]
    rx, ry, rz = p1[0] - p2[0], p1[1] - p2[1], p1[2] - p2[2]
    a = d1x * d1x + d1y * d1y + d1z * d1z
    e = d2x * d2x + d2y * d2y + d2z * d2z
    f = d2x * rx + d2y * ry + d2z * rz
    if a <= 1e-30 and e <= 1e-30:
        s, t = 0.0, 0.0
    elif a <= 1e-30:
        s, t = 0.0, min(max(f / e, 0.0), 1.0)
    else:
        c = d1x * rx + d1y * ry + d1z * rz
        if e <= 1e-30:
            s, t = min(max(-c / a, 0.0), 1.0), 0.0
        else:
            b = d1x * d2x + d1y * d2y + d1z * d2z
            denom = a * e - b * b
            s = min(max((b * f - c * e) / denom, 0.0), 1.0) if denom > 1e-30 * a * e else 0.0
            t = (b * s + f) / e
            if t < 0.0:
                s, t = min(max(-c / a, 0.0), 1.0), 0.0
            elif t > 1.0:
                s, t = min(max((b - c) / a, 0.0), 1.0), 1.0
    gx = rx + s * d1x - t * d2x
    gy = ry + s * d1y - t * d2y
    gz = rz + s * d1z - t * d2z
    return gx * gx + gy * gy + gz * gz, s, t
