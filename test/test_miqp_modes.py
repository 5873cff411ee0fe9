"""
The DAQP backend's candidate contact modes (miqp_modes.py; Pang & Tedrake 2018, eq. 23).

At the release of Sec. V-A (step 40: the fingers open, the cylinder held
19 mm over the table falls onto it) the optimal mode closes the table, a
pair none of whose points touches.  The candidate modes closed only the
points within 1e-6 m of contact, so none was feasible and the step went to
DAQP's search (cut by time).  A pair's nearest points now take its closed
modes (``nearest_points``).
"""

import numpy as np

from quasistatic_drake.apps import paper_2d as P
from quasistatic_drake.formulations.miqp import MiqpSettings, miqp_data
from quasistatic_drake.formulations.miqp_backends import DaqpBackend, GurobiBackend
from quasistatic_drake.formulations.miqp_modes import contact_pairs, nearest_points


def release_step():
    """Return eq. 23's data at paper-2d's release (step 40) and its settings."""
    settings = MiqpSettings(contact_stiffness=P.K, object_motion_weight=0.0)
    q = P.run_hand_written('gurobi').q[39]
    contacts = P.contact_set_eqs_24_28(q)
    unbounded = np.full(5, np.inf)
    data = miqp_data(contacts, P.H, P.IDX_U, P.IDX_A, P.H * P.command_eq29(40),
                     np.array([0.0, -P.MASS * P.GRAVITY]), settings, -unbounded, unbounded,
                     point_reach=0.05, weight=P.MASS * P.GRAVITY)
    return data, settings


def test_a_pair_apart_takes_its_closed_modes_at_its_nearest_points():
    phi = np.array([0.0, 3.5e-3, 0.0, 1.9e-2, 1.9e-2 + 5e-7, 1.9e-2 + 1e-3])
    pairs = [np.array([0, 1]), np.array([2]), np.array([3, 4, 5])]
    np.testing.assert_array_equal(nearest_points(phi, pairs, 1e-6),
                                  [True, False, True, True, True, False])


def test_the_release_is_settled_by_a_candidate_mode_as_gurobi_settles_it():
    data, settings = release_step()
    assert data.b[2] > 0.018 and len(contact_pairs(data)) == 3, 'the table 19 mm below'
    daqp = DaqpBackend()
    mine, theirs = daqp.solve(data, settings), GurobiBackend().solve(data, settings)
    assert daqp.stats['search'] == 0, daqp.stats
    assert mine.x is not None and theirs.x is not None
    np.testing.assert_allclose(mine.x, theirs.x, rtol=0, atol=1e-8)
    assert mine.z[2] == 0.0, 'the table closes: the cylinder lands'


def cold_push_data():
    """
    Return eq. 23's data of test_miqp_gradients' second cold push step (finger_push.yaml).

    The finger pushes the box in +x while sliding along its face; the box slides and
    turns on the table.  The data is captured from a real Gurobi step.
    """
    import os
    from conftest import REPO_ROOT
    from quasistatic_drake import QuasistaticSimulator, Scenario
    scenario = Scenario.from_yaml(os.path.join(REPO_ROOT, 'config', 'finger_push.yaml'))
    sim = QuasistaticSimulator(scenario.with_formulation('miqp', backend='gurobi'))
    backend = sim.formulation.backend
    captured, solve = [], backend.solve
    backend.solve = lambda data, *args, **kw: captured.append(data) or solve(data, *args, **kw)
    command = np.array([0.1, 0.05, -0.05])
    s = sim.initial_state()
    for _ in range(2):
        result = sim.step(s, {'finger': command})
        assert result.success
        s = result.state_next.with_warm_start(None)
    return captured[-1]


def test_the_mode_read_from_gurobis_sliding_push_is_gurobis_mode():
    """
    Check that the cold push's mode, read from Gurobi's motion with ties, is Gurobi's.

    Two table points slide along a pyramid sector's edge: one friction direction each
    (``mode_binaries`` of ``motion_modes``) is infeasible at Gurobi's motion in DAQP's
    model, the tied directions (``motion_binaries``) give Gurobi's mode, feasible.
    """
    from quasistatic_drake.formulations.miqp_backends import daqp_problem
    from quasistatic_drake.formulations.miqp_modes import motion_binaries
    data = cold_push_data()
    answer = GurobiBackend().solve(data, MiqpSettings())
    assert answer.status == 'optimal'
    z = motion_binaries(data, answer.x, 1e-6)
    np.testing.assert_array_equal(z, answer.z)
    daqp, p = DaqpBackend(), daqp_problem(data)
    assert daqp._fixed_binaries(p, p.H, p.f, p.lower, p.upper, p.sense, z) is not None


def test_the_cold_push_is_settled_by_the_local_mode_search_as_gurobi_settles_it():
    """
    Check the local mode search (miqp_backends._mode_rounds) on the cold push.

    No candidate mode is feasible (the relaxation's motion slides the table points the
    wrong way); the rounds, with each sliding point's two most opposed directions left
    binary, find Gurobi's optimum without DAQP's whole-tree search (cut by time).
    """
    data = cold_push_data()
    settings = MiqpSettings()
    daqp = DaqpBackend()
    mine, theirs = daqp.solve(data, settings), GurobiBackend().solve(data, settings)
    assert daqp.stats['mode rounds'] == 1 and daqp.stats['search'] == 0, daqp.stats
    assert mine.status == theirs.status == 'optimal'
    np.testing.assert_allclose(mine.x, theirs.x, rtol=0, atol=1e-9)
    assert data.objective(np.concatenate([mine.x, mine.P_n, mine.P_f, mine.gamma])) <= (
        data.objective(np.concatenate([theirs.x, theirs.P_n, theirs.P_f, theirs.gamma]))
        * (1 + 1e-9))
    # the same answer on every run: no part of it is cut by time
    again = DaqpBackend().solve(data, settings)
    np.testing.assert_array_equal(again.x, mine.x)


def test_a_sliding_point_leaves_its_two_most_opposed_directions_to_the_search():
    from quasistatic_drake.formulations.miqp_modes import (OPEN, SLIDE, STICK, free_directions,
                                                           slide_directions)
    data = cold_push_data()
    per = data.n_d // data.n_c
    x = np.zeros(data.n_v)
    x[data.idx_a] = data.xbar_a                  # the finger moves, the box is still
    opposed = slide_directions(data, x, x, 1e-6, 2)
    assert opposed.shape == (data.n_c, 2)
    modes = np.full(data.n_c, OPEN)
    modes[0], modes[1] = SLIDE, STICK
    free = free_directions(data, modes, opposed)
    assert free.sum() == 2, 'only the sliding point, two directions'
    np.testing.assert_array_equal(np.flatnonzero(free), np.sort(data.n_c + opposed[0]))
    slip = (data.R[data.n_c:data.n_c + data.n_d, :data.n_v] @ x).reshape(data.n_c, per)[0]
    assert slip[opposed[0, 0]] == slip.min() and slip[opposed[0, 1]] == np.sort(slip)[1]
