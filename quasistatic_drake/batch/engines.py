"""
One engine per process for a batch's scenario: built once, used for every rollout.

A worker (a local process, a Ray worker, or the caller's own process for
the serial backend) builds a QuasistaticSimulator the first time it sees a
scenario and keeps it for the rollouts that follow.  The engine's result
depends on its arguments only (simulator.py), so reusing it never changes a
result.  The scenario is known by a hash of its pickled bytes.
"""

from __future__ import annotations

import hashlib
import pickle
from collections import OrderedDict

from quasistatic_drake.scenario import Scenario
from quasistatic_drake.simulator import QuasistaticSimulator

KEEP = 2      # engines kept per process (a worker usually sees one scenario)
_ENGINES: "OrderedDict[str, QuasistaticSimulator]" = OrderedDict()


def scenario_key(scenario: Scenario) -> str:
    """Return a hash that names the scenario's content."""
    return hashlib.sha256(pickle.dumps(scenario)).hexdigest()


def engine_for(scenario: Scenario) -> QuasistaticSimulator:
    """Return this process's engine for ``scenario``, building it the first time."""
    key = scenario_key(scenario)
    if key in _ENGINES:
        _ENGINES.move_to_end(key)
        return _ENGINES[key]
    engine = QuasistaticSimulator(scenario)
    _ENGINES[key] = engine
    while len(_ENGINES) > KEEP:
        _ENGINES.popitem(last=False)
    return engine
