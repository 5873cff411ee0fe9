"""From SceneGraph's signed-distance query to a ContactSet with a contact manifold.

Drake's ``ComputeSignedDistancePairwiseClosestPoints`` returns one closest pair
per geometry pair, and one point cannot hold a face: a box resting on a table
would pivot about it.  For every pair within the detection tolerance we add
the feature points of each geometry (box vertices, cylinder rim points and
rim extremes, capsule end caps; shapes.py) tested against the exact signed
distance field of the other.  Near-duplicate points are merged.  Jacobians
come from one spatial Jacobian per body, shifted to each contact point.
"""

from __future__ import annotations

import numpy as np
from pydrake.multibody.tree import BodyIndex, JacobianWrtVariable

from quasistatic_drake.contact import ContactSet, combine_friction, tangent_directions
from quasistatic_drake.model import GeometryInfo, QuasistaticModel
from quasistatic_drake.shapes import feature_points, signed_distance

MERGE_DISTANCE = 1e-3      # [m] points of one pair closer than this are one contact
MERGE_COS = np.cos(np.deg2rad(5.0))
FACE_PHI_TOLERANCE = 1e-6  # [m]


class ContactDetector:
    """Builds the ContactSet of the model's current configuration."""

    def __init__(self, model: QuasistaticModel, n_d: int):
        self.model = model
        self.n_d = n_d

    def detect(self, tolerance: float, pairs=None) -> ContactSet:
        """Return all contacts at the model's configuration.

        ``pairs`` are SceneGraph's signed-distance pairs within ``tolerance`` at
        that configuration, when the caller already has them.
        """
        query = self.model.query_object()
        if pairs is None:
            pairs = query.ComputeSignedDistancePairwiseClosestPoints(tolerance)
        rows = []
        for pair in pairs:
            info_a = self.model.geometries[pair.id_A]
            info_b = self.model.geometries[pair.id_B]
            if not (info_a.moves or info_b.moves):
                continue
            X_WA = query.GetPoseInWorld(pair.id_A)
            X_WB = query.GetPoseInWorld(pair.id_B)
            points = _pair_manifold(pair, info_a, info_b, X_WA, X_WB, tolerance)
            rows.append((info_a, info_b, combine_friction(info_a.mu, info_b.mu), points))
        if not rows:
            return ContactSet.empty(self.model.n_v, self.n_d)
        return self._contact_set(rows)

    def _contact_set(self, rows) -> ContactSet:
        phi = np.concatenate([p[0] for *_, p in rows])
        p_A = np.vstack([p[1] for *_, p in rows])
        p_B = np.vstack([p[2] for *_, p in rows])
        normal = np.vstack([p[3] for *_, p in rows])
        counts = [len(p[0]) for *_, p in rows]
        body_a = np.repeat([a.body_index for a, *_ in rows], counts)
        body_b = np.repeat([b.body_index for _, b, *_ in rows], counts)
        J_rel = self._point_jacobians(body_b, p_B) - self._point_jacobians(body_a, p_A)
        tangents = tangent_directions(normal, self.n_d)
        J_n = np.einsum("ck,ckv->cv", normal, J_rel)
        J_f = np.einsum("cjk,ckv->cjv", tangents, J_rel).reshape(-1, self.model.n_v)
        return ContactSet(
            phi=phi, J_n=J_n, J_f=J_f,
            mu=np.repeat([mu for _, _, mu, _ in rows], counts),
            normal_W=normal, tangents_W=tangents, point_A_W=p_A, point_B_W=p_B,
            body_a=tuple(np.repeat([a.body_name for a, *_ in rows], counts)),
            body_b=tuple(np.repeat([b.body_name for _, b, *_ in rows], counts)))

    def _point_jacobians(self, bodies: np.ndarray, points_W: np.ndarray) -> np.ndarray:
        """Translational Jacobians (k, 3, n_v) of points fixed to the given bodies.

        v_P = v_Bo + w_B x (p_P - p_Bo), so J_P = J_v - [p_P - p_Bo]x J_w.
        """
        plant, context = self.model.plant, self.model.plant_context
        out = np.zeros((len(bodies), 3, self.model.n_v))
        for index in np.unique(bodies):
            body = plant.get_body(BodyIndex(int(index)))
            mask = bodies == index
            J = plant.CalcJacobianSpatialVelocity(
                context, JacobianWrtVariable.kV, body.body_frame(), np.zeros(3),
                plant.world_frame(), plant.world_frame())
            if not J.any():
                continue
            r = points_W[mask] - plant.EvalBodyPoseInWorld(context, body).translation()
            J_w, J_v = J[:3], J[3:]
            out[mask] = J_v[None] + np.cross(J_w.T[None], r[:, None, :]).transpose(0, 2, 1)
        return out


def _pair_manifold(pair, info_a: GeometryInfo, info_b: GeometryInfo, X_WA, X_WB,
                   tolerance: float):
    """Contact points of one geometry pair: (phi, p_A, p_B, n_AB), n pointing A -> B."""
    n_AB = -np.asarray(pair.nhat_BA_W)
    phi, p_A, p_B, normals = [np.zeros(0)], [np.zeros((0, 3))], [np.zeros((0, 3))], []
    if info_b.shape.has_distance_field:
        _add_features(info_a, X_WA, info_b, X_WB, n_AB, tolerance, phi, p_A, p_B, normals,
                      a_is_feature=True)
    if info_a.shape.has_distance_field:
        _add_features(info_b, X_WB, info_a, X_WA, -n_AB, tolerance, phi, p_B, p_A, normals,
                      a_is_feature=False)
    if not _covers_face(np.concatenate(phi), np.vstack(normals or [np.zeros((0, 3))]),
                        pair.distance, n_AB):
        phi.append(np.array([pair.distance]))
        p_A.append(np.atleast_2d(X_WA.multiply(pair.p_ACa)))
        p_B.append(np.atleast_2d(X_WB.multiply(pair.p_BCb)))
        normals.append(n_AB[None, :])
    return _merge(np.concatenate(phi), np.vstack(p_A), np.vstack(p_B), np.vstack(normals))


def _covers_face(phi, normals, closest_phi: float, closest_normal) -> bool:
    """True when at least three feature points lie on the closest pair's face.

    Drake's closest point of a face-on-face contact sits at an arbitrary spot of
    the overlap; its constraint is then a convex combination of the feature
    points' constraints, and leaving it in only adds an asymmetric, redundant row.
    """
    if len(phi) < 3:
        return False
    on_face = (np.abs(phi - closest_phi) <= FACE_PHI_TOLERANCE) & (
        normals @ closest_normal > MERGE_COS)
    return int(on_face.sum()) >= 3


def _add_features(feat_info, X_WF, field_info, X_WS, n_to_field, tolerance,
                  phi, p_feat, p_field, normals, a_is_feature: bool) -> None:
    """Test the feature points of one geometry against the other's distance field.

    ``n_to_field`` points from the feature geometry towards the field geometry.
    The appended normal is always A -> B.
    """
    R_WF = X_WF.rotation().matrix()
    centres_F, radii = feature_points(feat_info.shape, R_WF.T @ n_to_field)
    if not len(radii):
        return
    centres_W = centres_F @ R_WF.T + X_WF.translation()
    R_WS = X_WS.rotation().matrix()
    d, grad_S = signed_distance(field_info.shape, (centres_W - X_WS.translation()) @ R_WS)
    keep = d - radii <= tolerance
    if not keep.any():
        return
    out_W = grad_S[keep] @ R_WS.T          # outward normal of the field geometry
    c, d, r = centres_W[keep], d[keep], radii[keep]
    phi.append(d - r)
    p_feat.append(c - r[:, None] * out_W)
    p_field.append(c - d[:, None] * out_W)
    normals.append(-out_W if a_is_feature else out_W)


def _merge(phi, p_A, p_B, normals):
    """Drop points within MERGE_DISTANCE of an earlier one with a similar normal."""
    keep = []
    for i in np.argsort(phi, kind="stable"):
        close = [k for k in keep if np.linalg.norm(p_A[k] - p_A[i]) < MERGE_DISTANCE
                 and normals[k] @ normals[i] > MERGE_COS]
        if not close:
            keep.append(i)
    keep = np.array(sorted(keep), dtype=int)
    return phi[keep], p_A[keep], p_B[keep], normals[keep]
