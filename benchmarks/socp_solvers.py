"""
The step's island conic problems: our interior-point method against Clarabel and SCS.

Since issue 30 each step solves, per contact island, the conic problem of
``formulations/conic_step.py``: over the island's velocities v, each
contact's friction epigraph t_i (where its lagged friction bound
w_i = mu_i lambda_i^- is positive) and a penetrating contact's slack sigma_i,

    minimise    1/2 v^T Q v + b^T v + sum_i w_i t_i + sum_i p sigma_i
    subject to  phi_i / h + J_n,i v + sigma_i >= 0,  sigma_i >= 0 (only where phi_i < 0)
                (t_i, J_t,i v) in SOC_3   (round cone)  or  t_i + J_f,ij v >= 0 (pyramid)
                lower <= v <= upper (where finite).

The problems are recorded, not synthesised: ``formulations.qp.solve_island``
is wrapped while scripted runs of config/finger_push.yaml (the finger at
[0.1, 0.03, 0] for 20 steps) and config/two_pads_lift.yaml (the pads at
[0, 0.2, -0.2] x 3, [0.05, 0, 0] x 6, [0, 0, 0] x 3) step under both
cones (``qp: {friction_cone: exact | pyramid}``), from sim.initial_state()
(whose zero-command solves, which settle the first friction bounds, are
recorded too, as step "settle").  Every recorded problem is then solved by

* ``ours``: ``conic_step.solve_island`` (``conic_ipm.py``'s numba
  interior-point method and ``conic_polish.py``'s exact polish), what the
  step calls;
* ``ours, no polish``: the same with ``conic_step.polish`` switched off
  (the interior-point method's own solution; the dense rows the polish
  takes are still built, about 0.1 ms);
* ``clarabel``: the same problem through Clarabel's own Python API
  (default settings, tolerances 1e-8, but ``verbose=False`` and
  ``max_threads=1``);
* ``clarabel 1e-12``: the same with its feasibility and gap tolerances
  1e-12, close to our method's 1e-13 (``conic_ipm.py``), and 400 iterations
  at most: the reference our solution is checked against;
* ``drake clarabel`` and ``drake scs``: the same problem through Drake's
  MathematicalProgram with its bundled ClarabelSolver and ScsSolver
  (their default options).

Each solve is repeated ``--repeats`` times (the solvers take turns to go
first on a problem); its time is the median thread CPU time
(``time.thread_time``), set-up included (building the matrices or the
MathematicalProgram).  Per solver: the median and 90th percentile of those
times over the problems, and the median per cone; the median of the
solver's own time ("core": our numba kernel's thread CPU time, without the
set-up and the polish; the solve time Clarabel and SCS report); the
failures (no solution); the solutions the solver itself calls inaccurate
(Clarabel's AlmostSolved, SCS's "solved inaccurate"; they count as
solutions); the largest difference of v from ours,
max over problems of ||v - v_ours||_inf / (1 + ||v_ours||_inf), and the same
from the ``clarabel 1e-12`` reference (where it solved); and the largest
violation of the normal rows, max_i -(phi_i / h + J_n,i v + sigma_i) [m/s]
(sigma_i = 0 where phi_i >= 0, the solver's own sigma_i elsewhere; and
-sigma_i).

    .venv/bin/python benchmarks/socp_solvers.py [--repeats 5]
        [--json benchmarks/results/socp_solvers.json]
        [--png benchmarks/results/socp_solvers.png]
"""

import argparse
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
import time
import logging
from typing import Callable, Iterator, Optional

import clarabel
import matplotlib
import numpy as np
from pydrake.solvers import ClarabelSolver, MathematicalProgram, ScsSolver
from scipy import sparse

from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.formulations import conic_ipm, conic_step
import quasistatic_drake.formulations.qp as qp_module
from quasistatic_drake.formulations.conic_step import IslandData, PYRAMID, solve_island
from quasistatic_drake.paths import package_share_dir
from report import machine, write_results

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the Agg backend)

RUNS = {   # scene: (config file, robot, [(command, steps), ...])
    'finger_push': ('finger_push.yaml', 'finger', [([0.1, 0.03, 0.0], 20)]),
    'two_pads_lift': ('two_pads_lift.yaml', 'pads',
                      [([0.0, 0.2, -0.2], 3), ([0.05, 0.0, 0.0], 6), ([0.0, 0.0, 0.0], 3)]),
}
CONES = ('exact', 'pyramid')
AGREE = 1e-6          # a v difference above this is listed, problem by problem
REFERENCE = 'clarabel 1e-12'


@dataclass(frozen=True)
class Recorded:
    """One island problem a scripted run solved, and where it came from."""

    scene: str
    cone: str
    step: str         # the step's index, or 'settle' (initial_state's zero-command solves)
    solve: int        # its index among the problems of that step (islands, re-linearisations)
    data: IslandData


@dataclass(frozen=True)
class Answer:
    """A solver's v and sigma of one problem (v None: it failed), its status, and more."""

    v: Optional[np.ndarray]
    sigma: Optional[np.ndarray]
    status: str
    inaccurate: bool = False     # a solution the solver itself calls inaccurate
    core: float = np.nan         # [s] the solver's own time (our kernel's; Clarabel's, SCS's)


# ----- recording --------------------------------------------------------------------------
def simulator(config: str, cone: str) -> QuasistaticSimulator:
    """Return the scene of ``config`` under the given friction cone."""
    scenario = Scenario.from_yaml(package_share_dir() / 'config' / config)
    return QuasistaticSimulator(scenario.with_formulation('qp', friction_cone=cone))


def record() -> list:
    """Return the island problems (Recorded) the scripted runs solve under both cones."""
    recorded, where = [], {'step': 'settle', 'scene': '', 'cone': ''}

    def recording(data: IslandData):
        solve = sum(1 for r in recorded if (r.scene, r.cone, r.step)
                    == (where['scene'], where['cone'], where['step']))
        recorded.append(Recorded(where['scene'], where['cone'], where['step'], solve, data))
        return solve_island(data)

    for scene, (config, robot, schedule) in RUNS.items():
        for cone in CONES:
            sim = simulator(config, cone)          # its warm-up step is not recorded
            where.update(scene=scene, cone=cone, step='settle')
            qp_module.solve_island = recording
            try:
                state, k = sim.initial_state(), 0
                for command, steps in schedule:
                    for _ in range(steps):
                        where['step'] = str(k)
                        result = sim.step(state, {robot: np.array(command)})
                        if not result.success:
                            raise RuntimeError(f'{scene} ({cone}) step {k}: {result.status}')
                        state, k = result.state_next, k + 1
            finally:
                qp_module.solve_island = solve_island
    return recorded


# ----- the problem's variables and the solvers ----------------------------------------------
def variables(data: IslandData) -> tuple[np.ndarray, np.ndarray]:
    """Return the contacts that have a friction epigraph t_i and those with a slack sigma_i."""
    return np.flatnonzero(data.friction > 0.0), np.flatnonzero(data.phi_h < 0.0)


def solve_ours(data: IslandData) -> Answer:
    """Solve with the step's own interior-point method and polish; time its numba kernel."""
    kernel, spent = conic_ipm.solve_contact_qp, []

    def timed_kernel(*args):
        start = time.thread_time()
        out = kernel(*args)
        spent.append(time.thread_time() - start)
        return out
    conic_ipm.solve_contact_qp = timed_kernel
    try:
        solution = solve_island(data)
    finally:
        conic_ipm.solve_contact_qp = kernel
    if solution.v is None:
        return Answer(None, None, solution.status, core=sum(spent))
    return Answer(solution.v, solution.slack[data.phi_h < 0.0], solution.status,
                  core=sum(spent))


@contextmanager
def no_polish() -> Iterator[None]:
    """Switch ``conic_step``'s polish off: the interior-point method's solution is kept."""
    polish = conic_step.polish
    conic_step.polish = lambda *args: None
    try:
        yield
    finally:
        conic_step.polish = polish


def solve_unpolished(data: IslandData) -> Answer:
    """Solve with the step's own interior-point method, without the polish."""
    with no_polish():
        return solve_ours(data)


def clarabel_problem(data: IslandData) -> tuple:
    """
    Return (P, q, A, b, cones) of the problem in Clarabel's form A x + s = b, s in cones.

    x = [v, t (contacts with friction), sigma (penetrating contacts)]; the rows:
    the normal rows, sigma >= 0, the pyramid's rows, v's finite bounds (all
    nonnegative), then each round cone's (t_i, J_t,i v) in SOC_3.
    """
    n, k = len(data.b), len(data.phi_h)
    fric, slack = variables(data)
    k_t, k_s = len(fric), len(slack)
    S = np.zeros((k, k_s))
    S[slack, np.arange(k_s)] = 1.0
    up, low = np.flatnonzero(np.isfinite(data.upper)), np.flatnonzero(np.isfinite(data.lower))
    blocks = [   # (the rows of v, of t, of sigma; b)
        (-data.J_n, np.zeros((k, k_t)), -S, data.phi_h),
        (np.zeros((k_s, n)), np.zeros((k_s, k_t)), -np.eye(k_s), np.zeros(k_s)),
        (np.eye(n)[up], np.zeros((len(up), k_t)), np.zeros((len(up), k_s)), data.upper[up]),
        (-np.eye(n)[low], np.zeros((len(low), k_t)), np.zeros((len(low), k_s)),
         -data.lower[low])]
    if data.cone == PYRAMID:                           # t_i + J_f,ij v >= 0
        n_d = data.J_f.shape[1]
        blocks.append((-data.J_f[fric].reshape(-1, n), -np.kron(np.eye(k_t), np.ones((n_d, 1))),
                       np.zeros((k_t * n_d, k_s)), np.zeros(k_t * n_d)))
    cones = [clarabel.NonnegativeConeT(sum(len(block[3]) for block in blocks))]
    if data.cone != PYRAMID:                           # (t_i, J_t,i v) in SOC_3
        T = np.zeros((3 * k_t, k_t))
        T[3 * np.arange(k_t), np.arange(k_t)] = -1.0
        V = -np.concatenate([np.zeros((k_t, 1, n)), data.J_t[fric]], axis=1).reshape(-1, n)
        blocks.append((V, T, np.zeros((3 * k_t, k_s)), np.zeros(3 * k_t)))
        cones += [clarabel.SecondOrderConeT(3)] * k_t
    A = np.vstack([np.hstack(block[:3]) for block in blocks])
    P = np.zeros((len(A[0]), len(A[0])))
    P[:n, :n] = np.triu(data.Q)
    q = np.concatenate([data.b, data.friction[fric], np.full(k_s, data.penalty)])
    return (sparse.csc_matrix(P), q, sparse.csc_matrix(A),
            np.concatenate([block[3] for block in blocks]), cones)


def solve_clarabel(data: IslandData, tolerance: Optional[float] = None) -> Answer:
    """Solve through Clarabel's own Python API (its default tolerances, or ``tolerance``)."""
    P, q, A, b, cones = clarabel_problem(data)
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.max_threads = 1
    if tolerance is not None:
        settings.tol_feas = settings.tol_gap_abs = settings.tol_gap_rel = tolerance
        settings.max_iter = 400
    solution = clarabel.DefaultSolver(P, q, A, b, cones, settings).solve()
    status = str(solution.status)
    if status not in ('Solved', 'AlmostSolved'):
        return Answer(None, None, status)
    x, n = np.array(solution.x), len(data.b)
    return Answer(x[:n], x[n + len(variables(data)[0]):], status, status == 'AlmostSolved',
                  solution.solve_time)


def solve_drake(solver, data: IslandData) -> Answer:
    """Solve through Drake's MathematicalProgram with ``solver``."""
    n = len(data.b)
    fric, slack = variables(data)
    prog = MathematicalProgram()
    v = prog.NewContinuousVariables(n, 'v')
    t = prog.NewContinuousVariables(len(fric), 't')
    sigma = prog.NewContinuousVariables(len(slack), 'sigma')
    prog.AddQuadraticCost(data.Q, data.b, v, is_convex=True)
    if len(fric):
        prog.AddLinearCost(data.friction[fric], 0.0, t)
    if len(slack):
        prog.AddLinearCost(np.full(len(slack), data.penalty), 0.0, sigma)
        prog.AddBoundingBoxConstraint(0.0, np.inf, sigma)
    if len(data.phi_h):
        E = np.zeros((len(data.phi_h), len(slack)))
        E[slack, np.arange(len(slack))] = 1.0
        prog.AddLinearConstraint(np.hstack([data.J_n, E]), -data.phi_h,
                                 np.full(len(data.phi_h), np.inf), np.concatenate([v, sigma]))
    for i, t_i in zip(fric, t):
        tv = np.concatenate([[t_i], v])
        if data.cone == PYRAMID:
            A = np.hstack([np.ones((data.J_f.shape[1], 1)), data.J_f[i]])
            prog.AddLinearConstraint(A, np.zeros(len(A)), np.full(len(A), np.inf), tv)
        else:
            A = np.zeros((3, n + 1))
            A[0, 0] = 1.0
            A[1:, 1:] = data.J_t[i]
            prog.AddLorentzConeConstraint(A, np.zeros(3), tv)
    finite = np.isfinite(data.lower) | np.isfinite(data.upper)
    if finite.any():
        prog.AddBoundingBoxConstraint(data.lower[finite], data.upper[finite], v[finite])
    result = solver.Solve(prog)
    status = str(result.get_solution_result()).split('.')[-1]
    if not result.is_success():
        return Answer(None, None, status)
    details = result.get_solver_details()
    if isinstance(solver, ScsSolver):         # SCS's times are in ms
        inaccurate = details.scs_status == SCS_SOLVED_INACCURATE
        core = 1e-3 * (details.scs_setup_time + details.scs_solve_time)
    else:
        inaccurate, core = details.status == 'AlmostSolved', details.solve_time
    return Answer(result.GetSolution(v), result.GetSolution(sigma), status, inaccurate, core)


SCS_SOLVED_INACCURATE = 2
SOLVERS: dict = {
    'ours': solve_ours,
    'ours, no polish': solve_unpolished,
    'clarabel': solve_clarabel,
    REFERENCE: lambda data: solve_clarabel(data, 1e-12),
    'drake clarabel': lambda data: solve_drake(ClarabelSolver(), data),
    'drake scs': lambda data: solve_drake(ScsSolver(), data),
}


# ----- the measures -------------------------------------------------------------------------
def violation(data: IslandData, answer: Answer) -> float:
    """Return the largest violation of the normal rows, and of sigma >= 0 [m/s] (0: none)."""
    sigma = np.zeros(len(data.phi_h))
    sigma[variables(data)[1]] = answer.sigma
    rows = data.phi_h + data.J_n @ answer.v + sigma
    return float(max(np.max(-rows, initial=0.0), np.max(-sigma, initial=0.0)))


def timed(solve: Callable, data: IslandData, repeats: int) -> tuple[float, float, Answer]:
    """Return the median thread CPU and wall time [s] of ``repeats`` solves, and the answer."""
    cpu, wall = [], []
    for _ in range(repeats):
        start_cpu, start_wall = time.thread_time(), time.perf_counter()
        answer = solve(data)
        cpu.append(time.thread_time() - start_cpu)
        wall.append(time.perf_counter() - start_wall)
    return float(np.median(cpu)), float(np.median(wall)), answer


def where(problem: Recorded) -> str:
    """Return a problem's label: scene, cone, step and island."""
    return f'{problem.scene}/{problem.cone} step {problem.step} solve {problem.solve}'


def difference(v: np.ndarray, reference: Optional[np.ndarray]) -> float:
    """Return ||v - reference||_inf / (1 + ||reference||_inf) (NaN without a reference)."""
    if reference is None:
        return np.nan
    return float(np.max(np.abs(v - reference), initial=0.0)
                 / (1.0 + np.max(np.abs(reference), initial=0.0)))


def largest(values: list, recorded: list) -> tuple[Optional[float], Optional[str]]:
    """Return the largest of ``values`` (NaN: none) and the problem it belongs to."""
    values = np.array(values, dtype=float)
    if np.all(np.isnan(values)):
        return None, None
    k = int(np.nanargmax(values))
    return float(values[k]), where(recorded[k])


def measure(recorded: list, repeats: int) -> dict:
    """Solve every recorded problem with every solver; return the per-solver figures."""
    for solve in SOLVERS.values():                      # load and compile: not timed
        solve(recorded[0].data)
    per = {name: {'cpu': [], 'wall': [], 'answers': []} for name in SOLVERS}
    names = list(SOLVERS)
    for k, problem in enumerate(recorded):
        turn = k % len(names)                           # each solver first in turn (caches)
        for name in names[turn:] + names[:turn]:
            cpu, wall, answer = timed(SOLVERS[name], problem.data, repeats)
            per[name]['cpu'].append(cpu)
            per[name]['wall'].append(wall)
            per[name]['answers'].append(answer)
    ours, reference = per['ours']['answers'], per[REFERENCE]['answers']
    summary = {}
    for name in SOLVERS:
        from_ours, from_reference, violations, statuses = [], [], [], {}
        for problem, answer, mine, ref in zip(recorded, per[name]['answers'], ours, reference):
            if answer.v is None:
                statuses[answer.status] = statuses.get(answer.status, 0) + 1
                from_ours.append(np.nan)
                from_reference.append(np.nan)
                violations.append(np.nan)
                continue
            from_ours.append(difference(answer.v, mine.v))
            from_reference.append(difference(answer.v, ref.v))
            violations.append(violation(problem.data, answer))
        cpu = np.array(per[name]['cpu'])
        max_dv, max_dv_at = largest(from_ours, recorded)
        max_violation, max_violation_at = largest(violations, recorded)
        summary[name] = {
            'median_cpu_ms': 1e3 * float(np.median(cpu)),
            'p90_cpu_ms': 1e3 * float(np.percentile(cpu, 90)),
            'median_wall_ms': 1e3 * float(np.median(per[name]['wall'])),
            'median_core_ms': 1e3 * float(np.median([a.core for a in per[name]['answers']])),
            'median_cpu_ms_by_cone': {cone: 1e3 * float(np.median(
                [c for c, p in zip(cpu, recorded) if p.cone == cone])) for cone in CONES},
            'failures': sum(statuses.values()), 'failure_statuses': statuses,
            'inaccurate': sum(a.inaccurate for a in per[name]['answers']),
            'max_v_difference': max_dv, 'max_v_difference_at': max_dv_at,
            'max_v_difference_from_reference': largest(from_reference, recorded)[0],
            'max_normal_violation': max_violation, 'max_normal_violation_at': max_violation_at,
            'differing_above_1e-6': sorted(
                ({'problem': where(p), 'difference': d} for p, d in zip(recorded, from_ours)
                 if d > AGREE), key=lambda d: -d['difference']),
            'cpu_ms_per_problem': (1e3 * cpu).tolist(),
            'v_difference_per_problem': [None if np.isnan(d) else d for d in from_ours]}
    return summary


# ----- output -------------------------------------------------------------------------------
def figure(value: Optional[float]) -> str:
    """Return a figure in the table's exponent form ('-' for none)."""
    return '-' if value is None else f'{value:.1e}'


def print_table(recorded: list, summary: dict) -> None:
    """Print the problems' sizes and the per-solver figures."""
    sizes = [(len(p.data.b), len(p.data.phi_h)) for p in recorded]
    print(f'{len(recorded)} island problems recorded from {", ".join(RUNS)} under '
          f'{" and ".join(CONES)} cones: {min(s[0] for s in sizes)}-{max(s[0] for s in sizes)} '
          f'velocities, {min(s[1] for s in sizes)}-{max(s[1] for s in sizes)} contacts, '
          f'{sum(bool((p.data.phi_h < 0).any()) for p in recorded)} with a penetration')
    print(f"{'solver':16}{'median':>8}{'p90':>8}{'exact':>8}{'pyramid':>8}{'core':>7}"
          f"{'failed':>7}{'inacc.':>7}{'dv ours':>9}{'dv ref':>9}{'normal viol':>12}")
    for name, row in summary.items():
        by_cone = row['median_cpu_ms_by_cone']
        print(f"{name:16}{row['median_cpu_ms']:8.3f}{row['p90_cpu_ms']:8.3f}"
              f"{by_cone['exact']:8.3f}{by_cone['pyramid']:8.3f}{row['median_core_ms']:7.3f}"
              f"{row['failures']:7d}{row['inaccurate']:7d}{figure(row['max_v_difference']):>9}"
              f"{figure(row['max_v_difference_from_reference']):>9}"
              f"{figure(row['max_normal_violation']):>12}")
    print(f'(thread CPU per solve [ms], set-up included: median, 90th percentile, median per '
          "cone; core: the median of the solver's own time (our numba kernel's thread CPU, "
          "without the set-up and the polish; Clarabel's and SCS's reported times); dv: the "
          f'largest ||v - v_ours||_inf / (1 + ||v_ours||_inf), and the same from '
          f'{REFERENCE}; normal viol: the largest violation of a normal row [m/s])')
    for name, row in summary.items():
        if row['failure_statuses']:
            print(f'{name}: failures {row["failure_statuses"]}')
        if row['max_normal_violation']:
            print(f"{name}: largest normal-row violation {row['max_normal_violation']:.1e} m/s "
                  f"at {row['max_normal_violation_at']}")
        listed = row['differing_above_1e-6']
        if listed:
            worst = ', '.join(f"{d['problem']} ({d['difference']:.1e})" for d in listed[:3])
            print(f'{name}: {len(listed)} problems differ from ours by more than {AGREE:g}; '
                  f'largest: {worst}')


def plot(summary: dict, png: Path) -> None:
    """Draw each solver's distribution of solve times and its v difference per problem."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for k, (name, row) in enumerate(summary.items()):
        times = np.sort(row['cpu_ms_per_problem'])
        left.step(times, np.arange(1, len(times) + 1) / len(times), where='post', label=name,
                  color=f'C{k}')
        if name != 'ours':
            difference = np.array(row['v_difference_per_problem'], dtype=float)
            right.semilogy(np.maximum(difference, 1e-16), 'o+xs^'[k % 5], mfc='none',
                           color=f'C{k}', label=name)
    left.set_xscale('log')
    left.set_xlabel('thread CPU per solve, set-up included [ms]')
    left.set_ylabel('fraction of the island problems')
    left.legend(fontsize=8)
    right.axhline(AGREE, color='grey', linestyle=':')
    right.set_xlabel('island problem (recorded order; 0 at 1e-16)')
    right.set_ylabel('||v - v_ours||_inf / (1 + ||v_ours||_inf)')
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=100)


def main() -> None:
    """Record the island problems, solve them with every solver, print, write JSON and a plot."""
    parser = argparse.ArgumentParser(description=__doc__.strip().split('\n')[0])
    parser.add_argument('--repeats', type=int, default=5)
    parser.add_argument('--json', type=Path,
                        default=Path('benchmarks/results/socp_solvers.json'))
    parser.add_argument('--png', type=Path, default=Path('benchmarks/results/socp_solvers.png'))
    args = parser.parse_args()
    logging.getLogger('drake').setLevel(logging.WARNING)    # SCS's 'solved inaccurate' notes
    recorded = record()
    summary = measure(recorded, args.repeats)
    print_table(recorded, summary)
    problems = [{'problem': where(p), 'velocities': len(p.data.b),
                 'contacts': len(p.data.phi_h)} for p in recorded]
    write_results({'problems': problems, 'solvers': summary, 'repeats': args.repeats,
                   'runs': RUNS, 'machine': machine()}, args.json, args.png,
                  lambda png: plot(summary, png))


if __name__ == '__main__':
    main()
