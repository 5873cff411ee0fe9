"""
The LCP solvers of formulations/lcp_solvers.py: Lemke's ladder and the certifying MIPs.

Oracles: LCPs solved by hand (a P-matrix LCP has exactly one solution), the
finite-feedback LCP of Halm & Posa (lcp_math.py) for a disk squeezed by point
fingers (with c = 0 it has no solution; with c > 0 the normal impulses are
h v / c and the fingers stop), degenerate LCPs on which Lemke's method
without the lexicographic rule cycles (an exact-arithmetic Lemke below shows
it), and random LCPs of the paper's structure, on which every backend must
agree.
"""

from fractions import Fraction

import numpy as np
import pytest

from quasistatic_drake.formulations.lcp_math import (finite_feedback_lcp, PlanarContacts,
                                                     step_displacements)
from quasistatic_drake.formulations.lcp_solvers import (_lemke, BACKENDS, lcp_residual,
                                                        LcpTooLarge, solve_lcp)

TOL = 1e-9
MIPS = ("gurobi", "scip")
V, H = 0.1, 0.1           # the fingers' commanded speed [m/s] and the time step [s]


def assert_solution(result, M, w, tol=TOL):
    """Assert that ``result`` is solved with z >= 0 and its residual (recomputed) within tol."""
    assert result.status == "solved", result.detail
    assert np.all(result.z >= 0.0)
    assert lcp_residual(M, w, result.z) <= tol
    assert result.residual == pytest.approx(lcp_residual(M, w, result.z))


def disk_contacts(angles, mu=1.0, radius=1.0):
    """
    Return PlanarContacts of point fingers on a disk at the origin, and the inward command.

    Object coordinates (x, y, theta), finger i at radius (cos a_i, sin a_i),
    its joints its (x, y).  phi_i = |p_i - c| - r, so the normal row is
    d(phi)/dq: -n^T on the disk's centre, 0 on theta, n^T on the finger.  The
    tangent rows are +t, -t with t = n turned by +90 degrees: the finger's
    velocity relative to the disk's contact point, t^T (v_i - v_c - omega
    r t), so -t^T and -r on the disk, t^T on the finger.
    """
    m = len(angles)
    J_n_o, J_n_m = np.zeros((m, 3)), np.zeros((m, 2 * m))
    J_t_o, J_t_m = np.zeros((2 * m, 3)), np.zeros((2 * m, 2 * m))
    u = np.zeros(2 * m)
    for i, a in enumerate(angles):
        n = np.array([np.cos(a), np.sin(a)])
        t = np.array([-n[1], n[0]])
        J_n_o[i, :2] = -n
        J_n_m[i, 2 * i:2 * i + 2] = n
        for k, sign in enumerate((1.0, -1.0)):
            J_t_o[2 * i + k] = [-sign * t[0], -sign * t[1], -sign * radius]
            J_t_m[2 * i + k, 2 * i:2 * i + 2] = sign * t
        u[2 * i:2 * i + 2] = -V * n
    contacts = PlanarContacts(np.zeros(m), J_n_o, J_n_m, J_t_o, J_t_m, np.full(m, mu))
    return contacts, u


def disk_lcp(angles, c):
    """Return (contacts, u, LcpData) of fingers squeezing the disk, A = I, cB = c I."""
    contacts, u = disk_contacts(angles)
    return contacts, u, finite_feedback_lcp(contacts, np.eye(3), c * np.eye(len(u)), H, u)


def random_lcp(m, c, seed):
    """Return a random LCP of the paper's structure: m contacts, 3 object and 6 robot DOF."""
    rng = np.random.default_rng(seed)
    contacts = PlanarContacts(rng.uniform(0.0, 0.01, m), rng.normal(size=(m, 3)),
                              rng.normal(size=(m, 6)), rng.normal(size=(2 * m, 3)),
                              rng.normal(size=(2 * m, 6)), rng.uniform(0.1, 1.0, m))
    return finite_feedback_lcp(contacts, np.eye(3), c * np.eye(6), 0.05, rng.normal(size=6))


# Closed forms.

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("M, w, z_star", [
    # M z = -w with both z > 0: z = (1/3, 1/3).
    ([[2.0, 1.0], [1.0, 2.0]], [-1.0, -1.0], [1 / 3, 1 / 3]),
    # z_2 = 0: 2 z_1 = 1, s_2 = z_1 + 2 = 2.5 > 0.
    ([[2.0, 1.0], [1.0, 2.0]], [-1.0, 2.0], [0.5, 0.0]),
    # z_2 = 0: 4 z_1 = 4, 2 z_3 = 2, s_2 = z_1 + z_3 + 1 = 3 > 0.
    ([[4.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 2.0]], [-4.0, 1.0, -2.0], [1.0, 0.0, 1.0]),
])
def test_positive_definite_lcps_by_hand(backend, M, w, z_star):
    M, w = np.array(M), np.array(w)
    result = solve_lcp(M, w, backend=backend)
    assert_solution(result, M, w, tol=1e-12)
    np.testing.assert_allclose(result.z, z_star, atol=1e-12)   # unique: M is a P-matrix
    assert result.backend == backend
    assert result.solve_time > 0.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_w_nonnegative_gives_zero_without_a_solver(backend):
    M = np.array([[-1.0, 5.0], [3.0, -2.0]])
    result = solve_lcp(M, np.array([0.0, 2.0]), backend=backend)
    assert result.status == "solved"
    np.testing.assert_array_equal(result.z, [0.0, 0.0])
    assert result.residual == 0.0
    empty = solve_lcp(np.zeros((0, 0)), np.zeros(0), backend=backend)
    assert empty.status == "solved" and empty.z.shape == (0,)


def test_residual_is_the_natural_min_map():
    M, w = np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([-1.0, 0.5])
    assert lcp_residual(M, w, np.array([1.0, 0.0])) == 0.0
    assert lcp_residual(M, w, np.array([1.0, 0.25])) == 0.25           # both positive: 0.25
    assert lcp_residual(M, w, np.array([0.5, 0.0])) == 0.5             # s_1 = -0.5
    assert lcp_residual(M, w, np.array([1.0, -0.1])) == pytest.approx(0.1)   # z_2 < 0


# The jam of Halm & Posa (Sec. 4): perfect velocity control has no solution.

JAMS = {"two fingers": [np.pi, 0.0], "four fingers": [0.0, np.pi / 2, np.pi, 3 * np.pi / 2]}


@pytest.mark.parametrize("fingers", JAMS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_jam_with_perfect_velocity_control_has_no_solution(fingers, backend):
    _, _, lcp = disk_lcp(JAMS[fingers], c=0.0)
    result = solve_lcp(lcp.M, lcp.w, backend=backend)
    assert result.status == "no solution", result.detail
    assert result.z is None and result.residual == np.inf
    assert "certified" in result.detail


def test_jam_certified_by_scip_or_left_undecided():
    _, _, lcp = disk_lcp(JAMS["two fingers"], c=0.0)
    by_scip = solve_lcp(lcp.M, lcp.w, certify="scip")
    assert by_scip.status == "no solution" and "scip certified" in by_scip.detail
    undecided = solve_lcp(lcp.M, lcp.w, certify=None)
    assert undecided.status == "failed" and undecided.z is None
    assert "ray termination" in undecided.detail      # plain Lemke: a secondary ray


@pytest.mark.parametrize("c", [1.0, 1e-3, 1e-6])
@pytest.mark.parametrize("fingers", JAMS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_jam_with_finite_feedback_stops_the_fingers(c, fingers, backend):
    """With c > 0 (Thm. 1) each finger presses with h v / c and stops: c Lambda_N = h v."""
    contacts, u, lcp = disk_lcp(JAMS[fingers], c)
    result = solve_lcp(lcp.M, lcp.w, backend=backend)
    assert_solution(result, lcp.M, lcp.w)
    np.testing.assert_allclose(result.z[:lcp.n_n], H * V / c, rtol=1e-6)
    dq_o, dq_m = step_displacements(contacts, np.eye(3), c * np.eye(len(u)), H, u, result.z)
    assert np.max(np.abs(dq_m)) <= 1e-9           # commanded h v = 1e-2 m: the fingers stop
    assert np.max(np.abs(dq_o)) <= 1e-9           # and the disk, squeezed evenly, stays


# M with zero rows and columns, or zero.

@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_matrix(backend):
    M = np.zeros((3, 3))
    infeasible = solve_lcp(M, np.array([0.0, -1.0, 2.0]), backend=backend)
    assert infeasible.status == "no solution", infeasible.detail
    feasible = solve_lcp(M, np.array([0.0, 1.0, 2.0]), backend=backend)
    assert feasible.status == "solved"
    np.testing.assert_array_equal(feasible.z, np.zeros(3))


def test_zero_matrix_without_certifier_fails_cleanly():
    result = solve_lcp(np.zeros((2, 2)), np.array([-1.0, -1.0]), certify=None)
    assert result.status == "failed" and result.z is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_row_and_column(backend):
    """A frictionless bound row with no mobility: solvable iff its w_i >= 0."""
    M = np.array([[2.0, 0.0, 1.0], [0.0, 0.0, 0.0], [1.0, 0.0, 2.0]])
    w = np.array([-1.0, 0.0, -1.0])
    result = solve_lcp(M, w, backend=backend)
    assert_solution(result, M, w)
    np.testing.assert_allclose(result.z[[0, 2]], [1 / 3, 1 / 3], atol=1e-12)
    w[1] = -1e-3      # the row's gap closes, nothing can open it
    assert solve_lcp(M, w, backend=backend).status == "no solution"


# Degenerate LCPs.

def naive_lemke_cycles(M, q, last=False, max_pivots=50):
    """
    Return True if exact-arithmetic Lemke, ties to the first (or last) row, cycles.

    The lexicographic rule replaced by a textbook's "first (last) of the
    tied rows": a basis seen twice (with the same entering variable) is a cycle.
    """
    n = len(q)
    T = [[Fraction(int(i == j)) for j in range(n)] + [Fraction(-int(v)) for v in M[i]]
         + [Fraction(-1), Fraction(int(q[i]))] for i in range(n)]
    basis = list(range(n))

    def pivot(r, col):
        T[r] = [v / T[r][col] for v in T[r]]
        for i in range(n):
            if i != r and T[i][col] != 0:
                T[i] = [a - T[i][col] * b for a, b in zip(T[i], T[r])]

    def pick(rows):
        return rows[-1] if last else rows[0]

    r = pick([i for i in range(n) if q[i] == min(q)])
    pivot(r, 2 * n)
    entering, basis[r] = basis[r] + n, 2 * n
    seen = set()
    for _ in range(max_pivots):
        key = (tuple(sorted(basis)), entering)
        if key in seen:
            return True
        seen.add(key)
        rows = [i for i in range(n) if T[i][entering] > 0]
        if not rows:
            return False
        best = min(T[i][-1] / T[i][entering] for i in rows)
        ties = [i for i in rows if T[i][-1] / T[i][entering] == best]
        r = next((i for i in ties if basis[i] == 2 * n), pick(ties))
        pivot(r, entering)
        leaving, basis[r] = basis[r], entering
        if leaving == 2 * n:
            return False
        entering = leaving + n if leaving < n else leaving - n
    return False


# Found by a search over small integer LCPs; the tie rules (first, last) on which
# the naive method cycles.
CYCLING = [
    # z = (0, 2/3, 1/6): s = (2/3, 0, 0).
    ([[0, 2, 2], [2, 2, -2], [-2, 1, 2]], [-1, -1, -1], [0.0, 2 / 3, 1 / 6], [False]),
    # z = (0, 1, 0, 1): s = (1, 0, 1, 0); q_3 = 0 makes the start degenerate too.
    ([[-1, 1, 1, 1], [0, 2, -1, -1], [-2, 0, -1, 1], [0, -1, 1, 2]], [-1, -1, 0, -1],
     [0.0, 1.0, 0.0, 1.0], [False]),
    # z = (0, 0, 1/2, 1, 0): s = (0, 0, 0, 0, 1/2); both tie rules cycle.
    ([[-1, 2, -2, 2, -2], [0, -2, 0, 1, 1], [2, 1, 2, 0, 0], [-2, -1, -2, 2, 2],
      [1, -1, -1, 2, -1]], [-1, -1, -1, -1, -1], [0.0, 0.0, 0.5, 1.0, 0.0], [False, True]),
]


@pytest.mark.parametrize("M, q, z_star, cycling_rules", CYCLING)
def test_lexicographic_lemke_solves_what_the_naive_rule_cycles_on(M, q, z_star, cycling_rules):
    for last in cycling_rules:
        assert naive_lemke_cycles(M, q, last)
    M, q = np.array(M, dtype=float), np.array(q, dtype=float)
    status, z, _, pivots = _lemke(M, q, 100, 10, 0.0)                  # unscaled, no polishing
    assert status == 0 and pivots <= 10
    np.testing.assert_allclose(z, z_star, atol=1e-12)
    result = solve_lcp(M, q)
    assert_solution(result, M, q, tol=1e-12)
    assert result.detail == "lemke"
    np.testing.assert_allclose(result.z, z_star, atol=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_many_zero_entries_of_w(seed):
    """A P-matrix LCP with half of w zero: every zero is a degenerate tie at the start."""
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(12, 12))
    M = A @ A.T + 0.1 * np.eye(12)
    w = np.where(rng.random(12) < 0.5, 0.0, -rng.random(12))
    w[0] = -1.0
    results = [solve_lcp(M, w, backend=b) for b in BACKENDS]
    for result in results:
        assert_solution(result, M, w)
    for result in results[1:]:          # unique (P-matrix): the MIPs find the same z
        np.testing.assert_allclose(result.z, results[0].z, atol=1e-9)


# Random LCPs of the paper's structure (copositive, c > 0: a solution exists).

RANDOM = [(m, c, seed) for seed, (m, c) in enumerate(
    [(5, 1.0), (8, 1e-2), (12, 1e-3), (16, 1.0), (20, 1e-2), (25, 1e-3), (30, 1.0), (35, 1e-2),
     (40, 1e-3), (40, 1.0)])]


@pytest.mark.parametrize("m, c, seed", RANDOM)
def test_lemke_solves_random_copositive_lcps(m, c, seed):
    lcp = random_lcp(m, c, seed)
    assert_solution(solve_lcp(lcp.M, lcp.w), lcp.M, lcp.w)


# The MIPs on the smaller ones (the larger take Gurobi 1.5-3.5 s, SCIP minutes).
MIP_RANDOM = ([("gurobi",) + r for r in RANDOM if r[0] <= 25]
              + [("scip",) + r for r in RANDOM if r[0] <= 16])


@pytest.mark.parametrize("backend, m, c, seed", MIP_RANDOM)
def test_mips_agree_with_lemke_on_random_copositive_lcps(backend, m, c, seed):
    lcp = random_lcp(m, c, seed)
    by_lemke = solve_lcp(lcp.M, lcp.w)
    by_mip = solve_lcp(lcp.M, lcp.w, backend=backend)
    assert by_mip.status == by_lemke.status == "solved", by_mip.detail
    assert_solution(by_mip, lcp.M, lcp.w)


# Bad input.

@pytest.mark.parametrize("M, w, message", [
    (np.ones((2, 3)), np.ones(2), "square"),
    (np.ones(4), np.ones(2), "square"),
    (np.eye(2), np.ones(3), "shape"),
    (np.eye(2), np.ones((2, 1)), "shape"),
    (np.array([[1.0, np.nan], [0.0, 1.0]]), -np.ones(2), "finite"),
    (np.eye(2), np.array([-1.0, np.inf]), "finite"),
])
def test_bad_input_raises(M, w, message):
    with pytest.raises(ValueError, match=message):
        solve_lcp(M, w)


def test_unknown_backend_lists_the_backends():
    with pytest.raises(ValueError, match="path") as err:
        solve_lcp(np.eye(2), -np.ones(2), backend="path")
    for name in BACKENDS:
        assert name in str(err.value)
    with pytest.raises(ValueError, match="certif"):
        solve_lcp(np.eye(2), -np.ones(2), certify="moby")
    with pytest.raises(ValueError, match="tolerance"):
        solve_lcp(np.eye(2), -np.ones(2), tolerance=0.0)


def test_gurobi_licence_limit_says_what_to_do():
    """The MIP of n = 700 has 1401 variables and 2101 rows; the pip licence allows 2000."""
    M, w = np.eye(700), -np.ones(700)
    assert solve_lcp(M, w).status == "solved"                    # Lemke: no licence
    try:
        result = solve_lcp(M, w, backend="gurobi")
    except LcpTooLarge as err:
        assert "scip" in str(err) and "lemke" in str(err)
    else:                                                        # a full licence
        assert_solution(result, M, w)


def test_a_tolerance_below_round_off_fails_instead_of_fabricating():
    """No z meets 1e-30 in floating point: "failed", not a z and not "no solution"."""
    lcp = random_lcp(5, 1.0, 0)
    for backend in BACKENDS:
        result = solve_lcp(lcp.M, lcp.w, backend=backend, tolerance=1e-30)
        assert result.status == "failed", result.detail
        assert result.z is None and result.residual == np.inf
    assert solve_lcp(lcp.M, lcp.w, tolerance=1e-30, certify=None).status == "failed"
