"""
Time the hull work of loading a robot whose links are convex meshes (issue 14, point 4).

Drake's iiwa 14 (drake_models) has convex collision meshes of about 3000
faces per link on 8 links.  The stand-in here is 8 link-like hulls: the
convex hull (scipy.spatial.ConvexHull) of ``--points`` random points on a
tapered capsule with an elliptic cross-section, one size per link (fixed
seed), so about 2 x points - 4 triangles each.  Timed:

* ``shapes.convex_spec`` per mesh, on the vertices and faces Drake's
  ``GetConvexHull()`` returns for it (what ``model.shape_spec`` passes on);
* the Drake path per mesh: ``Convex(obj).GetConvexHull()`` alone, reading
  its vertices and faces out as model.shape_spec does (one pybind11 call per
  vertex and per face corner), and ``model.shape_spec(Convex(obj))`` (Drake's
  hull, reading it out, convex_spec);
* ``QuasistaticModel`` construction of a chain of 8 revolute links with one
  ``<mesh><drake:declare_convex/></mesh>`` collision each, and of the same
  chain with boxes instead: the difference is what the meshes cost.

Each figure is the median over ``--repeats`` runs.  The issue's target is
``TARGET_MS`` of hull work for the whole robot.  ``--baseline`` takes the
JSON of an earlier run (say, before a change) and sets it beside this one.

Usage::

    .venv/bin/python benchmarks/hull_load_time.py [--points 1502] [--repeats 3]
        [--baseline out/hull_load_time_before.json]
        [--json out/hull_load_time.json] [--png out/hull_load_time.png]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.spatial import ConvexHull

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import machine, write_results  # noqa: E402

TARGET_MS = 500.0      # the bound on the hull work of loading the whole robot
SEED = 14
# [m] per link: radius, half length of the capsule's cylinder, taper (top radius / bottom)
LINKS = [(0.10, 0.08, 0.85), (0.09, 0.10, 0.80), (0.09, 0.10, 0.85), (0.08, 0.10, 0.80),
         (0.08, 0.09, 0.85), (0.07, 0.08, 0.80), (0.07, 0.05, 0.90), (0.05, 0.02, 0.95)]
ELLIPTIC = np.array([1.0, 0.85, 1.0])    # the links' cross-section: x by 0.85 x in y


def link_points(rng: np.random.Generator, n: int, radius: float, half_length: float,
                taper: float) -> np.ndarray:
    """Return n random points on a tapered capsule with an elliptic cross-section (n x 3)."""
    cap, side = 4.0 * np.pi * radius ** 2, 4.0 * np.pi * radius * half_length
    on_side = rng.random(n) < side / (cap + side)
    unit = rng.normal(size=(n, 3))
    unit /= np.linalg.norm(unit, axis=1)[:, None]
    points = radius * unit
    points[:, 2] += np.where(unit[:, 2] >= 0.0, half_length, -half_length)
    angle = rng.uniform(0.0, 2.0 * np.pi, size=n)
    points[on_side] = np.column_stack([radius * np.cos(angle), radius * np.sin(angle),
                                       rng.uniform(-half_length, half_length, n)])[on_side]
    z = points[:, 2] / (half_length + radius)              # -1 at the bottom, 1 at the top
    points[:, :2] *= (1.0 + (taper - 1.0) * 0.5 * (z[:, None] + 1.0))
    return points * ELLIPTIC


def write_hull_obj(path: Path, points: np.ndarray) -> tuple[int, int]:
    """Write the convex hull of the points as an outward-wound OBJ; return (vertices, faces)."""
    hull = ConvexHull(points)
    index = np.full(len(points), -1)
    index[hull.vertices] = np.arange(len(hull.vertices))
    lines = ['v %.9f %.9f %.9f' % tuple(p) for p in points[hull.vertices]]
    for simplex, normal in zip(hull.simplices, hull.equations[:, :3]):
        a, b, c = points[simplex]
        if np.cross(b - a, c - a) @ normal < 0.0:   # outward winding
            simplex = simplex[[0, 2, 1]]
        lines.append('f %d %d %d' % tuple(index[simplex] + 1))
    path.write_text('\n'.join(lines) + '\n')
    return len(hull.vertices), len(hull.simplices)


def chain_urdf(meshes: list, boxes: bool) -> str:
    """Return the URDF of a chain of revolute links, one mesh (or its bounding box) each."""
    links = ['<link name="base"/>']
    parent = 'base'
    for k, (obj, extent, height) in enumerate(meshes):
        if boxes:
            geometry = '<box size="%.6f %.6f %.6f"/>' % tuple(extent)
        else:
            geometry = f'<mesh filename="{obj.name}"><drake:declare_convex/></mesh>'
        links.append(f"""
  <link name="link_{k}">
    <inertial><mass value="2.0"/>
      <inertia ixx="0.02" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.01"/></inertial>
    <collision><geometry>{geometry}</geometry></collision>
  </link>
  <joint name="joint_{k}" type="revolute">
    <parent link="{parent}"/><child link="link_{k}"/>
    <origin xyz="0 0 {height:.6f}"/><axis xyz="{'0 0 1' if k % 2 == 0 else '0 1 0'}"/>
    <limit lower="-2.9" upper="2.9" effort="300" velocity="1.5"/>
  </joint>""")
        parent = f'link_{k}'
    return ('<?xml version="1.0"?>\n<robot name="mesh_arm" xmlns:drake="http://drake.mit.edu">'
            + ''.join(links) + '\n</robot>\n')


def write_robot(folder: Path, points: int) -> list:
    """Write the 8 link hulls and both chains; return per link (obj, vertices, faces)."""
    rng = np.random.default_rng(SEED)
    meshes, out, height = [], [], 0.0
    for k, (radius, half_length, taper) in enumerate(LINKS):
        cloud = link_points(rng, points, radius, half_length, taper)
        obj = folder / f'link_{k}.obj'
        vertices, faces = write_hull_obj(obj, cloud)
        extent = np.ptp(cloud, axis=0)
        meshes.append((obj, extent, height))
        height = 0.5 * float(extent[2])   # the next joint sits at the top of this link
        out.append((obj, vertices, faces))
    (folder / 'mesh_arm.urdf').write_text(chain_urdf(meshes, boxes=False))
    (folder / 'box_arm.urdf').write_text(chain_urdf(meshes, boxes=True))
    return out


def median_ms(fn, repeats: int) -> tuple[float, object]:
    """Call fn ``repeats`` times; return the median time [ms] and the last result."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), result


def drake_hull_lists(path: Path) -> tuple[np.ndarray, list]:
    """Return the vertices and faces of Drake's convex hull of an OBJ, as shape_spec reads them."""
    from pydrake.geometry import Convex
    from quasistatic_drake.model import hull_faces
    hull = Convex(str(path)).GetConvexHull()
    vertices = np.array([hull.vertex(i) for i in range(hull.num_vertices())])
    return vertices, hull_faces(hull.face_data())


def model_ms(folder: Path, urdf: str, repeats: int) -> float:
    """Return the median time [ms] to construct a QuasistaticModel of the chain in ``urdf``."""
    from quasistatic_drake import Scenario
    from quasistatic_drake.model import QuasistaticModel
    scenario = Scenario.from_dict({
        'time_step': 0.1,
        'robots': [{'name': 'arm', 'file': urdf, 'stiffness': [1000.0] * len(LINKS)}]},
        base_dir=folder)
    return median_ms(lambda: QuasistaticModel(scenario), repeats)[0]


def measure(points: int, repeats: int) -> dict:
    """Write the robot and time the per-mesh and whole-model hull work."""
    from pydrake.geometry import Convex
    from quasistatic_drake.model import shape_spec
    from quasistatic_drake.shapes import convex_spec
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        links = write_robot(folder, points)
        model_ms(folder, 'box_arm.urdf', 1)                # warm up Drake and the kernels
        for obj, n_vertices, n_faces in links:
            vertices, faces = drake_hull_lists(obj)
            spec_ms, spec = median_ms(lambda: convex_spec(vertices, faces), repeats)
            hull_ms, _ = median_ms(lambda: Convex(str(obj)).GetConvexHull(), repeats)
            lists_ms, _ = median_ms(lambda: drake_hull_lists(obj), repeats)
            path_ms, path_spec = median_ms(lambda: shape_spec(Convex(str(obj))), repeats)
            assert np.array_equal(spec.planes, path_spec.planes)
            rows.append({'mesh': obj.name, 'vertices': n_vertices, 'faces': n_faces,
                         'drake_hull_faces': len(faces), 'planes': len(spec.planes),
                         'edges': len(spec.edges), 'convex_spec_ms': spec_ms,
                         'drake_hull_ms': hull_ms, 'read_out_ms': max(lists_ms - hull_ms, 0.0),
                         'shape_spec_ms': path_ms})
        mesh_model = model_ms(folder, 'mesh_arm.urdf', repeats)
        box_model = model_ms(folder, 'box_arm.urdf', repeats)
    return {'points': points, 'seed': SEED, 'repeats': repeats, 'meshes': rows,
            'convex_spec_total_ms': sum(r['convex_spec_ms'] for r in rows),
            'drake_hull_total_ms': sum(r['drake_hull_ms'] for r in rows),
            'read_out_total_ms': sum(r['read_out_ms'] for r in rows),
            'shape_spec_total_ms': sum(r['shape_spec_ms'] for r in rows),
            'model_meshes_ms': mesh_model, 'model_boxes_ms': box_model,
            'model_mesh_cost_ms': mesh_model - box_model, 'target_ms': TARGET_MS}


TOTALS = [('convex_spec', 'convex_spec_total_ms'), ('Drake GetConvexHull', 'drake_hull_total_ms'),
          ("reading Drake's hull out (model.py)", 'read_out_total_ms'),
          ('model.shape_spec', 'shape_spec_total_ms'),
          ('QuasistaticModel, meshes', 'model_meshes_ms'),
          ('QuasistaticModel, boxes', 'model_boxes_ms'),
          ('  meshes - boxes', 'model_mesh_cost_ms')]


def print_table(result: dict, baseline: dict | None) -> None:
    """Print the per-mesh times and the totals (beside the baseline's, if given)."""
    print(f"{len(result['meshes'])} link hulls of {result['points']} random points "
          f"(seed {result['seed']}), median of {result['repeats']} runs, times in ms")
    print(f"  {'mesh':<11}{'verts':>6}{'faces':>6}{'planes':>7}{'edges':>6}"
          f"{'convex_spec':>13}{'Drake hull':>12}{'read out':>10}{'shape_spec':>12}")
    for row in result['meshes']:
        print(f"  {row['mesh']:<11}{row['vertices']:>6}{row['drake_hull_faces']:>6}"
              f"{row['planes']:>7}{row['edges']:>6}{row['convex_spec_ms']:>13.2f}"
              f"{row['drake_hull_ms']:>12.2f}{row.get('read_out_ms', np.nan):>10.2f}"
              f"{row['shape_spec_ms']:>12.2f}")
    head = f"  {'total':<36}{'this run':>12}"
    print(head + (f"{'baseline':>12}{'speedup':>10}" if baseline else ''))
    for name, key in TOTALS:
        line = f"  {name:<36}{result[key]:>12.1f}"
        if baseline:
            line += f"{baseline.get(key, np.nan):>12.1f}"
            if key.endswith('total_ms') and key in baseline:
                line += f"{baseline[key] / max(result[key], 1e-9):>9.1f}x"
        print(line)
    verdict = 'meets' if result['shape_spec_total_ms'] <= TARGET_MS else 'misses'
    print(f"  target: {TARGET_MS:g} ms of hull work per robot; model.shape_spec {verdict} it")


def plot(result: dict, baseline: dict | None, path: Path) -> None:
    """Draw the per-mesh times and the totals against the target (and the baseline)."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, (ax, ax_total) = plt.subplots(1, 2, figsize=(12, 4.2),
                                       gridspec_kw={'width_ratios': [3, 2]})
    x = np.arange(len(result['meshes']))
    series = [('convex_spec', 'convex_spec_ms', 'tab:blue'),
              ('Drake GetConvexHull', 'drake_hull_ms', 'tab:gray'),
              ('model.shape_spec', 'shape_spec_ms', 'tab:orange')]
    width = 0.8 / len(series)
    for k, (name, key, color) in enumerate(series):
        ax.bar(x + (k - 1) * width, [r[key] for r in result['meshes']], width, color=color,
               label=name)
        if baseline:
            ax.scatter(x + (k - 1) * width, [r[key] for r in baseline['meshes']], marker='_',
                       s=120, color=color)
    ax.set_xticks(x, [r['mesh'].removesuffix('.obj') for r in result['meshes']])
    ax.set_yscale('log')
    ax.set_ylabel('median per mesh [ms]' + ('  (dashes: baseline)' if baseline else ''))
    ax.set_title(f"per mesh, ~{result['meshes'][0]['drake_hull_faces']} faces each")
    ax.legend(fontsize=8)
    names = ['convex_spec', 'shape_spec', 'model: meshes\n- boxes']
    keys = ['convex_spec_total_ms', 'shape_spec_total_ms', 'model_mesh_cost_ms']
    xt = np.arange(len(keys))
    if baseline:
        ax_total.bar(xt - 0.2, [max(baseline[k], 1e-3) for k in keys], 0.4, color='tab:gray',
                     label='baseline')
    ax_total.bar(xt + (0.2 if baseline else 0.0), [max(result[k], 1e-3) for k in keys],
                 0.4, color='tab:blue', label='this run')
    ax_total.axhline(TARGET_MS, color='tab:red', linestyle='--', label=f'target {TARGET_MS:g} ms')
    ax_total.set_xticks(xt, names)
    ax_total.set_yscale('log')
    ax_total.set_ylabel('whole robot [ms]')
    ax_total.set_title(f"{len(result['meshes'])} links")
    ax_total.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    """Parse the arguments, run the measurements, print the table and write JSON and PNG."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--points', type=int, default=1502,
                        help='random points per link (about 2 x points - 4 hull faces)')
    parser.add_argument('--repeats', type=int, default=3)
    parser.add_argument('--baseline', type=Path, default=None,
                        help="an earlier run's JSON to compare with")
    parser.add_argument('--json', type=Path, default=Path('out/hull_load_time.json'))
    parser.add_argument('--png', type=Path, default=Path('out/hull_load_time.png'))
    args = parser.parse_args()
    if args.points < 10 or args.repeats < 1:
        parser.error('--points must be at least 10 and --repeats at least 1')
    baseline = json.loads(args.baseline.read_text()) if args.baseline else None
    result = measure(args.points, args.repeats)
    print_table(result, baseline)
    write_results({'machine': machine(), **result}, args.json, args.png,
                  lambda path: plot(result, baseline, path))


if __name__ == '__main__':
    main()
