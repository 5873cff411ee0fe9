"""
A batch's inputs, checked once in the caller's process before any rollout runs.

``rollout_batch`` takes ``q0s`` (N, n_q) and ``v_cmds``, a mapping from robot
names to (N, T, n_joints) arrays; robots left out hold still.  They are
checked here against the engine (shapes, finite values, the joint coupling
of every q0) and stacked into one (N, T, n_a) array, robots in scenario
order, so a worker gets plain arrays.  Every error is a CommandError that
names the argument, the rollout and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

import numpy as np

from quasistatic_drake.errors import CommandError


@dataclass(frozen=True)
class BatchInputs:
    """Checked rollout inputs: q0s (N, n_q), commands (N, T, n_a), q_refs (N, n_a) or None."""

    q0s: np.ndarray
    commands: np.ndarray
    q_refs: Optional[np.ndarray]
    robots: tuple[tuple[str, int], ...]      # (name, joints) in scenario order

    @property
    def rollouts(self) -> int:
        """Return N."""
        return len(self.q0s)

    @property
    def steps(self) -> int:
        """Return T."""
        return self.commands.shape[1]

    def rows(self, start: int, stop: int) -> "BatchInputs":
        """Return the inputs of rollouts start .. stop - 1."""
        q_refs = None if self.q_refs is None else self.q_refs[start:stop]
        return BatchInputs(self.q0s[start:stop], self.commands[start:stop], q_refs, self.robots)

    def step_commands(self, i: int) -> list[dict[str, np.ndarray]]:
        """Return rollout i's commands as QuasistaticSimulator.rollout takes them."""
        return [by_robot(u, self.robots) for u in self.commands[i]]


def robot_layout(engine) -> tuple[tuple[str, int], ...]:
    """Return (robot name, commanded joints) of the engine's robots, in scenario order."""
    return tuple((r.name, len(r.joint_names)) for r in engine.model.robots)


def robot_columns(robots: tuple[tuple[str, int], ...]) -> dict[str, slice]:
    """Return each robot's columns in a command stacked over all robots (n_a)."""
    columns, offset = {}, 0
    for name, n in robots:
        columns[name] = slice(offset, offset + n)
        offset += n
    return columns


def by_robot(stacked: np.ndarray, robots: tuple[tuple[str, int], ...]) -> dict[str, np.ndarray]:
    """Return {robot: its columns of the last axis} of a stacked command (..., n_a)."""
    return {name: stacked[..., s] for name, s in robot_columns(robots).items()}


def checked_inputs(engine, q0s, v_cmds, q_refs=None) -> BatchInputs:
    """Return the checked, stacked inputs of a batch (module docstring); CommandError if bad."""
    robots = robot_layout(engine)
    q0s = _array(q0s, "q0s", 2)
    if q0s.shape[1] != engine.model.n_q or not len(q0s):
        raise CommandError(f"q0s must have shape (N, {engine.model.n_q}) with N >= 1 for this "
                           f"scenario, got {q0s.shape}. Fix: stack N rows like "
                           "default_positions().")
    for i, q in enumerate(q0s):
        try:
            engine.checked_positions(q)
        except CommandError as err:
            raise CommandError(f"q0s[{i}]: {err}") from None
    commands = _commands(v_cmds, robots, len(q0s))
    if q_refs is not None:
        n_a = commands.shape[2]
        q_refs = _array(q_refs, "q_refs", 2)
        if q_refs.shape != (len(q0s), n_a):
            raise CommandError(f"q_refs must have shape ({len(q0s)}, {n_a}) (one reference per "
                               f"rollout, robots in scenario order), got {q_refs.shape}. Fix: "
                               "None starts each rollout at its q0's robot positions.")
        _finite(q_refs, "q_refs")
    return BatchInputs(q0s, commands, q_refs, robots)


def _commands(v_cmds, robots: tuple[tuple[str, int], ...], n: int) -> np.ndarray:
    """Return v_cmds stacked as (N, T, n_a), robots in scenario order, zeros for those left out."""
    names = [name for name, _ in robots]
    if not isinstance(v_cmds, Mapping) or not v_cmds:
        got = "an empty mapping" if isinstance(v_cmds, Mapping) else type(v_cmds).__name__
        raise CommandError(f"v_cmds must map robot names to (N, T, joints) arrays, got "
                           f"{got}. Fix: "
                           f"{{{names[0] if names else 'robot'!r}: array}} for the robots "
                           f"{names}.")
    unknown = sorted(set(v_cmds) - set(names))
    if unknown:
        raise CommandError(f"v_cmds names unknown robot(s) {unknown}. Robots in this scenario: "
                           f"{names}.")
    given = {name: _array(value, f"v_cmds[{name!r}]", 3) for name, value in v_cmds.items()}
    steps = {value.shape[1] for value in given.values()}
    if len(steps) > 1:
        raise CommandError(f"v_cmds: every robot needs the same number of steps T, got "
                           f"{ {k: v.shape[1] for k, v in given.items()} }.")
    T = steps.pop()
    blocks = []
    for name, joints in robots:
        block = given.get(name, np.zeros((n, T, joints)))
        if block.shape != (n, T, joints):
            raise CommandError(f"v_cmds[{name!r}] must have shape ({n}, {T}, {joints}) (N "
                               f"rollouts, T steps, {joints} joints), got {block.shape}.")
        _finite(block, f"v_cmds[{name!r}]")
        blocks.append(block)
    return np.concatenate(blocks, axis=2) if blocks else np.zeros((n, T, 0))


def _array(value, name: str, ndim: int) -> np.ndarray:
    """Return value as a float array with ``ndim`` dimensions (CommandError otherwise)."""
    try:
        out = np.array(value, dtype=float)
    except (TypeError, ValueError):
        raise CommandError(f"{name} must be an array of numbers, got "
                           f"{type(value).__name__}.") from None
    if out.ndim != ndim:
        raise CommandError(f"{name} must have {ndim} dimensions, got shape {out.shape}.")
    return out


def _finite(value: np.ndarray, name: str) -> None:
    """Raise CommandError naming the first non-finite entry of ``value``."""
    bad = np.argwhere(~np.isfinite(value))
    if len(bad):
        raise CommandError(f"{name} has a non-finite entry at {tuple(int(i) for i in bad[0])} "
                           f"({len(bad)} in all). Fix: finite numbers only.")
