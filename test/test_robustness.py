"""
Never sink, never freeze: the reproductions of the fuzz, soak and flood issue, engine side.

* Objects at a table's edge: a box resting with its centre 4 cm inside the
  edge stays put; a pushed box never goes below -1 mm and tips only once the
  push's moment about the edge outweighs it; the table's edge holds a box, a convex mesh and a
  lying cylinder that overhang it.
* Large motions in one step: a box tilted 0.3 rad on one edge falls flat
  without sinking; a box pushed 22 mm down onto the table in one step does
  not tunnel with a corner that started beyond the detection tolerance.
* Buried robots: pads fully inside the table climb out; the spring
  reference's lead over the joints is bounded; a penetration deeper than the
  joints' velocity limits can undo in one step is worked off over several.
* Model-file velocity limits bound the joints, whatever the command.
"""

import numpy as np
from pydrake.math import RollPitchYaw
import pytest
import yaml

from quasistatic_drake import CommandError, QuasistaticSimulator, Scenario, ScenarioError
from quasistatic_drake.model import DEFAULT_MAX_LEAD

from conftest import (ground_entry, make_sim, PENETRATION_LIMIT, pose_xyz_rpy, REPO_ROOT,
                      sdf_box_object, sdf_shape_object, urdf_cartesian_robot, write)

TABLE_EDGE_X = 0.6          # config/finger_push.yaml: the 1.2 m table is centred at x = 0
FINGER_AWAY = [-0.3, 0.0, 0.3]


def config_sim(name, **changes):
    """Return a simulator for config/<name>.yaml with top-level keys or entries changed."""
    data = yaml.safe_load(open(f'{REPO_ROOT}/config/{name}.yaml'))
    for key, value in changes.items():
        section, _, field = key.partition('__')
        if field:
            data[section][0][field] = value
        else:
            data[section] = value
    return QuasistaticSimulator(Scenario.from_dict(data, base_dir=f'{REPO_ROOT}/config'))


def roll(sim, q, commands, steps, q_ref=None):
    """Step from q (and q_ref) ``steps`` times; return the StepResult of every step."""
    state, out = sim.initial_state(q, q_ref=q_ref), []
    for _ in range(steps):
        result = sim.step(state, commands)
        assert result.success, (result.status, result.diagnostics.error)
        state = result.state_next
        out.append(result)
    return out


# ----- objects at the table's edge ------------------------------------------------------
def test_box_resting_with_its_centre_inside_the_edge_stays_put():
    sim = config_sim('finger_push', objects__initial_pose={'xyz': [0.56, 0, 0.05]},
                     robots__initial_positions=FINGER_AWAY)
    q0 = sim.default_positions()
    results = roll(sim, q0, {}, 20)
    xyz, rpy = pose_xyz_rpy(sim, results[-1].q_next, 'box')
    np.testing.assert_allclose(xyz, [0.56, 0, 0.05], atol=1e-6)
    assert np.max(np.abs(rpy)) < 1e-6
    assert min(r.diagnostics.min_phi_next for r in results) > -1e-6


def test_table_edge_under_an_overhanging_box_is_in_the_manifold():
    """The table's top edge at x = 0.6 crosses the box's bottom face: two corners there."""
    sim = config_sim('finger_push', objects__initial_pose={'xyz': [0.56, 0, 0.05]},
                     robots__initial_positions=FINGER_AWAY)
    sim.model.set_positions(sim.default_positions())
    contacts = sim.detector.detect(0.02)
    support = {(round(p[0], 9), round(p[1], 9)) for p, phi, n, b in zip(
        contacts.point_A_W, contacts.phi, contacts.normal_W, contacts.body_b)
        if 'table' in b and abs(phi) < 1e-9 and abs(n[2]) > 1 - 1e-9}
    assert {(0.51, -0.05), (0.51, 0.05), (0.6, -0.05), (0.6, 0.05)} <= support


def test_pushed_box_never_sinks_and_tips_only_past_the_edge():
    """
    Check the box pushed off the table's edge: never below -1 mm, and it tips only as statics say.

    The finger pushes at the box's mid-height z_f = 5 cm against the table's
    friction mu m g: about the table's edge that push turns the box once
    mu m g z_f > m g (x_edge - x), so the box may tip from x = x_edge - mu z_f
    (0.575 m) on, not before; and then it falls off.
    """
    sim = config_sim('finger_push')
    mu, z_push = 0.5, 0.05
    state = sim.initial_state()
    deepest, tipped_at = np.inf, None
    for _ in range(80):
        result = sim.step(state, {'finger': [0.1, 0, 0]})
        assert result.success
        state = result.state_next
        q = state.q
        deepest = min(deepest, sim.min_signed_distance(q))
        xyz, rpy = pose_xyz_rpy(sim, q, 'box')
        if tipped_at is None and abs(rpy[1]) > 0.05:
            tipped_at = xyz[0]
    assert deepest > PENETRATION_LIMIT
    assert tipped_at is not None and tipped_at > TABLE_EDGE_X - mu * z_push, 'tips as statics say'
    assert xyz[2] < -0.5, 'then it falls off'


@pytest.mark.parametrize('shape', ['box', 'convex'])
def test_overhanging_box_or_mesh_is_held_by_the_table_edge(tmp_path, shape):
    """A 10 cm box or hull with its centre 2 cm inside a ground slab's edge stays put."""
    if shape == 'box':
        model = sdf_box_object('crate', [0.1] * 3, 1.0)
    else:
        (tmp_path / 'cube.obj').write_text(_cube_obj(0.05))
        model = sdf_shape_object('crate', '<mesh><uri>cube.obj</uri><drake:declare_convex/>'
                                 '</mesh>', 1.0, [1.7e-3] * 3)
    sim = make_sim(tmp_path, {
        'objects': [{'name': 'crate', 'file': write(tmp_path, 'crate.sdf', model),
                     'initial_pose': {'xyz': [0.98, 0.0, 0.05]}}],
        'environment': [ground_entry(tmp_path)]})                 # slab edge at x = 1.0
    results = roll(sim, sim.default_positions(), {}, 10)
    xyz, rpy = pose_xyz_rpy(sim, results[-1].q_next, 'crate')
    np.testing.assert_allclose(xyz, [0.98, 0, 0.05], atol=1e-5)
    assert np.max(np.abs(rpy)) < 1e-5


def _cube_obj(half):
    """Return a Wavefront OBJ cube of half side ``half``."""
    v = [(x, y, z) for x in (-half, half) for y in (-half, half) for z in (-half, half)]
    faces = [(1, 3, 4, 2), (5, 6, 8, 7), (1, 2, 6, 5), (3, 7, 8, 4), (1, 5, 7, 3), (2, 4, 8, 6)]
    return '\n'.join([f'v {x} {y} {z}' for x, y, z in v]
                     + [f'f {" ".join(map(str, f))}' for f in faces]) + '\n'


def test_lying_cylinder_across_the_table_edge_is_held_by_the_edge(tmp_path):
    """Its centre 2 cm inside the edge: the edge's deepest point on the curved side holds it."""
    geometry = '<cylinder><radius>0.03</radius><length>0.14</length></cylinder>'
    model = sdf_shape_object('roll', geometry, 0.4, [1e-3, 1e-3, 2e-4])
    sim = make_sim(tmp_path, {
        'objects': [{'name': 'roll', 'file': write(tmp_path, 'roll.sdf', model),
                     'initial_pose': {'xyz': [0.98, 0.0, 0.03], 'rpy': [0, np.pi / 2, 0.3]}}],
        'environment': [ground_entry(tmp_path)]})
    sim.model.set_positions(sim.default_positions())
    contacts = sim.detector.detect(0.02)
    on_edge = [p for p, phi in zip(contacts.point_A_W, contacts.phi)
               if abs(p[0] - 1.0) < 1e-6 and abs(phi) < 1e-6]
    assert on_edge, 'a contact where the slab edge meets the cylinder side'
    results = roll(sim, sim.default_positions(), {}, 10)
    xyz, rpy = pose_xyz_rpy(sim, results[-1].q_next, 'roll')
    np.testing.assert_allclose(xyz, [0.98, 0, 0.03], atol=1e-5)
    assert min(r.diagnostics.min_phi_next for r in results) > -1e-6


# ----- large motions in one step --------------------------------------------------------
def test_box_tilted_on_one_edge_falls_flat_without_sinking():
    tilt = 0.3
    sim = config_sim('finger_push', robots__initial_positions=FINGER_AWAY, objects__initial_pose={
        'xyz': [0, 0, 0.05 * (np.cos(tilt) + np.sin(tilt))], 'rpy': [tilt, 0, 0]})
    results = roll(sim, sim.default_positions(), {}, 8)
    assert min(sim.min_signed_distance(r.q_next) for r in results) > -5e-4
    xyz, rpy = pose_xyz_rpy(sim, results[-1].q_next, 'box')
    assert abs(xyz[2] - 0.05) < 1e-6 and np.max(np.abs(rpy)) < 1e-6


def test_a_box_on_one_edge_touches_the_table_only_along_that_edge():
    """The box-box witness of an edge on a face lies on the edge (it lay under the centre)."""
    tilt = 0.3
    sim = config_sim('finger_push', robots__initial_positions=FINGER_AWAY, objects__initial_pose={
        'xyz': [0, 0, 0.05 * (np.cos(tilt) + np.sin(tilt))], 'rpy': [tilt, 0, 0]})
    contacts = sim.step(sim.initial_state(), {}).contact_set
    on_box = contacts.local_a[[b.startswith('box') for b in contacts.body_a]]
    assert len(on_box) >= 2
    assert np.allclose(on_box[:, 1:], [-0.05, -0.05], atol=1e-12), on_box   # the -y, -z edge


def test_a_turn_too_large_for_the_linearised_contacts_stays_out_of_the_table():
    """
    Check the rounded box on its side, the arm under a fuzzed extreme command: -11.3 mm before.

    The state was recorded under Anitescu's rows, whose lift of the sliding box
    turned it too far in one step and 11.3 mm into the table.  The step's exact
    rows and its trust region on the objects keep it within 0.5 mm.
    """
    scenario = Scenario.from_yaml(f'{REPO_ROOT}/config/arm_pick_place_rounded_box.yaml')
    sim = QuasistaticSimulator(scenario)
    start = sim.initial_state(np.array(TOO_FAR['q']), q_ref=np.array(TOO_FAR['q_ref']))
    result = sim.step(start, TOO_FAR['commands'])
    assert result.success
    assert sim.min_signed_distance(result.q_next) > -5e-4


TOO_FAR = {  # benchmarks/fuzz.py, arm_pick_place_rounded_box, seed 0
    'q': [2.966443987306372, -1.5154034658027893, -0.9220207047968559, 0.9335606868778402,
          1.6470716619904142, -1.882640982077022, 0.6803446258443908, 0.055, 0.020914759818975472,
          0.5432132243438526, 0.5432132243438527, -0.45268023250187883, -0.45268023250187944,
          0.5610352549660705, -0.1265815923306345, 0.030000000000000065],
    'q_ref': [2.9670597, -1.5162172436944494, -0.9214771310902405, 0.9337458971056788,
              1.6468458770867014, -1.8834757336900514, 0.6804277381000542, 0.055,
              0.020727961317491585],
    'commands': {'iiwa': [-88.70519698676914, 69.1301177397702, 129.14741749045362,
                          64.58799676475769, -182.79575135761195, 158.58444398796857,
                          74.45108039104589, -2.7929715069575645, 10.7361828673303]}}


def test_box_pushed_down_does_not_tunnel_with_a_far_corner():
    """A tilted box 19 mm above the table, pushed 22 mm down: a corner 21 mm away hit it."""
    sim = QuasistaticSimulator(Scenario.from_yaml(f'{REPO_ROOT}/config/bench_pad_push.yaml'))
    q = np.array(FAR_CORNER['q'])
    result = sim.step(sim.initial_state(q, q_ref=np.array(FAR_CORNER['q_ref'])),
                      FAR_CORNER['commands'])
    assert result.success and result.diagnostics.iterations >= 2
    assert sim.min_signed_distance(result.q_next) > -1e-4


FAR_CORNER = {  # benchmarks/fuzz.py on bench_pad_push, seed 0, step 329: -1.25 mm before the fix
    'q': [0.06924785208521101, 0.11478838102339386, 0.2567179618981839, 0.9976829081209224,
          -0.03330003883201776, -0.011714153497286432, -0.05768946624587066,
          0.18805017862262286, 0.0015988009633096906, 0.07313193095447766],
    'q_ref': [0.07489545025373028, 0.11470289283768036, 0.25003813008862554],
    'commands': {'pads': [-0.054747948324000345, -0.32064509803744823, 4.680847031091062e-07]}}


# ----- buried robots ----------------------------------------------------------------------
def test_buried_pads_climb_out():
    """Pads fully inside the table (lift -0.03 m), commanded up: out within 3 steps."""
    sim = config_sim('two_pads_lift', robots__initial_positions=[-0.03, -0.07, 0.07])
    q0 = sim.default_positions()
    assert sim.min_signed_distance(q0) < -0.05
    results = roll(sim, q0, {'pads': [0.2, 0, 0]}, 10)
    phis = [sim.min_signed_distance(r.q_next) for r in results]
    assert max(phis[:3]) > PENETRATION_LIMIT, 'out within 3 steps'
    assert min(phis[3:]) > PENETRATION_LIMIT
    assert sim.robot_positions(results[-1].q_next, 'pads')[0] > 0.1, 'and it keeps rising'


@pytest.mark.parametrize('speed', [0.2, -0.2])
def test_pads_buried_exactly_halfway_leave_the_way_they_are_commanded(speed):
    """
    Pads centred in the table's thickness are as deep both ways: they leave as commanded.

    Before, the tie went to the table's bottom face whatever the command
    (issue 31, defect 14): lifted, the pads came out underneath and pressed
    up against the table for good.
    """
    sim = config_sim('two_pads_lift', robots__initial_positions=[-0.05, -0.07, 0.07])
    q0 = sim.default_positions()
    assert sim.min_signed_distance(q0) == pytest.approx(-0.08, abs=1e-12)
    results = roll(sim, q0, {'pads': [speed, 0, 0]}, 10)
    lifts = [sim.robot_positions(r.q_next, 'pads')[0] for r in results]
    assert min(sim.min_signed_distance(r.q_next) for r in results[1:]) > PENETRATION_LIMIT
    if speed > 0:
        assert lifts[0] == pytest.approx(0.03, abs=1e-6), 'out through the top face'
        assert lifts[-1] > 0.1, 'and it keeps rising'
    else:
        assert lifts[0] == pytest.approx(-0.13, abs=1e-6), 'out through the bottom face'
        assert lifts[-1] < -0.2, 'and it keeps sinking'


def test_reference_lead_is_bounded_while_a_robot_is_blocked():
    """Pads pushed into the table for 10 s: the reference leads by max_reference_lead at most."""
    sim = config_sim('two_pads_lift')
    state = sim.initial_state()
    for _ in range(100):
        result = sim.step(state, {'pads': [-0.5, 0, 0]})
        state = result.state_next
    q, q_ref = np.array(state.q), np.array(state.q_ref)
    lift = sim.robot_positions(q, 'pads')[0]
    assert lift > 0.03 - 1e-6, 'held by the table'
    assert q_ref[0] == pytest.approx(lift - DEFAULT_MAX_LEAD['prismatic'], abs=1e-12)
    assert result.diagnostics.reference_limited
    up = sim.step(state, {'pads': [0.5, 0, 0]})   # unwinds at once
    assert up.state_next.q_ref[0] == pytest.approx(q_ref[0] + 0.05, abs=1e-12)


def test_max_reference_lead_is_honoured_and_checked(tmp_path):
    sim = config_sim('two_pads_lift', robots__max_reference_lead=[0.01, 0.02, 0.02])
    state = sim.initial_state()
    for _ in range(20):
        state = sim.step(state, {'pads': [-0.5, 0, 0]}).state_next
    assert sim.robot_positions(state.q, 'pads')[0] - state.q_ref[0] == pytest.approx(0.01,
                                                                                     abs=1e-12)
    with pytest.raises(ScenarioError, match=r'robots\[0\]\.max_reference_lead: expected 3 '
                                            r'values.*Fix'):
        config_sim('two_pads_lift', robots__max_reference_lead=[0.01])
    with pytest.raises(ScenarioError, match=r'robots\[0\]\.max_reference_lead\[1\]'):
        config_sim('two_pads_lift', robots__max_reference_lead=[0.01, -1, 0.01])


def test_penetration_beyond_one_step_of_velocity_is_worked_off_over_steps():
    """A pad 60 mm deep at h = 0.02 s moves 20 mm a step at most (1 m/s): 3 steps, partly."""
    sim = config_sim('two_pads_lift', time_step=0.02,
                     robots__initial_positions=[-0.03, -0.07, 0.07])
    results = roll(sim, sim.default_positions(), {'pads': [0.0, 0, 0]}, 6)
    first = results[0].diagnostics
    assert first.recovery_dropped and 0.0 < first.recovery_fraction < 1.0
    phis = [sim.min_signed_distance(r.q_next) for r in results]
    assert all(b > a for a, b in zip(phis[:2], phis[1:3])), 'it comes out a little each step'
    assert phis[-1] > PENETRATION_LIMIT


def test_an_arm_link_inside_the_table_corner_climbs_out():
    """
    Link 7 (a short cylinder) 15 mm into the table's corner climbs out.

    The table's edge inside it used to take the link's cap normal, against
    the pair's way out, and froze it.
    """
    sim = QuasistaticSimulator(Scenario.from_yaml(f'{REPO_ROOT}/config/arm_pick_place.yaml'))
    q, q_ref = np.array(LINK_IN_CORNER['q']), np.array(LINK_IN_CORNER['q_ref'])
    assert sim.min_signed_distance(q) < -0.015
    results = roll(sim, q, LINK_IN_CORNER['commands'], 3, q_ref=q_ref)
    assert sim.min_signed_distance(results[-1].q_next) > PENETRATION_LIMIT


LINK_IN_CORNER = {  # benchmarks/fuzz.py, arm_pick_place, seed 2: an injection never recovered
    'q': [2.5945550185629975, 1.8967312121813067, 0.8771479369993249, -2.0853254525014626,
          2.938316857008112, 1.5105884177895896, -1.4843966725122417, 0.055, 0.055,
          0.7046369631548471, 0.4888929398815784, -0.510865631388477, -0.05904871002752671,
          0.8590692061473052, -0.06101735452359491, 0.02999999999999997],
    'q_ref': [2.5945550185629975, 1.8967312121813067, 0.8771479369993249, -2.0853254525014626,
              2.938316857008112, 1.5105884177895896, -1.4843966725122417, 0.055, 0.055],
    'commands': {'iiwa': [-0.048161801840214194, -0.40311498165780785, -0.4721395840469986,
                          -0.994018549424466, 0.787852284145966, 0.30365138717476037,
                          -0.2548071513082316, 0.026241717939445623, -0.06508900060185002]}}


def test_a_corner_on_a_cylinder_rim_has_both_rows():
    """A finger's corner on the rim of the lying cylinder: the side's row and the cap's."""
    sim = QuasistaticSimulator(Scenario.from_yaml(f'{REPO_ROOT}/config/arm_pick_place.yaml'))
    q = np.array(CORNER_ON_RIM['q'])
    sim.model.set_positions(q)
    contacts = sim.detector.detect(0.02)
    rows = [n for n, phi, a, b in zip(contacts.normal_W, contacts.phi, contacts.body_a,
                                      contacts.body_b)
            if 'finger' in a and 'cylinder' in b and abs(phi) < 1e-6]
    axis = sim.object_pose(q, 'cylinder').rotation().matrix()[:, 2]
    assert any(abs(n @ axis) > 1 - 1e-9 for n in rows), 'the cap row'
    assert any(abs(n @ axis) < 1e-9 for n in rows), 'the side row'
    result = sim.step(sim.initial_state(q, q_ref=np.array(CORNER_ON_RIM['q_ref'])),
                      {'iiwa': [0.0] * 9})
    assert result.success and sim.min_signed_distance(result.q_next) > -1e-5


CORNER_ON_RIM = {  # benchmarks/fuzz.py, arm_pick_place, seed 0: -1.3 mm through the cap
    'q': [0.08802851293094632, 0.960560379416005, 0.08403806726714783, -1.3116627076450662,
          0.06922121478804663, 0.9841347510322886, -0.006956836470099306, 0.05295716551714343,
          0.05000000000000002, 0.7004836696083445, 0.4542041286881996, 0.5419396732871589,
          -0.09655376021693277, 0.7388989588367183, 0.09459983215216809, 0.029999999999999912],
    'q_ref': [0.08784962127908227, 0.964103382009676, 0.08350107015538642, -1.3123789253212292,
              0.0689450205866922, 0.9825068792765107, -0.00671098614858418, 0.055,
              0.05000000000000002]}


# ----- velocity limits ----------------------------------------------------------------------
def test_joint_velocity_limits_bound_the_joints():
    """two_pads.urdf's joints have <limit velocity="1.0">: a 30 m/s command moves 0.1 m/step."""
    sim = config_sim('two_pads_lift')
    q = sim.default_positions()
    result = sim.step(sim.initial_state(q), {'pads': [30.0, 0, 0]})
    assert sim.robot_positions(result.q_next, 'pads')[0] - 0.05 == pytest.approx(0.1, abs=1e-9)
    assert result.state_next.q_ref[0] == pytest.approx(0.05 + DEFAULT_MAX_LEAD['prismatic'] + 0.1)


# ----- position limits ----------------------------------------------------------------------
def limited_slider(tmp_path):
    """Return a robot of one prismatic joint along x: limits [-0.1, 0.1] m, 1 m/s, in the air."""
    cube = '<origin xyz="0 0 0.5"/><geometry><box size="0.02 0.02 0.02"/></geometry>'
    urdf = urdf_cartesian_robot('slider', [('slide', 'world', '1 0 0', cube)]).replace(
        'lower="-2" upper="2"', 'lower="-0.1" upper="0.1"')
    return make_sim(tmp_path, {
        'robots': [{'name': 'slider', 'file': write(tmp_path, 'slider.urdf', urdf),
                    'stiffness': [1000], 'initial_positions': [0.0]}],
        'environment': [ground_entry(tmp_path)]})


def test_joint_position_limits_hold_and_a_start_beyond_one_is_refused(tmp_path):
    """
    QP bounds (min(lo, q) - q) / h <= v' <= (max(hi, q) - q) / h (formulations/qp.py).

    A q further than LIMIT_SLACK beyond a limit was taken and held there
    (issue 31, defect 6: wrong geometry, silently); it is now a CommandError
    naming the joint and its limits, like a scenario's initial position.
    """
    sim = limited_slider(tmp_path)
    out = sim.rollout(sim.initial_state(), [{'slider': [0.6]}] * 4)
    assert out.failed_steps == 0
    assert out.q[1:, 0] == pytest.approx([0.06, 0.1, 0.1, 0.1], abs=1e-9), 'stops at 0.1 m'
    beyond = sim.default_positions()
    beyond[0] = 0.15                                         # placed beyond the upper limit
    with pytest.raises(CommandError, match=r"q\[0\] = 0\.15 puts joint 'slider::slide' outside "
                                           r"its limits \[-0\.1, 0\.1\]"):
        sim.initial_state(beyond)
    on_it = sim.default_positions()
    on_it[0] = 0.1 + 0.5e-9                                  # on the limit, within round-off
    back = sim.step(sim.initial_state(on_it), {'slider': [-0.5]})
    assert back.success and back.q_next[0] == pytest.approx(0.05, abs=1e-9)


# ----- docs/robustness.md's statement about a box pushed through its centre ----------------
@pytest.mark.parametrize('h', [0.1, 0.05, 0.02, 0.01])
def test_quasi_dynamic_push_through_the_centre_keeps_zero_yaw(h):
    """Quasi-dynamic mode: the round-off yaw grows per centimetre pushed, not per step."""
    sim = config_sim('finger_push', time_step=h, quasi_dynamic=True)
    state = sim.initial_state()
    for _ in range(int(round(3.0 / h))):
        state = sim.step(state, {'finger': [0.1, 0, 0]}).state_next
    q = state.q
    yaw = RollPitchYaw(sim.object_pose(q, 'box').rotation()).vector()[2]
    assert abs(np.degrees(yaw)) < 1e-5


@pytest.mark.parametrize('h', [0.01, 0.005])
def test_quasi_static_push_through_the_centre_holds_its_yaw(h):
    """Quasi-static mode: round cones price the turn (docs/formulations.md); issue 30: < 1 deg."""
    sim = config_sim('finger_push', time_step=h)
    state = sim.initial_state()
    for _ in range(int(round(3.0 / h))):
        result = sim.step(state, {'finger': [0.1, 0, 0]})
        assert result.success
        state = result.state_next
    pose = sim.object_pose(state.q, 'box')
    assert pose.translation()[0] > 0.28, 'the box was pushed'
    assert abs(np.degrees(RollPitchYaw(pose.rotation()).vector()[2])) < 1e-2


# ----- nothing inside a step ends the process -----------------------------------------------
@pytest.mark.parametrize('failure', [
    SystemExit('Failure at geometry/foo.cc:1 in Bar(): condition failed.'),
    RuntimeError('solver crashed'), ZeroDivisionError('division by zero'), MemoryError()],
    ids=['drake_check', 'runtime', 'zero_division', 'memory'])
def test_any_failure_inside_a_step_is_reported_and_keeps_q(monkeypatch, failure):
    sim = config_sim('two_pads_lift')
    q, start = sim.default_positions(), sim.initial_state()
    real_detect = sim.detector.detect

    def detect(*args, **kwargs):
        raise failure
    monkeypatch.setattr(sim.detector, 'detect', detect)
    result = sim.step(start, {'pads': [0.1, 0, 0]})
    assert result.status == 'error' and not result.success
    assert result.diagnostics.error.startswith(type(failure).__name__)
    np.testing.assert_array_equal(result.q_next, q)
    monkeypatch.setattr(sim.detector, 'detect', real_detect)
    after = sim.step(start, {'pads': [0.1, 0, 0]})   # the engine is still usable
    assert after.success
    assert sim.robot_positions(after.q_next, 'pads')[0] == pytest.approx(0.06, abs=1e-9)


def test_ctrl_c_inside_a_step_is_not_swallowed(monkeypatch):
    sim = config_sim('two_pads_lift')
    start = sim.initial_state()

    def detect(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(sim.detector, 'detect', detect)
    with pytest.raises(KeyboardInterrupt):
        sim.step(start, {})
