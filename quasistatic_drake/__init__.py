"""
quasistatic_drake: a Drake-native quasistatic manipulation simulator.

Public API: :class:`Scenario` (YAML scenario), :class:`QuasistaticSimulator`
(the time-stepping engine), its :class:`State` and :class:`StepResult`, and
:class:`QuasistaticPlant` (the engine as a Drake LeafSystem).

The names are imported on first use (PEP 562), so that a submodule without
Drake (``quasistatic_drake.paths``, ``quasistatic_drake.ros.params``, which the
launch files import) loads neither pydrake nor numba.
"""

from importlib import import_module

_EXPORTS = {
    "Scenario": "quasistatic_drake.scenario",
    "ScenarioError": "quasistatic_drake.scenario",
    "QuasistaticSimulator": "quasistatic_drake.simulator",
    "State": "quasistatic_drake.state",
    "StepResult": "quasistatic_drake.results",
    "Rollout": "quasistatic_drake.results",
    "Contact": "quasistatic_drake.results",
    "CommandError": "quasistatic_drake.simulator",
    "Tangents": "quasistatic_drake.step_gradients",
    "QuasistaticPlant": "quasistatic_drake.quasistatic_plant",
}

__all__ = list(_EXPORTS)


def __getattr__(name):
    """Import a public name from its module on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'quasistatic_drake' has no attribute {name!r}")
    value = getattr(import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__():
    """List the public names with the module's own."""
    return sorted(set(globals()) | set(_EXPORTS))
