"""
Eq. 23's data, settings and solution: the types the MIQP formulation and its backends share.

Pang & Tedrake 2018, eq. 23 (the variables are named in ``miqp.py``'s
docstring).  ``miqp.py`` assembles :class:`MiqpData` from a step's contacts
and hands it to a backend of ``miqp_backends.py``, which answers with a
:class:`MiqpSolution`; both modules import this one, and the backends do
not import the formulation.  This module imports neither Drake nor ROS,
nor a solver.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from quasistatic_drake.schema import flag, number, one_of, positive_int, setting

TIGHT_FRACTION = 1e-6     # a big-M row within this fraction of M is reported tight


MIQP_BACKENDS = ("gurobi", "scip", "daqp")


@dataclass(frozen=True)
class MiqpSettings:
    """The scenario's ``miqp:`` block (README, "Scenario files")."""

    contact_stiffness: float = setting(1e4, number(positive=True), "K of eq. 23f [N/m]")
    big_m: Optional[float] = setting(None, number(positive=True, none_word="auto"),
                                     "one big-M for every row; 'auto' (None): derived per step")
    time_limit: float = setting(10.0, number(positive=True), "[s] per MIQP solve")
    mip_gap: float = setting(1e-6, number(nonnegative=True), "relative MIP gap")
    backend: str = setting("daqp", one_of(*MIQP_BACKENDS, what="MIQP backend"),
                           "the MIQP solver: gurobi, scip or daqp")
    delayed_lower_bound: bool = setting(False, flag(),
                                        "Sec. V-B: phibar from the previous step")
    least_force: bool = setting(True, flag(), "a second solve for the least normal impulse")
    object_motion_weight: float = setting(1e-6, number(nonnegative=True),
                                          "eps of the tie-break eps ||x_u||^2")
    max_points_per_pair: Optional[int] = setting(
        4, positive_int("all manifold points", none_word="all"),
        "solve on each body pair's patch, at most this many points; 'all': every point "
        "(miqp_points.py)")


@dataclass(frozen=True)
class MiqpData:
    """
    Eq. 23 as matrices over y = [x (n_v), P_n (n_c), P_f (n_d), Gamma (n_c)] and z (N).

    ``R y + b = w`` stacks [phi_next; rho; s]; each of the N rows of w pairs
    with the same row of lambda = y[n_v:] (the complementary variable).
    ``A_lb y >= b_lb`` are the normal-impulse lower bounds of eq. 23f.
    """

    n_v: int
    n_c: int
    n_d: int
    idx_u: np.ndarray
    idx_a: np.ndarray
    xbar_a: np.ndarray
    A_eq: np.ndarray
    b_eq: np.ndarray
    R: np.ndarray
    b: np.ndarray
    A_lb: np.ndarray
    b_lb: np.ndarray
    x_lower: np.ndarray
    x_upper: np.ndarray
    M_w: np.ndarray
    M_lambda: np.ndarray
    impulse_weight: float = 0.0   # adds w * sum(P_n) to the objective (paper_2d's LCP tie-break)
    motion_weight: float = 0.0    # eps of eps ||x_u||^2 (MiqpSettings.object_motion_weight)

    @property
    def n_y(self) -> int:
        """Return the number of continuous variables."""
        return self.n_v + 2 * self.n_c + self.n_d

    @property
    def n_binaries(self) -> int:
        """Return N = 2 n_c + n_d."""
        return 2 * self.n_c + self.n_d

    def objective(self, y: np.ndarray) -> float:
        """Return || x_a - xbar_a ||^2 + eps ||x_u||^2 (+ impulse_weight sum(P_n)) at y."""
        P_n = y[self.n_v:self.n_v + self.n_c]
        return float(np.sum((y[self.idx_a] - self.xbar_a) ** 2)
                     + self.motion_weight * np.sum(y[self.idx_u] ** 2)
                     + self.impulse_weight * np.sum(P_n))


@dataclass(frozen=True)
class MiqpSolution:
    """A backend's answer; ``x`` is None unless a feasible solution was found."""

    x: Optional[np.ndarray]
    P_n: np.ndarray
    P_f: np.ndarray
    gamma: np.ndarray
    status: str
    solve_time: float                 # the solver's own runtime [s]
    objective: float = np.nan
    tight_big_m: tuple[str, ...] = ()
    binaries: int = 0
    z: Optional[np.ndarray] = None    # the binaries (rounded): a MIP start for the next solve
    nodes: int = 0                    # branch-and-bound nodes, both stages


def tight_rows(data: MiqpData, y: np.ndarray, z: np.ndarray) -> tuple[str, ...]:
    """Name the big-M rows that are tight at (y, z): 'phi[3]', 'P_n[0]', ..."""
    names = ([f"phi[{i}]" for i in range(data.n_c)] + [f"rho[{i}]" for i in range(data.n_d)]
             + [f"s[{i}]" for i in range(data.n_c)])
    lam_names = ([f"P_n[{i}]" for i in range(data.n_c)]
                 + [f"P_f[{i}]" for i in range(data.n_d)]
                 + [f"Gamma[{i}]" for i in range(data.n_c)])
    w = data.R @ y + data.b
    lam = y[data.n_v:]
    tight = []
    for k in range(data.n_binaries):
        if z[k] > 0.5 and w[k] >= (1.0 - TIGHT_FRACTION) * data.M_w[k]:
            tight.append(names[k])
        if z[k] < 0.5 and lam[k] >= (1.0 - TIGHT_FRACTION) * data.M_lambda[k]:
            tight.append(lam_names[k])
    return tuple(tight)
