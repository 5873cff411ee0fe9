r"""
Stuck contacts kept stuck through the integration: the step's second-order slip projected out.

The step's rows hold a sticking contact's relative velocity at zero, but
only to first order: q_next = q + h N(q) v' moves each body along its
linearised path, while an arm's links swing about their joints along arcs
(the TCP of the demo arm moves on arcs of up to 0.55 m radius while it
carries).  The material points that touched at q end the step apart by
O(h^2 |v'|^2), and nothing takes that back: the detector measures the normal
gap again at q_next, but a tangential offset has no memory.  Measured on the
arm demo before this correction: the held cylinder slid 0.37 mm across the
fingers during the 25 cm carry and 0.16 mm down them during the lift
(0.18 mm and 0.07 mm of slide at h = 0.05 s and 0.02 s: first order in h,
as a second-order error per step gives), and sat up to 0.15 mm into one pad
and off the other while the arm moved (the normal error of each step, which
the next step's rows undo and the arm makes again).

The correction moves the objects only, by Delta on their velocities (the
robots and the contact forces are the formulation's), so that

* each stuck contact's material points end the step displaced along its
  tangents d_ij by what the rows solved for, h J_f,ij v';
* a stuck contact whose bodies move as one (they turn apart by at most
  ROLLING in the step) keeps its material points together along the normal
  too, at h J_n,i v'.  A rolling contact does not: a disk rolled by theta
  lifts its touching point r theta^2 / 2 off the wall, and the detector
  measures the new gap;
* every other contact that touches (its gap at the step's end below
  TOUCHING) in a body pair without a stuck contact keeps its normal motion:
  h J_n,i Delta = 0 (a box's corners on the table while a finger sticks to
  its side).

These are least squares in metres over the objects' velocities,

    minimise_Delta  sum_rows (d . s_i(v' + Delta) - target)^2 + sum_T (h J_n,i Delta)^2,

where s_i(v) is how far contact i's material point on B moves over the step
q -> q + h N(q) v less its point on A, measured with the bodies' poses at
both ends.  Gauss-Newton with the rows' Jacobian h [J_f; J_n] (its
pseudo-inverse truncated at RCOND, so nearly free directions are left
alone) converges at a rate of about h |omega| per iteration, to SLIP_TOL.
q_next integrates v' + Delta.  A contact is loaded when its normal impulse
exceeds LOADED, and stuck when it is loaded and slides slower than STUCK.
The caller (``QuasistaticSimulator``) drops a correction that would move a
body's geometry by more than MAX_SLIP_CORRECTION (then the step is its
formulation's alone), and a formulation may decline
the correction (``Formulation.keeps_contacts_stuck``: the MIQP, whose grasp
holds through the fingers' commanded overlap).  This module imports neither
Drake nor ROS.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from quasistatic_drake.contact import ContactSet

LOADED = 1e-9       # [N s] a contact whose normal impulse exceeds this carries load
STUCK = 1e-5        # [m/s] a loaded contact sliding slower than this sticks
TOUCHING = 1e-4     # [m] a contact whose gap at the step's end is below this touches
ROLLING = 1e-3      # [rad] a stuck contact whose bodies turn apart by more in a step rolls
# [m] a stuck contact between bodies that move less in a step has no slip to correct (its
# second-order part is far below SLIP_TOL): a box resting on the table
STILL = 1e-9
# [m] no body point is further from the axes it turns about: a turn of theta in a step
# leaves at most REACH theta^2 of second-order slip
REACH = 10.0
# [m] a correction that would move a body's geometry further is dropped: the step's own
# linearisation is off by as much there (the demo arm at h = 0.2 s: up to 0.5 mm, and the
# corrected steps then ran into the turn limits); at h = 0.1 s the largest is 0.15 mm
MAX_SLIP_CORRECTION = 2e-4
SLIP_TOL = 1e-13    # [m] the Gauss-Newton iteration stops when Delta moves a point less
MAX_SLIP_ITERATIONS = 8
# relative: directions the rows pin down with less than this fraction of the best are left
# alone (two stuck points 0.1 mm apart on a pad do not fix a turn about their normal)
RCOND = 1e-3


def loaded_contacts(contacts: ContactSet, impulses_W: np.ndarray) -> np.ndarray:
    """Return the mask of contacts whose normal impulse exceeds LOADED."""
    if contacts.n_c == 0:
        return np.zeros(0, dtype=bool)
    return np.einsum("ij,ij->i", impulses_W, contacts.normal_W) > LOADED


def stuck_contacts(contacts: ContactSet, loaded: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Return the mask of ``loaded`` contacts that slide slower than STUCK, max_j |J_f,ij v|."""
    if contacts.n_c == 0:
        return np.zeros(0, dtype=bool)
    speed = np.abs(contacts.J_f @ v).reshape(contacts.n_c, contacts.n_d).max(axis=1)
    return loaded & (speed <= STUCK)


@dataclass(frozen=True)
class SlipRows:
    """The rows of the correction (module docstring), built once per step."""

    contact: np.ndarray      # (n_m,): each material row's contact, among the stuck ones
    directions: np.ndarray   # (n_m, 3): the row's tangent d_ij or normal n_i
    target: np.ndarray       # (n_m,): h J_f,ij v' or h J_n,i v'
    normals: np.ndarray      # (n_T, n_u): h J_n,i,u of the other touching contacts
    solver: np.ndarray       # (n_u, n_m + n_T): the truncated pseudo-inverse, negated

    def slip(self, relative: np.ndarray, delta_u: np.ndarray) -> np.ndarray:
        """
        Return the rows' residuals: [d . s_i - target; h J_n,i,u Delta_u].

        ``relative`` (n_stuck x 3): s_i = s_B,i - s_A,i, how far stuck
        contact i's material point on B moved over the step less its point
        on A, with v' + Delta.
        """
        along = np.einsum("rj,rj->r", self.directions, relative[self.contact]) - self.target
        return np.concatenate([along, self.normals @ delta_u])

    def change(self, slip: np.ndarray) -> np.ndarray:
        """Return the Gauss-Newton change of Delta's object part for ``slip``."""
        return self.solver @ slip

    def material_jacobian(self, P_A: np.ndarray, P_B: np.ndarray, h: float) -> np.ndarray:
        """
        Return the material rows' h J in the objects' columns, taken at the step's end.

        ``P_A``/``P_B`` (n_stuck x 3 x n_u): the velocity Jacobians, in the
        objects' columns, of each stuck contact's material points where they
        end the step (lever arms from the bodies' origins there).  With it
        Gauss-Newton's change is exact but for the integration's own
        curvature: two or three updates reach SLIP_TOL.
        """
        return h * np.einsum("rk,rkn->rn", self.directions, (P_B - P_A)[self.contact])

    def holding(self, jacobian: np.ndarray, contacts: ContactSet, stuck: np.ndarray,
                touching: np.ndarray, object_v_idx: np.ndarray, h: float) -> "SlipRows":
        """
        Return the rows with the touching normals of the other body pairs, and the solver.

        ``jacobian``: the material rows' (``material_jacobian``).
        The normals of the ``touching`` contacts of the body pairs without a
        stuck contact hold still (a box's corners on the table while a finger
        sticks to its side).  The solver is the pseudo-inverse of all the
        rows' h J in the objects' columns, truncated at RCOND: least squares,
        and no change in directions the contacts leave free or nearly free.
        It is the same for every iteration of the step.
        """
        pairs = list(zip(contacts.body_a, contacts.body_b))
        held = {pair for pair, is_stuck in zip(pairs, stuck) if is_stuck}
        other = np.array([pair not in held for pair in pairs], dtype=bool)
        normals = h * contacts.J_n[np.ix_(np.flatnonzero(touching & other), object_v_idx)]
        return replace(self, normals=normals, solver=-np.linalg.pinv(
            np.vstack([jacobian, normals]), rcond=RCOND))


def slip_rows(contacts: ContactSet, stuck: np.ndarray, together: np.ndarray, v: np.ndarray,
              object_v_idx: np.ndarray, h: float) -> SlipRows:
    """
    Return the material rows for the step's v' (module docstring), without normals or solver.

    The tangents of the ``stuck`` contacts and the normals of those that
    move ``together``; ``SlipRows.holding`` adds the rest.
    """
    n_d = contacts.n_d
    index = np.flatnonzero(stuck)
    both = np.flatnonzero(together[index])                  # among the stuck
    rows = (index[:, None] * n_d + np.arange(n_d)[None]).reshape(-1)
    J = np.vstack([contacts.J_f[rows], contacts.J_n[index[both]]])
    n_u = len(object_v_idx)
    return SlipRows(contact=np.concatenate([np.repeat(np.arange(len(index)), n_d), both]),
                    directions=np.vstack([contacts.tangents_W[index].reshape(-1, 3),
                                          contacts.normal_W[index[both]]]),
                    target=h * (J @ v), normals=np.zeros((0, n_u)), solver=np.zeros((n_u, 0)))


def point_jacobians(J_v: np.ndarray, J_w: np.ndarray, arms: np.ndarray) -> np.ndarray:
    """
    Return the velocity Jacobians J_v - [r]x J_w of points at ``arms`` r from their bodies.

    ``J_v``/``J_w`` (k x 3 x n): each point's body's origin Jacobians; ``arms``
    (k x 3).  The point moves at J_v v + (J_w v) x r.
    """
    return J_v - np.cross(arms[:, None, :], np.swapaxes(J_w, 1, 2)).swapaxes(1, 2)


def moving_together(contacts: ContactSet, stuck: np.ndarray, omega_A: np.ndarray,
                    omega_B: np.ndarray, h: float) -> np.ndarray:
    """
    Return the mask of stuck contacts whose bodies turn apart by at most ROLLING in the step.

    ``omega_A``/``_B`` (n_c x 3): the bodies' angular velocities.  Such a
    contact's bodies move as one: its material points stay together along
    the normal too.  A rolling contact's do not (a disk rolled by theta
    lifts its touching point r theta^2 / 2 off the wall, and the detector
    measures the new gap).
    """
    turn = h * np.linalg.norm(omega_B - omega_A, axis=1)
    return stuck & (turn <= ROLLING)


def touching_contacts(contacts: ContactSet, v: np.ndarray, h: float) -> np.ndarray:
    """Return the mask of contacts that end the step closer than TOUCHING: phi + h J_n v'."""
    return contacts.phi + h * (contacts.J_n @ v) <= TOUCHING
