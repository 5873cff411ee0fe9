"""
Batch rollouts (quasistatic_drake.batch): the same results on every backend, faults, smoothing.

Real local processes and a real local Ray (num_cpus=2, no dashboard).  The
two-pads scene (config/two_pads_lift.yaml) squeezes a box and lifts it.
"""

import os
import re
import signal
import time

import numpy as np
import pytest
from scipy.stats import norm

from conftest import REPO_ROOT
from quasistatic_drake.batch import bundled_gradient, rollout_batch, SOLVER_LIMIT
from quasistatic_drake.batch.engines import engine_for
from quasistatic_drake.errors import CommandError
from quasistatic_drake.scenario import Scenario

PADS = os.path.join(REPO_ROOT, 'config', 'two_pads_lift.yaml')
SQUEEZE, LIFT = [0.0, 0.1, -0.1], [0.1, 0.0, 0.0]


@pytest.fixture(scope='module')
def ray_local():
    """Start a local Ray for this module: 2 CPUs, no dashboard."""
    import ray
    ray.init(address='local', num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope='module')
def pads():
    return Scenario.from_yaml(PADS)


def noisy_lifts(scenario, n, lift_steps, seed=0, sigma=0.01):
    """Return (q0s, v_cmds): n squeeze-and-lift commands with noise on every step and joint."""
    q0 = engine_for(scenario).default_positions()
    nominal = np.array([SQUEEZE] * 3 + [LIFT] * lift_steps)
    noise = sigma * np.random.default_rng(seed).standard_normal((n,) + nominal.shape)
    return np.tile(q0, (n, 1)), {'pads': nominal[None] + noise}


def box_z(scenario, q):
    """Return the box's height in every row of q (..., n_q)."""
    return q[..., engine_for(scenario).model.objects[0].q_idx[6]]


def assert_bitwise_equal(a, b):
    assert a.q.tobytes() == b.q.tobytes()
    np.testing.assert_array_equal(a.status, b.status)
    if a.dq_next_dv_cmd is None:
        assert b.dq_next_dv_cmd is None
    else:
        assert a.dq_next_dv_cmd.tobytes() == b.dq_next_dv_cmd.tobytes()
    assert dict(a.errors) == dict(b.errors)


def test_every_backend_gives_the_same_rollouts_bit_for_bit(pads, ray_local):
    q0s, v_cmds = noisy_lifts(pads, 10, 10)
    serial = rollout_batch(pads, q0s, v_cmds, gradients=True)
    assert serial.q.shape == (10, 14, 10) and serial.status.shape == (10, 13)
    assert serial.dq_next_dv_cmd.shape == (10, 13, 10, 3)
    assert np.all(serial.success)
    lifted = box_z(pads, serial.q[:, -1]) - box_z(pads, serial.q[:, 0])
    assert np.all(lifted > 0.05)            # every box was squeezed and carried up
    for backend in ('process', 'ray'):
        other = rollout_batch(PADS, q0s, v_cmds, backend=backend, workers=2, gradients=True,
                              chunk_size=3)
        assert other.backend == backend and other.chunks == 4 and other.reruns == 0
        assert_bitwise_equal(serial, other)


def test_a_batch_is_the_rollouts_one_by_one_with_the_preload_carried(pads):
    q0s, v_cmds = noisy_lifts(pads, 3, 4, seed=1)
    batch = rollout_batch(pads, q0s, v_cmds, chunk_size=2)
    engine = engine_for(pads)
    for i in range(3):
        alone = engine.rollout(engine.initial_state(q0s[i]),
                               [{'pads': u} for u in v_cmds['pads'][i]])
        assert batch.q[i].tobytes() == alone.q.tobytes()
        assert list(batch.status[i]) == [r.status for r in alone.results]
    # The squeeze's preload is what holds the box: without carrying q_ref it would drop.
    assert np.all(box_z(pads, batch.q[:, -1]) > box_z(pads, batch.q[:, 0]) + 0.02)


def test_failed_steps_and_a_solver_limit_are_reported_and_the_others_finish(pads):
    """The MIQP on Gurobi: a box in mid-air is infeasible; every point exceeds the licence."""
    scenario = pads.with_formulation('miqp', max_points_per_pair=None, backend='gurobi')
    engine = engine_for(scenario)
    q0 = engine.default_positions()
    in_the_air = q0.copy()
    in_the_air[engine.model.objects[0].q_idx[6]] = 0.5
    v = np.zeros((3, 4, 3))
    v[0, :] = [0.05, 0.0, 0.0]          # the pads lift: 16 points, beyond the pip licence
    v[1:, :] = SQUEEZE
    q0s = np.array([q0, in_the_air, q0])
    serial = rollout_batch(scenario, q0s, {'pads': v}, chunk_size=1)
    assert list(serial.status[0]) == ['optimal', SOLVER_LIMIT, 'not run', 'not run']
    assert 'Fix' in serial.errors[0] and 'max_points_per_pair' in serial.errors[0]
    np.testing.assert_array_equal(serial.q[0, 2:], serial.q[0, 1:-1])
    assert all('infeasible' in s for s in serial.status[1])
    np.testing.assert_array_equal(serial.q[1], np.tile(in_the_air, (5, 1)))
    assert list(serial.status[2]) == ['optimal'] * 4 and list(serial.errors) == [0]
    assert list(serial.failed_steps) == [3, 4, 0]
    assert_bitwise_equal(serial, rollout_batch(scenario, q0s, {'pads': v}, backend='process',
                                               workers=2, chunk_size=1))


@pytest.fixture(scope='module')
def long_batch(pads):
    """Return a batch of 6 chunks of about a second each, and its serial result."""
    q0s, v_cmds = noisy_lifts(pads, 96, 37, seed=2)
    return q0s, v_cmds, rollout_batch(pads, q0s, v_cmds)


def ray_chunk_worker(timeout=120.0):
    """
    Return the pid of a worker of this test's Ray running a chunk, once one is.

    A Ray worker names itself after the task it runs (its process title,
    /proc/<pid>/cmdline: 'ray::run_chunk'; 'ray::IDLE' between tasks): the
    worker itself reports that a chunk has started.  Only the workers of
    this process's Ray count (their parent is its raylet, started with its
    session directory): another Ray on the machine is left alone.
    """
    import ray._private.worker as ray_worker
    session = ray_worker._global_node.get_session_dir_path().encode()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid in (int(e) for e in os.listdir('/proc') if e.isdigit()):
            title = proc_file(pid, 'cmdline')
            if title.startswith(b'ray::run_chunk') and session in proc_file(
                    parent_pid(pid), 'cmdline'):
                return pid
        time.sleep(0.01)
    raise AssertionError(f'no Ray worker began a chunk within {timeout} s')


def proc_file(pid, name):
    """Return /proc/<pid>/<name>, or b'' once the process has gone."""
    try:
        with open(f'/proc/{pid}/{name}', 'rb') as f:
            return f.read()
    except OSError:
        return b''


def parent_pid(pid):
    """Return the parent of ``pid`` (/proc/<pid>/stat), or 0 once it has gone."""
    stat = proc_file(pid, 'stat')
    return int(stat.rsplit(b')', 1)[1].split()[1]) if stat else 0


@pytest.mark.parametrize('backend', ['process', 'ray'])
def test_a_worker_killed_mid_chunk_has_its_chunk_rerun_and_the_batch_is_whole(
        pads, long_batch, backend, ray_local):
    q0s, v_cmds, serial = long_batch
    killed = []

    def kill_a_busy_worker(chunk):
        """
        At the first finished chunk, kill a worker while chunks are left.

        process: any worker's death breaks the pool, and the 4 or more chunks
        not finished yet are rerun; ray: the worker running a chunk (by its
        own report, its process title) is killed, and its task is resubmitted.
        """
        if not killed:
            pid = chunk.pid if backend == 'process' else ray_chunk_worker()
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    faulty = rollout_batch(pads, q0s, v_cmds, backend=backend, workers=2, chunk_size=16,
                           on_chunk=kill_a_busy_worker)
    assert killed and faulty.reruns >= 1
    assert np.all(faulty.success)
    assert_bitwise_equal(serial, faulty)


def free_box_push():
    """Return a pad 1 cm behind a free box, no gravity: the box moves max(0, h u - 0.01)."""
    return Scenario.from_dict({
        'time_step': 0.1, 'formulation': 'qp', 'gravity': [0, 0, 0],
        'contact_detection_tolerance': 0.05,
        'robots': [{'name': 'pads', 'file': 'package://quasistatic_drake/urdf/two_pads.urdf',
                    'stiffness': [1000, 1000, 1000], 'initial_positions': [0.05, -0.07, 0.25]}],
        'objects': [{'name': 'box', 'file': 'package://quasistatic_drake/urdf/box.urdf',
                     'initial_pose': {'xyz': [0, 0, 0.05]}}]})


def test_bundled_gradient_converges_to_the_smoothed_gradient():
    """
    The box's x moves f(u) = s max(0, u - u0) under the left pad's command u (h = 0.1 s).

    Its gradient jumps from 0 to s at u0; smoothed by u + w, w ~ N(0, sigma^2),
    it is s Phi((u - u0) / sigma).  s and u0 come from the engine's own step.
    """
    scenario = free_box_push()
    engine = engine_for(scenario)
    q0 = engine.default_positions()
    x = engine.model.objects[0].q_idx[4]
    far = engine.step(engine.initial_state(q0), {'pads': [0.0, 0.3, 0.0]}, gradients='commands')
    s = far.gradients.dq_next_dv_cmd[x, 1]
    u0 = 0.3 - (far.q_next[x] - q0[x]) / s
    assert s == pytest.approx(0.1, rel=1e-3) and u0 == pytest.approx(0.1, rel=1e-3)
    u, sigma = 0.11, 0.02
    plain = engine.step(engine.initial_state(q0), {'pads': [0.0, u, 0.0]},
                        gradients='commands').gradients.dq_next_dv_cmd[x, 1]
    p = norm.cdf((u - u0) / sigma)
    smoothed = s * p
    assert plain == pytest.approx(s) and abs(plain - smoothed) > 0.02
    for samples in (16, 64, 256, 1024):
        bundled = bundled_gradient(scenario, q0, {'pads': [0.0, u, 0.0]}, sigma=[0, sigma, 0],
                                   samples=samples, seed=3, backend='process', workers=2)
        error_bar = s * np.sqrt(p * (1 - p) / samples)     # the mean of a Bernoulli's s
        assert bundled.samples == samples and bundled.failed == 0
        assert abs(bundled.B[x, 1] - smoothed) <= 4 * error_bar, samples
        assert bundled.standard_error[x, 1] == pytest.approx(error_bar, rel=0.5)


def test_bundled_gradient_is_the_same_on_every_backend(ray_local):
    scenario = free_box_push()
    q0 = engine_for(scenario).default_positions()
    runs = [bundled_gradient(scenario, q0, {'pads': [0.0, 0.11, 0.0]}, sigma=0.02, samples=8,
                             seed=4, backend=backend, workers=workers)
            for backend, workers in (('serial', None), ('process', 2), ('ray', 2))]
    for run in runs[1:]:
        assert run.B.tobytes() == runs[0].B.tobytes()


# ----- bad input: a clear error, nothing run ----------------------------------------------
@pytest.mark.parametrize('change, message', [
    (dict(q0s=np.zeros((2, 4))), r'q0s must have shape \(N, 10\)'),
    (dict(q0s=np.full((2, 10), np.nan)), r'q0s\[0\]: q has non-finite'),
    (dict(v_cmds={'arm': np.zeros((2, 3, 3))}), r"unknown robot\(s\) \['arm'\]"),
    (dict(v_cmds={'pads': np.zeros((2, 3, 2))}), r"v_cmds\['pads'\] must have shape \(2, 3, 3\)"),
    (dict(v_cmds={'pads': np.zeros((2, 3))}), r"v_cmds\['pads'\] must have 3 dimensions"),
    (dict(v_cmds={}), r'v_cmds must map robot names.*got an empty mapping.*Fix'),
    (dict(v_cmds=np.zeros((2, 3, 3))), r'v_cmds must map robot names.*got ndarray.*Fix'),
    (dict(workers=2), r"workers=2 with backend 'serial'.*Fix"),
    (dict(v_cmds={'pads': np.full((2, 3, 3), np.inf)}), r'non-finite entry at \(0, 0, 0\).*Fix'),
    (dict(q_refs=np.zeros((2, 2))), r'q_refs must have shape \(2, 3\).*Fix'),
    (dict(backend='threads'), r"backend must be one of \['serial', 'process', 'ray'\]"),
    (dict(workers=0), r'workers must be a positive integer'),
    (dict(chunk_size=1.5), r'chunk_size must be a positive integer'),
    (dict(address='127.0.0.1:6379'), r"address .* is for backend 'ray'.*Fix"),
    (dict(gradients='yes'), r'gradients must be True or False'),
    (dict(scenario=3), r'scenario must be a Scenario or the path'),
])
def test_bad_batch_input_is_refused_before_anything_runs(pads, change, message):
    q0 = engine_for(pads).default_positions()
    args = dict(scenario=pads, q0s=np.tile(q0, (2, 1)), v_cmds={'pads': np.zeros((2, 3, 3))})
    args.update(change)
    seen = []
    with pytest.raises(CommandError, match=message):
        rollout_batch(**args, on_chunk=seen.append)
    assert not seen


def test_gradients_under_robot_inertia_are_refused_with_the_fix(pads):
    scenario = Scenario.from_dict({**{'time_step': 0.1, 'robot_inertia': True},
                                   'robots': [{'name': 'pads', 'file': pads.robots[0].file,
                                               'stiffness': [1000, 1000, 1000]}]})
    q0 = engine_for(scenario).default_positions()
    with pytest.raises(CommandError, match=r'robot_inertia.*Fix'):
        rollout_batch(scenario, q0[None], {'pads': np.zeros((1, 2, 3))}, gradients=True)


def test_bad_bundled_gradient_input_is_refused(pads):
    q0 = engine_for(pads).default_positions()
    with pytest.raises(CommandError, match=r'samples must be an integer >= 2'):
        bundled_gradient(pads, q0, {'pads': SQUEEZE}, sigma=0.01, samples=1)
    with pytest.raises(CommandError, match=r'sigma must be one number >= 0 or 3 of them'):
        bundled_gradient(pads, q0, {'pads': SQUEEZE}, sigma=[0.01, 0.02], samples=4)
    with pytest.raises(CommandError, match=r"v_cmd names unknown robot"):
        bundled_gradient(pads, q0, {'arm': SQUEEZE}, sigma=0.01, samples=4)


# ----- the rollouts command ----------------------------------------------------------------
def run_cli(*args):
    import subprocess
    import sys
    return subprocess.run([sys.executable, '-m', 'quasistatic_drake.apps.cli', 'rollouts', *args],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)


def test_the_rollouts_command_perturbs_the_nominal_command_and_writes_the_batch(tmp_path, pads):
    out = tmp_path / 'lifts.npz'
    done = run_cli(PADS, '--samples', '6', '--noise', '0.01', '--workers', '2', '--seed', '5',
                   '--out', str(out))
    assert done.returncode == 0, done.stderr
    assert '6/6' in done.stderr and 'rollout/s' in done.stderr        # the progress bar
    assert '6 rollouts of 13 steps on process (2 workers' in done.stdout
    data = np.load(out)
    nominal = np.array([SQUEEZE] * 3 + [LIFT] * 10)
    np.testing.assert_array_equal(data['nominal'], nominal)
    noise = data['commands'] - nominal
    assert data['commands'].shape == (6, 13, 3) and 0.005 < noise.std() < 0.015
    assert list(data['joints']) == ['pads/lift_z', 'pads/left_x', 'pads/right_x']
    assert data['q'].shape == (6, 14, 10) and np.all(data['status'] == 'optimal')
    # The file's trajectories are the batch's for the file's commands.
    again = rollout_batch(pads, np.tile(data['q0'], (6, 1)), {'pads': data['commands']})
    assert again.q.tobytes() == data['q'].tobytes()
    assert np.all(box_z(pads, data['q'][:, -1]) > box_z(pads, data['q'][:, 0]) + 0.05)


def test_the_rollouts_command_perturbs_the_arm_demos_plan(tmp_path):
    out = tmp_path / 'arm.npz'
    done = run_cli(os.path.join(REPO_ROOT, 'config', 'arm_pick_place.yaml'), '--samples', '2',
                   '--noise', '0.0', '--steps', '40', '--backend', 'serial', '--out', str(out))
    assert done.returncode == 0, done.stderr
    data = np.load(out)
    assert data['commands'].shape == (2, 40, 9) and np.any(data['nominal'] != 0.0)
    np.testing.assert_array_equal(data['commands'][0], data['nominal'])
    assert data['q'][0].tobytes() == data['q'][1].tobytes()      # no noise: the same rollout


def test_the_rollouts_command_refuses_what_it_cannot_run(tmp_path):
    nowhere = str(tmp_path / 'x.npz')
    finger = os.path.join(REPO_ROOT, 'config', 'finger_push.yaml')
    done = run_cli(finger, '--samples', '2', '--noise', '0.01', '--out', nowhere)
    assert done.returncode == 2 and 'no nominal command' in done.stderr
    assert 'Fix: add nominal_commands' in done.stderr
    odd = tmp_path / 'odd.yaml'
    odd.write_text(f'include: {PADS}\nnominal_commands:\n'
                   '  - {duration: 0.25, velocities: {pads: [0, 0.1, -0.1]}}\n')
    done = run_cli(str(odd), '--samples', '2', '--noise', '0.01', '--out', nowhere)
    assert done.returncode == 2
    assert 'nominal_commands[0].duration: 0.25 s is not a whole number of' in done.stderr
    wrong = tmp_path / 'wrong.yaml'
    wrong.write_text(f'include: {PADS}\nnominal_commands:\n'
                     '  - {duration: 0.2, velocities: {pads: [0, 0.1]}}\n')
    done = run_cli(str(wrong), '--samples', '2', '--noise', '0.01', '--out', nowhere)
    assert done.returncode == 2 and "nominal_commands[0].velocities: v_cmd['pads']" in done.stderr
    done = run_cli(PADS, '--samples', '0', '--noise', '0.01', '--out', nowhere)
    assert done.returncode == 2 and 'must be a positive integer' in done.stderr
    done = run_cli(PADS, '--samples', '2', '--noise', '-1', '--out', nowhere)
    assert done.returncode == 2 and 'must be a number >= 0' in done.stderr
    assert not (tmp_path / 'x.npz').exists()


# ----- Ray at an address: a one-node cluster started by `ray start` ------------------------
@pytest.fixture
def closed_port():
    """
    Yield a port nothing answers at, held for the test.

    The socket is bound but never listens: a connection is refused, and no
    other process can take the port meanwhile (binding and releasing it raced).
    """
    import socket
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        yield s.getsockname()[1]


def head_port(line):
    """Return the port of `ray start --head --port=0`'s "ray start --address='IP:PORT'" line."""
    match = re.search(r"ray start --address='[^:']+:(\d+)'", line)
    return int(match.group(1)) if match else None


def test_the_rollouts_command_runs_on_a_ray_cluster_at_an_address(tmp_path, pads):
    """A head node started by `ray start`, joined with --address, as on a real cluster."""
    import subprocess
    import sys
    ray_cli = os.path.join(os.path.dirname(sys.executable), 'ray')
    head = subprocess.Popen([ray_cli, 'start', '--head', '--block', '--port=0',
                             '--num-cpus=2', '--include-dashboard=false',
                             '--disable-usage-stats'],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        port, started = None, False
        for line in head.stdout:         # wait until the head says where it is, and is up
            port = port or head_port(line)
            started = started or 'Ray runtime started' in line
            if port and started:
                break
        else:
            pytest.fail('ray start --head ended before the runtime started')
        assert port, 'ray start --head did not print its address'
        out = tmp_path / 'cluster.npz'
        env = {**os.environ, 'RAY_AUTH_MODE': 'token'}     # `ray start` uses a token
        done = subprocess.run(
            [sys.executable, '-m', 'quasistatic_drake.apps.cli', 'rollouts', PADS, '--samples',
             '4', '--noise', '0.01', '--backend', 'ray', '--address', f'127.0.0.1:{port}',
             '--out', str(out)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
            env=env)
        assert done.returncode == 0, done.stderr
        assert 'on ray (2 workers' in done.stdout      # the cluster's 2 CPUs
    finally:
        head.terminate()
        try:
            head.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
    data = np.load(out)
    serial = rollout_batch(pads, np.tile(data['q0'], (4, 1)), {'pads': data['commands']})
    assert serial.q.tobytes() == data['q'].tobytes()


def test_an_address_nothing_answers_at_is_refused_at_once(tmp_path, closed_port):
    start = time.monotonic()
    done = run_cli(PADS, '--samples', '2', '--noise', '0.01', '--backend', 'ray', '--address',
                   f'127.0.0.1:{closed_port}', '--out', str(tmp_path / 'x.npz'))
    assert done.returncode == 2 and 'nothing answers at 127.0.0.1:' in done.stderr
    assert 'Fix' in done.stderr and time.monotonic() - start < 60
    assert not (tmp_path / 'x.npz').exists()


def test_another_address_than_the_connected_ray_is_refused(pads, ray_local, closed_port):
    from quasistatic_drake.batch import BatchError
    q0 = engine_for(pads).default_positions()
    with pytest.raises(BatchError, match=r'already connected to the Ray at .*Fix: ray.shutdown'):
        rollout_batch(pads, q0[None], {'pads': np.zeros((1, 2, 3))}, backend='ray',
                      address=f'127.0.0.1:{closed_port}')
