"""
Touching boxes never end the process (Drake's BoxBoxGradient: SystemExit, or std::abort).

Drake's signed distance of two boxes within 1e-14 m runs BoxBoxGradient: one
check there (the witness points coincide) reaches pydrake as ``SystemExit``,
which round-off in a box's orientation, as the simulation itself produces,
breaks; another branch calls std::abort.  The engine measures box pairs
itself (contact_detection.box_proximity) and catches Drake's failed checks
elsewhere (drake_query).  These tests put boxes face to face, edge to face,
vertex to face and edge to edge, exactly touching and within 1e-9 m, with
noise of 1e-15 to 1e-11 in orientation, and ask for signed distances and
steps; the states where Drake aborted run in a child process.
"""

import json
import subprocess
import sys

import numpy as np
from pydrake.math import RigidTransform, RollPitchYaw, RotationMatrix
import pytest

from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.contact_detection import proximity_pairs

from conftest import make_sim, pads_robot, REPO_ROOT, sdf_box_object, write

# The state of config/two_pads_lift.yaml that ended the node (the issue's reproduction).
KILLER_Q = [0.050000000000350826, -0.3, -0.18000000000000987, 1.0, -1.9629164376926235e-14,
            -1.6527962824613588e-13, -1.307666020608814e-13, -0.24000000000000782,
            4.2386664823533984e-14, 0.049999999999980935]
KILLER_Q_REF = [-199.3458306645273, 0.5283609000319724, -199.73133101646965]
KILLER_CMD = [0.03222100233495956, -0.011982095330152376, 0.1074507689496294]
# Gaps [m] between touching faces: Drake's check applies below |distance| 1e-14.
GAPS = [0.0, 5e-15, -5e-15, 1e-14, -1e-14, -3e-14, 1e-12, -1e-12, 1e-9, -1e-9]
PAD_HALF_X = 0.01      # the pads of conftest.pads_robot are 2 cm thick
BOX = 0.1


def test_the_reported_state_steps():
    sim = QuasistaticSimulator(Scenario.from_yaml(f'{REPO_ROOT}/config/two_pads_lift.yaml'))
    assert abs(sim.min_signed_distance(KILLER_Q)) < 1e-9
    result = sim.step(sim.initial_state(KILLER_Q, q_ref=KILLER_Q_REF), {'pads': KILLER_CMD})
    assert result.success, (result.status, result.diagnostics.error)
    assert result.diagnostics.min_phi_next > -1e-6


# States of config/two_pads_lift.yaml, found by the node's command flood, where Drake's
# BoxBoxGradient reached DRAKE_UNREACHABLE and called std::abort (exit code 134).
ABORTING = [
    {'q': [0.26513326726503395, -0.3, -0.1799999997107716, 0.7070469689080522,
           -0.009197126176007825, -0.7070469641389753, 0.009197126175996084,
           -0.24000000004612837, 0.007505162506790095, 0.22858592929588567],
     'q_ref': [0.27363389132537463, -0.26828726992518415, -0.22999999971077162],
     'cmd': [-0.1635229742824716, 0.20876960298669783, -0.24807206272239288]},
    {'q': [0.623467103739606, -1.3877787807814457e-16, 0.12000043101453557,
           0.9999988191746302, 0.0015367658720392874, 1.0424622329397168e-08,
           -1.6019982185127677e-11, 0.06000042997018991, -0.003874793430916057,
           0.597197551855535],
     'q_ref': [0.673467103739606, 0.049999999999999864, 0.07000043101453557],
     'cmd': [34.498237435924366, 31.089443342459788, 0.11965655318690271]}]
STEP_IN_A_CHILD = """
import json, sys
import numpy as np
from quasistatic_drake import QuasistaticSimulator, Scenario
case = json.loads(sys.argv[1])
sim = QuasistaticSimulator(Scenario.from_yaml('config/two_pads_lift.yaml'))
distance = sim.min_signed_distance(case['q'])
result = sim.step(sim.initial_state(case['q'], q_ref=case['q_ref']), {'pads': case['cmd']})
print(json.dumps({'distance': distance, 'status': result.status,
                  'error': result.diagnostics.error}))
"""


@pytest.mark.parametrize('case', range(len(ABORTING)))
def test_states_where_drake_aborted_step(case):
    """In a child process: Drake's abort would end it with code 134, not raise."""
    done = subprocess.run([sys.executable, '-c', STEP_IN_A_CHILD, json.dumps(ABORTING[case])],
                          capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out['status'] == 'optimal', out
    assert abs(out['distance']) < 1e-9, 'the boxes touch'


@pytest.fixture(scope='module')
def sim(tmp_path_factory):
    """Two free boxes (a stack) between two box pads above a ground slab."""
    tmp = tmp_path_factory.mktemp('touching')
    box = write(tmp, 'crate.sdf', sdf_box_object('crate', [BOX] * 3, 1.0, mu=0.5))
    top = write(tmp, 'lid.sdf', sdf_box_object('lid', [BOX] * 3, 0.5, mu=0.5))
    ground = write(tmp, 'ground.sdf', sdf_box_object('ground', [2.0, 2.0, 0.2], 1.0, mu=0.5))
    return make_sim(tmp, {
        'robots': [pads_robot(tmp, 0.8)],
        'objects': [{'name': 'crate', 'file': box, 'initial_pose': {'xyz': [0, 0, 0.05]}},
                    {'name': 'lid', 'file': top, 'initial_pose': {'xyz': [0, 0, 0.15]}}],
        'environment': [{'name': 'ground', 'file': ground, 'pose': {'xyz': [0, 0, -0.1]}}]})


def _noisy_rotation(rng, base_rpy):
    scale = 10.0 ** rng.uniform(-15, -11)
    return RotationMatrix(RollPitchYaw(np.asarray(base_rpy) + scale * rng.standard_normal(3)))


def _support_x(R: RotationMatrix, half: float) -> float:
    """Return how far a cube of half side ``half`` reaches along +x from its centre."""
    return float(half * np.abs(R.matrix()[0]).sum())


ORIENTATIONS = {
    'face': [0.0, 0.0, 0.0],
    'edge': [0.0, 0.0, np.pi / 4],        # a vertical edge against the pad's face
    'tilted_edge': [np.pi / 4, 0.0, 0.0],
    'vertex': [np.pi / 4, np.arctan(1 / np.sqrt(2)), 0.0],
    'quarter_turn': [0.0, 0.0, np.pi / 2],
}


def _touching_configuration(sim, rng, kind):
    """Return q: the crate between the pads and on the ground, the lid on the crate, touching."""
    q = sim.default_positions()
    R = _noisy_rotation(rng, ORIENTATIONS[kind])
    reach = _support_x(R, BOX / 2)
    low = float(BOX / 2 * np.abs(R.matrix()[2]).sum())
    gap = rng.choice(GAPS)
    centre = np.array([rng.uniform(-0.2, 0.2), rng.uniform(-0.2, 0.2), low + gap])
    crate = RigidTransform(R, centre)
    R_lid = _noisy_rotation(rng, [0.0, 0.0, rng.choice([0.0, np.pi / 4, np.pi / 6])])
    lid_low = float(BOX / 2 * np.abs(R_lid.matrix()[2]).sum())
    lid = RigidTransform(R_lid, centre + [0, 0, low + lid_low + rng.choice(GAPS)])
    lift = centre[2] + rng.uniform(-0.02, 0.02)
    left = centre[0] - reach - PAD_HALF_X - rng.choice(GAPS)
    right = centre[0] + reach + PAD_HALF_X + rng.choice(GAPS)
    plant, context = sim.model.plant, sim.model.plant_context
    sim.model.set_positions(q)
    plant.SetPositions(context, q)
    for name, X in (('crate', crate), ('lid', lid)):
        body = plant.GetBodyByName(sim.model.object(name).base_body)
        plant.SetFreeBodyPose(context, body, X)
    q = plant.GetPositions(context).copy()
    q[sim.model.robot('pads').q_idx] = [lift, left, right]
    return q


@pytest.mark.parametrize('kind', sorted(ORIENTATIONS))
def test_touching_boxes_never_raise(sim, kind):
    """600 touching configurations per kind: distances, contacts and steps, no exception."""
    rng = np.random.default_rng(sorted(ORIENTATIONS).index(kind))
    for trial in range(600):
        q = _touching_configuration(sim, rng, kind)
        sim.model.set_positions(q)
        for tolerance in (0.0, 1e-9, 0.02):
            proximity_pairs(sim.model, tolerance)
        assert np.isfinite(sim.min_signed_distance(q))
        command = {'pads': rng.uniform(-0.2, 0.2, 3)}
        result = sim.step(sim.initial_state(q), command)
        assert result.status != 'error', (kind, trial, result.diagnostics.error)
