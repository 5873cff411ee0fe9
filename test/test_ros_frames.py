"""
TF frames as robot_state_publisher users expect (issue 32, item 7), over rclpy and FastDDS.

Two objects from one file share the link name ``crate_body``; the node runs
in-process and a probe collects /tf until both frames have arrived.
"""

import pytest
from rclpy.parameter import Parameter
import yaml

from conftest import ground_entry, pads_robot, sdf_box_object, write
from quasistatic_drake.ros.node import QuasistaticSimNode, SetupError
from test_ros_helpers import RosHarness, tf_children, transform_of, wait_for

CRATES = {'one': [0.0, 0.0, 0.05], 'two': [0.5, 0.0, 0.05]}


def two_crates(tmp_path, robots=None):
    """Write a scenario of the pads and two crates from one SDFormat file; return its path."""
    crate = write(tmp_path, 'crate.sdf', sdf_box_object('crate', [0.1] * 3, 1.0))
    data = {'time_step': 0.1, 'robots': robots or [pads_robot(tmp_path, 0.8)],
            'objects': [{'name': name, 'file': crate, 'initial_pose': {'xyz': xyz}}
                        for name, xyz in CRATES.items()],
            'environment': [ground_entry(tmp_path)]}
    path = tmp_path / 'crates.yaml'
    path.write_text(yaml.safe_dump(data))
    return str(path)


def tf_tree(tmp_path, **parameters):
    """Run the node on the two crates until /tf holds both; return /tf's and /tf_static's."""
    harness = RosHarness({'scenario': two_crates(tmp_path), 'meshcat': False,
                          'publish_rate': 100.0, **parameters})
    try:
        probe = harness.probe
        frames = wait_for(lambda: (children := tf_children(list(probe.tf)))
                          and sum('crate_body' in c for c in children) == 2 and children,
                          what='/tf with both crates')
        static = tf_children(wait_for(lambda: list(probe.tf_static), what='/tf_static'))
        return {child: transform_of(list(probe.tf), child) for child in frames}, static
    finally:
        harness.close()


def test_two_models_that_share_a_link_name_are_two_frames_of_one_tree(tmp_path):
    """<model>/<link> by default: both crates, each a child of world at its own pose."""
    tree, static = tf_tree(tmp_path)
    assert static == {'ground/slab': {'world'}}
    assert {'one/crate_body', 'two/crate_body', 'pads/lift_link', 'pads/left_link',
            'pads/right_link'} <= set(tree)
    assert all(t.header.frame_id == 'world' for t in tree.values())
    for name, xyz in CRATES.items():
        p = tree[f'{name}/crate_body'].transform.translation
        assert [p.x, p.y, p.z] == pytest.approx(xyz, abs=2e-3)


def test_bare_link_names_keep_shared_ones_apart(tmp_path):
    """model_prefix:=false: bare link names, but a shared one is still <model>/<link>."""
    tree, static = tf_tree(tmp_path, model_prefix=False, frame_prefix='sim/')
    assert set(static) == {'sim/slab'}
    assert {'sim/one/crate_body', 'sim/two/crate_body', 'sim/lift_link'} <= set(tree)
    assert not any(name.startswith('sim/pads/') for name in tree)


def test_bare_names_that_robot_state_publisher_would_repeat_are_refused(tmp_path):
    """Two robots from one URDF, model_prefix and publish_robot_tf false: a clear SetupError."""
    first = pads_robot(tmp_path, 0.8)
    second = dict(first, name='pads2', initial_positions=[0.5, -0.07, 0.07])
    harness = RosHarness()
    try:
        with pytest.raises(SetupError, match=r"parameter 'model_prefix' = false: robot 'pads' "
                                             r"and model\(s\) \['pads2'\].*Fix: set "
                                             r"model_prefix true"):
            QuasistaticSimNode(context=harness.context, parameter_overrides=[
                Parameter(k, value=v) for k, v in {
                    'scenario': two_crates(tmp_path, [first, second]), 'meshcat': False,
                    'model_prefix': False, 'publish_robot_tf': False}.items()])
    finally:
        harness.close()
