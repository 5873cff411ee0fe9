#!/usr/bin/env python3
"""
Write the OBJ mesh of a box with rounded edges (urdf/meshes/rounded_box.obj).

The shape is the Minkowski sum of an inner box (outer size minus twice the
edge radius) with a sphere of the edge radius: six flat faces, twelve
quarter-cylinder edges and eight sphere octants at the corners.  Each quarter
arc is cut into ``--segments`` pieces.  Every vertex lies on the true rounded
surface, and the mesh is convex (the script checks it), so Drake can use it
as a ``<drake:declare_convex/>`` collision geometry.

The output is deterministic: the same arguments give the same bytes.  The
committed OBJ was written with the defaults::

    python3 tools/make_rounded_box.py
"""

import argparse
import itertools
import math
import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUTPUT = os.path.join(REPO_ROOT, 'urdf', 'meshes', 'rounded_box.obj')
CONVEXITY_TOLERANCE = 1e-9   # [m] how far a vertex may lie outside a face's plane


def octant_directions(segments):
    """
    Return the unit directions of one sphere octant, keyed by (i, j, k).

    The keys are the integer points i + j + k = segments of a triangle grid;
    the direction is (sin(pi i / 2n), sin(pi j / 2n), sin(pi k / 2n))
    normalised, so points on the octant's boundary arcs are equally spaced
    in angle.
    """
    directions = {}
    for i in range(segments, -1, -1):
        for j in range(segments - i, -1, -1):
            k = segments - i - j
            d = [math.sin(0.5 * math.pi * c / segments) for c in (i, j, k)]
            norm = math.sqrt(sum(c * c for c in d))
            directions[(i, j, k)] = tuple(c / norm for c in d)
    return directions


def rounded_box(size, radius, segments):
    """
    Return (vertices, faces) of the rounded box; faces are 0-based, counter-clockwise.

    ``size`` is the outer size (x, y, z), ``radius`` the edge radius and
    ``segments`` the number of pieces per quarter arc.
    """
    inner = [0.5 * s - radius for s in size]
    if radius <= 0.0 or min(inner) <= 0.0:
        raise ValueError('need 0 < radius < half of the smallest size, got radius %g and '
                         'size %s' % (radius, list(size)))
    if segments < 1:
        raise ValueError('segments must be >= 1, got %d' % segments)
    directions = octant_directions(segments)
    corners = list(itertools.product((-1, 1), repeat=3))
    vertices = []
    index = {}
    for signs in corners:
        for key, d in directions.items():
            index[signs, key] = len(vertices)
            vertices.append(tuple(
                s * (h + radius * c) + 0.0 for s, h, c in zip(signs, inner, d)))
    faces = []
    n = segments
    # Corner patches: the triangles of the octant's grid.
    for signs in corners:
        for i in range(n):
            for j in range(n - i):
                k = n - i - j
                faces.append([index[signs, (i + 1, j, k - 1)], index[signs, (i, j + 1, k - 1)],
                              index[signs, (i, j, k)]])
                if k >= 2:
                    faces.append([index[signs, (i + 1, j, k - 1)],
                                  index[signs, (i + 1, j + 1, k - 2)],
                                  index[signs, (i, j + 1, k - 1)]])
    # Edge strips: the arc with no component along the edge's axis, on both corners.
    for axis in range(3):
        for signs in corners:
            if signs[axis] > 0:
                continue
            other = list(signs)
            other[axis] = 1
            arc = [key for key in directions if key[axis] == 0]
            for a, b in zip(arc, arc[1:]):
                faces.append([index[signs, a], index[signs, b],
                              index[tuple(other), b], index[tuple(other), a]])
    # Flat faces: the four corner points whose direction is the face normal.
    for axis in range(3):
        key = tuple(n if c == axis else 0 for c in range(3))
        for sign in (-1, 1):
            quad = [signs for signs in corners if signs[axis] == sign]
            quad[2], quad[3] = quad[3], quad[2]   # go around the face, not across it
            faces.append([index[signs, key] for signs in quad])
    return vertices, [_outward(vertices, face) for face in faces]


def _outward(vertices, face):
    """Return the face with its vertices ordered counter-clockwise seen from outside."""
    normal, centre = _plane(vertices, face)
    if sum(a * b for a, b in zip(normal, centre)) < 0.0:
        return face[::-1]
    return face


def _plane(vertices, face):
    """Return the (unnormalised) Newell normal and the centroid of a face."""
    normal = [0.0, 0.0, 0.0]
    points = [vertices[v] for v in face]
    for p, q in zip(points, points[1:] + points[:1]):
        normal[0] += (p[1] - q[1]) * (p[2] + q[2])
        normal[1] += (p[2] - q[2]) * (p[0] + q[0])
        normal[2] += (p[0] - q[0]) * (p[1] + q[1])
    centre = [sum(p[c] for p in points) / len(points) for c in range(3)]
    return normal, centre


def check_convex(vertices, faces):
    """Raise ValueError unless every vertex lies behind every face's plane."""
    for face in faces:
        normal, centre = _plane(vertices, face)
        length = math.sqrt(sum(c * c for c in normal))
        for v in vertices:
            height = sum(n * (a - b) for n, a, b in zip(normal, v, centre)) / length
            if height > CONVEXITY_TOLERANCE:
                raise ValueError('the mesh is not convex: vertex %s is %.3g m outside '
                                 'face %s' % (v, height, face))


def obj_text(vertices, faces, size, radius, segments):
    """Return the OBJ file's text (vertices in metres, 1-based faces)."""
    lines = [
        '# Rounded box written by tools/make_rounded_box.py; do not edit by hand.',
        '# outer size %s m, edge radius %s m, %d segments per quarter arc.'
        % (' x '.join('%g' % s for s in size), '%g' % radius, segments),
        '# %d vertices, %d faces; convex.' % (len(vertices), len(faces)),
        'o rounded_box',
    ]
    lines += ['v %.9f %.9f %.9f' % v for v in vertices]
    lines += ['f ' + ' '.join(str(v + 1) for v in face) for face in faces]
    return '\n'.join(lines) + '\n'


def main(argv=None):
    """Parse the arguments, build the mesh, check it and write the OBJ file."""
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument('--size', type=float, nargs=3, default=[0.06, 0.06, 0.12],
                        metavar=('X', 'Y', 'Z'), help='outer size [m] (default: %(default)s)')
    parser.add_argument('--radius', type=float, default=0.01,
                        help='edge radius [m] (default: %(default)s)')
    parser.add_argument('--segments', type=int, default=3,
                        help='pieces per quarter arc (default: %(default)s)')
    parser.add_argument('--output', default=DEFAULT_OUTPUT,
                        help='OBJ file to write (default: urdf/meshes/rounded_box.obj)')
    args = parser.parse_args(argv)
    try:
        vertices, faces = rounded_box(args.size, args.radius, args.segments)
        check_convex(vertices, faces)
    except ValueError as err:
        parser.error(str(err))
    directory = os.path.dirname(os.path.abspath(args.output))
    os.makedirs(directory, exist_ok=True)
    with open(args.output, 'w', newline='\n') as f:
        f.write(obj_text(vertices, faces, args.size, args.radius, args.segments))
    print('wrote %s: %d vertices, %d faces' % (args.output, len(vertices), len(faces)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
