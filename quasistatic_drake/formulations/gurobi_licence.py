"""
Gurobi's restricted pip licence: a model too large for it is the formulation's own error.

The pip wheel's licence caps a model's size (2000 variables and constraints,
200 variables with a quadratic objective).  Gurobi reports that as a
GurobiError with errno SIZE_LIMIT_EXCEEDED at optimize(); the MIQP and the
LCP's certificate turn it into MiqpTooLarge and LcpTooLarge, whose messages
give the fixes.
"""

from __future__ import annotations

from typing import Callable


def optimize_within_licence(model, too_large: Callable[[], Exception]) -> None:
    """Optimise (or resume) a gurobipy model; raise too_large() if the licence is too small."""
    import gurobipy as gp
    try:
        model.optimize()
    except gp.GurobiError as err:
        if err.errno == gp.GRB.Error.SIZE_LIMIT_EXCEEDED:
            raise too_large() from err
        raise
