"""
Planning through the step: boundary-value problems solved by shooting with the step gradients.

Song, Kumar & Pang, "A Two-Point Boundary-Value Approach for Planning
Manipulation Tasks" (seed 001): find the unknown command (and initial)
values so that a trajectory of the time-stepping model meets conditions at
its end.  Here the model is the engine's step, and the problem is solved by
shooting: the rollout from the parameters theta, the terminal residual
r(q_N), and Gauss-Newton / Levenberg-Marquardt steps
(``scipy.optimize.least_squares``) with the exact Jacobian of the rollout,
chained from the step gradients in forward mode
(``step(gradients=Tangents(dq, dv_cmd, dq_ref))``: dq_next along the
sensitivities carried so far, one Jacobian-vector product per parameter):

    dq_{k+1}/dtheta = dq_next/dq dq_k/dtheta + dq_next/dv_cmd dv_cmd_k/dtheta
                      + dq_next/dq_ref dq_ref_k/dtheta,
    dq_ref_{k+1}/dtheta = dq_ref_k/dtheta + h dv_cmd_k/dtheta

(the QP's spring reference qbar' = qbar + h v_cmd; the LCP's step does not
depend on q_ref).  The commands are linear in theta (:class:`Commands`:
constant, piecewise constant or piecewise linear per robot joint), and
free initial coordinates may join theta.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np
from scipy.optimize import least_squares

from quasistatic_drake.step_gradients import Tangents

KINDS = ("constant", "piecewise_constant", "piecewise_linear")


class PlanningError(ValueError):
    """A planning problem that cannot be posed as given (what, where, how to fix it)."""


@dataclass(frozen=True)
class Commands:
    """
    Per-step joint velocity commands linear in theta: v_cmd_k = basis[k] theta.

    ``basis`` is (steps, n_a, n_theta), robots in scenario order and joints
    in ``robot_joint_names`` order; ``offset`` (steps, n_a) is added.
    """

    basis: np.ndarray
    offset: np.ndarray

    @staticmethod
    def build(kind: str, steps: int, n_a: int, joints: Sequence, segments: int = 1,
              fixed: Optional[np.ndarray] = None) -> "Commands":
        """
        Return the commands of ``kind`` for the joints ``joints`` (the others: ``fixed``).

        Each entry of ``joints`` is a joint index, or a tuple of joints that
        share their parameters (two fingers at one speed).  constant: one
        value per entry; piecewise_constant: ``segments`` values over equal
        parts of the steps; piecewise_linear: ``segments`` + 1 knot values,
        linear between them.
        """
        if kind not in KINDS:
            raise PlanningError(f"commands kind {kind!r}: expected one of {list(KINDS)}.")
        if steps < 1 or segments < 1:
            raise PlanningError(f"steps ({steps}) and segments ({segments}) must be >= 1.")
        weights = _segment_weights(kind, steps, segments)          # (steps, per_entry)
        per_entry = weights.shape[1]
        groups = [tuple(np.atleast_1d(entry).astype(int)) for entry in joints]
        used = [j for group in groups for j in group]
        if len(set(used)) != len(used) or not all(0 <= j < n_a for j in used):
            raise PlanningError(f"joints {list(joints)}: each must be one of 0..{n_a - 1}, "
                                "and appear once.")
        basis = np.zeros((steps, n_a, per_entry * len(groups)))
        for g, group in enumerate(groups):
            for joint in group:
                basis[:, joint, g * per_entry:(g + 1) * per_entry] = weights
        offset = np.zeros((steps, n_a)) if fixed is None else np.tile(fixed, (steps, 1))
        offset[:, used] = 0.0
        return Commands(basis=basis, offset=offset)

    @property
    def n_theta(self) -> int:
        """Return the number of command parameters."""
        return self.basis.shape[2]

    def at(self, theta: np.ndarray) -> np.ndarray:
        """Return v_cmd per step (steps, n_a)."""
        return self.basis @ theta + self.offset


def _segment_weights(kind: str, steps: int, segments: int) -> np.ndarray:
    """Return each step's weights on one joint's parameters (steps, parameters)."""
    if kind == "constant":
        return np.ones((steps, 1))
    part = np.minimum((np.arange(steps) * segments) // steps, segments - 1)
    if kind == "piecewise_constant":
        return np.eye(segments)[part]
    s = np.arange(steps) * segments / max(steps - 1, 1)       # knot coordinate of each step
    low = np.minimum(np.floor(s).astype(int), segments - 1)
    t = s - low
    weights = np.zeros((steps, segments + 1))
    weights[np.arange(steps), low] = 1.0 - t
    weights[np.arange(steps), low + 1] = t
    return weights


@dataclass(frozen=True)
class Shot:
    """A rollout from theta: the final q, its Jacobian in theta, and the failed steps."""

    q_final: np.ndarray
    dq_final: np.ndarray          # (n_q, n_theta)
    failed_steps: int
    degenerate_steps: int


def shoot(sim, q0: np.ndarray, robots: Sequence[str], commands: Commands, theta: np.ndarray,
          free_initial: Sequence[int] = (), gradients: bool = True) -> Shot:
    """
    Roll out from q0 (its ``free_initial`` entries taken from theta's tail) with gradients.

    ``robots`` names the robots of the commands' columns, in order.  Without
    ``gradients`` the Jacobian is not computed (left zero).
    """
    n_cmd = commands.n_theta
    q = np.array(q0, dtype=float)
    q[list(free_initial)] = theta[n_cmd:]
    sizes = [len(sim.robot_joint_names(r)) for r in robots]
    splits = np.cumsum(sizes)[:-1]
    dq = np.zeros((len(q), len(theta)))
    dq[list(free_initial), n_cmd + np.arange(len(free_initial))] = 1.0
    robot_q = sim.robot_q_idx          # the reference starts at q0's robot positions
    state = sim.initial_state(q)
    dq_ref = dq[robot_q].copy()
    v_all = commands.at(theta[:n_cmd])
    failed = degenerate = 0
    for k, v_k in enumerate(v_all):
        v_cmd = dict(zip(robots, np.split(v_k, splits)))
        dv = np.zeros((len(v_k), len(theta)))
        dv[:, :n_cmd] = commands.basis[k]
        tangents = Tangents(dq, dv, dq_ref)
        result = sim.step(state, v_cmd, gradients=tangents if gradients else False)
        if not result.success:
            failed += 1
            continue
        if not gradients:
            state = result.state_next
            continue
        chain = result.gradients
        dq_next = chain.dq_next_tangents
        dq_ref = dq_ref + sim.h * dv
        degenerate += int(chain.degenerate)
        state, dq = result.state_next, dq_next
    return Shot(np.array(state.q), dq, failed, degenerate)


@dataclass(frozen=True)
class Plan:
    """A solved boundary-value problem: theta, the terminal residual, and how it went."""

    theta: np.ndarray
    residual: np.ndarray
    iterations: int
    method: str
    solve_time: float
    shot: Shot


# scipy's central differences step by FD_STEP |theta|: above the step's round-off (a solve is
# exact to about 1e-11 m; its default step, sqrt(eps) |theta|, is 1.5e-8 relative).  Central,
# not forward: a one-sided difference across a rollout's kink (a contact that comes or goes)
# stopped the box-turn plan 6.9 mm from its target (docs/formulations.md).
FD_STEP = 1e-6


def solve_bvp(sim, q0: np.ndarray, robots: Sequence[str], commands: Commands,
              terminal: Callable[[np.ndarray], np.ndarray], theta0: np.ndarray,
              bounds=(-np.inf, np.inf), free_initial: Sequence[int] = (),
              finite_differences: bool = False, tolerance: float = 1e-10,
              residual_tolerance: Optional[float] = None) -> Plan:
    """
    Find theta with terminal(q_N(theta)) = 0 by shooting (module docstring).

    ``terminal`` maps the final q to the residual; its Jacobian is taken by
    central differences (it is cheap).  ``finite_differences`` solves the
    same problem with scipy's finite-difference Jacobian of the whole
    rollout instead of the step gradients (for comparison).  The solve
    stops on scipy's ``tolerance`` (x, f and gradient), or as soon as
    |terminal| <= ``residual_tolerance`` if given: a rollout through
    contacts is exact only to round-off, so the last steps to x and f
    tolerances of 1e-10 wander at its floor (the box plan took 36
    evaluations, of which the last 17 were below 1e-7 m).
    """
    if residual_tolerance is not None and not (isinstance(residual_tolerance, (int, float))
                                               and 0.0 < residual_tolerance < np.inf):
        raise PlanningError(f"residual_tolerance must be a positive number (the terminal "
                            f"residual's norm to stop at), got {residual_tolerance!r}. Fix: "
                            "give e.g. 1e-8, or None to stop on scipy's tolerances only.")
    start = time.perf_counter()
    cache: dict = {}

    def shot(theta):
        key = np.asarray(theta, dtype=float).tobytes()
        if key not in cache:
            cache.clear()
            cache[key] = shoot(sim, q0, robots, commands, np.asarray(theta, float),
                               free_initial, gradients=not finite_differences)
        return cache[key]

    def residual(theta):
        return terminal(shot(theta).q_final)

    def jacobian(theta):
        result = shot(theta)
        return _terminal_jacobian(terminal, result.q_final) @ result.dq_final

    def met(intermediate_result) -> None:
        if (residual_tolerance is not None
                and np.linalg.norm(intermediate_result.fun) <= residual_tolerance):
            raise StopIteration

    answer = least_squares(residual, np.asarray(theta0, float),
                           jac="3-point" if finite_differences else jacobian, bounds=bounds,
                           method="trf", xtol=tolerance, ftol=tolerance, gtol=tolerance,
                           diff_step=FD_STEP if finite_differences else None, callback=met)
    return Plan(theta=answer.x, residual=answer.fun, iterations=int(answer.nfev),
                method="trf, " + ("finite differences" if finite_differences
                                  else "step gradients"),
                solve_time=time.perf_counter() - start, shot=shot(answer.x))


def _terminal_jacobian(terminal, q: np.ndarray, step: float = 1e-7) -> np.ndarray:
    """Return d terminal / dq by central differences."""
    return np.array([(terminal(q + step * e) - terminal(q - step * e)) / (2 * step)
                     for e in np.eye(len(q))]).T
