"""
Contact modes of eq. 23 as binaries: the candidate modes the DAQP backend tries before its search.

Pang & Tedrake 2018, eq. 23d: each row k of w = R y + b (eq. 23b) pairs with
lambda_k; z_k = 0 closes the row (w_k = 0, lambda_k free), z_k = 1 opens it
(lambda_k = 0).  The N = 2 n_c + n_d binaries are [phi rows; rho rows; s
rows] (miqp.py).  A contact point has three kinds of mode:

* open: phi_next free, P_n = 0 (z_phi = 1); P_f = 0 (every z_rho = 1);
  Gamma free (z_s = 0, s = mu P_n - sum P_f = 0 holds);
* sticking: phi_next = 0 (z_phi = 0); rho = 0 in every direction (z_rho =
  0, so Gamma = 0 and J_f x = 0); s free (z_s = 1, Gamma = 0);
* sliding along -d_j: phi_next = 0, rho_j = 0 (the friction direction j
  most opposed to the motion), the other directions open, s = 0 (z_s = 0:
  on the cone's edge, Gamma the sliding distance).

The points that join the same two bodies (one row block of eq. 23f) form a
pair; a pair's mode applies to its nearest points (``nearest_points``: within
the tolerance of contact or of the pair's nearest point; the others are open).
Where the big-M relaxation says nothing (every z at 1/2, the grasp and the
set-down: docs/formulations.md), the answer is one of few pair modes: the
fingers stick and the table lets go.  ``candidate_modes`` lists them in the
order of how many pairs differ from a base mode (the relaxation's motion),
a deterministic, bounded list.
"""

from __future__ import annotations

from itertools import combinations, product
from typing import Iterator

import numpy as np

from quasistatic_drake.formulations.miqp_data import MiqpData
from quasistatic_drake.formulations.miqp_points import directions as directions_per_point

OPEN, STICK, SLIDE = 0, 1, 2      # a pair's modes (its nearest points')


def contact_pairs(data: MiqpData) -> list[np.ndarray]:
    """Return the points of each body pair (equal rows of eq. 23f's pair sums), in order."""
    S = data.A_lb[:, data.n_v:data.n_v + data.n_c] != 0.0
    pairs, seen = [], np.zeros(data.n_c, dtype=bool)
    for i in range(data.n_c):
        if not seen[i]:
            members = np.flatnonzero(S[i]) if S[i].any() else np.array([i])
            seen[members] = True
            pairs.append(members)
    return pairs


def tangential_motion(data: MiqpData, x: np.ndarray) -> np.ndarray:
    """Return J_f x per point and friction direction, shape (n_c, n_d / n_c) (eq. 23b, rho)."""
    n_c, n_d = data.n_c, data.n_d
    return (data.R[n_c:n_c + n_d, :data.n_v] @ x).reshape(n_c, directions_per_point(data))


def mode_binaries(data: MiqpData, point_modes: np.ndarray, slide_to: np.ndarray) -> np.ndarray:
    """
    Return z (eq. 23d) for a mode per point (OPEN, STICK, SLIDE; module docstring).

    ``slide_to[i]``: the friction direction whose rho row closes where point i slides.
    """
    n_c = data.n_c
    z_phi = (point_modes == OPEN).astype(float)
    z_rho = np.ones((n_c, directions_per_point(data)))
    z_rho[point_modes == STICK] = 0.0
    sliding = np.flatnonzero(point_modes == SLIDE)
    z_rho[sliding, slide_to[sliding]] = 0.0
    z_s = (point_modes == STICK).astype(float)
    return np.concatenate([z_phi, z_rho.ravel(), z_s])


def motion_modes(data: MiqpData, x: np.ndarray, tolerance: float) -> np.ndarray:
    """
    Return each point's mode under the motion x (Pang & Tedrake 2018, eq. 23's binaries).

    Open where phi + J_n x exceeds ``tolerance``, sticking where |J_f x| is
    within it, else sliding.
    """
    n_c = data.n_c
    phi_next = data.b[:n_c] + data.R[:n_c, :data.n_v] @ x
    slip = np.max(np.abs(tangential_motion(data, x)), axis=1, initial=0.0)
    modes = np.where(slip <= tolerance, STICK, SLIDE)
    return np.where(phi_next > tolerance, OPEN, modes)


def motion_binaries(data: MiqpData, x: np.ndarray, tolerance: float) -> np.ndarray:
    """
    Return z (eq. 23d) of the mode the motion x has, tied friction directions closed together.

    Pang & Tedrake 2018, eq. 23b-d with the pyramid's directions: a point
    sliding along a sector's edge (two directions equally opposed to its
    slip) has rho = 0 on both, and its friction may lie between them.  Open,
    sticking or sliding as ``motion_modes``; a sliding point closes every
    rho row within ``tolerance`` of its most opposed one.  The cold finger
    push of test_miqp_gradients slides two table points along such edges:
    one direction each (``mode_binaries``) gives a mode infeasible at
    Gurobi's own motion, the ties give Gurobi's mode (test_miqp_modes.py).
    """
    n_c = data.n_c
    modes = motion_modes(data, x, tolerance)
    t = tangential_motion(data, x)
    tied = t <= np.min(t, axis=1, keepdims=True, initial=np.inf) + tolerance
    z_rho = np.ones_like(t)
    z_rho[modes == STICK] = 0.0
    sliding = modes == SLIDE
    z_rho[sliding] = np.where(tied[sliding], 0.0, 1.0)
    return np.concatenate([(modes == OPEN).astype(float), z_rho.ravel(),
                           (modes == STICK).astype(float)]) if n_c else np.zeros(0)


def pair_mode_points(data: MiqpData, pair: np.ndarray, mode: int,
                     touching: np.ndarray) -> np.ndarray:
    """Return the pair's points' modes for a pair mode: its touching points take it."""
    return np.where(touching[pair], mode, OPEN)


def nearest_points(phi: np.ndarray, pairs: list, band: float) -> np.ndarray:
    """
    Return per point whether a pair mode closes it: near contact or near its pair's nearest.

    A pair whose points are all apart (a held object's table, 19 mm below
    at the release of Pang & Tedrake 2018's Sec. V-A) can still land in one
    step: its nearest points take the pair's closed modes.  A patch's
    farther points (a pad's far edge, 3.5 mm off a cylinder) stay open.
    """
    near = phi <= band
    for members in pairs:
        near[members] |= phi[members] <= np.min(phi[members]) + band
    return near


def candidate_modes(data: MiqpData, x: np.ndarray, x_command: np.ndarray,
                    tolerance: float, touch: float, limit: int) -> Iterator[np.ndarray]:
    """
    Yield at most ``limit`` distinct z (eq. 23d), pair modes nearest the motion x's first.

    The point modes of ``point_mode_variations``; a sliding point slides
    against its tangential motion under x, or under ``x_command`` (the
    robots at their command, the objects still) where x does not move it.
    """
    slide_to = slide_directions(data, x, x_command, tolerance, 1)[:, 0]
    for modes in point_mode_variations(data, x, tolerance, touch, limit):
        yield mode_binaries(data, modes, slide_to)


def point_mode_variations(data: MiqpData, x: np.ndarray, tolerance: float, touch: float,
                          limit: int) -> Iterator[np.ndarray]:
    """
    Yield at most ``limit`` distinct point modes (OPEN, STICK, SLIDE per point), x's first.

    The base is ``motion_modes(x)``; then every pair takes OPEN, STICK or
    SLIDE (its points within ``touch`` of contact or of the pair's nearest
    point, ``nearest_points``), one pair changed, then two, ...  A
    deterministic list, bounded by ``limit``.
    """
    pairs = contact_pairs(data)
    touching = nearest_points(data.b[:data.n_c], pairs, touch)
    base = motion_modes(data, x, tolerance)
    seen = set()
    for modes in _pair_variations(data, pairs, base, touching):
        key = modes.tobytes()
        if key in seen:
            continue
        seen.add(key)
        yield modes
        if len(seen) >= limit:
            return


def slide_directions(data: MiqpData, x: np.ndarray, x_command: np.ndarray,
                     tolerance: float, count: int) -> np.ndarray:
    """
    Return per point its ``count`` friction directions most opposed to its slip, most first.

    The slip is J_f x, or J_f x_command where x does not move the point;
    shape (n_c, count).  With two, they are the pyramid's sector that a
    sliding point's friction lies in, when x's slip is the solution's.
    """
    t = tangential_motion(data, x)
    t_cmd = tangential_motion(data, x_command)
    moving = np.max(np.abs(t), axis=1, initial=0.0) > tolerance
    order = np.where(moving[:, None], np.argsort(t, axis=1, kind="stable"),
                     np.argsort(t_cmd, axis=1, kind="stable"))
    return order[:, :count].astype(int)


def free_directions(data: MiqpData, modes: np.ndarray, directions: np.ndarray) -> np.ndarray:
    """
    Return a mask over z (eq. 23d): the rho binaries of ``directions`` at sliding points.

    Pang & Tedrake 2018, eq. 23b-d: a point sliding along a sector of the
    pyramid closes the rho row of one or both of the sector's directions
    (``motion_binaries``); left binary, a branch and bound chooses.
    """
    per = directions_per_point(data)
    free = np.zeros(data.n_binaries, dtype=bool)
    sliding = np.flatnonzero(modes == SLIDE)
    free[(data.n_c + per * sliding[:, None] + directions[sliding]).ravel()] = True
    return free


def _pair_variations(data: MiqpData, pairs: list, base: np.ndarray,
                     touching: np.ndarray) -> Iterator[np.ndarray]:
    """Yield point modes: the base, then 1, 2, ... pairs set to another pair mode."""
    yield base
    for changed in range(1, len(pairs) + 1):
        for chosen in combinations(range(len(pairs)), changed):
            for kinds in product((STICK, OPEN, SLIDE), repeat=changed):
                modes = base.copy()
                for p, kind in zip(chosen, kinds):
                    modes[pairs[p]] = pair_mode_points(data, pairs[p], kind, touching)
                yield modes
