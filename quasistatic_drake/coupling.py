"""
Coupled joints (URDF ``<mimic>``, Drake's coupler constraints), honoured by every formulation.

A coupler makes a follower joint's position q_f = r q_l + offset of its
leader's, so its velocity is v_f = r v_l.  The step solves for the
independent velocities w only: v = T w, where T is the identity on every
velocity but the followers', whose rows copy their leader's column times r.
:class:`CoupledFormulation` wraps a formulation: it hands it the contact
Jacobians J T, the body Jacobians J T and the bounds on w (a follower's
bounds become bounds on its leader), and returns v = T w.  The formulation
never sees a follower, so the QP, the MIQP and a plug-in all honour the
coupling.  This module imports neither Drake nor ROS.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from quasistatic_drake.contact import ContactSet
from quasistatic_drake.formulations.base import StepProblem, StepSolution


@dataclass(frozen=True)
class Follower:
    """A coupled joint: q[q_idx] = ratio q[leader_q_idx] + offset (velocities alike)."""

    joint_name: str
    q_idx: int
    v_idx: int
    leader_name: str
    leader_q_idx: int
    leader_v_idx: int
    ratio: float
    offset: float


@dataclass(frozen=True)
class Coupling:
    """v = T w for the followers of a model (module docstring)."""

    T: np.ndarray             # (n_v, n_w)
    kept: np.ndarray          # the v index of each w
    followers: tuple[Follower, ...]

    @staticmethod
    def build(n_v: int, followers: tuple[Follower, ...]) -> "Coupling":
        """Return the coupling of ``followers`` among n_v velocities."""
        dropped = {f.v_idx for f in followers}
        kept = np.array([i for i in range(n_v) if i not in dropped], dtype=int)
        column = {int(i): k for k, i in enumerate(kept)}
        T = np.zeros((n_v, len(kept)))
        T[kept, np.arange(len(kept))] = 1.0
        for f in followers:
            T[f.v_idx, column[f.leader_v_idx]] = f.ratio
        return Coupling(T=T, kept=kept, followers=tuple(followers))

    def reduced(self, v_idx: np.ndarray) -> np.ndarray:
        """Return the w index of each (independent) velocity index."""
        position = {int(i): k for k, i in enumerate(self.kept)}
        return np.array([position[int(i)] for i in v_idx], dtype=int)

    def columns(self, J: np.ndarray) -> np.ndarray:
        """Return J T: a Jacobian in v as one in w (any leading dimensions)."""
        return J @ self.T

    def expand(self, w: np.ndarray) -> np.ndarray:
        """Return v = T w."""
        return self.T @ w

    def bounds(self, lower: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Return bounds on w: the kept ones, and each follower's divided onto its leader."""
        w_lower, w_upper = lower[self.kept].copy(), upper[self.kept].copy()
        position = {int(i): k for k, i in enumerate(self.kept)}
        for f in self.followers:
            if f.ratio == 0.0:
                continue
            low, high = sorted((lower[f.v_idx] / f.ratio, upper[f.v_idx] / f.ratio))
            k = position[f.leader_v_idx]
            w_lower[k], w_upper[k] = max(w_lower[k], low), min(w_upper[k], high)
        return w_lower, w_upper

    def violation(self, q: np.ndarray) -> list[str]:
        """Name the followers whose position in q breaks q_f = r q_l + offset."""
        return [f"{f.joint_name} = {q[f.q_idx]:.6g}, but {f.ratio:g} x {f.leader_name} "
                f"+ {f.offset:g} = {f.ratio * q[f.leader_q_idx] + f.offset:.6g}"
                for f in self.followers
                if abs(q[f.q_idx] - (f.ratio * q[f.leader_q_idx] + f.offset)) > 1e-9]


class CoupledFormulation:
    """A formulation solved in the independent velocities w (module docstring)."""

    def __init__(self, inner, coupling: Coupling):
        """Wrap ``inner``, a formulation built with the facts in w."""
        self.inner = inner
        self.coupling = coupling

    name = property(lambda self: self.inner.name)
    settings_type = property(lambda self: self.inner.settings_type)
    settings = property(lambda self: self.inner.settings)
    recovery_bisections = property(lambda self: self.inner.recovery_bisections)
    solves_at_warm_up = property(lambda self: self.inner.solves_at_warm_up)
    needs_object_frames = property(lambda self: self.inner.needs_object_frames)
    scaled_impulses = property(lambda self: self.inner.scaled_impulses)
    gives_gradients = property(lambda self: self.inner.gives_gradients)
    checks_one_sided_by_solving = property(lambda self: self.inner.checks_one_sided_by_solving)
    gradients_fix = property(lambda self: self.inner.gradients_fix)

    def contacts(self, contacts: ContactSet) -> ContactSet:
        """Return the contacts the inner formulation takes."""
        return self.inner.contacts(contacts)

    def solve(self, problem: StepProblem, contacts: ContactSet,
              warm_start: Any = None) -> StepSolution:
        """Solve in w; return the solution with v = T w."""
        solution = self.inner.solve(*self._reduced(problem, contacts), warm_start)
        return (solution if solution.v is None
                else replace(solution, v=self.coupling.expand(solution.v)))

    def solution_derivative(self, problem: StepProblem, contacts: ContactSet,
                            solution: StepSolution, changes: list, delta: float
                            ) -> tuple[np.ndarray, bool]:
        """Differentiate in w; return dv/dtheta = T dw/dtheta."""
        reduced = [tuple(self._reduced(*data) for data in pair) for pair in changes]
        dw, degenerate = self.inner.solution_derivative(
            *self._reduced(problem, contacts),
            replace(solution, v=solution.v[self.coupling.kept]), reduced, delta)
        return self.coupling.T @ dw, degenerate

    def _reduced(self, problem: StepProblem, contacts: ContactSet) -> tuple:
        """Return the problem and the contacts in w (as ``solve`` gives them to the inner)."""
        c = self.coupling
        lower, upper = c.bounds(problem.v_lower, problem.v_upper)
        return (replace(problem, v_lower=lower, v_upper=upper, J_w=c.columns(problem.J_w),
                        J_v=c.columns(problem.J_v),
                        tau_ext=None if problem.tau_ext is None else problem.tau_ext[c.kept],
                        trust=(problem.trust if np.isscalar(problem.trust)
                               else problem.trust[c.kept])),
                replace(contacts, J_n=c.columns(contacts.J_n), J_f=c.columns(contacts.J_f)))

    def recovers_from(self, solution: StepSolution) -> bool:
        """Return the inner formulation's answer."""
        return self.inner.recovers_from(solution)

    def next_reference(self, problem: StepProblem, q_a_next: np.ndarray,
                       solution: StepSolution) -> tuple[np.ndarray, bool]:
        """Return the inner formulation's reference (the commanded joints only)."""
        return self.inner.next_reference(problem, q_a_next, solution)

    def reference_base(self, q_a: np.ndarray, q_ref: np.ndarray) -> np.ndarray:
        """Return the inner formulation's."""
        return self.inner.reference_base(q_a, q_ref)

    def checked_warm_start(self, warm_start: Any) -> Any:
        """Return the inner formulation's check."""
        return self.inner.checked_warm_start(warm_start)

    def linearisation_velocity(self, warm_start: Any):
        """Return the inner formulation's, as v = T w (the sweep is the bodies' own)."""
        w, sweep = self.inner.linearisation_velocity(warm_start)
        return (None if w is None else self.coupling.expand(w)), sweep

    def gap_offsets(self, warm_start: Any) -> dict:
        """Return the inner formulation's."""
        return self.inner.gap_offsets(warm_start)

    def with_step_end(self, warm_start: Any, offsets: dict, sweep: float) -> Any:
        """Return the inner formulation's."""
        return self.inner.with_step_end(warm_start, offsets, sweep)

    def settled_warm_start(self, problem: StepProblem, contacts: ContactSet) -> Any:
        """Return the inner formulation's, in w."""
        return self.inner.settled_warm_start(*self._reduced(problem, contacts))
