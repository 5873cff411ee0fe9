"""
The errors a caller of the engine handles: bad input, and a problem beyond a solver's reach.

This module imports nothing heavy, so the formulations (pure array code) and
the engine share these types.
"""


class CommandError(ValueError):
    """A velocity command (or q, q_ref, a warm start) that cannot be used; nothing was changed."""


class SolverLimitExceeded(RuntimeError):
    """
    A step's problem is beyond what the installed solver may solve (a licence's size limit).

    :meth:`QuasistaticSimulator.step` raises it to the caller instead of
    reporting a failed step: no later step could succeed either, and the
    message says which setting to change.
    """
