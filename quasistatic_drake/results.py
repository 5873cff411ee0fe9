"""
What a step returns: StepResult, and Rollout, a sequence of them.

A StepResult holds the next state, the status, the contacts and their
forces, the gradients and a diagnostics record.  This module imports neither Drake nor ROS.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Optional

import numpy as np

from quasistatic_drake.contact import ContactSet
from quasistatic_drake.state import State


@dataclass(frozen=True)
class Contact:
    """
    One contact point after a step; ``force_W`` is the force on body_b by body_a [N].

    Under a formulation whose impulses are known only up to a scale (the
    LCP of Halm & Posa: the limit-surface factor k of their eq. 10),
    ``force_W`` is None and ``scaled_impulse_W`` holds k times the impulse
    over the step; it is never in newtons.
    """

    body_a: str
    body_b: str
    point_W: np.ndarray
    normal_W: np.ndarray
    phi: float
    force_W: Optional[np.ndarray]
    scaled_impulse_W: Optional[np.ndarray] = None


@dataclass(frozen=True)
class StepGradients:
    """
    The derivatives of q_next (``step(..., gradients=...)``; step_gradients.py).

    ``dq_next_dq`` (n_q x n_q, None under ``gradients="commands"``) holds the
    rest of the state fixed (the reference among it); ``dq_next_dv_cmd`` and
    ``dq_next_dq_ref`` are n_q x n_a (robots in scenario order, joints in
    ``robot_joint_names`` order).  ``degenerate``: some derivative is one-sided
    (a kink: the two sides measurably differ).  ``dq_next_dq_along`` (n_q x
    k, under ``gradients=S`` only) is dq_next/dq @ S.  Under
    ``gradients=Tangents(dq, dv_cmd, dq_ref)`` only ``dq_next_tangents`` (n_q
    x k) is filled: dq_next/dq dq + dq_next/dv_cmd dv_cmd + dq_next/dq_ref dq_ref.
    """

    dq_next_dq: Optional[np.ndarray]
    dq_next_dv_cmd: Optional[np.ndarray]
    dq_next_dq_ref: Optional[np.ndarray]
    degenerate: bool = False
    dq_next_dq_along: Optional[np.ndarray] = None
    dq_next_tangents: Optional[np.ndarray] = None


@dataclass(frozen=True)
class StepDiagnostics:
    """
    How a step was taken: what a user rarely needs and a developer often does.

    ``v``: the velocities the formulation solved for (None on failure);
    ``solution``: the formulation's own solution object (None after an
    error); ``solve_time``: the solver's own time, all solves of the step
    [s]; ``step_time``: the whole step's wall time [s]; ``error``: what was
    raised inside the step (status "error"); ``min_phi_next``: the smallest
    signed distance at q_next; ``recovery_fraction``: the fraction of each
    penetration worked off (1: all; ``recovery_dropped`` when less);
    ``reference_limited``: the reference was held within
    ``max_reference_lead`` of the joints; ``iterations``: the step's
    linearisations (step_loop.py: one where nothing turns far or moves fast).
    """

    v: Optional[np.ndarray] = None
    solution: object = None
    solve_time: float = 0.0
    step_time: float = 0.0
    error: str = ""
    min_phi_next: float = np.inf
    recovery_fraction: float = 1.0
    reference_limited: bool = False
    iterations: int = 1

    @property
    def recovery_dropped(self) -> bool:
        """Return whether only a fraction of the penetration was worked off."""
        return self.recovery_fraction < 1.0


@dataclass(frozen=True)
class StepResult:
    """
    The outcome of one step: continue with ``state_next``.

    On failure ``state_next`` keeps the configuration and the reference of
    the state given (its warm start may change).  ``forces_W`` (n_c x 3) are
    the contact forces on body_b by body_a [N], per row of ``contact_set``;
    None, with ``scaled_impulses_W`` instead, under a formulation that knows
    its impulses only up to a scale (the LCP).
    """

    state_next: State
    status: str
    contact_set: ContactSet
    forces_W: Optional[np.ndarray]
    scaled_impulses_W: Optional[np.ndarray] = None
    gradients: Optional[StepGradients] = None
    diagnostics: StepDiagnostics = StepDiagnostics()

    @property
    def success(self) -> bool:
        """Return whether the step was solved and q advanced."""
        return self.status == "optimal"

    @property
    def q_next(self) -> np.ndarray:
        """Return the configuration after the step (``state_next.q``)."""
        return self.state_next.q

    @cached_property
    def contacts(self) -> tuple[Contact, ...]:
        """Return the contacts of the step with their forces (built on first access)."""
        cs = self.contact_set
        mid = 0.5 * (cs.point_A_W + cs.point_B_W)
        scaled = self.scaled_impulses_W
        return tuple(Contact(cs.body_a[i], cs.body_b[i], mid[i], cs.normal_W[i],
                             float(cs.phi[i]),
                             None if self.forces_W is None else self.forces_W[i],
                             None if scaled is None else scaled[i]) for i in range(cs.n_c))

    def __repr__(self) -> str:
        """Return a short summary: status, step time, contacts."""
        return (f"StepResult(status={self.status!r}, "
                f"step_time={self.diagnostics.step_time * 1e3:.3g} ms, "
                f"contacts={self.contact_set.n_c})")


@dataclass(frozen=True)
class Rollout:
    """
    Steps from :meth:`QuasistaticSimulator.rollout`.

    ``q`` (steps + 1 rows) and ``q_ref`` start with the initial state's;
    row k + 1 follows ``results[k]``.  ``robot_velocity`` likewise under the
    scenario's ``robot_inertia`` (None without).  ``final_state`` continues
    the rollout.
    """

    q: np.ndarray
    q_ref: np.ndarray
    results: tuple[StepResult, ...]
    final_state: State
    robot_velocity: Optional[np.ndarray] = None

    @property
    def failed_steps(self) -> int:
        """Return how many steps did not succeed (their q was kept)."""
        return sum(not r.success for r in self.results)
