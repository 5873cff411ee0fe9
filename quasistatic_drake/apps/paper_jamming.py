"""
Halm & Posa, Sec. 6 reproduced: pushing, jamming and a peg in a hole with finite feedback.

Halm & Posa, "A Quasi-static Model and Simulation Approach for Pushing,
Grasping, and Jamming" (seed 004).  Each case is built twice, as
``paper-2d`` is:

* (a) by hand: the paper's geometry typed in (``paper_jamming_scenes``),
  each step the LCP of eqs. 37-38 (``formulations/lcp_math.py``) over the
  contacts the authors' ``simulateQuasiStatics.m`` selects (the nearest
  ones, doubled until no contact left out ends the step penetrating);
* (b) through ``QuasistaticSimulator`` and ``formulation: lcp`` on the URDF
  scenes ``config/halm_posa_push.yaml`` and ``config/halm_posa_wall.yaml``
  (the pushes and the wall), with the largest difference between (a) and
  (b) reported.

Cases (parameters from the paper and the authors' MATLAB code,
``mshalm/quasistaticGrasping``):

* the three two-finger disk pushes (Fig. 3), h = 0.025 s, 400 steps, the
  gain sweep c = 2^(4-n), n = 2..22, against perfect velocity control c = 0;
* the wall (Fig. 4, top): c = 0 stops at the jam with no solution, every
  finite gain (n = 2..14, as ``slidingCircleWithWall.m``) runs through it;
* the polygonal peg-in-hole (Fig. 4, bottom): c = 0.01, h = 0.05 s, 240 steps,
  the authors' command ``sideSlide``;
* Fig. 2's square with four fingers pushing inward: no solution at c = 0,
  and at c > 0 the internal force c lambda_N of Thm 3 (lambda = Lambda / h).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import yaml

from quasistatic_drake.apps import paper_jamming_scenes as scenes
from quasistatic_drake.formulations.lcp_math import (finite_feedback_lcp, limit_surface_matrix,
                                                     PlanarContacts, step_displacements)
from quasistatic_drake.formulations.lcp_solvers import solve_lcp
from quasistatic_drake.paths import package_share_dir

PUSHES = ("even", "lopsided", "semicircle")
PUSH_N = tuple(range(2, 23))          # c = 2^(4 - n): slidingCircle.m's nfin = 22
WALL_N = tuple(range(2, 15))          # slidingCircleWithWall.m's nfin = 14
QUICK_PUSH_N = (2, 6, 10, 14, 18, 22)
QUICK_WALL_N = (2, 6, 10, 14)
HIGH_GAIN_C = 2.0 ** -8               # slope_high_gain fits c <= this
PEG_C = 0.01
PEG_TIMES = ("3.5", "4.5", "7.5", "12.0")
SQUARE_C = (1.0, 0.1, 0.01, 0.001, 1e-4)
SELECT_GAP = 1e-3                     # [m] simulateQuasiStatics.m: contacts nearer than this
PENETRATION_SLACK = 1e-8              # [m] ... and a left-out contact may end this deep


def gain(n: int) -> float:
    """Return c = 2^(4 - n), the paper's sweep (Fig. 3)."""
    return 2.0 ** (4 - n)


@dataclass(frozen=True)
class Run:
    """A hand-built rollout: poses per step (row 0 the start), failures and LCP times."""

    q_o: np.ndarray              # (steps + 1, 3) [x, y, theta]
    q_m: np.ndarray              # (steps + 1, n_m)
    failed_steps: int
    first_failed: Optional[int]  # 0-based index of the first step with no solution
    status: str                  # "solved" or the first failure's status
    min_phi: float               # smallest signed distance over the rollout [m]
    lcp_time: np.ndarray = field(default_factory=lambda: np.zeros(0))   # per step [s]
    lcp_size: np.ndarray = field(default_factory=lambda: np.zeros(0))   # largest LCP per step


@dataclass(frozen=True)
class StepOutcome:
    """One hand-built step: the next poses (None on failure), the LCP's status and cost."""

    q_o: Optional[np.ndarray]
    q_m: Optional[np.ndarray]
    status: str
    lcp_time: float
    lcp_size: int
    impulses: Optional[np.ndarray] = None   # Lambda of the contacts solved with


def subset(contacts: PlanarContacts, keep: np.ndarray) -> PlanarContacts:
    """Return the contacts ``keep`` (all frictional): their normal and tangent rows."""
    rows = (2 * keep[:, None] + np.arange(2)[None]).reshape(-1)
    return PlanarContacts(phi=contacts.phi[keep], J_n_o=contacts.J_n_o[keep],
                          J_n_m=contacts.J_n_m[keep], J_t_o=contacts.J_t_o[rows],
                          J_t_m=contacts.J_t_m[rows], mu=contacts.mu[keep])


def selection_sizes(phi: np.ndarray) -> list[int]:
    """
    Return the contact counts to try, nearest first (``simulateQuasiStatics.m``).

    Those nearer than SELECT_GAP, rounded up to a power-of-two fraction of
    all, then doubled up to all of them.
    """
    total = len(phi)
    if total == 0:
        return [0]
    near = max(1, int(np.count_nonzero(phi < SELECT_GAP)))
    first = math.ceil(math.log2(near / total))
    return sorted({math.ceil(2.0 ** k * total) for k in range(first, 1)})


def hand_step(example: scenes.PlanarExample, q_o: np.ndarray, q_m: np.ndarray, u: np.ndarray,
              c: float, backend: str = "lemke") -> StepOutcome:
    """
    Take one step of eqs. 31-38 by hand over the selected contacts.

    A count whose LCP has no solution, or whose step leaves a contact that
    was left out penetrating, gives way to the next larger count; the step
    fails only when all contacts fail.
    """
    contacts = example.contacts(q_o, q_m)
    order = np.argsort(contacts.phi, kind="stable")
    A = limit_surface_matrix(example.A, q_o[2])
    cB = c * example.B
    spent, status, size = 0.0, "no contacts", 0
    for count in selection_sizes(contacts.phi):
        chosen = subset(contacts, np.sort(order[:count]))
        data = finite_feedback_lcp(chosen, A, cB, example.h, u)
        result = solve_lcp(data.M, data.w, backend=backend)
        spent += result.solve_time
        size = max(size, len(data.w))
        status = result.status
        if result.z is None:
            continue
        dq_o, dq_m = step_displacements(chosen, A, cB, example.h, u, result.z)
        q_o_next, q_m_next = q_o + dq_o, q_m + dq_m
        left_out = order[count:]
        if (count == len(order) or np.all(
                example.contacts(q_o_next, q_m_next).phi[left_out] >= -PENETRATION_SLACK)):
            return StepOutcome(q_o_next, q_m_next, "solved", spent, size,
                               impulses=result.z[:chosen.n_n + 2 * chosen.n_f])
    return StepOutcome(None, None, status, spent, size)


def simulate(example: scenes.PlanarExample, c: float, backend: str = "lemke",
             stop_at_failure: bool = False, steps: Optional[int] = None) -> Run:
    """
    Roll ``example`` out at feedback scale c; a failed step keeps the state.

    With ``stop_at_failure`` the rollout ends at the first step that has no
    solution (perfect velocity control at a jam).
    """
    q_o, q_m = example.q_o0.astype(float), example.q_m0.astype(float)
    poses_o, poses_m, times, sizes = [q_o], [q_m], [], []
    failed, first, status = 0, None, "solved"
    min_phi = float(np.min(example.contacts(q_o, q_m).phi, initial=np.inf))
    steps = example.steps if steps is None else steps
    clock = scenes.authors_clock(example.h, steps)
    for k in range(steps):
        u = example.command(q_o, q_m, clock[k])
        outcome = hand_step(example, q_o, q_m, u, c, backend)
        times.append(outcome.lcp_time)
        sizes.append(outcome.lcp_size)
        if outcome.q_o is None:
            failed += 1
            if first is None:
                first, status = k, outcome.status
            if stop_at_failure:
                break
        else:
            q_o, q_m = outcome.q_o, outcome.q_m
            min_phi = min(min_phi, float(np.min(example.contacts(q_o, q_m).phi,
                                                initial=np.inf)))
        poses_o.append(q_o)
        poses_m.append(q_m)
    return Run(np.array(poses_o), np.array(poses_m), failed, first, status, min_phi,
               np.array(times), np.array(sizes))


def push_sweep(case: str, ns: tuple[int, ...], backend: str = "lemke") -> tuple[dict, dict]:
    """Return the JSON block of one push (Fig. 3) and its runs by c (0 first)."""
    example = scenes.disk_push(case)
    runs = {0.0: simulate(example, 0.0, backend)}
    for n in ns:
        runs[gain(n)] = simulate(example, gain(n), backend)
    final = runs[0.0].q_o[-1]
    cs = [gain(n) for n in ns]
    errors = [float(np.linalg.norm(runs[c].q_o[-1] - final)) for c in cs]
    return {
        "final_pose_perfect": final.tolist(),
        "c": cs,
        "e": errors,
        "slope_high_gain": high_gain_slope(cs, errors),
        "failed_steps": int(sum(r.failed_steps for r in runs.values())),
    }, runs


def high_gain_slope(cs: list[float], errors: list[float]) -> float:
    """Return the least-squares slope of log2 e against log2 c over c <= HIGH_GAIN_C."""
    pairs = [(math.log2(c), math.log2(e)) for c, e in zip(cs, errors)
             if c <= HIGH_GAIN_C and e > 0.0]
    if len(pairs) < 2:
        return float("nan")
    x, y = np.array(pairs).T
    return float(np.polyfit(x, y, 1)[0])


def wall_sweep(ns: tuple[int, ...], backend: str = "lemke") -> tuple[dict, dict]:
    """Return the JSON block of the wall (Fig. 4, top) and its runs by c (0 first)."""
    example = scenes.disk_wall()
    perfect = simulate(example, 0.0, backend, stop_at_failure=True)
    runs = {0.0: perfect}
    for n in ns:
        runs[gain(n)] = simulate(example, gain(n), backend)
    cs = [gain(n) for n in ns]
    return {
        "perfect": {"status": perfect.status, "failed_step": perfect.first_failed,
                    "last_pose": perfect.q_o[-1].tolist()},
        "c": cs,
        "final_pose": [runs[c].q_o[-1].tolist() for c in cs],
        "failed_steps": [runs[c].failed_steps for c in cs],
        "min_phi": [runs[c].min_phi for c in cs],
    }, runs


def peg_in_hole(backend: str = "lemke") -> tuple[dict, Run]:
    """Return the JSON block of the peg-in-hole (Fig. 4, bottom) and its run."""
    example = scenes.peg_in_hole()
    run = simulate(example, PEG_C, backend)
    ms = run.lcp_time * 1e3
    return {
        "steps": int(len(run.lcp_time)),
        "failed_steps": run.failed_steps,
        "final_peg_pose": run.q_o[-1].tolist(),
        "poses_at": {t: run.q_o[round(float(t) / example.h)].tolist() for t in PEG_TIMES},
        "lcp_ms": {"mean": float(ms.mean()), "median": float(np.median(ms)),
                   "max": float(ms.max())},
        "lcp_size_max": int(run.lcp_size.max()),
        "min_phi": run.min_phi,
    }, run


def square(backend: str = "lemke") -> dict:
    """
    Return the JSON block of Fig. 2's square: one step at c = 0 and at each c > 0.

    At c > 0 the object does not move and each finger's c lambda_N = c
    Lambda_N / h tends to the internal force that stops it (Thm 3).
    """
    example = scenes.square_squeeze()
    q_o, q_m = example.q_o0, example.q_m0
    u = example.command(q_o, q_m, 0.0)
    perfect = hand_step(example, q_o, q_m, u, 0.0, backend)
    velocity, c_lambda = [], []
    for c in SQUARE_C:
        outcome = hand_step(example, q_o, q_m, u, c, backend)
        if outcome.q_o is None:
            raise RuntimeError(f"Fig. 2 square at c = {c}: {outcome.status} (Thm 1 says a "
                               "solution exists)")
        velocity.append(((outcome.q_o - q_o) / example.h).tolist())
        n_c = len(example.contacts(q_o, q_m).phi)
        c_lambda.append((c * outcome.impulses[:n_c] / example.h).tolist())
    return {"perfect_status": perfect.status, "c": list(SQUARE_C),
            "object_velocity": velocity, "c_lambda_n": c_lambda}


# ----- (b): the same runs through QuasistaticSimulator -------------------------------------
def drake_run(example: scenes.PlanarExample, scene: str, c: float,
              stop_at_failure: bool = False) -> Run:
    """
    Roll ``example`` out through QuasistaticSimulator on config/``scene``.

    The scene's fingers and disk start at the example's q_m0 and q_o0;
    the commands are the example's, at each step's time.
    """
    from quasistatic_drake.scenario import Scenario
    from quasistatic_drake.simulator import QuasistaticSimulator
    config = package_share_dir() / "config"
    data = yaml.safe_load((config / scene).read_text())
    data["robots"][0]["initial_positions"] = example.q_m0.tolist()
    data["objects"][0]["initial_positions"] = example.q_o0.tolist()
    data.setdefault("lcp", {})["feedback_scale"] = c
    sim = QuasistaticSimulator(Scenario.from_dict(data, config, source=str(config / scene)))
    q = sim.default_positions()
    clock = scenes.authors_clock(example.h, example.steps)
    poses_o, poses_m, failed, first, status = [], [], 0, None, "solved"
    min_phi = sim.min_signed_distance(q)
    state = sim.initial_state(q)
    for k in range(example.steps + 1):
        q_m = sim.robot_positions(q, "fingers")
        q_o = _planar_pose(sim, q, "disk")
        poses_o.append(q_o)
        poses_m.append(q_m)
        if k == example.steps:
            break
        result = sim.step(state, {"fingers": example.command(q_o, q_m, clock[k])})
        if not result.success:
            failed += 1
            if first is None:
                first, status = k, result.status
            if stop_at_failure:
                break
        state = result.state_next
        q = np.array(state.q)
        min_phi = (min(min_phi, result.diagnostics.min_phi_next) if result.success
                   else min_phi)
    return Run(np.array(poses_o), np.array(poses_m), failed, first, status, float(min_phi))


def _planar_pose(sim, q: np.ndarray, name: str) -> np.ndarray:
    """Return [x, y, yaw] of an object's pose in the x-y plane."""
    from pydrake.math import RollPitchYaw
    pose = sim.object_pose(q, name)
    return np.array([*pose.translation()[:2], RollPitchYaw(pose.rotation()).yaw_angle()])


def hand_vs_drake(push_runs: dict, wall_runs: dict, cs: tuple[float, ...]) -> dict:
    """
    Return the largest |q_hand - q_drake| over every step of the compared runs.

    The pushes at c = 0 and each c of ``cs``; the wall at each c of ``cs``
    (its c = 0 run up to the jam).  Poses [x, y, theta] and finger
    coordinates.
    """
    worst, per_case = 0.0, {}
    for case, runs in [*push_runs.items(), ("wall", wall_runs)]:
        example = scenes.disk_wall() if case == "wall" else scenes.disk_push(case)
        scene = "halm_posa_wall.yaml" if case == "wall" else "halm_posa_push.yaml"
        case_worst = 0.0
        for c in (0.0, *cs):
            if c not in runs:
                continue
            drake = drake_run(example, scene, c, stop_at_failure=(c == 0.0))
            hand = runs[c]
            n = min(len(hand.q_o), len(drake.q_o))
            diff = max(float(np.max(np.abs(hand.q_o[:n] - drake.q_o[:n]))),
                       float(np.max(np.abs(hand.q_m[:n] - drake.q_m[:n]))))
            case_worst = max(case_worst, diff)
        per_case[case] = case_worst
        worst = max(worst, case_worst)
    return {"max": worst, "per_case": per_case, "c": [0.0, *cs]}


def stages() -> int:
    """Return how many times reproduce() calls its ``progress``."""
    return len(PUSHES) + 4


def reproduce(quick: bool = False, backend: str = "lemke",
              progress: Callable[[str], None] = lambda stage: None) -> dict:
    """Run every case of Sec. 6; return the binding JSON summary (module docstring)."""
    start = time.perf_counter()
    push_ns, wall_ns = (QUICK_PUSH_N, QUICK_WALL_N) if quick else (PUSH_N, WALL_N)
    summary: dict = {"push": {}}
    push_runs = {}
    for case in PUSHES:
        progress(f"{case} push")
        summary["push"][case], push_runs[case] = push_sweep(case, push_ns, backend)
    progress("wall")
    summary["wall"], wall_runs = wall_sweep(wall_ns, backend)
    progress("peg-in-hole")
    summary["peg_in_hole"], peg_run = peg_in_hole(backend)
    progress("square")
    summary["square"] = square(backend)
    progress("hand-built vs Drake")
    compared = (gain(2), gain(6), gain(10), gain(14))
    agreement = hand_vs_drake(push_runs, wall_runs, compared)
    summary["hand_vs_drake_max_dq"] = agreement["max"]
    summary["hand_vs_drake"] = agreement
    summary["backend"] = backend
    summary["quick"] = quick
    summary["seconds"] = time.perf_counter() - start
    summary["_runs"] = {"push": push_runs, "wall": wall_runs, "peg": peg_run}
    return summary


def json_ready(summary: dict) -> dict:
    """Return the summary without its runs (what ``--json`` writes)."""
    return {k: v for k, v in summary.items() if not k.startswith("_")}


def plot(summary: dict, path: Path) -> None:
    """Write the panels of Figs. 3 and 4: trajectories, convergence, the wall, the peg."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    runs = summary["_runs"]
    fig, ax = plt.subplots(3, 3, figsize=(15, 14))
    for i, case in enumerate(PUSHES):
        _trajectories(ax[0, i], runs["push"][case], f"Fig. 3 (top): {case} push")
        block = summary["push"][case]
        ax[1, i].plot(-np.log2(block["c"]), np.log2(block["e"]), "o-")
        ax[1, i].set_xlabel("-log2 c")
        ax[1, i].set_ylabel("log2 e")
        ax[1, i].set_title(f"Fig. 3 (bottom): slope {block['slope_high_gain']:.2f} "
                           f"for c <= 2^-8")
        ax[1, i].grid(True)
    _trajectories(ax[2, 0], runs["wall"], "Fig. 4 (top): the wall (black: c = 0, stops)")
    ax[2, 0].axhspan(-1, 0, color="0.6")
    _peg(ax[2, 1], ax[2, 2], runs["peg"])
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _trajectories(ax, runs: dict, title: str) -> None:
    """Draw each run's disk centre path and final disk, yellow to blue as c falls."""
    import matplotlib.pyplot as plt
    finite = [c for c in runs if c > 0.0]
    for c in finite:
        colour = plt.cm.viridis_r(np.log2(c / max(finite)) / min(-1.0, np.log2(
            min(finite) / max(finite))))
        _disk(ax, runs[c], colour, 1.0)
    _disk(ax, runs[0.0], "k", 2.5)
    ax.set_aspect("equal")
    ax.set_title(title)
    ax.set_xlabel("x_W [m]")
    ax.set_ylabel("y_W [m]")


def _disk(ax, run: Run, colour, width: float) -> None:
    """Draw a run's centre path, its final disk and heading, and its fingers."""
    x, y, theta = run.q_o[-1]
    ax.plot(run.q_o[:, 0], run.q_o[:, 1], ":", color=colour, lw=width)
    circle = np.linspace(0.0, 2.0 * np.pi, 80)
    ax.plot(x + np.cos(circle), y + np.sin(circle), color=colour, lw=width)
    ax.plot([x, x + np.cos(theta)], [y, y + np.sin(theta)], color=colour, lw=width)
    ax.plot(run.q_m[-1, 0::2], run.q_m[-1, 1::2], "o", color=colour)


def _peg(ax_a, ax_b, run: Run) -> None:
    """Draw the peg-in-hole's bodies every 9th step, before and after t = 3.5 s (Fig. 4)."""
    example = scenes.peg_in_hole()
    split = round(3.5 / example.h)
    colours = {"peg": "tab:blue", "slot": "tab:olive"}
    for ax, steps, title in ((ax_a, list(range(0, split + 1, 9)), "Fig. 4 (bottom): t <= 3.5 s"),
                             (ax_b, list(range(split, len(run.q_o), 9)), "t >= 3.5 s")):
        for k, step in enumerate(steps):
            alpha = 0.1 + 0.5 * (k + 1) / len(steps)
            for outline in example.outlines(run.q_o[step], run.q_m[step]):
                if outline.kind != "polygon" or (outline.static and k):
                    continue
                colour = ("0.5" if outline.static else
                          colours.get(outline.name.split()[0], "tab:red"))
                ax.fill(outline.points[:, 0], outline.points[:, 1], color=colour,
                        alpha=1.0 if outline.static else alpha, lw=0.5)
        ax.set_xlim(-10, 10)
        ax.set_ylim(-5, 15)
        ax.set_aspect("equal")
        ax.set_title(title)
