"""
Directives that Drake ends the process on, or takes silently: ScenarioErrors with the key path.

Issue 31, defects 4, 6, 11 and 12.  Before: pydrake raised its failed
checks as SystemExit (exit 1, Drake's text only) for an add_weld without a
parent or child, a null directive, a !Uniform pose, a NaN or infinite
default pose or joint position and a nested file's weld of a file: model;
a NaN weld raised RuntimeError at the first query; a weld at 1e308 m ended
in a numba SystemError; a zero !AngleAxis axis made the table's rotation
the zero matrix, silently.  Each is now refused when the scenario loads,
naming the directive, the key and the fix.
"""

import subprocess
import sys
from pathlib import Path

import pytest

from quasistatic_drake import QuasistaticSimulator, Scenario, ScenarioError

REPO_ROOT = Path(__file__).resolve().parents[1]
HEAD = f'include: {REPO_ROOT}/config/arm_base.yaml\n'
CYLINDER = '  - add_model: {name: box, file: package://quasistatic_drake/urdf/cylinder.urdf}\n'
ARM = ('  - add_model: {name: arm, file: package://quasistatic_drake/urdf/iiwa14_arm.urdf}\n')
ENTRIES = 'objects: [{name: box}]\n'
ARM_ENTRIES = 'robots: [{name: arm, stiffness: [1, 1, 1, 1, 1, 1, 1]}]\n' + ENTRIES


def free_pose(pose):
    return ('  - add_model:\n      name: box\n      file: package://quasistatic_drake/urdf/'
            f'cylinder.urdf\n      default_free_body_pose:\n        cylinder_link: {pose}\n')


def arm_weld(x_pc):
    weld = f'{{parent: world, child: arm::iiwa_link_0, X_PC: {x_pc}}}'
    return CYLINDER + ARM + f'  - add_weld: {weld}\n'


CASES = {
    'a weld with an empty parent': (
        CYLINDER + '  - add_weld: {parent: "", child: box::cylinder_link}\n', ENTRIES,
        r'directives\[1\] \(add_weld\): .*`parent` must be non-empty'),
    'a null weld': (CYLINDER + '  - add_weld: null\n', ENTRIES,
                    r'directives\[1\] \(add_weld\): .*Specify one of'),
    'a weld with no child': (CYLINDER + '  - add_weld: {parent: world}\n', ENTRIES,
                             r'directives\[1\] \(add_weld\): .*`child` must be non-empty'),
    'a !UniformVector pose': (
        free_pose('{translation: !UniformVector {min: [0, 0, 0], max: [1, 1, 1]}}'), ENTRIES,
        r'directives\[0\] \(add_model\): .*deterministic transform'),
    'a !Uniform rotation': (free_pose('{rotation: !Uniform {}}'), ENTRIES,
                            r'directives\[0\] \(add_model\): .*deterministic transform'),
    'a NaN free-body pose': (
        free_pose('{translation: [.nan, 0, 0.07]}'), ENTRIES,
        r'directives\[0\] \(add_model\)\.default_free_body_pose\.cylinder_link\.translation'
        r'\[0\]: expected a finite number'),
    'an infinite free-body pose': (free_pose('{translation: [0, .inf, 0.07]}'), ENTRIES,
                                   r'translation\[1\]: expected a finite number.*got inf'),
    'a zero axis in a free-body pose': (
        free_pose('{rotation: !AngleAxis {angle_deg: 90, axis: [0, 0, 0]}}'), ENTRIES,
        r'cylinder_link\.rotation\.axis: is \[0, 0, 0\], which has no direction'),
    'a NaN joint position': (
        CYLINDER + '  - add_model:\n      name: arm\n      file: package://quasistatic_drake/'
        'urdf/iiwa14_arm.urdf\n      default_joint_positions: {iiwa_joint_1: [.nan]}\n'
        '  - add_weld: {parent: world, child: arm::iiwa_link_0}\n', ARM_ENTRIES,
        r'directives\[1\] \(add_model\)\.default_joint_positions\.iiwa_joint_1\[0\]: expected '
        'a finite number'),
    'a NaN weld translation': (arm_weld('{translation: [.nan, 0, 0]}'), ARM_ENTRIES,
                               r'directives\[2\] \(add_weld\)\.X_PC\.translation\[0\]'),
    'a weld at 1e308 m': (arm_weld('{translation: [1e308, 0, 0]}'), ARM_ENTRIES,
                          r'X_PC\.translation\[0\]: expected a finite number within \+-1e\+06, '
                          r'got 1e\+308'),
    'a zero axis in a weld': (
        arm_weld('{rotation: !AngleAxis {angle_deg: 90, axis: [0, 0, 0]}}'), ARM_ENTRIES,
        r'X_PC\.rotation\.axis: is \[0, 0, 0\], which has no direction.*Fix: give a non-zero'),
}


@pytest.mark.parametrize('case', list(CASES))
def test_a_hostile_directive_is_a_scenario_error(tmp_path, case):
    directives, entries, message = CASES[case]
    path = tmp_path / 'scene.yaml'
    path.write_text(HEAD + 'directives:\n' + directives + entries)
    with pytest.raises(ScenarioError, match=message):
        Scenario.from_yaml(path)


def test_a_nested_file_with_a_nan_pose_names_the_file(tmp_path):
    nested = tmp_path / 'nested.dmd.yaml'
    nested.write_text('directives:\n' + free_pose('{translation: [0, 0, .nan]}'))
    path = tmp_path / 'scene.yaml'
    path.write_text(HEAD + f'directives:\n  - add_directives: {{file: {nested}}}\n' + ENTRIES)
    with pytest.raises(ScenarioError, match=rf'{nested}: directives\[0\] \(add_model\)\.'
                                            r'default_free_body_pose.*translation\[2\]'):
        Scenario.from_yaml(path)


def test_a_nested_weld_of_a_file_model_is_a_scenario_error(tmp_path):
    """The top-level check caught this weld; from a nested file Drake ended the process."""
    nested = tmp_path / 'nested.dmd.yaml'
    nested.write_text('directives:\n  - add_weld: {parent: world, child: table::arm_table_top}\n')
    path = tmp_path / 'scene.yaml'
    path.write_text(HEAD + 'directives:\n' + CYLINDER
                    + f'  - add_directives: {{file: {nested}}}\n' + ENTRIES)
    scenario = Scenario.from_yaml(path)
    with pytest.raises(ScenarioError, match=r'directives\[1\] \(add_directives\): Drake could '
                                            r'not process it: .*Fix: .*not the entries with '
                                            r'file:'):
        QuasistaticSimulator(scenario)


def test_the_cli_exits_2_without_a_traceback(tmp_path):
    """`quasistatic-drake info` on a weld with an empty parent: exit 2, one error line."""
    directives, entries, _ = CASES['a weld with an empty parent']
    path = tmp_path / 'scene.yaml'
    path.write_text(HEAD + 'directives:\n' + directives + entries)
    done = subprocess.run([sys.executable, '-m', 'quasistatic_drake.apps.cli', 'info', str(path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert 'Traceback' not in done.stderr and 'ERROR:drake' not in done.stderr
    assert '`parent` must be non-empty' in done.stderr
