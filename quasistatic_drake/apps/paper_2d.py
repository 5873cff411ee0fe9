"""
Pang & Tedrake 2018, Sec. V-A reproduced: a 2D parallel gripper picks up a cylinder (Figs. 4-6).

m = 1 kg, r = 0.05 m, mu = 0.5, h = 0.01 s, 60 steps, K = 1e4 N/m, the
commands of eq. 29 (squeeze and lift for 39 steps, then release).  Built twice:

* ``run_hand_written``: phi and the Jacobians typed in from eqs. 24-28, the
  MIQP of eq. 23 assembled by formulations/miqp.py;
* ``run_drake``: the generic path, QuasistaticSimulator on config/paper_2d.yaml
  (URDFs with prismatic joints, gravity along -y).

``run_lcp`` is Trinkle's scheme as the paper compares it (Fig. 6, commands of
eq. 30): the same complementarity constraints with Delta q_a fixed to the
command, no objective and no normal-force lower bound.  Its solutions are
not unique (any squeeze force that friction can turn into lift is
complementary once the fingers touch); among them we take the one with the
least total normal impulse, the solution PATH found in the paper (zero
force, the cylinder stays on the table).

Step numbering follows the paper: q at step l is the configuration before
the l-th step, so the initial configuration is step 1.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from quasistatic_drake.contact import ContactSet
from quasistatic_drake.formulations.miqp import MiqpSettings, contact_impulses_miqp, miqp_data
from quasistatic_drake.formulations.miqp_backends import BACKENDS
from quasistatic_drake.paths import package_share_dir
from quasistatic_drake.scenario import Scenario

MASS, RADIUS, MU, H, STEPS, K = 1.0, 0.05, 0.5, 0.01, 60, 1e4
GRAVITY = 9.81
# q = [x_c, y_c, x_l, x_r, y_g] (eq. 24's order: unactuated, then actuated)
Q0 = np.array([0.0, RADIUS, -RADIUS - 0.02, RADIUS + 0.02, 0.0])
IDX_U, IDX_A = np.array([0, 1]), np.array([2, 3, 4])


def command_eq29(step: int) -> np.ndarray:
    """Return [x_l_dot, x_r_dot, y_g_dot] of eq. 29 for step l (1-based)."""
    return np.array([0.1, -0.1, 0.1]) if step <= 39 else np.array([-0.1, 0.1, 0.0])


def command_eq30(step: int) -> np.ndarray:
    """Return the LCP comparison's command, eq. 30."""
    return np.array([0.1, -0.1, 0.1]) if step <= 20 else np.zeros(3)


@dataclass(frozen=True)
class Trajectory:
    """Per step l = 1..60: q after the step, phi before it, the finger normal force."""

    q: np.ndarray                 # (STEPS + 1, 5), q[0] = Q0 (step 1)
    phi: np.ndarray               # (STEPS + 1, 3)
    normal_force: np.ndarray      # (STEPS,) left finger's normal force over each step [N]
    solve_time: np.ndarray        # (STEPS,) the solver's runtime [s]

    @property
    def cylinder_y(self) -> np.ndarray:
        """Return y_c at steps 1..61."""
        return self.q[:, 1]

    @property
    def touch_step(self) -> int:
        """Return the first step l whose configuration has phi_1 = phi_2 = 0."""
        touching = np.flatnonzero(np.all(np.abs(self.phi[:, :2]) < 1e-9, axis=1))
        return int(touching[0]) + 1 if len(touching) else -1


def phi_eq24(q: np.ndarray) -> np.ndarray:
    """Return eq. 24: [x_c - x_l - r, x_r - x_c - r, y_c - r]."""
    x_c, y_c, x_l, x_r, _ = q
    return np.array([x_c - x_l - RADIUS, x_r - x_c - RADIUS, y_c - RADIUS])


def contact_set_eqs_24_28(q: np.ndarray) -> ContactSet:
    """
    Return eqs. 24-28 as a ContactSet over v = [x_c, y_c, x_l, x_r, y_g]_dot.

    Two tangents per contact (eq. 25); the world vectors (x right, y up) only
    turn impulses into forces.
    """
    J_n = np.array([[1, 0, -1, 0, 0], [-1, 0, 0, 1, 0], [0, 1, 0, 0, 0]], dtype=float)
    J_f = np.array([[0, 1, 0, 0, -1], [0, -1, 0, 0, 1], [0, 1, 0, 0, -1], [0, -1, 0, 0, 1],
                    [1, 0, 0, 0, 0], [-1, 0, 0, 0, 0]], dtype=float)
    x, y = np.array([1.0, 0, 0]), np.array([0, 1.0, 0])
    normals = np.array([x, -x, y])            # from A to B: finger->cylinder, table->cylinder
    tangents = np.array([[y, -y], [y, -y], [x, -x]])
    return ContactSet(phi=phi_eq24(q), J_n=J_n, J_f=J_f, mu=np.full(3, MU), normal_W=normals,
                      tangents_W=tangents, point_A_W=np.zeros((3, 3)),
                      point_B_W=np.zeros((3, 3)), body_a=("left", "cylinder", "table"),
                      body_b=("cylinder", "right", "cylinder"))


def run_hand_written(backend: str = "daqp", lcp: bool = False) -> Trajectory:
    """Simulate 60 steps of the hand-written model (eq. 29), or the LCP scheme (eq. 30)."""
    settings = MiqpSettings(contact_stiffness=0.0 if lcp else K, backend=backend,
                            object_motion_weight=0.0)      # the paper's objective
    solver = BACKENDS[backend]()
    command = command_eq30 if lcp else command_eq29
    q, qs, phis, forces, times = Q0.copy(), [Q0.copy()], [phi_eq24(Q0)], [], []
    for step in range(1, STEPS + 1):
        contacts = contact_set_eqs_24_28(q)
        xbar = H * command(step)
        lower = np.full(5, -np.inf)
        upper = np.full(5, np.inf)
        if lcp:
            lower[IDX_A] = upper[IDX_A] = xbar
        data = miqp_data(contacts, H, IDX_U, IDX_A, xbar, np.array([0.0, -MASS * GRAVITY]),
                         settings, lower, upper, point_reach=0.05, weight=MASS * GRAVITY)
        if lcp:
            data = replace(data, impulse_weight=1.0, motion_weight=0.0)
        answer = solver.solve(data, settings)
        if answer.x is None:
            raise RuntimeError(f"step {step}: the MIQP failed ({answer.status})")
        q = q + answer.x
        forces.append(contact_impulses_miqp(contacts, answer.P_n, answer.P_f)[0, 0] / H)
        qs.append(q.copy())
        phis.append(phi_eq24(q))
        times.append(answer.solve_time)
    return Trajectory(np.array(qs), np.array(phis), np.array(forces), np.array(times))


def run_drake(backend: str = "daqp") -> Trajectory:
    """Simulate the same 60 steps through QuasistaticSimulator and config/paper_2d.yaml."""
    from quasistatic_drake.simulator import QuasistaticSimulator
    scenario = Scenario.from_yaml(package_share_dir() / "config" / "paper_2d.yaml")
    scenario = scenario.with_formulation('miqp', backend=backend)
    sim = QuasistaticSimulator(scenario)
    q = sim.default_positions()                # [y_g, x_l, x_r, x_c, y_c]
    order = [3, 4, 1, 2, 0]                    # -> [x_c, y_c, x_l, x_r, y_g]
    qs, forces, times = [q[order]], [], []
    state = sim.initial_state(q)
    for step in range(1, STEPS + 1):
        x_l_dot, x_r_dot, y_g_dot = command_eq29(step)
        result = sim.step(state, {"gripper": [y_g_dot, x_l_dot, x_r_dot]})
        if not result.success:
            raise RuntimeError(f"step {step}: {result.status}")
        state = result.state_next
        q = np.array(state.q)
        qs.append(q[order])
        forces.append(sum(c.force_W[0] for c in result.contacts
                          if c.body_a == "gripper::left_finger"))
        times.append(result.diagnostics.solve_time)
    qs = np.array(qs)
    return Trajectory(qs, np.array([phi_eq24(x) for x in qs]), np.array(forces),
                      np.array(times))


# [m, N] the hand-written model (a) and the Drake path (b) agree to this (test_miqp.py)
CROSS_CHECK_TOL = 1e-6


def reproduce(backend: str = "daqp") -> dict:
    """Run (a), (b) and the LCP scheme; return the binding JSON summary and the agreement."""
    a = run_hand_written(backend)
    b = run_drake(backend)
    lcp = run_hand_written(backend, lcp=True)
    return {
        "touch_step": a.touch_step,
        "cylinder_y": a.cylinder_y.tolist(),
        "normal_force": a.normal_force.tolist(),
        "lcp_cylinder_y": lcp.cylinder_y.tolist(),
        "lcp_normal_force": lcp.normal_force.tolist(),
        "x_l": a.q[:, 2].tolist(), "x_r": a.q[:, 3].tolist(), "y_g": a.q[:, 4].tolist(),
        "drake_touch_step": b.touch_step,
        "hand_written_vs_drake_max_q_diff": float(np.max(np.abs(a.q - b.q))),
        "hand_written_vs_drake_max_force_diff": float(np.max(np.abs(a.normal_force
                                                                    - b.normal_force))),
        "cross_check_tolerance": CROSS_CHECK_TOL,
        "solve_time_ms": {"median": float(np.median(a.solve_time) * 1e3),
                          "max": float(np.max(a.solve_time) * 1e3)},
        "backend": backend,
    }


def plot(summary: dict, path) -> None:
    """Write the panels of Figs. 5 (MIQP) and 6 (LCP) to a PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    steps = np.arange(1, STEPS + 2)
    fig, ax = plt.subplots(2, 3, figsize=(13, 7))
    ax[0, 0].plot(steps, summary["x_l"], label="x_l")
    ax[0, 0].plot(steps, summary["x_r"], label="x_r")
    ax[0, 0].set_title("Fig. 5a-b: finger x [m]")
    ax[0, 1].plot(steps, summary["y_g"], label="y_g")
    ax[0, 1].plot(steps, summary["cylinder_y"], label="y_c")
    ax[0, 1].set_title("Fig. 5c-d: heights [m]")
    ax[0, 2].step(steps[:-1], summary["normal_force"], where="post")
    ax[0, 2].set_title("Fig. 5e: finger normal force [N]")
    ax[1, 0].plot(steps, summary["lcp_cylinder_y"], color="tab:red")
    ax[1, 0].set_title("Fig. 6a: y_c under the LCP [m]")
    ax[1, 1].step(steps[:-1], summary["lcp_normal_force"], where="post", color="tab:red")
    ax[1, 1].set_title("Fig. 6b: normal force under the LCP [N]")
    ax[1, 2].axis("off")
    ax[1, 2].text(0.0, 0.5, f"touch step {summary['touch_step']}\n"
                  f"(a) vs (b): max |dq| {summary['hand_written_vs_drake_max_q_diff']:.1e} m",
                  fontsize=12)
    for a in ax.flat[:5]:
        a.set_xlabel("step l")
        a.legend() if a.get_legend_handles_labels()[0] else None
    fig.tight_layout()
    fig.savefig(path, dpi=110)
