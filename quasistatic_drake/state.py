"""
State: everything that carries from one quasistatic step to the next.

A step is ``result = sim.step(state, v_cmd)``, then ``state =
result.state_next``: the simplest loop is the right one.  The state holds

* ``q``: the configuration;
* ``q_ref``: the robots' reference (robots in scenario order, joints in
  ``robot_joint_names`` order).  Under the QP it is the spring reference of
  Pang & Tedrake 2021's impedance model: each step advances it by h v_cmd,
  and in contact it runs ahead of the joints, which is what squeezes a
  grasp.  A loop that dropped it would lose the preload every step;
* ``robot_velocity``: the robots' joint velocities under the scenario's
  ``robot_inertia`` (None without it);
* ``warm_start``: the formulation's warm start (the MIQP's MIP start; the
  QP's contact impulses of the last step).  It changes how fast a step is
  solved, never its result beyond the solver's tolerance.

``QuasistaticSimulator.initial_state`` builds and checks one; a State is
immutable (its arrays are read-only), so a result's state can be kept,
compared and reused without copies.  This module imports neither Drake
nor ROS.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional

import numpy as np


def frozen_array(values) -> np.ndarray:
    """Return a read-only float copy of ``values``."""
    array = np.array(values, dtype=float)
    array.setflags(write=False)
    return array


@dataclass(frozen=True)
class State:
    """The quasistatic state (module docstring); build it with ``sim.initial_state()``."""

    q: np.ndarray
    q_ref: np.ndarray
    robot_velocity: Optional[np.ndarray] = None
    warm_start: Any = None

    def __post_init__(self):
        """Keep read-only copies of the arrays."""
        object.__setattr__(self, "q", frozen_array(self.q))
        object.__setattr__(self, "q_ref", frozen_array(self.q_ref))
        if self.robot_velocity is not None:
            object.__setattr__(self, "robot_velocity", frozen_array(self.robot_velocity))

    def with_warm_start(self, warm_start: Any) -> "State":
        """Return this state with another warm start."""
        return replace(self, warm_start=warm_start)
