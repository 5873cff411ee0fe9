"""
Measure dense QP solvers on step QPs from real simulation steps.

The QPs are recorded, not synthesised: the QP formulation's ``solver`` (the
engine's ``solve_daqp``, ``quasistatic_drake/formulations/qp_backends.py``)
is wrapped on each simulator of a few scripted runs of the finger-push and
two-pads-lift scenes (config/), in quasi-static and quasi-dynamic mode, at
the scenes' time step and at h = 0.02 s (5x the steps: the same motion).
Every recorded QP is then solved by every solver in ``SOLVERS`` a few times:
the engine's own DAQP call (equilibrated, exact active set with a proximal
fallback), DAQP, ProxQP, quadprog, Clarabel and OSQP through the pinned
qpsolvers, and Drake's MathematicalProgram (``qp_solver_wrappers.py``).
The per-QP median of the wall time around the solver call (set-up
included: what the simulator pays) is the solve time.  Per solver it reports
the median and 90th percentile time, failures, the largest constraint
violation, the largest relative objective gap to the best feasible objective
of that QP, and the largest KKT stationarity residual ||H x + f - A^T duals||_inf
on QPs whose bounds are inactive (which checks the wrapper's dual sign
convention).

Run from the repository root:

    .venv/bin/python benchmarks/qp_solvers.py [--repeats 5] [--budget 1.0]
        [--json out/qp_solvers.json] [--png out/qp_solvers.png]

A solver that runs to a large iteration limit on a degenerate QP can take
long on it (ProxSuite: up to ~100 s on one finger_push QP at h = 0.02, in some
runs only); ``--budget`` stops repeating such a QP, so it is timed once.
"""

import argparse
import contextlib
from dataclasses import dataclass
import importlib.metadata
import json
import os
from pathlib import Path
import platform
import sys
import time
from typing import Callable, Iterator, Optional, Sequence

import numpy as np
import yaml

from qp_solver_wrappers import SOLVERS as WRAPPED_SOLVERS
from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.formulations.qp_backends import QpSolverResult, solve_daqp
from quasistatic_drake.paths import package_share_dir

REPO_ROOT = Path(__file__).resolve().parent.parent
CONFIG_DIR = package_share_dir() / 'config'
FEASIBILITY_TOL = 1e-6      # violation and objective-gap threshold of the recommendation
BOUND_ACTIVE_TOL = 1e-6     # a finite bound closer than this to x* counts as active
SCENE_TIME_STEP = 0.1       # the h the schedules below are written for
SMALL_TIME_STEP = 0.02
PACKAGES = ('drake', 'numpy', 'daqp', 'qpsolvers', 'proxsuite', 'quadprog', 'clarabel', 'osqp',
            'scipy')
ENGINE = 'daqp (ours: equilibrated, exact active set)'    # what the simulator runs
SOLVERS: dict[str, Callable[..., QpSolverResult]] = {ENGINE: solve_daqp, **WRAPPED_SOLVERS}

# (robot, [(joint velocity command, number of steps at h = SCENE_TIME_STEP)])
FINGER_PUSH = ('finger', [((0.1, 0.0, 0.0), 40)])
PADS_LIFT = ('pads', [((0.0, 0.1, -0.1), 3), ((0.0, 0.02, -0.02), 3), ((0.1, 0.0, 0.0), 10),
                      ((0.0, 0.0, 0.0), 10), ((-0.1, 0.0, 0.0), 5), ((0.0, -0.1, 0.1), 5)])
SCENES = {'finger_push': FINGER_PUSH, 'two_pads_lift': PADS_LIFT}


@dataclass(frozen=True)
class Qp:
    """One recorded step QP: min 1/2 x'Hx + f'x s.t. A x >= lower, x_lower <= x <= x_upper."""

    scene: str
    H: np.ndarray
    f: np.ndarray
    A: np.ndarray
    lower: np.ndarray
    x_lower: np.ndarray
    x_upper: np.ndarray

    def args(self) -> tuple[np.ndarray, ...]:
        """Return fresh copies of the solver arguments (a solver may write to them)."""
        return tuple(a.copy() for a in (self.H, self.f, self.A, self.lower,
                                        self.x_lower, self.x_upper))


@dataclass
class Solve:
    """One solver's answer to one QP and the median wall time of its repeats [s]."""

    time: float
    ok: bool
    status: str
    x: Optional[np.ndarray] = None
    duals: Optional[np.ndarray] = None


# ----- recording -------------------------------------------------------------------------
def recorder(scene: str, store: list[Qp]) -> Callable[..., QpSolverResult]:
    """Return a QP solver that appends every QP it is given to ``store`` and solves it."""
    def solve(H, f, A, lower, x_lower, x_upper) -> QpSolverResult:
        """Store copies of the QP, then solve it with the engine's ``solve_daqp``."""
        store.append(Qp(scene, H.copy(), f.copy(), A.copy(), lower.copy(),
                        x_lower.copy(), x_upper.copy()))
        return solve_daqp(H, f, A, lower, x_lower, x_upper)

    return solve


def load_scenario(name: str, quasi_dynamic: bool, time_step: float) -> Scenario:
    """Return config/<name>.yaml with ``quasi_dynamic`` and ``time_step`` overridden."""
    path = CONFIG_DIR / f'{name}.yaml'
    data = yaml.safe_load(path.read_text())
    data.update(quasi_dynamic=quasi_dynamic, time_step=time_step)
    return Scenario.from_dict(data, base_dir=CONFIG_DIR, source=str(path))


def run_schedule(sim: QuasistaticSimulator, robot: str, schedule, steps_per_entry: int) -> int:
    """Step through the schedule (each entry's steps scaled by ``steps_per_entry``)."""
    q, q_ref, failed = sim.default_positions(), None, 0
    for v_cmd, steps in schedule:
        for _ in range(steps * steps_per_entry):
            result = sim.step(sim.initial_state(q, q_ref=q_ref), {robot: np.array(v_cmd)})
            failed += not result.success
            q, q_ref = result.q_next, result.state_next.q_ref
    return failed


def record_qps() -> list[Qp]:
    """Run every scene, mode and time step with the recorder in place; return the QPs."""
    qps: list[Qp] = []
    for name, (robot, schedule) in SCENES.items():
        for h in (SCENE_TIME_STEP, SMALL_TIME_STEP):
            for quasi_dynamic in (False, True):
                label = f'{name}/{"quasi_dynamic" if quasi_dynamic else "quasi_static"}/h={h:g}'
                sim = QuasistaticSimulator(load_scenario(name, quasi_dynamic, h))
                sim.formulation.solver = recorder(label, qps)
                failed = run_schedule(sim, robot, schedule, round(SCENE_TIME_STEP / h))
                if failed:
                    print(f'warning: {failed} failed steps in {label}')
    return qps


def size_stats(values: Sequence[int]) -> dict:
    """Return min, median and max of a list of sizes."""
    return {'min': int(np.min(values)), 'median': float(np.median(values)),
            'max': int(np.max(values))}


def qp_summary(qps: list[Qp]) -> dict:
    """Return the QP counts and sizes (n variables, m rows), per scene and in total."""
    def stats(group: list[Qp]) -> dict:
        return {'count': len(group), 'n': size_stats([len(q.f) for q in group]),
                'm': size_stats([len(q.lower) for q in group])}

    scenes = list(dict.fromkeys(q.scene for q in qps))
    return {'total': stats(qps),
            'scenes': {s: stats([q for q in qps if q.scene == s]) for s in scenes}}


# ----- solving and checking -------------------------------------------------------------
def timed_solve(solve: Callable, qp: Qp, repeats: int, budget: float = np.inf) -> Solve:
    """
    Solve ``qp`` up to ``repeats`` times; keep the last answer and the median time.

    Repeats stop once the solves of this QP have taken ``budget`` seconds, so
    one pathological QP (a solver running to its iteration limit) is timed once.
    """
    times: list[float] = []
    while len(times) < repeats and sum(times) < budget:
        args = qp.args()
        start = time.perf_counter()
        try:
            result = solve(*args)
        except Exception as err:    # a crash counts as a failure, not as the end of the run
            times.append(time.perf_counter() - start)
            answer = Solve(0.0, False, f'{type(err).__name__}: {err}')
            continue
        times.append(time.perf_counter() - start)
        answer = Solve(0.0, bool(result.ok), str(result.status), result.x, result.duals)
    answer.time = float(np.median(times))
    return answer


@contextlib.contextmanager
def quiet_stdout() -> Iterator[None]:
    """Send file descriptor 1 to /dev/null (OSQP's C code prints a line per polish)."""
    sys.stdout.flush()
    saved = os.dup(1)
    with open(os.devnull, 'w') as devnull:
        os.dup2(devnull.fileno(), 1)
    try:
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def solve_all(qps: list[Qp], repeats: int, budget: float) -> dict[str, list[Solve]]:
    """Return every solver's answers to every QP (after one warm-up solve each)."""
    answers = {}
    for name, solve in SOLVERS.items():
        start = time.perf_counter()
        with quiet_stdout():
            timed_solve(solve, qps[0], 1)       # imports and first-call set-up
            answers[name] = [timed_solve(solve, qp, repeats, budget) for qp in qps]
        print(f'{name}: {len(qps)} QPs in {time.perf_counter() - start:.1f} s', flush=True)
    return answers


def objective(qp: Qp, x: np.ndarray) -> float:
    """Return 1/2 x'Hx + f'x."""
    return float(0.5 * x @ qp.H @ x + qp.f @ x)


def violation(qp: Qp, x: np.ndarray) -> float:
    """Return the largest violation of A x >= lower and the finite bounds (0 if none)."""
    parts = [qp.lower - qp.A @ x, qp.x_lower - x, x - qp.x_upper]
    finite = [np.isfinite(qp.lower), np.isfinite(qp.x_lower), np.isfinite(qp.x_upper)]
    return max([0.0] + [float(np.max(p[k], initial=0.0)) for p, k in zip(parts, finite)])


def bounds_inactive(qp: Qp, x: np.ndarray) -> bool:
    """Return True if no finite bound is within BOUND_ACTIVE_TOL of x."""
    slack = np.concatenate([x - qp.x_lower, qp.x_upper - x])
    return bool(np.all(slack[np.isfinite(slack)] > BOUND_ACTIVE_TOL))


def stationarity(qp: Qp, x: np.ndarray, duals: np.ndarray, sign: float = 1.0) -> float:
    """Return ||H x + f - sign A^T duals||_inf."""
    return float(np.max(np.abs(qp.H @ x + qp.f - sign * qp.A.T @ duals), initial=0.0))


def dual_scale(qp: Qp, x: np.ndarray, duals: np.ndarray) -> float:
    """Return the s minimising ||H x + f - s A^T duals|| (1 for the documented convention)."""
    g, r = qp.A.T @ duals, qp.H @ x + qp.f
    return float(g @ r / (g @ g)) if g @ g > 0 else float('nan')


def reference_solutions(qps: list[Qp], answers: dict[str, list[Solve]]) -> list:
    """Per QP, return (best objective, its x) over feasible answers (or any ok answer)."""
    refs = []
    for i, qp in enumerate(qps):
        ok = [a[i] for a in answers.values() if a[i].ok]
        feasible = [a for a in ok if violation(qp, a.x) <= FEASIBILITY_TOL] or ok
        best = min(feasible, key=lambda a: objective(qp, a.x), default=None)
        refs.append((objective(qp, best.x), best.x) if best else (np.nan, None))
    return refs


def solver_row(name: str, qps: list[Qp], solves: list[Solve], refs: list) -> dict:
    """Return the table row of one solver (times in microseconds)."""
    times = np.array([s.time for s in solves]) * 1e6
    ok = [(qp, s, ref) for qp, s, ref in zip(qps, solves, refs) if s.ok]
    gaps = [(objective(qp, s.x) - best) / max(1.0, abs(best)) for qp, s, (best, _) in ok]
    inactive = [(qp, s) for qp, s, (_, x_ref) in ok if bounds_inactive(qp, x_ref)]
    return {'backend': name, 'median_us': float(np.median(times)),
            'p90_us': float(np.percentile(times, 90)),
            'failures': sum(not s.ok for s in solves),
            'max_violation': max((violation(qp, s.x) for qp, s, _ in ok), default=np.nan),
            'max_objective_gap': max(gaps, default=np.nan),
            'max_stationarity_residual': max(
                (stationarity(qp, s.x, s.duals) for qp, s in inactive), default=np.nan)}


def dual_check(qps: list[Qp], solves: list[Solve], refs: list) -> dict:
    """Return the sign/scale diagnostics of one solver's duals on bound-inactive QPs."""
    inactive = [(qp, s) for qp, s, (_, x_ref) in zip(qps, solves, refs)
                if s.ok and bounds_inactive(qp, x_ref)]
    scales = [dual_scale(qp, s.x, s.duals) for qp, s in inactive]
    return {'qps': len(inactive),
            'median_fitted_scale': float(np.nanmedian(scales)) if scales else np.nan,
            'max_residual_if_negated': max(
                (stationarity(qp, s.x, s.duals, -1.0) for qp, s in inactive), default=np.nan),
            'min_dual': min((float(np.min(s.duals, initial=0.0)) for _, s in inactive),
                            default=np.nan),
            'failure_statuses': sorted({s.status for s in solves if not s.ok})}


def recommend(rows: list[dict]) -> Optional[str]:
    """Return the fastest solver with no failures, violation and gap below the tolerance."""
    good = [r for r in rows if r['failures'] == 0 and r['max_violation'] < FEASIBILITY_TOL
            and r['max_objective_gap'] < FEASIBILITY_TOL]
    return min(good, key=lambda r: r['median_us'])['backend'] if good else None


# ----- output ----------------------------------------------------------------------------
def machine_info() -> dict:
    """Return platform and package versions."""
    versions = {}
    for package in PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    return {'platform': platform.platform(), 'machine': platform.machine(),
            'processor': platform.processor(), 'cpu_count': os.cpu_count(),
            'python': platform.python_version(), 'packages': versions}


def print_qps(summary: dict) -> None:
    """Print the QP counts and sizes per scene."""
    print(f'{"scene":<36} {"QPs":>5}  {"n min/med/max":>15}  {"m min/med/max":>15}')
    for scene, s in list(summary['scenes'].items()) + [('total', summary['total'])]:
        n, m = s['n'], s['m']
        print(f'{scene:<36} {s["count"]:>5}  {n["min"]:>4}/{n["median"]:>4g}/{n["max"]:>4}'
              f'  {m["min"]:>4}/{m["median"]:>4g}/{m["max"]:>4}')


def print_table(rows: list[dict]) -> None:
    """Print the per-solver table; the engine's solver is marked with '*'."""
    width = max(len(r['backend']) for r in rows) + 1
    print(f'{"solver":<{width}} {"median us":>10} {"p90 us":>10} {"failures":>8} '
          f'{"max viol":>10} {"max obj gap":>11} {"max stat res":>12}')
    for r in rows:
        name = r['backend'] + ('*' if r['backend'] == ENGINE else '')
        print(f'{name:<{width}} {r["median_us"]:>10.1f} {r["p90_us"]:>10.1f} {r["failures"]:>8} '
              f'{r["max_violation"]:>10.2e} {r["max_objective_gap"]:>11.2e} '
              f'{r["max_stationarity_residual"]:>12.2e}')


def print_dual_checks(checks: dict[str, dict]) -> None:
    """Print the dual diagnostics and flag solvers whose duals break the convention."""
    print('\nduals on bound-inactive QPs (convention: H x + f = A^T duals, duals >= 0)')
    width = max(map(len, checks))
    for name, c in checks.items():
        flag = '' if abs(c['median_fitted_scale'] - 1.0) < 1e-3 else \
            '  <-- WRONG SIGN' if abs(c['median_fitted_scale'] + 1.0) < 1e-3 else \
            '  <-- WRONG SCALE'
        print(f'{name:<{width}} QPs {c["qps"]:>4}  fitted scale {c["median_fitted_scale"]:+.6f}  '
              f'residual if negated {c["max_residual_if_negated"]:.2e}  '
              f'min dual {c["min_dual"]:+.2e}{flag}')
        if c['failure_statuses']:
            print(f'{"":<{width}} failure statuses: {c["failure_statuses"]}')


def plot(answers: dict[str, list[Solve]], path: Path) -> None:
    """Write a log-scale box plot of the per-QP solve times of every solver."""
    import matplotlib
    matplotlib.use('Agg')
    from matplotlib import pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4.5))
    names = list(answers)
    ax.boxplot([[s.time * 1e6 for s in answers[n]] for n in names], whis=(5, 95))
    ax.set_xticks(range(1, len(names) + 1), labels=[n.replace(' (', '\n(') for n in names],
                  fontsize=8)
    ax.set_yscale('log')
    ax.set_ylabel('solve time per QP [µs] (median of repeats)')
    ax.set_title(f'{len(answers[names[0]])} step QPs from finger_push and two_pads_lift')
    ax.grid(True, which='both', axis='y', alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_json(path: Path, summary: dict, rows: list[dict], checks: dict, best) -> None:
    """Write the results as JSON (NaN written as null)."""
    def clean(value):
        if isinstance(value, float) and not np.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    data = {'machine': machine_info(), 'qps': summary, 'rows': rows,
            'default_backend': ENGINE, 'recommended_backend': best,
            'dual_checks': checks}
    path.write_text(json.dumps(clean(data), indent=2) + '\n')


def parse_args() -> argparse.Namespace:
    """Return the command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument('--json', type=Path, default=REPO_ROOT / 'out' / 'qp_solvers.json')
    parser.add_argument('--png', type=Path, default=REPO_ROOT / 'out' / 'qp_solvers.png')
    parser.add_argument('--repeats', type=int, default=5, help='solves per QP and solver')
    parser.add_argument('--budget', type=float, default=1.0,
                        help='no further repeats of a QP once its solves took this many s')
    return parser.parse_args()


def main() -> None:
    """Record the QPs, solve them with every solver, print and write the results."""
    args = parse_args()
    qps = record_qps()
    summary = qp_summary(qps)
    print_qps(summary)
    answers = solve_all(qps, args.repeats, args.budget)
    refs = reference_solutions(qps, answers)
    rows = [solver_row(name, qps, a, refs) for name, a in answers.items()]
    checks = {name: dual_check(qps, a, refs) for name, a in answers.items()}
    best = recommend(rows)
    print()
    print_table(rows)
    print_dual_checks(checks)
    print(f'\nengine solver: {ENGINE}; recommended (fastest with no failures, '
          f'violation and gap < {FEASIBILITY_TOL:g}): {best}')
    for path in (args.json, args.png):
        path.parent.mkdir(parents=True, exist_ok=True)
    write_json(args.json, summary, rows, checks, best)
    plot(answers, args.png)
    print(f'wrote {args.json} and {args.png}')


if __name__ == '__main__':
    main()
