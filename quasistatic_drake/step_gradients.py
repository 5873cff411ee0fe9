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
smoothing of B needs, at a fraction of a step's cost.  ``gradients=S``
(n_q x k) gives dq_next/dq @ S (forward mode) from 2k detector runs: the
q +- DELTA_Q e_i above become q +- DELTA_Q s_j, each s_j at unit length;
``gradients=Tangents(dq, dv_cmd, dq_ref)`` gives dq_next along each
column (a Jacobian-vector product): k directions in q and k in the
commands, instead of n_q and 2 n_a.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numba
import numpy as np

from quasistatic_drake.contact import ContactSet
from quasistatic_drake.contact_detection import proximity_pairs
from quasistatic_drake.integration import screw_velocity_jacobian
from quasistatic_drake.records import changed

# [m, rad, quaternion units; m/s, rad/s] the central differences of the data, in q and in
# the commands alike (one solve differentiates both kinds of column together; the commands
# enter Q, b and the trust region)
DELTA_Q = 1e-6


@dataclass(frozen=True)
class Tangents:
    """
    Directions in a step's inputs, a column each: dq (n_q x k), dv_cmd and dq_ref (n_a x k).

    ``step(gradients=Tangents(...))`` gives dq_next along each column,
    dq_next/dq dq + dq_next/dv_cmd dv_cmd + dq_next/dq_ref dq_ref (forward
    mode, a Jacobian-vector product): what chaining k sensitivities through
    a rollout needs, from 2k detector runs and 2k command columns.
    """

    dq: np.ndarray
    dv_cmd: np.ndarray
    dq_ref: np.ndarray

    @property
    def k(self) -> int:
        """Return the number of directions."""
        return self.dq.shape[1]


@dataclass(frozen=True)
class GradientRequest:
    """
    What a step's gradients hold (``QuasistaticSimulator.step(gradients=...)``).

    dq_next is differenced along ``q_directions`` (n_q x k_q, None: not in q)
    and along ``command_directions`` (2 n_a x k_c: v_cmd's rows over
    q_ref's; None: not in the commands).  ``kind`` says where the products
    go (``fields``): "full" (True: the identities), "commands", "along" (an
    array S in q, the identity in the commands) or "tangents" (their sum).
    """

    q_directions: Optional[np.ndarray]
    command_directions: Optional[np.ndarray]
    kind: str

    def fields(self, in_q: Optional[np.ndarray], in_commands: Optional[np.ndarray],
               n_a: int) -> dict:
        """Return results.StepGradients' fields from dq_next along the q and command directions."""
        if self.kind == "tangents":
            return {"dq_next_tangents": in_q + in_commands}
        out = {"dq_next_dv_cmd": in_commands[:, :n_a], "dq_next_dq_ref": in_commands[:, n_a:]}
        if self.kind == "full":
            out["dq_next_dq"] = in_q
        elif self.kind == "along":
            out["dq_next_dq_along"] = in_q
        return out


@dataclass(frozen=True)
class StepDerivatives:
    """dq_next along the q directions and along the command directions (n_q x k each)."""

    in_q: Optional[np.ndarray]
    in_commands: Optional[np.ndarray]
    degenerate: bool


def step_gradients(sim, q: np.ndarray, q_ref: np.ndarray, v_bar: np.ndarray, tau_ext,
                   iterates: list, q_directions: Optional[np.ndarray] = None,
                   command_directions: Optional[np.ndarray] = None,
                   warm_start=None) -> StepDerivatives:
    """
    Return the gradients of a solved step of ``sim`` (a StepLoop).

    dq_next along each of ``q_directions`` (n_q x k_q; None: none) and along
    each of ``command_directions`` (2 n_a x k_c, v_cmd's rows over q_ref's;
    None: none).  Each direction is differenced at unit length and scaled
    back (a chained sensitivity may be 1e-8 or 10 long); a zero one costs
    nothing.  The commands need no detector run: they change the cost and
    the bounds only.

    ``iterates`` are the step's iterates that led to its result, the first
    first (``step_loop.chain``): each is the formulation's solution at the
    step's one linearisation with its rows' gaps offset by what the iterate
    before it missed, and the offsets are functions of that iterate's motion.
    The chain rule runs along them (module docstring, "Iterates").
    """
    q_lengths, q_unit = _unit_columns(q_directions)
    c_lengths, c_unit = _unit_columns(command_directions)
    positions = (None if q_unit is None
                 else _position_changes(sim, q, q_ref, v_bar, tau_ext, iterates, q_unit))
    d_cmd, d_q, dv_cmd, dv_q = None, None, None, None
    one_sided = False
    for k, iterate in enumerate(iterates):
        pairs = sorted(iterate.offsets)
        commands = None if c_unit is None else _command_changes(iterate.problem, c_unit)
        if k == 0:                          # the lagged offsets: constants
            d_cmd = None if commands is None else np.zeros((len(pairs), c_unit.shape[1]))
            d_q = None if positions is None else np.zeros((len(pairs), q_unit.shape[1]))
        parts = [(c, d) for c, d in ((commands, d_cmd), (
            None if positions is None else positions[iterate.tolerance], d_q)) if c is not None]
        if not parts:                       # every direction zero: nothing to differentiate
            break
        dv, flag = _iterate_derivative(sim, iterate, _joined([c for c, _ in parts]), pairs,
                                       np.hstack([d for _, d in parts]), DELTA_Q, warm_start)
        one_sided = one_sided or flag
        k_c = 0 if commands is None else len(commands.columns)
        dv_cmd = None if commands is None else dv[:, :k_c]
        dv_q = None if positions is None else dv[:, k_c:]
        if k + 1 < len(iterates):
            following = sorted(iterates[k + 1].offsets)
            if commands is not None:
                d_cmd = _offset_derivative(sim, q, iterate, pairs, following, d_cmd, dv_cmd,
                                           None, None)
            if positions is not None:
                d_q = _offset_derivative(sim, q, iterate, pairs, following, d_q, dv_q,
                                         positions[iterate.tolerance], q_unit)
    v = iterates[-1].attempt.solution.v
    dI_dq, dI_dv = _integration_jacobians(sim, q, v, q_unit)
    return StepDerivatives(
        in_q=_scaled_back(q_lengths, None if dv_q is None else dI_dq + dI_dv @ dv_q, len(q)),
        in_commands=_scaled_back(c_lengths, None if dv_cmd is None else dI_dv @ dv_cmd,
                                 len(q)),
        degenerate=bool(one_sided))


def _unit_columns(directions: Optional[np.ndarray]
                  ) -> tuple[Optional[np.ndarray], Optional[np.ndarray]]:
    """Return the columns' lengths and the nonzero ones at unit length (None: none)."""
    if directions is None:
        return None, None
    lengths = np.linalg.norm(directions, axis=0)
    used = lengths > 0
    return lengths, (directions[:, used] / lengths[used] if used.any() else None)


def _scaled_back(lengths: Optional[np.ndarray], unit: Optional[np.ndarray],
                 n_q: int) -> Optional[np.ndarray]:
    """Return dq_next along the directions of ``lengths`` from its unit ones (zero: zero)."""
    if lengths is None:
        return None
    out = np.zeros((n_q, len(lengths)))
    if unit is not None:
        out[:, lengths > 0] = unit * lengths[lengths > 0]
    return out


@dataclass(frozen=True)
class Changes:
    """
    The step's data at theta_j +- delta, per parameter theta_j.

    ``columns``: ((problem, contacts), (problem, contacts)) with the contacts
    matched to the step's (in their order; None: the iterate's own, as
    under a command); ``raw``: as the detector found
    them (for solving again); ``unmatched``: the columns where a contact
    that matters came or went (their columns hold the step's own data).
    """

    columns: list
    raw: list
    unmatched: np.ndarray


def _joined(changes: list) -> Changes:
    """Return one Changes of ``changes``' columns, in their order."""
    if len(changes) == 1:
        return changes[0]
    return Changes([c for one in changes for c in one.columns],
                   [c for one in changes for c in one.raw],
                   np.concatenate([one.unmatched for one in changes]))


def without_offsets(iterate) -> ContactSet:
    """Return an iterate's contacts as detected (its offsets taken back)."""
    return iterate.contacts.offset({key: -c for key, c in iterate.offsets.items()})


def _command_changes(problem, directions: np.ndarray) -> Changes:
    """
    Return the step's data at (v_cmd, q_ref) +- DELTA_Q d_j, per column d_j.

    ``directions`` is 2 n_a x k, v_cmd's rows over q_ref's.  A command changes
    the cost and the bounds only: its columns keep the iterate's own
    contacts (None here), whose rows the formulation reuses.
    """
    n_a = len(problem.v_cmd)
    step = DELTA_Q * directions.T                   # a row per column: v_cmd's, then q_ref's
    v_cmd, q_ref = (problem.v_cmd + step[:, :n_a], problem.v_cmd - step[:, :n_a]), \
        (problem.q_ref + step[:, n_a:], problem.q_ref - step[:, n_a:])
    columns = [tuple((changed(problem, v_cmd=v_cmd[side][j], q_ref=q_ref[side][j]), None)
                     for side in (0, 1))
               for j in range(len(step))]
    return Changes(columns, columns, np.zeros(len(columns), dtype=bool))


def _position_changes(sim, q, q_ref, v_bar, tau_ext, iterates: list,
                      directions: np.ndarray) -> dict:
    """Return {tolerance: Changes at q +- DELTA_Q d_j} for each tolerance the iterates used."""
    first = iterates[0]
    out = {}
    for iterate in iterates:
        if iterate.tolerance in out:
            continue
        base = without_offsets(iterate)
        far = far_apart(base, iterate.attempt.solution.v, sim.h)
        columns, raw, unmatched = [], [], np.zeros(directions.shape[1], dtype=bool)
        for i, e in enumerate(directions.T):
            ends = [_data_at(sim, q + sign * DELTA_Q * e, q_ref, v_bar, tau_ext,
                             iterate.attempt.solution.v, iterate.tolerance, base, far,
                             first.v_lin) for sign in (1.0, -1.0)]
            raw.append(tuple((problem_at, found) for problem_at, _, found in ends))
            if any(same is None for _, same, _ in ends):
                unmatched[i] = True
                columns.append(((first.problem, base), (first.problem, base)))
            else:
                columns.append(tuple((problem_at, same) for problem_at, same, _ in ends))
        out[iterate.tolerance] = Changes(columns, raw, unmatched)
    return out


def _iterate_derivative(sim, iterate, changes: Changes, pairs: list, d_offsets: np.ndarray,
                        delta: float, warm_start) -> tuple[np.ndarray, bool]:
    """
    Return dv'/dtheta of one iterate, with its offsets' own derivatives (``d_offsets``).

    The formulation differentiates the iterate's solution in each parameter
    (its data from ``changes``, with this iterate's offsets and trust
    region) and in each offset; dv' = A + B d_offsets.  Where that is
    one-sided, the sides are compared by solving again (``sides_compared``).
    """
    contacts, problem = iterate.contacts, iterate.problem

    def at(column):
        return tuple((p if p.trust is problem.trust else changed(p, trust=problem.trust),
                      contacts if c is None else c.offset(iterate.offsets)) for p, c in column)
    columns = [at(column) for column in changes.columns]
    keys = contacts.pair_keys() if pairs else []
    for pair in pairs:
        rows = np.array([key == pair for key in keys], dtype=float)
        columns.append(((problem, changed(contacts, phi=contacts.phi + delta * rows)),
                        (problem, changed(contacts, phi=contacts.phi - delta * rows))))
    solution = iterate.attempt.solution
    derivative, one_sided = sim.formulation.solution_derivative(problem, contacts, solution,
                                                                columns, delta)
    k = len(changes.columns)
    one_sided = per_column(one_sided, len(columns))
    one_sided[:k] |= changes.unmatched
    if one_sided.any() and sim.formulation.checks_one_sided_by_solving:
        raw = [at(changes.raw[j]) if changes.unmatched[j] else columns[j] for j in range(k)]
        raw += columns[k:]
        derivative, one_sided = sides_compared(sim.formulation, solution.v, raw, delta,
                                               derivative, one_sided, warm_start)
    dv = derivative[:, :k]
    if pairs:
        dv = dv + derivative[:, k:] @ d_offsets
    return dv, bool(one_sided.any())


def _offset_derivative(sim, q, iterate, pairs: list, following: list, d_offsets: np.ndarray,
                       dv: np.ndarray, positions: Optional[Changes],
                       directions: Optional[np.ndarray]) -> np.ndarray:
    """
    Return the derivatives of the next iterate's offsets (one row per pair in ``following``).

    A pair the iterate ended deeper than predicted gets the offset
    c = gap(q (+) h v') - (phi_r + h J_n,r (v' - v_lin)), with r the pair's
    row of least predicted gap (phi_r without offset): its derivative is
    (d gap / d v' - h J_n,r) dv' + d gap / d theta - d phi_r / d theta.  A pair
    it did not is kept, with its derivative.
    """
    out = np.zeros((len(following), dv.shape[1]))
    contacts, v = iterate.contacts, iterate.attempt.solution.v
    keys = contacts.pair_keys()
    gaps = contacts.phi + sim.h * (contacts.J_n @ v)
    for i, pair in enumerate(following):
        if pair not in iterate.residuals:
            if pair in pairs:
                out[i] = d_offsets[pairs.index(pair)]
            continue
        r = min((j for j, key in enumerate(keys) if key == pair), key=lambda j: gaps[j])
        in_v = _gap_derivative(sim, q, v, pair)
        out[i] = (in_v - sim.h * contacts.J_n[r]) @ dv
        if positions is not None:
            out[i] += _gap_derivative(sim, q, v, pair, along_q=directions) - np.array(
                [(plus[1].phi[r] - minus[1].phi[r]) / (2 * DELTA_Q)
                 for plus, minus in positions.columns])
    return out


def _gap_derivative(sim, q: np.ndarray, v: np.ndarray, pair: tuple,
                    along_q: Optional[np.ndarray] = None) -> np.ndarray:
    """Return d gap / d v' (or along ``along_q``'s columns in q) of a pair at q (+) h v'."""
    def gap(q_at, v_at):
        sim.model.set_positions(q_at)
        return pair_gap(sim, sim.integrate(q_at, v_at), pair)
    step = DELTA_Q
    if along_q is not None:
        out = np.array([(gap(q + step * e, v) - gap(q - step * e, v)) / (2 * step)
                        for e in along_q.T])
    else:
        out = np.array([(gap(q, v + step * e) - gap(q, v - step * e)) / (2 * step)
                        for e in np.eye(len(v))])
    sim.model.set_positions(q)
    return out


def pair_gap(sim, q_at: np.ndarray, pair: tuple) -> float:
    """Return the signed distance of a geometry pair (by index) at q_at (its witness's)."""
    sim.model.set_positions(q_at)
    geometries = sim.model.geometries
    for p in proximity_pairs(sim.model, sim.scenario.contact_detection_tolerance):
        a, b = geometries[p.id_A].index, geometries[p.id_B].index
        if (min(a, b), max(a, b)) == pair:
            return float(p.distance)
    return sim.scenario.contact_detection_tolerance


def per_column(flags, k: int) -> np.ndarray:
    """Return a formulation's one-sided flag (a bool, or one per column) as k flags."""
    return np.broadcast_to(np.asarray(flags, dtype=bool), (k,)).copy()


ONE_SIDED_TOL = 1e-3    # relative: one-sided differences further apart than this disagree


def sides_compared(formulation, v: np.ndarray, changes: list, delta: float,
                   derivative: np.ndarray, columns: np.ndarray, warm_start=None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """
    Return dv'/dtheta where the one-sided derivatives agree, and the columns that differ.

    For a step the optimality conditions call one-sided (a weakly active row,
    a contact that comes or goes), the formulation solves the step again
    at theta_j +- delta from the data the detector found there.  Where the
    forward and backward differences agree, the column is two-sided, and
    the central difference is its derivative: a box resting flat on a table
    and tilted either way is set back flat, through other rows on each side.
    Where they disagree but their mean is the conditions' derivative, the
    solution is curved there, not kinked (the sides differ by its second
    derivative times delta, and cancel in the mean): two-sided, and
    ``derivative``'s column is kept.  Where they disagree otherwise (a
    kink) or a solve fails, the column is one-sided and ``derivative``'s
    column is kept.  Only the flagged ``columns`` are solved again.
    """
    result, one_sided = derivative.copy(), columns.copy()
    for j in np.flatnonzero(columns):
        plus, minus = changes[j]
        high = formulation.solve(*plus, warm_start).v
        low = formulation.solve(*minus, warm_start).v
        if high is None or low is None:
            continue
        forward, backward = (high - v) / delta, (v - low) / delta
        central = (high - low) / (2.0 * delta)
        size = 1.0 + max(np.abs(forward).max(initial=0.0), np.abs(backward).max(initial=0.0))
        if np.abs(forward - backward).max(initial=0.0) <= ONE_SIDED_TOL * size:
            result[:, j], one_sided[j] = central, False
        elif np.abs(central - derivative[:, j]).max(initial=0.0) <= ONE_SIDED_TOL * size:
            one_sided[j] = False           # curved, not kinked: the sides' mean is the derivative
    return result, one_sided


def _data_at(sim, q: np.ndarray, q_ref, v_bar, tau_ext, v: np.ndarray, tolerance: float,
             base: ContactSet, far_base: np.ndarray, v_lin: Optional[np.ndarray]) -> tuple:
    """
    Return the step's problem at q, its contacts matched to ``base``'s, and as found.

    As the step built them at its own q, linearised at q + h v_lin with the
    same v_lin.  The matched contacts are in the order of ``base``'s (the
    detector's order follows Drake's pair order, which a small change of q
    may permute); None if they do not match (``matched``).
    """
    q_lin = sim.linearisation_point(q, v_lin)
    problem = sim.problem(q, q_lin, q_ref, v_bar, tau_ext, None)
    found = sim.contacts(q_lin, tolerance, v_lin)
    same = matched(base, found, far_base, far_apart(found, v, sim.h))
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
    codes: dict = {}                                # (body A, body B) -> a number

    def coded(contacts: ContactSet) -> np.ndarray:
        return np.array([codes.setdefault(pair, len(codes))
                         for pair in zip(contacts.body_a, contacts.body_b)], dtype=np.int64)
    found, order = _nearest_order(base.point_A_W, other.point_A_W, coded(base), coded(other),
                                  far_base, far_other, MATCH_DISTANCE)
    if not found:
        return None
    if order.size and order.max() >= other.n_c:
        return other.joined(base).take(order)
    return other.take(order)


@numba.njit(cache=True)
def _nearest_order(p_base, p_other, pair_base, pair_other, far_base, far_other, reach):
    """
    Return (matched, order) of ``matched``: base's contacts in turn take the nearest free one.

    Contacts of the same body pair (its code) within ``reach`` of each other
    match; order[i] is the match of base's contact i, or n_other + i (its own
    rows) for an unmatched contact that is far apart.
    """
    n, k = p_base.shape[0], p_other.shape[0]
    distance = np.full((n, k), np.inf)
    for i in range(n):
        for j in range(k):
            if pair_base[i] == pair_other[j]:
                d0 = p_base[i, 0] - p_other[j, 0]
                d1 = p_base[i, 1] - p_other[j, 1]
                d2 = p_base[i, 2] - p_other[j, 2]
                distance[i, j] = math.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
    order = np.empty(n, dtype=np.int64)
    free = np.ones(k, dtype=np.bool_)
    for i in range(n):
        best, j = np.inf, -1
        for c in range(k):
            if distance[i, c] < best:
                best, j = distance[i, c], c
        if j < 0 or not best <= reach:
            if not far_base[i]:
                return False, order
            order[i] = k + i                        # base's own rows: no change
            continue
        order[i] = j
        free[j] = False
        distance[:, j] = np.inf                     # each contact of other matches once
    for j in range(k):
        if free[j] and not far_other[j]:
            return False, order
    return True, order


def _integration_jacobians(sim, q: np.ndarray, v: np.ndarray,
                           directions: Optional[np.ndarray]
                           ) -> tuple[Optional[np.ndarray], np.ndarray]:
    """
    Return d q_next / dq along ``directions`` (None without) and d q_next / dv of the integration.

    In q, by central differences of ``StepLoop.integrate`` (it is smooth and
    cheap).  In v: h N(q) e_j for the joints (q + h N(q) v is linear in v), and
    central differences of each free body's screw motion (integration.py).
    """
    def integrate(q_at, v_at):
        sim.model.set_positions(q_at)
        return sim.integrate(q_at, v_at)
    step = 1e-7
    dI_dq = None if directions is None else np.array(
        [(integrate(q + step * e, v) - integrate(q - step * e, v)) / (2 * step)
         for e in directions.T]).T
    sim.model.set_positions(q)
    plant, context = sim.model.plant, sim.model.plant_context
    dI_dv = sim.h * np.array([plant.MapVelocityToQDot(context, e) for e in np.eye(len(v))]).T
    screw_velocity_jacobian(q, v, sim.h, sim.model.floating_starts, step, dI_dv)
    return dI_dq, dI_dv
