"""
Batch rollouts: rollouts per second against workers, per backend, on the arm and the pads.

For each scene the nominal command (``quasistatic-drake rollouts``' own:
the arm demo's pick-and-place plan, 165 steps; the pads' squeeze and lift,
13 steps) is perturbed (sigma 0.01, seed 0), and the same batch is run by
every backend: serial, local processes and local Ray, with 1 and 2
workers.  Each backend first runs a small warm-up batch, which starts its
workers and builds their engines (reported as ``startup_s``); the timed
batch then runs on warm workers, as a planner's repeated calls do, 3 times,
and the fastest run counts (the machine's other load only slows a run).  Every
backend's result is checked to be the serial result, bit for bit.

Parallel efficiency = rate(2 workers) / (2 rate(1 worker)) of the same
backend (goal: at least 0.8 on this 2-core machine), and against the
serial rate.  Ray's overhead per chunk is measured with chunks of one
one-step rollout: (Ray's wall time - the serial wall time) / chunks, at 1
worker.  Bundled gradients (the pads' squeeze, 256 samples of one step
with its dq_next/dv_cmd) are timed in samples per second, on warm workers.  The scale-out
estimate (docs/batch.md) follows from the arm's rate
per worker: workers for a million arm rollouts in ten minutes, and the
data the driver then receives.

    .venv/bin/python benchmarks/batch_rollouts.py [--arm-rollouts 32]
        [--pads-rollouts 240] [--json out/batch_rollouts.json]
        [--png out/batch_rollouts.png]
"""

import argparse
from pathlib import Path
import time

import matplotlib
import numpy as np

from quasistatic_drake.apps.rollouts import nominal_commands, split_by_robot
from quasistatic_drake.batch import bundled_gradient, rollout_batch, shutdown_workers
from quasistatic_drake.batch.engines import engine_for
from quasistatic_drake.batch.smoothing import perturbed
from quasistatic_drake.paths import package_share_dir
from quasistatic_drake.scenario import Scenario
from report import machine, write_results

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the Agg backend)

SCENES = {'arm': 'arm_pick_place.yaml', 'pads': 'two_pads_lift.yaml'}
RUNS = [('serial', 1), ('process', 1), ('process', 2), ('ray', 1), ('ray', 2)]
SIGMA = 0.01
REPEATS = 3           # each timed batch is run this often; the fastest run counts
OVERHEAD_CHUNKS = 200
TARGET_ROLLOUTS, TARGET_SECONDS = 1_000_000, 600.0


def batch_inputs(scenario: Scenario, rollouts: int) -> tuple:
    """Return (q0s, v_cmds, nominal steps): the perturbed nominal command of the scene."""
    engine = engine_for(scenario)
    nominal = nominal_commands(engine)
    commands = perturbed(nominal, SIGMA, rollouts, seed=0)
    q0s = np.tile(engine.default_positions(), (rollouts, 1))
    return q0s, split_by_robot(engine, commands), len(nominal)


def same_bits(a, b) -> bool:
    """Return whether two BatchResults hold the same q and status, bit for bit."""
    return a.q.tobytes() == b.q.tobytes() and bool(np.all(a.status == b.status))


def measure_scene(name: str, rollouts: int) -> dict:
    """Time every backend and worker count on one scene; return its figures."""
    scenario = Scenario.from_yaml(package_share_dir() / 'config' / SCENES[name])
    q0s, v_cmds, steps = batch_inputs(scenario, rollouts)
    rows, serial = [], None
    for backend, workers in RUNS:
        warm = 2 * workers
        start = time.perf_counter()
        rollout_batch(scenario, q0s[:warm], {k: v[:warm] for k, v in v_cmds.items()},
                      backend=backend, workers=workers, chunk_size=1)
        startup = time.perf_counter() - start
        result = min((rollout_batch(scenario, q0s, v_cmds, backend=backend, workers=workers)
                      for _ in range(REPEATS)), key=lambda r: r.seconds)
        serial = serial or result
        rows.append({'backend': backend, 'workers': workers, 'rollouts': rollouts,
                     'steps': steps, 'chunks': result.chunks, 'seconds': result.seconds,
                     'rollouts_per_s': rollouts / result.seconds,
                     'steps_per_s': rollouts * steps / result.seconds,
                     'startup_s': startup, 'failed_steps': int(result.failed_steps.sum()),
                     'same_as_serial': same_bits(result, serial)})
        print(f'{name:5s} {backend:8s} {workers} workers: {rows[-1]["rollouts_per_s"]:8.2f} '
              f'rollouts/s ({rows[-1]["steps_per_s"]:7.0f} steps/s), startup '
              f'{startup:5.2f} s, same as serial: {rows[-1]["same_as_serial"]}', flush=True)
    rate = {(r['backend'], r['workers']): r['rollouts_per_s'] for r in rows}
    efficiency = {backend: {'vs_1_worker': rate[backend, 2] / (2 * rate[backend, 1]),
                            'vs_serial': rate[backend, 2] / (2 * rate['serial', 1])}
                  for backend in ('process', 'ray')}
    bytes_per_rollout = serial.q[0].nbytes + serial.status[0].nbytes
    return {'rows': rows, 'efficiency_at_2_workers': efficiency, 'steps': steps,
            'bytes_per_rollout_at_the_driver': bytes_per_rollout}


def chunk_overhead() -> dict:
    """Return Ray's and the process pool's overhead per chunk (module docstring)."""
    scenario = Scenario.from_yaml(package_share_dir() / 'config' / SCENES['pads'])
    q0s, v_cmds, _ = batch_inputs(scenario, OVERHEAD_CHUNKS)
    one_step = {k: v[:, :1] for k, v in v_cmds.items()}
    out = {}
    for backend in ('serial', 'process', 'ray'):
        rollout_batch(scenario, q0s[:2], {k: v[:2] for k, v in one_step.items()},
                      backend=backend, workers=1, chunk_size=1)          # warm
        result = rollout_batch(scenario, q0s, one_step, backend=backend, workers=1,
                               chunk_size=1)
        out[backend] = result.seconds
    per_chunk = {b: (out[b] - out['serial']) / OVERHEAD_CHUNKS for b in ('process', 'ray')}
    print(f'overhead per chunk (1 worker, {OVERHEAD_CHUNKS} chunks of one step): process '
          f'{per_chunk["process"] * 1e3:.2f} ms, ray {per_chunk["ray"] * 1e3:.2f} ms '
          f'(serial step {out["serial"] / OVERHEAD_CHUNKS * 1e3:.2f} ms)')
    return {'chunks': OVERHEAD_CHUNKS, 'wall_s': out,
            'per_chunk_ms': {b: v * 1e3 for b, v in per_chunk.items()}}


def gradient_rate(samples: int = 256) -> dict:
    """Return bundled-gradient samples per second (one step each, with dq_next/dv_cmd)."""
    scenario = Scenario.from_yaml(package_share_dir() / 'config' / SCENES['pads'])
    q0 = engine_for(scenario).default_positions()
    out = {}
    for backend, workers in (('serial', 1), ('process', 2), ('ray', 2)):
        bundled_gradient(scenario, q0, {'pads': [0.0, 0.1, -0.1]}, sigma=SIGMA, samples=4,
                         backend=backend, workers=workers)        # warm: workers started
        start = time.perf_counter()
        g = bundled_gradient(scenario, q0, {'pads': [0.0, 0.1, -0.1]}, sigma=SIGMA,
                             samples=samples, backend=backend, workers=workers)
        out[f'{backend}_{workers}'] = samples / (time.perf_counter() - start)
        print(f'bundled gradient on {backend} ({workers} workers): '
              f'{out[f"{backend}_{workers}"]:.1f} samples/s ({g.failed} failed)')
    return {'samples': samples, 'samples_per_s': out}


def scale_out(arm: dict) -> dict:
    """Return the workers a million arm rollouts need in ten minutes, from the measured rate."""
    best = max((r for r in arm['rows'] if r['backend'] == 'ray'),
               key=lambda r: r['rollouts_per_s'])
    per_worker = best['rollouts_per_s'] / best['workers']
    workers = TARGET_ROLLOUTS / (TARGET_SECONDS * per_worker)
    data = TARGET_ROLLOUTS * arm['bytes_per_rollout_at_the_driver']
    print(f'scale-out: {per_worker:.2f} arm rollouts/s per Ray worker -> {workers:.0f} workers '
          f'for {TARGET_ROLLOUTS} rollouts in {TARGET_SECONDS:.0f} s; the driver receives '
          f'{data / 1e9:.1f} GB')
    return {'rollouts': TARGET_ROLLOUTS, 'seconds': TARGET_SECONDS,
            'arm_rollouts_per_s_per_worker': per_worker, 'workers_needed': workers,
            'driver_gigabytes': data / 1e9,
            'rollouts_per_s_at_the_driver': TARGET_ROLLOUTS / TARGET_SECONDS}


def draw(summary: dict, path: Path) -> None:
    """Plot rollouts per second against workers for each backend, one panel per scene."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, (name, scene) in zip(axes, summary['scenes'].items()):
        labels = [f"{r['backend']}\n{r['workers']} worker{'s' if r['workers'] > 1 else ''}"
                  for r in scene['rows']]
        ax.bar(labels, [r['rollouts_per_s'] for r in scene['rows']],
               color=['grey', 'C0', 'C0', 'C1', 'C1'])
        ax.set_title(f"{name} ({scene['steps']} steps a rollout)")
        ax.set_ylabel('rollouts / s')
    fig.suptitle('Batch rollouts on 2 cores: same results on every backend')
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    """Measure, print, and write the JSON and the plot."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--arm-rollouts', type=int, default=32)
    parser.add_argument('--pads-rollouts', type=int, default=240)
    parser.add_argument('--json', type=Path, default=Path('out/batch_rollouts.json'))
    parser.add_argument('--png', type=Path, default=Path('out/batch_rollouts.png'))
    args = parser.parse_args()
    import ray
    ray.init(address='local', num_cpus=2, include_dashboard=False, log_to_driver=False)
    scenes = {'arm': measure_scene('arm', args.arm_rollouts),
              'pads': measure_scene('pads', args.pads_rollouts)}
    summary = {'machine': machine(), 'sigma': SIGMA, 'scenes': scenes,
               'overhead': chunk_overhead(), 'bundled_gradient': gradient_rate(),
               'scale_out': scale_out(scenes['arm'])}
    for name, scene in scenes.items():
        for backend, e in scene['efficiency_at_2_workers'].items():
            print(f'{name} {backend}: efficiency at 2 workers {e["vs_1_worker"]:.2f} (against '
                  f'its 1 worker), {e["vs_serial"]:.2f} (against serial)')
    shutdown_workers()
    ray.shutdown()
    write_results(summary, args.json, args.png, lambda path: draw(summary, path))


if __name__ == '__main__':
    main()
