"""
Time the engine's queries on convex hulls of about 1000 vertices.

An iiwa's collision geometry is convex-hull meshes.  The scene here stands
in for it: a two-joint robot whose link is an ellipsoid's hull of
``--vertices`` points, an object that is another such hull, and a ground
slab.  Timed, each as the median over ``--calls`` calls at configurations
spread over the robot's reach (touching, near, far):

* ``QuasistaticSimulator.min_signed_distance(q)``;
* ``QuasistaticPlant.set_positions`` (what the ROS node's ~/reset does);
* one QP step, for scale.

Usage::

    .venv/bin/python benchmarks/query_time.py [--vertices 1000] [--calls 50]
        [--json out/query_time.json] [--png out/query_time.png]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.spatial import ConvexHull

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import machine, write_json  # noqa: E402

TARGET_MS = 10.0                       # the bound per query
SEMI_AXES = np.array([0.05, 0.04, 0.03])  # [m] the hulls' ellipsoid


def ellipsoid_hull_obj(path: Path, vertices: int) -> int:
    """Write the convex hull of ``vertices`` Fibonacci points on the ellipsoid; return its size."""
    k = np.arange(vertices) + 0.5
    polar = np.arccos(1.0 - 2.0 * k / vertices)
    azimuth = np.pi * (1.0 + 5.0 ** 0.5) * k
    unit = np.column_stack([np.cos(azimuth) * np.sin(polar), np.sin(azimuth) * np.sin(polar),
                            np.cos(polar)])
    points = unit * SEMI_AXES
    hull = ConvexHull(points)
    lines = ['v %.9f %.9f %.9f' % tuple(p) for p in points]
    for simplex, normal in zip(hull.simplices, hull.equations[:, :3]):
        a, b, c = points[simplex]
        if np.cross(b - a, c - a) @ normal < 0.0:   # outward winding
            simplex = simplex[[0, 2, 1]]
        lines.append('f %d %d %d' % tuple(i + 1 for i in simplex))
    path.write_text('\n'.join(lines) + '\n')
    return len(hull.vertices)


def scene(folder: Path, vertices: int) -> dict:
    """Write the scene's model files; return the scenario dict."""
    n = ellipsoid_hull_obj(folder / 'hull.obj', vertices)
    mesh = '<geometry><mesh filename="hull.obj"/></geometry>'
    joints = [('x', 'world', '1 0 0', None), ('z', 'x_link', '0 0 1', mesh)]
    links = ['<link name="world"/>']
    for joint, parent, axis, collision in joints:
        geometry = '' if collision is None else f'<collision>{collision}</collision>'
        links.append(f"""
  <link name="{joint}_link">
    <inertial><mass value="0.1"/>
      <inertia ixx="1e-4" ixy="0" ixz="0" iyy="1e-4" iyz="0" izz="1e-4"/></inertial>{geometry}
  </link>
  <joint name="{joint}" type="prismatic">
    <parent link="{parent}"/><child link="{joint}_link"/><axis xyz="{axis}"/>
    <limit lower="-2" upper="2" effort="100" velocity="1"/>
  </joint>""")
    (folder / 'robot.urdf').write_text(
        '<?xml version="1.0"?>\n<robot name="hull_robot">' + ''.join(links) + '\n</robot>\n')
    (folder / 'object.sdf').write_text("""<?xml version="1.0"?>
<sdf version="1.9">
  <model name="hull_object">
    <link name="hull_body">
      <inertial><mass>0.3</mass>
        <inertia><ixx>1e-4</ixx><iyy>1e-4</iyy><izz>1e-4</izz>
          <ixy>0</ixy><ixz>0</ixz><iyz>0</iyz></inertia></inertial>
      <collision name="hull"><geometry><mesh><uri>hull.obj</uri></mesh></geometry></collision>
    </link>
  </model>
</sdf>
""")
    (folder / 'ground.urdf').write_text("""<?xml version="1.0"?>
<robot name="ground">
  <link name="slab"><collision><geometry><box size="2 2 0.2"/></geometry></collision></link>
</robot>
""")
    return {'time_step': 0.1, 'contact_detection_tolerance': 0.02,
            'robots': [{'name': 'hull_robot', 'file': 'robot.urdf', 'stiffness': [1000, 1000],
                        'initial_positions': [-0.2, 0.1]}],
            'objects': [{'name': 'hull_object', 'file': 'object.sdf',
                         'initial_pose': {'xyz': [0.0, 0.0, float(SEMI_AXES[2])]}}],
            'environment': [{'name': 'ground', 'file': 'ground.urdf',
                             'pose': {'xyz': [0, 0, -0.1]}}],
            '_hull_vertices': n}


def configurations(sim, calls: int) -> list:
    """Return q with the robot's hull swept from 0.3 m away to touching the object."""
    q0 = sim.default_positions()
    idx = sim.model.robot('hull_robot').q_idx
    out = []
    for s in np.linspace(0.0, 1.0, calls):
        q = q0.copy()
        q[idx] = [-0.3 + 0.2 * s, float(SEMI_AXES[2])]    # x from -0.3 to -0.1 (touching)
        out.append(q)
    return out


def median_ms(fn, inputs) -> tuple[float, float]:
    """Call fn on each input; return the median and the largest time [ms]."""
    times = []
    for x in inputs:
        start = time.perf_counter()
        fn(x)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), max(times)


def measure(vertices: int, calls: int) -> dict:
    """Build the scene and time the queries."""
    from quasistatic_drake import QuasistaticSimulator, Scenario
    from quasistatic_drake.quasistatic_plant import QuasistaticPlant
    with tempfile.TemporaryDirectory() as tmp:
        data = scene(Path(tmp), vertices)
        hull_vertices = data.pop('_hull_vertices')
        scenario = Scenario.from_dict(data, base_dir=Path(tmp))
        sim = QuasistaticSimulator(scenario)
        plant = QuasistaticPlant(scenario)
        context = plant.CreateDefaultContext()
        qs = configurations(sim, calls)
        msd, msd_max = median_ms(sim.min_signed_distance, qs)
        reset, reset_max = median_ms(lambda q: plant.set_positions(context, q), qs)
        step, step_max = median_ms(
            lambda q: sim.step(sim.initial_state(q), {'hull_robot': [0.05, 0.0]}), qs)
        phis = [sim.min_signed_distance(q) for q in qs]
    return {'hull_vertices': hull_vertices, 'calls': calls,
            'min_signed_distance_ms': msd, 'min_signed_distance_max_ms': msd_max,
            'set_positions_ms': reset, 'set_positions_max_ms': reset_max,
            'step_ms': step, 'step_max_ms': step_max,
            'phi_range_m': [float(min(phis)), float(max(phis))], 'target_ms': TARGET_MS}


def plot(result: dict, path: Path) -> None:
    """Bar chart of the three medians against the target."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    names = ['min_signed_distance', 'set_positions', 'QP step']
    values = [result['min_signed_distance_ms'], result['set_positions_ms'], result['step_ms']]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar(names, values, color=['tab:blue', 'tab:orange', 'tab:gray'])
    ax.axhline(TARGET_MS, color='tab:red', linestyle='--', label=f'target {TARGET_MS:g} ms')
    ax.set_ylabel('median per call [ms]')
    ax.set_title(f"hulls of {result['hull_vertices']} vertices")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--vertices', type=int, default=1000)
    parser.add_argument('--calls', type=int, default=50)
    parser.add_argument('--json', type=Path, default=Path('out/query_time.json'))
    parser.add_argument('--png', type=Path, default=Path('out/query_time.png'))
    args = parser.parse_args()
    if args.vertices < 4 or args.calls < 1:
        parser.error('--vertices must be at least 4 and --calls at least 1')
    result = measure(args.vertices, args.calls)
    print(f"hulls of {result['hull_vertices']} vertices, {result['calls']} configurations "
          f"(phi {result['phi_range_m'][0] * 1e3:.1f} to {result['phi_range_m'][1] * 1e3:.1f} mm)")
    for name, key in (('min_signed_distance', 'min_signed_distance'),
                      ('QuasistaticPlant.set_positions', 'set_positions'), ('QP step', 'step')):
        print(f"  {name:<31} median {result[key + '_ms']:8.2f} ms, "
              f"max {result[key + '_max_ms']:8.2f} ms")
    print(f'  target: {TARGET_MS:g} ms per query')
    write_json(args.json, {'machine': machine(), **result})
    plot(result, args.png)
    print(f'wrote {args.json} and {args.png}')


if __name__ == '__main__':
    main()
