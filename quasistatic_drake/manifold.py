"""
Compiled kernels that turn geometry into contact rows: the manifold and the Jacobians.

Pure numerics (numba), no Drake; contact_detection.py feeds them from SceneGraph
and MultibodyPlant.  Every compiled function of the contact pipeline lives in
this one file on purpose: numba's on-disk cache is invalidated per source file,
so a compiled caller in one file would keep a stale copy of a callee changed in
another.  shapes.py describes the shapes these distance fields measure.

Conventions follow seed 000, Sec. III-B: the normal n of a contact points from
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
# [m] in the manifold, a CONVEX field's planes this close to the farthest one may give a
# contact's normal (_convex_towards): a pad's corner on a mesh box's edge takes the face the
# pad presses on.
TIE_BAND = 1e-3


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
def _convex_towards(planes, x, y, z, prefer, grad):
    """
    Return a CONVEX field's distance (as _convex) with the normal a contact there takes.

    The normal is that of the plane most aligned with ``prefer`` (a unit vector
    in the field's frame: the pair's direction, pair_manifolds) among the
    planes within TIE_BAND of the farthest one.  A point on or near an edge
    belongs to both faces, and the plain field would pick one by round-off: a
    pad's corner on the edge of a mesh box would push sideways along the other
    face instead of squeezing.  The distance stays the farthest plane's, so a
    point outside is never reported as penetrating.
    """
    best = _convex(planes, x, y, z, grad)
    score = -np.inf
    k = 0
    for i in range(planes.shape[0]):
        if _plane_distance(planes, i, x, y, z) >= best - TIE_BAND:
            along = planes[i, 0] * prefer[0] + planes[i, 1] * prefer[1] \
                + planes[i, 2] * prefer[2]
            if along > score:
                score, k = along, i
    grad[0], grad[1], grad[2] = planes[k, 0], planes[k, 1], planes[k, 2]
    return best


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
    (a CONVEX field) are rows ``block_field_planes[b]`` = (start, count) of
    ``planes``; a cylinder's two rim points farthest towards the field geometry
    (against the field's distance gradient at the cylinder's centre) are added
    exactly, so a cylinder lying on its side gets its line contact.  Against a
    CONVEX field, the block's feature edges ``block_edge_start[b]:block_edge_start[b+1]``
    of ``edges_G`` (endpoints in the feature geometry's frame) add the points
    where they cross from one face plane's region to the next (_test_edge): the
    corners of a face-on-face contact that are neither shape's vertex, such as
    where a pad's edge leaves a rounded box's flat face.  Against a CONVEX field
    a point's normal is that of the face plane most aligned with the pair's
    direction (Drake's normal, else the line between the geometries' origins)
    among the planes within TIE_BAND of the farthest (_convex_towards).  Points within
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
            block_field_planes[b, 1] - 1, 0)
    phi = np.empty(n_max)
    p_A = np.empty((n_max, 3))
    p_B = np.empty((n_max, 3))
    normal = np.empty((n_max, 3))
    pair = np.empty(n_max, dtype=np.int64)
    count = 0
    extremes = np.empty((2, 3))
    lines = np.empty((2, planes.shape[0]))
    prefer = np.zeros(3)
    for b in range(n_blocks):
        f, s, k = block_feature[b], block_field[b], block_pair[b]
        first = block_field_planes[b, 0]
        field_planes = planes[first:first + block_field_planes[b, 1]]
        if block_field_kind[b] == CONVEX:
            _pair_direction(R[s], o[s], o[f], has_closest[k], pair_normal[k],
                            block_a_is_feature[b], prefer)
        for i in range(block_start[b], block_start[b + 1]):
            count = _test_point(R[f], o[f], centres_G[i], radii[i], R[s], o[s],
                                block_field_kind[b], block_field_params[b], field_planes,
                                prefer, block_a_is_feature[b], k, tolerance,
                                phi, p_A, p_B, normal, pair, count)
        if block_feature_kind[b] == CYLINDER:
            towards = _towards_field(o[f], R[s], o[s], block_field_kind[b],
                                     block_field_params[b], field_planes)
            n_ext = _rim_extremes(R[f], towards, block_feature_params[b], extremes)
            for i in range(n_ext):
                count = _test_point(R[f], o[f], extremes[i], 0.0, R[s], o[s],
                                    block_field_kind[b], block_field_params[b], field_planes,
                                    prefer, block_a_is_feature[b], k, tolerance,
                                    phi, p_A, p_B, normal, pair, count)
        for e in range(block_edge_start[b], block_edge_start[b + 1]):
            count = _test_edge(R[f], o[f], edges_G[e], R[s], o[s], field_planes, prefer,
                               block_a_is_feature[b], k, tolerance, lines,
                               phi, p_A, p_B, normal, pair, count)
    count = _add_closest_points(R, o, pair_A, pair_B, has_closest, closest_phi, closest_A,
                                closest_B, pair_normal, phi, p_A, p_B, normal, pair, count)
    keep = _without_twins(phi[:count], p_A[:count], normal[:count], pair[:count])
    return (phi[:count][keep], p_A[:count][keep], p_B[:count][keep], normal[:count][keep],
            pair[:count][keep])


@numba.njit(cache=True)
def _test_point(R_F, o_F, centre_G, radius, R_S, o_S, field_kind, field_params, field_planes,
                prefer, a_is_feature, k, tolerance, phi, p_A, p_B, normal, pair, count):
    """
    Append the contact of one feature sphere against a field if within tolerance.

    Against a CONVEX field the normal is the plane _convex_towards(``prefer``) picks.
    """
    c = np.empty(3)
    local = np.empty(3)
    grad = np.empty(3)
    for r in range(3):
        c[r] = o_F[r] + R_F[r, 0] * centre_G[0] + R_F[r, 1] * centre_G[1] \
            + R_F[r, 2] * centre_G[2]
    for r in range(3):
        local[r] = (R_S[0, r] * (c[0] - o_S[0]) + R_S[1, r] * (c[1] - o_S[1])
                    + R_S[2, r] * (c[2] - o_S[2]))
    if field_kind == CONVEX:
        d = _convex_towards(field_planes, local[0], local[1], local[2], prefer, grad)
    else:
        d = point_signed_distance(field_kind, field_params, field_planes, local[0], local[1],
                                  local[2], grad)
    if d - radius > tolerance:
        return count
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
def _test_edge(R_F, o_F, edge_G, R_S, o_S, planes, prefer, a_is_feature, k, tolerance, lines,
               phi, p_A, p_B, normal, pair, count):
    """
    Append the points where an edge crosses between face planes of a CONVEX field.

    Along the edge p(t) = p0 + t (p1 - p0), t in [0, 1], the field is the upper
    envelope of the lines a_i + b_i t of its planes, convex and piecewise
    linear.  We walk the envelope from t = 0: the next breakpoint is the
    earliest crossing of the active line by a steeper one.  Every breakpoint
    strictly inside the edge with a distance within ``tolerance`` becomes a
    contact, measured like a feature point (_convex_towards with ``prefer``):
    where a pad's edge leaves a rounded box's flat face, both planes are tied
    and the flat face, along the pair's direction, wins.  The ends are
    vertices, tested as feature points.  ``lines`` is scratch space (2 x planes).
    """
    c0 = np.empty(3)
    c1 = np.empty(3)
    grad = np.empty(3)
    for r in range(3):
        c0[r] = o_F[r] + R_F[r, 0] * edge_G[0, 0] + R_F[r, 1] * edge_G[0, 1] \
            + R_F[r, 2] * edge_G[0, 2]
        c1[r] = o_F[r] + R_F[r, 0] * edge_G[1, 0] + R_F[r, 1] * edge_G[1, 1] \
            + R_F[r, 2] * edge_G[1, 2]
    p0 = R_S.T @ (c0 - o_S)
    dp = R_S.T @ (c1 - c0)
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
            d = _convex_towards(planes, p0[0] + t_next * dp[0], p0[1] + t_next * dp[1],
                                p0[2] + t_next * dp[2], prefer, grad)
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


@numba.njit(cache=True)
def _pair_direction(R_S, o_S, o_F, has_closest, pair_normal, a_is_feature, out):
    """
    Write the unit direction from a field geometry towards a feature geometry (field frame).

    Drake's normal of the pair if it has one (``pair_normal`` points from A to
    B), else the line from the field's origin to the feature's (zero if they
    coincide).
    """
    w = np.empty(3)
    if has_closest:
        sign = -1.0 if a_is_feature else 1.0
        for r in range(3):
            w[r] = sign * pair_normal[r]
    else:
        for r in range(3):
            w[r] = o_F[r] - o_S[r]
    norm = math.sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2])
    for r in range(3):
        out[r] = 0.0
        if norm > 1e-12:
            out[r] = (R_S[0, r] * w[0] + R_S[1, r] * w[1] + R_S[2, r] * w[2]) / norm


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
    """Append each pair's Drake closest point (given in A's and B's frames) where needed."""
    on_face = np.zeros(has_closest.shape[0], dtype=np.int64)
    for i in range(count):
        j = pair[i]
        if abs(phi[i] - closest_phi[j]) <= FACE_PHI_TOLERANCE and (
                normal[i, 0] * pair_normal[j, 0] + normal[i, 1] * pair_normal[j, 1]
                + normal[i, 2] * pair_normal[j, 2] > MERGE_COS):
            on_face[j] += 1
    for j in range(has_closest.shape[0]):
        if has_closest[j] and on_face[j] < 3:
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
    out = np.empty(radii.shape[0])
    for b in range(radii.shape[0]):
        w = J_w[b] @ v
        u = J_v[b] @ v
        out[b] = h * (math.sqrt(u @ u) + radii[b] * math.sqrt(w @ w))
    return out
