"""
One version of the engine, timed on request: the worker of ``step_time.py --quick``.

Started with PYTHONPATH pointing at a checkout of the version to time (the
working tree, or a git revision extracted by step_time.py).  It builds the
two scenes of step_time.py, takes one untimed pass of each (numba's cache,
Drake's caches), prints ``ready`` and then answers lines on stdin:

* ``two_pads``: one pass of the two-pad sequence (step_time.PHASES); prints
  a JSON list of each step's thread CPU time [s];
* ``arm``: one pass of the arm's pick-and-place, QuasistaticPlant in a
  Diagram; prints the thread CPU time of each ``AdvanceTo`` over one period;
* ``quit``.

Thread CPU time (``time.thread_time``) counts what this thread ran, not
what the scheduler did on a busy machine.  The worker speaks to both the
engine API of the explicit state (``step(state, v_cmd)``, from issue 30 on)
and the one before it (``step(q, v_cmd, q_ref=...)``), so a revision of
either kind can be timed against the working tree.
"""

import importlib
import json
from pathlib import Path
import sys
import time

from pydrake.systems.analysis import Simulator
from pydrake.systems.framework import DiagramBuilder

import quasistatic_drake
from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.paths import package_share_dir
from quasistatic_drake.quasistatic_plant import QuasistaticPlant

# the demo's planner: in apps/ since it moved there (looked up in the timed checkout only,
# never through the editable install's finder)
_APPS = (Path(quasistatic_drake.__file__).parent / 'apps').is_dir()
_planner = importlib.import_module('quasistatic_drake.apps.pick_and_place' if _APPS
                                   else 'quasistatic_drake.pick_and_place')
PickPlaceTask, plan_pick_and_place = _planner.PickPlaceTask, _planner.plan_pick_and_place

# The two-pad sequence of step_time.py (phase, command, steps), copied so that the
# worker needs nothing from the benchmarks folder of the version it times.
PHASES = [('close', [0.0, 0.1, -0.1], 2), ('squeeze', [0.0, 0.02, -0.02], 3),
          ('lift', [0.1, 0.0, 0.0], 10), ('hold', [0.0, 0.0, 0.0], 10),
          ('lower', [-0.1, 0.0, 0.0], 9), ('open', [0.0, -0.1, 0.1], 5)]


def two_pads_pass(sim) -> list:
    """Run the two-pad phases once from the default configuration; return CPU s per step."""
    explicit = hasattr(sim, 'initial_state')
    state = sim.initial_state() if explicit else (sim.default_positions(), None)
    times = []
    for _, command, steps in PHASES:
        for _ in range(steps):
            start = time.thread_time()
            if explicit:
                result = sim.step(state, {'pads': command})
                state = result.state_next
            else:
                result = sim.step(state[0], {'pads': command}, q_ref=state[1])
                state = (result.q_next, result.q_ref_next)
            times.append(time.thread_time() - start)
            if not result.success:
                raise RuntimeError(f'two-pad step failed: {result.status}')
    return times


def arm_pass(scenario, plan) -> list:
    """Run the demo's pick-and-place in a Diagram; return CPU s per plant update."""
    builder = DiagramBuilder()
    plant = builder.AddSystem(QuasistaticPlant(scenario))
    source = builder.AddSystem(plan.command_source())
    builder.Connect(source.get_output_port(), plant.get_velocity_command_input_port('iiwa'))
    simulator = Simulator(builder.Build())
    simulator.Initialize()
    context = plant.GetMyContextFromRoot(simulator.get_context())
    status = plant.get_step_status_output_port()
    times = []
    for k in range(plan.steps):
        start = time.thread_time()
        simulator.AdvanceTo((k + 1) * scenario.time_step)
        times.append(time.thread_time() - start)
        if not status.Eval(context).success:
            raise RuntimeError(f'arm step {k} failed: {status.Eval(context).status}')
    return times


def main() -> None:
    """Build, warm up, say ready, then answer requests until quit."""
    config = package_share_dir() / 'config'
    sim = QuasistaticSimulator(Scenario.from_yaml(config / 'two_pads_lift.yaml'))
    arm = Scenario.from_yaml(config / 'arm_pick_place.yaml')
    plan = plan_pick_and_place(QuasistaticSimulator(arm), PickPlaceTask())[0]
    passes = {'two_pads': lambda: two_pads_pass(sim), 'arm': lambda: arm_pass(arm, plan)}
    for run in passes.values():
        run()
    print('ready', flush=True)
    for line in sys.stdin:
        request = line.strip()
        if request == 'quit':
            break
        print(json.dumps(passes[request]()), flush=True)


if __name__ == '__main__':
    main()
