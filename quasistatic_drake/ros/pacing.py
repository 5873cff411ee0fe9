"""
How many steps the node should take now to run at ``real_time_rate``.

The pacer keeps an anchor (wall time, steps taken).  At rate r and step h,
step n is due at wall time anchor + (n - n_anchor) h / r.  When the node falls
more than ``max_lag`` wall seconds behind (a slow step, a breakpoint), the
anchor moves to now instead of stepping in a burst to catch up, and
:meth:`Pacer.due` reports it.  Rate 0 means as fast as possible: every call
allows ``burst`` steps.  No rclpy here: wall times are passed in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Due:
    """Steps to take now, and whether the pacer gave up catching up (fell behind)."""

    steps: int
    fell_behind: bool = False


class Pacer:
    """Real-time pacing of a fixed-step simulation (module docstring)."""

    def __init__(self, time_step: float, rate: float, burst: int = 50, max_lag: float = 0.5):
        """Pace steps of ``time_step`` sim seconds at ``rate`` (0: unlimited)."""
        self.time_step = time_step
        self.burst = burst
        self.max_lag = max_lag
        self.rate = rate
        self._anchor_wall = 0.0
        self._anchor_steps = 0

    def restart(self, wall: float, steps: int, rate: float | None = None) -> None:
        """Count from (wall, steps): after a pause, a reset or a rate change."""
        if rate is not None:
            self.rate = rate
        self._anchor_wall, self._anchor_steps = wall, steps

    def period(self) -> float:
        """Return the wall seconds between two steps (0 when unlimited)."""
        return self.time_step / self.rate if self.rate > 0.0 else 0.0

    def due(self, wall: float, steps: int) -> Due:
        """Return how many steps to take at wall time ``wall`` after ``steps`` steps."""
        if self.rate <= 0.0:
            return Due(self.burst)
        target = self._anchor_steps + math.floor(
            (wall - self._anchor_wall) / self.period() + 1e-9)
        behind = target - steps
        if behind * self.period() > self.max_lag:
            self.restart(wall, steps + 1)
            return Due(1, fell_behind=True)
        return Due(max(0, min(behind, self.burst)))
