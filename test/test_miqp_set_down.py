"""
The rounded box's set-down under DAQP (Pang & Tedrake 2018, eq. 23; Table I's second object).

The state is step 1942 of ``benchmarks/miqp_runtime.py``'s closed loop of
the rounded box under ``miqp.backend: daqp`` (h = 0.005 s), recorded before
the fix of issue 33: the box is held 2.2 mm over the table, one pad at phi
-0.99e-6 m on two points and -1.02e-6 m on the other two.  DAQP's rows took
|phi| < 1e-6 m as touching (phi = 0) and the rest exactly, a tilt of 1e-6 m
that the opposite pad could not follow: every closed mode was infeasible,
and the step and the next ones failed on the 2 s time limit
(docs/formulations.md, "backend: daqp").  ``contact_band`` holds the rows
near contact continuously in phi.
"""

import os
import sys

import numpy as np

from conftest import REPO_ROOT
from quasistatic_drake import QuasistaticSimulator
from quasistatic_drake.formulations.miqp_backends import contact_band
from quasistatic_drake.paths import package_share_dir

sys.path.insert(0, os.path.join(REPO_ROOT, 'benchmarks'))

import miqp_runtime as bench  # noqa: E402

STEP = 1942
Q = np.array([
    4.0646393263425834e-01, 8.7878886534275413e-01, 3.0570134988889833e-02,
    -1.4847343087404028e+00, -3.3518311596192431e-02, 7.7858003030376766e-01,
    4.4984051111111778e-01, 2.9999805318876499e-02, 2.9999805326740663e-02,
    9.9999999997024469e-01, 7.7108512020358066e-06, 2.0003723788567024e-07,
    -1.1605586065248642e-07, 5.5000082566831254e-01, 2.5000607872263797e-01,
    6.2220145616332545e-02])
Q_REF = np.array([
    0.4064639326342554, 0.8787888654705649, 0.03057013498690981, -1.48473430879981,
    -0.0335183115961832, 0.7785800303037553, 0.4498405111111209, 0.02899980531889687,
    0.02899980532672029])
WARM_START = np.array([float(c) for c in (
    '0011110011111001111001111111111111111000000001111111111111111000000001111111111111'
    '1111111000000001111111111111111000000001111111111111111111111111111111111111111111'
    '11111111111111111100001100000110000110000000000000000')])
STEPS = 8
# Per step against Gurobi from the same state: a pad may keep its 1e-6 m penetration
# (contact_band) where Gurobi worked it off, so the fingers close up to 1e-6 m further,
# and Gurobi's own rows hold to 1e-6 (measured: at most 2.7e-6 over these steps).
Q_NEXT_BOUND = 5e-6


def engine(backend: str):
    """Return the benchmark's rounded-box engine under ``backend`` and its plan."""
    settings = bench.BenchSettings(backend=backend)
    path = package_share_dir() / 'config' / bench.SCENES['rounded_box']
    sim = QuasistaticSimulator(bench.bench_scenario(path, settings))
    task = bench.scaled_task(settings.duration)
    plan, _, _ = bench.plan_pick_and_place(sim, task)
    return sim, task, plan


def test_contact_band_is_continuous_one_sided_and_exact_away_from_contact():
    tol = 1e-6
    phi = np.array([-5e-3, -2.5e-6, -1.02e-6, -0.99e-6, -1e-7, 0.0, 6e-7, 1.5e-6, 2e-3])
    kept, reached = contact_band(phi, tol)
    np.testing.assert_allclose(kept, [0, 0, 0.98e-6, 0.99e-6, 1e-7, 0, 0, 0, 0], atol=1e-18)
    np.testing.assert_allclose(reached, [0, 0, 0, 0, 0, 0, 6e-7, 0.5e-6, 0], atol=1e-18)
    # continuous: a change of phi by d changes either by at most d
    grid = np.linspace(-3e-6, 3e-6, 6001)
    for values in contact_band(grid, tol):
        assert np.max(np.abs(np.diff(values))) <= np.max(np.diff(grid)) * (1 + 1e-9)
    # one-sided: never deeper than the point is, never farther open than it is
    assert np.all(-kept >= np.minimum(phi, 0.0)) and np.all(reached <= np.maximum(phi, 0.0))


def test_daqp_sets_the_rounded_box_down_as_gurobi_does():
    daqp, task, plan = engine('daqp')
    gurobi, _, _ = engine('gurobi')
    q, q_ref, warm_start = Q, Q_REF, WARM_START
    for k in range(STEP, STEP + STEPS):
        command = {task.robot: plan.velocities[k]}
        mine = daqp.step(daqp.initial_state(q, q_ref=q_ref, warm_start=warm_start), command)
        theirs = gurobi.step(gurobi.initial_state(q, q_ref=q_ref, warm_start=warm_start),
                             command)
        assert mine.success and theirs.success, (k, mine.status, theirs.status)
        gap = np.max(np.abs(mine.q_next - theirs.q_next))
        assert gap <= Q_NEXT_BOUND, f'step {k}: max |q_next - Gurobi\'s| = {gap:.3g}'
        assert mine.diagnostics.solve_time < 1.0, (k, mine.diagnostics.solve_time)
        q, q_ref, warm_start = mine.q_next, mine.state_next.q_ref, mine.state_next.warm_start
    assert daqp.formulation.backend.stats['search'] == 0, 'the candidate modes settle them'
