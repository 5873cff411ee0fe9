"""
Where a batch's chunks run: in this process, in local processes, or on Ray.

Every backend runs the same function on the same chunks (chunks.run_chunk),
so the results are the same, bit for bit, whichever runs them.

* ``serial``: this process, one chunk after another.
* ``process``: the standard library's ``ProcessPoolExecutor`` (spawned
  processes: Drake, Gurobi and numba are not fork-safe), each worker
  building its engine once, as it starts; the pool stays up for the next
  batch until ``shutdown_workers()``.
* ``ray``: one Ray task per chunk.  Without ``address`` a local Ray is
  started (``num_cpus`` = workers, no dashboard) unless one is already
  running in this process; with it, ``ray.init(address=...)`` joins a
  cluster.  Ray schedules the tasks and moves their data; the models'
  files must be at the same paths on every node (docs/batch.md).

Faults.  A worker process that dies in the middle of a chunk (killed, out of
memory) loses that chunk, and the chunk is run again on a live worker:
under ``process`` the broken pool is replaced and every unfinished chunk
is submitted to the new one; under ``ray`` the task's ``WorkerCrashedError``
resubmits it, and Ray places it on another worker.  A chunk is run at most
MAX_ATTEMPTS times; a chunk that raises an exception of its own (not a
lost worker) stops the batch with that exception.
"""

from __future__ import annotations

import multiprocessing
import os
import socket
from concurrent.futures import as_completed, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Callable, Optional

from quasistatic_drake.batch.chunks import ChunkResult, run_chunk
from quasistatic_drake.batch.engines import engine_for
from quasistatic_drake.batch.inputs import BatchInputs
from quasistatic_drake.scenario import Scenario

BACKENDS = ("serial", "process", "ray")
MAX_ATTEMPTS = 3       # runs of one chunk before a batch gives up on lost workers
CONNECT_TIMEOUT = 10.0  # [s] for a Ray address to accept a connection (_check_reachable)

OnChunk = Optional[Callable[[ChunkResult], None]]


class BatchError(RuntimeError):
    """A batch could not be completed (its workers kept dying, or Ray was unreachable)."""


@dataclass(frozen=True)
class Chunk:
    """Rollouts start .. start + inputs.rollouts - 1 of a batch."""

    index: int
    start: int
    inputs: BatchInputs


@dataclass(frozen=True)
class BackendRun:
    """What a backend returns: the chunks' results and how many chunk runs were lost."""

    results: tuple[ChunkResult, ...]
    reruns: int


def run_serial(scenario: Scenario, chunks: list[Chunk], gradients: bool,
               on_chunk: OnChunk = None) -> BackendRun:
    """Run every chunk in this process, in order."""
    results = []
    for chunk in chunks:
        results.append(run_chunk(scenario, chunk.inputs, chunk.start, gradients))
        _report(on_chunk, results[-1])
    return BackendRun(tuple(results), 0)


def run_processes(scenario: Scenario, chunks: list[Chunk], gradients: bool, workers: int,
                  on_chunk: OnChunk = None) -> BackendRun:
    """Run the chunks on ``workers`` spawned processes; rerun those a lost worker held."""
    pending = {chunk.index: chunk for chunk in chunks}
    results: dict[int, ChunkResult] = {}
    attempts = {chunk.index: 0 for chunk in chunks}
    reruns = 0
    while pending:
        _count_attempt(attempts, pending)
        try:
            pool = _pool(workers, scenario)
            futures = {pool.submit(run_chunk, scenario, c.inputs, c.start, gradients): c.index
                       for c in pending.values()}
        except BrokenProcessPool:             # a worker died since the last batch
            shutdown_workers()
            continue
        for future in as_completed(futures):
            try:
                result = future.result()
            except BrokenProcessPool:
                continue                      # a worker died: rerun in a new pool
            index = futures[future]
            results[index] = result
            del pending[index]
            _report(on_chunk, result)
        if pending:
            shutdown_workers()
            reruns += len(pending)
    return BackendRun(tuple(results[i] for i in sorted(results)), reruns)


_POOL: dict[int, ProcessPoolExecutor] = {}     # {workers: the pool}, at most one


def _pool(workers: int, scenario: Scenario) -> ProcessPoolExecutor:
    """
    Return this process's pool of ``workers`` processes, started on first use.

    The pool outlives the batch, so a planner that calls rollout_batch in a
    loop pays the workers' start (Python, Drake, the engine: about 2 s)
    once; each worker keeps its engines (engines.py).  A call with another
    number of workers replaces it; ``shutdown_workers`` ends it.
    """
    if workers not in _POOL:
        shutdown_workers()
        _POOL[workers] = ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("spawn"), initializer=engine_for,
            initargs=(scenario,))
    return _POOL[workers]


def shutdown_workers() -> None:
    """End the local worker processes of the 'process' backend (they restart when needed)."""
    while _POOL:
        _, pool = _POOL.popitem()
        pool.shutdown(wait=True, cancel_futures=True)


def run_ray(scenario: Scenario, chunks: list[Chunk], gradients: bool,
            workers: Optional[int], address: Optional[str],
            on_chunk: OnChunk = None) -> BackendRun:
    """Run one Ray task per chunk (module docstring); at most ``workers`` at once if given."""
    ray = _ray(workers, address)
    task = ray.remote(num_cpus=1, max_retries=0)(run_chunk)
    scenario_ref = ray.put(scenario)
    queue = list(reversed(chunks))
    limit = workers or len(chunks)
    attempts = {chunk.index: 0 for chunk in chunks}
    running: dict = {}
    results: dict[int, ChunkResult] = {}
    reruns = 0

    def submit() -> None:
        while queue and len(running) < limit:
            chunk = queue.pop()
            _count_attempt(attempts, {chunk.index: chunk})
            running[task.remote(scenario_ref, chunk.inputs, chunk.start, gradients)] = chunk

    submit()
    while running:
        (done,), _ = ray.wait(list(running), num_returns=1)
        chunk = running.pop(done)
        try:
            result = ray.get(done)
        except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError):
            reruns += 1
            queue.append(chunk)
            submit()
            continue
        except ray.exceptions.RayTaskError as err:
            raise err.as_instanceof_cause() from None
        results[chunk.index] = result
        submit()                   # before the report: no worker waits on the caller
        _report(on_chunk, result)
    return BackendRun(tuple(results[i] for i in sorted(results)), reruns)


def ray_workers(workers: Optional[int], address: Optional[str]) -> int:
    """Return how many chunks run at once on Ray: ``workers``, else the cluster's CPUs."""
    ray = _ray(workers, address)
    return workers or max(1, int(ray.cluster_resources().get("CPU", 1)))


def _ray(workers: Optional[int], address: Optional[str]):
    """Return the ray module, connected: the running Ray, a cluster, or a new local one."""
    try:
        import ray
    except ImportError:
        raise BatchError("backend 'ray' needs Ray (pip install -r requirements-dev.txt, "
                         "which pins it), or choose backend 'process'.") from None
    if ray.is_initialized():
        current = ray.get_runtime_context().gcs_address
        if address is not None and not _same_ray(ray, address, current):
            raise BatchError(f"backend 'ray': this process is already connected to the Ray at "
                             f"{current}, not {address}. Fix: ray.shutdown() first, or leave "
                             "address out to use the connected Ray.")
        return ray
    if address is not None:
        _check_reachable(address)
    try:
        if address is not None:
            ray.init(address=address, log_to_driver=False)
        else:               # "local": a new instance, never a cluster `ray start` left behind
            ray.init(address="local", num_cpus=workers or os.cpu_count(),
                     include_dashboard=False, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as err:
        cause = f" ({err.__cause__})" if err.__cause__ is not None else ""
        raise BatchError(f"backend 'ray': could not start or reach Ray at "
                         f"{address or 'a new local instance'}: {err}{cause}. Fix: check the "
                         "address (`ray status` on the head node); a cluster started by `ray "
                         "start` uses token authentication, so set RAY_AUTH_MODE=token with its "
                         "token in ~/.ray/auth_token (or RAY_AUTH_TOKEN); or leave address out "
                         "for a local Ray.") from None
    return ray


def _check_reachable(address: str) -> None:
    """
    Raise BatchError unless a host:port address accepts a TCP connection within CONNECT_TIMEOUT.

    ``ray.init`` retries an unreachable address for minutes (measured: still
    waiting after 5 minutes for 127.0.0.1:1); this fails at once instead.
    """
    if address == "auto" or address.startswith("ray://") or ":" not in address:
        return
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT).close()
    except (OSError, ValueError) as err:
        raise BatchError(f"backend 'ray': nothing answers at {address} ({err}). Fix: the head "
                         "node's address as `ray start --head` printed it (HOST:PORT, port "
                         "6379 by default), or leave address out for a local Ray.") from None


def _same_ray(ray, address: str, current: str) -> bool:
    """Return whether ``address`` names the Ray at ``current`` (host:port; local hosts alike)."""
    if address == "auto" or ":" not in address or address.startswith("ray://"):
        return True           # not comparable: Ray resolved it when the connection was made
    local = {"localhost", "127.0.0.1", ray.util.get_node_ip_address()}
    (host, port), (now_host, now_port) = address.rsplit(":", 1), current.rsplit(":", 1)
    return port == now_port and (host == now_host or {host, now_host} <= local)


def _count_attempt(attempts: dict[int, int], chunks: dict[int, Chunk]) -> None:
    """Count one more run of each chunk; BatchError past MAX_ATTEMPTS."""
    for index, chunk in chunks.items():
        attempts[index] += 1
        if attempts[index] > MAX_ATTEMPTS:
            raise BatchError(f"chunk {index} (rollouts {chunk.start} to "
                             f"{chunk.start + chunk.inputs.rollouts - 1}) lost its worker "
                             f"{MAX_ATTEMPTS} times. Fix: look for what kills the workers "
                             "(memory: dmesg; a cluster node leaving), or use fewer workers. "
                             "Under backend 'process', a script must run its batch under "
                             "`if __name__ == '__main__':`, because spawned workers import "
                             "it again.")


def _report(on_chunk: OnChunk, result: ChunkResult) -> None:
    if on_chunk is not None:
        on_chunk(result)
