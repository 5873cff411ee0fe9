"""
The joint velocity commands the node holds between messages.

Two kinds of message set them:

* an array of one velocity per robot joint, in /joint_states order
  (``~/velocity_commands``, the ForwardCommandController convention);
* (name, velocity) pairs for some of the joints (``~/joint_commands``).

A message is checked whole before anything changes: a wrong length, a value
that is not finite or beyond the engine's MAX_COMMAND, an unknown or repeated
joint name reject it with a :class:`Rejection` that says why, and the last
good command stays.  Each joint remembers when it was last commanded;
:meth:`CommandBuffer.current` gives zero for joints whose command is older
than the timeout.  Times are wall seconds on a monotonic clock, passed in by
the caller.  No rclpy here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from quasistatic_drake.inputs import MAX_COMMAND


@dataclass(frozen=True)
class Rejection:
    """Why a command message was refused: ``kind`` (size, finite, range, name) and a message."""

    kind: str
    message: str


class CommandBuffer:
    """The latest accepted velocity of every robot joint and when it arrived."""

    def __init__(self, joint_names: Sequence[str]):
        """Hold zero commands for ``joint_names`` (the /joint_states order)."""
        self.joint_names = tuple(joint_names)
        self._index = {name: i for i, name in enumerate(self.joint_names)}
        self._velocity = np.zeros(len(self.joint_names))
        self._received = np.full(len(self.joint_names), -np.inf)
        self.accepted = 0
        self.rejected = 0

    def set_array(self, values: Sequence[float], now: float) -> Optional[Rejection]:
        """Take one velocity per joint, in order; return a Rejection or None."""
        data = np.asarray(values, dtype=float).reshape(-1)
        n = len(self.joint_names)
        if data.size != n:
            return self._reject("size", f"expected {n} velocities, one per joint "
                                f"{list(self.joint_names)}, got {data.size}")
        bad = self._not_finite(data, self.joint_names)
        if bad:
            return bad
        self._velocity[:] = data
        self._received[:] = now
        self.accepted += 1
        return None

    def set_named(self, names: Sequence[str], values: Sequence[float],
                  now: float) -> Optional[Rejection]:
        """Take velocities for the named joints (others keep theirs); return a Rejection."""
        names = list(names)
        data = np.asarray(values, dtype=float).reshape(-1)
        if not names:
            return self._reject("size", "the message names no joint")
        if data.size != len(names):
            return self._reject("size", f"{len(names)} joint names but {data.size} "
                                "velocities; the velocity field needs one per name")
        unknown = [n for n in names if n not in self._index]
        if unknown:
            return self._reject("name", f"unknown joint(s) {unknown}; the joints are "
                                f"{list(self.joint_names)}")
        if len(set(names)) != len(names):
            repeated = sorted({n for n in names if names.count(n) > 1})
            return self._reject("name", f"joint(s) {repeated} named more than once")
        bad = self._not_finite(data, names)
        if bad:
            return bad
        idx = np.array([self._index[n] for n in names], dtype=int)
        self._velocity[idx] = data
        self._received[idx] = now
        self.accepted += 1
        return None

    def current(self, now: float, timeout: float) -> np.ndarray:
        """Return the velocities to apply at ``now``: stale joints (age > timeout) are zero."""
        fresh = (now - self._received) <= timeout
        return np.where(fresh, self._velocity, 0.0)

    def stale(self, now: float, timeout: float) -> list[str]:
        """Return the joints with a non-zero command that has gone stale."""
        old = ((now - self._received) > timeout) & (self._velocity != 0.0)
        return [self.joint_names[i] for i in np.flatnonzero(old)]

    def clear(self) -> None:
        """Forget every command (zero velocity)."""
        self._velocity[:] = 0.0
        self._received[:] = -np.inf

    def _not_finite(self, data: np.ndarray, names: Sequence[str]) -> Optional[Rejection]:
        bad = np.flatnonzero(~np.isfinite(data))
        if bad.size:
            return self._reject("finite", f"non-finite velocity for joint(s) "
                                f"{[names[i] for i in bad]}: {data.tolist()}")
        bad = np.flatnonzero(np.abs(data) > MAX_COMMAND)
        if bad.size:
            return self._reject("range", f"velocity beyond +-{MAX_COMMAND:g} (m/s or rad/s) "
                                f"for joint(s) {[names[i] for i in bad]}: {data.tolist()}")
        return None

    def _reject(self, kind: str, message: str) -> Rejection:
        self.rejected += 1
        return Rejection(kind, message)
