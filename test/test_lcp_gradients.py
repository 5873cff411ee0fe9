"""
Derivatives of the finite-feedback LCP step through its basis (lcp_math.command_derivative).

On Halm & Posa's two-finger pushes (apps/paper_jamming_scenes.py), at states
in contact, d(dq)/du from the basis against central differences of the
solved step.
"""

import numpy as np
import pytest

from quasistatic_drake.apps import paper_jamming, paper_jamming_scenes as scenes
from quasistatic_drake.formulations.lcp_math import (command_derivative, finite_feedback_lcp,
                                                     lcp_solution_derivative,
                                                     step_displacements)
from quasistatic_drake.formulations.lcp_solvers import solve_lcp


def displacement(contacts, A, cB, h, u):
    """Return the step's [dq_o; dq_m] at command u."""
    data = finite_feedback_lcp(contacts, A, cB, h, u)
    result = solve_lcp(data.M, data.w)
    assert result.status == 'solved'
    return np.concatenate(step_displacements(contacts, A, cB, h, u, result.z)), data, result.z


@pytest.mark.parametrize('case, steps', [('even', 60), ('lopsided', 80), ('semicircle', 40)])
@pytest.mark.parametrize('c', [2.0 ** -2, 2.0 ** -8])
def test_command_derivative_matches_central_differences(case, steps, c):
    example = scenes.disk_push(case)
    run = paper_jamming.simulate(example, c, steps=steps)
    q_o, q_m = run.q_o[-1], run.q_m[-1]
    contacts = example.contacts(q_o, q_m)
    u = example.command(q_o, q_m, steps * example.h)
    A, cB, h = np.eye(3), c * example.B, example.h
    _, data, z = displacement(contacts, A, cB, h, u)
    assert np.any(z[:contacts.n_n] > 1e-6), 'not in contact: a weak test'
    d_o, d_m, degenerate = command_derivative(contacts, data, A, cB, h, z)
    assert not degenerate
    eps = 1e-7
    fd = np.array([(displacement(contacts, A, cB, h, u + eps * e)[0]
                    - displacement(contacts, A, cB, h, u - eps * e)[0]) / (2 * eps)
                   for e in np.eye(len(u))]).T
    analytic = np.vstack([d_o, d_m])
    np.testing.assert_allclose(analytic, fd, rtol=1e-5, atol=1e-6 * np.abs(fd).max())
    assert np.abs(d_o).max() > 1e-3               # the command moves the disk


def test_a_weakly_active_index_is_flagged():
    """LCP(I, w) with w_0 = 0: z_0 = s_0 = 0, and a change of w_0 moves it either way."""
    M, w = np.eye(2), np.array([0.0, -1.0])
    z = np.array([0.0, 1.0])
    assert lcp_solution_derivative(M, w, z, np.array([[1.0], [0.0]])).degenerate
    derivative = lcp_solution_derivative(M, w, z, np.array([[0.0], [2.0]]))
    assert not derivative.degenerate
    np.testing.assert_allclose(derivative.dz, [[0.0], [-2.0]])
