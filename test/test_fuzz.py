"""
A seeded slice of benchmarks/fuzz.py: random commands and injected penetrations.

Three QP scenes, 1000 steps each from the default q, with the fuzzer's command
modes (smooth, extreme, reversals, zero, return home) and injections (a robot
or an object teleported 2 to 10 mm into a body).  Each figure is its own test,
so a failure names the property; its message carries the first offending
state, which ``sim.step(sim.initial_state(np.array(s['q']),
q_ref=np.array(s['q_ref'])), s['commands'])`` repeats on a fresh simulator.

Objects are counted lost when they fell more than 1 m below the table while
over it (through it); one pushed off the edge falls legitimately, and the
messages only list it.
"""

import functools
import json
import os
import sys

import pytest

from conftest import REPO_ROOT

sys.path.insert(0, os.path.join(REPO_ROOT, 'benchmarks'))

from fuzz import fuzz_scene, PHI_LIMIT  # noqa: E402

SCENES = ('two_pads_lift', 'finger_push', 'arm_pick_place')
STEPS = 1000
SEED = 0


@functools.lru_cache(maxsize=None)
def fuzzed(scene: str) -> dict:
    """Fuzz a scene once per test session."""
    return fuzz_scene(os.path.join(REPO_ROOT, 'config', f'{scene}.yaml'), STEPS, SEED)


def offending(result: dict, kind: str) -> str:
    """Return the saved state of a kind as JSON, for the failure message."""
    state = result['offending_states'].get(kind)
    if state is None:
        return f'(no {kind} state saved)'
    state = {k: v for k, v in state.items() if k != 'command_sequence'}
    return f"{kind} state of {result['scene']} (seed {SEED}): {json.dumps(state)}"


@pytest.mark.parametrize('scene', SCENES)
def test_fuzz_raises_nothing(scene):
    result = fuzzed(scene)
    assert result['exceptions'] == 0, (
        f"{result['exceptions']} exceptions: {result['exception_messages']}\n"
        + offending(result, 'exception'))


@pytest.mark.parametrize('scene', SCENES)
def test_fuzz_every_qp_step_succeeds(scene):
    result = fuzzed(scene)
    assert result['formulation'] == 'qp'
    assert result['failed_steps'] == 0, (
        f"{result['failed_steps']} failed steps: {result['failed_statuses']} "
        f"{result['failed_errors']}\n" + offending(result, 'failed_step'))


@pytest.mark.parametrize('scene', SCENES)
def test_fuzz_no_penetration_outside_injections(scene):
    result = fuzzed(scene)
    deepest = result['min_phi_outside_injection_mm']
    assert deepest is not None and deepest >= 1e3 * PHI_LIMIT, (
        f"min signed distance outside injection windows {deepest} mm "
        f"({result['steps_below_limit_outside_injection']} steps below -1 mm): "
        f"{result['deepest_outside_injection']}, by mode {result['by_mode']}\n"
        + offending(result, 'deepest_penetration'))


@pytest.mark.parametrize('scene', SCENES)
def test_fuzz_every_injection_recovers(scene):
    result = fuzzed(scene)
    injections = result['injections']
    assert injections['count'] > 0, f'the slice injected nothing: {injections}'
    assert injections['unrecovered'] == 0 and injections['unrecovered_at_end'] == 0, (
        f'{injections}\n' + offending(result, 'unrecovered_injection'))


@pytest.mark.parametrize('scene', SCENES)
def test_fuzz_no_object_below_support_or_lost(scene):
    result = fuzzed(scene)
    assert result['below_support_steps'] == 0 and not result['lost_over_support'], (
        f"objects inside the table in {result['below_support_steps']} steps "
        f"({result['below_support_objects']}); lost {result['lost_objects']}\n"
        + offending(result, 'below_support') + '\n' + offending(result, 'lost'))
