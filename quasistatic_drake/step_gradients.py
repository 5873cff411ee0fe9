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

A parameter whose change makes a contact appear or go (a pair at the edge
of the detection tolerance, a manifold point at its band) has no
derivative: the result is flagged ``degenerate``, as it is where a
constraint is weakly active and only one-sided derivatives exist.

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
                   with_q: bool = True) -> StepGradients:
    """Return the gradients of a solved step of ``sim``; ``with_q`` False: no dq_next/dq."""
    dv_dq, broken = None, False
    if with_q:
        dv_dq, broken = _solution_derivative_in_q(sim, q, q_ref, v_bar, tau_ext, problem,
                                                  contacts, attempt, tolerance)
    commands = []
    for field in ("v_cmd", "q_ref"):
        base = getattr(problem, field)
        commands.extend(((replace(problem, **{field: base + DELTA_COMMAND * e}), contacts),
                         (replace(problem, **{field: base - DELTA_COMMAND * e}), contacts))
                        for e in np.eye(len(base)))
    dv_dcmd, one_sided = sim.formulation.solution_derivative(
        problem, contacts, attempt.solution, commands, DELTA_COMMAND)
    v = attempt.solution.v
    dI_dq, dI_dv = _integration_jacobians(sim, q, v, with_q)
    n_a = len(v_bar)
    return StepGradients(dq_next_dq=None if dv_dq is None else dI_dq + dI_dv @ dv_dq,
                         dq_next_dv_cmd=dI_dv @ dv_dcmd[:, :n_a],
                         dq_next_dq_ref=dI_dv @ dv_dcmd[:, n_a:],
                         degenerate=bool(broken or one_sided))


def _solution_derivative_in_q(sim, q, q_ref, v_bar, tau_ext, problem, contacts: ContactSet,
                              attempt, tolerance: float) -> tuple[np.ndarray, bool]:
    """Return dv'/dq from the data at q +- DELTA_Q e_i, and whether it is one-sided."""
    changes, unmatched = [], False
    for e in np.eye(len(q)):
        pair = tuple(_data_at(sim, q + sign * DELTA_Q * e, q_ref, v_bar, tau_ext, attempt,
                              tolerance, contacts) for sign in (1.0, -1.0))
        if any(data is None for data in pair):     # no derivative in this direction
            unmatched = True
            pair = ((problem, contacts), (problem, contacts))
        changes.append(pair)
    dv_dq, broken = sim.formulation.solution_derivative(
        problem, contacts, attempt.solution, changes, DELTA_Q)
    return dv_dq, broken or unmatched


def _data_at(sim, q: np.ndarray, q_ref, v_bar, tau_ext, attempt, tolerance: float,
             base: ContactSet) -> tuple:
    """
    Return the step's (problem, contacts) at q, as the step built them at its own q.

    The contacts are put in the order of ``base``'s (the detector's order
    follows Drake's pair order, which a small change of q may permute).
    None if they do not match ``base``'s one to one.
    """
    model = sim.model
    model.set_positions(q)
    pairs = proximity_pairs(model, tolerance)
    model.set_positions(q)
    contacts = matched(base, sim.formulation.contacts(sim.detector.detect(tolerance, pairs)))
    if contacts is None:
        return None
    if attempt.recovery_fraction < 1.0:
        contacts = replace(contacts, phi=np.where(
            contacts.phi < 0.0, attempt.recovery_fraction * contacts.phi, contacts.phi))
    problem = sim._problem(q, q_ref, v_bar, tau_ext)
    if attempt.rotation_limited:
        problem = sim._turn_limited(problem)
    return problem, contacts


MATCH_DISTANCE = 1e-4   # [m] a contact point moved further than this is another point


def matched(base: ContactSet, other: ContactSet) -> Optional[ContactSet]:
    """
    Return ``other``'s contacts in the order of ``base``'s, each matched to its nearest.

    Matched by body pair and contact point; None if they do not match one to
    one (a point came or went): that change has no derivative.
    """
    if other.n_c != base.n_c:
        return None
    order, free = [], set(range(other.n_c))
    for i in range(base.n_c):
        same = [j for j in free if (other.body_a[j], other.body_b[j])
                == (base.body_a[i], base.body_b[i])]
        if not same:
            return None
        j = min(same, key=lambda k: np.linalg.norm(other.point_A_W[k] - base.point_A_W[i]))
        if np.linalg.norm(other.point_A_W[j] - base.point_A_W[i]) > MATCH_DISTANCE:
            return None
        order.append(j)
        free.remove(j)
    return other.take(np.array(order, dtype=int))


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
