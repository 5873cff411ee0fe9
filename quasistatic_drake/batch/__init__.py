"""
Many rollouts at once: ``rollout_batch`` on this machine or, unchanged, on a Ray cluster.

    from quasistatic_drake.batch import rollout_batch
    result = rollout_batch("config/two_pads_lift.yaml", q0s, {"pads": v}, backend="process")
    result.q            # (N, T + 1, n_q)
    result.status       # (N, T): "optimal", "infeasible", ...

The rollouts are cut into chunks (chunks.py); each worker builds one engine
and runs whole chunks on it (engines.py); the backends (backends.py) run the
chunks in this process, in local processes or on Ray, with the same results
bit for bit.  ``bundled_gradient`` (smoothing.py) averages the step's
dq_next/dv_cmd over perturbed commands, as qsim's ``CalcBundledB``.
docs/batch.md is the user's guide.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Union

import numpy as np

from quasistatic_drake.batch.backends import (BACKENDS, BatchError, Chunk, OnChunk,
                                              ray_workers, run_processes, run_ray, run_serial,
                                              shutdown_workers)
from quasistatic_drake.batch.chunks import (assembled, chunk_bounds, ChunkResult,
                                            default_chunk_size, NOT_RUN, SOLVER_LIMIT)
from quasistatic_drake.batch.engines import engine_for
from quasistatic_drake.batch.inputs import BatchInputs, checked_inputs
from quasistatic_drake.batch.smoothing import bundled_gradient, BundledGradient
from quasistatic_drake.errors import CommandError
from quasistatic_drake.scenario import Scenario

__all__ = ["BACKENDS", "BatchError", "BatchResult", "bundled_gradient", "BundledGradient",
           "ChunkResult", "NOT_RUN", "rollout_batch", "scenario_of", "shutdown_workers",
           "SOLVER_LIMIT"]


@dataclass(frozen=True)
class BatchResult:
    """
    The rollouts of a batch, in the order of their q0s.

    ``q[i, 0]`` is q0s[i] and ``q[i, k + 1]`` follows step k; ``status[i, k]``
    is step k's status ("optimal" when it advanced; a failed step keeps q).
    ``dq_next_dv_cmd[i, k]`` is step k's derivative (n_q x n_a, robots in
    scenario order), NaN where the step failed; None without gradients.
    ``errors`` maps a rollout that ended early (status "solver limit", then
    "not run") to why.  ``reruns`` counts chunk runs lost with their worker
    and run again.
    """

    q: np.ndarray
    status: np.ndarray
    dq_next_dv_cmd: Optional[np.ndarray]
    errors: Mapping[int, str]
    backend: str
    workers: int
    chunks: int
    reruns: int
    seconds: float

    @property
    def success(self) -> np.ndarray:
        """Return (N, T) booleans: whether each step advanced."""
        return self.status == "optimal"

    @property
    def failed_steps(self) -> np.ndarray:
        """Return how many steps of each rollout did not advance (N,)."""
        return np.sum(~self.success, axis=1)


def scenario_of(scenario: Union[Scenario, str, os.PathLike]) -> Scenario:
    """Return a Scenario given one or the path of its YAML file (ScenarioError if bad)."""
    if isinstance(scenario, Scenario):
        return scenario
    if isinstance(scenario, (str, os.PathLike)):
        return Scenario.from_yaml(Path(scenario))
    raise CommandError(f"scenario must be a Scenario or the path of a scenario YAML file, got "
                       f"{type(scenario).__name__}.")


def rollout_batch(scenario: Union[Scenario, str, os.PathLike], q0s, v_cmds,
                  backend: str = "serial", workers: Optional[int] = None,
                  address: Optional[str] = None, gradients: bool = False, q_refs=None,
                  chunk_size: Optional[int] = None, on_chunk: OnChunk = None) -> BatchResult:
    """
    Roll out N initial states under N command sequences; return arrays (BatchResult).

    ``q0s`` is (N, n_q); ``v_cmds`` maps robot names to (N, T, joints)
    arrays (robots left out hold still); ``q_refs`` (N, n_a) is each
    rollout's starting reference (None: its q0's robot positions).  The
    reference (the QP's preload), the warm start and the robots' velocity
    carry along each rollout as in ``QuasistaticSimulator.rollout``.
    ``backend`` is "serial", "process" or "ray" (backends.py); ``workers``
    is how many run at once (default: this machine's cores; under Ray with
    an ``address``, the cluster's CPUs); ``address`` joins a Ray cluster.
    ``gradients=True`` fills ``dq_next_dv_cmd``.  ``chunk_size`` rollouts go
    to a worker at a time (default: about 8 chunks per worker).
    ``on_chunk`` sees each finished chunk (a progress bar).  Bad input raises
    CommandError (ScenarioError for a bad scenario file) before anything runs.
    """
    began = time.perf_counter()
    scenario = scenario_of(scenario)
    if backend not in BACKENDS:
        raise CommandError(f"backend must be one of {list(BACKENDS)}, got {backend!r}.")
    workers = _checked_count(workers, "workers")
    chunk_size = _checked_count(chunk_size, "chunk_size")
    if backend == "serial" and workers not in (None, 1):
        raise CommandError(f"workers={workers} with backend 'serial', which runs in this "
                           "process alone. Fix: backend='process' or 'ray' for more workers.")
    if address is not None and backend != "ray":
        raise CommandError(f"address {address!r} is for backend 'ray' (a Ray cluster), not "
                           f"{backend!r}. Fix: backend='ray', or leave address out.")
    if not isinstance(gradients, bool):
        raise CommandError(f"gradients must be True or False, got {gradients!r}.")
    engine = engine_for(scenario)       # checks the scenario here, and serves 'serial'
    inputs = checked_inputs(engine, q0s, v_cmds, q_refs)
    if gradients:
        engine.gradient_request("commands")
    if backend == "serial":
        workers = 1
    elif workers is None:
        workers = ray_workers(None, address) if backend == "ray" else (os.cpu_count() or 1)
    chunks = _chunks(inputs, chunk_size or default_chunk_size(inputs.rollouts, workers))
    if backend == "serial":
        run = run_serial(scenario, chunks, gradients, on_chunk)
    elif backend == "process":
        run = run_processes(scenario, chunks, gradients, workers, on_chunk)
    else:
        run = run_ray(scenario, chunks, gradients, workers, address, on_chunk)
    q, status, grads, errors = assembled(list(run.results))
    return BatchResult(q=q, status=status, dq_next_dv_cmd=grads, errors=errors,
                       backend=backend, workers=workers, chunks=len(chunks),
                       reruns=run.reruns, seconds=time.perf_counter() - began)


def _chunks(inputs: BatchInputs, size: int) -> list[Chunk]:
    """Return the batch cut into chunks of at most ``size`` rollouts."""
    return [Chunk(k, a, inputs.rows(a, b))
            for k, (a, b) in enumerate(chunk_bounds(inputs.rollouts, size))]


def _checked_count(value, name: str) -> Optional[int]:
    """Return a positive int or None (CommandError otherwise)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise CommandError(f"{name} must be a positive integer or None, got {value!r}.")
    return int(value)
