r"""
The example scenes of Halm & Posa, Sec. 6 and Fig. 2, built by hand.

Halm & Posa, "A Quasi-static Model and Simulation Approach for Pushing,
Grasping, and Jamming" (seed 004).  Each scene is a ``PlanarExample``: the
contact rows as a function (q_o, q_m) -> PlanarContacts (lcp_math.py), the
initial state, the command u(q_o, q_m, t), the step h and the step count, the
limit-surface matrix A (eq. 12) and the relative gains B (eq. 15), and the
world-frame outlines for drawing Figs. 2-4.  What the paper leaves out comes
from the authors' MATLAB code, github.com/mshalm/quasistaticGrasping (the file
is named where it is used).  The time stepping is not done here.

Conventions (generatePM.m, polyGeometry.m).  q = [q_o; q_m]; every planar
body has the pose (x, y, theta), a point finger (x, y).  A contact pairs a
point of one body with the surface of a "base" body.  Its unit normal n points
from the base's surface toward the other body (the direction in which phi
grows); v_c is the velocity of the other body's point minus that of the base's
point, and the rows are

    J_N = n^T dv_c/dqdot,    J_T = [t^T; -t^T] dv_c/dqdot,    t = R(90 deg) n,

the tangent rows interleaved as PlanarContacts wants them (+t_i at row 2i,
-t_i at row 2i + 1).  A point p fixed to a body with centre c moves with
v_c + theta_dot R(90 deg) (p - c).

Scenes:

* ``disk_push``: Sec. 6.1, Fig. 3: a disk of radius 1 pushed by two point
  fingers (even push, lopsided push, semicircle), slidingCircle.m.
* ``disk_wall``: Sec. 6.1, Fig. 4 top: the same with a wall at y = 0,
  slidingCircleWithWall.m.
* ``peg_in_hole``: Sec. 6.2, Fig. 4 bottom: a 2 x 6 peg, two triangular
  fingers and a slot, polygonalPegInHole.m and polyGeometry.m.
* ``square_squeeze``: Fig. 2 left: a square squeezed by four point fingers
  (not in the authors' code; our own numbers, see its docstring).

Polygons (polyGeometry.m).  Each pair (i mobile, j any later body, static ones
last) contributes every vertex of i against j, then every vertex of j against
i.  A vertex v against polygon j: phi = max_e (n_e . v - b_e) over j's edges
(outward normals n_e, b_e = n_e . (a vertex of e)); the normal is n_e of the
edge attaining it; the base point is the point of j closest to v (v itself
when v is inside j), computed here in closed form where the authors solve a
QP (quadprog).  Outside j, next to one of j's corners, that closest point is
the corner and the rows are not exactly dphi/dq when j rotates (the authors'
choice, kept; the difference vanishes in contact).

Deviations from the authors' code, on purpose:

* The right slot block.  polygonalPegInHole.m builds it as diag(-1, 1) S1,
  which turns the vertex order clockwise; polyGeometry.m assumes counter-
  clockwise order, so the block's "outward" normals point inward and its
  faces never register contact (phi > 0 everywhere); only its corners do,
  against the mobile bodies.  We list the mirror image counter-clockwise, the
  slot the paper describes (Sec. 6.2: a slot with 1% width tolerance).
* Ties.  At a corner of j the deepest edges tie; the authors take the first
  index among the (inexact) quadprog depths, we take the edge attaining phi.
* Friction.  polygonalPegInHole.m sets mu = eye(58), yet polyGeometry.m makes
  64 rows (7 + 7 + 8 + 8 + 6 + 7 + 7 + 7 + 7); we give all 64 mu = 1.

Not here: the authors' contact selection (simulateQuasiStatics.m solves with
the contacts of smallest phi, doubling their number until no left-out contact
penetrates; Sec. 6.2 "only bodies close enough to make contact are
considered") and the feedback-scale sweeps (``feedback_scale_sweep``).
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Callable, Optional, Sequence

import numpy as np

from quasistatic_drake.formulations.lcp_math import PlanarContacts

N_O = 3                        # object coordinates [x, y, theta]
DISK_RADIUS = 1.0              # Sec. 6.1
DISK_H, DISK_STEPS = 0.025, 400  # 40 Hz over t in (0, 10) s; slidingCircle.m: ceil(10 / h)
DISK_SWEEP_LAST = 70           # slidingCircle.m: c_n = 2^(4 - n), n = 2..70 (22 at first commit)
WALL_SWEEP_LAST = 14           # slidingCircleWithWall.m: n = 2..14
SLOT_TOLERANCE = 0.01          # polygonalPegInHole.m: 1% of the peg's width 2, per side
PEG_H, PEG_STEPS, PEG_C = 0.05, 240, 0.01   # Sec. 6.2; polygonalPegInHole.m: ceil(12 / h)
PEG_COMMAND_GAIN = 5.0         # polygonalPegInHole.m, sideSlide: u = 5 K (q_m_des - q_m)

ContactsFn = Callable[[np.ndarray, np.ndarray], PlanarContacts]
CommandFn = Callable[[np.ndarray, np.ndarray, float], np.ndarray]


@dataclass(frozen=True)
class Outline:
    """One body to draw, in the world frame (Figs. 2-4)."""

    name: str
    kind: str                  # "disk", "polygon" or "point"
    points: np.ndarray         # disk, point: (2,) centre; polygon: (k, 2) vertices, CCW
    radius: float = 0.0        # disk only
    angle: float = 0.0         # disk only: theta (slidingCircle.m draws a radius at it)
    static: bool = False


OutlinesFn = Callable[[np.ndarray, np.ndarray], tuple]   # (q_o, q_m) -> tuple[Outline, ...]


@dataclass(frozen=True)
class PlanarExample:
    """
    One scene of Halm & Posa, Sec. 6: geometry, initial state, command, parameters.

    ``contacts(q_o, q_m)`` returns every contact row (PlanarContacts, its mu
    included), named by ``contact_names``; ``command(q_o, q_m, t)`` returns u;
    ``outlines(q_o, q_m)`` the world-frame shapes.  ``c`` is the feedback
    scale where the paper fixes one (the disk scenes sweep it instead).
    """

    name: str
    q_o0: np.ndarray           # (3,) [x, y, theta]
    q_m0: np.ndarray           # (n_m,)
    h: float                   # [s]
    steps: int
    A: np.ndarray              # (3, 3) limit surface, eq. 12
    B: np.ndarray              # (n_m, n_m) relative feedback gains, eq. 15
    contacts: ContactsFn
    command: CommandFn
    outlines: OutlinesFn
    contact_names: tuple
    c: Optional[float] = None


# --------------------------------------------------------------------------- kinematics


def rotation(theta: float) -> np.ndarray:
    """Return the planar rotation matrix R(theta)."""
    c, s = math.cos(theta), math.sin(theta)
    return np.array([[c, -s], [s, c]])


def perp(vector: np.ndarray) -> np.ndarray:
    """Return R(90 deg) vector (the tangent of a normal, generatePM.m)."""
    return np.array([-vector[1], vector[0]])


def body_point_jacobian(point: np.ndarray, centre: np.ndarray, col: Optional[int],
                        n_q: int) -> np.ndarray:
    """
    Return d(velocity)/d(qdot) (2 x n_q) of a point fixed to a body.

    ``col`` is the index of the body's x in q = [q_o; q_m] (its y and theta
    follow); None for a static body (zero Jacobian).
    """
    G = np.zeros((2, n_q))
    if col is not None:
        G[:, col:col + 2] = np.eye(2)
        G[:, col + 2] = perp(np.asarray(point) - np.asarray(centre))
    return G


def finger_jacobian(col: int, n_q: int) -> np.ndarray:
    """Return d(velocity)/d(qdot) (2 x n_q) of a point finger whose x is q[col]."""
    G = np.zeros((2, n_q))
    G[:, col:col + 2] = np.eye(2)
    return G


def relative_pose(frame: Sequence[float], offsets: Sequence[float]) -> np.ndarray:
    """
    Return two finger poses given in a frame (polygonalPegInHole.m, relpose).

    ``frame`` = (x, y, theta), ``offsets`` = (dx1, dy1, dth1, dx2, dy2, dth2);
    the result is [xy + R(theta) d1, theta + dth1, xy + R(theta) d2, theta + dth2].
    """
    xy, R = np.asarray(frame[:2], dtype=float), rotation(frame[2])
    d = np.asarray(offsets, dtype=float)
    return np.concatenate([xy + R @ d[0:2], [frame[2] + d[2]],
                           xy + R @ d[3:5], [frame[2] + d[5]]])


# --------------------------------------------------------------------------- contact rows


@dataclass(frozen=True)
class ContactRow:
    """One contact before assembly: gap, world normal, relative-velocity Jacobian."""

    name: str
    phi: float
    normal: np.ndarray         # (2,) unit, from the base's surface toward the other body
    G: np.ndarray              # (2, n_q): v_c = G qdot, other body's point minus base's point


def assemble(rows: Sequence[ContactRow], mu: Sequence[float]) -> PlanarContacts:
    """Return the PlanarContacts of frictional rows (generatePM.m's J_N and J_T)."""
    normals = np.array([r.normal @ r.G for r in rows])
    tangents = np.array([perp(r.normal) @ r.G for r in rows])
    J_t = np.empty((2 * len(rows), normals.shape[1]))
    J_t[0::2], J_t[1::2] = tangents, -tangents
    return PlanarContacts(phi=np.array([r.phi for r in rows]),
                          J_n_o=normals[:, :N_O], J_n_m=normals[:, N_O:],
                          J_t_o=J_t[:, :N_O], J_t_m=J_t[:, N_O:],
                          mu=np.asarray(mu, dtype=float))


def finger_disk_row(name: str, q: np.ndarray, col: int, radius: float) -> ContactRow:
    """Return point finger q[col:col+2] against the disk q[0:3] (slidingCircle.m)."""
    centre, finger = q[0:2], q[col:col + 2]
    distance = float(np.linalg.norm(finger - centre))
    n = (finger - centre) / distance
    G = (finger_jacobian(col, len(q))
         - body_point_jacobian(centre + radius * n, centre, 0, len(q)))
    return ContactRow(name, distance - radius, n, G)


# --------------------------------------------------------------------------- polygons


@dataclass(frozen=True)
class Polygon:
    """A convex polygon: body-frame vertices, counter-clockwise, and where its pose is in q."""

    name: str
    vertices: np.ndarray       # (k, 2) body frame, counter-clockwise
    col: Optional[int] = None  # index of its x in q = [q_o; q_m]; None: static, at the origin

    def pose(self, q: np.ndarray) -> tuple:
        """Return (centre, theta) in the world frame."""
        if self.col is None:
            return np.zeros(2), 0.0
        return q[self.col:self.col + 2], float(q[self.col + 2])

    def world_vertices(self, q: np.ndarray) -> np.ndarray:
        """Return the (k, 2) world-frame vertices."""
        centre, theta = self.pose(q)
        return centre + self.vertices @ rotation(theta).T


def signed_area(vertices: np.ndarray) -> float:
    """Return the shoelace area of a polygon: positive if counter-clockwise."""
    x, y = vertices[:, 0], vertices[:, 1]
    return 0.5 * float(np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y))


def edge_planes(vertices: np.ndarray) -> tuple:
    """Return (n, b): outward unit normals (k, 2) and offsets (k,) of a CCW polygon's edges."""
    edges = np.roll(vertices, -1, axis=0) - vertices
    t = edges / np.linalg.norm(edges, axis=1, keepdims=True)
    n = np.column_stack([t[:, 1], -t[:, 0]])      # R(-90 deg) t (polyGeometry.m)
    return n, np.sum(n * vertices, axis=1)


def closest_boundary_point(point: np.ndarray, vertices: np.ndarray) -> np.ndarray:
    """Return the point of a polygon's boundary closest to ``point``."""
    a = vertices
    ab = np.roll(vertices, -1, axis=0) - a
    s = np.clip(np.sum((point - a) * ab, axis=1) / np.sum(ab * ab, axis=1), 0.0, 1.0)
    candidates = a + s[:, None] * ab
    return candidates[np.argmin(np.linalg.norm(candidates - point, axis=1))]


def point_polygon_row(name: str, point: np.ndarray, G_point: np.ndarray, base: Polygon,
                      q: np.ndarray) -> ContactRow:
    """
    Return a point (velocity Jacobian G_point) against a polygon (polyGeometry.m).

    phi = max over the polygon's edges of n_e . p - b_e, the normal that
    edge's n_e; the base point is the polygon's point closest to p, moving
    with the polygon.
    """
    vertices = base.world_vertices(q)
    n, b = edge_planes(vertices)
    depths = n @ point - b
    edge = int(np.argmax(depths))
    closest = point if depths[edge] <= 0.0 else closest_boundary_point(point, vertices)
    centre, _ = base.pose(q)
    G = G_point - body_point_jacobian(closest, centre, base.col, len(q))
    return ContactRow(name, float(depths[edge]), n[edge], G)


def polygon_pair_rows(first: Polygon, second: Polygon, q: np.ndarray) -> list:
    """Return first's vertices against second, then second's against first (polyGeometry.m)."""
    rows = []
    for body, base in ((first, second), (second, first)):
        centre, _ = body.pose(q)
        for k, vertex in enumerate(body.world_vertices(q)):
            G = body_point_jacobian(vertex, centre, body.col, len(q))
            rows.append(point_polygon_row(f"{body.name}[{k}] vs {base.name}", vertex, G,
                                          base, q))
    return rows


def polygon_outline(polygon: Polygon, q: np.ndarray) -> Outline:
    """Return a polygon's world-frame outline."""
    return Outline(polygon.name, "polygon", polygon.world_vertices(q),
                   static=polygon.col is None)


# --------------------------------------------------------------------------- Sec. 6.1


def _disk_rows(q: np.ndarray) -> list:
    """Return the two finger-disk contacts (slidingCircle.m, contacts 1 and 2)."""
    return [finger_disk_row("finger 1 vs disk", q, 3, DISK_RADIUS),
            finger_disk_row("finger 2 vs disk", q, 5, DISK_RADIUS)]


def _disk_contacts(q_o: np.ndarray, q_m: np.ndarray) -> PlanarContacts:
    """Return the contacts of the two-finger disk (mu = 1, slidingCircle.m)."""
    return assemble(_disk_rows(np.concatenate([q_o, q_m])), [1.0, 1.0])


def _disk_outlines(q_o: np.ndarray, q_m: np.ndarray) -> tuple:
    """Return the disk (with its angle) and the two fingers."""
    return (Outline("disk", "disk", np.array(q_o[:2]), DISK_RADIUS, float(q_o[2])),
            Outline("finger 1", "point", np.array(q_m[0:2])),
            Outline("finger 2", "point", np.array(q_m[2:4])))


def semicircle_command(t: float) -> np.ndarray:
    """
    Return the semicircle push's u(t) (slidingCircle.m, u{3}).

    Each finger runs half a circle about (0, sqrt(3)/2) counter-clockwise through
    the bottom, radius rb = 5 + sin(pi/6) (finger 1) or rs = 5 - sin(pi/6)
    (finger 2), at the angular rate f = pi/10, in 10 s.
    """
    rad, grip, f = 5.0, math.pi / 6, math.pi / 10
    rb, rs = rad + math.sin(grip), rad - math.sin(grip)
    s, c = math.sin(f * t), math.cos(f * t)
    return np.array([rb * f * s, -rb * f * c, rs * f * s, -rs * f * c])


def _disk_initial(case: str) -> tuple:
    """Return (q_o0, q_m0, command) of one slidingCircle.m case."""
    if case == "even":
        u = np.array([0.0, -1.0, 0.0, -1.0])
        return np.array([0.0, 3.0, 0.0]), np.array([0.5, 5.0, -0.5, 5.0]), lambda t: u
    if case == "lopsided":
        u = np.array([0.0, -2.0, 0.0, -1.0])
        return np.array([0.0, 5.0, 0.0]), np.array([0.5, 8.0, -0.5, 7.0]), lambda t: u
    if case == "semicircle":
        q_o0 = np.array([-5.0, 0.0, 0.0])
        grip = math.pi / 6
        q_m0 = np.concatenate([q_o0[:2] + rotation(grip) @ [0.0, 1.0],
                               q_o0[:2] + rotation(-grip) @ [0.0, 1.0]])
        return q_o0, q_m0, semicircle_command
    raise ValueError(f"unknown disk push {case!r}: use 'even', 'lopsided' or 'semicircle'")


def disk_push(case: str) -> PlanarExample:
    """
    Return a two-finger disk push of Sec. 6.1 (Fig. 3): "even", "lopsided" or "semicircle".

    Disk of radius 1, q_o = [x, y, theta]; point fingers q_m = [x1, y1, x2,
    y2]; mu = 1, A = I3, B = I4 (Sec. 6.1); 400 steps of h = 0.025 s.  The
    initial states and commands are slidingCircle.m's: even push from disk
    (0, 3) and fingers (+-0.5, 5) at 1 m/s down; lopsided from (0, 5), fingers
    (0.5, 8) at 2 m/s and (-0.5, 7) at 1 m/s down; semicircle from (-5, 0),
    fingers touching at angles +-30 deg from the top (``semicircle_command``).
    """
    q_o0, q_m0, velocity = _disk_initial(case)
    return PlanarExample(
        name=f"disk_{case}", q_o0=q_o0, q_m0=q_m0, h=DISK_H, steps=DISK_STEPS,
        A=np.eye(3), B=np.eye(4), contacts=_disk_contacts,
        command=lambda q_o, q_m, t: np.array(velocity(t), dtype=float),
        outlines=_disk_outlines, contact_names=("finger 1 vs disk", "finger 2 vs disk"))


WALL_NAMES = ("finger 1 vs disk", "finger 2 vs disk", "disk vs wall", "finger 1 vs wall",
              "finger 2 vs wall")


def _wall_contacts(q_o: np.ndarray, q_m: np.ndarray) -> PlanarContacts:
    """Return slidingCircleWithWall.m's five contacts (mu = 1, 1, 1, 0.5, 0.5)."""
    q = np.concatenate([q_o, q_m])
    down = np.array([0.0, -1.0])            # from the disk's surface toward the wall
    bottom = q[0:2] + DISK_RADIUS * down
    rows = _disk_rows(q) + [
        ContactRow("disk vs wall", q[1] - DISK_RADIUS, down,
                   -body_point_jacobian(bottom, q[0:2], 0, len(q))),
        ContactRow("finger 1 vs wall", q[4], -down, finger_jacobian(3, len(q))),
        ContactRow("finger 2 vs wall", q[6], -down, finger_jacobian(5, len(q)))]
    return assemble(rows, [1.0, 1.0, 1.0, 0.5, 0.5])


def _wall_outlines(q_o: np.ndarray, q_m: np.ndarray) -> tuple:
    """Return the disk, the fingers and the wall (slidingCircleWithWall.m's patch)."""
    wall = np.array([[-15.0, -1.0], [15.0, -1.0], [15.0, 0.0], [-15.0, 0.0]])
    return _disk_outlines(q_o, q_m) + (Outline("wall", "polygon", wall, static=True),)


def disk_wall() -> PlanarExample:
    """
    Return the disk rolled against a wall at y = 0 (Sec. 6.1, Fig. 4 top).

    slidingCircleWithWall.m: the disk scene plus three contacts, disk-wall
    (phi = y - 1, normal (0, -1) at the disk's bottom) and finger-wall
    (phi = y_i, normal (0, 1)); mu = 1 except 0.5 finger-wall; disk at
    (-2, 2), fingers at (-4, 4) +- (0.25, 0.25), u = [1, -1, 1, -1].
    """
    return PlanarExample(
        name="disk_wall", q_o0=np.array([-2.0, 2.0, 0.0]),
        q_m0=np.array([-3.75, 4.25, -4.25, 3.75]), h=DISK_H, steps=DISK_STEPS,
        A=np.eye(3), B=np.eye(4), contacts=_wall_contacts,
        command=lambda q_o, q_m, t: np.array([1.0, -1.0, 1.0, -1.0]),
        outlines=_wall_outlines, contact_names=WALL_NAMES)


def feedback_scale_sweep(last: int) -> np.ndarray:
    """
    Return the authors' feedback scales c_n = 2^(4 - n), n = 2..last.

    slidingCircle.m (last = DISK_SWEEP_LAST) and slidingCircleWithWall.m
    (WALL_SWEEP_LAST); their reference run is c = 0.
    """
    return np.array([2.0 ** (4 - n) for n in range(2, last + 1)])


def authors_clock(h: float, steps: int) -> np.ndarray:
    """
    Return t_0..t_steps summed step by step, as simulateQuasiStatics.m does.

    The sums drift: with h = 0.05, t_20 = 1.0000000000000002 > 1, so the
    peg's phase boundaries at 1, 1.5 and 1.75 s fall one step earlier than
    with t = k h.
    """
    t = np.zeros(steps + 1)
    for k in range(steps):
        t[k + 1] = t[k] + h
    return t


# --------------------------------------------------------------------------- Sec. 6.2

_S1 = np.array([[-1 - SLOT_TOLERANCE, -10.0], [-1 - SLOT_TOLERANCE, 0.0],
                [-19 - SLOT_TOLERANCE, 0.0], [-19 - SLOT_TOLERANCE, -10.0]])
PEG = Polygon("peg", np.array([[1.0, -3.0], [1.0, 3.0], [-1.0, 3.0], [-1.0, -3.0]]), 0)
PEG_FINGER_1 = Polygon("finger 1", np.array([[1.0, -1.0], [1.0, 1.0], [-1.0, 1.0]]), 3)
PEG_FINGER_2 = Polygon("finger 2", np.array([[1.0, -1.0], [1.0, 1.0], [-1.0, 1.0]]), 6)
SLOT_LEFT = Polygon("slot left", _S1)
# The mirror image in x, listed counter-clockwise (the authors' diag(-1, 1) S1 is clockwise).
SLOT_RIGHT = Polygon("slot right", (_S1 * [-1.0, 1.0])[[0, 3, 2, 1]])
PEG_BODIES = (PEG, PEG_FINGER_1, PEG_FINGER_2, SLOT_LEFT, SLOT_RIGHT)
PEG_MOBILE = 3


def _peg_rows(q: np.ndarray) -> list:
    """Return polyGeometry.m's rows, pair by pair: (i mobile, j > i)."""
    rows = []
    for i in range(PEG_MOBILE):
        for j in range(i + 1, len(PEG_BODIES)):
            rows += polygon_pair_rows(PEG_BODIES[i], PEG_BODIES[j], q)
    return rows


def _peg_contacts(q_o: np.ndarray, q_m: np.ndarray) -> PlanarContacts:
    """Return the 64 peg-in-hole contacts, mu = 1."""
    rows = _peg_rows(np.concatenate([q_o, q_m]))
    return assemble(rows, np.ones(len(rows)))


def _peg_outlines(q_o: np.ndarray, q_m: np.ndarray) -> tuple:
    """Return the five polygons' world outlines."""
    q = np.concatenate([q_o, q_m])
    return tuple(polygon_outline(body, q) for body in PEG_BODIES)


@dataclass(frozen=True)
class PegPhase:
    """One phase of sideSlide: u = 5 K (q_m_des - q_m) while t <= t_end."""

    t_end: float
    gains: tuple               # diag K
    frame: Optional[tuple]     # (x, y, theta) of the targets' frame; None: the peg's pose now
    offsets: tuple             # (dx1, dy1, dth1, dx2, dy2, dth2), relative_pose
    hold_finger_1: bool = False  # u[0:3] = 0


_ONES = (1.0,) * 6
_QP = math.pi / 4
PEG_PHASES = (   # polygonalPegInHole.m, sideSlide, in order
    PegPhase(1.0, _ONES, None, (-1.5, 5.0, 3 * _QP, 1.5, 5.0, -_QP)),
    PegPhase(1.5, _ONES, None, (-1.5, 0.0, 3 * _QP, 1.5, 0.0, -_QP)),
    PegPhase(1.75, _ONES, None, (0.0, 0.0, 3 * _QP, 0.0, 0.0, -_QP)),
    PegPhase(2.5, _ONES, (-2.0, 7.0, 0.0), (0.0, 0.0, 3 * _QP, 0.0, 0.0, -_QP)),
    PegPhase(3.5, (1.0, 1.0, 3.0, 1.0, 1.0, 3.0), (-2.0, 2.5, 0.0),
             (0.0, 0.0, 3 * _QP, 0.0, 0.0, -_QP)),
    PegPhase(4.5, _ONES, (0.0, 3.5, 0.0), (0.0, 0.0, 3 * _QP, 0.0, 0.0, -_QP)),
    PegPhase(7.5, _ONES, (0.0, 3.0, 0.0), (0.0, -0.5, 3 * _QP, 0.0, -0.5, -_QP)),
    PegPhase(8.0, _ONES, None, (-1.5, 0.0, 3 * _QP, 1.5, 0.0, -_QP)),
    PegPhase(8.5, _ONES, None, (-1.5, 0.0, 3 * _QP, 1.5, 5.0, -_QP)),
    PegPhase(9.0, _ONES, None, (-1.5, 0.0, 3 * _QP, 0.5, 5.0, -_QP)),
    PegPhase(100.0, _ONES, (0.0, -3.0, 0.0),
             (-1.5, 0.0, 3 * _QP, 0.5, 3.0 + math.sqrt(2.0), -_QP), hold_finger_1=True),
)


def peg_phase(t: float) -> Optional[int]:
    """Return the index in PEG_PHASES of the phase at time t (None after the last)."""
    for k, phase in enumerate(PEG_PHASES):
        if t <= phase.t_end:
            return k
    return None


def peg_command(q_o: np.ndarray, q_m: np.ndarray, t: float) -> np.ndarray:
    """Return sideSlide's u (polygonalPegInHole.m): position feedback to phase targets."""
    k = peg_phase(t)
    if k is None:
        return np.zeros(6)
    phase = PEG_PHASES[k]
    frame = np.array(q_o, dtype=float) if phase.frame is None else phase.frame
    target = relative_pose(frame, phase.offsets)
    u = PEG_COMMAND_GAIN * np.asarray(phase.gains) * (target - np.asarray(q_m, dtype=float))
    if phase.hold_finger_1:
        u[0:3] = 0.0
    return u


def peg_in_hole() -> PlanarExample:
    """
    Return the polygonal peg-in-hole of Sec. 6.2 (Fig. 4 bottom).

    Peg 2 x 6 (q_o), two right-isosceles triangular fingers of legs 2 (q_m =
    [x1, y1, th1, x2, y2, th2]), a slot of width 2.02 between two static
    18 x 10 blocks (top at y = 0); mu = 1, A = I3, B = I6, c = 0.01, 240
    steps of h = 0.05 s (Sec. 6.2; geometry, A, the initial state and the
    command from polygonalPegInHole.m): peg at (-2, 7, pi/3), fingers at
    relative_pose(q_o0, (-1.5, 5, 3 pi/4, 1.5, 5, -pi/4)), command
    ``peg_command``.
    """
    q_o0 = np.array([-2.0, 7.0, math.pi / 3])
    q_m0 = relative_pose(q_o0, (-1.5, 5.0, 3 * _QP, 1.5, 5.0, -_QP))
    names = tuple(row.name for row in _peg_rows(np.concatenate([q_o0, q_m0])))
    return PlanarExample(
        name="peg_in_hole", q_o0=q_o0, q_m0=q_m0, h=PEG_H, steps=PEG_STEPS, A=np.eye(3),
        B=np.eye(6), contacts=_peg_contacts, command=peg_command, outlines=_peg_outlines,
        contact_names=names, c=PEG_C)


# --------------------------------------------------------------------------- Fig. 2

SQUARE = Polygon("square", np.array([[1.0, -1.0], [1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0]]), 0)
SQUARE_FINGERS = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])


def _square_rows(q: np.ndarray) -> list:
    """Return each point finger against the square."""
    return [point_polygon_row(f"finger {k + 1} vs square", q[N_O + 2 * k:N_O + 2 * k + 2],
                              finger_jacobian(N_O + 2 * k, len(q)), SQUARE, q)
            for k in range(len(SQUARE_FINGERS))]


def _square_contacts(q_o: np.ndarray, q_m: np.ndarray) -> PlanarContacts:
    """Return the four finger-square contacts, mu = 1."""
    return assemble(_square_rows(np.concatenate([q_o, q_m])), np.ones(4))


def _square_outlines(q_o: np.ndarray, q_m: np.ndarray) -> tuple:
    """Return the square and the four fingers."""
    q = np.concatenate([q_o, q_m])
    return (polygon_outline(SQUARE, q),) + tuple(
        Outline(f"finger {k + 1}", "point", np.array(q_m[2 * k:2 * k + 2])) for k in range(4))


def square_squeeze() -> PlanarExample:
    """
    Return Fig. 2 (left): a square squeezed by four point fingers in full contact.

    Not in the authors' code; our numbers: square of side 2 at the origin,
    fingers touching the edge midpoints (phi = 0), each commanded at 1 m/s
    toward the centre; mu = 1, A = I3, B = I8.  With c = 0 the step LCP has
    no solution (the paper's point), with c > 0 it has one (Theorem 1).
    h = 0.025 s, 40 steps are our choice.
    """
    q_m0 = SQUARE_FINGERS.ravel().copy()
    u = 0.0 - SQUARE_FINGERS.ravel()           # toward the centre at 1 m/s
    return PlanarExample(
        name="square_squeeze", q_o0=np.zeros(3), q_m0=q_m0, h=DISK_H, steps=40, A=np.eye(3),
        B=np.eye(8), contacts=_square_contacts, command=lambda q_o, q_m, t: u.copy(),
        outlines=_square_outlines,
        contact_names=tuple(f"finger {k + 1} vs square" for k in range(4)))


EXAMPLES = {
    "disk_even": lambda: disk_push("even"),
    "disk_lopsided": lambda: disk_push("lopsided"),
    "disk_semicircle": lambda: disk_push("semicircle"),
    "disk_wall": disk_wall,
    "peg_in_hole": peg_in_hole,
    "square_squeeze": square_squeeze,
}
