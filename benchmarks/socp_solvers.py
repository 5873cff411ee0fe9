"""
Choose the solver of the exact-cone step (qp: {friction_cone: exact}) by measurement.

The SOCPs are recorded, not synthesised: ``exact_cone.solve_cones`` is
wrapped while scripted runs of the finger-push and two-pads-lift scenes
(config/) step under ``friction_cone: exact``.  Every recorded SOCP is then
solved by every candidate a few times: Clarabel through its own Python API
(what the engine calls), and Drake's MathematicalProgram with its bundled
Clarabel and SCS.  Per solver: the median and 90th-percentile wall time of a
solve (set-up included), failures, the largest cone violation
max_i (mu_i ||J_t,i v|| - (J_n,i v + phi_i / h)) [m/s], and the largest
objective gap to the best objective of that SOCP among the solutions that
violate the cones by at most 1e-8 m/s, relative to
max(|best|, 1e-6) (at rest the objective is ~1e-11).  Last, the cost
of a whole step, pyramid against exact cone, on the same runs.

    .venv/bin/python benchmarks/socp_solvers.py [--repeats 5]
        [--json out/socp_solvers.json] [--png out/socp_solvers.png]
"""

import argparse
from pathlib import Path
import time

import matplotlib
import numpy as np

from pydrake.solvers import ClarabelSolver, MathematicalProgram, ScsSolver

import quasistatic_drake.formulations.qp as qp_module
from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.formulations.exact_cone import solve_cones, tangent_jacobians
from quasistatic_drake.paths import package_share_dir
from report import machine, write_results

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the Agg backend)

RUNS = {   # scene: (config file, robot, [(command, steps), ...])
    'finger_push': ('finger_push.yaml', 'finger', [([0.1, 0.03, 0.0], 20)]),
    'two_pads_lift': ('two_pads_lift.yaml', 'pads',
                      [([0.0, 0.2, -0.2], 3), ([0.05, 0.0, 0.0], 6), ([0.0, 0.0, 0.0], 3)]),
}


def simulator(config: str, cone: str) -> QuasistaticSimulator:
    """Return the scene under the given friction cone (exact keeps Anitescu's lift)."""
    scenario = Scenario.from_yaml(package_share_dir() / 'config' / config)
    settings = {'friction_cone': cone, 'anitescu_lift': cone == 'exact'}
    return QuasistaticSimulator(scenario.with_formulation('qp', **settings))


def roll(sim, robot, schedule) -> list:
    """Run a schedule; return each step's wall time [s]."""
    q, q_ref, times = sim.default_positions(), None, []
    for command, steps in schedule:
        for _ in range(steps):
            start = time.perf_counter()
            result = sim.step(sim.initial_state(q, q_ref=q_ref), {robot: command})
            times.append(time.perf_counter() - start)
            assert result.success, result.status
            q, q_ref = result.q_next, result.state_next.q_ref
    return times


def record() -> list:
    """Return the SOCPs the exact-cone runs solve: (Q, b, contacts, h, v_lower, v_upper)."""
    recorded = []

    def recording(*args, **kwargs):
        recorded.append(args)
        return solve_cones(*args, **kwargs)
    qp_module.solve_cones = recording
    try:
        for config, robot, schedule in RUNS.values():
            roll(simulator(config, 'exact'), robot, schedule)
    finally:
        qp_module.solve_cones = solve_cones
    return recorded


def solve_drake(solver, Q, b, contacts, h, v_lower, v_upper):
    """Solve the SOCP through MathematicalProgram; return v (None on failure)."""
    prog = MathematicalProgram()
    v = prog.NewContinuousVariables(Q.shape[0])
    prog.AddQuadraticCost(Q, b, v, is_convex=True)
    J_t = tangent_jacobians(contacts)
    for i in range(contacts.n_c):
        gap = contacts.phi[i] / h
        if contacts.mu[i] > 0.0:
            A = np.vstack([contacts.J_n[i], contacts.mu[i] * J_t[i]])
            prog.AddLorentzConeConstraint(A, np.array([gap, 0.0, 0.0]), v)
        else:
            prog.AddLinearConstraint(contacts.J_n[i][None], [-gap], [np.inf], v)
    finite = np.isfinite(v_lower) | np.isfinite(v_upper)
    if finite.any():
        prog.AddBoundingBoxConstraint(v_lower[finite], v_upper[finite], v[finite])
    result = solver.Solve(prog)
    return result.GetSolution(v) if result.is_success() else None


OBJECTIVE_FLOOR = 1e-6   # the gap's denominator floor: at rest the objective is ~1e-11
FEASIBLE = 1e-8          # [m/s] the best objective is taken over solutions this feasible

SOLVERS = {
    'clarabel (engine)': lambda *a: solve_cones(*a).v,
    'drake clarabel': lambda *a: solve_drake(ClarabelSolver(), *a),
    'drake scs': lambda *a: solve_drake(ScsSolver(), *a),
}


def violation(v, contacts, h) -> float:
    """Return max_i mu_i ||J_t,i v|| - (J_n,i v + phi_i / h), clipped at 0 [m/s]."""
    if contacts.n_c == 0:
        return 0.0
    J_t = tangent_jacobians(contacts)
    worst = contacts.mu * np.linalg.norm(J_t @ v, axis=1) - (contacts.J_n @ v
                                                             + contacts.phi / h)
    return float(max(np.max(worst), 0.0))


def measure(recorded, repeats: int) -> dict:
    """Time every solver on every SOCP; return the per-solver summary."""
    times = {name: [] for name in SOLVERS}
    solutions = {name: [] for name in SOLVERS}
    for args in recorded:
        for name, solve in SOLVERS.items():
            runs = []
            for _ in range(repeats):
                start = time.perf_counter()
                v = solve(*args)
                runs.append(time.perf_counter() - start)
            times[name].append(float(np.median(runs)))
            solutions[name].append(v)
    summary = {}
    for name in SOLVERS:
        gaps, violations, failures = [], [], 0
        for k, args in enumerate(recorded):
            Q, b = args[0], args[1]
            v = solutions[name][k]
            if v is None:
                failures += 1
                continue
            objectives = [0.5 * w @ Q @ w + b @ w for w in
                          (solutions[other][k] for other in SOLVERS)
                          if w is not None and violation(w, args[2], args[3]) <= FEASIBLE]
            best = min(objectives)
            gaps.append(((0.5 * v @ Q @ v + b @ v) - best) / max(abs(best), OBJECTIVE_FLOOR))
            violations.append(violation(v, args[2], args[3]))
        summary[name] = {'median_ms': 1e3 * float(np.median(times[name])),
                         'p90_ms': 1e3 * float(np.percentile(times[name], 90)),
                         'failures': failures, 'max_violation': float(max(violations)),
                         'max_objective_gap': float(max(gaps))}
    return summary


def step_costs() -> dict:
    """Return the median step time [ms] per scene, pyramid (the default) and exact cone."""
    costs = {}
    for scene, (config, robot, schedule) in RUNS.items():
        costs[scene] = {}
        for cone in ('pyramid', 'exact'):
            sim = simulator(config, cone)
            roll(sim, robot, schedule)                        # load the compiled kernels
            costs[scene][cone] = 1e3 * float(np.median(roll(sim, robot, schedule)))
    return costs


def main() -> None:
    """Record the SOCPs, time the solvers and the steps, print, write JSON and a plot."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--repeats', type=int, default=5)
    parser.add_argument('--json', type=Path, default=Path('out/socp_solvers.json'))
    parser.add_argument('--png', type=Path, default=Path('out/socp_solvers.png'))
    args = parser.parse_args()
    recorded = record()
    summary = measure(recorded, args.repeats)
    print(f'{len(recorded)} SOCPs recorded from {", ".join(RUNS)}')
    print(f"{'solver':20}{'median ms':>11}{'p90 ms':>9}{'failed':>8}{'violation':>11}"
          f"{'obj. gap':>10}")
    for name, row in summary.items():
        print(f"{name:20}{row['median_ms']:11.3f}{row['p90_ms']:9.3f}{row['failures']:8d}"
              f"{row['max_violation']:11.1e}{row['max_objective_gap']:10.1e}")
    costs = step_costs()
    print(f"{'scene':16}{'pyramid ms':>12}{'exact ms':>10}")
    for scene, row in costs.items():
        print(f"{scene:16}{row['pyramid']:12.3f}{row['exact']:10.3f}")
    write_results({'socps': len(recorded), 'solvers': summary, 'step_ms': costs,
                   'repeats': args.repeats, 'machine': machine()}, args.json, args.png,
                  lambda png: plot(summary, png))


def plot(summary: dict, png: Path) -> None:
    """Draw each solver's median solve time as a bar."""
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.barh(list(summary), [row['median_ms'] for row in summary.values()])
    ax.set_xlabel('median solve time per step SOCP [ms]')
    fig.tight_layout()
    fig.savefig(png, dpi=100)


if __name__ == '__main__':
    main()
