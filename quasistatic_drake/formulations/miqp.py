r"""
The MIQP time step of Pang & Tedrake 2018, eq. 23.

Pang & Tedrake, "A Robust Time-Stepping Scheme for Quasistatic Rigid Multibody
Systems", IROS 2018.

Decision variables, all per step l (superscript dropped):

    x = h v'            displacements in velocity coordinates, [x_u; x_a]
                        (Delta q = N(q) x; v = q_dot gives Delta q = x)
    P_n  (n_c)          normal impulses            [N s]
    P_f  (n_d)          friction impulses along the balanced tangents d_ij
    Gamma (n_c)         slack, the sliding distance of each contact [m]
    z    (N = 2 n_c + n_d)  binaries of the big-M complementarity

    minimise  || x_a - xbar_a ||^2 + eps || x_u ||^2,   xbar_a = h vbar_a   (Sec. IV-B)
    subject to
      J_n,u^T P_n + J_f,u^T P_f + h tau_u = 0                  (23a) force balance
      w = [phi + J_n x;  E Gamma + J_f x;  U P_n - E^T P_f]    (23b) = R y + b
      w >= 0,  lambda = [P_n; P_f; Gamma] >= 0                 (23c)
      w <= M_w z,  lambda <= M_lambda (1 - z)                  (23d) big-M
      z in {0, 1}^N                                            (23e)
      sum_{j in pair(i)} P_n,j / h >= -K phibar_i               (23f), per body pair

with phibar = phi + J_n,u x_u + J_n,a xbar_a, the hypothetical penetration of
eq. 21 (a linear function of x_u).

The lower bound of eq. 23f is applied per body pair: the normal impulses of
all the points that join the same two bodies sum to at least h K times the
deepest hypothetical penetration among them (one row per point, so the
deepest binds).  With one point per pair, as in Pang & Tedrake 2018's examples, this is
eq. 23f exactly.  A face or line contact sampled at several points is one
patch with one stiffness: bounding every point alone would make the squeeze
force grow with the number of points, and would demand that every point
touch, which a patch that is a little tilted (a cylinder squeezed by a pad)
cannot satisfy, so the MIQP turned infeasible or very hard.

The small term eps ||x_u||^2 (``object_motion_weight``, 1e-6) is a
tie-break that is not in the paper: eq. 23 does not price the objects'
motion, so an object in neutral equilibrium (a cylinder held by two pads
turning about the line between them, or tipping about a support edge under
its centre of mass) could move by any amount at no cost, and the solver
returned whichever vertex it found: a held cylinder turned 5 degrees in one
step.  The least-motion solution is the one at rest.  At 1e-6 the term cannot
compete with the tracking error: a robot still pushes an object rather than
fall 1e-3 short of its command.

The one-step-delayed variant of Sec. V-B replaces phibar with a constant,
``phibar_delayed``, computed by the caller from the previous step.  Robot
joints follow their command as closely as non-penetration allows; they are
not springs here.

Big-M (``big_m_auto``).  All big-M values come from two bounds of the step:

* D, how far any point may move in one step: the detection tolerance plus
  twice the largest distance a robot point would travel under the command
  (each contact's two bodies together move at most 2 D relative to each other
  in the cases the simulator resolves; an object is only moved by robots and
  by settling into support, and the detection tolerance bounds that gap);
* F, the largest contact force: F = K (max_i max(0, -phibar_i(x_u = 0)) + 2 D)
  + W / mu_min, the spring of eq. 23f at the deepest hypothetical penetration
  (x_u may add 2 D to it), plus the objects' total weight W held by friction
  alone.  P_max = 2 h F (a factor 2 of margin).

Then M(phi_next,i) = max(phi_i, 0) + 2 D, M(rho_ij) = 4 D (Gamma_i <= 2 D
plus |J_f x| <= 2 D), M(s_i) = mu_i P_max, M(P_n,i) = P_max,
M(P_f,ij) = mu_i P_max, M(Gamma_i) = 2 D.  A big-M row is *tight* when its
left side is within 1e-6 M of M at the solution; the solution then reports
it, because a tight bound means M may have cut off the true solution.

This module imports neither Drake nor ROS; eq. 23's data, settings and
solution types are in miqp_data.py, the backends in miqp_backends.py (which
import miqp_data.py, not this module).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from quasistatic_drake.contact import ContactSet, thinned_indices
from quasistatic_drake.errors import CommandError
from quasistatic_drake.formulations.base import (Formulation, ModelFacts, one_step_reference,
                                                 StepProblem, StepSolution)
from quasistatic_drake.formulations.miqp_backends import BACKENDS, MiqpSolverMissing
from quasistatic_drake.formulations.miqp_data import (MIQP_BACKENDS, MiqpData,  # noqa: F401
                                                      MiqpSettings, MiqpSolution, tight_rows)
from quasistatic_drake.formulations.miqp_points import embedded, passed_through, start_rows
from quasistatic_drake.formulations.miqp_sensitivity import fixed_binary_derivative
from quasistatic_drake.manifold import sweep_lengths
from quasistatic_drake.schema import SchemaError

M_MARGIN = 2.0            # P_max = M_MARGIN h F
# A patch-only solve that ends so is solved again with every point (MiqpFormulation.solve).
PATCH_FAILURES = ("infeasible", "overdetermined")


def miqp_data(contacts: ContactSet, h: float, idx_u: np.ndarray, idx_a: np.ndarray,
              xbar_a: np.ndarray, tau_u: np.ndarray, settings: MiqpSettings,
              x_lower: np.ndarray, x_upper: np.ndarray, point_reach: float,
              weight: float, phibar_delayed: Optional[np.ndarray] = None) -> MiqpData:
    """
    Assemble eq. 23 for a ContactSet (module docstring).

    ``tau_u`` is the objects' generalized gravity force; ``x_lower``/``x_upper``
    bound x (joint limits); ``point_reach`` is D of the big-M derivation and
    ``weight`` the objects' total weight W [N].
    """
    n_v, n_c, n_d = contacts.J_n.shape[1], contacts.n_c, contacts.J_f.shape[0]
    n_y = n_v + 2 * n_c + n_d
    J_n, J_f = contacts.J_n, contacts.J_f
    E = np.kron(np.eye(n_c), np.ones((contacts.n_d, 1)))
    U = np.diag(contacts.mu)
    cols_x, cols_n = slice(0, n_v), slice(n_v, n_v + n_c)
    cols_f, cols_g = slice(n_v + n_c, n_v + n_c + n_d), slice(n_v + n_c + n_d, n_y)
    R = np.zeros((2 * n_c + n_d, n_y))
    R[:n_c, cols_x] = J_n                                       # phi_next
    R[n_c:n_c + n_d, cols_x] = J_f                              # rho
    R[n_c:n_c + n_d, cols_g] = E
    R[n_c + n_d:, cols_n] = U                                   # s
    R[n_c + n_d:, cols_f] = -E.T
    b = np.concatenate([contacts.phi, np.zeros(n_d + n_c)])
    A_eq = np.zeros((len(idx_u), n_y))
    A_eq[:, cols_n] = J_n[:, idx_u].T
    A_eq[:, cols_f] = J_f[:, idx_u].T
    b_eq = -h * np.asarray(tau_u, dtype=float)
    K = settings.contact_stiffness
    A_lb = np.zeros((n_c, n_y))
    A_lb[:, cols_n] = same_pair_matrix(contacts)          # sum of the pair's P_n (23f)
    if phibar_delayed is None:                 # P_n + h K J_n,u x_u >= -h K (phi + J_n,a xbar)
        A_lb[:, idx_u] = h * K * J_n[:, idx_u]
        phibar_fixed = contacts.phi + J_n[:, idx_a] @ xbar_a
    else:
        phibar_fixed = np.asarray(phibar_delayed, dtype=float)
    b_lb = -h * K * phibar_fixed
    M_w, M_lambda = big_m(contacts, h, settings, phibar_fixed, point_reach, weight)
    return MiqpData(n_v=n_v, n_c=n_c, n_d=n_d, idx_u=np.asarray(idx_u, int),
                    idx_a=np.asarray(idx_a, int), xbar_a=np.asarray(xbar_a, float),
                    A_eq=A_eq, b_eq=b_eq, R=R, b=b, A_lb=A_lb, b_lb=b_lb, x_lower=x_lower,
                    x_upper=x_upper, M_w=M_w, M_lambda=M_lambda,
                    motion_weight=settings.object_motion_weight)


def same_pair_matrix(contacts: ContactSet) -> np.ndarray:
    """Return S with S[i, j] = 1 when contacts i and j join the same two bodies."""
    pairs = list(zip(contacts.body_a, contacts.body_b))
    S = np.zeros((len(pairs), len(pairs)))
    for i, pair in enumerate(pairs):
        S[i] = [pair == other for other in pairs]
    return S


def big_m(contacts: ContactSet, h: float, settings: MiqpSettings, phibar: np.ndarray,
          point_reach: float, weight: float) -> tuple[np.ndarray, np.ndarray]:
    """Return M_w and M_lambda per complementarity row (module docstring, "Big-M")."""
    n_c, n_d = contacts.n_c, contacts.J_f.shape[0]
    if settings.big_m is not None:
        M = float(settings.big_m)
        return np.full(2 * n_c + n_d, M), np.full(2 * n_c + n_d, M)
    D = point_reach
    mu = contacts.mu
    mu_min = max(float(np.min(mu, initial=1.0)), 1e-3)
    deepest = float(np.max(np.maximum(-phibar, 0.0), initial=0.0))
    F = settings.contact_stiffness * (deepest + 2.0 * D) + weight / mu_min
    P_max = M_MARGIN * h * F
    mu_f = np.repeat(mu, contacts.n_d)
    M_w = np.concatenate([np.maximum(contacts.phi, 0.0) + 2.0 * D, np.full(n_d, 4.0 * D),
                          np.maximum(mu, 1e-3) * P_max])
    M_lambda = np.concatenate([np.full(n_c, P_max), np.maximum(mu_f, 1e-3) * P_max,
                               np.full(n_c, 2.0 * D)])
    return M_w, M_lambda


def renumbered(names: tuple[str, ...], kept: np.ndarray, per_contact: int
               ) -> tuple[str, ...]:
    """Return ``tight_rows`` names of the kept points' eq. 23 numbered over every point."""
    out = []
    for name in names:
        row, index = name[:-1].split("[")
        k = int(index)
        if row in ("rho", "P_f"):
            k = int(kept[k // per_contact]) * per_contact + k % per_contact
        else:
            k = int(kept[k])
        out.append(f"{row}[{k}]")
    return tuple(out)


def contact_impulses_miqp(contacts: ContactSet, P_n: np.ndarray,
                          P_f: np.ndarray) -> np.ndarray:
    """Return the impulse on B by A per contact, P_n,i n_i + sum_j P_f,ij d_ij (world)."""
    tangents = contacts.tangents_W.reshape(contacts.n_c, contacts.n_d, 3)
    friction = np.einsum("ij,ijk->ik", P_f.reshape(contacts.n_c, contacts.n_d), tangents)
    return P_n[:, None] * contacts.normal_W + friction


@dataclass(frozen=True)
class MiqpStepSolution(StepSolution):
    """The solved eq. 23: v' = x / h and the impulses, with the MIQP's own facts."""

    binaries: int = 0                     # N = 2 n_c + n_d
    tight_big_m: tuple[str, ...] = ()     # big-M rows tight at the solution (tight_rows)
    mip_start: Optional[np.ndarray] = None   # the solution's binaries, a MIP start
    y: Optional[np.ndarray] = None           # [x; P_n; P_f; Gamma] of eq. 23 (the derivative)
    added_points: int = 0                    # dropped points that joined (miqp_points.py)
    nodes: int = 0                           # branch-and-bound nodes of the step's solves

    @property
    def warm_start_next(self) -> Optional[np.ndarray]:
        """Return this step's binaries: the next step's MIP start."""
        return self.mip_start


class MiqpFormulation(Formulation):
    """
    Eq. 23 as a formulation plug-in (module docstring; ``formulation: miqp``).

    Robot joints track the one-step target q_a + h v_cmd (eq. 21): the
    reference it hands on has no spring preload.  A command beyond a
    joint's velocity limit is followed at the limit: the tracking target
    h vbar and the big-M reach D use the command clipped to the bounds (a
    100 rad/s command made D, and with it every big-M, so large that Gurobi
    and SCIP ran into the time limit).  The warm start is a MIP start: an
    earlier solution's binaries.  A failed solve is retried with less
    penetration recovery only when it was infeasible, with 3 bisections
    (each solve costs milliseconds).
    """

    name = "miqp"
    settings_type = MiqpSettings
    recovery_bisections = 3
    gives_gradients = True
    solves_at_warm_up = False    # a solve dwarfs the kernels' load; a licence limit: at a step

    def __init__(self, facts: ModelFacts, settings: MiqpSettings):
        """Open the settings' MIQP backend (SchemaError when it is not installed)."""
        super().__init__(facts, settings)
        if not np.isfinite(facts.detection_tolerance):
            raise SchemaError("scenario.contact_detection_tolerance", "must be finite under "
                              "formulation: miqp (its big-M bounds grow with it). Fix: a "
                              "finite tolerance, such as 0.02.")
        try:
            self.backend = BACKENDS[settings.backend]()
        except MiqpSolverMissing as err:
            raise SchemaError("backend", str(err)) from None

    def solve(self, problem: StepProblem, contacts: ContactSet,
              warm_start: Optional[np.ndarray] = None) -> MiqpStepSolution:
        """
        Assemble eq. 23 for this step and solve it with the backend (class docstring).

        With ``max_points_per_pair`` set, eq. 23 is solved on each pair's
        patch and the points it drops join where the solution passes through
        them (``miqp_points.py``); where the patch alone cannot hold the
        objects (infeasible; DAQP may find a patch's rows dependent,
        "overdetermined"), every point joins.  The solution covers every
        point.
        """
        full = self._data(problem, contacts)
        first = self._kept(contacts)
        kept, spent, nodes = first, 0.0, 0
        while True:
            subset = contacts if len(kept) == contacts.n_c else contacts.take(kept)
            data = full if subset is contacts else self._data(problem, subset)
            answer = self.backend.solve(data, self.settings,
                                        start=start_rows(warm_start, full, kept))
            spent += answer.solve_time
            nodes += answer.nodes
            if answer.x is None and len(kept) < contacts.n_c and any(
                    word in answer.status for word in PATCH_FAILURES):
                kept = np.arange(contacts.n_c)   # the dropped points may be what holds it
            elif answer.x is None:
                return MiqpStepSolution(None, np.zeros((contacts.n_c, 3)), answer.status,
                                        spent, binaries=data.n_binaries, nodes=nodes)
            else:
                y, z = embedded(full, kept, answer.x, answer.P_n, answer.P_f, answer.gamma,
                                answer.z)
                missed = passed_through(full, y, kept)
                if not len(missed):
                    break
                kept = np.union1d(kept, missed)
        n, n_c = full.n_v, full.n_c
        impulses = contact_impulses_miqp(contacts, y[n:n + n_c], y[n + n_c:n + n_c + full.n_d])
        return MiqpStepSolution(answer.x / self.facts.h, impulses, "optimal", spent,
                                binaries=data.n_binaries, added_points=len(kept) - len(first),
                                tight_big_m=renumbered(answer.tight_big_m, kept, contacts.n_d),
                                mip_start=z, y=y, nodes=nodes)

    def _kept(self, contacts: ContactSet) -> np.ndarray:
        """Return the points eq. 23 is first solved on: each pair's patch, or all."""
        per_pair = self.settings.max_points_per_pair
        if not per_pair:
            return np.arange(contacts.n_c)
        return thinned_indices(contacts, per_pair, reach=0.0)

    def solution_derivative(self, problem: StepProblem, contacts: ContactSet,
                            solution: MiqpStepSolution, changes: list, delta: float
                            ) -> tuple[np.ndarray, bool]:
        """
        Return dv'/dtheta with the binaries fixed at the solution (``miqp_sensitivity``).

        The KKT derivative of the fixed-binary QP, with central differences
        of its data per parameter.  A parameter whose changed step has other
        contact rows has no derivative (its column is zero), nor has a step
        whose big-M bounds are tight (they may have cut the true solution
        off): both are flagged one-sided.
        """
        data = self._data(problem, contacts)
        changed = [tuple(self._data(*step) for step in pair) for pair in changes]
        dx, degenerate = fixed_binary_derivative(data, solution.y, solution.mip_start,
                                                 changed, delta)
        return dx / self.facts.h, degenerate or bool(solution.tight_big_m)

    def _data(self, problem: StepProblem, contacts: ContactSet) -> MiqpData:
        """Return eq. 23's data for this step (the command clipped to the joints' limits)."""
        settings, facts = self.settings, self.facts
        h, idx_u, idx_a = facts.h, facts.object_v_idx, facts.robot_v_idx
        v_cmd = np.clip(problem.v_cmd, problem.v_lower[idx_a], problem.v_upper[idx_a])
        phibar_delayed = None
        if settings.delayed_lower_bound:
            phibar_delayed = contacts.phi + contacts.J_n[:, idx_a] @ (problem.q_ref
                                                                      - problem.q_a)
        return miqp_data(contacts, h, idx_u, idx_a, h * v_cmd, problem.tau_u, settings,
                         h * problem.v_lower, h * problem.v_upper,
                         self._point_reach(problem, v_cmd), facts.object_weight,
                         phibar_delayed)

    def recovers_from(self, solution: StepSolution) -> bool:
        """Retry with less penetration recovery only an infeasible MIQP (not a time limit)."""
        return "infeasible" in solution.status

    def next_reference(self, problem: StepProblem, q_a_next: np.ndarray,
                       solution: StepSolution) -> tuple[np.ndarray, bool]:
        """Return the one-step target q_a + h v_cmd (eq. 21); it is never bounded."""
        return one_step_reference(problem, self.facts.h), False

    def reference_base(self, q_a: np.ndarray, q_ref: np.ndarray) -> np.ndarray:
        """Return q_a: the target q_a + h v_cmd has no spring reference (eq. 21)."""
        return q_a

    def checked_warm_start(self, warm_start: Any) -> Optional[np.ndarray]:
        """Return a MIP start as a 0/1 float array (CommandError if it is not one)."""
        if warm_start is None:
            return None
        try:
            z = np.array(warm_start, dtype=float).reshape(-1)
        except (TypeError, ValueError) as err:
            raise CommandError(f"warm_start (a MIP start) must be a sequence of 0/1 values, "
                               f"got {warm_start!r}. Fix: pass a StepResult's "
                               "warm_start_next, or None.") from err
        if not np.all((z == 0.0) | (z == 1.0)):
            raise CommandError("warm_start (a MIP start) must hold only 0 and 1 values (the "
                               "binaries of an earlier step). Fix: pass a StepResult's "
                               "warm_start_next, or None.")
        return z

    def _point_reach(self, problem: StepProblem, v_cmd: np.ndarray) -> float:
        """D of the big-M: the tolerance plus twice the farthest robot point's travel."""
        v = np.zeros(self.facts.n_v)
        v[self.facts.robot_v_idx] = v_cmd
        sweeps = sweep_lengths(problem.J_w, problem.J_v, problem.body_radii, v, self.facts.h)
        return self.facts.detection_tolerance + 2.0 * float(np.max(sweeps, initial=0.0))
