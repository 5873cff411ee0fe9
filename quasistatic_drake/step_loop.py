"""
The step: one algorithm for every formulation (docs/contact.md, "The step").

:class:`StepLoop` takes checked inputs (``inputs.py``) and does:

1. the linearisation: halfway along the last step's motion, shortened so
   that no point moves further than the detection tolerance along it
   (``_linearisation_velocity``, by the sweep the last step handed on);
   the step's data there (``step_data.py``);
2. detection at that point (``contact_detection.py``), each row's gap
   carried back to q, and each geometry pair's rows shifted by its gap
   offset (the depth they missed at the last step's end);
3. the formulation's solve (the QP: each contact island's convex problem,
   ``formulations/qp.py``); a formulation whose solve fails with a
   penetration it cannot work off in one step is solved again working off
   the largest fraction of it that it can (the QP never needs this: its
   penetrating contacts carry a priced slack);
4. integration, q_next = q + h N(q) v' (free bodies along their screw);
5. the residual: how much deeper than its rows predicted each pair ends,
   and whether the motion could reach a point the detection did not see;
6. accept, or iterate (at most MAX_ITERATIONS): widen the tolerance for
   unseen points in reach, take the rows again halfway along this motion
   (shortened as in 1) where a pair ended RELINEARISE deeper, else offset
   each deeper pair's rows by the depth it missed; the best iterate is the
   step's;
7. the next state: the reference, the warm start, the lagged offsets and
   the sweep of v' (how far it moved any point, which shortens the next
   linearisation), from the formulation;
8. on request, the step's derivatives (``step_gradients.py``), chained
   through the iterates that led to the step's.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Any, Optional, Union

import numpy as np

from quasistatic_drake.contact import ContactSet
from quasistatic_drake.contact_detection import proximity_pairs
from quasistatic_drake.formulations.base import StepProblem, StepSolution
from quasistatic_drake.integration import screw_step
from quasistatic_drake.islands import rows_times
from quasistatic_drake.manifold import body_motions, sweep_lengths
from quasistatic_drake.records import changed
from quasistatic_drake.results import StepDiagnostics, StepGradients, StepResult
from quasistatic_drake.state import State
from quasistatic_drake.step_gradients import GradientRequest, step_gradients

# the step's iterations: each detects and solves at a linearisation, and the next one is
# taken where the last one's motion could reach unseen points (a wider tolerance) or ended a
# pair deeper than its rows predicted by more than LINEARISATION_TOL (linearised again,
# halfway along that motion); at most MAX_ITERATIONS, keeping the best
MAX_ITERATIONS = 8
RELINEARISE = 1e-3                # [m] an iterate this much deeper than predicted moves the rows
MAX_RELINEARISE = 2               # at most, a step; and only while each does better
LINEARISATION_TOL = 1e-5          # [m]
_NO_SHIFT = np.zeros(3)


@dataclass(frozen=True)
class Iterate:
    """One linearisation of the step and its solve (``StepLoop.take``)."""

    attempt: "Attempt"
    problem: StepProblem
    contacts: ContactSet
    q_next: np.ndarray
    v_lin: Optional[np.ndarray]        # linearised at q + h v_lin (None: at q)
    sweep: float                       # how far v' moves any point, at the linearisation [m]
    tolerance: float
    needs_wider: bool                  # its motion could reach points the detection missed
    depth: float                       # how much deeper than predicted a pair ended [m]
    iteration: int
    offsets: dict                      # {geometry pair: gap offset of its rows} [m]
    residuals: dict                    # {geometry pair: how much deeper it ended} [m]
    parent: Optional[int]              # the iterate whose offsets this one corrected
    signed: dict                       # {geometry pair: predicted - actual gap}, where known

    def corrected_offsets(self) -> dict:
        """Return the next iterate's offsets: this one's, less each deeper pair's residual."""
        offsets = dict(self.offsets)
        for pair, depth in self.residuals.items():
            offsets[pair] = offsets.get(pair, 0.0) - depth
        return offsets

    def lagged_offsets(self) -> dict:
        """
        Return the next step's first offsets: each pair's, less its signed residual.

        A pair that ended deeper than its rows predicted keeps asking for the
        depth they missed (a held object's rows miss alike every step of a
        carry); one that ended shallower gives it back; none is positive.
        """
        offsets = {}
        for pair in set(self.offsets) | set(self.signed):
            c = self.offsets.get(pair, 0.0) - self.signed.get(pair, -np.inf)
            if c < 0.0:
                offsets[pair] = c
        return offsets

    @property
    def rank(self) -> tuple:
        """Return the order of preference: the depth, then seeing every reachable contact."""
        return (self.depth, self.needs_wider)


@dataclass(frozen=True)
class Attempt:
    """A formulation's solution in the step, with what the step did to get it."""

    solution: StepSolution
    solve_time: float                  # every solve's time, the recovery solves' included
    recovery_fraction: float = 1.0     # the fraction of each penetration worked off


class StepLoop:
    """The step's algorithm (module docstring), for one engine's model and formulation."""

    def __init__(self, scenario, model, detector, data, formulation):
        """Take the engine's parts: scenario, model, detector, step data, formulation."""
        self.scenario, self.model, self.detector = scenario, model, detector
        self.data, self.formulation = data, formulation
        self.h = scenario.time_step
        # proximity pairs of the last q and tolerance asked: a step's q_next is the next
        # step's q.  Keyed by both, so it never changes a result.
        self._pairs_cache: Optional[tuple[bytes, bytes, list]] = None
        self._moves = self._velocities_of_geometries()

    def _velocities_of_geometries(self) -> dict:
        """Return {geometry index: the velocities that move its body} (the kinematic tree)."""
        self.model.set_positions(self.model.plant.GetPositions(self.model.plant_context))
        J_w, J_v, _ = self.model.body_jacobians()
        moving = np.abs(J_w).sum(axis=1) + np.abs(J_v).sum(axis=1) > 0.0
        slot = self.model.moving_slot
        return {info.index: (np.flatnonzero(moving[slot[info.body_index]])
                             if info.body_index in slot else np.zeros(0, dtype=int))
                for info in self.model.geometries.values()}

    def _shorter(self, residuals: dict) -> Union[float, np.ndarray]:
        """
        Return the trust's factor after an iterate that ended deeper than the one before.

        Halved on the velocities that move the bodies of the pairs that ended
        deeper than predicted, so that an island elsewhere (a pile settling)
        does not shorten a push; halved for all if no pair says which.
        """
        if not residuals:
            return 0.5
        factor = np.ones(self.model.n_v)
        for pair in residuals:
            for geometry in pair:
                factor[self._moves[geometry]] = 0.5
        return factor

    def take(self, q: np.ndarray, q_ref: np.ndarray, v_bar: np.ndarray, warm_start: Any,
             start: float, tau_ext: Optional[np.ndarray] = None,
             gradients: Optional[GradientRequest] = None,
             v_a: Optional[np.ndarray] = None) -> StepResult:
        """Take one step from checked inputs (module docstring)."""
        formulation = self.formulation
        tolerance = self.scenario.contact_detection_tolerance
        v_lin = self._linearisation_velocity(q, *formulation.linearisation_velocity(warm_start))
        q_lin = self.linearisation_point(q, v_lin)
        problem = self.problem(q, q_lin, q_ref, v_bar, tau_ext, v_a)
        motion = self._commanded_motion(q, q_ref, v_bar)
        start_gaps = self._pair_gaps(q, motion)  # first: the last step's query at its q_next
        found = self.contacts(q_lin, tolerance, v_lin, motion)
        iterates: list[Iterate] = []
        best: Optional[Iterate] = None
        offsets, parent = dict(formulation.gap_offsets(warm_start)), None
        relinearised = 0
        for iteration in range(1, MAX_ITERATIONS + 1):
            contacts = found.offset(offsets)
            attempt = self.solve(problem, contacts, warm_start)
            if attempt.solution.v is None:
                if best is None:
                    return self._failure(q, q_ref, v_a, contacts, attempt, warm_start, start)
                break
            v = attempt.solution.v
            self.model.set_positions(q_lin)
            wider, sweep = self._tolerance_for_reach(v, tolerance)
            self.model.set_positions(q)
            q_next = self.integrate(q, v)
            residuals, unseen, signed = self._residuals(q_next, contacts, v, offsets,
                                                        start_gaps, motion)
            iterate = Iterate(attempt, problem, contacts, q_next, v_lin, sweep, tolerance,
                              wider is not None, max([unseen, *residuals.values()]),
                              iteration, offsets, residuals, parent, signed)
            iterates.append(iterate)
            if best is None or iterate.rank < best.rank:
                best = iterate
            if wider is None and iterate.depth <= LINEARISATION_TOL:
                break
            trust = problem.trust
            if len(iterates) > 1 and iterate.depth > iterates[-2].depth:
                trust = trust * self._shorter(iterate.residuals)   # deeper: a shorter step
            relinearise = (iterate.depth > RELINEARISE and relinearised < MAX_RELINEARISE
                           and (parent is not None or len(iterates) == 1
                                or iterate.depth < iterates[-2].depth))
            if relinearise:                     # far off: linearise halfway along this one
                relinearised += 1
                v_lin = self._linearisation_velocity(q, v, sweep)
                q_lin = self.linearisation_point(q, v_lin)
                problem = self.problem(q, q_lin, q_ref, v_bar, tau_ext, v_a, trust)
                offsets, parent = {}, None
            else:                               # the same rows, asking for the depth missed
                problem = changed(problem, trust=trust)
                offsets, parent = iterate.corrected_offsets(), iteration - 1
            if wider is not None:               # detect further
                tolerance = max(tolerance, wider)
            if wider is not None or parent is None:
                found = self.contacts(q_lin, tolerance, v_lin, motion)
        return self._result(best, iterates, q, q_ref, v_bar, tau_ext, v_a, gradients, start,
                            warm_start)

    def _result(self, best: "Iterate", iterates: list, q, q_ref, v_bar, tau_ext, v_a,
                gradients, start: float, warm_start: Any = None) -> StepResult:
        """Return the step's result from its best iterate (``take``)."""
        attempt, problem, contacts = best.attempt, best.problem, best.contacts
        solution, q_next = attempt.solution, best.q_next
        derivatives = (None if gradients is None else
                       step_gradients(self, q, q_ref, v_bar, tau_ext, chain(best, iterates),
                                      gradients.q_directions, gradients.command_directions,
                                      warm_start=warm_start))
        q_ref_next, reference_limited = self.formulation.next_reference(
            problem, q_next[self.data.robot_q_idx], solution)
        state_next = State(q=q_next, q_ref=q_ref_next,
                           robot_velocity=(None if v_a is None
                                           else solution.v[self.data.robot_v_idx]),
                           warm_start=self.formulation.with_step_end(
                               solution.warm_start_next, best.lagged_offsets(), best.sweep))
        return StepResult(
            state_next=state_next, status=solution.status, contact_set=contacts,
            **self._impulse_fields(solution.impulses_W),
            gradients=None if derivatives is None else StepGradients(
                **{"dq_next_dq": None, "dq_next_dv_cmd": None, "dq_next_dq_ref": None,
                   **gradients.fields(derivatives.in_q, derivatives.in_commands, len(v_bar))},
                degenerate=derivatives.degenerate),
            diagnostics=StepDiagnostics(
                v=solution.v, solution=solution, solve_time=attempt.solve_time,
                step_time=time.perf_counter() - start, min_phi_next=self.min_phi(q_next),
                recovery_fraction=min(attempt.recovery_fraction,
                                      getattr(solution, "recovery_fraction", 1.0)),
                reference_limited=reference_limited, iterations=best.iteration))

    def _commanded_motion(self, q: np.ndarray, q_ref: np.ndarray,
                          v_bar: np.ndarray) -> np.ndarray:
        """
        Return the generalised velocity the robots are commanded to: (q_ref + h v_bar - q) / h.

        The objects' entries are zero.  It only settles which way boxes
        centred on each other come apart (contact_detection.box_proximity).
        """
        motion = np.zeros(self.model.n_v)
        motion[self.data.robot_v_idx] = (q_ref - q[self.data.robot_q_idx]) / self.h + v_bar
        return motion

    def _pair_gaps(self, q: np.ndarray, motion: np.ndarray) -> dict:
        """Return {geometry pair: its signed distance at q} within the detection tolerance."""
        geometries = self.model.geometries
        gaps: dict = {}
        for p in self.pairs(q, self.scenario.contact_detection_tolerance, motion):
            if math.isfinite(p.distance):
                a, b = geometries[p.id_A].index, geometries[p.id_B].index
                key = (min(a, b), max(a, b))
                gaps[key] = min(gaps.get(key, np.inf), p.distance)
        return gaps

    def _residuals(self, q_next: np.ndarray, contacts: ContactSet, v: np.ndarray,
                   offsets: dict, start_gaps: dict,
                   motion: np.ndarray) -> tuple[dict, float, dict]:
        """
        Return how much deeper than its rows predicted each pair ends the step [m].

        A contact row predicts its gap at the step's end as phi + h J_n v'
        (less its slack, where it penetrates and the step could not work it
        off); the rows are linear in v' but bodies turn, so a turning body
        ends deeper than they say by about R theta^2 / 8 (rows taken halfway).
        Returns the pairs deeper than predicted by more than
        LINEARISATION_TOL, the depth of the deepest pair that had no rows
        (the reach check widens the detection for it; 0 if none), and for
        every pair with rows or an offset found within the detection
        tolerance at q_next, min(predicted, 0) - its gap (a pair with an
        offset not found there: none, its offset is dropped).  The prediction
        is never below the pair's gap at q (``start_gaps``): the step may work
        a penetration off, not deepen it, whatever rows taken far from q say.
        """
        near = [p for p in self.pairs(q_next, self.scenario.contact_detection_tolerance, motion)
                if math.isfinite(p.distance)]
        predicted: dict = {}
        if contacts.n_c and contacts.geometry_a is not None:
            gaps = contacts.phi + self.h * rows_times(contacts.J_n, v)
            for key, gap in zip(contacts.pair_keys(), gaps.tolist()):
                predicted[key] = min(predicted.get(key, np.inf), gap)
        geometries = self.model.geometries
        residuals: dict = {}
        signed: dict = {}
        unseen = 0.0
        for p in near:
            a, b = geometries[p.id_A].index, geometries[p.id_B].index
            key = (min(a, b), max(a, b))
            if key not in predicted:
                if p.distance < -LINEARISATION_TOL:
                    unseen = max(unseen, -p.distance)
                continue
            depth = max(min(predicted[key], 0.0), min(start_gaps.get(key, 0.0), 0.0)) \
                - p.distance
            if key in offsets or depth > 0.0:
                signed[key] = max(signed.get(key, -np.inf), depth)
            if depth > LINEARISATION_TOL and p.distance < -LINEARISATION_TOL:
                residuals[key] = max(residuals.get(key, 0.0), depth)
        return residuals, unseen, signed

    def settled_warm_start(self, q: np.ndarray) -> Any:
        """Return the formulation's warm start for a first state at q (zero commands)."""
        self.model.set_positions(q)
        n_a = len(self.data.robot_q_idx)
        v_a = np.zeros(n_a) if self.scenario.robot_inertia else None
        problem = self.problem(q, q, q[self.data.robot_q_idx], np.zeros(n_a), None, v_a)
        return self.formulation.settled_warm_start(
            problem, self.contacts(q, self.scenario.contact_detection_tolerance))

    # ----- the parts of the step ----------------------------------------------------------
    def _linearisation_velocity(self, q: np.ndarray, last_v: Optional[np.ndarray],
                                sweep: Optional[float] = None) -> Optional[np.ndarray]:
        """
        Return half of v' (the last step's, or an iterate's), shortened to the tolerance.

        Halfway along the last motion is where a steady motion's rows are
        best taken (``linearisation_point``); a motion that stopped or turned
        (an object that rolled 1 rad in the last step, then hit the table)
        would put them far from anything this step does, so the half-step is
        scaled down until no point of any body moves by more than the
        detection tolerance along it.  So is an iterate's: one that missed
        the table under a cylinder spun it at 25 rad/s, and rows carried back
        from halfway along that turn put a point 146 mm into the table that
        was 4 mm above it.  ``sweep`` is how far v' moved any point, as the
        reach check measured it where v' was solved (``_tolerance_for_reach``);
        a warm start that does not carry it (one built by hand) has it
        measured at q.
        """
        if last_v is None or not np.any(last_v):
            return None
        v_lin = 0.5 * last_v
        if sweep is None:
            self.model.set_positions(q)
            sweep = self._sweep(last_v)
        half = 0.5 * sweep
        reach = self.scenario.contact_detection_tolerance
        return v_lin if half <= reach else (reach / half) * v_lin

    def _sweep(self, v: np.ndarray) -> float:
        """Return how far v' moves any point of any body in one step, at the set q [m]."""
        J_w, J_v, _ = self.model.body_jacobians()
        return float(np.max(sweep_lengths(J_w, J_v, self.model.moving_radii, v, self.h),
                            initial=0.0))

    def linearisation_point(self, q: np.ndarray, v_lin: Optional[np.ndarray]) -> np.ndarray:
        """
        Return where the step linearises its contacts: q + h v_lin, or q.

        v_lin is half the last step's v' (the QP's warm start).  A robot link
        swung through an arc carries the object it holds along that arc's
        chord only if its contact rows are taken halfway along it:
        linearised at q, the held object crept 0.37 mm across the demo's
        fingers over the carry (docs/contact.md, "The step").
        """
        if v_lin is None or not np.any(v_lin):
            return q
        self.model.set_positions(q)
        return self.integrate(q, v_lin)

    def problem(self, q: np.ndarray, q_lin: np.ndarray, q_ref: np.ndarray, v_bar: np.ndarray,
                tau_ext: Optional[np.ndarray], v_a: Optional[np.ndarray],
                trust: float = 1.0) -> StepProblem:
        """Return the step's data: the robots' positions and limits at q, the rest at q_lin."""
        self.model.set_positions(q_lin)
        problem = self.data.problem(q, q_ref, v_bar, tau_ext, v_a,
                                    self.formulation.needs_object_frames)
        return problem if np.isscalar(trust) and trust == 1.0 else changed(problem, trust=trust)

    def contacts(self, q_lin: np.ndarray, tolerance: float,
                 v_lin: Optional[np.ndarray] = None,
                 motion: Optional[np.ndarray] = None) -> ContactSet:
        """
        Return the contacts the formulation takes at q_lin, within ``tolerance``.

        Their gaps are those at q: phi(q_lin) - h J_n v_lin, so that a row
        reads phi(q_lin) + h J_n (v' - v_lin) >= 0 at the step's end.
        ``motion`` is the commanded velocity (``_commanded_motion``).
        """
        pairs = self.pairs(q_lin, tolerance, motion)
        self.model.set_positions(q_lin)
        contacts = self.formulation.contacts(self.detector.detect(tolerance, pairs))
        if contacts.n_c and v_lin is not None and np.any(v_lin):
            shift = self.h * rows_times(contacts.J_n, v_lin)
            contacts = changed(contacts, phi=contacts.phi - shift)
        return contacts

    def solve(self, problem: StepProblem, contacts: ContactSet, warm_start: Any) -> Attempt:
        """Solve the formulation; if that fails with penetration, recover partially."""
        solution = self.formulation.solve(problem, contacts, warm_start)
        if (solution.v is None and np.any(contacts.phi < 0.0)
                and self.formulation.recovers_from(solution)):
            return self._partial_recovery(problem, contacts, warm_start, solution)
        return Attempt(solution, solution.solve_time)

    def _partial_recovery(self, problem: StepProblem, contacts: ContactSet, warm_start: Any,
                          failed: StepSolution) -> Attempt:
        """
        Solve again, working off the largest fraction alpha of every penetration possible.

        A penetrating contact (phi < 0) asks for a separating velocity -phi/h,
        and that can be impossible: the joints' velocity limits (a finger 16 mm
        inside the table at h = 0.01 s may move 2.1 mm), or two demands that
        contradict each other.  With phi scaled by alpha in [0, 1] the step
        asks to work off the fraction alpha; alpha = 0 keeps "no deeper
        penetration" and is always feasible (v' = 0 satisfies it).  alpha is
        bisected the formulation's ``recovery_bisections`` times, so the rest
        is worked off in later steps.  Returns ``failed`` if even alpha = 0 fails.
        """
        def solve(alpha: float) -> StepSolution:
            scaled = replace(contacts, phi=np.where(contacts.phi < 0.0, alpha * contacts.phi,
                                                    contacts.phi))
            return self.formulation.solve(problem, scaled, warm_start)

        best = solve(0.0)
        spent = failed.solve_time + best.solve_time
        if best.v is None:
            return Attempt(failed, spent)
        low, high = 0.0, 1.0
        for _ in range(self.formulation.recovery_bisections):
            alpha = 0.5 * (low + high)
            trial = solve(alpha)
            spent += trial.solve_time
            if trial.v is None:
                high = alpha
            else:
                low, best = alpha, trial
        return Attempt(best, spent, recovery_fraction=low)

    def integrate(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Return q_next: q + h N(q) v for joints, free bodies by their screw (integration.py)."""
        qdot = self.model.plant.MapVelocityToQDot(self.model.plant_context, v)
        q_next = q + self.h * qdot
        screw_step(q, v, self.h, self.model.floating_starts, q_next)
        return q_next

    def _tolerance_for_reach(self, v: np.ndarray,
                             tolerance: float) -> tuple[Optional[float], float]:
        """
        Return a wider detection tolerance if the step could reach an unseen point, and the sweep.

        A body can move further in one step than the detection tolerance (an
        object falling free, a fast arm).  A point of body B moves by at most
        |s_B| + t_B, where s_B = h v_B is its origin's displacement and
        t_B = h |w_B| R_B, R_B the radius of its geometry about its origin; two
        points of bodies A and B close in by at most |s_A - s_B| + t_A + t_B
        (a fixed body: s = 0, t = 0).  When such a reach exceeds the
        tolerance for a pair, the step is solved again from q with the
        tolerance widened to cover it.  The model must be at the linearisation.  The
        wider tolerance is None where none is needed; the sweep is the farthest any point
        moves, max_B |s_B| + t_B [m] (the next step's linearisation is shortened by it).
        """
        sweep = self._sweep(v)
        if 2.0 * sweep <= tolerance:
            return None, sweep
        J_w, J_v, _ = self.model.body_jacobians()
        shift, turn = body_motions(J_w, J_v, self.model.moving_radii, v, self.h)
        slot = self.model.moving_slot
        geometries = self.model.geometries
        reach_needed = 0.0
        for pair in proximity_pairs(self.model, 2.0 * sweep):
            a = slot.get(geometries[pair.id_A].body_index)
            b = slot.get(geometries[pair.id_B].body_index)
            s_a = shift[a] if a is not None else _NO_SHIFT
            s_b = shift[b] if b is not None else _NO_SHIFT
            reach = (math.sqrt((s_a - s_b) @ (s_a - s_b)) + (turn[a] if a is not None else 0.0)
                     + (turn[b] if b is not None else 0.0))
            distance = pair.distance if math.isfinite(pair.distance) else 0.0
            if tolerance < distance < reach:          # unseen, and within reach
                reach_needed = max(reach_needed, reach)
        if reach_needed <= tolerance:
            return None, sweep
        return reach_needed + self.scenario.contact_detection_tolerance, sweep

    def pairs(self, q: np.ndarray, tolerance: float,
              motion: Optional[np.ndarray] = None) -> list:
        """
        Signed-distance pairs within tolerance at q (the last asked are kept).

        ``motion`` (the commanded velocity) only matters to boxes centred on
        each other (contact_detection.box_proximity): kept pairs with none
        such serve any motion.
        """
        key = q.tobytes() + np.float64(tolerance).tobytes()
        moves = b'' if motion is None else motion.tobytes()
        kept = self._pairs_cache
        if (kept is None or kept[0] != key
                or (kept[1] != moves and any(getattr(p, 'centred', False) for p in kept[2]))):
            self.model.set_positions(q)
            kept = (key, moves, proximity_pairs(self.model, tolerance, motion))
            self._pairs_cache = kept
        return kept[2]

    def min_phi(self, q: np.ndarray) -> float:
        """Return the smallest Drake signed distance of the pairs within tolerance at q."""
        pairs = self.pairs(q, self.scenario.contact_detection_tolerance)
        return min((p.distance for p in pairs if math.isfinite(p.distance)), default=np.inf)

    def _failure(self, q, q_ref, v_a, contacts, attempt: Attempt, warm_start,
                 start) -> StepResult:
        """Return the result of a failed solve: q, the reference, v_a and the warm start kept."""
        return StepResult(state_next=State(q, q_ref, v_a, warm_start),
                          status=attempt.solution.status, contact_set=contacts,
                          **self._impulse_fields(np.zeros((contacts.n_c, 3))),
                          diagnostics=StepDiagnostics(
                              solution=attempt.solution, solve_time=attempt.solve_time,
                              step_time=time.perf_counter() - start))

    def _impulse_fields(self, impulses_W: np.ndarray) -> dict:
        """Return forces [N] (impulse / h), or scaled impulses if the formulation has them."""
        if self.formulation.scaled_impulses:
            return {"forces_W": None, "scaled_impulses_W": impulses_W}
        return {"forces_W": impulses_W / self.h}


def chain(best: Iterate, iterates: list) -> list:
    """Return the iterates whose offsets led to ``best``, the first one first."""
    out = [best]
    while out[-1].parent is not None:
        out.append(iterates[out[-1].parent])
    return out[::-1]
