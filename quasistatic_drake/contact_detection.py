"""
From SceneGraph's signed-distance query to a ContactSet with a contact manifold.

Drake's ``ComputeSignedDistancePairwiseClosestPoints`` returns one closest pair
per geometry pair, and one point cannot hold a face: a box resting on a table
would pivot about it.  For every pair within the detection tolerance we add
the feature points of each geometry (box vertices, cylinder rim points and
rim extremes, capsule end caps, convex hull vertices; shapes.py) tested
against the signed distance field of the other (exact for primitives; for a
convex mesh the largest distance to its face planes), and against a box or
a convex mesh also the points where the other's edges cross between its
face planes (box and hull edges: a table's top edge under an overhanging
box).  Near-duplicate points are merged.  All pairs' points go
through one compiled kernel (manifold.py), and the Jacobians come from one
spatial Jacobian per body, shifted to each contact point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple, Optional

import numpy as np

from quasistatic_drake.contact import (combine_friction, ContactSet, planar_tangents,
                                       tangent_directions)
from quasistatic_drake.manifold import (box_box_pairs, contact_jacobians, pair_manifolds,
                                        point_signed_distance)
from quasistatic_drake.model import QuasistaticModel
from quasistatic_drake.shapes import (BOX, CAPSULE, CONVEX, CYLINDER, face_planes,
                                      feature_edges, feature_points, HALFSPACE, SPHERE)


class PairProximity(NamedTuple):
    """
    Stands in for Drake's SignedDistancePair: a box-box pair, or a pair Drake failed on.

    A NamedTuple, not a dataclass: a step builds several (the engine's box
    pairs) at each of its two or three proximity queries.

    Box-box pairs are measured by the engine (:func:`box_proximity`), with
    witness points and an exact normal.

    Drake's query can fail on exactly touching boxes (:func:`drake_query`);
    such a pair has no closest points (``nhat_BA_W`` is None) and relies on its
    feature points, as does a pair for which Drake returns a NaN normal (a
    cylinder standing exactly on a box, for one).
    """

    id_A: object
    id_B: object
    distance: float = np.nan
    p_ACa: Optional[np.ndarray] = None
    p_BCb: Optional[np.ndarray] = None
    nhat_BA_W: Optional[np.ndarray] = None
    exact_normal: bool = False     # measured by the engine (box_proximity): trust its normal
    centred: bool = False          # boxes centred on each other: the normal's way is a tie


class DrakeQueryFailure(RuntimeError):
    """One of Drake's geometry queries failed an internal check (see :func:`drake_query`)."""


def drake_query(query, *args):
    """
    Call one of SceneGraph's QueryObject methods; raise DrakeQueryFailure if Drake cannot.

    Drake raises RuntimeError (FCL's GJK/EPA throwing on exactly touching
    boxes), and its internal assertions reach Python as ``SystemExit`` with a
    message starting "Failure at" (for one, BoxBoxGradient's check that the
    witness points of two boxes with |distance| < 1e-14 coincide, which round-off
    in the boxes' orientations breaks).  Both become DrakeQueryFailure, so no
    geometry query can end the process; a genuine SystemExit passes through.
    """
    try:
        return query(*args)
    except RuntimeError as err:
        raise DrakeQueryFailure(str(err)) from err
    except SystemExit as err:
        if not str(err).startswith("Failure at"):
            raise
        raise DrakeQueryFailure(str(err)) from err


def proximity_pairs(model: QuasistaticModel, tolerance: float,
                    motion: Optional[np.ndarray] = None) -> list:
    """
    Return the signed-distance pairs within ``tolerance`` at the model's configuration.

    ``motion``, the commanded generalised velocity if known, settles which
    way boxes centred on each other come apart (:func:`box_proximity`).

    Box-box pairs are measured here (:func:`box_proximity`): Drake can abort
    the process on touching boxes, so the model hides them from Drake.  The
    other pairs come from SceneGraph's pairwise query; if Drake fails
    (:func:`drake_query`), each candidate pair whose bounding spheres come
    within the tolerance is queried on its own, and a pair that still fails
    becomes a :class:`PairProximity` without closest points: its feature
    points carry it.
    """
    query = model.query_object()
    try:
        pairs = list(drake_query(query.ComputeSignedDistancePairwiseClosestPoints, tolerance))
    except DrakeQueryFailure:
        pairs = _pairs_one_by_one(model, query, tolerance)
    return pairs + box_proximity(model, query, tolerance, motion)


def _pairs_one_by_one(model: QuasistaticModel, query, tolerance: float) -> list:
    """Query Drake pair by pair (not box-box); a pair Drake fails on has no closest points."""
    boxes = set(model.box_pairs.pairs)
    pairs = []
    for id_a, id_b in model.candidate_pairs:
        if (id_a, id_b) in boxes:
            continue
        reach = (model.geometries[id_a].shape.bounding_radius
                 + model.geometries[id_b].shape.bounding_radius + tolerance)
        gap = query.GetPoseInWorld(id_a).translation() - query.GetPoseInWorld(id_b).translation()
        if np.isfinite(reach) and gap @ gap > reach * reach:
            continue
        try:
            pair = drake_query(query.ComputeSignedDistancePairClosestPoints, id_a, id_b)
        except DrakeQueryFailure:
            pairs.append(PairProximity(id_a, id_b))
            continue
        if pair.distance <= tolerance:
            pairs.append(pair)
    return pairs


def box_proximity(model: QuasistaticModel, query, tolerance: float,
                  motion: Optional[np.ndarray] = None) -> list:
    """
    Return the box-box pairs within ``tolerance``, measured by manifold.box_box_pairs.

    ``motion`` is the commanded generalised velocity, if known.  A pair of
    boxes centred on each other along their axis of least overlap (pads
    buried exactly halfway through a table) is measured again with it: its
    way out is the way it is commanded to move (issue 31, defect 14).
    """
    table = model.box_pairs
    if not table.pairs:
        return []
    R, o = table.static_R.copy(), table.static_o.copy()      # welded boxes: set once
    for k in table.moving:
        X = model.geometry_pose(table.ids[k])
        R[k], o[k] = X[:, :3], X[:, 3]
    drift = np.zeros_like(o)
    distance, p_A, p_B, nhat, tied = box_box_pairs(R, o, table.half, table.slot_a,
                                                   table.slot_b, tolerance, drift)
    if motion is not None and tied.any() and np.any(tied & (distance <= tolerance)):
        _commanded_drift(model, table, o, motion, drift)
        distance, p_A, p_B, nhat, tied = box_box_pairs(R, o, table.half, table.slot_a,
                                                       table.slot_b, tolerance, drift)
    return [PairProximity(a, b, distance[k], p_A[k], p_B[k], nhat[k], exact_normal=True,
                          centred=bool(tied[k]))
            for k, (a, b) in enumerate(table.pairs) if distance[k] <= tolerance]


def _commanded_drift(model: QuasistaticModel, table, o: np.ndarray, motion: np.ndarray,
                     out: np.ndarray) -> None:
    """Write the velocity of each moving box's centre ``o`` under the velocities ``motion``."""
    J_w, J_v, origins = model.body_jacobians()
    for k in table.moving:
        row = model.moving_slot[model.geometries[table.ids[k]].body_index]
        out[k] = J_v[row] @ motion + np.cross(J_w[row] @ motion, o[k] - origins[row])


@dataclass(frozen=True)
class _PairPlan:
    """The fixed part of one geometry pair's blocks (feature points vs a field)."""

    a_is_feature: np.ndarray     # (b,) which geometry carries the features
    feature_kind: np.ndarray     # (b,)
    feature_params: np.ndarray   # (b, 5)
    field_kind: np.ndarray       # (b,)
    field_params: np.ndarray     # (b, 5)
    field_planes: np.ndarray     # (b, 2) the field's (start, count) in the detector's planes
    counts: np.ndarray           # (b,) feature points per block
    centres: np.ndarray          # (k, 3) feature centres, each in its geometry's frame
    radii: np.ndarray            # (k,)
    edge_counts: np.ndarray      # (b,) feature edges per block (against convex fields only)
    edges: np.ndarray            # (e, 2, 3) their endpoints, each in its geometry's frame


@dataclass(frozen=True)
class _Layout:
    """What a step's contact arrays need that depends only on the set of geometry pairs."""

    static_poses: np.ndarray    # (k, 3, 4) X_WG of each slot's geometry if welded, else 0
    moving_slots: list          # (slot, geometry id) of the geometries that move
    slot_A: np.ndarray          # per pair
    slot_B: np.ndarray
    blocks: tuple               # the block arrays of pair_manifolds
    body_A: np.ndarray          # per pair: row of model.body_jacobians(), -1 if static
    body_B: np.ndarray
    mu: np.ndarray              # per pair, combined by Drake's rule
    name_A: np.ndarray          # per pair, "model::body"
    name_B: np.ndarray
    geometry_A: np.ndarray      # per pair, GeometryInfo.index
    geometry_B: np.ndarray


_LAYOUT_CACHE_SIZE = 256
POLYHEDRA = (BOX, CONVEX)   # shapes with face planes
# Fields that other shapes' edges are tested against: crossings between face planes
# (polyhedra), or an edge's deepest point on a curved side (cylinders, capsules).
EDGE_FIELDS = (BOX, CONVEX, CYLINDER, CAPSULE)


class ContactDetector:
    """Builds the ContactSet of the model's current configuration."""

    def __init__(self, model: QuasistaticModel, n_d: int):
        """Use ``n_d`` friction directions per contact."""
        self.model = model
        self.n_d = n_d
        self._layouts: dict = {}
        self._planes, self._plane_range = _plane_table(model.geometries)

    def detect(self, tolerance: float, pairs=None) -> ContactSet:
        """
        Return all contacts at the model's configuration.

        ``pairs`` are :func:`proximity_pairs` within ``tolerance`` at that
        configuration, when the caller already has them.
        """
        if pairs is None:
            pairs = proximity_pairs(self.model, tolerance)
        read = _read_pairs(pairs, self.model.geometries, self.model.query_object())
        if read is None:
            return ContactSet.empty(self.model.n_v, self.n_d)
        key, ids, has, phi_c, nhat_BA, on_a, on_b = read
        layout = self._layout(key, ids)
        R, o = self._geometry_poses(layout)
        phi, p_A, p_B, normal, pair = pair_manifolds(
            R, o, layout.slot_A, layout.slot_B, -nhat_BA, has, phi_c, on_a, on_b,
            *layout.blocks, tolerance)
        J_w, J_v, origins = self.model.body_jacobians()
        plane = self.model.motion_plane_normal
        tangents = (tangent_directions(normal, self.n_d) if plane is None
                    else planar_tangents(normal, plane))
        J_n, J_f = contact_jacobians(p_A, p_B, normal, tangents, layout.body_A[pair],
                                     layout.body_B[pair], J_w, J_v, origins)
        slot_A, slot_B = layout.slot_A[pair], layout.slot_B[pair]
        return ContactSet(
            phi=phi, J_n=J_n, J_f=J_f, mu=layout.mu[pair], normal_W=normal,
            tangents_W=tangents, point_A_W=p_A, point_B_W=p_B,
            body_a=tuple(layout.name_A[pair]), body_b=tuple(layout.name_B[pair]),
            geometry_a=layout.geometry_A[pair], geometry_b=layout.geometry_B[pair],
            local_a=np.einsum("kji,kj->ki", R[slot_A], p_A - o[slot_A]),
            local_b=np.einsum("kji,kj->ki", R[slot_B], p_B - o[slot_B]))

    def _geometry_poses(self, layout: _Layout) -> tuple[np.ndarray, np.ndarray]:
        """Return R (k x 3 x 3) and o (k x 3) of the layout's geometries in the world."""
        poses = layout.static_poses.copy()
        for slot, geometry in layout.moving_slots:
            poses[slot] = self.model.geometry_pose(geometry)
        return np.ascontiguousarray(poses[:, :, :3]), np.ascontiguousarray(poses[:, :, 3])

    def _layout(self, key: tuple, ids: tuple) -> _Layout:
        """
        Return the arrays that depend only on which geometry pairs are present (cached).

        ``key`` names the pairs by GeometryInfo.index, ``ids`` by GeometryId.
        """
        layout = self._layouts.get(key)
        if layout is None:
            if len(self._layouts) >= _LAYOUT_CACHE_SIZE:
                self._layouts.clear()
            layout = self._layouts[key] = self._build_layout(ids)
        return layout

    def _build_layout(self, key: tuple) -> _Layout:
        geometries, slot_of_body = self.model.geometries, self.model.moving_slot
        slots = {}
        for id_a, id_b in key:
            slots.setdefault(id_a, len(slots))
            slots.setdefault(id_b, len(slots))
        slot_A = np.array([slots[a] for a, _ in key], dtype=np.int64)
        slot_B = np.array([slots[b] for _, b in key], dtype=np.int64)
        info_A = [geometries[a] for a, _ in key]
        info_B = [geometries[b] for _, b in key]
        query = self.model.query_object()
        return _Layout(
            static_poses=np.array([np.zeros((3, 4)) if geometries[g].moves
                                   else query.GetPoseInWorld(g).GetAsMatrix34() for g in slots]),
            moving_slots=[(k, g) for g, k in slots.items() if geometries[g].moves],
            slot_A=slot_A, slot_B=slot_B,
            blocks=self._blocks([self._plan(a, b) for a, b in key], slot_A, slot_B,
                                self._planes),
            body_A=np.array([slot_of_body.get(g.body_index, -1) for g in info_A], np.int64),
            body_B=np.array([slot_of_body.get(g.body_index, -1) for g in info_B], np.int64),
            mu=np.array([combine_friction(a.mu, b.mu) for a, b in zip(info_A, info_B)]),
            name_A=np.array([g.body_name for g in info_A], dtype=object),
            name_B=np.array([g.body_name for g in info_B], dtype=object),
            geometry_A=np.array([g.index for g in info_A], dtype=np.int64),
            geometry_B=np.array([g.index for g in info_B], dtype=np.int64))

    def _plan(self, id_a, id_b) -> _PairPlan:
        geometries = self.model.geometries
        blocks = []
        for feat, field, a_is_feature in ((id_a, id_b, True), (id_b, id_a, False)):
            centres, radii = feature_points(geometries[feat].shape)
            edges = (feature_edges(geometries[feat].shape)
                     if geometries[field].shape.kind in EDGE_FIELDS else np.zeros((0, 2, 3)))
            if geometries[field].shape.has_distance_field and (
                    len(radii) or geometries[feat].shape.kind == CYLINDER):
                blocks.append((geometries[feat].shape, geometries[field].shape,
                               a_is_feature, centres, radii,
                               self._plane_range.get(field, (0, 0)), edges))
        return _PairPlan(
            a_is_feature=np.array([b[2] for b in blocks], dtype=np.bool_),
            feature_kind=np.array([b[0].kind for b in blocks], dtype=np.int64),
            feature_params=np.array([b[0].params for b in blocks]).reshape(-1, 5),
            field_kind=np.array([b[1].kind for b in blocks], dtype=np.int64),
            field_params=np.array([b[1].params for b in blocks]).reshape(-1, 5),
            field_planes=np.array([b[5] for b in blocks], dtype=np.int64).reshape(-1, 2),
            counts=np.array([len(b[4]) for b in blocks], dtype=np.int64),
            centres=np.vstack([b[3] for b in blocks] or [np.zeros((0, 3))]),
            radii=np.concatenate([b[4] for b in blocks] or [np.zeros(0)]),
            edge_counts=np.array([len(b[6]) for b in blocks], dtype=np.int64),
            edges=np.concatenate([b[6] for b in blocks] or [np.zeros((0, 2, 3))]))

    @staticmethod
    def _blocks(plans, slot_A, slot_B, planes) -> tuple:
        """Return the block arrays of pair_manifolds for the pairs' plans, then ``planes``."""
        block_pair = np.repeat(np.arange(len(plans)), [len(p.counts) for p in plans])
        a_is_feature = np.concatenate([p.a_is_feature for p in plans])
        counts = np.concatenate([p.counts for p in plans])
        edge_counts = np.concatenate([p.edge_counts for p in plans])
        return (block_pair,
                np.where(a_is_feature, slot_A[block_pair], slot_B[block_pair]),
                np.where(a_is_feature, slot_B[block_pair], slot_A[block_pair]),
                a_is_feature,
                np.concatenate([p.feature_kind for p in plans]),
                np.concatenate([p.feature_params for p in plans]),
                np.concatenate([p.field_kind for p in plans]),
                np.concatenate([p.field_params for p in plans]),
                np.concatenate([p.field_planes for p in plans]),
                np.concatenate([[0], np.cumsum(counts)]),
                np.concatenate([p.centres for p in plans]),
                np.concatenate([p.radii for p in plans]),
                np.concatenate([[0], np.cumsum(edge_counts)]).astype(np.int64),
                np.ascontiguousarray(np.concatenate([p.edges for p in plans])),
                planes)


def _plane_table(geometries) -> tuple[np.ndarray, dict]:
    """
    Stack the face planes of every box and convex mesh into one array for pair_manifolds.

    Returns the planes (m x 4) and, per GeometryId of a box or convex mesh,
    its rows as (start, count).
    """
    stacked, ranges, start = [], {}, 0
    for gid, info in geometries.items():
        if info.shape.kind in POLYHEDRA:
            planes = face_planes(info.shape)
            stacked.append(planes)
            ranges[gid] = (start, len(planes))
            start += len(planes)
    planes = np.vstack(stacked) if stacked else np.zeros((0, 4))
    return np.ascontiguousarray(planes, dtype=float), ranges


def _read_pairs(pairs, geometries, query) -> Optional[tuple]:
    """
    Read Drake's pairs once: the pairs with a moving geometry, in order, as arrays.

    Returns None when no pair involves a moving geometry, else the layout key
    (GeometryInfo indices per pair), the GeometryId pairs, whether the pair
    has a usable closest point (:func:`_trusted_normal`), phi, the normal
    B -> A, and the closest points in A's and B's geometry frames.  A pair
    without a usable closest point relies on its feature points alone
    (pair_manifolds).
    """
    rows = []
    for p in pairs:
        id_a, id_b = p.id_A, p.id_B
        info_a, info_b = geometries[id_a], geometries[id_b]
        if not (info_a.moves or info_b.moves):
            continue
        nhat = _trusted_normal(p, info_a.shape, info_b.shape, query)
        usable = nhat is not None
        rows.append(((info_a.index, info_b.index), (id_a, id_b), usable,
                     p.distance if usable else np.inf, nhat if usable else _ZERO,
                     p.p_ACa if usable else _ZERO, p.p_BCb if usable else _ZERO))
    if not rows:
        return None
    key, ids, has, phi, nhat, on_a, on_b = zip(*rows)
    return (key, ids, np.array(has, dtype=np.bool_), np.array(phi), np.array(nhat),
            np.array(on_a), np.array(on_b))


NORMAL_TRUST_DISTANCE = 1e-6   # [m] below this, GJK/EPA's normal is round-off (_trusted_normal)
_EXACT_WITH_SPHERE = (BOX, SPHERE, CYLINDER, CAPSULE, HALFSPACE)
_CURVED = (CYLINDER, CAPSULE)


def _trusted_normal(pair, shape_a, shape_b, query) -> Optional[np.ndarray]:
    """
    Return the pair's normal B -> A where it can be trusted, else None.

    Drake computes a sphere against a primitive exactly, and the engine two
    boxes (:func:`box_proximity`); other pairs go through FCL's
    GJK/EPA, whose normal (p_WCa - p_WCb) / distance is round-off when the
    distance is tiny: a mesh resting on a slab at 2e-14 m got a horizontal
    normal and was pushed sideways.  Below NORMAL_TRUST_DISTANCE such a pair
    takes its normal from the exact field of its cylinder or capsule at the
    other's witness point (a box's edge across a lying cylinder), and a pair
    of polyhedra has none: its vertices and edge crossings hold it.
    """
    nhat = pair.nhat_BA_W
    if nhat is None or not math.isfinite(nhat[0] + nhat[1] + nhat[2]):
        return None
    kinds = (shape_a.kind, shape_b.kind)
    exact = (getattr(pair, 'exact_normal', False)
             or (SPHERE in kinds and set(kinds) <= set(_EXACT_WITH_SPHERE)))
    if exact or abs(pair.distance) >= NORMAL_TRUST_DISTANCE:
        return nhat
    if shape_b.kind in _CURVED:
        return _field_normal(shape_b, query.GetPoseInWorld(pair.id_B),
                             query.GetPoseInWorld(pair.id_A) @ pair.p_ACa)
    if shape_a.kind in _CURVED:
        return -_field_normal(shape_a, query.GetPoseInWorld(pair.id_A),
                              query.GetPoseInWorld(pair.id_B) @ pair.p_BCb)
    return None


def _field_normal(shape, X_WG, p_W) -> np.ndarray:
    """Return the outward gradient (world frame) of a shape's distance field at p_W."""
    R_WG = X_WG.rotation().matrix()
    p_G = R_WG.T @ (p_W - X_WG.translation())
    grad = np.empty(3)
    point_signed_distance(shape.kind, shape.params, shape.planes, p_G[0], p_G[1], p_G[2], grad)
    return R_WG @ grad


_ZERO = np.zeros(3)
