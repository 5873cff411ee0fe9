"""
quasistatic_drake: a Drake-native quasistatic manipulation simulator.

Public API: :class:`Scenario` (YAML scenario), :class:`QuasistaticSimulator`
(the time-stepping engine) and its :class:`StepResult`.
"""

from quasistatic_drake.scenario import Scenario, ScenarioError
from quasistatic_drake.simulator import (CommandError, Contact, QuasistaticSimulator,
                                         StepResult)

__all__ = ["Scenario", "ScenarioError", "QuasistaticSimulator", "StepResult", "Contact",
           "CommandError"]
