"""
Song, Kumar & Pang, Sec. IV-A reproduced: the sliding/rolling disk and billiard ball as BVPs.

Song, Kumar & Pang, "A Two-Point Boundary-Value Approach for Planning
Manipulation Tasks" (seed 001).  Everything is the paper's math by hand
(numpy/scipy, one MILP through Gurobi or HiGHS); no Drake plumbing.

Disk (Figs. 1-2), mu = 4, r = 0.1 m, m = 0.1 kg, I = 5e-4 kg m^2, g = 9.81
(the printed v0 = 1.2402 needs 9.81; 9.8 gives 1.2401), T = 0.022 s,
x0 = 0, omega0 = 1 rad/s, x(T) = 0.02 m, rolling at T.  The paper's sign
convention Gamma_t = (1, r): the slip is s = v + r omega and rolling is
s = 0 (v = r omega with omega measured the other way round).

* ``disk_analytic``: the closed form (derived in its docstring; the printed
  c of the quadratic drops a factor T).  v0 = 1.24024, tau = 0.011385 s
  (paper 1.2402, 0.0114).
* ``disk_shoot``: the discrete BVP on the paper's grid (eq. 10 with the
  disk's mixed LCP, Sec. IV-A): N + 1 = 22 backward-Euler steps of 1 ms, each
  step's LCP solved exactly by enumerating its three modes, shooting on v0
  (Brent) for x^{N+1} = 0.02.  v0 = 1.25217 (1 % above the analytic value: the
  O(h) error of backward Euler; the paper plots this grid against the
  analytic curves and prints no discrete v0), first rolling sample 12
  (t = 0.012 s, the first sample after the analytic 0.0114 s), residuals
  below 1e-15.
* ``disk_simultaneous``: the same BVP as one whole-trajectory MILP (all
  states, friction impulses, slips and v0; complementarity by big-M), as the
  paper solves the whole trajectory at once with PATH: v0 agrees with the
  shooting v0 to 1e-15.
* convergence: h = T / (N + 1) for N + 1 = 22 * 2^k up to N = 2815; the error
  in v0 halves with h (O(h)), 9.6e-3 at N = 21 down to 7.6e-5 at N = 2815.

Billiard ball (Figs. 3-4), m = 0.2 kg, r = 0.05 m, I = 2/5 m r^2, mu = 0.2,
g = 9.8, h = 0.01 s, N = 100, nu0 = [1 0.5 0 40 -20 -10].  The paper's
boundary conditions (its BVP table) are at q^{N+1}, as the disk's: N + 1 =
101 steps of h from q^0 (T = 1.01 s; the paper rounds T to 1 s).
Rigid model with z fixed on the plane (lambda_n = m g), Gamma_t =
[1 0 0 0 -r 0], Gamma_o = [0 1 0 r 0 0]; the quaternion is not integrated
(nothing in the boundary conditions reads it).

* ``ball_ivp(cone=True)``: Coulomb's cone (5), backward Euler; one
  roll-over at 0.47 s (continuous 0.4667 s), final displacement
  (0.56336, -0.05330) against the paper's (0.5632, -0.0534) of its BVP
  table, 1.8e-4 apart (after N = 100 steps instead of N + 1 it was
  (0.5591, -0.0512), 4.7e-3 apart; the paper gives no roll-over time).
* ``ball_ivp(cone=False)``: the paper's LCP pyramid (a box: each tangent
  direction bounded by mu lambda_n on its own); roll-over times 0.30 s (t)
  and 0.37 s (o), the paper's 0.30 and 0.37 (Fig. 3f); final displacement
  (0.5133, -0.0898) (the paper prints none).
* ``ball_bvp``: shooting (Newton) on (v_x^0, v_y^0) for the end point; the
  IVP's end point gives back nu0 (the paper's "first check"), and the far
  target (x0 + 1, y0 - 0.1) needs a faster start, v0 = (1.5347, 0.4212)
  (paper Fig. 4, which uses the compliant model and prints no v0; we use the
  same rigid cone model as the IVP).  The consistent BVP returns
  (1, 0.5) to 4e-15; both end points are met to 1e-13.

``reproduce()`` runs in about 0.1 s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
from scipy.optimize import brentq

GRAVITY_DISK = 9.81
GRAVITY_BALL = 9.8
CONVERGENCE_N = (21, 43, 87, 175, 351, 703, 1407, 2815)   # N + 1 = 22 * 2^k


class _Rolling:
    """What a body rolling on a plane with friction has: its slip mobility and friction cap."""

    @property
    def w(self) -> float:
        """Return the slip's inverse effective mass 1/m + r^2/I (the same in t and o)."""
        return 1.0 / self.m + self.r ** 2 / self.inertia

    @property
    def cap(self) -> float:
        """Return the largest friction force mu m g (per direction, or in the cone) [N]."""
        return self.mu * self.m * self.g


@dataclass(frozen=True)
class Disk(_Rolling):
    """The planar disk of Fig. 1 and its boundary conditions."""

    mu: float = 4.0
    r: float = 0.1
    m: float = 0.1
    inertia: float = 5e-4
    g: float = GRAVITY_DISK
    t_final: float = 0.022
    x0: float = 0.0
    omega0: float = 1.0
    x_final: float = 0.02

    @property
    def kappa(self) -> float:
        """Return m r^2 / I."""
        return self.m * self.r ** 2 / self.inertia


@dataclass(frozen=True)
class DiskRun:
    """A discrete disk trajectory, samples l = 0..N+1, friction over steps 1..N+1."""

    t: np.ndarray
    x: np.ndarray
    v: np.ndarray
    omega: np.ndarray
    slip: np.ndarray
    force: np.ndarray          # (N + 1,) friction force over each step [N]


@dataclass(frozen=True)
class Ball(_Rolling):
    """The billiard ball of Sec. IV-A."""

    mu: float = 0.2
    r: float = 0.05
    m: float = 0.2
    g: float = GRAVITY_BALL
    h: float = 0.01
    steps: int = 101           # N + 1: the boundary conditions are at q^{N+1}, N = 100
    omega0: tuple = (40.0, -20.0, -10.0)

    @property
    def inertia(self) -> float:
        """Return the solid sphere's 2/5 m r^2."""
        return 0.4 * self.m * self.r ** 2


@dataclass(frozen=True)
class BallRun:
    """A discrete ball trajectory: samples l = 0..N+1, friction over steps 1..N+1."""

    t: np.ndarray
    p: np.ndarray              # (N + 1, 2) centre x, y
    v: np.ndarray              # (N + 1, 2)
    omega: np.ndarray          # (N + 1, 3)
    slip: np.ndarray           # (N + 1, 2) (s_t, s_o)
    force: np.ndarray          # (N, 2) (lambda_t, lambda_o)


def disk_analytic(d: Disk = Disk()) -> tuple[float, float]:
    """
    Return (v0, tau) of the continuous disk BVP in closed form.

    Sliding (0 <= t <= tau): kinetic friction -mu m g opposes the slip
    s = v + r omega > 0, so v = v0 - mu g t, omega = omega0 - mu m g r t / I,
    and s = s0 - mu g (1 + kappa) t with s0 = v0 + r omega0, kappa = m r^2/I.
    Rolling starts when s = 0: tau = (v0 + r omega0) / (mu g (1 + kappa)),
    as printed.  Afterwards friction vanishes and v stays v(tau), so

        x(T) = x0 + v0 tau - mu g tau^2 / 2 + (v0 - mu g tau)(T - tau)
             = x0 + v0 T - mu g T tau + mu g tau^2 / 2.

    With tau linear in v0 this is a v0^2 + b v0 + c = 0 with
    a = 1 / (2 mu g (1 + kappa)^2), b = 2 a r omega0 + T - T / (1 + kappa),
    c = x0 - x(T) + a r^2 omega0^2 - r omega0 T / (1 + kappa): the paper's
    a and b; its c drops the factor T in the last term (that version gives
    v0 = 2.8157).  The larger root is the physical one (tau in [0, T]).
    """
    k = 1.0 + d.kappa
    a = 1.0 / (2.0 * d.mu * d.g * k ** 2)
    b = 2.0 * a * d.r * d.omega0 + d.t_final - d.t_final / k
    c = (d.x0 - d.x_final + a * (d.r * d.omega0) ** 2
         - d.r * d.omega0 * d.t_final / k)
    v0 = (-b + math.sqrt(b * b - 4.0 * a * c)) / (2.0 * a)
    return v0, (v0 + d.r * d.omega0) / (d.mu * d.g * k)


def disk_analytic_state(d: Disk, v0: float, t: np.ndarray) -> tuple[np.ndarray, ...]:
    """Return (x, v, omega) of the two-phase closed form at times t."""
    tau = (v0 + d.r * d.omega0) / (d.mu * d.g * (1.0 + d.kappa))
    ts = np.minimum(t, tau)
    v = v0 - d.mu * d.g * ts
    omega = d.omega0 - d.cap * d.r / d.inertia * ts
    x = d.x0 + v0 * ts - 0.5 * d.mu * d.g * ts ** 2 + v * (t - ts)
    return x, v, omega


def slip_step(slip: float, hw: float, cap: float) -> float:
    """
    Return the friction force of one backward-Euler step with a scalar slip.

    Solves 0 <= s+ _|_ f + cap >= 0, 0 <= s- _|_ cap - f >= 0 with
    s+ - s- = slip + hw f (the disk's LCP of Sec. IV-A) by enumerating
    sliding forward (f = -cap), sliding backward (f = +cap) and sticking.
    """
    if slip - hw * cap >= 0.0:
        return -cap
    if slip + hw * cap <= 0.0:
        return cap
    return -slip / hw


def complementarity_residual(slip: np.ndarray, force: np.ndarray, cap: float) -> float:
    """Return max |min(s+, f + cap)|, |min(s-, cap - f)| over the steps (0: exact)."""
    sp, sm = np.maximum(slip, 0.0), np.maximum(-slip, 0.0)
    r1 = np.minimum(sp, force + cap)
    r2 = np.minimum(sm, cap - force)
    return float(max(np.max(np.abs(r1)), np.max(np.abs(r2))))


def disk_rollout(d: Disk, v0: float, n: int) -> DiskRun:
    """Step the disk n + 1 times with h = T / (n + 1) (eq. 10, fully implicit)."""
    h = d.t_final / (n + 1)
    x, v, om = [d.x0], [v0], [d.omega0]
    force = []
    for _ in range(n + 1):
        f = slip_step(v[-1] + d.r * om[-1], h * d.w, d.cap)
        v.append(v[-1] + h * f / d.m)
        om.append(om[-1] + h * d.r * f / d.inertia)
        x.append(x[-1] + h * v[-1])
        force.append(f)
    v_a, om_a = np.array(v), np.array(om)
    return DiskRun(t=h * np.arange(n + 2), x=np.array(x), v=v_a, omega=om_a,
                   slip=v_a + d.r * om_a, force=np.array(force))


def disk_terminal_x(d: Disk, v0: float, n: int) -> float:
    """Return x^{N+1}(v0) - x(T), the shooting residual (pure floats, fast)."""
    h = d.t_final / (n + 1)
    hw, x, v, om = h * d.w, d.x0, v0, d.omega0
    for _ in range(n + 1):
        f = slip_step(v + d.r * om, hw, d.cap)
        v += h * f / d.m
        om += h * d.r * f / d.inertia
        x += h * v
    return x - d.x_final


def disk_shoot(d: Disk = Disk(), n: int = 21) -> float:
    """Return v0 of the discrete BVP by Brent's method on x^{N+1}(v0) = x(T)."""
    return brentq(lambda v0: disk_terminal_x(d, v0, n), -d.r * d.omega0, 10.0,
                  xtol=1e-15, rtol=4.0 * np.finfo(float).eps, maxiter=200)


def first_rolling_sample(slip: np.ndarray, tol: float = 1e-12) -> int:
    """Return the first sample index with zero slip (-1 if none)."""
    idx = np.flatnonzero(np.abs(slip) <= tol)
    return int(idx[0]) if idx.size else -1


def disk_milp(d: Disk = Disk(), n: int = 21) -> dict:
    """
    Build the whole-trajectory BVP as an MILP in matrix form (big-M complementarity).

    Unknowns z = [x_0..x_{N+1}, v_0.., omega_0.., f_1..f_{N+1}, s+, s-, b+, b-]
    (b binary).  Equalities: x_0 = x0, omega_0 = omega0, the backward-Euler
    steps, s+ - s- = v + r omega, x_{N+1} = x(T), v_{N+1} + r omega_{N+1} = 0.
    Complementarity: s+ <= M b+, f + cap <= 2 cap (1 - b+), likewise s-.
    """
    h, k = d.t_final / (n + 1), n + 2
    big_m = 20.0
    ix, iv, iw = 0, k, 2 * k
    i_f, isp, ism = 3 * k, 3 * k + n + 1, 3 * k + 2 * (n + 1)
    ibp, ibm = 3 * k + 3 * (n + 1), 3 * k + 4 * (n + 1)
    nz = 3 * k + 5 * (n + 1)
    eq, rhs = [], []

    def row(entries: dict, value: float, rows: list, vals: list) -> None:
        a = np.zeros(nz)
        for j, c in entries.items():
            a[j] += c
        rows.append(a)
        vals.append(value)

    row({ix: 1.0}, d.x0, eq, rhs)
    row({iw: 1.0}, d.omega0, eq, rhs)
    for j in range(n + 1):
        row({iv + j + 1: 1.0, iv + j: -1.0, i_f + j: -h / d.m}, 0.0, eq, rhs)
        row({iw + j + 1: 1.0, iw + j: -1.0, i_f + j: -h * d.r / d.inertia}, 0.0, eq, rhs)
        row({ix + j + 1: 1.0, ix + j: -1.0, iv + j + 1: -h}, 0.0, eq, rhs)
        row({isp + j: 1.0, ism + j: -1.0, iv + j + 1: -1.0, iw + j + 1: -d.r}, 0.0, eq, rhs)
    row({ix + k - 1: 1.0}, d.x_final, eq, rhs)
    row({iv + k - 1: 1.0, iw + k - 1: d.r}, 0.0, eq, rhs)
    ub, ub_rhs = [], []
    for j in range(n + 1):
        row({isp + j: 1.0, ibp + j: -big_m}, 0.0, ub, ub_rhs)
        row({i_f + j: 1.0, ibp + j: 2.0 * d.cap}, d.cap, ub, ub_rhs)
        row({ism + j: 1.0, ibm + j: -big_m}, 0.0, ub, ub_rhs)
        row({i_f + j: -1.0, ibm + j: 2.0 * d.cap}, d.cap, ub, ub_rhs)
    lb = np.full(nz, -np.inf)
    upper = np.full(nz, np.inf)
    lb[i_f:i_f + n + 1], upper[i_f:i_f + n + 1] = -d.cap, d.cap
    lb[isp:], upper[ibp:] = 0.0, 1.0
    integer = np.zeros(nz, dtype=bool)
    integer[ibp:] = True
    return dict(a_eq=np.array(eq), b_eq=np.array(rhs), a_ub=np.array(ub),
                b_ub=np.array(ub_rhs), lb=lb, ub=upper, integer=integer, iv=iv)


def disk_simultaneous(d: Disk = Disk(), n: int = 21) -> tuple[float, str]:
    """Return (v0, solver) of the whole-trajectory MILP, Gurobi if it runs, else HiGHS."""
    p = disk_milp(d, n)
    try:
        import gurobipy as gp
        model = gp.Model()
        model.Params.OutputFlag = 0
        model.Params.FeasibilityTol = 1e-9
        model.Params.IntFeasTol = 1e-9
        vtype = np.where(p["integer"], "B", "C")
        z = model.addMVar(p["lb"].size, lb=p["lb"], ub=p["ub"], vtype=vtype)
        model.addConstr(p["a_eq"] @ z == p["b_eq"])
        model.addConstr(p["a_ub"] @ z <= p["b_ub"])
        model.optimize()
        return float(z.X[p["iv"]]), "gurobi"
    except Exception:                     # no gurobipy or no licence: scipy's HiGHS
        from scipy.optimize import Bounds, LinearConstraint, milp
        res = milp(np.zeros(p["lb"].size),
                   constraints=[LinearConstraint(p["a_eq"], p["b_eq"], p["b_eq"]),
                                LinearConstraint(p["a_ub"], -np.inf, p["b_ub"])],
                   integrality=p["integer"].astype(int), bounds=Bounds(p["lb"], p["ub"]),
                   options=dict(primal_feasibility_tolerance=1e-10))
        return float(res.x[p["iv"]]), "highs"


def ball_ivp(v0_xy: Sequence[float] = (1.0, 0.5), cone: bool = True,
             b: Ball = Ball()) -> BallRun:
    """
    Roll the ball out with backward Euler under the cone (5) or the LCP box.

    The slip s = (v_x - r omega_y, v_y + r omega_x) moves by h W lambda per
    step.  Cone: slip with |s| > h W mu m g keeps its direction (lambda =
    -mu m g s/|s|), otherwise it sticks; box: ``slip_step`` per direction.
    """
    hw = b.h * b.w
    p, v = [np.zeros(2)], [np.asarray(v0_xy, dtype=float)]
    om = [np.asarray(b.omega0, dtype=float)]
    force = []
    for _ in range(b.steps):
        s = np.array([v[-1][0] - b.r * om[-1][1], v[-1][1] + b.r * om[-1][0]])
        if cone:
            norm = math.hypot(s[0], s[1])
            f = -b.cap * s / norm if norm > hw * b.cap else -s / hw
        else:
            f = np.array([slip_step(s[0], hw, b.cap), slip_step(s[1], hw, b.cap)])
        v.append(v[-1] + b.h * f / b.m)
        om.append(om[-1] + b.h * b.r / b.inertia * np.array([f[1], -f[0], 0.0]))
        p.append(p[-1] + b.h * v[-1])
        force.append(f)
    v_a, om_a = np.array(v), np.array(om)
    slip = np.column_stack([v_a[:, 0] - b.r * om_a[:, 1], v_a[:, 1] + b.r * om_a[:, 0]])
    return BallRun(t=b.h * np.arange(b.steps + 1), p=np.array(p), v=v_a, omega=om_a,
                   slip=slip, force=np.array(force))


def ball_cone_residual(run: BallRun, b: Ball = Ball()) -> float:
    """Return the largest violation of Coulomb's cone law over the steps (0: exact)."""
    worst = 0.0
    for s, f in zip(run.slip[1:], run.force):
        ns, nf = np.linalg.norm(s), np.linalg.norm(f)
        worst = max(worst, nf - b.cap)
        if ns > 1e-12:
            worst = max(worst, np.linalg.norm(f + b.cap * s / ns))
    return float(worst)


def ball_bvp(target: Sequence[float], cone: bool = True, guess=(1.0, 0.0),
             b: Ball = Ball(), tol: float = 1e-13) -> np.ndarray:
    """Return (v_x^0, v_y^0) putting the ball at p^N - p^0 = target (Newton, FD Jacobian)."""
    target = np.asarray(target, dtype=float)

    def resid(u: np.ndarray) -> np.ndarray:
        return ball_ivp(u, cone, b).p[-1] - target

    u = np.asarray(guess, dtype=float)
    r = resid(u)
    for _ in range(100):
        if np.max(np.abs(r)) < tol:
            break
        eps = 1e-7
        jac = np.column_stack([(resid(u + eps * e) - resid(u - eps * e)) / (2 * eps)
                               for e in np.eye(2)])
        du = np.linalg.solve(jac, -r)
        step = 1.0
        while step > 1e-6:
            r_new = resid(u + step * du)
            if np.linalg.norm(r_new) < np.linalg.norm(r):
                break
            step *= 0.5
        u, r = u + step * du, r_new
    return u


STAGES = 4    # the calls of reproduce()'s ``progress``


def reproduce(progress: Callable[[str], None] = lambda stage: None) -> dict:
    """Run every case of Sec. IV-A and return the summary (JSON-serialisable)."""
    d = Disk()
    progress("disk")
    v0_a, tau = disk_analytic(d)
    v0_bvp = disk_shoot(d, 21)
    run = disk_rollout(d, v0_bvp, 21)
    progress("disk as one MILP")
    v0_sim, solver = disk_simultaneous(d, 21)
    progress("disk convergence")
    convergence = [dict(N=n, v0=disk_shoot(d, n)) for n in CONVERGENCE_N]
    progress("ball")
    cone, box = ball_ivp(cone=True), ball_ivp(cone=False)
    cone_d = cone.p[-1] - cone.p[0]
    far = np.array([1.0, -0.1])
    h = Ball().h
    roll = round(first_rolling_sample(np.linalg.norm(cone.slip, axis=1)) * h, 12)
    roll_t, roll_o = (round(first_rolling_sample(box.slip[:, i]) * h, 12) for i in (0, 1))
    return {
        "disk": {
            "analytic": dict(v0=v0_a, tau=tau, paper=dict(v0=1.2402, tau=0.0114)),
            "bvp": dict(N=21, h=d.t_final / 22, v0=v0_bvp,
                        first_rolling_sample=first_rolling_sample(run.slip),
                        residuals=dict(
                            terminal_x=float(run.x[-1] - d.x_final),
                            terminal_rolling=float(run.slip[-1]),
                            complementarity=complementarity_residual(
                                run.slip[1:], run.force, d.cap)),
                        paper=dict(N=21, transition_time=0.0114)),
            "simultaneous": dict(v0=v0_sim, solver=solver),
            "convergence": convergence,
        },
        "ball": {
            "ivp_cone": dict(final_dxdy=cone_d.tolist(), rolling_time=roll,
                             paper=dict(final_dxdy=[0.5632, -0.0534])),
            "ivp_box": dict(final_dxdy=(box.p[-1] - box.p[0]).tolist(),
                            rolling_time_t=roll_t, rolling_time_o=roll_o,
                            paper=dict(rolling_time_t=0.30, rolling_time_o=0.37)),
            "bvp_consistent": dict(target=cone_d.tolist(),
                                   v0_xy=ball_bvp(cone_d).tolist(),
                                   paper=dict(target=[0.5632, -0.0534], v0_xy=[1.0, 0.5])),
            "bvp_far": dict(target=far.tolist(), v0_xy=ball_bvp(far).tolist(),
                            paper=dict(target=[1.0, -0.1])),
        },
    }


def plot(summary: dict, path: Path) -> None:
    """Write the panels of Figs. 2-4: the disk BVP, the ball IVPs and the ball BVP."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    d, ball = Disk(), summary["ball"]
    fig, ax = plt.subplots(3, 4, figsize=(19, 13))
    _disk_panels(ax[0], d, summary["disk"])
    cone = ball_ivp(cone=True)
    box = ball_ivp(cone=False)
    a = ax[1, 0]
    a.plot(cone.p[:, 0], cone.p[:, 1], "o-", ms=3, label="cone")
    a.plot(box.p[:, 0], box.p[:, 1], ":", label="box (LCP pyramid)")
    a.set_title("Fig. 3(b): X-Y trajectories")
    a.set_xlabel("x [m]")
    a.set_ylabel("y [m]")
    a.legend()
    for a, run, name in ((ax[1, 1], cone, "cone"), (ax[1, 2], box, "box")):
        a.plot(run.t[1:], run.force[:, 0], label="lambda_t")
        a.plot(run.t[1:], run.force[:, 1], label="lambda_o")
        a.set_title(f"Fig. 3(c/d): friction forces ({name})")
        a.set_xlabel("t [s]")
        a.set_ylabel("[N]")
        a.legend()
    for a, run, name in ((ax[1, 3], cone, "cone"), (ax[2, 0], box, "box")):
        a.plot(run.t, run.slip[:, 0], label="s_t")
        a.plot(run.t, run.slip[:, 1], label="s_o")
        a.set_title(f"Fig. 3(e/f): slip velocities ({name})")
        a.set_xlabel("t [s]")
        a.set_ylabel("[m/s]")
        a.legend()
    runs = {k: ball_ivp(ball[k]["v0_xy"]) for k in ("bvp_consistent", "bvp_far")}
    for k, run in runs.items():
        ax[2, 1].plot(run.p[:, 0], run.p[:, 1], "o-", ms=2, label=k)
        ax[2, 1].plot(*ball[k]["target"], "kx", ms=10)
        ax[2, 2].plot(run.t, np.linalg.norm(run.v, axis=1), label=k)
    ax[2, 1].set_title("Fig. 4(a): BVP trajectories (x: targets)")
    ax[2, 2].set_title("Fig. 4(b): speed |v| [m/s]")
    ax[2, 2].set_xlabel("t [s]")
    for a in ax[2, 1:3]:
        a.legend()
    conv = summary["disk"]["convergence"]
    err = [abs(c["v0"] / summary["disk"]["analytic"]["v0"] - 1.0) for c in conv]
    ax[2, 3].loglog([d.t_final / (c["N"] + 1) for c in conv], err, "o-")
    ax[2, 3].set_title("disk: |v0(h) / v0 - 1| against h")
    ax[2, 3].set_xlabel("h [s]")
    for a in ax.flat:
        a.grid(True)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _disk_panels(ax, d: Disk, disk: dict) -> None:
    """Draw Fig. 2: analytic lines against the N = 21 BVP samples (circles)."""
    v0 = disk["analytic"]["v0"]
    run = disk_rollout(d, disk["bvp"]["v0"], disk["bvp"]["N"])
    t = np.linspace(0.0, d.t_final, 300)
    x, v, om = disk_analytic_state(d, v0, t)
    for a, line, dots, name in ((ax[0], x, run.x, "x [m]"), (ax[1], v, run.v, "v [m/s]"),
                                (ax[2], om, run.omega, "omega [rad/s]"),
                                (ax[3], v + d.r * om, run.slip, "slip v + r omega [m/s]")):
        a.plot(t, line, "-", label="analytic")
        a.plot(run.t, dots, "o", label="BVP, N = 21")
        a.axvline(disk["analytic"]["tau"], color="0.5", ls="--")
        a.set_title(f"Fig. 2: {name}")
        a.set_xlabel("t [s]")
        a.legend()
