"""
Step gradients: the derivatives of q_next with respect to q, v_cmd and q_ref.

Planning through the step (Song, Kumar & Pang: boundary-value problems
solved with the step's own derivatives) needs dq_next/dq, dq_next/dv_cmd
and dq_next/dq_ref (qsim's ``get_Dq_nextDq`` and ``get_Dq_nextDqa_cmd``).
``QuasistaticSimulator.step(..., gradients=True)`` fills them from:

* the formulation's derivative of its solution v' (its optimality
  conditions at the solution, ``Formulation.solution_derivative``: the QP's
  KKT conditions on its active set, the LCP's basis);
* the change of the step's data with each parameter.  The commands enter
  the data exactly linearly.  q enters everywhere: the signed distances,
  the contact Jacobians (their points and normals move with the bodies),
  M_u, gravity, the joint-limit bounds.  These enter by central differences
  of the data at q +- DELTA_Q e_i: the detector run again at each (so the
  change of the contact Jacobians with q is included, not neglected as
  qsim's default does);
* the integration q_next = q + h N(q) v' with quaternions renormalised,
  differentiated by central differences (it is cheap and smooth).

A parameter whose change makes a contact that matters appear or go (a
manifold point at its band) has no derivative: the result is flagged
``degenerate``, as it is where a constraint is weakly active and only
one-sided derivatives exist.  A contact that stays apart by more than
FAR_GAP at the step's end (phi + h J_n v' beyond its friction rows' reach)
does not matter: its rows are slack, here and under a small change, so
it may come or go (a pad's far corners at the edge of the detection
tolerance) and the derivative is unchanged.  Where the formulation's
conditions give only a one-sided derivative, a formulation whose solver
is exact and cheap (``checks_one_sided_by_solving``: the QP, the LCP)
solves the step again on both sides and compares them (``sides_compared``):
resting contact is differentiable that way.

The detector runs 2 n_q times, so dq_next/dq costs 10 to 20 steps' data
(``benchmarks/step_gradients.py``).  ``gradients="commands"`` (qsim's
``kBOnly``) gives dq_next/dv_cmd and dq_next/dq_ref only, which need no
detector run: what a linearisation about a trajectory or randomized
smoothing of B needs, at a fraction of a step's cost.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

import numpy as np

from quasistatic_drake.contact import ContactSet
from quasistatic_drake.contact_detection import proximity_pairs

DELTA_Q = 1e-6          # [m, rad, quaternion units] the central differences of the data in q
DELTA_COMMAND = 1e-3    # the commands enter linearly: any step is exact


GRADIENT_MODES = (False, True, "commands")


@dataclass(frozen=True)
class StepGradients:
    """dq_next/dq (n_q x n_q, or None), dq_next/dv_cmd and dq_next/dq_ref (n_q x n_a)."""

    dq_next_dq: Optional[np.ndarray]
    dq_next_dv_cmd: np.ndarray
    dq_next_dq_ref: np.ndarray
    degenerate: bool


def step_gradients(sim, q: np.ndarray, q_ref: np.ndarray, v_bar: np.ndarray, tau_ext,
                   problem, contacts: ContactSet, attempt, tolerance: float,
                   with_q: bool = True, loaded: Optional[np.ndarray] = None,
                   slip: Optional[np.ndarray] = None) -> StepGradients:
    """
    Return the gradients of a solved step of ``sim``; ``with_q`` False: no dq_next/dq.

    ``slip``: the step's correction Delta for its ``loaded`` contacts
    (``sticking.py``), or None; q_next integrates v' + Delta.
    """
    dv_dq, broken = None, False
    if with_q:
        dv_dq, broken, sides = _solution_derivative_in_q(sim, q, q_ref, v_bar, tau_ext,
                                                         problem, contacts, attempt, tolerance)
    commands = []
    for field in ("v_cmd", "q_ref"):
        base = getattr(problem, field)
        commands.extend(((replace(problem, **{field: base + DELTA_COMMAND * e}), contacts),
                         (replace(problem, **{field: base - DELTA_COMMAND * e}), contacts))
                        for e in np.eye(len(base)))
    dv_dcmd, one_sided = sim.formulation.solution_derivative(
        problem, contacts, attempt.solution, commands, DELTA_COMMAND)
    one_sided = per_column(one_sided, len(commands))
    if one_sided.any() and sim.formulation.checks_one_sided_by_solving:
        dv_dcmd, one_sided = sides_compared(sim.formulation, attempt.solution.v, commands,
                                            DELTA_COMMAND, dv_dcmd, one_sided)
    v = attempt.solution.v
    if slip is not None:
        here = (q, problem, contacts)
        dv_dcmd = dv_dcmd + _slip_derivative(sim, v, loaded, dv_dcmd,
                                             [(here, here)] * len(commands))
        if with_q:
            dv_dq = dv_dq + _slip_derivative(
                sim, v, loaded, dv_dq, [((q + DELTA_Q * e, *plus), (q - DELTA_Q * e, *minus))
                                        for e, (plus, minus) in zip(np.eye(len(q)), sides)])
        v = v + slip
    dI_dq, dI_dv = _integration_jacobians(sim, q, v, with_q)
    n_a = len(v_bar)
    return StepGradients(dq_next_dq=None if dv_dq is None else dI_dq + dI_dv @ dv_dq,
                         dq_next_dv_cmd=dI_dv @ dv_dcmd[:, :n_a],
                         dq_next_dq_ref=dI_dv @ dv_dcmd[:, n_a:],
                         degenerate=bool(np.any(broken) or one_sided.any()))


def _solution_derivative_in_q(sim, q, q_ref, v_bar, tau_ext, problem, contacts: ContactSet,
                              attempt, tolerance: float) -> tuple[np.ndarray, np.ndarray, list]:
    """
    Return dv'/dq from the data at q +- DELTA_Q e_i, whether it is one-sided, and the data.

    The formulation's derivative on the matched contacts; if that is
    one-sided, the sides are compared by solving again (``sides_compared``).
    The data per column are ((problem, contacts) at q + DELTA_Q e_i, at q - DELTA_Q e_i),
    the contacts matched to the step's (the step's own where they do not match).
    """
    changes, found, unmatched = [], [], np.zeros(len(q), dtype=bool)
    far = far_apart(contacts, attempt.solution.v, sim.h)
    for i, e in enumerate(np.eye(len(q))):
        ends = [_data_at(sim, q + sign * DELTA_Q * e, q_ref, v_bar, tau_ext, attempt,
                         tolerance, contacts, far) for sign in (1.0, -1.0)]
        found.append(tuple((problem_at, raw) for problem_at, _, raw in ends))
        if any(same is None for _, same, _ in ends):     # no derivative in this direction
            unmatched[i] = True
            changes.append(((problem, contacts), (problem, contacts)))
        else:
            changes.append(tuple((problem_at, same) for problem_at, same, _ in ends))
    dv_dq, broken = sim.formulation.solution_derivative(
        problem, contacts, attempt.solution, changes, DELTA_Q)
    one_sided = per_column(broken, len(q)) | unmatched
    if one_sided.any() and sim.formulation.checks_one_sided_by_solving:
        dv_dq, one_sided = sides_compared(sim.formulation, attempt.solution.v, found, DELTA_Q,
                                          dv_dq, one_sided)
    return dv_dq, one_sided, changes


def _slip_derivative(sim, v: np.ndarray, loaded: np.ndarray, dv: np.ndarray,
                     ends: list) -> np.ndarray:
    """
    Return dDelta/dtheta of the step's slip correction (``sticking.py``), column by column.

    Delta depends on q (the contacts' points and the bodies' poses) and on
    v'; column j by central differences along theta_j: Delta at
    (q_+, problem_+, contacts_+, v' + DELTA_Q dv_j) and at (q_-, ..., v' - DELTA_Q dv_j),
    ``ends[j]`` holding the two (q, problem, contacts), with the step's loaded
    contacts and its decision to correct (``QuasistaticSimulator._corrects``)
    held.  Delta converges to SLIP_TOL, far below the difference.
    """
    def delta_at(end, v_at):
        slip = sim._slip_correction(*end, v_at, loaded)
        return np.zeros(len(v)) if slip is None else slip
    columns = [(delta_at(plus, v + DELTA_Q * dv[:, j]) - delta_at(minus, v - DELTA_Q * dv[:, j]))
               / (2.0 * DELTA_Q) for j, (plus, minus) in enumerate(ends)]
    return np.array(columns).T.reshape(len(v), len(ends))


def per_column(flags, k: int) -> np.ndarray:
    """Return a formulation's one-sided flag (a bool, or one per column) as k flags."""
    return np.broadcast_to(np.asarray(flags, dtype=bool), (k,)).copy()


ONE_SIDED_TOL = 1e-3    # relative: one-sided differences further apart than this disagree


def sides_compared(formulation, v: np.ndarray, changes: list, delta: float,
                   derivative: np.ndarray, columns: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """
    Return dv'/dtheta where the one-sided derivatives agree, and the columns that differ.

    For a step the optimality conditions call one-sided (a weakly active row,
    a contact that comes or goes), the formulation solves the step again
    at theta_j +- delta from the data the detector found there.  Where the
    forward and backward differences agree, the column is two-sided, and
    the central difference is its derivative: a box resting flat on a table
    and tilted either way is set back flat, through other rows on each side.
    Where they disagree (a kink) or a solve fails, the column is one-sided
    and ``derivative``'s column is kept.  Only the flagged ``columns`` are
    solved again.
    """
    result, one_sided = derivative.copy(), columns.copy()
    for j in np.flatnonzero(columns):
        plus, minus = changes[j]
        high, low = formulation.solve(*plus).v, formulation.solve(*minus).v
        if high is None or low is None:
            continue
        forward, backward = (high - v) / delta, (v - low) / delta
        size = 1.0 + max(np.abs(forward).max(initial=0.0), np.abs(backward).max(initial=0.0))
        if np.abs(forward - backward).max(initial=0.0) > ONE_SIDED_TOL * size:
            continue
        result[:, j] = (high - low) / (2.0 * delta)
        one_sided[j] = False
    return result, one_sided


def _data_at(sim, q: np.ndarray, q_ref, v_bar, tau_ext, attempt, tolerance: float,
             base: ContactSet, far_base: np.ndarray) -> tuple:
    """
    Return the step's problem at q, its contacts matched to ``base``'s, and as found.

    As the step built them at its own q.  The matched contacts are in the
    order of ``base``'s (the detector's order follows Drake's pair order,
    which a small change of q may permute); None if they do not match
    (``matched``).
    """
    model = sim.model
    model.set_positions(q)
    pairs = proximity_pairs(model, tolerance)
    model.set_positions(q)
    found = sim.formulation.contacts(sim.detector.detect(tolerance, pairs))
    if attempt.recovery_fraction < 1.0:
        found = replace(found, phi=np.where(
            found.phi < 0.0, attempt.recovery_fraction * found.phi, found.phi))
    v = attempt.solution.v
    same = matched(base, found, far_base, far_apart(found, v, sim.h))
    problem = sim._problem(q, q_ref, v_bar, tau_ext)
    if attempt.rotation_limited:
        problem = sim._turn_limited(problem, attempt.turn_scale)
    return problem, same, found


MATCH_DISTANCE = 1e-4   # [m] a contact point moved further than this is another point
FAR_GAP = 1e-4          # [m] a contact this far apart at the step's end does not matter


def far_apart(contacts: ContactSet, v: np.ndarray, h: float) -> np.ndarray:
    """
    Return the mask of contacts apart by more than FAR_GAP at the step's end.

    phi + h J_n v' - h mu max_j |J_f,j v'| > FAR_GAP: every row of such a
    contact (Anitescu's cone rows, the MIQP's gap row, the LCP's) is slack.
    """
    if contacts.n_c == 0:
        return np.zeros(0, dtype=bool)
    sliding = np.abs(contacts.J_f @ v).reshape(contacts.n_c, -1).max(axis=1)
    end_gap = contacts.phi + h * (contacts.J_n @ v) - h * contacts.mu * sliding
    return end_gap > FAR_GAP


def matched(base: ContactSet, other: ContactSet, far_base: np.ndarray,
            far_other: np.ndarray) -> Optional[ContactSet]:
    """
    Return ``other``'s contacts in the order of ``base``'s, each matched to its nearest.

    Matched by body pair and contact point.  A contact of ``base`` that is
    far apart (``far_base``, module docstring) and has no match keeps its own
    rows; a contact of ``other`` without a match is dropped if it is far
    apart (``far_other``).  None if a contact that matters came or went: that
    change has no derivative.
    """
    order, free = [], set(range(other.n_c))
    for i in range(base.n_c):
        same = [j for j in free if (other.body_a[j], other.body_b[j])
                == (base.body_a[i], base.body_b[i])]
        j = min(same, default=None,
                key=lambda k: np.linalg.norm(other.point_A_W[k] - base.point_A_W[i]))
        if j is None or np.linalg.norm(other.point_A_W[j] - base.point_A_W[i]) > MATCH_DISTANCE:
            if not far_base[i]:
                return None
            order.append(other.n_c + i)             # base's own rows: no change
            continue
        order.append(j)
        free.remove(j)
    if not all(far_other[j] for j in free):
        return None
    return other.joined(base).take(np.array(order, dtype=int))


def _integration_jacobians(sim, q: np.ndarray, v: np.ndarray,
                           with_q: bool = True) -> tuple[Optional[np.ndarray], np.ndarray]:
    """
    Return d(q + h N(q) v)/dq (None unless ``with_q``) and d/dv, quaternions renormalised.

    d/dv is exact: h P N(q), with P the renormalisation's Jacobian
    (I - u u^T) / |p| on each quaternion p = q + h N v (u = p / |p|).
    d/dq by central differences (N depends on q through the quaternions).
    """
    def integrate(q_at):
        sim.model.set_positions(q_at)
        return sim._integrate(q_at, v)
    step = 1e-7
    dI_dq = None if not with_q else np.array(
        [(integrate(q + step * e) - integrate(q - step * e)) / (2 * step)
         for e in np.eye(len(q))]).T
    plant = sim.model.plant
    sim.model.set_positions(q)
    N = plant.MakeVelocityToQDotMap(sim.model.plant_context).toarray()
    p = q + sim.h * N @ v
    dI_dv = sim.h * N
    for s in sim.model.quaternion_starts:
        size = np.linalg.norm(p[s:s + 4])
        unit = p[s:s + 4] / size
        dI_dv[s:s + 4] = (np.eye(4) - np.outer(unit, unit)) @ dI_dv[s:s + 4] / size
    return dI_dq, dI_dv
