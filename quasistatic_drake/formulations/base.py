r"""
The formulation plug-in interface: what a step formulation implements.

Each time step, :meth:`QuasistaticSimulator.step` detects the contacts at q
(a :class:`ContactSet`), gathers the step's data from the model (a
:class:`StepProblem`: plain arrays) and asks the scenario's formulation for
the next velocities v'.  The engine then integrates q_next = q + h N(q) v',
and hands on the reference the formulation returns.  A formulation:

* has a name (the scenario's ``formulation:``) and a settings type, a frozen
  dataclass whose fields are declared with ``schema.setting``:
  the scenario's block of the same name (``miqp:``) is validated by it;
* is built once per engine from the model's fixed facts (:class:`ModelFacts`)
  and its settings;
* may choose which contacts it takes (:meth:`Formulation.contacts`);
* solves a step (:meth:`Formulation.solve`) into its own solution type, a
  subclass of :class:`StepSolution` (v' and the contact impulses, plus what
  is its own, such as the MIQP's tight big-M rows);
* says which reference the next step starts from
  (:meth:`Formulation.next_reference`): robots are springs pulling towards a
  reference that runs ahead of them (Pang & Tedrake 2021), or follow the
  one-step target q_a + h v_cmd (Pang & Tedrake 2018);
* may take a warm start (the MIQP's MIP start), returned by each solution
  for the next step (:attr:`StepSolution.warm_start_next`).

Everything around the solve is the engine's and the same for every
formulation: contact detection and the widening of its tolerance for long
sweeps, the bisected partial recovery when a penetration cannot be worked
off in one step, the re-solve with bounded turns when a step's linearised
contacts let it go deeper, joint limits as bounds, and the integration.
A formulation is registered by name in ``formulations/registry.py``.  This
module imports neither Drake nor ROS.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional, Union

import numpy as np

from quasistatic_drake.contact import ContactSet
from quasistatic_drake.errors import CommandError


@dataclass(frozen=True)
class ModelFacts:
    """What a formulation may know of the scenario's model: fixed when the engine is built."""

    h: float                          # the time step [s]
    n_v: int
    object_v_idx: np.ndarray          # the objects' velocities in v
    robot_v_idx: np.ndarray           # the robots' joint velocities in v (scenario order)
    stiffness: np.ndarray             # K of each robot joint, robot_v_idx order [N/m, N m/rad]
    max_lead: np.ndarray              # each robot joint's largest reference lead [m, rad]
    object_mass_default: np.ndarray   # the objects' mass matrix M_u at the initial q
    object_weight: float              # the objects' total weight |g| sum(m) [N]
    quasi_dynamic: bool               # the scenario's quasi_dynamic
    quasi_static_inertia_ratio: float
    detection_tolerance: float        # the scenario's contact_detection_tolerance [m]
    robot_names: tuple[str, ...] = ()      # the robots, scenario order
    robot_sizes: tuple[int, ...] = ()      # each robot's commanded joints (robot_v_idx runs)
    object_names: tuple[str, ...] = ()     # the objects, scenario order
    object_sizes: tuple[int, ...] = ()     # each object's velocities (object_v_idx runs)
    object_masses: tuple[float, ...] = ()  # each object's mass, all its bodies [kg]
    # robot_inertia: the impedance's damping D per robot joint (robot_v_idx order)
    # [N s/m, N m s/rad]; None: robots are springs without inertia
    robot_damping: Optional[np.ndarray] = None
    plane_normal: Optional[np.ndarray] = None   # the objects' plane of motion (n_d = 2)
    gravity: np.ndarray = field(default_factory=lambda: np.zeros(3))   # [m/s^2]
    object_frames_default: tuple["ObjectFrame", ...] = ()   # at the initial q (if needed)


@dataclass(frozen=True)
class ObjectFrame:
    """
    An object's reported body at q: its orientation and its centre of mass's Jacobian.

    ``J_com`` (6 x k) maps the object's own k velocities (its run of
    ``object_v_idx``) to the spatial velocity [w; v] of the body's centre of
    mass, both in the world frame.
    """

    R_WB: np.ndarray
    J_com: np.ndarray


@dataclass(frozen=True)
class StepProblem:
    """
    One step's data at q, computed by the engine from the model.

    ``v_lower``/``v_upper`` bound v' (the model files' joint position and
    velocity limits; on a re-solve, also the turn bound).  ``J_w``, ``J_v``
    (bodies x 3 x n_v) map v to the moving bodies' angular and origin
    velocities, and ``body_radii`` bound each body's geometry about its
    origin: with them a formulation can bound how far any point moves
    (``manifold.sweep_lengths``).
    """

    q_a: np.ndarray          # the robots' joint positions at q
    q_ref: np.ndarray        # the robots' reference the step starts from
    v_cmd: np.ndarray        # the commanded joint velocities
    v_lower: np.ndarray
    v_upper: np.ndarray
    M_u: np.ndarray          # the objects' mass matrix at q
    tau_u: np.ndarray        # gravity's generalized force on the objects at q [N, N m]
    J_w: np.ndarray
    J_v: np.ndarray
    body_radii: np.ndarray
    # each object's ObjectFrame at q, when the formulation asks (needs_object_frames)
    object_frames: tuple[ObjectFrame, ...] = ()
    # robot_inertia: the robots' mass matrix at q (robot_v_idx rows and columns) and their
    # joint velocities at the step's start; None without robot inertia
    M_a: Optional[np.ndarray] = None
    v_a: Optional[np.ndarray] = None
    # the generalized forces applied to the objects over the step (n_v, zero elsewhere;
    # included in tau_u), None: none
    tau_ext: Optional[np.ndarray] = None
    # the fraction of its trust region a formulation that keeps one gives the objects: one
    # for all, or one per velocity (n_v,); the step halves it on the velocities that move a
    # pair that ended deeper than in the iterate before
    trust: Union[float, np.ndarray] = 1.0


@dataclass(frozen=True)
class StepSolution:
    """What every formulation's solution holds: v' (None on failure), impulses, status, time."""

    v: Optional[np.ndarray]
    impulses_W: np.ndarray   # (n_c, 3) impulse on body_b by body_a per contact [N s]
    #                          (times an unknown k when the formulation has scaled_impulses)
    status: str              # "optimal" when v is not None, else the solver's reason
    solve_time: float        # the solver's own time [s]

    @property
    def warm_start_next(self) -> Any:
        """Return the warm start for the next step (None: this formulation takes none)."""
        return None


class Formulation(ABC):
    """A step formulation (module docstring); subclasses set ``name`` and ``settings_type``."""

    name: ClassVar[str]
    settings_type: ClassVar[type]
    # How often the engine halves the fraction of penetration a failed step works
    # off (QuasistaticSimulator._partial_recovery): to 1/2^n.
    recovery_bisections: ClassVar[int] = 6
    # Whether building the engine solves one step to load the compiled kernels:
    # False where a solve is costly or may be refused (a licence limit).
    solves_at_warm_up: ClassVar[bool] = True
    # Whether StepProblem.object_frames is filled (a cost per step: one Jacobian per object).
    needs_object_frames: ClassVar[bool] = False
    # Whether the impulses are known only up to a scale (Halm & Posa's limit-surface factor
    # k, eq. 10): the step then reports them as scaled impulses and no force in newtons.
    scaled_impulses: ClassVar[bool] = False
    # Whether solution_derivative is implemented (step(gradients=True)), and the fix a
    # refusal names.
    gives_gradients: ClassVar[bool] = False
    gradients_fix: ClassVar[str] = "formulation qp, lcp or miqp, or gradients=False"
    # Whether a step whose derivative is one-sided may have its sides compared by solving
    # again at +- delta (step_gradients.sides_compared): the solver is exact and cheap.
    checks_one_sided_by_solving: ClassVar[bool] = False
    # Whether the robots' inertia and damping enter the step (the scenario's robot_inertia):
    # StepProblem.M_a and v_a, ModelFacts.robot_damping.
    takes_robot_inertia: ClassVar[bool] = False

    def __init__(self, facts: ModelFacts, settings: Any):
        """Keep the model's facts and the (validated) settings."""
        self.facts = facts
        self.settings = settings

    def contacts(self, contacts: ContactSet) -> ContactSet:
        """Return the contacts this formulation solves with (all, unless it thins them)."""
        return contacts

    @abstractmethod
    def solve(self, problem: StepProblem, contacts: ContactSet,
              warm_start: Any = None) -> StepSolution:
        """Solve one step; on failure return a solution with v None and the reason in status."""

    def recovers_from(self, solution: StepSolution) -> bool:
        """Return whether a failed solve may be retried with less penetration recovery."""
        return True

    def solution_derivative(self, problem: StepProblem, contacts: ContactSet,
                            solution: StepSolution, changes: list, delta: float
                            ) -> tuple[np.ndarray, Any]:
        """
        Return dv'/dtheta (n_v x k) of a solved step, and whether it is one-sided.

        The flag is a bool for all columns, or a (k,) bool array per column.

        ``changes`` holds, per parameter theta_j, the step's data at theta_j
        + delta and at theta_j - delta: ((problem, contacts), (problem,
        contacts)).  A formulation differentiates its optimality conditions
        at ``solution`` with the central differences of its data (the step
        gradients, ``QuasistaticSimulator.step(gradients=True)``).  A
        formulation that gives none (``gives_gradients`` False, where the
        engine refuses before it gets here) keeps this refusal, which names
        its ``gradients_fix``.
        """
        raise CommandError(f"formulation {self.name!r} gives no step gradients. "
                           f"Fix: {self.gradients_fix}.")

    @abstractmethod
    def next_reference(self, problem: StepProblem, q_a_next: np.ndarray,
                       solution: StepSolution) -> tuple[np.ndarray, bool]:
        """Return the robots' reference for the next step, and whether a bound applied."""

    def reference_base(self, q_a: np.ndarray, q_ref: np.ndarray) -> np.ndarray:
        """
        Return what this formulation adds h v_cmd to for its target: q_ref by default.

        A position command q_cmd becomes v_cmd = (q_cmd - base) / h
        (``QuasistaticSimulator.velocity_for_positions``).
        """
        return q_ref

    def settled_warm_start(self, problem: StepProblem, contacts: ContactSet) -> Any:
        """
        Return the warm start of a first state at q (``initial_state``): None by default.

        ``problem`` is the step at q under zero commands with no preload; the
        QP solves it for its contacts' impulses at rest.
        """
        return None

    def linearisation_velocity(self, warm_start: Any
                               ) -> tuple[Optional[np.ndarray], Optional[float]]:
        """
        Return the velocities the step linearises its contacts halfway along, and their sweep.

        The QP hands on its last step's v' in its warm start: the next step's
        contacts are linearised at q + (h / 2) v' (``step_loop.py``).  The
        sweep is how far v' moved any point of any body in that step [m]
        (None: not known).  (None, None): at q.
        """
        return None, None

    def gap_offsets(self, warm_start: Any) -> dict:
        """
        Return the last step's gap offsets per geometry pair (``step_loop.py``; {}: none).

        A formulation whose warm start keeps them (the QP's) starts each step
        with the offsets its last step ended with.
        """
        return {}

    def with_step_end(self, warm_start: Any, offsets: dict, sweep: float) -> Any:
        """Return the next step's warm start with the offsets and the sweep (if it keeps any)."""
        return warm_start

    def checked_warm_start(self, warm_start: Any) -> Any:
        """Return a usable warm start, or raise CommandError (this one takes none)."""
        if warm_start is not None:
            raise CommandError(
                f"warm_start: formulation {self.name!r} takes none. Fix: pass "
                "warm_start=None (formulation: miqp takes a MIP start).")
        return None


def one_step_reference(problem: StepProblem, h: float) -> np.ndarray:
    """
    Return q_a + h v_cmd: the target of this step only, no spring preload.

    The hypothetical robot position of Pang & Tedrake 2018, eq. 21.
    """
    return problem.q_a + h * problem.v_cmd


def spring_reference(problem: StepProblem, h: float) -> np.ndarray:
    """
    Return qbar_a' = qbar_a + h v_cmd: the spring reference runs ahead of blocked joints.

    The robots-as-impedances model of Pang & Tedrake 2021 ("robots as springs").
    """
    return problem.q_ref + h * problem.v_cmd


def lead_bounded(q_ref_next: np.ndarray, q_a_next: np.ndarray,
                 max_lead: np.ndarray) -> tuple[np.ndarray, bool]:
    """
    Keep a spring reference within max_lead of the joints; say whether the bound applied.

    The reference integrates the command, so a joint held back (by the
    table, a buried pad, a joint limit) would build an unbounded lead, a
    spring force without bound, and a jump when it comes free.  Each joint's
    lead is capped at its robot's ``max_reference_lead`` (the force at
    K max_lead); in free space the lead is zero and nothing changes.
    """
    if not max_lead.size:
        return q_ref_next, False
    lead = q_ref_next - q_a_next
    if np.all(np.abs(lead) <= max_lead):
        return q_ref_next, False
    return q_a_next + np.clip(lead, -max_lead, max_lead), True
