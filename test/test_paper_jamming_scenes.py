"""Check the hand-built scenes of Halm & Posa, Sec. 6 and Fig. 2 (apps/paper_jamming_scenes.py)."""

import itertools
import math

import numpy as np
import pytest

from quasistatic_drake.apps import paper_jamming_scenes as scenes
from quasistatic_drake.formulations.lcp_math import finite_feedback_lcp, step_displacements

EXAMPLE_NAMES = tuple(scenes.EXAMPLES)
# The (x, y) columns of every body in q = [q_o; q_m], per example.
TRANSLATION_COLUMNS = {
    "disk_even": ((0, 1), (3, 4), (5, 6)),
    "disk_lopsided": ((0, 1), (3, 4), (5, 6)),
    "disk_semicircle": ((0, 1), (3, 4), (5, 6)),
    "disk_wall": ((0, 1), (3, 4), (5, 6)),
    "peg_in_hole": ((0, 1), (3, 4), (6, 7)),
    "square_squeeze": ((0, 1), (3, 4), (5, 6), (7, 8), (9, 10)),
}


def phi_of(example, q):
    """Return phi at q = [q_o; q_m]."""
    return example.contacts(q[:3], q[3:]).phi


def jacobian_of(example, q):
    """Return [J_n_o, J_n_m] at q."""
    contacts = example.contacts(q[:3], q[3:])
    return np.hstack([contacts.J_n_o, contacts.J_n_m])


def central_difference(example, q, direction, eps=1e-6):
    """Return d phi / d eps along a direction, by central differences."""
    step = eps * direction
    return (phi_of(example, q + step) - phi_of(example, q - step)) / (2 * eps)


def initial_q(example):
    """Return [q_o0; q_m0]."""
    return np.concatenate([example.q_o0, example.q_m0])


def peg_row_geometry(q):
    """Return (vertex, owner, base) per peg row, in polyGeometry.m's order, and the names."""
    rows, names = [], []
    bodies = scenes.PEG_BODIES
    for i in range(scenes.PEG_MOBILE):
        for j in range(i + 1, len(bodies)):
            for body, base in ((bodies[i], bodies[j]), (bodies[j], bodies[i])):
                for k, vertex in enumerate(body.world_vertices(q)):
                    rows.append((vertex, body, base))
                    names.append(f"{body.name}[{k}] vs {base.name}")
    return rows, tuple(names)


def deepest_edge(point, base, q):
    """Return the index of the base's edge whose plane the point is deepest beyond."""
    n, b = scenes.edge_planes(base.world_vertices(q))
    return int(np.argmax(n @ point - b))


def in_corner_region(point, base, q):
    """Return whether the point lies outside the base, nearest to one of its corners."""
    n, b = scenes.edge_planes(base.world_vertices(q))
    phi = float(np.max(n @ point - b))
    if phi <= 0:
        return False
    closest = scenes.closest_boundary_point(point, base.world_vertices(q))
    return np.linalg.norm(point - closest) > phi + 1e-9


def lcp_solutions(M, w, tol=1e-9):
    """
    Return every LCP(M, w) solution z found by enumerating complementary index sets.

    For each support S (2^n of them) solve M_SS z_S = -w_S with the
    pseudo-inverse and keep z if z >= 0, (M z + w)_S = 0 and M z + w >= 0.
    Complete where M_SS is nonsingular; with singular M_SS it finds the
    least-norm point of each face only.
    """
    n = len(w)
    scale = tol * max(1.0, np.abs(w).max())
    found = []
    for k in range(n + 1):
        supports = np.array(list(itertools.combinations(range(n), k)), dtype=int)
        Z = np.zeros((len(supports), n))
        if k:
            blocks = M[supports[:, :, None], supports[:, None, :]]
            z_S = -np.einsum('cij,cj->ci', np.linalg.pinv(blocks), w[supports])
            Z[np.arange(len(supports))[:, None], supports] = z_S
        R = Z @ M.T + w
        on_support = np.zeros_like(Z, dtype=bool)
        if k:
            on_support[np.arange(len(supports))[:, None], supports] = True
        ok = ((Z >= -scale).all(axis=1) & (R >= -scale).all(axis=1)
              & (np.where(on_support, np.abs(R), 0.0) <= scale).all(axis=1))
        found.extend(Z[ok])
    return found


# --------------------------------------------------------------------------- Jacobians


def disk_like_configurations(name, rng):
    """Return the initial q and three random nearby ones (fingers off the centre)."""
    q0 = initial_q(scenes.EXAMPLES[name]())
    return [q0] + [q0 + rng.normal(scale=0.3, size=len(q0)) for _ in range(3)]


@pytest.mark.parametrize("name", ["disk_even", "disk_lopsided", "disk_semicircle",
                                  "disk_wall", "square_squeeze"])
def test_normal_rows_are_dphi_dq(name):
    rng = np.random.default_rng(7)
    example = scenes.EXAMPLES[name]()
    for q in disk_like_configurations(name, rng):
        if name == "square_squeeze":      # fingers near the edge midpoints: no edge switch
            q = initial_q(example) + rng.normal(scale=0.05, size=len(q))
        J = jacobian_of(example, q)
        for _ in range(5):
            d = rng.normal(size=len(q))
            np.testing.assert_allclose(J @ d, central_difference(example, q, d), atol=1e-6)


def peg_configurations(rng):
    """Return the initial peg state, the peg half in the slot, and random nearby ones."""
    q0 = initial_q(scenes.peg_in_hole())
    in_slot = np.concatenate([[0.0, 1.0, 0.02], scenes.relative_pose(
        (0.0, 1.0, 0.0), (-1.6, 1.0, 3 * math.pi / 4, 1.6, 1.0, -math.pi / 4))])
    return [q0, in_slot] + [q + rng.normal(scale=0.2, size=9) for q in (q0, in_slot)]


def test_peg_rows_follow_poly_geometry_order():
    example = scenes.peg_in_hole()
    _, names = peg_row_geometry(initial_q(example))
    assert example.contact_names == names
    assert len(names) == 64 == example.contacts(example.q_o0, example.q_m0).n_n


def test_peg_normal_rows_are_dphi_dq_away_from_corners():
    rng = np.random.default_rng(11)
    example = scenes.peg_in_hole()
    eps, checked, touching = 1e-6, 0, 0
    for q in peg_configurations(rng):
        J = jacobian_of(example, q)
        phi = phi_of(example, q)
        geometry, _ = peg_row_geometry(q)
        for _ in range(4):
            d = rng.normal(size=9)
            fd = central_difference(example, q, d, eps)
            moved = [peg_row_geometry(q + s * eps * d)[0] for s in (1, -1)]
            for row, (vertex, owner, base) in enumerate(geometry):
                edge = deepest_edge(vertex, base, q)
                stable = all(deepest_edge(m[row][0], base, q + s * eps * d) == edge
                             for m, s in zip(moved, (1, -1)))
                if stable and not in_corner_region(vertex, base, q):
                    assert J[row] @ d == pytest.approx(fd[row], abs=1e-6), \
                        example.contact_names[row]
                    checked += 1
                    touching += phi[row] <= 0
    # 16 of 64 rows per state at least (the others are outside a corner); 5 in contact
    assert checked >= 16 * 4 * 4 and touching >= 4 * 5


def test_peg_corner_rows_are_dphi_dq_when_the_base_does_not_turn():
    """Outside j next to a corner, the rows move j's closest point: exact unless j turns."""
    rng = np.random.default_rng(5)
    example = scenes.peg_in_hole()
    checked = 0
    for q in peg_configurations(rng):
        J = jacobian_of(example, q)
        geometry, _ = peg_row_geometry(q)
        for row, (vertex, owner, base) in enumerate(geometry):
            if not in_corner_region(vertex, base, q):
                continue
            d = rng.normal(size=9)
            if base.col is not None:
                d[base.col + 2] = 0.0
            assert J[row] @ d == pytest.approx(central_difference(example, q, d)[row], abs=1e-6)
            checked += 1
    assert checked > 20


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_tangent_rows_are_opposite_and_orthogonal_to_the_normal(name):
    example = scenes.EXAMPLES[name]()
    rng = np.random.default_rng(3)
    q = initial_q(example) + rng.normal(scale=0.02, size=len(initial_q(example)))
    contacts = example.contacts(q[:3], q[3:])
    J_n = np.hstack([contacts.J_n_o, contacts.J_n_m])
    J_t = np.hstack([contacts.J_t_o, contacts.J_t_m])
    assert J_t.shape == (2 * contacts.n_f, len(q)) and contacts.n_f == contacts.n_n
    np.testing.assert_array_equal(J_t[0::2], -J_t[1::2])
    for i in range(contacts.n_n):
        for x, y in TRANSLATION_COLUMNS[name]:   # each body's (x, y) block: t = R(90 deg) n
            n_block, t_block = J_n[i, [x, y]], J_t[2 * i, [x, y]]
            np.testing.assert_allclose(t_block, [-n_block[1], n_block[0]], atol=1e-12)
            assert np.linalg.norm(n_block) == pytest.approx(1.0) or not n_block.any()


@pytest.mark.parametrize("name", ["disk_even", "disk_semicircle", "disk_wall", "square_squeeze"])
def test_finger_sliding_along_the_tangent_keeps_phi_to_first_order(name):
    example = scenes.EXAMPLES[name]()
    q = initial_q(example)
    contacts = example.contacts(q[:3], q[3:])
    eps = 1e-4
    for i in range(contacts.n_n):
        t = np.concatenate([contacts.J_t_o[2 * i], contacts.J_t_m[2 * i]])
        finger = np.zeros_like(q)
        finger[3:] = t[3:]                       # move only the fingers along t
        if not finger.any():
            continue
        change = phi_of(example, q + eps * finger)[i] - phi_of(example, q)[i]
        assert abs(change) < 10 * eps ** 2


# --------------------------------------------------------------------------- initial states


def test_disk_initial_gaps():
    even, lopsided, semi = (scenes.disk_push(c) for c in ("even", "lopsided", "semicircle"))
    np.testing.assert_allclose(even.contacts(even.q_o0, even.q_m0).phi,
                               [math.hypot(0.5, 2) - 1] * 2)       # out of contact
    np.testing.assert_allclose(lopsided.contacts(lopsided.q_o0, lopsided.q_m0).phi,
                               [math.hypot(0.5, 3) - 1, math.hypot(0.5, 2) - 1])
    np.testing.assert_allclose(semi.contacts(semi.q_o0, semi.q_m0).phi, [0, 0], atol=1e-12)
    for example in (even, lopsided, semi):
        assert (example.h, example.steps) == (0.025, 400)
        np.testing.assert_array_equal(example.A, np.eye(3))
        np.testing.assert_array_equal(example.B, np.eye(4))
        np.testing.assert_array_equal(example.contacts(example.q_o0, example.q_m0).mu, [1, 1])
    with pytest.raises(ValueError):
        scenes.disk_push("sideways")


def test_wall_initial_gaps():
    wall = scenes.disk_wall()
    contacts = wall.contacts(wall.q_o0, wall.q_m0)
    np.testing.assert_allclose(contacts.phi[2:], [1.0, 4.25, 3.75])   # disk 1 m above the wall
    np.testing.assert_allclose(contacts.phi[:2], np.hypot(1.75, [2.25, 2.25]) - 1)
    np.testing.assert_array_equal(contacts.mu, [1, 1, 1, 0.5, 0.5])
    np.testing.assert_array_equal(wall.command(wall.q_o0, wall.q_m0, 3.0), [1, -1, 1, -1])


def test_square_fingers_touch():
    square = scenes.square_squeeze()
    contacts = square.contacts(square.q_o0, square.q_m0)
    np.testing.assert_allclose(contacts.phi, 0.0, atol=1e-12)
    u = square.command(square.q_o0, square.q_m0, 0.0)
    np.testing.assert_allclose(contacts.J_n_m @ u, -1.0)   # every finger closes at 1 m/s
    np.testing.assert_allclose(contacts.J_t_m @ u, 0.0)


def test_peg_starts_out_of_the_slot():
    peg = scenes.peg_in_hole()
    contacts = peg.contacts(peg.q_o0, peg.q_m0)
    assert contacts.phi.min() > 0.4
    q = initial_q(peg)
    assert scenes.PEG.world_vertices(q)[:, 1].min() > 0.0        # above the slot's top, y = 0
    np.testing.assert_allclose(peg.command(peg.q_o0, peg.q_m0, 0.0), 0.0, atol=1e-12)
    assert (peg.h, peg.steps, peg.c) == (0.05, 240, 0.01)


def test_slot_blocks_are_counter_clockwise_mirror_images():
    left, right = scenes.SLOT_LEFT.vertices, scenes.SLOT_RIGHT.vertices
    assert scenes.signed_area(left) > 0 and scenes.signed_area(right) > 0
    assert {tuple(v) for v in right} == {(-x, y) for x, y in left}
    inside = np.array([5.0, -5.0])
    n, b = scenes.edge_planes(right)
    assert np.max(n @ inside - b) < 0
    n, b = scenes.edge_planes(left * [-1.0, 1.0])       # the authors' clockwise list
    assert np.max(n @ inside - b) > 0                     # their faces never touch
    # the peg's bottom right corner 5 mm into the right block's top face registers
    peg = scenes.peg_in_hole()
    q_o = np.array([1.5, 2.995, 0.0])
    row = peg.contact_names.index("peg[0] vs slot right")
    assert peg.contacts(q_o, peg.q_m0).phi[row] == pytest.approx(-0.005)


# --------------------------------------------------------------------------- commands


def test_semicircle_command_speed_and_end_points():
    semi = scenes.disk_push("semicircle")
    rb, rs, f = 5.5, 4.5, math.pi / 10
    for t in (0.0, 1.3, 5.0, 9.9):
        u = semi.command(semi.q_o0, semi.q_m0, t)
        assert np.linalg.norm(u[:2]) == pytest.approx(rb * f)
        assert np.linalg.norm(u[2:]) == pytest.approx(rs * f)
    t = (np.arange(4000) + 0.5) * 10 / 4000                # midpoint rule over 10 s
    q_m = semi.q_m0 + sum(semi.command(semi.q_o0, semi.q_m0, s) for s in t) * 10 / 4000
    np.testing.assert_allclose(q_m, [5.5, math.sqrt(3) / 2, 4.5, math.sqrt(3) / 2], atol=1e-5)


def test_peg_phases_switch_at_the_listed_times():
    expected = {0.5: 0, 1.0: 0, 1.01: 1, 1.5: 1, 1.6: 2, 1.75: 2, 2.0: 3, 2.5: 3, 3.0: 4,
                3.5: 4, 4.0: 5, 4.5: 5, 5.0: 6, 7.5: 6, 7.8: 7, 8.0: 7, 8.2: 8, 8.5: 8,
                8.7: 9, 9.0: 9, 9.5: 10, 12.0: 10, 101.0: None}
    assert {t: scenes.peg_phase(t) for t in expected} == expected
    assert scenes.peg_phase(1.0 + 1e-12) == 1
    clock = scenes.authors_clock(0.05, 240)
    assert clock[20] > 1.0 and scenes.peg_phase(clock[20]) == 1 and scenes.peg_phase(1.0) == 0


def test_peg_command_spot_values():
    peg = scenes.peg_in_hole()
    third = math.pi / 3
    # t = 1.2: fingers to (-+1.5, 0) in the peg's frame, from (-+1.5, 5): 5 R(pi/3) (0, -5) each
    u = peg.command(peg.q_o0, peg.q_m0, 1.2)
    down = 25 * np.array([math.sin(third), -math.cos(third)])
    np.testing.assert_allclose(u, np.concatenate([down, [0], down, [0]]), atol=1e-12)
    # t = 3: fixed targets (-2, 2.5, 3 pi/4) and (-2, 2.5, -pi/4), K = diag(1, 1, 3, 1, 1, 3)
    u = peg.command(peg.q_o0, np.zeros(6), 3.0)
    np.testing.assert_allclose(u, [-10, 12.5, 45 * math.pi / 4, -10, 12.5, -15 * math.pi / 4])
    # t = 9.5: finger 1 held, finger 2 to (0.5, sqrt 2, -pi/4)
    u = peg.command(peg.q_o0, np.zeros(6), 9.5)
    np.testing.assert_allclose(u, [0, 0, 0, 2.5, 5 * math.sqrt(2), -5 * math.pi / 4])
    np.testing.assert_array_equal(peg.command(peg.q_o0, np.zeros(6), 101.0), np.zeros(6))
    # targets follow the peg in phases 1-3 and 8-10, not in 4-7 and 11
    shifted = peg.q_o0 + [1.0, 0.0, 0.0]
    for t, follows in ((0.5, True), (2.0, False), (5.0, False), (8.2, True), (9.5, False)):
        change = peg.command(shifted, peg.q_m0, t) - peg.command(peg.q_o0, peg.q_m0, t)
        expected = 5 * np.array([1, 0, 0, 1, 0, 0]) if follows else np.zeros(6)
        np.testing.assert_allclose(change, expected, atol=1e-12)


def test_relative_pose_matches_the_initial_fingers():
    peg = scenes.peg_in_hole()
    R = scenes.rotation(math.pi / 3)
    finger_1 = np.array([-2.0, 7.0]) + R @ [-1.5, 5.0]
    np.testing.assert_allclose(peg.q_m0[:3], [*finger_1, math.pi / 3 + 3 * math.pi / 4])
    np.testing.assert_allclose(peg.q_m0[5], math.pi / 3 - math.pi / 4)


# --------------------------------------------------------------------------- LCPs


def test_square_lcp_has_no_solution_at_c0_and_one_at_c1():
    square = scenes.square_squeeze()
    contacts = square.contacts(square.q_o0, square.q_m0)
    u = square.command(square.q_o0, square.q_m0, 0.0)
    rigid = finite_feedback_lcp(contacts, square.A, 0.0 * square.B, square.h, u)
    assert len(rigid.w) == 16
    assert lcp_solutions(rigid.M, rigid.w) == []
    # Farkas certificate: y >= 0, y^T M = 0, y^T w < 0 (opposite fingers' normal rows)
    y = np.zeros(16)
    y[[0, 2]] = 1.0
    np.testing.assert_allclose(y @ rigid.M, 0.0, atol=1e-12)
    assert y @ rigid.w == pytest.approx(-2 * square.h)
    soft = finite_feedback_lcp(contacts, square.A, 1.0 * square.B, square.h, u)
    solutions = lcp_solutions(soft.M, soft.w)
    assert solutions
    for z in solutions:
        dq_o, dq_m = step_displacements(contacts, square.A, square.B, square.h, u, z)
        np.testing.assert_allclose(dq_o, 0.0, atol=1e-9)      # symmetric squeeze
        np.testing.assert_allclose(contacts.phi + contacts.J_n_m @ dq_m, 0.0, atol=1e-9)


def test_even_push_at_first_contact_moves_the_disk_with_the_fingers():
    even = scenes.disk_push("even")
    touch = math.sqrt(0.75)
    q_o, q_m = np.array([0.0, 3.0, 0.0]), np.array([0.5, 3 + touch, -0.5, 3 + touch])
    contacts = even.contacts(q_o, q_m)
    np.testing.assert_allclose(contacts.phi, 0.0, atol=1e-12)
    u = even.command(q_o, q_m, 1.2)
    lcp = finite_feedback_lcp(contacts, even.A, 0.0 * even.B, even.h, u)
    solutions = lcp_solutions(lcp.M, lcp.w)
    assert solutions
    for z in solutions:
        dq_o, dq_m = step_displacements(contacts, even.A, 0.0 * even.B, even.h, u, z)
        np.testing.assert_allclose(dq_o, [0.0, even.h * u[1], 0.0], atol=1e-9)
        np.testing.assert_allclose(dq_m, even.h * u)


# --------------------------------------------------------------------------- outlines


def test_outlines_follow_the_state():
    peg = scenes.peg_in_hole()
    shapes = peg.outlines(peg.q_o0, peg.q_m0)
    assert [s.name for s in shapes] == ["peg", "finger 1", "finger 2", "slot left", "slot right"]
    assert [s.static for s in shapes] == [False, False, False, True, True]
    np.testing.assert_allclose(shapes[0].points.mean(axis=0), peg.q_o0[:2])
    wall = scenes.disk_wall()
    disk, finger_1, finger_2, ground = wall.outlines(wall.q_o0, wall.q_m0)
    assert (disk.kind, disk.radius) == ("disk", 1.0) and ground.static
    np.testing.assert_array_equal(disk.points, wall.q_o0[:2])
    np.testing.assert_array_equal(finger_2.points, wall.q_m0[2:])
    square = scenes.square_squeeze()
    assert len(square.outlines(square.q_o0, square.q_m0)) == 5


def test_feedback_scale_sweep():
    np.testing.assert_allclose(scenes.feedback_scale_sweep(4), [4.0, 2.0, 1.0])
    assert len(scenes.feedback_scale_sweep(scenes.DISK_SWEEP_LAST)) == 69
