"""
Measure LCP solvers on the step LCPs of Halm & Posa's Sec. 6, recorded from real runs.

The LCPs are recorded, not synthesised: ``solve_lcp`` of
``apps/paper_jamming.py`` (the hand-built runs of ``quasistatic-drake
paper-jamming``) is wrapped while the three pushes and the wall run their
gain sweeps (every 4th gain, and c = 0: perfect velocity control, whose
jam has no solution), the peg-in-hole runs at c = 0.01 and Fig. 2's square
at c = 0 and c > 0.  Trivial LCPs (w >= 0, solved by z = 0) are left out;
of the rest, at most ``--max-lcps`` are kept, evenly spaced, with every
LCP that has no solution.

Every kept LCP is solved by each solver of ``SOLVERS`` ``--repeats``
times (the median wall time counts):

* ``lemke``: the engine's (``formulations/lcp_solvers.py``: lexicographic
  Lemke, polishing, the regularisation ladder, and a Gurobi certificate
  when all that fails);
* ``gurobi`` and ``scip``: the homogenised MIP that finds a solution or
  proves that none exists;
* ``drake_moby``: pydrake's ``MobyLcpSolver`` through MathematicalProgram,
  the only LCP solver in the Drake wheel that does not abort the
  interpreter (``UnrevisedLemkeSolver`` aborts it when M is zero, which the
  c = 0 model makes, so it is not run).

The truth of an LCP: "solved" when any of the engine's backends returns a
z whose residual it checked, "no solution" when a MIP proves it.  Per
solver: the median and 90th percentile time; "wrong", the answers that are
false (a "solved" whose residual ||min(z, M z + w)||_inf exceeds 1e-9 or
whose z is negative, a "no solution" for a solvable LCP); "failed", the
LCPs it left undecided; "missed", the unsolvable LCPs it called solved;
and the largest residual of its "solved" answers.

    .venv/bin/python benchmarks/lcp_solvers.py [--max-lcps 400] [--repeats 3]
        [--json out/lcp_solvers.json] [--png out/lcp_solvers.png]
"""

import argparse
import contextlib
from pathlib import Path
import time
from typing import Callable, Iterator

import matplotlib
import numpy as np

from quasistatic_drake.apps import paper_jamming
from quasistatic_drake.formulations.lcp_solvers import lcp_residual, solve_lcp
from report import machine, write_results

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the Agg backend)

TOLERANCE = 1e-9


@contextlib.contextmanager
def recording() -> Iterator[list]:
    """Record every (M, w) paper_jamming solves; yield the list."""
    recorded = []
    original = paper_jamming.solve_lcp

    def wrapper(M, w, **kwargs):
        recorded.append((np.array(M), np.array(w)))
        return original(M, w, **kwargs)
    paper_jamming.solve_lcp = wrapper
    try:
        yield recorded
    finally:
        paper_jamming.solve_lcp = original


def record_lcps() -> list:
    """Run the quick sweeps, the peg and the square; return the non-trivial LCPs."""
    with recording() as recorded:
        for case in paper_jamming.PUSHES:
            paper_jamming.push_sweep(case, paper_jamming.QUICK_PUSH_N)
        paper_jamming.wall_sweep(paper_jamming.QUICK_WALL_N)
        paper_jamming.peg_in_hole()
        paper_jamming.square()
    return [(M, w) for M, w in recorded if np.any(w < 0.0)]


def truth(M, w) -> str:
    """
    Return "solved" if any backend finds a checked z, "no solution" if a MIP proves none.

    "undecided" if neither: no such LCP was recorded here.
    """
    answers = [solve_lcp(M, w, backend=b).status for b in ('lemke', 'gurobi', 'scip')]
    if 'solved' in answers:
        return 'solved'
    return 'no solution' if 'no solution' in answers[1:] else 'undecided'


def kept(lcps: list, limit: int) -> tuple[list, list]:
    """Return at most ``limit`` LCPs evenly spaced, with every one that has no solution."""
    truths = [truth(M, w) for M, w in lcps]
    unsolvable = [i for i, t in enumerate(truths) if t != 'solved']
    rest = [i for i, t in enumerate(truths) if t == 'solved']
    room = max(limit - len(unsolvable), 0)
    spaced = [rest[int(k)] for k in np.linspace(0, len(rest) - 1, min(room, len(rest)))]
    chosen = sorted(set(spaced) | set(unsolvable))
    return [lcps[i] for i in chosen], [truths[i] for i in chosen]


def engine(backend: str) -> Callable:
    """Return a solver (M, w) -> (status, z) running solve_lcp with ``backend``."""
    def solve(M, w):
        result = solve_lcp(M, w, backend=backend)
        return result.status, result.z
    return solve


def drake_moby(M, w):
    """Solve with pydrake's MobyLcpSolver; return its own status and z."""
    from pydrake.solvers import MathematicalProgram, MobyLcpSolver
    prog = MathematicalProgram()
    z = prog.NewContinuousVariables(len(w), 'z')
    prog.AddLinearComplementarityConstraint(M, w, z)
    result = MobyLcpSolver().Solve(prog)
    return ('solved' if result.is_success() else 'no solution'), result.GetSolution(z)


SOLVERS = {'lemke': engine('lemke'), 'gurobi': engine('gurobi'), 'scip': engine('scip'),
           'drake_moby': drake_moby}


def measure(lcps: list, truths: list, repeats: int) -> dict:
    """Solve every LCP with every solver; return the table's rows."""
    rows = {}
    for name, solver in SOLVERS.items():
        times, wrong, missed, failed, residuals = [], 0, 0, 0, []
        for (M, w), expected in zip(lcps, truths):
            spent = []
            for _ in range(repeats):
                start = time.perf_counter()
                status, z = solver(M, w)
                spent.append(time.perf_counter() - start)
            times.append(np.median(spent))
            if status == 'solved':
                residual = lcp_residual(M, w, z) if z is not None else np.inf
                residuals.append(residual)
                wrong += int(not residual <= TOLERANCE or np.any(z < -TOLERANCE))
                missed += int(expected == 'no solution')
            elif status == 'no solution':
                wrong += int(expected == 'solved')
            else:
                failed += 1
        ms = 1e3 * np.array(times)
        rows[name] = {'median_ms': float(np.median(ms)), 'p90_ms': float(np.percentile(ms, 90)),
                      'max_ms': float(ms.max()), 'wrong': wrong, 'failed': failed,
                      'missed_no_solution': missed,
                      'max_residual': float(max(residuals, default=0.0)),
                      'times_ms': ms.tolist()}
    return rows


def main() -> None:
    """Record, measure, print the table, write JSON and the plot."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--max-lcps', type=int, default=400)
    parser.add_argument('--repeats', type=int, default=3)
    parser.add_argument('--json', type=Path, default=Path('out/lcp_solvers.json'))
    parser.add_argument('--png', type=Path, default=Path('out/lcp_solvers.png'))
    args = parser.parse_args()
    recorded = record_lcps()
    lcps, truths = kept(recorded, args.max_lcps)
    sizes = np.array([len(w) for _, w in lcps])
    rows = measure(lcps, truths, args.repeats)
    print(f'{len(recorded)} non-trivial LCPs recorded, {len(lcps)} kept '
          f'({truths.count("no solution")} without a solution), {sizes.min()}-{sizes.max()} '
          'variables')
    print(f"{'solver':12}{'median ms':>11}{'p90 ms':>9}{'max ms':>9}{'wrong':>7}"
          f"{'failed':>8}{'missed':>8}{'max residual':>14}")
    for name, row in rows.items():
        print(f"{name:12}{row['median_ms']:11.3f}{row['p90_ms']:9.3f}{row['max_ms']:9.3f}"
              f"{row['wrong']:7d}{row['failed']:8d}{row['missed_no_solution']:8d}"
              f"{row['max_residual']:14.2e}")
    result = {'recorded': len(recorded), 'kept': len(lcps),
              'no_solution': truths.count('no solution'),
              'size': {'min': int(sizes.min()), 'median': float(np.median(sizes)),
                       'max': int(sizes.max())},
              'solvers': {k: {key: v for key, v in row.items() if key != 'times_ms'}
                          for k, row in rows.items()},
              'settings': {'max_lcps': args.max_lcps, 'repeats': args.repeats,
                           'tolerance': TOLERANCE},
              'machine': machine()}

    def draw(png: Path) -> None:
        """Draw the plot to png."""
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for name, row in rows.items():
            ax.scatter(sizes, row['times_ms'], s=8, label=f"{name} ({row['wrong']} wrong)")
        ax.set_yscale('log')
        ax.set_xlabel('LCP variables')
        ax.set_ylabel('solve time [ms]')
        ax.set_title("Recorded LCPs of Halm & Posa's Sec. 6")
        ax.legend()
        fig.tight_layout()
        fig.savefig(png, dpi=100)

    write_results(result, args.json, args.png, draw)


if __name__ == '__main__':
    main()
