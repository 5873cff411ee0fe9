r"""
LCP solvers for the finite-feedback step (lcp_math.py): lexicographic Lemke, and a certifying MIP.

LCP(M, w): find z >= 0 with s = M z + w >= 0 and z^T s = 0 (Halm & Posa,
Def. 1).  With c > 0 the step's M(cB) is copositive and a solution exists
(Halm & Posa, Thm. 1); with c = 0 (perfect velocity control) there may be
none: two fingers squeezing a disk, four fingers pushing a square inward
(their Fig. 2: grasps and jams "cannot be realized without penetrating"),
and M may have zero rows and columns (a frictionless bound row, a finger
touching nothing) or be zero.  :func:`solve_lcp` therefore answers "solved"
(with a z >= 0 whose residual it has checked against the original M and w),
"no solution" (only when a MIP has certified that none exists), or "failed"
(undecided; ``detail`` says why).  It never returns an unchecked z.

Backends (``BACKENDS``):

* "lemke" (the default): Lemke's complementary pivoting method (Lemke 1965)
  with covering vector d = 1 and the lexicographic minimum-ratio rule
  (Cottle, Pang & Stone, "The Linear Complementarity Problem", 1992,
  Sec. 4.9), under which degenerate bases cannot make it cycle, compiled with
  numba (an O(n^2) pivot on an explicit basis inverse; numpy took 5 to 25
  times as long).  Each answer is polished: one step of iterative refinement
  on its z-basic index set J (M_JJ z_J = -w_J, z elsewhere 0), and the
  better of the two kept.  A run that stops on a secondary ray (with round-off; for a
  copositive M satisfying Thm. 1 exact arithmetic would not) or leaves a
  residual above ``tolerance`` is followed by the next rung of ``LADDER``:
  Lemke refactorising after small pivots, then on M + delta I (strictly
  copositive, so Lemke processes it), each polished on the unregularised M,
  then refactorising at every pivot.  If all fail, the certifying MIP
  (``certify``: "gurobi", "scip", or None to report "failed") decides.
  Measured (2 cores, random LCPs of the paper's structure, c in {1, 1e-2,
  1e-3}, 300 each): mean (median) 0.05 (0.05) ms at n = 10, 0.08 (0.08) ms
  at 30, 0.21 (0.19) ms at 60, 1.05 (0.88) ms at 120; the first rung solved
  99.5 %, the second the rest; no MIP was needed.
* "gurobi", "scip": the MIP below, which finds a solution or proves that
  none exists (0.1-3.5 s for n <= 160 with Gurobi; SCIP took up to minutes).

The MIP (homogenised, so that no big-M bounds z): over y in [0, 1]^n,
t in [0, 1] and binaries b,

    maximise t   subject to   s = M y + w t >= 0,   sum(y) + t = 1,
                              y_i <= b_i,   s_i <= S_i (1 - b_i),
    S_i = max(0, max_j M_ij, w_i).

s_i is a convex combination of M_i1..M_in, w_i, so S_i bounds it exactly and
the big-M rows cut off nothing (with the looser sum_j |M_ij| + |w_i|, Gurobi
took 75 s instead of 1.3 s on a random LCP with n = 160).  A solution z of
LCP(M, w) gives the feasible point (z, 1) / (sum(z) + 1) with t > 0, so a
bound t <= 0 (or an infeasible MIP) proves that no solution exists, and any
t > 0 gives the solution z = y / t.
The solver therefore stops at the first incumbent with t >= T_CERTIFY or
once its bound is at most T_CERTIFY (Gurobi's BestObjStop, BestBdStop;
SCIP's limits/primal, limits/dual): deciding is far cheaper than proving
the largest t.  z = y / t is polished on the MIP's pattern b and checked.
The MIP's tolerances (1e-9: Gurobi's FeasibilityTol, IntFeasTol and
OptimalityTol, SCIP's feastol) let a near-jam show an incumbent with a tiny
t that is no solution (the slack grows by 1 / t in z); the search then goes
on for a larger t (MIP_ROUNDS).  Within floating point "t = 0" means a bound
of at most T_CERTIFY = 1e-8 (ten times the tolerances) on the equilibrated
problem, so "no solution" says: none with sum(z) < 1 / T_CERTIFY - 1 in
equilibrated units.  Near that border the answers may differ: the squeezed
disk of test_lcp_solvers.py is solved by both MIPs down to c = 1e-7, by one
or the other at c = 1e-8 and 1e-9 (Lemke solves both), and certified
without solution by all at c = 1e-10.

Equilibration.  Both backends solve the equivalent LCP(R M C, gamma R w),
z = C y / gamma with R, C positive diagonal: rows and columns of [M w]
scaled to unit max-norm by powers of two, so the scaling itself is exact
(Ruiz 2001).  The step's M mixes object mobilities (~1), feedback terms c B
(down to 1e-6) and friction rows (mu, 1); w is a displacement (~1e-3 m).

Limits.  Near-jams (c = 1e-6 with random Jacobians and more contacts than
the object and robot have joints, impulses ~h u / c) are ill-conditioned:
the ladder leaves about 3 % of those with n = 60-120 undecided, and the MIP
rarely decides them (its 1e-9 tolerances hide the pattern).  They end
"failed", never with a wrong z.  Gurobi's restricted pip licence (2000
variables, 2000 constraints) holds the MIP up to n = 666 (3 n + 1 rows);
beyond that :class:`LcpTooLarge` (a :class:`SolverLimitExceeded`) is raised
rather than "failed" returned: no later step of that size could be decided
either, and the message says what to change (certify "scip", or backend
"scip", or a full licence).  This module imports neither Drake nor ROS.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Optional

import numba
import numpy as np

from quasistatic_drake.errors import SolverLimitExceeded
from quasistatic_drake.formulations.gurobi_licence import optimize_within_licence

BACKENDS = ("lemke", "gurobi", "scip")
CERTIFIERS = ("gurobi", "scip")       # the MIP backends that may certify a "lemke" solve
# The "lemke" backend's ladder of Lemke runs: (stage name, delta, pivots between
# refactorisations of the basis (0: max(REFACTOR_MIN, n // 2), which at most
# doubles a pivot's cost), refactor after a pivot on less than this fraction of
# its column's largest entry).  delta regularises: M + delta I of the
# equilibrated problem (entries of unit scale); every answer is polished on the
# unregularised M.  Measured on random LCPs (test_lcp_solvers.py's structure):
# the first rung solves 99-100 % with c >= 1e-3, the rest are for near-jams.
LADDER = (("lemke", 0.0, 0, 0.0),
          ("lemke (careful)", 0.0, 0, 1e-2),
          ("lemke+regularised 1e-12", 1e-12, 0, 1e-2),
          ("lemke+regularised 1e-10", 1e-10, 0, 1e-2),
          ("lemke+regularised 1e-8", 1e-8, 0, 1e-2),
          ("lemke+regularised 1e-6", 1e-6, 0, 1e-2),
          ("lemke (refactored every pivot)", 0.0, 1, 0.0))
REFACTOR_MIN = 10
T_CERTIFY = 1e-8          # a MIP bound t <= this proves "no solution" (module docstring)
PIVOT_TOL = 1e-10        # entries of y below this (relative to max |y|) are not pivots
RATIO_TOL = 1e-9          # ratios (and lexicographic keys) this close (relative) tie
MAX_PIVOTS_PER_ROW = 50   # Lemke gives up after this many pivots per variable (plus 100)
MIP_ROUNDS = 4            # a MIP incumbent that is not a solution: search on for a larger t
MIP_TIME_LIMIT = 60.0     # [s] of one MIP solve, all rounds; then "failed" (time limit)
_GUROBI_TOL = 1e-9        # FeasibilityTol, IntFeasTol, OptimalityTol (Gurobi's minimum)
_SCIP_PARAMS = {"numerics/feastol": 1e-9, "limits/primal": T_CERTIFY, "limits/dual": T_CERTIFY,
                "limits/time": MIP_TIME_LIMIT}


@dataclass(frozen=True)
class LcpResult:
    """A solve's answer: z (None unless solved), status, its residual, time [s] and backend."""

    z: Optional[np.ndarray]   # a solution; None unless status == "solved"
    status: str               # "solved" | "no solution" (certified) | "failed" (see detail)
    residual: float           # lcp_residual of z (inf when z is None)
    solve_time: float         # wall time of the whole solve
    backend: str              # the backend asked for
    detail: str = ""          # the stage that solved it, how "no solution" was proved, or why not


class LcpTooLarge(SolverLimitExceeded):
    """The certifying MIP exceeds what the installed Gurobi licence allows."""


def lcp_residual(M, w, z) -> float:
    """
    Return the natural residual ||min(z, M z + w)||_inf of z for LCP(M, w).

    It is zero exactly at solutions, and bounds each violation in the
    units of its own row: a negative z_i or s_i counts in full, and a
    complementary pair with both positive counts its smaller member (the
    gap left open, or the impulse left on).  It is absolute, not relative:
    w is a displacement [m], so the default tolerance 1e-9 is a nanometre.
    The complementarity product z_i s_i is not added: with stiff feedback
    (small c) impulses grow like h u / c, and a product criterion would
    reject solutions that are exact to round-off (z ~ 1e4 times s ~ 1e-13).
    """
    z = np.asarray(z, dtype=float)
    if z.size == 0:
        return 0.0
    return float(np.max(np.abs(np.minimum(z, M @ z + w))))


def solve_lcp(M, w, backend: str = "lemke", tolerance: float = 1e-9,
              certify: Optional[str] = "gurobi") -> LcpResult:
    """
    Solve LCP(M, w) with ``backend`` (module docstring); check z against ``tolerance``.

    Raises ValueError for an unknown backend or certifier, a non-square M, sizes
    that do not match, or entries that are not finite; LcpTooLarge when Gurobi's
    licence is too small for the MIP.
    """
    start = time.perf_counter()
    if backend not in BACKENDS:
        raise ValueError(f"unknown LCP backend {backend!r}; the backends are {BACKENDS}")
    if certify is not None and certify not in CERTIFIERS:
        raise ValueError(f"unknown certifying backend {certify!r}; choose one of "
                         f"{CERTIFIERS} or None")
    if not (np.isfinite(tolerance) and tolerance > 0.0):
        raise ValueError(f"the residual tolerance must be positive and finite, not {tolerance}")
    M, w = _checked(M, w)
    status, z, detail = _dispatch(M, w, backend, tolerance, certify)
    residual = lcp_residual(M, w, z) if z is not None else np.inf
    if z is not None and not (residual <= tolerance and np.all(z >= 0.0)):   # never happens
        status, z, detail = "failed", None, f"{detail}: residual {residual:.3g} > {tolerance:g}"
        residual = np.inf
    return LcpResult(z, status, residual, time.perf_counter() - start, backend, detail)


def _dispatch(M, w, backend: str, tolerance: float, certify: Optional[str]) -> tuple:
    """Return (status, z, detail) of solve_lcp: trivial, Lemke's ladder and MIP, or a MIP."""
    if np.all(w >= 0.0):          # z = 0 (also n = 0)
        return "solved", np.zeros(len(w)), "trivial (w >= 0)"
    Ms, ws, scale = _equilibrate(M, w)
    problem = _Problem(M, w, Ms, ws, scale, tolerance)
    if backend != "lemke":
        return _MIPS[backend](problem)
    z, detail = _lemke_ladder(problem)
    if z is not None:
        return "solved", z, detail
    if certify is None:
        return "failed", None, detail + "; no certifier asked"
    status, z, mip_detail = _MIPS[certify](problem)
    return status, z, f"{detail}; {mip_detail}"


def _checked(M, w) -> tuple:
    """Return M and w as float arrays, or raise ValueError saying what is wrong with them."""
    M = np.asarray(M, dtype=float)
    w = np.asarray(w, dtype=float)
    if M.ndim != 2 or M.shape[0] != M.shape[1]:
        raise ValueError(f"the LCP matrix M must be square (n x n), not of shape {M.shape}")
    if w.ndim != 1 or len(w) != M.shape[0]:
        raise ValueError(f"the LCP vector w must have shape ({M.shape[0]},) to match M "
                         f"{M.shape}, not {w.shape}")
    if not (np.all(np.isfinite(M)) and np.all(np.isfinite(w))):
        raise ValueError("the LCP data M and w must be finite (found NaN or inf)")
    return np.ascontiguousarray(M), np.ascontiguousarray(w)


@dataclass(frozen=True)
class _Problem:
    """The LCP, its equilibrated copy (z = C y / gamma) and the residual tolerance."""

    M: np.ndarray
    w: np.ndarray
    Ms: np.ndarray           # R M C
    ws: np.ndarray           # gamma R w
    scale: np.ndarray        # C / gamma: z = scale * y
    tolerance: float

    def accept(self, y: np.ndarray) -> tuple:
        """Return (z, residual) of an equilibrated y clipped to y >= 0."""
        z = self.scale * np.maximum(y, 0.0)
        return z, lcp_residual(self.M, self.w, z)

    def polish(self, y0: np.ndarray, basic: np.ndarray) -> Optional[tuple]:
        """
        Return (z, residual), z nearest y0 with M_JJ z_J = -w_J (J = ``basic``), z_N = 0.

        One step of iterative refinement from y0 (equilibrated) on the index
        set J: the correction solves M_JJ dy = -w_J - M_JJ y0_J (LU, or least
        squares, the smallest correction, when M_JJ is singular, as a MIP's
        pattern with degenerate pairs may make it).  None unless the clipped
        z has a residual within tolerance (on the original M, w).
        """
        J = np.flatnonzero(basic)
        y = np.zeros(len(self.w))
        y[J] = y0[J]
        if J.size == 0:
            z, residual = self.accept(y)
            return (z, residual) if residual <= self.tolerance else None
        A = self.Ms[np.ix_(J, J)]
        r = -self.ws[J] - A @ y[J]
        for solve in (np.linalg.solve, _least_squares):
            try:
                step = solve(A, r)
            except np.linalg.LinAlgError:
                continue
            if np.all(np.isfinite(step)):
                polished = y.copy()
                polished[J] += step
                z, residual = self.accept(polished)
                if residual <= self.tolerance:
                    return z, residual
        return None


def _least_squares(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Return the least-squares (minimum-norm) solution of A x = b."""
    return np.linalg.lstsq(A, b, rcond=None)[0]


def _equilibrate(M: np.ndarray, w: np.ndarray) -> tuple:
    """Return (R M C, gamma R w, C / gamma) with rows and columns of [M w] near unit max-norm."""
    Ms, ws, col, gamma = _ruiz(M, w)
    return Ms, ws, col / gamma


@numba.njit(cache=True)
def _ruiz(M, w):
    """Scale rows and columns of [M w] by powers of two, five sweeps (Ruiz 2001, max-norm)."""
    n = w.shape[0]
    A = np.empty((n, n + 1))
    A[:, :n] = M
    A[:, n] = w
    col = np.ones(n + 1)
    norms = np.zeros(n + 1)
    for _ in range(5):
        for i in range(n):
            norm = 0.0
            for j in range(n + 1):
                norm = max(norm, abs(A[i, j]))
            f = _power_of_two(norm)
            for j in range(n + 1):
                A[i, j] *= f
        norms[:] = 0.0
        for i in range(n):
            for j in range(n + 1):
                norms[j] = max(norms[j], abs(A[i, j]))
        for j in range(n + 1):
            norms[j] = _power_of_two(norms[j])
            col[j] *= norms[j]
        for i in range(n):
            for j in range(n + 1):
                A[i, j] *= norms[j]
    return A[:, :n].copy(), A[:, n].copy(), col[:n].copy(), col[n]


@numba.njit(cache=True)
def _power_of_two(norm):
    """Return the power of two nearest 1 / sqrt(norm) (1 for a zero row or column)."""
    if norm == 0.0:
        return 1.0
    return 2.0 ** np.round(-0.5 * np.log2(norm))


def _lemke_ladder(problem: _Problem) -> tuple:
    """
    Return (z, detail): the first of LADDER's Lemke runs whose (polished) z is a solution.

    detail names the stage that solved it, or lists why each failed (z None).
    """
    Ms, ws = problem.Ms, problem.ws
    n = len(ws)
    tried = []
    for stage, delta, refactor_every, small_pivot in LADDER:
        status, y, basic, pivots = _lemke(Ms + delta * np.eye(n), ws,
                                          MAX_PIVOTS_PER_ROW * n + 100,
                                          refactor_every or max(REFACTOR_MIN, n // 2), small_pivot)
        if status != _SOLVED:
            tried.append(f"{stage}: {_LEMKE_STATUS[status]} after {pivots} pivots")
            continue
        z = _best_of(problem, y, basic)
        if z is not None:
            return z, stage
        tried.append(f"{stage}: residual above {problem.tolerance:g}")
    return None, "; ".join(tried)


def _best_of(problem: _Problem, y: np.ndarray, basic: np.ndarray) -> Optional[np.ndarray]:
    """Return the better of Lemke's z and its polished z if within tolerance, else None."""
    candidates = [problem.polish(y, basic), problem.accept(y)]
    candidates = [c for c in candidates if c is not None and c[1] <= problem.tolerance]
    if not candidates:
        return None
    return min(candidates, key=lambda candidate: candidate[1])[0]


_SOLVED, _RAY, _MAX_PIVOTS, _SINGULAR = 0, 1, 2, 3
_LEMKE_STATUS = {_RAY: "ray termination", _MAX_PIVOTS: "pivot limit",
                 _SINGULAR: "singular basis"}


@numba.njit(cache=True)
def _lemke(M, q, max_pivots, refactor_every, small_pivot):
    """
    Run Lemke's method with d = 1 and the lexicographic ratio rule on LCP(M, q).

    Variables: s_i (0..n-1), z_i (n..2n-1) and the artificial z0 (2n) in
    s - M z - d z0 = q.  The basis inverse B^-1 is kept explicitly (a pivot
    costs O(n^2)); its rows are the lexicographic keys.  It is recomputed
    every ``refactor_every`` pivots, after a pivot on less than
    ``small_pivot`` times its column's largest entry, and before a ray is
    believed.  Return (status, z, z-basic mask, pivots); status 0 solved,
    1 ray termination, 2 pivot limit, 3 singular basis.
    """
    n = q.shape[0]
    Binv = np.eye(n)
    x = q.copy()
    basis = np.arange(n)
    z = np.zeros(n)
    basic = np.zeros(n, dtype=np.bool_)
    # z0 enters; the row of the least q leaves (ties: the lexicographic rule with
    # B = I and d = 1 picks the largest index).
    r = 0
    for i in range(1, n):
        if q[i] <= q[r]:
            r = i
    _pivot(Binv, x, -np.ones(n), r)
    leaving = basis[r]
    basis[r] = 2 * n
    entering = leaving + n         # the complement of s_r is z_r
    Mt = np.ascontiguousarray(M.T)
    since = 0
    for pivots in range(1, max_pivots + 1):
        since += 1
        if since >= refactor_every:
            since = 0
            if not _refactor(Mt, q, basis, Binv, x):
                return _SINGULAR, z, basic, pivots
        y = _entering_column(Mt, Binv, entering)
        r = _ratio_test(Binv, x, y, basis, 2 * n)
        if r < 0:     # a ray, or the pivots' round-off: refactor and look again
            if not _refactor(Mt, q, basis, Binv, x):
                return _SINGULAR, z, basic, pivots
            y = _entering_column(Mt, Binv, entering)
            r = _ratio_test(Binv, x, y, basis, 2 * n)
            if r < 0:
                return _RAY, z, basic, pivots
        if abs(y[r]) < small_pivot * np.max(np.abs(y)):
            since = refactor_every
        _pivot(Binv, x, y, r)
        leaving = basis[r]
        basis[r] = entering
        if leaving == 2 * n:
            for i in range(n):
                if basis[i] >= n:
                    z[basis[i] - n] = x[i]
                    basic[basis[i] - n] = True
            return _SOLVED, z, basic, pivots
        entering = leaving + n if leaving < n else leaving - n
    return _MAX_PIVOTS, z, basic, max_pivots


@numba.njit(cache=True)
def _entering_column(Mt, Binv, entering):
    """Return B^-1 a of the entering variable (a = e_j for s_j, -M e_j for z_j)."""
    n = Binv.shape[0]
    if entering < n:
        return Binv[:, entering].copy()
    return -(Binv @ Mt[entering - n])


@numba.njit(cache=True)
def _refactor(Mt, q, basis, Binv, x):
    """
    Recompute B^-1 and x = B^-1 q from the basis, dropping the pivots' round-off.

    Return False if B is singular to machine precision (a pivot on round-off).
    """
    n = q.shape[0]
    B = np.zeros((n, n))
    for i in range(n):
        v = basis[i]
        if v < n:
            B[v, i] = 1.0
        elif v < 2 * n:
            B[:, i] = -Mt[v - n]
        else:
            B[:, i] = -1.0
    try:
        Binv[:] = np.linalg.inv(B)
    except Exception:
        return False
    x[:] = Binv @ q
    return True


@numba.njit(cache=True)
def _ratio_test(Binv, x, y, basis, artificial):
    """
    Return the leaving row of the lexicographic minimum-ratio test (-1: no pivot, a ray).

    Rows with y_i > PIVOT_TOL max|y| compete on max(x_i, 0) / y_i (round-off
    may leave a degenerate x_i at -1e-17); if z0's row ties it leaves (the
    solution is found); other ties are broken by the rows of B^-1 / y_i
    compared lexicographically, which are distinct (B^-1 is regular), so the
    rule cannot cycle (Cottle, Pang & Stone, Sec. 4.9).  Ties are equal to
    within RATIO_TOL (relative): in floating point, exact ties differ by
    round-off.
    """
    n = x.shape[0]
    pivot_tol = PIVOT_TOL * max(1.0, np.max(np.abs(y)))
    best = np.inf
    for i in range(n):
        if y[i] > pivot_tol:
            best = min(best, max(x[i], 0.0) / y[i])
    if best == np.inf:
        return -1
    ties = np.empty(n, dtype=np.int64)
    count = 0
    tol = RATIO_TOL * (1.0 + best)
    for i in range(n):
        if y[i] > pivot_tol and max(x[i], 0.0) / y[i] <= best + tol:
            if basis[i] == artificial:
                return i
            ties[count] = i
            count += 1
    for k in range(n):
        if count == 1:
            break
        best = np.inf
        for m in range(count):
            best = min(best, Binv[ties[m], k] / y[ties[m]])
        tol = RATIO_TOL * (1.0 + abs(best))
        kept = 0
        for m in range(count):
            if Binv[ties[m], k] / y[ties[m]] <= best + tol:
                ties[kept] = ties[m]
                kept += 1
        count = kept
    return ties[0]


@numba.njit(cache=True)
def _pivot(Binv, x, y, r):
    """Pivot on row r with entering column y (in the current basis): update B^-1 and x."""
    n = x.shape[0]
    p = y[r]
    for k in range(n):
        Binv[r, k] /= p
    x[r] /= p
    for i in range(n):
        f = y[i]
        if i != r and f != 0.0:
            for k in range(n):
                Binv[i, k] -= f * Binv[r, k]
            x[i] -= f * x[r]


def _mip_outcome(problem: _Problem, solver: str, t: Optional[float], bound: float, y,
                 b) -> tuple:
    """
    Return (status, z, detail) of a MIP's answer: z = y / t polished, certified, or failed.

    ``t`` is None without an incumbent.  A verified z wins over the bound: a
    t below T_CERTIFY whose pattern polishes to a solution is a solution.
    """
    if t is not None and t > 0.0:
        y = np.asarray(y) / t
        for basic, how in ((np.asarray(b) > 0.5, "polished"),
                           (y > problem.Ms @ y + problem.ws, "polished on z > s")):
            polished = problem.polish(y, basic)
            if polished is not None:
                return "solved", polished[0], f"{solver} (t = {t:.3g}, {how})"
        z, residual = problem.accept(y)
        if residual <= problem.tolerance:
            return "solved", z, f"{solver} (t = {t:.3g})"
        if bound > T_CERTIFY:
            return ("failed", None, f"{solver} found t = {t:.3g} but its z has residual "
                    f"{residual:.3g} > {problem.tolerance:g}, also polished")
    if bound <= T_CERTIFY:
        return ("no solution", None, f"{solver} certified no solution (max t <= {bound:.3g}"
                f" <= {T_CERTIFY:g}: none with sum(z) < {1.0 / T_CERTIFY - 1.0:.3g}, "
                "equilibrated)")
    return "failed", None, f"{solver} found no t > 0 but its bound is {bound:.3g}: undecided"


def _big_m(problem: _Problem) -> np.ndarray:
    """
    Return S_i = max(0, max_j M_ij, w_i), the least upper bound of s_i over the MIP.

    s_i = sum_j M_ij y_j + w_i t is a convex combination of M_i1..M_in, w_i
    (y, t >= 0 sum to 1), so S_i is exact, and far tighter than the
    bound sum_j |M_ij| + |w_i| that y, t <= 1 alone give.
    """
    return np.maximum(np.maximum(np.max(problem.Ms, axis=1), problem.ws), 0.0)


@functools.lru_cache(maxsize=1)
def _gurobi_env():
    """Return a started, quiet Gurobi environment (one per process: starting one takes ms)."""
    import gurobipy as gp
    env = gp.Env(empty=True)
    env.setParam("OutputFlag", 0)
    env.start()
    return env


def _solve_gurobi(problem: _Problem) -> tuple:
    """Return (status, z, detail) of the homogenised MIP solved by Gurobi (matrix API)."""
    try:
        import gurobipy as gp
    except ImportError:
        return "failed", None, "gurobi: gurobipy is not installed (pip install gurobipy)"
    n = len(problem.ws)
    model, v = _gurobi_model(problem)
    start = time.perf_counter()
    for _ in range(MIP_ROUNDS):
        model.setParam("TimeLimit", max(MIP_TIME_LIMIT - (time.perf_counter() - start), 0.0))
        _gurobi_optimize(model, n)
        if model.Status in (gp.GRB.INFEASIBLE, gp.GRB.INF_OR_UNBD):
            return "no solution", None, "gurobi certified no solution (the MIP is infeasible)"
        if model.Status not in _GUROBI_ANSWERED or (model.SolCount == 0
                                                    and model.Status == gp.GRB.TIME_LIMIT):
            status = _GUROBI_STATUS.get(model.Status, f"status {model.Status}")
            return "failed", None, f"gurobi stopped: {status}"
        x = np.asarray(v.X) if model.SolCount else np.zeros(2 * n + 1)
        t = x[n] if model.SolCount else None
        outcome = _mip_outcome(problem, "gurobi", t, model.ObjBound, x[:n], x[n + 1:])
        if model.Status == gp.GRB.TIME_LIMIT:
            return _timed_out(outcome)
        if outcome[0] != "failed" or t is None or model.Status != gp.GRB.USER_OBJ_LIMIT:
            return outcome
        model.setParam("BestObjStop", 2.0 * t)     # spurious: look for a larger t
    return outcome


def _timed_out(outcome: tuple) -> tuple:
    """Return a MIP outcome reached at MIP_TIME_LIMIT, its detail saying so if it failed."""
    status, z, detail = outcome
    return status, z, detail + (" (time limit)" if status == "failed" else "")


_GUROBI_ANSWERED = (2, 9, 15)      # OPTIMAL, TIME_LIMIT (its incumbent), USER_OBJ_LIMIT
_GUROBI_STATUS = {9: "time limit (MIP_TIME_LIMIT)", 11: "interrupted", 12: "numeric trouble"}


def _gurobi_model(problem: _Problem) -> tuple:
    """Return (model, v): the MIP over v = [y; t; b] with one sparse constraint matrix."""
    import gurobipy as gp
    from scipy import sparse
    n = len(problem.ws)
    Ms, ws, S = problem.Ms, problem.ws, _big_m(problem)
    model = gp.Model(env=_gurobi_env())
    for name in ("FeasibilityTol", "IntFeasTol", "OptimalityTol"):
        model.setParam(name, _GUROBI_TOL)
    model.setParam("Threads", 1)
    model.setParam("BestObjStop", T_CERTIFY)     # a solution: stop (module docstring)
    model.setParam("BestBdStop", T_CERTIFY)      # certified: stop
    vtype = np.array([gp.GRB.CONTINUOUS] * (n + 1) + [gp.GRB.BINARY] * n)
    v = model.addMVar(2 * n + 1, lb=0.0, ub=1.0, vtype=vtype)
    A = np.zeros((3 * n + 1, 2 * n + 1))
    A[:n, :n], A[:n, n] = Ms, ws                        # s >= 0
    A[n:2 * n, :n], A[n:2 * n, n] = Ms, ws              # s <= S (1 - b)
    A[n:2 * n, n + 1:] = np.diag(S)
    A[2 * n:3 * n, :n] = np.eye(n)                      # y <= b
    A[2 * n:3 * n, n + 1:] = -np.eye(n)
    A[3 * n, :n + 1] = 1.0                              # sum(y) + t = 1
    sense = np.array([">"] * n + ["<"] * (2 * n) + ["="])
    rhs = np.concatenate([np.zeros(n), S, np.zeros(n), [1.0]])
    model.addMConstr(sparse.csr_matrix(A), v, sense, rhs)
    objective = np.zeros(2 * n + 1)
    objective[n] = 1.0
    model.setMObjective(None, objective, 0.0, sense=gp.GRB.MAXIMIZE)
    return model, v


def _gurobi_optimize(model, n: int) -> None:
    """Optimise (or resume); raise LcpTooLarge if the licence is too small for the model."""
    optimize_within_licence(model, lambda: LcpTooLarge(
        f"the MIP that certifies this LCP (n = {n}) has {2 * n + 1} variables and "
        f"{3 * n + 1} constraints, more than Gurobi's restricted pip licence allows "
        "(2000 of each). Fix: backend 'lemke' with certify 'scip' (or None), backend "
        "'scip' (in a scenario: lcp: {certify: scip} or {backend: scip}), or a full "
        "Gurobi licence."))


def _solve_scip(problem: _Problem) -> tuple:
    """Return (status, z, detail) of the homogenised MIP solved by SCIP (PySCIPOpt)."""
    try:
        import pyscipopt  # noqa: F401
    except ImportError:
        return "failed", None, "scip: pyscipopt is not installed (pip install pyscipopt)"
    model, y, t, b = _scip_model(problem)
    for _ in range(MIP_ROUNDS):
        model.optimize()
        status = model.getStatus()
        if status == "infeasible":
            return "no solution", None, "scip certified no solution (the MIP is infeasible)"
        if status not in ("optimal", "primallimit", "duallimit", "timelimit"):
            return "failed", None, f"scip stopped with status {status}"
        if model.getNSols() == 0:
            if status == "timelimit":
                return "failed", None, "scip stopped: time limit (MIP_TIME_LIMIT)"
            return _mip_outcome(problem, "scip", None, model.getDualbound(), None, None)
        best = model.getBestSol()
        t_best = best[t]
        outcome = _mip_outcome(problem, "scip", t_best, model.getDualbound(),
                               [best[v] for v in y], [best[v] for v in b])
        if status == "timelimit":
            return _timed_out(outcome)
        if outcome[0] != "failed" or status != "primallimit":
            return outcome
        model.setParam("limits/primal", 2.0 * t_best)    # spurious: look for a larger t
    return outcome


def _scip_model(problem: _Problem) -> tuple:
    """Return (model, y, t, b): the MIP in PySCIPOpt, quiet, with tolerance 1e-9."""
    import pyscipopt
    n = len(problem.ws)
    Ms, ws, S = problem.Ms, problem.ws, _big_m(problem)
    model = pyscipopt.Model()
    model.hideOutput()
    for name, value in _SCIP_PARAMS.items():
        model.setParam(name, value)
    y = [model.addVar(lb=0.0, ub=1.0) for _ in range(n)]
    t = model.addVar(lb=0.0, ub=1.0)
    b = [model.addVar(vtype="B") for _ in range(n)]
    for i in range(n):
        s = pyscipopt.quicksum(float(Ms[i, j]) * y[j] for j in range(n) if Ms[i, j] != 0.0)
        s = s + float(ws[i]) * t
        model.addCons(s >= 0.0)
        model.addCons(s + float(S[i]) * b[i] <= float(S[i]))
        model.addCons(y[i] <= b[i])
    model.addCons(pyscipopt.quicksum(y) + t == 1.0)
    model.setObjective(t, "maximize")
    return model, y, t, b


_MIPS = {"gurobi": _solve_gurobi, "scip": _solve_scip}
