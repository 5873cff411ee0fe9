"""
Bundled gradients: the step's B = dq_next/dv_cmd averaged over perturbed commands.

Randomized smoothing (Suh, Pang et al.; qsim's ``CalcBundledB``, first
order): for the step f(q, u) and w ~ N(0, sigma^2 I),

    B_bar(u) = E_w[ df/du (q, u + w) ] = d/du E_w[ f(q, u + w) ],

the gradient of the smoothed step, which exists and is informative where
f's own gradient jumps (a contact that is made or broken within the
noise).  It is estimated by the mean of B over S samples, with the
standard error of that mean; samples whose step failed have no B and are
left out (and counted).  The samples run as one-step rollouts through
``rollout_batch``, on any of its backends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

import numpy as np

from quasistatic_drake.errors import CommandError


@dataclass(frozen=True)
class BundledGradient:
    """B_bar (n_q x n_a, robots in scenario order) over ``samples`` steps, ``failed`` left out."""

    B: np.ndarray
    standard_error: np.ndarray
    samples: int
    failed: int


def perturbed(nominal: np.ndarray, sigma, samples: int, seed: int) -> np.ndarray:
    """
    Return (samples,) + nominal.shape commands nominal + sigma w, w ~ N(0, I).

    ``nominal`` is one command (n_a,) or a sequence (T, n_a); ``sigma`` is
    one number or one per joint (n_a,).  The seed's generator draws w.
    """
    nominal = np.asarray(nominal, dtype=float)
    w = np.random.default_rng(seed).standard_normal((samples,) + nominal.shape)
    return nominal + np.asarray(sigma, dtype=float) * w


def bundled_mean(B: np.ndarray) -> BundledGradient:
    """Return the mean and its standard error over the samples (axis 0) whose B is finite."""
    ok = np.all(np.isfinite(B), axis=(1, 2))
    kept = B[ok]
    if not len(kept):
        raise CommandError(f"bundled gradient: all {len(B)} perturbed steps failed, so there "
                           "is no B to average. Fix: a smaller sigma, or a state where the "
                           "step solves.")
    spread = kept.std(axis=0, ddof=1) if len(kept) > 1 else np.full(kept.shape[1:], np.inf)
    return BundledGradient(kept.mean(axis=0), spread / np.sqrt(len(kept)), len(kept),
                           int(np.sum(~ok)))


def bundled_gradient(scenario, q: np.ndarray, v_cmd: Mapping[str, np.ndarray], sigma,
                     samples: int, seed: int = 0, q_ref: Optional[np.ndarray] = None,
                     backend: str = "serial", workers: Optional[int] = None,
                     address: Optional[str] = None) -> BundledGradient:
    """
    Return the bundled B at (q, v_cmd): the mean of dq_next/dv_cmd over ``samples`` commands.

    ``v_cmd`` maps robot names to joint velocities (robots left out hold
    still); ``sigma`` is the noise's standard deviation, one number or one
    per commanded joint (robots in scenario order) [m/s or rad/s];
    ``q_ref`` the robots' reference (None: the robot positions of q).  The
    same seed gives the same samples on every backend.
    """
    from quasistatic_drake.batch import rollout_batch, scenario_of
    from quasistatic_drake.batch.engines import engine_for
    from quasistatic_drake.batch.inputs import by_robot, robot_layout

    if not isinstance(samples, (int, np.integer)) or isinstance(samples, bool) or samples < 2:
        raise CommandError(f"samples must be an integer >= 2 (the standard error needs two), "
                           f"got {samples!r}.")
    scenario = scenario_of(scenario)
    engine = engine_for(scenario)
    q = engine.checked_positions(q)
    stacked = engine.checked_command(v_cmd)
    sigma = np.asarray(sigma, dtype=float)
    if sigma.ndim > 1 or sigma.size not in (1, len(stacked)) or not np.all(sigma >= 0.0):
        raise CommandError(f"sigma must be one number >= 0 or {len(stacked)} of them (one per "
                           f"commanded joint), got {sigma!r}.")
    u = perturbed(stacked, sigma, int(samples), seed)
    v_cmds = by_robot(u[:, None, :], robot_layout(engine))      # one step per sample
    q_refs = None if q_ref is None else np.tile(np.asarray(q_ref, dtype=float), (samples, 1))
    result = rollout_batch(scenario, np.tile(q, (samples, 1)), v_cmds, backend=backend,
                           workers=workers, address=address, gradients=True, q_refs=q_refs)
    return bundled_mean(result.dq_next_dv_cmd[:, 0])
