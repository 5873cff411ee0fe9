"""
A chunk of rollouts, as one worker runs it, and the batch assembled from chunks.

``run_chunk`` is the whole of a worker's job: it takes its process's engine
(engines.py) and rolls out each of its rows with
``QuasistaticSimulator.rollout_steps``, so the preload (q_ref), the warm
start and the robots' velocity carry along each rollout as in
``QuasistaticSimulator.rollout``.  A failed step keeps q and the rollout goes
on, as there.  A step that raises ``SolverLimitExceeded`` (the problem is
beyond the solver's licence) ends its rollout: that step's status is
"solver limit", the rest are "not run" and keep q, and the message is kept
in ``errors``; the other rollouts finish.  With gradients, each step's
dq_next/dv_cmd (``StepResult.gradients.dq_next_dv_cmd``) is kept, NaN where a step
failed.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Optional

import numpy as np

from quasistatic_drake.batch.engines import engine_for
from quasistatic_drake.batch.inputs import BatchInputs
from quasistatic_drake.errors import SolverLimitExceeded
from quasistatic_drake.scenario import Scenario

SOLVER_LIMIT = "solver limit"
NOT_RUN = "not run"


@dataclass(frozen=True)
class ChunkResult:
    """The rollouts start .. start + count - 1, run by process ``pid`` in ``seconds``."""

    start: int
    q: np.ndarray                          # (count, T + 1, n_q)
    status: np.ndarray                     # (count, T) str
    dq_next_dv_cmd: Optional[np.ndarray]   # (count, T, n_q, n_a)
    errors: tuple[tuple[int, str], ...]    # (rollout, message) of rollouts ended early
    pid: int
    seconds: float

    @property
    def count(self) -> int:
        """Return how many rollouts the chunk holds."""
        return len(self.q)


def run_chunk(scenario: Scenario, inputs: BatchInputs, start: int,
              gradients: bool) -> ChunkResult:
    """Roll out each row of ``inputs`` (rollouts start, start + 1, ...) on this engine."""
    began = time.perf_counter()
    engine = engine_for(scenario)
    n, T, n_q = inputs.rollouts, inputs.steps, engine.model.n_q
    q = np.empty((n, T + 1, n_q))
    status = np.full((n, T), NOT_RUN, dtype=object)
    grads = np.full((n, T, n_q, inputs.commands.shape[2]), np.nan) if gradients else None
    errors = []
    for i in range(n):
        q_ref = None if inputs.q_refs is None else inputs.q_refs[i]
        q[i, 0] = inputs.q0s[i]
        steps = engine.rollout_steps(engine.initial_state(inputs.q0s[i], q_ref=q_ref),
                                     inputs.step_commands(i),
                                     gradients="commands" if gradients else False)
        k = 0
        try:
            for k, result in enumerate(steps):
                q[i, k + 1] = result.q_next
                status[i, k] = result.status
                if gradients and result.gradients is not None:
                    grads[i, k] = result.gradients.dq_next_dv_cmd
        except SolverLimitExceeded as err:
            k = int(np.sum(status[i] != NOT_RUN))
            status[i, k] = SOLVER_LIMIT
            q[i, k + 1:] = q[i, k]
            errors.append((start + i, f"step {k}: {err}"))
    return ChunkResult(start, q, status.astype(str), grads, tuple(errors), os.getpid(),
                       time.perf_counter() - began)


def chunk_bounds(rollouts: int, chunk_size: int) -> list[tuple[int, int]]:
    """Return (start, stop) of each chunk of at most ``chunk_size`` rollouts, in order."""
    return [(a, min(a + chunk_size, rollouts)) for a in range(0, rollouts, chunk_size)]


def default_chunk_size(rollouts: int, workers: int, per_worker: int = 8) -> int:
    """
    Return a chunk size that gives each worker about ``per_worker`` chunks.

    Many chunks balance the load (the last chunk leaves the other workers
    idle); each costs Ray about 5 ms (benchmarks/batch_rollouts.py).
    """
    return max(1, -(-rollouts // (max(workers, 1) * per_worker)))


def assembled(chunks: list[ChunkResult]) -> tuple:
    """Return (q, status, dq_next_dv_cmd, errors) of the chunks, in rollout order."""
    chunks = sorted(chunks, key=lambda c: c.start)
    q = np.concatenate([c.q for c in chunks])
    status = np.concatenate([c.status.astype(object) for c in chunks]).astype(str)
    grads = (None if chunks[0].dq_next_dv_cmd is None
             else np.concatenate([c.dq_next_dv_cmd for c in chunks]))
    errors = {i: message for c in chunks for i, message in c.errors}
    return q, status, grads, errors
