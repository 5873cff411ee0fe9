"""
The model files' joint position limits as bounds on the next velocity v'.

Every formulation takes these bounds (``StepProblem.v_lower``/``v_upper``).
This module imports neither Drake nor ROS.
"""

import numba
import numpy as np

# [m or rad] a joint this far beyond a limit is on it: a start there is accepted.
LIMIT_SLACK = 1e-9


@numba.njit(cache=True)
def joint_limit_velocity_bounds(n_v, h, q, q_idx, v_idx, q_lower, q_upper):
    """
    Return bounds on v' that keep joints q[q_idx] within [q_lower, q_upper] after the step.

    A joint on a limit within round-off (LIMIT_SLACK; the input checks refuse a q
    further beyond) may stay where it is: the bound is 0, not a push back.
    Unlimited velocities get -inf and +inf.
    """
    v_lower = np.full(n_v, -np.inf)
    v_upper = np.full(n_v, np.inf)
    for k in range(q_idx.shape[0]):
        q_j = q[q_idx[k]]
        v_lower[v_idx[k]] = (min(q_lower[k], q_j) - q_j) / h
        v_upper[v_idx[k]] = (max(q_upper[k], q_j) - q_j) / h
    return v_lower, v_upper
