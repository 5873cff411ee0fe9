r"""
Integration of a step: q_next from q and the step's velocities v', free bodies by their screw.

Joints (revolute, prismatic, planar...) integrate as q + h N(q) v'.  A free
body (Drake's quaternion floating joint: q = [quaternion; position],
v = [w; v_o], both in the world frame) moves with the constant twist of its
velocities over the step, the screw motion exp(h xi) of SE(3):

    R' = exp(h [w]) R,
    p' = exp(h [w]) p + V(h w) h v_s,   v_s = v_o - w x p (the twist's velocity at the origin),
    V(theta) = I + (1 - cos|theta|) / |theta|^2 [theta]
               + (|theta| - sin|theta|) / |theta|^3 [theta]^2.

So a point of the body moves along the helix of its twist, as the points of
a robot link move along the arcs its joints turn them through.  A held
object turning with the gripper that holds it (the velocities the step's
sticking contacts give it are the gripper link's twist) therefore stays
where it is held: integrating its origin along a straight line instead let
the demo's cylinder creep 0.37 mm across the fingers over the carry
(docs/contact.md, "The step").  For w = 0 both are q + h v.
This module imports neither Drake nor ROS.
"""

from __future__ import annotations

import math

import numba


# below this turn [rad] the screw's coefficients come from their series (to theta^4: error
# below 1e-18); (1 - cos theta) / theta^2 computed directly has lost all its digits at 1e-8
SERIES = 1e-3


@numba.njit(cache=True)
def screw_step(q, v, h, floating, q_next):
    """
    Overwrite each free body's coordinates in ``q_next`` by its screw motion (docstring).

    ``floating`` holds each free body's (position start, velocity start).
    """
    for k in range(floating.shape[0]):
        qs, vs = floating[k, 0], floating[k, 1]
        wx, wy, wz = h * v[vs], h * v[vs + 1], h * v[vs + 2]
        theta2 = wx * wx + wy * wy + wz * wz
        theta = math.sqrt(theta2)
        if theta < SERIES:                     # series: 1 - cos loses its digits below
            t4 = theta2 * theta2
            a = 1.0 - theta2 / 6.0 + t4 / 120.0              # sin(theta) / theta
            b = 0.5 - theta2 / 24.0 + t4 / 720.0             # (1 - cos(theta)) / theta^2
            c = 1.0 / 6.0 - theta2 / 120.0 + t4 / 5040.0     # (theta - sin(theta)) / theta^3
            half = 0.5 - theta2 / 48.0 + t4 / 3840.0         # sin(theta / 2) / theta
            cos_half = 1.0 - theta2 / 8.0 + t4 / 384.0
        else:
            a = math.sin(theta) / theta
            b = (1.0 - math.cos(theta)) / theta2
            c = (theta - math.sin(theta)) / (theta2 * theta)
            half = math.sin(0.5 * theta) / theta
            cos_half = math.cos(0.5 * theta)
        px, py, pz = q[qs + 4], q[qs + 5], q[qs + 6]
        # h v_s = h (v_o - w x p), with h w = (wx, wy, wz)
        sx = h * v[vs + 3] - (wy * pz - wz * py)
        sy = h * v[vs + 4] - (wz * px - wx * pz)
        sz = h * v[vs + 5] - (wx * py - wy * px)
        rx, ry, rz = _turned(wx, wy, wz, a, b, px, py, pz)       # R p = (I + a K + b K^2) p
        vx, vy, vz = _turned(wx, wy, wz, b, c, sx, sy, sz)       # V h v_s = (I + b K + c K^2)
        q_next[qs + 4], q_next[qs + 5], q_next[qs + 6] = rx + vx, ry + vy, rz + vz
        # the orientation: the unit quaternion of exp(h [w]), times q's (world-frame twist)
        rw, rx, ry, rz = cos_half, half * wx, half * wy, half * wz
        qw, qx, qy, qz = q[qs], q[qs + 1], q[qs + 2], q[qs + 3]
        nw = rw * qw - rx * qx - ry * qy - rz * qz
        nx = rw * qx + rx * qw + ry * qz - rz * qy
        ny = rw * qy - rx * qz + ry * qw + rz * qx
        nz = rw * qz + rx * qy - ry * qx + rz * qw
        norm = math.sqrt(nw * nw + nx * nx + ny * ny + nz * nz)
        q_next[qs], q_next[qs + 1], q_next[qs + 2], q_next[qs + 3] = \
            nw / norm, nx / norm, ny / norm, nz / norm


@numba.njit(cache=True)
def _turned(wx, wy, wz, a, b, x, y, z):
    """Return (I + a K + b K^2) (x, y, z), K = [w]: x + a w x (x) + b w x (w x (x))."""
    cx, cy, cz = wy * z - wz * y, wz * x - wx * z, wx * y - wy * x
    ccx, ccy, ccz = wy * cz - wz * cy, wz * cx - wx * cz, wx * cy - wy * cx
    return x + a * cx + b * ccx, y + a * cy + b * ccy, z + a * cz + b * ccz


@numba.njit(cache=True)
def screw_velocity_jacobian(q, v, h, floating, step, out):
    """
    Overwrite each free body's rows of ``out`` (n_q x n_v) by d q_next / dv of its screw.

    Central differences of :func:`screw_step` at +-``step`` in each of the
    body's six velocities; a free body's coordinates depend on no other
    velocity (its rows are zero elsewhere).
    """
    plus, minus, w = q.copy(), q.copy(), v.copy()
    for k in range(floating.shape[0]):
        qs, vs = floating[k, 0], floating[k, 1]
        body = floating[k:k + 1]
        out[qs:qs + 7, :] = 0.0
        for j in range(vs, vs + 6):
            w[j] = v[j] + step
            screw_step(q, w, h, body, plus)
            w[j] = v[j] - step
            screw_step(q, w, h, body, minus)
            w[j] = v[j]
            for i in range(qs, qs + 7):
                out[i, j] = (plus[i] - minus[i]) / (2.0 * step)
