r"""
Eq. 23 solved on a body pair's contact patch, with the other points added where needed.

Pang & Tedrake 2018, eq. 23, grows by 6 binaries per contact point (4
friction directions), and Gurobi's restricted licence allows 200 variables
once the objective is quadratic.  The manifold gives more points than a
patch needs: a pad against a cylinder's side gives the line's two ends and
the pad's far edge, 3.5 mm off the curved surface; a disc on a table gives
its rim.  The step is solved on the kept points (``contact.thinned_indices``
with reach 0: the patch's support polygon, a line's two ends), and the
solution is then checked against every point it dropped:

* the point's non-penetration row, phi_i + J_n,i x >= 0 (eq. 23b, c), and
* its row of eq. 23f, sum_{j in pair(i)} P_n,j >= -h K phibar_i.

A dropped point with no impulse satisfies the rest of eq. 23 by itself:
P_n,i = P_f,ij = 0, its sliding slack Gamma_i = max(0, max_j -J_f,ij x)
(rho_ij = Gamma_i + J_f,ij x >= 0), s_i = 0; its binaries are 1 for the
normal and friction rows (w may be positive) and 0 for the slack row.  So a
solution that meets both rows at every dropped point is a solution of the
whole eq. 23 (``embedded`` writes it out); otherwise the points it passes
through join the solved set, and the step is solved again.

The kept points' wrench set is the patch's (a flat patch's interior
points' forces are combinations of its corners' with the same normal and
friction cone); a point off the patch joins only where the motion reaches
it.  This module imports neither Drake nor ROS.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from quasistatic_drake.formulations.miqp_data import MiqpData

ROW_TOL = 1e-6    # [m] and [N s]: a dropped point's rows hold to Gurobi's FeasibilityTol


def friction_rows(kept: np.ndarray, per_contact: int) -> np.ndarray:
    """Return the rows of P_f (and of rho) that belong to the contacts ``kept``."""
    return (np.asarray(kept, int)[:, None] * per_contact + np.arange(per_contact)).reshape(-1)


def directions(full: MiqpData) -> int:
    """Return the friction directions per contact of eq. 23's data."""
    return full.n_d // full.n_c if full.n_c else 0


def binary_rows(full: MiqpData, kept: np.ndarray) -> np.ndarray:
    """Return the rows of w (and of z) of the kept contacts, in eq. 23's order [phi; rho; s]."""
    return np.concatenate([kept, full.n_c + friction_rows(kept, directions(full)),
                           full.n_c + full.n_d + kept]).astype(int)


def embedded(full: MiqpData, kept: np.ndarray, x: np.ndarray, P_n: np.ndarray,
             P_f: np.ndarray, gamma: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """
    Return (y, z) over every point from the kept points' solution (module docstring).

    The dropped points carry no impulse; Gamma is their sliding distance
    and their binaries leave w free and hold lambda at zero.
    """
    n_v, n_c, n_d = full.n_v, full.n_c, full.n_d
    J_f_x = full.R[n_c:n_c + n_d, :n_v] @ x
    slip = -J_f_x.reshape(n_c, directions(full)) if n_c else np.zeros((0, 1))
    y_gamma = np.maximum(slip.max(axis=1, initial=0.0), 0.0)
    y_gamma[kept] = gamma
    y_P_n, y_P_f = np.zeros(n_c), np.zeros(n_d)
    y_P_n[kept] = P_n
    y_P_f[friction_rows(kept, directions(full))] = P_f
    z_full = np.concatenate([np.ones(n_c + n_d), np.zeros(n_c)])
    z_full[binary_rows(full, kept)] = z
    return np.concatenate([x, y_P_n, y_P_f, y_gamma]), z_full


def passed_through(full: MiqpData, y: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """Return the dropped points whose non-penetration row or row of eq. 23f ``y`` violates."""
    dropped = np.setdiff1d(np.arange(full.n_c), kept)
    if not len(dropped):
        return dropped
    gap = full.R[dropped] @ y + full.b[dropped]
    force = full.A_lb[dropped] @ y - full.b_lb[dropped]
    return dropped[(gap < -ROW_TOL) | (force < -ROW_TOL)]


def start_rows(start, full: MiqpData, kept: np.ndarray):
    """Return a MIP start over every point (an earlier step's) cut to the kept points."""
    if start is None or len(start) != full.n_binaries:
        return None
    return np.asarray(start)[binary_rows(full, kept)]
