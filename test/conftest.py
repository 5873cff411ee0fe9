"""Shared helpers: scenarios built from plain model files the package has never seen."""

import os

import numpy as np
from pydrake.math import RollPitchYaw
import pytest

from quasistatic_drake import QuasistaticSimulator, Scenario, State
from quasistatic_drake.shapes import signed_distance

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PENETRATION_LIMIT = -1e-3   # [m] the deepest penetration any test tolerates
# Python code of the package that the linters check; the ones that do not exist are skipped.
PYTHON_PATHS = ('quasistatic_drake', 'test', 'benchmarks', 'launch', 'setup.py')


def python_paths():
    """Return the entries of PYTHON_PATHS that exist, relative to the repo root."""
    return [p for p in PYTHON_PATHS if os.path.exists(os.path.join(REPO_ROOT, p))]


def sdf_box_object(name, size, mass, mu=None):
    """Return an SDFormat model of a free box with a plain <box> collision."""
    ixx = mass / 12.0 * (size[1] ** 2 + size[2] ** 2)
    iyy = mass / 12.0 * (size[0] ** 2 + size[2] ** 2)
    izz = mass / 12.0 * (size[0] ** 2 + size[1] ** 2)
    friction = ('' if mu is None else
                f'<drake:proximity_properties><drake:mu_dynamic>{mu}</drake:mu_dynamic>'
                '</drake:proximity_properties>')
    return f"""<?xml version="1.0"?>
<sdf version="1.9" xmlns:drake="http://drake.mit.edu">
  <model name="{name}">
    <link name="{name}_body">
      <inertial><mass>{mass}</mass>
        <inertia><ixx>{ixx}</ixx><iyy>{iyy}</iyy><izz>{izz}</izz>
          <ixy>0</ixy><ixz>0</ixz><iyz>0</iyz></inertia></inertial>
      <collision name="{name}_collision">
        <geometry><box><size>{size[0]} {size[1]} {size[2]}</size></box></geometry>
        {friction}
      </collision>
      <visual name="{name}_visual">
        <geometry><box><size>{size[0]} {size[1]} {size[2]}</size></box></geometry>
      </visual>
    </link>
  </model>
</sdf>
"""


def sdf_shape_object(name, geometry, mass, inertia, mu=0.5):
    """Return an SDFormat model of a free body with the given <geometry> content."""
    return f"""<?xml version="1.0"?>
<sdf version="1.9" xmlns:drake="http://drake.mit.edu">
  <model name="{name}">
    <link name="{name}_body">
      <inertial><mass>{mass}</mass>
        <inertia><ixx>{inertia[0]}</ixx><iyy>{inertia[1]}</iyy><izz>{inertia[2]}</izz>
          <ixy>0</ixy><ixz>0</ixz><iyz>0</iyz></inertia></inertial>
      <collision name="{name}_collision">
        <geometry>{geometry}</geometry>
        <drake:proximity_properties><drake:mu_dynamic>{mu}</drake:mu_dynamic>
        </drake:proximity_properties>
      </collision>
    </link>
  </model>
</sdf>
"""


def urdf_ground(size=(2.0, 2.0, 0.2), mu=0.5):
    """Return a URDF ground slab whose top face is its frame's z = +size[2]/2."""
    return f"""<?xml version="1.0"?>
<robot name="ground" xmlns:drake="http://drake.mit.edu">
  <link name="slab">
    <collision>
      <geometry><box size="{size[0]} {size[1]} {size[2]}"/></geometry>
      <drake:proximity_properties><drake:mu_dynamic value="{mu}"/></drake:proximity_properties>
    </collision>
  </link>
</robot>
"""


def urdf_cartesian_robot(name, links, mu=0.8):
    """
    Return a URDF robot of prismatic joints from the world.

    ``links`` is a list of (joint_name, parent, axis, collision_xml or None);
    each joint's child link is named after the joint with '_link' appended.
    """
    parts = ['<link name="world"/>']
    for joint, parent, axis, collision in links:
        geometry = '' if collision is None else f"""
      <collision>{collision}
        <drake:proximity_properties><drake:mu_dynamic value="{mu}"/>
        </drake:proximity_properties>
      </collision>"""
        parts.append(f"""
    <link name="{joint}_link">
      <inertial><mass value="0.1"/>
        <inertia ixx="1e-4" ixy="0" ixz="0" iyy="1e-4" iyz="0" izz="1e-4"/></inertial>{geometry}
    </link>
    <joint name="{joint}" type="prismatic">
      <parent link="{parent}"/><child link="{joint}_link"/><axis xyz="{axis}"/>
      <limit lower="-2" upper="2" effort="100" velocity="1"/>
    </joint>""")
    body = '\n'.join(parts)
    return f"""<?xml version="1.0"?>
<robot name="{name}" xmlns:drake="http://drake.mit.edu">
{body}
</robot>
"""


def write(tmp_path, filename, text):
    """Write a model file under tmp_path and return its name."""
    (tmp_path / filename).write_text(text)
    return filename


def ground_entry(tmp_path, mu=0.5):
    """Return an environment entry for a 0.2 m thick ground slab with its top at z = 0."""
    return {'name': 'ground', 'file': write(tmp_path, 'ground.urdf', urdf_ground(mu=mu)),
            'pose': {'xyz': [0, 0, -0.1]}}


def assert_gradient_matches_finite_differences(shape, points, d, grad, where):
    """Check the field's gradient against forward differences at most (97 %) points."""
    step = 1e-7
    for axis in range(3):
        shifted = points.copy()
        shifted[:, axis] += step
        numeric = (signed_distance(shape, shifted)[0] - d) / step
        smooth = np.abs(numeric - grad[:, axis]) < 1e-4
        assert smooth.mean() > 0.97, f'the gradient matches away from {where}'


def pads_robot(tmp_path, pad_mu):
    """Return a robot entry: two box pads sliding along x on a carriage lifted along z."""
    pad = '<geometry><box size="0.02 0.06 0.06"/></geometry>'
    robot = urdf_cartesian_robot('pads', [
        ('lift', 'world', '0 0 1', None),
        ('left', 'lift_link', '1 0 0', pad), ('right', 'lift_link', '1 0 0', pad)], mu=pad_mu)
    return {'name': 'pads', 'file': write(tmp_path, 'pads.urdf', robot),
            'stiffness': [1000, 1000, 1000], 'initial_positions': [0.05, -0.07, 0.07]}


def make_sim(tmp_path, data):
    """Build a simulator from a scenario dict whose files are relative to tmp_path."""
    base = {'time_step': 0.1, 'contact_detection_tolerance': 0.02,
            'friction_directions': 4, 'gravity': [0, 0, -9.81]}
    base.update(data)
    return QuasistaticSimulator(Scenario.from_dict(base, base_dir=tmp_path))


def run(sim, start, commands, steps):
    """
    Step ``steps`` times from ``start`` (a State, or a q to start from without preload).

    Checks every step's success, penetration and quaternions; returns the
    last StepResult.
    """
    state = start if isinstance(start, State) else sim.initial_state(start)
    result = None
    for _ in range(steps):
        result = sim.step(state, commands)
        assert result.success, result.status
        state = result.state_next
        q = np.array(state.q)
        assert sim.min_signed_distance(q) >= PENETRATION_LIMIT
        for start in sim.model.quaternion_starts:
            assert abs(np.linalg.norm(q[start:start + 4]) - 1.0) < 1e-12
    return result


def pose_xyz_rpy(sim, q, name):
    """Return (xyz, rpy) of an object at q."""
    X = sim.object_pose(q, name)
    return X.translation(), RollPitchYaw(X.rotation()).vector()


@pytest.fixture
def harness():
    """Start a ROS probe in an isolated DDS domain (a node started as a subprocess inherits it)."""
    from test_ros_helpers import RosHarness      # rclpy: only the ROS tests import it
    h = RosHarness()
    yield h
    h.close()


@pytest.fixture(params=[False, True], ids=['quasi_static', 'quasi_dynamic'])
def quasi_dynamic(request):
    """Run a test in both modes of the QP formulation."""
    return request.param
