"""
The hostile fuzz's slice (benchmarks/hostile_fuzz.py, issue 31): 1000 cases, no death, no lie.

900 seeded mutations of three small scenes (two of them plain, one built by
model directives), each run in a worker process: loaded, stepped three
times.  Each outcome must be "ran" (finite q, a known status) or "refused"
(a ScenarioError or CommandError that says where and how to fix it): never a
traceback, a non-finite q, a worker killed by a signal or a hang.  Then 100
seeded actions of a hostile ROS peer (parameter sets of any name, type and
value through the node's SetParameters service, and command messages of any
size and value) against the console-script node: after each, the node must
still publish /clock, /joint_states and /tf and go on stepping.
"""

import functools
import os
import sys

from conftest import REPO_ROOT

sys.path.insert(0, os.path.join(REPO_ROOT, 'benchmarks'))

from hostile_fuzz import fuzz_node, fuzz_scenarios  # noqa: E402

SEED = 0


@functools.lru_cache(maxsize=None)
def scenarios():
    return fuzz_scenarios(900, SEED)


def test_no_mutated_scenario_kills_raises_or_lies():
    result = scenarios()
    assert result['cases'] == 900
    assert result['findings'] == [], result['findings'][:5]
    assert set(result['counts']) <= {'ran', 'refused'}
    assert result['counts'].get('ran', 0) >= 100       # the mutations reach the step too


def test_every_refusal_says_where_and_how_to_fix_it():
    result = scenarios()
    assert result['refused_without_fix'] == 0, result['refusals_without_fix'][:5]


def test_a_hostile_peer_cannot_stop_the_node():
    from test_ros_helpers import isolate_ros_domain
    isolate_ros_domain()
    result = fuzz_node(100, SEED)
    assert result['cases'] == 100, result['findings']
    assert result['counts'] == {'alive': 100}, result['findings']
