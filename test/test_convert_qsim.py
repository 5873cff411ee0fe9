"""
``quasistatic-drake convert-qsim``: qsim scenes (written here in qsim's format) as scenarios.

The scenes are under test/data/qsim/models, laid out as qsim's repository
(a package.xml naming ``quasistatic_simulator``, q_sys files in q_sys/):
(a) q_sys/pusher_box.yml, a sphere finger on two prismatic joints and a free
box on ground welded by the directives; (b) q_sys/arm_sphere.yml, nested
add_directives, add_frame with an ``!Rpy`` rotation, a welded arm and an
object on two slider joints; q_sys/errors/*.yml, scenes that must be refused.
"""

import math
import os
from pathlib import Path

import numpy as np
from pydrake.multibody.parsing import (LoadModelDirectives, LoadModelDirectivesFromString,
                                       Parser, ProcessModelDirectives)
from pydrake.multibody.plant import MultibodyPlant
from pydrake.multibody.tree import ModelInstanceIndex
import pytest
import yaml

from quasistatic_drake.apps.convert_qsim import (ConversionError, convert_qsim,
                                                 convert_with_notes, main)

DATA = Path(__file__).resolve().parent / 'data' / 'qsim' / 'models'
Q_SYS = DATA / 'q_sys'
PACKAGE = 'package://quasistatic_simulator'
PACKAGES = {'quasistatic_simulator': str(DATA)}

PUSHER_BOX = {
    'time_step': 0.1,
    'formulation': 'qp',
    'quasi_dynamic': True,
    'friction_directions': 4,
    'contact_detection_tolerance': 0.05,
    'gravity': [0.0, 0.0, -9.81],
    'default_friction': 1.0,
    'packages': {'quasistatic_simulator': str(DATA)},
    'directives': [
        {'add_model': {'name': 'box', 'file': f'{PACKAGE}/box_0.1m.sdf'}},
        {'add_directives': {'file': f'{PACKAGE}/pusher_and_ground.yml'}},
    ],
    'robots': [{'name': 'pusher', 'stiffness': [100.0, 100.0]}],
    'objects': [{'name': 'box'}],
    'environment': [{'name': 'ground'}],
}

ARM_SPHERE = {
    'time_step': 0.05,
    'formulation': 'qp',
    'quasi_dynamic': False,
    'friction_directions': 2,
    'contact_detection_tolerance': math.inf,
    'gravity': [0.0, 0.0, 0.0],
    'default_friction': 1.0,
    'quasi_static_inertia_ratio': 0.2,
    'packages': {'quasistatic_simulator': str(DATA)},
    'directives': [
        {'add_model': {'name': 'sphere', 'file': f'{PACKAGE}/sphere_xy.sdf'}},
        {'add_directives': {'file': f'{PACKAGE}/arm_scene.yml'}},
    ],
    'robots': [{'name': 'arm', 'stiffness': [50.0, 25.0]}],
    'objects': [{'name': 'sphere'}],
    'environment': [{'name': 'ground'}, {'name': 'wall'}],
}

# the pusher_box scene as data, to write variants of it
PUSHER_BOX_Q_SYS = {
    'model_directive': f'{PACKAGE}/pusher_and_ground.yml',
    'robots': [{'name': 'pusher', 'Kp': [100, 100]}],
    'objects': [{'name': 'box', 'file': f'{PACKAGE}/box_0.1m.sdf'}],
    'quasistatic_sim_params': {'h': 0.1, 'gravity': [0, 0, -9.81], 'nd_per_contact': 4,
                               'contact_detection_tolerance': 0.05,
                               'is_quasi_dynamic': True},
}


def write_q_sys(tmp_path, q_sys, name='q_sys.yml'):
    """Write a q_sys dict as YAML in tmp_path; return its path."""
    path = tmp_path / name
    path.write_text(yaml.safe_dump(q_sys, sort_keys=False))
    return path


def variant(params=None, drop=(), **top):
    """Return PUSHER_BOX_Q_SYS with sim params changed (None: removed) and top keys set."""
    q_sys = {**PUSHER_BOX_Q_SYS, **top}
    sim = dict(q_sys['quasistatic_sim_params'])
    for key, value in (params or {}).items():
        if value is None:
            sim.pop(key, None)
        else:
            sim[key] = value
    q_sys['quasistatic_sim_params'] = sim
    for key in drop:
        q_sys.pop(key)
    return q_sys


def drake_plant(scenario):
    """Return a MultibodyPlant built from a converted scenario's directives, finalized."""
    plant = MultibodyPlant(0.0)
    parser = Parser(plant)
    for name, root in scenario['packages'].items():
        parser.package_map().Add(name, root)
    directives = LoadModelDirectivesFromString(
        yaml.safe_dump({'directives': scenario['directives']}))
    ProcessModelDirectives(directives, plant, parser)
    plant.Finalize()
    return plant


POSE_NOTE = 'a q_sys file carries no initial poses'


def other_notes(notes):
    """Return the notes but the one every scene with objects gets (no initial poses)."""
    return [n for n in notes if POSE_NOTE not in n]


# ----- (a) and (b): the converted scenarios, key by key -----------------------------------
def test_pusher_box_converts_key_by_key():
    """Convert scene (a) and compare every key, in order; only the poses need a note."""
    scenario, notes = convert_with_notes(Q_SYS / 'pusher_box.yml')
    assert scenario == PUSHER_BOX
    assert list(scenario) == list(PUSHER_BOX)
    assert other_notes(notes) == []
    assert convert_qsim(Q_SYS / 'pusher_box.yml') == PUSHER_BOX


def test_arm_sphere_converts_key_by_key():
    """Nested add_directives (ground, wall), add_frame with !Rpy, scale 5 -> ratio 1/5."""
    scenario, notes = convert_with_notes(Q_SYS / 'arm_sphere.yml', time_step=0.05)
    assert scenario == ARM_SPHERE
    assert list(scenario) == list(ARM_SPHERE)
    q_sys = Q_SYS / 'arm_sphere.yml'
    assert other_notes(notes) == [
        f"{q_sys}:18: quasistatic_sim_params.unactuated_mass_scale: 5: qsim scales each "
        "object's M_u to a largest diagonal entry of h^2 min(K) / 5; written as "
        "quasi_dynamic: false with quasi_static_inertia_ratio: 1/5, which scales all "
        "objects' M_u together to a largest eigenvalue of r h^2 min(K), once, at the "
        "initial configuration.",
        f"{q_sys}:14: quasistatic_sim_params: no gravity; qsim's default is [0, 0, 0] (the "
        "scenario's is -9.81 in z), written out.",
    ]


def test_objects_without_initial_poses_get_a_note():
    """Issue 32: qsim files carry no initial poses; the objects would start at the origin."""
    _, notes = convert_with_notes(Q_SYS / 'pusher_box.yml')
    pose = [n for n in notes if POSE_NOTE in n]
    assert len(pose) == 1 and "['box'] start at the origin" in pose[0] and 'Fix: ' in pose[0]


def test_a_q_sys_without_h_needs_a_time_step():
    """Refuse a q_sys without h unless a time step is given, saying so."""
    with pytest.raises(ConversionError, match=r'arm_sphere.yml:14: quasistatic_sim_params: '
                       r'no h; .* Fix: pass --time-step H'):
        convert_qsim(Q_SYS / 'arm_sphere.yml')


def test_the_time_step_replaces_h_with_a_note():
    """Let the time step replace the file's h, with a note."""
    scenario, notes = convert_with_notes(Q_SYS / 'pusher_box.yml', time_step=0.02)
    assert scenario['time_step'] == 0.02
    assert other_notes(notes) == [f'{Q_SYS / "pusher_box.yml"}:14: quasistatic_sim_params.h: '
                                  'h = 0.1 replaced by --time-step 0.02.']


@pytest.mark.parametrize('name,expected', [('pusher_box', PUSHER_BOX),
                                           ('arm_sphere', ARM_SPHERE)])
def test_the_written_yaml_is_the_dict_with_relative_packages(tmp_path, name, expected):
    """Write the returned dict, package roots relative to the written file."""
    out = tmp_path / 'scenes' / f'{name}.yaml'
    scenario = convert_qsim(Q_SYS / f'{name}.yml', out, time_step=expected['time_step'])
    relative = Path(os.path.relpath(DATA, out.parent)).as_posix()
    assert scenario == {**expected, 'packages': {'quasistatic_simulator': relative}}
    text = out.read_text()
    assert text.startswith('# Converted from the qsim scene '
                           f'{Path(os.path.relpath(Q_SYS / f"{name}.yml", out.parent))}\n'
                           '# by quasistatic-drake convert-qsim.\n')
    assert yaml.safe_load(text) == scenario
    assert (out.parent / relative).resolve() == DATA


def test_the_written_yaml_keeps_its_notes_as_comments(tmp_path):
    """Write the notes as comments after the header."""
    out = tmp_path / 'arm.yaml'
    _, notes = convert_with_notes(Q_SYS / 'arm_sphere.yml', time_step=0.05)
    convert_qsim(Q_SYS / 'arm_sphere.yml', out, time_step=0.05)
    lines = out.read_text().splitlines()
    assert lines[2:2 + len(notes)] == [f'# Note: {note}' for note in notes]


# ----- Drake reads the scenes and the converted directives -------------------------------
@pytest.mark.parametrize('name', ['ground', 'pusher_and_ground', 'environment', 'arm_scene',
                                  'free_box_scene'])
def test_drake_processes_each_directives_file(name):
    """Check that Drake's ProcessModelDirectives reads each test scene's directives."""
    plant = MultibodyPlant(0.0)
    parser = Parser(plant)
    parser.package_map().Add('quasistatic_simulator', str(DATA))
    ProcessModelDirectives(LoadModelDirectives(str(DATA / f'{name}.yml')), plant, parser)
    plant.Finalize()
    assert plant.num_model_instances() > 2


@pytest.mark.parametrize('name,expected', [('pusher_box', PUSHER_BOX),
                                           ('arm_sphere', ARM_SPHERE)])
def test_drake_builds_the_converted_scene_with_every_model_classified(name, expected):
    """The directives create exactly the listed models; robots have one K per velocity."""
    scenario = convert_qsim(Q_SYS / f'{name}.yml', time_step=expected['time_step'])
    plant = drake_plant(scenario)
    instances = {plant.GetModelInstanceName(ModelInstanceIndex(i))
                 for i in range(2, plant.num_model_instances())}
    listed = {entry['name'] for key in ('robots', 'objects', 'environment')
              for entry in scenario[key]}
    assert instances == listed
    for robot in scenario['robots']:
        model = plant.GetModelInstanceByName(robot['name'])
        assert plant.num_velocities(model) == len(robot['stiffness'])
    for entry in scenario['objects']:
        assert plant.num_velocities(plant.GetModelInstanceByName(entry['name'])) > 0
    for entry in scenario['environment']:
        assert plant.num_velocities(plant.GetModelInstanceByName(entry['name'])) == 0


def test_the_converted_scenario_pushes_the_box(tmp_path):
    """End to end: load the converted (a) scene, the finger pushes the box along +x."""
    from quasistatic_drake import QuasistaticSimulator, Scenario
    out = tmp_path / 'pusher_box.yaml'
    convert_qsim(Q_SYS / 'pusher_box.yml', out)
    data = yaml.safe_load(out.read_text())
    data['robots'][0]['initial_positions'] = [-0.1, 0.0]
    data['objects'][0]['initial_pose'] = {'xyz': [0.0, 0.0, 0.05], 'rpy': [0.0, 0.0, 0.0]}
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    sim = QuasistaticSimulator(Scenario.from_yaml(out))
    state = sim.initial_state()
    x0 = sim.object_pose(state.q, 'box').translation()
    for _ in range(15):      # the spring's lead builds up to mu m g / K = 2.5 cm, then it slides
        result = sim.step(state, {'pusher': np.array([0.1, 0.0])})
        assert result.success, (result.status, result.diagnostics.error)
        state = result.state_next
    q = state.q
    pose = sim.object_pose(q, 'box')
    moved = pose.translation() - x0
    assert moved[0] > 0.05
    assert abs(moved[1]) < 1e-6
    # the step's normal rows are exact: the sliding box does not lift (qsim's Anitescu rows
    # lift it by about mu h |v| = 0.5 * 0.1 s * 0.1 m/s)
    assert abs(moved[2]) < 1e-5
    assert np.allclose(pose.rotation().matrix(), np.eye(3), atol=1e-6)
    assert sim.robot_positions(q, 'pusher')[0] > -0.1 + 0.05


# ----- refused scenes: what, where, how to fix ---------------------------------------------
@pytest.mark.parametrize('name,message', [
    ('unknown_key', r"unknown_key.yml:12: quasistatic_sim_params.mu: unknown key 'mu'; qsim's "
                    r"QuasistaticSimParameters has only \['h', .*\], so its meaning is "
                    r"unknown. Fix: remove it"),
    ('missing_directives', r"missing_directives.yml:2: model_directive: the model directives "
                           r"file 'package://quasistatic_simulator/no_such_scene.yml' does "
                           r"not exist \(looked at .*no_such_scene.yml\). Fix: create it, "
                           r"or correct the URI."),
    ('robot_not_in_directives', r"robot_not_in_directives.yml:4: robots\[0\].name: no model "
                                r"named 'gripper' in the directives \(.*pusher_and_ground."
                                r"yml\); qsim looks robots up there. Models there: "
                                r"\['pusher', 'ground'\]. Fix: correct the name"),
    ('kp_mismatch', r"kp_mismatch.yml:4: robots\[0\].Kp: 3 values, but robot 'pusher' "
                    r"\(package://quasistatic_simulator/pusher_xy.urdf\) has 2 degrees of "
                    r"freedom \(joint 'x' \(prismatic\), joint 'y' \(prismatic\)\); qsim "
                    r"needs one Kp per velocity. Fix: give 2 values."),
    ('free_model_not_object', r"free_box_scene.yml:6: directives\[1\].add_model: model "
                              r"'crate' \(package://quasistatic_simulator/box_0.1m.sdf\) has 6 "
                              r"degrees of freedom \(free body 'box'\) but the q_sys file "
                              r"lists it neither under robots nor under objects, and the "
                              r"environment must be welded .* Fix: add it to robots with Kp, "
                              r"move it from the directives to objects"),
])
def test_error_scenes_are_refused_with_where_and_fix(name, message):
    """Refuse each error scene, naming the file, line and key and the fix."""
    with pytest.raises(ConversionError, match=message):
        convert_qsim(Q_SYS / 'errors' / f'{name}.yml')


@pytest.mark.parametrize('q_sys,message', [
    (variant(extra_key=1), r"q_sys.yml:\d+: extra_key: unknown key 'extra_key'; qsim's parser "
                           r"\(qsim/parser.py\) reads only \['model_directive', 'robots', "
                           r"'objects', 'quasistatic_sim_params'\]"),
    (variant(robots=[{'name': 'pusher', 'Kp': [1, 1], 'q0': [0, 0]}]),
     r"robots\[0\].q0: unknown key 'q0'; qsim reads only \['name', 'Kp'\]"),
    (variant(drop=('quasistatic_sim_params',)),
     r"top level: 'quasistatic_sim_params' is missing; qsim's parser requires it"),
    (variant({'log_barrier_weight': 100}),
     r"quasistatic_sim_params.log_barrier_weight: cannot be converted: it weighs qsim's "
     r"log-barrier \(smoothed\) dynamics.* Fix: remove the key"),
    (variant({'gradient_lstsq_tolerance': 0.3}), r"gradient_lstsq_tolerance: cannot be conv"),
    (variant({'use_free_solvers': True}), r"use_free_solvers: cannot be converted"),
    (variant({'forward_mode': 'kQpMp'}), r"forward_mode: cannot be converted"),
    (variant({'gradient_mode': 'kNone'}), r"gradient_mode: cannot be converted"),
    (variant({'calc_contact_forces': False}),
     r"calc_contact_forces: quasistatic_drake always computes contact forces"),
    (variant({'unactuated_mass_scale': 0}),
     r"unactuated_mass_scale: 0 cannot be converted: qsim holds the objects still"),
    (variant({'unactuated_mass_scale': -1.0}), r"unactuated_mass_scale: -1.0 cannot be conv"),
    (variant({'unactuated_mass_scale': math.inf}), r"unactuated_mass_scale: inf cannot be c"),
    (variant({'nd_per_contact': 3}),
     r"nd_per_contact: 3 cannot be converted: friction_directions must be an even integer"),
    (variant({'nd_per_contact': None}), r"no nd_per_contact; qsim's default 0 gives no fric"),
    (variant({'contact_detection_tolerance': None}),
     r"no contact_detection_tolerance; qsim leaves it NaN \(unset\). Fix: add"),
    (variant({'contact_detection_tolerance': math.nan}),
     r"contact_detection_tolerance: expected a distance > 0 \[m\] or .inf, got nan"),
    (variant({'gravity': [0, -9.81]}), r"gravity: expected three numbers"),
    (variant({'is_quasi_dynamic': 'yes please'}), r"is_quasi_dynamic: expected true or false"),
    (variant({'h': 0}), r"quasistatic_sim_params.h: expected a time step > 0"),
    (variant(objects=[{'name': 'box', 'file': 'box_0.1m.sdf'}]),
     r"objects\[0\].file: expected a package:// URI \(qsim resolves no other\)"),
    (variant(objects=[{'name': 'box', 'file': f'{PACKAGE}/no_box.sdf'}]),
     r"objects\[0\].file: the object's file 'package://quasistatic_simulator/no_box.sdf' "
     r"does not exist"),
    (variant(objects=[{'name': 'ground', 'file': f'{PACKAGE}/box_0.1m.sdf'}]),
     r"pusher_and_ground.yml:\d+: directives\[1\].add_model: a model named 'ground' already "
     r"exists \(.*q_sys.yml:\d+: objects\[0\]\); Drake refuses a second"),
    (variant(objects=[{'name': 'pusher', 'file': f'{PACKAGE}/box_0.1m.sdf'}]),
     r"a model named 'pusher' already exists"),
    (variant(robots=[{'name': 'pusher', 'Kp': [100, 0]}]),
     r"robots\[0\].Kp: expected a list of stiffnesses > 0"),
    (variant(robots=[]), r"robots: expected a list of \{name, Kp\} \(qsim needs at least one"),
    (variant(robots=[{'name': 'a::b', 'Kp': [1]}]),
     r"robots\[0\].name: expected a model name without '::'"),
    (variant(model_directive=f'{PACKAGE}/ground_box.sdf'),
     r"ground_box.sdf:1: top level: a model directives file holds one key, 'directives', "
     r"with a list"),
    (variant(model_directive='package://nowhere_pkg/scene.yml'),
     r"model_directive: no root for package://nowhere_pkg/: no package.xml naming "
     r"'nowhere_pkg' .* Fix: pass --package nowhere_pkg=DIR."),
    (variant(model_directive='package://drake/scene.yml'),
     r"package://drake/ is built into Drake or quasistatic_drake"),
])
def test_keys_that_cannot_be_honoured_are_refused(tmp_path, q_sys, message):
    """Refuse q_sys keys and values that have no equivalent here."""
    with pytest.raises(ConversionError, match=message):
        convert_qsim(write_q_sys(tmp_path, q_sys), packages=PACKAGES)


@pytest.mark.parametrize('directives,message', [
    ([{'add_model_instance': {'name': 'ns'}},
      {'add_directives': {'file': f'{PACKAGE}/pusher_and_ground.yml', 'model_namespace': 'ns'}}],
     r"directives\[1\].add_directives.model_namespace: cannot be converted: .* Fix: remove "
     r"model_namespace"),
    ([{'add_model': {'name': 'pusher', 'file': 'pusher_xy.urdf'}}],
     r"directives\[0\].add_model.file: 'pusher_xy.urdf' is not a package:// or file:// URI"),
    ([{'add_model': {'name': 'pusher', 'file': f'{PACKAGE}/pusher_xy.urdf', 'pose': [0]}}],
     r"directives\[0\].add_model.pose: Drake's add_model has no 'pose'"),
    ([{'add_robot': {'name': 'pusher'}}], r"directives\[0\]: expected one directive of"),
    ([{'add_directives': {'file': 'package://tmp_pkg/scene.yml'}}],
     r"includes itself \(through"),
    ([{'add_weld': {'parent': 'world', 'child': 'table::top'}}],
     r"directives\[0\].add_weld.child: 'table::top' names model 'table', which no directive"),
    ([{'add_directives': {'file': f'{PACKAGE}/pusher_and_ground.yml'}},
      {'add_model': {'name': 'ground', 'file': f'{PACKAGE}/ground_box.sdf'}}],
     r"scene.yml:\d+: directives\[1\].add_model: a model named 'ground' already exists "
     r"\(.*pusher_and_ground.yml:\d+: directives\[1\].add_model\)"),
    ([{'add_model': {'name': 'pusher', 'file': f'{PACKAGE}/pusher_xy.urdf'}},
      {'add_model': {'name': 'ground', 'file': f'{PACKAGE}/ground_box.sdf'}},
      {'add_model': {'name': 'ground_2', 'file': f'{PACKAGE}/ground_box.sdf'}},
      {'add_weld': {'parent': 'world', 'child': 'ground'}}],
     r"directives\[3\].add_weld.child: 'ground' has no model scope and is a link or frame of "
     r"2 models \['ground', 'ground_2'\] \(Drake needs exactly one\). Fix: write "
     r"'<model>::<frame>'."),
])
def test_directives_that_cannot_be_converted_are_refused(tmp_path, directives, message):
    """Refuse directives that break Drake's rules or our model names."""
    (tmp_path / 'scene.yml').write_text(yaml.safe_dump({'directives': directives}))
    q_sys = variant(model_directive='package://tmp_pkg/scene.yml')
    with pytest.raises(ConversionError, match=message):
        convert_qsim(write_q_sys(tmp_path, q_sys),
                     packages={**PACKAGES, 'tmp_pkg': str(tmp_path)})


def test_an_unscoped_weld_child_welds_the_only_model_with_that_link(tmp_path):
    """Weld 'ground' (no scope) as Drake does: the one model with a link of that name."""
    (tmp_path / 'scene.yml').write_text(yaml.safe_dump({'directives': [
        {'add_model': {'name': 'pusher', 'file': f'{PACKAGE}/pusher_xy.urdf'}},
        {'add_model': {'name': 'slab', 'file': f'{PACKAGE}/ground_box.sdf'}},
        {'add_weld': {'parent': 'world', 'child': 'ground'}},
    ]}))
    q_sys = variant(model_directive='package://tmp_pkg/scene.yml')
    scenario = convert_qsim(write_q_sys(tmp_path, q_sys),
                            packages={**PACKAGES, 'tmp_pkg': str(tmp_path)})
    assert scenario['environment'] == [{'name': 'slab'}]
    plant = drake_plant(scenario)
    assert plant.num_velocities(plant.GetModelInstanceByName('slab')) == 0


# ----- keys with another default, converted explicitly -----------------------------------
@pytest.mark.parametrize('params,expected,note', [
    ({'is_quasi_dynamic': None}, {'quasi_dynamic': True},
     "no is_quasi_dynamic; qsim's default is true (the scenario's is false), written out."),
    ({'unactuated_mass_scale': math.nan}, {'quasi_dynamic': True}, None),
    ({'unactuated_mass_scale': 2}, {'quasi_dynamic': False, 'quasi_static_inertia_ratio': 0.5},
     "unactuated_mass_scale: 2: qsim scales each object's M_u"),
    ({'is_quasi_dynamic': False}, {'quasi_dynamic': False},
     "is_quasi_dynamic: false: qsim's objects have no inertia"),
    ({'is_quasi_dynamic': False, 'unactuated_mass_scale': 5}, {'quasi_dynamic': False},
     "unactuated_mass_scale: 5 has no effect in qsim when is_quasi_dynamic is false"),
    ({'gravity': None}, {'gravity': [0.0, 0.0, 0.0]}, "no gravity; qsim's default is [0, 0, 0]"),
    ({'calc_contact_forces': True}, {}, None),
    ({'contact_detection_tolerance': math.inf}, {'contact_detection_tolerance': math.inf},
     None),
])
def test_qsim_defaults_are_written_out(tmp_path, params, expected, note):
    """Write qsim's defaults explicitly where ours differ, with a note."""
    scenario, notes = convert_with_notes(write_q_sys(tmp_path, variant(params)),
                                         packages=PACKAGES)
    converted = {**PUSHER_BOX, **expected}
    if 'quasi_static_inertia_ratio' not in expected:
        assert 'quasi_static_inertia_ratio' not in scenario
    assert scenario == converted
    assert any(note in n for n in notes) if note else other_notes(notes) == []


def test_objects_may_be_absent_or_null(tmp_path):
    """Accept a q_sys without objects, as qsim does."""
    scenario = convert_qsim(write_q_sys(tmp_path, variant(objects=None)), packages=PACKAGES)
    assert scenario['objects'] == []
    assert scenario['directives'] == [
        {'add_directives': {'file': f'{PACKAGE}/pusher_and_ground.yml'}}]
    scenario = convert_qsim(write_q_sys(tmp_path, variant(drop=('objects',))),
                            packages=PACKAGES)
    assert scenario['objects'] == []


def test_a_package_option_wins_over_package_xml(tmp_path):
    """Take a package root given explicitly over the nearest package.xml."""
    copy = tmp_path / 'models'
    copy.mkdir()
    for path in DATA.glob('*.*'):
        (copy / path.name).write_bytes(path.read_bytes())
    scenario = convert_qsim(Q_SYS / 'pusher_box.yml',
                            packages={'quasistatic_simulator': str(copy)})
    assert scenario['packages'] == {'quasistatic_simulator': str(copy)}


def test_add_model_instance_is_environment_and_drake_package_models_pass(tmp_path):
    """List empty model instances and Drake's own models as environment, with notes."""
    (tmp_path / 'scene.yml').write_text(yaml.safe_dump({'directives': [
        {'add_directives': {'file': f'{PACKAGE}/pusher_and_ground.yml'}},
        {'add_model_instance': {'name': 'markers'}},
        {'add_model': {'name': 'bin', 'file': 'package://drake_models/manipulation_station/'
                                              'bin.sdf'}},
    ]}))
    q_sys = variant(model_directive='package://tmp_pkg/scene.yml')
    scenario, notes = convert_with_notes(write_q_sys(tmp_path, q_sys),
                                         packages={**PACKAGES, 'tmp_pkg': str(tmp_path)})
    assert scenario['environment'] == [{'name': 'ground'}, {'name': 'markers'},
                                       {'name': 'bin'}]
    assert scenario['packages'] == {**PACKAGES, 'tmp_pkg': str(tmp_path)}
    assert [n.split(': ', 2)[-1] for n in other_notes(notes)] == [
        "package://drake_models/manipulation_station/bin.sdf is in Drake's (or "
        "quasistatic_drake's) own package 'drake_models', not checked here; pass --package "
        "drake_models=DIR to check it.",
        "could not read 'bin' (package://drake_models/manipulation_station/bin.sdf) to check "
        "that it is welded; listed under environment."]


# ----- the command ---------------------------------------------------------------------
def test_main_writes_the_scenario(tmp_path, capsys):
    """Write the scenario with -o and print where it went."""
    out = tmp_path / 'a.yaml'
    assert main([str(Q_SYS / 'pusher_box.yml'), '-o', str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == f'wrote {out}' and other_notes(printed[1:]) == []
    expected = {**PUSHER_BOX, 'packages': {
        'quasistatic_simulator': Path(os.path.relpath(DATA, tmp_path)).as_posix()}}
    assert yaml.safe_load(out.read_text()) == expected


def test_main_defaults_to_the_current_directory_and_prints_notes(tmp_path, capsys,
                                                                 monkeypatch):
    """Write <stem>.scenario.yaml in the current directory and print the notes."""
    monkeypatch.chdir(tmp_path)
    assert main([str(Q_SYS / 'arm_sphere.yml'), '--time-step', '0.05',
                 '--package', f'quasistatic_simulator={DATA}']) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == 'wrote arm_sphere.scenario.yaml'
    assert len(lines) == 4 and all(line.startswith('note: ') for line in lines[1:])
    assert yaml.safe_load((tmp_path / 'arm_sphere.scenario.yaml').read_text())[
        'time_step'] == 0.05


@pytest.mark.parametrize('argv,message', [
    ([str(Q_SYS / 'errors' / 'kp_mismatch.yml')], "robots[0].Kp: 3 values"),
    ([str(Q_SYS / 'arm_sphere.yml')], "no h;"),
    (['no_such_q_sys.yml'], "convert-qsim: the q_sys file no_such_q_sys.yml does not exist"),
    ([str(Q_SYS / 'pusher_box.yml'), '--package', 'quasistatic_simulator'],
     "--package quasistatic_simulator: expected NAME=DIR."),
    ([str(Q_SYS / 'pusher_box.yml'), '--package', 'quasistatic_simulator=/no/such/dir'],
     "is not a directory"),
])
def test_main_exits_2_with_a_one_line_error(tmp_path, capsys, monkeypatch, argv, message):
    """Exit with 2 and one line on stderr, writing nothing."""
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ''
    assert captured.err.startswith('error: ') and captured.err.count('\n') == 1
    assert message in captured.err
    assert list(tmp_path.iterdir()) == []


def test_main_refuses_to_overwrite_the_q_sys_file(tmp_path, capsys):
    """Refuse an output path that is the q_sys file itself."""
    q_sys = write_q_sys(tmp_path, variant())
    before = q_sys.read_text()
    assert main([str(q_sys), '-o', str(q_sys), '--package',
                 f'quasistatic_simulator={DATA}']) == 2
    assert 'would overwrite the q_sys file' in capsys.readouterr().err
    assert q_sys.read_text() == before


def test_converting_needs_neither_drake_nor_numpy():
    """The module imports only yaml, argparse, pathlib and os (and the stdlib lazily)."""
    source = Path(__file__).resolve().parent.parent / 'quasistatic_drake' / 'apps' / \
        'convert_qsim.py'
    imports = [line for line in source.read_text().splitlines()
               if line.startswith(('import ', 'from '))]
    assert imports == ['from __future__ import annotations', 'import argparse', 'import os',
                       'from pathlib import Path', 'import yaml']
