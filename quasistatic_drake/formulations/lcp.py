r"""
The finite-feedback LCP of Halm & Posa as a formulation plug-in (``formulation: lcp``).

Halm & Posa, "A Quasi-static Model and Simulation Approach for Pushing,
Grasping, and Jamming" (seed 004).  Perfect velocity control of the robots
(Zhou et al.'s model, eqs. 13-14) has no solution when an object jams; with
a finite feedback gain the robots move at u + c B F_m (eqs. 15-17), the
LCP always has a solution for c > 0 (Thm 1), and it converges to perfect
velocity control as c -> 0 where that exists (Thms 2-4).  Each step solves
the time-stepping LCP of Sec. 5 (eqs. 31-38, ``lcp_math.finite_feedback_lcp``)
and moves the objects by dq_o = A J_o^T Lambda and the robots by
dq_m = c B J_m^T Lambda + h u (eqs. 32-33).

The model is planar: every object moves in one plane on three coordinates
(a planar joint, or x, y and yaw joints), each contact has two tangent rows
+-t in that plane (``friction_directions: 2``), and the table under the
objects is their limit surface, the ellipsoid A~ = diag(a_x, a_y, a_theta)
in the body frame (eq. 12).  Robots may have any prismatic or revolute
joints.  What the model cannot honour is refused when the engine is built:
a scene that is not planar, gravity in the plane of motion (the limit
surface replaces it), ``quasi_dynamic`` (objects have no inertia here).

Robot commands are saturated at the joints' position and velocity limits,
as a controller does (and as the MIQP does).  The limits, and any bound the
engine puts on a step (the turn bound of a re-solve), are honoured as
frictionless rows of the LCP, dq_j >= h v_lower_j and h v_upper_j >= dq_j:
the feedback holds a robot pushed back at its limit.  The rows are added
only for the bounds a step would break (``MAX_BOUND_ROUNDS``).

The impulses are known only up to the limit-surface factor k of eq. 10,
so the step reports them as scaled impulses and no force in newtons
(``Formulation.scaled_impulses``).  The reference a step hands on is the
one-step target q_a + h u (no spring preload).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from quasistatic_drake.contact import ContactSet
from quasistatic_drake.formulations.base import (Formulation, ModelFacts, ObjectFrame,
                                                 one_step_reference, StepProblem, StepSolution)
from quasistatic_drake.formulations.lcp_math import (command_rhs, finite_feedback_lcp,
                                                     lcp_solution_derivative, PlanarContacts,
                                                     step_displacements)
from quasistatic_drake.formulations.lcp_solvers import BACKENDS, CERTIFIERS, solve_lcp
from quasistatic_drake.schema import (mapping_of, number, one_of, SchemaError, setting,
                                      vector)


# Bound rows are added lazily: a step is solved with the bounds its nominal motion (h u)
# would break, and solved again with the ones its solution breaks, at most this often.  A
# solution that meets the bounds left out solves the full LCP (their impulses are 0).
MAX_BOUND_ROUNDS = 4
BOUND_TOLERANCE = 1e-9   # relative: a velocity this far past a bound breaks it


@dataclass(frozen=True)
class LcpSettings:
    """The scenario's ``lcp:`` block (README, "Scenario files")."""

    feedback_scale: float = setting(
        0.01, number(nonnegative=True),
        "c of eq. 16 [m/(N s) per unit of B]; 0 is perfect velocity control (may have no "
        "solution)")
    relative_gains: dict = setting(
        check=mapping_of(vector(positive=True), "a robot name"), factory=dict,
        doc="the diagonal of B per robot, one value per commanded joint (default ones)")
    limit_surface: dict = setting(
        check=mapping_of(vector(3, positive=True), "an object name"), factory=dict,
        doc="diag(a_x, a_y, a_theta) of A~ per object, body frame (eq. 12; default ones)")
    backend: str = setting("lemke", one_of(*BACKENDS, what="LCP backend"),
                           "the LCP solver: lemke (exact pivoting, MIP certificate), gurobi "
                           "or scip (MIP)")
    certify: str = setting("gurobi", one_of(*CERTIFIERS, what="certifying MIP"),
                           "the MIP that decides a step lemke cannot: gurobi or scip")


@dataclass(frozen=True)
class LcpStepSolution(StepSolution):
    """A solved (or failed) step LCP: z = [Lambda_N; Lambda_T; gamma] and how it was solved."""

    z: Optional[np.ndarray] = None
    lcp_size: int = 0
    residual: float = np.inf
    detail: str = ""
    bounded: Optional[np.ndarray] = None    # the velocities whose bounds were rows
    # (problem, contacts, rows, A, u, LCP data) of the solved LCP, for its derivative
    assembled: Optional[tuple] = None


class LcpFormulation(Formulation):
    """The time-stepping LCP of Halm & Posa, Sec. 5 (module docstring; ``formulation: lcp``)."""

    name = "lcp"
    settings_type = LcpSettings
    needs_object_frames = True
    scaled_impulses = True
    gives_gradients = True
    checks_one_sided_by_solving = True
    recovery_bisections = 4

    def __init__(self, facts: ModelFacts, settings: LcpSettings):
        """Check that the scene is planar and the settings name its robots and objects."""
        super().__init__(facts, settings)
        _check_planar(facts)
        self.cB = settings.feedback_scale * np.diag(_relative_gains(facts, settings))
        self.A_body = _limit_surfaces(facts, settings)
        self.plane_basis = _plane_basis(facts.plane_normal)    # (e1, e2): the model's plane
        for i, frame in enumerate(facts.object_frames_default):
            _plane_jacobian(frame, facts.plane_normal, self.plane_basis, facts.object_names[i])

    def solve(self, problem: StepProblem, contacts: ContactSet,
              warm_start=None) -> LcpStepSolution:
        """Assemble eqs. 37-38 for this step, solve the LCP and return v' = dq / h."""
        facts = self.facts
        lower, upper = problem.v_lower, problem.v_upper
        nominal = np.zeros(facts.n_v)
        nominal[facts.robot_v_idx] = np.clip(problem.v_cmd, lower[facts.robot_v_idx],
                                             upper[facts.robot_v_idx])
        bounded = _violated(nominal, lower, upper, np.zeros(facts.n_v, dtype=bool))
        spent = 0.0
        for _ in range(MAX_BOUND_ROUNDS):
            rows, A, u, data = self._lcp_data(problem, contacts, bounded)
            result = solve_lcp(data.M, data.w, backend=self.settings.backend,
                               certify=self.settings.certify)
            spent += result.solve_time
            if result.z is None:
                return LcpStepSolution(None, np.zeros((contacts.n_c, 3)), result.status,
                                       spent, lcp_size=len(data.w), detail=result.detail)
            v = self._velocity(rows, A, u, result.z)
            more = _violated(v, lower, upper, bounded)
            if not more.any():
                return LcpStepSolution(v, contact_impulses(contacts, result.z), "optimal",
                                       spent, z=result.z, lcp_size=len(data.w),
                                       residual=result.residual, detail=result.detail,
                                       bounded=bounded.copy(),
                                       assembled=(problem, contacts, rows, A, u, data))
            bounded |= more
        return LcpStepSolution(None, np.zeros((contacts.n_c, 3)), "bounds not met", spent,
                               lcp_size=len(data.w),
                               detail=f"{MAX_BOUND_ROUNDS} rounds of bound rows")

    def recovers_from(self, solution: StepSolution) -> bool:
        """Return True: with less penetration to work off, a step may have a solution."""
        return True

    def solution_derivative(self, problem: StepProblem, contacts: ContactSet,
                            solution: LcpStepSolution, changes: list, delta: float
                            ) -> tuple[np.ndarray, bool]:
        """
        Return dv'/dtheta through the LCP's basis, with central differences of its data.

        Per parameter, the data's change dM, dw gives the basis the change
        dM z + dw (``lcp_math.lcp_solution_derivative``), and the step's
        displacement dq = D z + d0 (eqs. 32-33) changes by dD z + dd0 + D dz.
        A parameter whose changed step has other rows has no derivative: its
        column is zero and the result is flagged one-sided.
        """
        z = solution.z
        own = solution.assembled
        if own is not None and own[0] is problem and own[1] is contacts:
            rows, A, u, data = own[2:]        # the step's own LCP, as it was solved
        else:
            rows, A, u, data = self._lcp_data(problem, contacts, solution.bounded)
        k = len(changes)
        d_data, dv, broken = np.zeros((len(z), k)), np.zeros((self.facts.n_v, k)), False
        commands = [j for j, (plus, minus) in enumerate(changes)
                    if plus[1] is contacts and minus[1] is contacts]   # M is the same
        if commands:
            d_u = np.array([self._command(changes[j][0][0]) - self._command(changes[j][1][0])
                            for j in commands]).T / (2 * delta)
            d_data[:len(rows.J_n_m) + len(rows.J_t_m), commands] = command_rhs(
                rows, self.facts.h, d_u)
            dv[:, commands] = self._velocity(rows, A, d_u, np.zeros((len(z), len(commands))))
        for j, (plus, minus) in enumerate(changes):
            if j in commands:
                continue
            high, low = (self._lcp_data(*step, solution.bounded) for step in (plus, minus))
            if high[3].M.shape != data.M.shape or low[3].M.shape != data.M.shape:
                broken = True
                continue
            d_data[:, j] = ((high[3].M - low[3].M) @ z + high[3].w - low[3].w) / (2 * delta)
            dv[:, j] = (self._velocity(*high[:3], z) - self._velocity(*low[:3], z)) / (2 * delta)
        derivative = lcp_solution_derivative(data.M, data.w, z, d_data)
        dv += self._velocity(rows, A, np.zeros((len(u), k)), derivative.dz)
        return dv, bool(broken or derivative.degenerate)

    def _command(self, problem: StepProblem) -> np.ndarray:
        """Return u: the commanded robot velocities within their limits."""
        idx = self.facts.robot_v_idx
        return np.clip(problem.v_cmd, problem.v_lower[idx], problem.v_upper[idx])

    def _lcp_data(self, problem: StepProblem, contacts: ContactSet,
                  bounded: np.ndarray) -> tuple:
        """Return (rows, A, u, LCP data) of a step with the bound rows ``bounded``."""
        facts = self.facts
        lower, upper = problem.v_lower, problem.v_upper
        u = self._command(problem)
        A = self.limit_surface_matrix(problem.object_frames)
        rows = planar_contacts(contacts, lower, upper, facts.h, facts.object_v_idx,
                               facts.robot_v_idx, bounded)
        return rows, A, u, finite_feedback_lcp(rows, A, self.cB, facts.h, u)

    def _velocity(self, rows: PlanarContacts, A: np.ndarray, u: np.ndarray,
                  z: np.ndarray) -> np.ndarray:
        """Return v' = [dq_o; dq_m] / h in v's layout (eqs. 32-33); u, z may be columns."""
        facts = self.facts
        dq_o, dq_m = step_displacements(rows, A, self.cB, facts.h, u, z)
        v = np.zeros((facts.n_v,) + np.shape(u)[1:])
        v[facts.object_v_idx], v[facts.robot_v_idx] = dq_o / facts.h, dq_m / facts.h
        return v

    def next_reference(self, problem: StepProblem, q_a_next: np.ndarray,
                       solution: StepSolution) -> tuple[np.ndarray, bool]:
        """Return the one-step target q_a + h u; it is never bounded."""
        return one_step_reference(problem, self.facts.h), False

    def reference_base(self, q_a: np.ndarray, q_ref: np.ndarray) -> np.ndarray:
        """Return q_a: the target q_a + h u has no spring reference."""
        return q_a

    def limit_surface_matrix(self, frames: tuple[ObjectFrame, ...]) -> np.ndarray:
        """
        Return A over the objects' coordinates: per object J^-1 R A~ R^T J^-T (eq. 12).

        R turns the body frame's in-plane axes into the plane's, and J maps
        the object's three velocities to its centre of mass's in-plane
        velocity and turn rate (the identity for a planar joint at the
        centre of mass, where this is the paper's A = R A~ R^T).
        """
        facts = self.facts
        n = len(facts.object_v_idx)
        A = np.zeros((n, n))
        start = 0
        for name, frame, A_body in zip(facts.object_names, frames, self.A_body):
            J, R = _plane_jacobian(frame, facts.plane_normal, self.plane_basis, name)
            J_inv = np.linalg.inv(J)
            A[start:start + 3, start:start + 3] = J_inv @ R @ A_body @ R.T @ J_inv.T
            start += 3
        return A


def planar_contacts(contacts: ContactSet, v_lower: np.ndarray, v_upper: np.ndarray, h: float,
                    object_v_idx: np.ndarray, robot_v_idx: np.ndarray,
                    bounded: np.ndarray) -> PlanarContacts:
    """
    Return the LCP's rows: each contact (normal, +t, -t), then the bounds of ``bounded``.

    A bound v_lower_j <= v'_j is the frictionless row dq_j - h v_lower_j >= 0
    (normal e_j, gap -h v_lower_j); an upper bound is -dq_j + h v_upper_j >= 0.
    ``bounded`` (n_v booleans) picks the velocities whose finite bounds are rows.
    """
    lower = np.flatnonzero(bounded & np.isfinite(v_lower))
    upper = np.flatnonzero(bounded & np.isfinite(v_upper))
    n_v = len(v_lower)
    bound_J = np.vstack([np.eye(n_v)[lower], -np.eye(n_v)[upper]]).reshape(-1, n_v)
    J_n = np.vstack([contacts.J_n, bound_J])
    phi = np.concatenate([contacts.phi, -h * v_lower[lower], h * v_upper[upper]])
    return PlanarContacts(phi=phi, J_n_o=J_n[:, object_v_idx], J_n_m=J_n[:, robot_v_idx],
                          J_t_o=contacts.J_f[:, object_v_idx],
                          J_t_m=contacts.J_f[:, robot_v_idx], mu=contacts.mu.copy())


def _violated(v: np.ndarray, lower: np.ndarray, upper: np.ndarray,
              bounded: np.ndarray) -> np.ndarray:
    """Return the velocities outside their bounds that have no bound rows yet."""
    slack = BOUND_TOLERANCE * (1.0 + np.abs(v))
    return ~bounded & ((v < lower - slack) | (v > upper + slack))


def contact_impulses(contacts: ContactSet, z: np.ndarray) -> np.ndarray:
    """Return each contact's scaled impulse on B by A, Lambda_N n + sum_j Lambda_T,j d_j."""
    n_c, n_d = contacts.n_c, contacts.n_d
    normal = z[:n_c, None] * contacts.normal_W
    n_n = len(z) - 3 * n_c if n_c else 0         # the normal rows include the bound rows
    tangent = z[n_n:n_n + n_d * n_c].reshape(n_c, n_d, 1) * contacts.tangents_W
    return normal + tangent.sum(axis=1)


def _check_planar(facts: ModelFacts) -> None:
    """Refuse what the planar model cannot honour (module docstring)."""
    if facts.plane_normal is None:
        raise SchemaError(
            "scenario.friction_directions",
            "formulation lcp is planar (Halm & Posa): it needs friction_directions: 2 and "
            "objects that move in one plane. Fix: friction_directions: 2, and planar joints "
            "for the objects (or formulation: qp / miqp for a 3D scene).")
    for name, size in zip(facts.object_names, facts.object_sizes):
        if size != 3:
            raise SchemaError(
                "scenario.objects",
                f"object '{name}' has {size} velocities; formulation lcp needs x, y and yaw "
                "in the plane of motion (3). Fix: give it a planar joint (or x, y and yaw "
                "joints).")
    p = facts.plane_normal
    in_plane = facts.gravity - (facts.gravity @ p) * p
    if np.linalg.norm(in_plane) > 1e-9:
        raise SchemaError(
            "scenario.gravity",
            f"gravity {facts.gravity.tolist()} has a component in the plane of motion; the "
            "table's limit surface carries the objects in formulation lcp (Halm & Posa), "
            f"which has no gravity in the plane. Fix: gravity along the plane normal "
            f"{np.round(p, 6).tolist()}, or [0, 0, 0].")
    if facts.quasi_dynamic:
        raise SchemaError(
            "scenario.quasi_dynamic",
            "formulation lcp has no object inertia (the limit surface maps wrench to "
            "velocity, eq. 12). Fix: remove quasi_dynamic (or set it false).")


def _relative_gains(facts: ModelFacts, settings: LcpSettings) -> np.ndarray:
    """Return the diagonal of B in robot_v_idx order (ones where a robot is not listed)."""
    unknown = sorted(set(settings.relative_gains) - set(facts.robot_names))
    if unknown:
        raise SchemaError("relative_gains", f"no robot {unknown}; the robots are "
                                            f"{list(facts.robot_names)}.")
    gains = []
    for name, size in zip(facts.robot_names, facts.robot_sizes):
        values = settings.relative_gains.get(name, np.ones(size))
        if len(values) != size:
            raise SchemaError(f"relative_gains.{name}",
                              f"expected {size} values (one per commanded joint), got "
                              f"{len(values)}.")
        gains.append(values)
    return np.concatenate(gains) if gains else np.zeros(0)


def _limit_surfaces(facts: ModelFacts, settings: LcpSettings) -> tuple[np.ndarray, ...]:
    """Return A~ per object (identity where an object is not listed)."""
    unknown = sorted(set(settings.limit_surface) - set(facts.object_names))
    if unknown:
        raise SchemaError("limit_surface", f"no object {unknown}; the objects are "
                                           f"{list(facts.object_names)}.")
    return tuple(np.diag(settings.limit_surface.get(name, np.ones(3)))
                 for name in facts.object_names)


def _plane_jacobian(frame: ObjectFrame, p: np.ndarray, basis: tuple, name: str
                    ) -> tuple[np.ndarray, np.ndarray]:
    """
    Return J (3 x 3) and R (3 x 3) of one object in the plane basis (e1, e2, p).

    ``basis`` is (e1, e2) of ``_plane_basis(p)``, computed once per model.

    J maps the object's velocities to [v_e1, v_e2, w_p] of its centre of
    mass; R = diag(R2, 1), R2 the body x axis projected into the plane and
    its in-plane perpendicular.  A J that cannot be inverted is a
    SchemaError (its joints do not move it in x, y and yaw).
    """
    e1, e2 = basis
    J = np.vstack([e1 @ frame.J_com[3:], e2 @ frame.J_com[3:], p @ frame.J_com[:3]])
    if abs(np.linalg.det(J)) < 1e-9:
        raise SchemaError("scenario.objects",
                          f"object '{name}': its joints do not move it in x, y and yaw in "
                          "the plane of motion. Fix: a planar joint with the plane's normal "
                          "as its axis.")
    axis = frame.R_WB[:, 0] if abs(frame.R_WB[:, 0] @ p) < 0.9 else frame.R_WB[:, 1]
    x = np.array([e1 @ axis, e2 @ axis])
    x /= np.linalg.norm(x)
    R = np.eye(3)
    R[:2, :2] = [[x[0], -x[1]], [x[1], x[0]]]
    return J, R


def _plane_basis(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return e1, e2 with e1 x e2 = p (e1 = world x projected when it lies off p)."""
    helper = np.array([1.0, 0.0, 0.0]) if abs(p[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    e1 = helper - (helper @ p) * p
    e1 /= np.linalg.norm(e1)
    return e1, np.cross(p, e1)
