"""
A box squeezed between two diamonds of small spheres resists a torque about the grasp axis.

drake_models' WSG 50 "with tip" touches with four 1 mm spheres per finger,
each its own geometry pair.  Fingers a micro-radian off the box's face put
the other spheres nanometres from it, and the whole squeeze on one sphere
per finger: two points on the grasp axis, which have no torsional friction.
The step's friction is bounded by the lagged normal impulse
(formulations/qp.py, ``lagged_impulses``); shared per geometry pair among
the loaded contacts, only the loaded sphere had friction, and a brick held
off its centre turned about the grasp axis (docs/contact.md).  A body
pair's impulse is now shared among all its contacts that touch.
"""

import math

import numpy as np
import pytest

from conftest import ground_entry, make_sim, run, sdf_box_object, write
from quasistatic_drake.contact import ContactSet
from quasistatic_drake.formulations.contact_memory import ContactMemory, recall
from quasistatic_drake.formulations.qp import lagged_impulses, TOUCH_DISTANCE

BOX = (0.05, 0.1, 0.05)           # squeezed across x
HOLD_Y = 0.03                     # [m] the diamonds' centre, off the box's centre along y
MISALIGNMENT = 1e-6               # [rad] the fingers' yaw off the box's faces


def finger(name, side):
    """
    Return a URDF prismatic finger along x with four 1 mm spheres in a 2 cm diamond.

    ``side`` is -1 (left, at negative x) or +1.  The spheres' x follow a yaw
    of MISALIGNMENT about z: the one farthest along y is 10 nm nearer the box.
    """
    spheres = []
    for dy, dz in ((0.01, 0.0), (-0.01, 0.0), (0.0, 0.01), (0.0, -0.01)):
        x = side * (0.001 - MISALIGNMENT * dy)          # sphere surface at the link's origin
        spheres.append(f"""
      <collision><origin xyz="{x!r} {HOLD_Y + dy} {0.025 + dz}"/>
        <geometry><sphere radius="0.001"/></geometry>
        <drake:proximity_properties><drake:mu_dynamic value="1.0"/></drake:proximity_properties>
      </collision>""")
    return f"""
    <link name="{name}_link">
      <inertial><mass value="0.05"/>
        <inertia ixx="1e-5" ixy="0" ixz="0" iyy="1e-5" iyz="0" izz="1e-5"/></inertial>
      {''.join(spheres)}
    </link>
    <joint name="{name}" type="prismatic">
      <parent link="lift_link"/><child link="{name}_link"/><axis xyz="1 0 0"/>
      <limit lower="-1" upper="1" effort="100" velocity="1"/>
    </joint>"""


def tip_gripper():
    """Return a URDF gripper: a carriage lifted along z, two sphere-tipped fingers along x."""
    return f"""<?xml version="1.0"?>
<robot name="tips" xmlns:drake="http://drake.mit.edu">
  <link name="world"/>
  <link name="lift_link">
    <inertial><mass value="0.1"/>
      <inertia ixx="1e-4" ixy="0" ixz="0" iyy="1e-4" iyz="0" izz="1e-4"/></inertial>
  </link>
  <joint name="lift" type="prismatic">
    <parent link="world"/><child link="lift_link"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="100" velocity="1"/>
  </joint>
  {finger('left', -1)}
  {finger('right', 1)}
</robot>
"""


def tip_scene(tmp_path):
    """Return the box on the ground, the fingers' spheres 9 mm from its faces."""
    return make_sim(tmp_path, {
        'robots': [{'name': 'tips', 'file': write(tmp_path, 'tips.urdf', tip_gripper()),
                    'stiffness': [1000, 1000, 1000],
                    'initial_positions': [0.0, -0.035, 0.035]}],
        'objects': [{'name': 'box', 'file': write(tmp_path, 'box.sdf', sdf_box_object(
            'box', BOX, 0.1, mu=1.0)), 'initial_pose': {'xyz': [0, 0, 0.025]}}],
        'environment': [ground_entry(tmp_path)]})


def tilt_deg(sim, q):
    """Return the angle between the box's z axis and the world's, in degrees."""
    R = sim.object_pose(q, 'box').rotation().matrix()
    return math.degrees(math.acos(min(1.0, R[2, 2])))


def test_a_box_held_off_centre_by_tip_spheres_does_not_turn_about_the_grasp_axis(tmp_path):
    """
    Squeeze the box 2 cm off its centre, lift it 5 cm: it stays level.

    Gravity's torque about the grasp axis is m g 3 cm = 0.029 N m; each
    finger's four spheres, 1 cm around the diamond's centre, resist up to
    mu N 1 cm = 0.1 N m with the squeeze N = 10 N.  Before the fix the load
    sat on the sphere 1 cm beyond the centre on each side, which alone had
    friction, and the box swung about the line through them (measured:
    36 degrees at the lift's end, and it rose 25 mm of the fingers' 50).
    """
    sim = tip_scene(tmp_path)
    state = sim.initial_state()
    closed = run(sim, state, {'tips': [0.0, 0.1, -0.1]}, 2)     # contact after 9 mm
    state = closed.state_next
    by_sphere = {}
    for c in closed.contacts:
        if c.body_b.endswith('box_body') and 'tips' in c.body_a:
            by_sphere[(c.body_a, round(c.point_W[1], 3), round(c.point_W[2], 3))] = c
    assert len(by_sphere) == 8                            # each sphere touches
    loaded = [key for key, c in by_sphere.items() if abs(c.force_W @ c.normal_W) > 1e-6]
    # the nanometres decide: the whole squeeze on the nearest sphere of each finger
    assert sorted(key[1] for key in loaded) == [HOLD_Y + 0.01] * 2
    lifted = run(sim, state, {'tips': [0.1, 0.0, 0.0]}, 5)
    q = lifted.state_next.q
    assert tilt_deg(sim, q) < 0.5
    assert sim.object_pose(q, 'box').translation()[2] > 0.025 + 0.04    # lifted with the fingers


def contacts_along_x(phi, bodies, geometries):
    """Return a ContactSet of contacts with normal x, the given gaps, bodies and geometries."""
    n = len(phi)
    points = np.array([[0.0, 0.01 * g[0], 0.0] for g in geometries])   # a place per geometry
    return ContactSet(
        phi=np.array(phi, dtype=float), J_n=np.zeros((n, 1)), J_f=np.zeros((2 * n, 1)),
        mu=np.ones(n), normal_W=np.tile([1.0, 0.0, 0.0], (n, 1)),
        tangents_W=np.tile([[0.0, 1.0, 0.0], [0.0, -1.0, 0.0]], (n, 1, 1)),
        point_A_W=points, point_B_W=points, body_a=tuple(b[0] for b in bodies),
        body_b=tuple(b[1] for b in bodies), geometry_a=np.array([g[0] for g in geometries]),
        geometry_b=np.array([g[1] for g in geometries]), local_a=points, local_b=points)


def test_a_body_pairs_impulse_is_shared_among_its_touching_contacts_of_any_geometry():
    """
    Four spheres of one finger (geometries 1 to 4) on a brick (9): the first carried 2 N s.

    Those that touch within TOUCH_DISTANCE of it share it; a sphere 1 mm
    apart, a new contact, and a touching contact of a body pair that carried
    nothing (the table, 7 on 8) have none.
    """
    finger, table = ('wsg::finger', 'brick::body'), ('table::top', 'brick::body')
    spheres = [(1, 9), (2, 9), (3, 9), (4, 9)]
    last = contacts_along_x([0.0, 6e-9, 1.3e-8, 0.0, 0.0], [finger] * 4 + [table],
                            spheres + [(7, 8)])
    memory = ContactMemory.of(last, np.array([2.0, 0.0, 0.0, 0.0, 0.0]), np.zeros((5, 3)))
    now = contacts_along_x([1e-12, 6e-9, 1e-3, 0.5 * TOUCH_DISTANCE, 0.0, 0.0],
                           [finger] * 5 + [table], spheres + [(5, 9), (7, 8)])
    found = recall(memory, now)
    assert list(found) == [0, 1, 2, 3, -1, 4]
    shares = lagged_impulses(now, memory, found)
    # touching: the loaded sphere, the one 6 nm away, the one 0.5 um away
    assert list(shares) == pytest.approx([2.0 / 3, 2.0 / 3, 0.0, 2.0 / 3, 0.0, 0.0],
                                         abs=1e-15)
    # 1.5 um away, the fourth sphere stands apart: the loaded one keeps the impulse
    apart = contacts_along_x([0.0, 1.5 * TOUCH_DISTANCE], [finger] * 2, spheres[:2])
    assert list(lagged_impulses(apart, memory, recall(memory, apart))) == [2.0, 0.0]
