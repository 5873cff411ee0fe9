"""The contact forces drawn in a real Meshcat: arrow geometry, the system, a real browser."""

import numpy as np
from PIL import Image
from pydrake.geometry import Meshcat, MeshcatVisualizer
from pydrake.systems.analysis import Simulator
from pydrake.systems.framework import DiagramBuilder
from pydrake.systems.primitives import ConstantVectorSource
import pytest

from browser import ARTIFACTS_DIR, screenshot
from conftest import ground_entry, make_sim, pads_robot, REPO_ROOT, sdf_box_object, write
from quasistatic_drake import Scenario
from quasistatic_drake.contact_visualizer import (ContactForceVisualizer,
                                                  ContactForceVisualizerParams,
                                                  force_arrow_segments, HEAD_FRACTION,
                                                  HEAD_HALF_ANGLE)
from quasistatic_drake.quasistatic_plant import QuasistaticPlant
from test_meshcat_browser import require_browser

TWO_PADS = f'{REPO_ROOT}/config/two_pads_lift.yaml'
PARAMS = ContactForceVisualizerParams(newtons_per_meter=20.0, force_threshold=0.5)


def test_an_arrow_per_force_above_the_threshold():
    points = np.array([[0.0, 0.0, 0.0], [1.0, 2.0, 3.0], [5.0, 5.0, 5.0]])
    forces = np.array([[0.0, 0.0, 10.0], [0.0, 4.0, 0.0], [0.1, 0.0, 0.0]])   # last: too small
    start, end = force_arrow_segments(points, forces, PARAMS)
    assert start.shape == end.shape == (3, 6)          # shaft and two head sides, twice
    for k, (p, f) in enumerate(zip(points[:2], forces[:2])):
        tip = p + f / PARAMS.newtons_per_meter
        shafts = [j for j in range(6) if np.allclose(start[:, j], p)]
        assert len(shafts) == 1 and np.allclose(end[:, shafts[0]], tip), f'shaft {k}'
        heads = [j for j in range(6) if np.allclose(start[:, j], tip)]
        assert len(heads) == 2, f'head {k}'
        for j in heads:
            side = end[:, j] - tip
            length = np.linalg.norm(side)
            assert length == pytest.approx(HEAD_FRACTION * np.linalg.norm(f)
                                           / PARAMS.newtons_per_meter)
            cosine = side @ -f / (length * np.linalg.norm(f))
            assert cosine == pytest.approx(np.cos(HEAD_HALF_ANGLE))
        back = HEAD_FRACTION * np.linalg.norm(f) / PARAMS.newtons_per_meter
        np.testing.assert_allclose(end[:, heads[0]] + end[:, heads[1]] - 2 * tip,
                                   -2 * np.cos(HEAD_HALF_ANGLE) * back * f / np.linalg.norm(f),
                                   atol=1e-12, err_msg='the two sides mirror each other')


def test_no_force_no_segment():
    start, end = force_arrow_segments(np.zeros((0, 3)), np.zeros((0, 3)), PARAMS)
    assert start.shape == end.shape == (3, 0)


def test_bad_params_are_refused():
    with pytest.raises(ValueError, match='newtons_per_meter must be > 0'):
        ContactForceVisualizer(Meshcat(), ContactForceVisualizerParams(newtons_per_meter=0.0))


def scene(tmp_path, box_height):
    """Return a plant with pads far apart and a box at ``box_height`` over the ground."""
    box = write(tmp_path, 'box.sdf', sdf_box_object('box', [0.1] * 3, 1.0))
    robot = pads_robot(tmp_path, 0.8)
    robot['initial_positions'] = [0.05, -0.2, 0.2]
    return QuasistaticPlant(make_sim(tmp_path, {
        'robots': [robot], 'environment': [ground_entry(tmp_path)],
        'objects': [{'name': 'box', 'file': box, 'initial_pose': {'xyz': [0, 0, box_height]}}]}))


def run(plant, meshcat, steps, params=None):
    """Simulate ``plant`` with a ContactForceVisualizer drawing into ``meshcat``."""
    builder = DiagramBuilder()
    builder.AddSystem(plant)
    params = params or ContactForceVisualizerParams(publish_period=plant.time_step)
    ContactForceVisualizer.AddToBuilder(builder, plant.get_contact_results_output_port(),
                                        meshcat, params)
    simulator = Simulator(builder.Build())
    simulator.AdvanceTo(steps * plant.time_step)
    return simulator


def test_the_forces_on_a_resting_box_are_drawn_and_deleted_at_initialization(tmp_path):
    meshcat = Meshcat()
    plant = scene(tmp_path, 0.05)
    simulator = run(plant, meshcat, 2)
    context = plant.GetMyContextFromRoot(simulator.get_context())
    assert plant.get_contact_results_output_port().Eval(context), 'the box rests on the ground'
    assert meshcat.HasPath('contact_forces')
    assert len(meshcat._GetPackedObject('contact_forces')) > 0
    simulator.get_mutable_context().SetTime(0.0)
    plant.set_positions(plant.GetMyMutableContextFromRoot(simulator.get_mutable_context()),
                        plant.get_positions(context))    # a new start: no step, no forces
    simulator.Initialize()          # deletes the old arrows; nothing to draw at t = 0
    assert not meshcat.HasPath('contact_forces')


def test_forces_below_the_threshold_are_not_drawn(tmp_path):
    meshcat = Meshcat()
    run(scene(tmp_path, 0.05), meshcat, 2, ContactForceVisualizerParams(force_threshold=100.0))
    assert not meshcat.HasPath('contact_forces'), 'the box weighs 9.81 N: no arrow'


def greenish_pixels(png):
    """Return how many pixels are clearly green (the arrows' colour), whatever the shading."""
    rgb = np.asarray(Image.open(png).convert('RGB')).astype(int)
    return int(np.sum((rgb[..., 1] - rgb[..., 0] > 40) & (rgb[..., 1] - rgb[..., 2] > 40)))


def test_the_arrows_show_in_a_real_browser():
    """Chromium renders the live page: green arrows while the pads squeeze, none once deleted."""
    require_browser()
    meshcat = Meshcat()
    builder = DiagramBuilder()
    plant = builder.AddSystem(QuasistaticPlant(Scenario.from_yaml(TWO_PADS)))
    squeeze = builder.AddSystem(ConstantVectorSource([0.0, 0.1, -0.1]))
    builder.Connect(squeeze.get_output_port(), plant.get_velocity_command_input_port('pads'))
    MeshcatVisualizer.AddToBuilder(builder, plant.get_query_object_output_port(), meshcat)
    forces = ContactForceVisualizer.AddToBuilder(
        builder, plant.get_contact_results_output_port(), meshcat,
        ContactForceVisualizerParams(newtons_per_meter=20.0))
    Simulator(builder.Build()).AdvanceTo(0.55)
    drawn = screenshot(meshcat.web_url(), ARTIFACTS_DIR / 'contact_forces.png')
    forces.Delete()
    deleted = screenshot(meshcat.web_url(), ARTIFACTS_DIR / 'contact_forces_deleted.png')
    assert greenish_pixels(drawn) > 200, 'the squeeze forces are drawn'
    assert greenish_pixels(deleted) == 0, 'Delete() removes them'
