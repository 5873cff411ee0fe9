"""
The checks of everything a user hands the engine: states, commands, forces.

Every public entry point of :class:`QuasistaticSimulator` checks its input
here before anything runs: a bad value raises :class:`CommandError` saying
what was wrong, where, and the fix, and nothing is changed.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import numpy as np

from quasistatic_drake.errors import CommandError
from quasistatic_drake.joint_limits import LIMIT_SLACK
from quasistatic_drake.state import State


class InputChecks:
    """The checks for one model's states, commands and forces (module docstring)."""

    def __init__(self, model, coupling, robot_inertia: bool, limits=None):
        """
        Check against ``model`` (a QuasistaticModel) and its joint ``coupling`` (or None).

        ``limits``: (q index, v index, lower, upper) of the joints with position
        limits (StepData.limits); None checks none.
        """
        self.model = model
        self.coupling = coupling
        self.robot_inertia = robot_inertia
        self.limits = limits
        self.joint_of_q = _joint_names_by_position(model.plant)
        robots = model.robots
        self.robot_q_idx = _concat([r.q_idx for r in robots])
        self.n_a = len(self.robot_q_idx)
        self.robot_names = frozenset(r.name for r in robots)
        self.object_names = frozenset(o.name for o in model.objects)
        self.joint_labels = [f"{r.name}/{j}" for r in robots for j in r.joint_names]

    def robot(self, name: str):
        """Return the model's robot ``name`` (CommandError naming the robots there are)."""
        try:
            return self.model.robot(name)
        except KeyError as err:
            raise CommandError(err.args[0]) from None

    def object(self, name: str):
        """Return the model's object ``name`` (CommandError naming the objects there are)."""
        try:
            return self.model.object(name)
        except KeyError as err:
            raise CommandError(err.args[0]) from None

    def positions(self, q) -> np.ndarray:
        """Return q as floats after checking its size, values and the joint coupling."""
        q = np.asarray(q, dtype=float)
        if q.shape != (self.model.n_q,):
            raise CommandError(f"q must have shape ({self.model.n_q},) for this scenario, "
                               f"got {q.shape}. Fix: start from default_positions().")
        if not np.isfinite(q).all():
            raise CommandError(f"q has non-finite entries at {np.flatnonzero(~np.isfinite(q))}.")
        self._check_quaternions(q)
        self._check_limits(q)
        broken = self.coupling.violation(q) if self.coupling is not None else []
        if broken:
            raise CommandError(f"q breaks the model's joint coupling (<mimic>): {broken}. Fix: "
                               "set each coupled joint from its leader, or start from "
                               "default_positions().")
        return q

    def _check_quaternions(self, q: np.ndarray) -> None:
        """Refuse a free body's quaternion whose norm is not 1 (QUATERNION_NORM_TOL)."""
        for start in self.model.quaternion_starts:
            norm = float(np.linalg.norm(q[start:start + 4]))
            if abs(norm - 1.0) > QUATERNION_NORM_TOL:
                raise CommandError(
                    f"q[{start}:{start + 4}] is the orientation quaternion (w, x, y, z) of "
                    f"'{self.joint_of_q.get(start, '?')}'; its norm is {norm:.6g}, not 1 "
                    f"(within {QUATERNION_NORM_TOL:g}). Fix: "
                    "divide it by its norm (a zero quaternion is no rotation: use "
                    "[1, 0, 0, 0]).")

    def _check_limits(self, q: np.ndarray) -> None:
        """Refuse a joint beyond its position limits (the engine would hold it there)."""
        if self.limits is None:
            return
        q_idx, _, lower, upper = self.limits
        values = q[q_idx]
        beyond = np.flatnonzero((values < lower - LIMIT_SLACK) | (values > upper + LIMIT_SLACK))
        if beyond.size:
            k = beyond[0]
            raise CommandError(
                f"q[{q_idx[k]}] = {values[k]:.6g} puts joint "
                f"'{self.joint_of_q.get(q_idx[k], '?')}' outside its limits "
                f"[{lower[k]:.6g}, {upper[k]:.6g}] ({beyond.size} joint(s) outside); the "
                "engine would hold it there. Fix: clip q into the limits, or widen the limits "
                "in the model file.")

    def reference(self, q: np.ndarray, q_ref: Optional[np.ndarray]) -> np.ndarray:
        """Return the checked reference, or (None) the robot positions of q: no preload."""
        if q_ref is not None:
            return self.vector(q_ref, self.n_a, "q_ref", self.joint_labels)
        return q[self.robot_q_idx].copy()

    def robot_velocity(self, robot_velocity) -> Optional[np.ndarray]:
        """Return v_a under robot_inertia (zeros for None); refuse one without it."""
        if not self.robot_inertia:
            if robot_velocity is not None:
                raise CommandError("robot_velocity: only a scenario with robot_inertia: true "
                                   "has robot velocities as state. Fix: pass "
                                   "robot_velocity=None, or set robot_inertia: true.")
            return None
        if robot_velocity is None:
            return np.zeros(self.n_a)
        return self.vector(robot_velocity, self.n_a, "robot_velocity", self.joint_labels)

    def state(self, state: Any, formulation) -> State:
        """Return ``state`` after checking every part of it (CommandError naming the part)."""
        if not isinstance(state, State):
            raise CommandError(
                f"the state must be a quasistatic_drake.State, got {type(state).__name__}. "
                "step(q, v_cmd, q_ref=...) is the old form. Fix: state = "
                "sim.initial_state(q, q_ref=q_ref); result = sim.step(state, v_cmd); "
                "state = result.state_next.")
        q = self.positions(state.q)
        self.reference(q, state.q_ref)
        self.robot_velocity(state.robot_velocity)
        formulation.checked_warm_start(state.warm_start)
        return state

    def command(self, v_cmd: Mapping[str, np.ndarray]) -> np.ndarray:
        """Return v_cmd as one array (robots in scenario order, those left out 0)."""
        v_bar = np.zeros(self.n_a)
        for _, rows, value in self.robot_vectors(v_cmd, "v_cmd", "velocity arrays"):
            v_bar[rows] = value
        return v_bar

    def robot_vectors(self, values, what: str, kind: str) -> list[tuple[str, slice, np.ndarray]]:
        """Return (robot, its rows among the commanded joints, checked value) per given robot."""
        if not isinstance(values, Mapping):
            raise CommandError(f"{what} must map robot names to {kind}, got "
                               f"{type(values).__name__}.")
        unknown = sorted(set(values) - self.robot_names)
        if unknown:
            raise CommandError(f"{what} names unknown robot(s) {unknown}. "
                               f"Robots in this scenario: {sorted(self.robot_names)}.")
        out, offset = [], 0
        for robot in self.model.robots:
            n = len(robot.joint_names)
            if robot.name in values:
                out.append((robot.name, slice(offset, offset + n), self.vector(
                    values[robot.name], n, f"{what}[{robot.name!r}]", robot.joint_names,
                    MAX_COMMAND, "m/s or rad/s" if what == "v_cmd" else "m or rad")))
            offset += n
        return out

    def object_forces(self, forces) -> Optional[np.ndarray]:
        """Return the objects' applied generalized forces as an n_v array, or None."""
        if not forces:
            return None
        if not isinstance(forces, Mapping):
            raise CommandError("object_forces must map object names to generalized forces, "
                               f"got {type(forces).__name__}.")
        unknown = sorted(set(forces) - self.object_names)
        if unknown:
            raise CommandError(f"object_forces names unknown object(s) {unknown}. Objects in "
                               f"this scenario: {sorted(self.object_names)}.")
        tau = np.zeros(self.model.n_v)
        for obj in self.model.objects:
            if obj.name in forces:
                tau[obj.v_idx] = self.vector(forces[obj.name], len(obj.v_idx),
                                             f"object_forces[{obj.name!r}]",
                                             [f"v[{i}]" for i in obj.v_idx], MAX_FORCE,
                                             "N or N m")
        return tau

    @staticmethod
    def vector(value, n: int, where: str, names, bound: float = np.inf,
               unit: str = "") -> np.ndarray:
        """Return ``value`` as n finite floats within +-``bound``, else raise CommandError."""
        try:
            vec = np.asarray(value, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            raise CommandError(f"{where} must be {n} numbers, got {value!r}.") from None
        if vec.size != n:
            raise CommandError(f"{where} has {vec.size} entries; expected {n}, one per "
                               f"joint {list(names)}.")
        if not np.isfinite(vec).all():
            bad = [names[i] for i in np.flatnonzero(~np.isfinite(vec))]
            raise CommandError(f"{where} is not finite for joint(s) {bad}: {vec.tolist()}.")
        beyond = np.flatnonzero(np.abs(vec) > bound)
        if beyond.size:
            raise CommandError(
                f"{where} is {vec[beyond[0]]:.6g} for {names[beyond[0]]}, beyond the largest "
                f"magnitude accepted, {bound:.0e} {unit}: the step would leave the range its "
                f"numbers are exact in. Fix: give values within +-{bound:.0e}.")
        return vec


# The largest velocity command [m/s or rad/s] and applied generalized force [N or N m]:
# beyond them a step's numbers leave the range the solver is exact in (a 1e20 m/s
# command or a 1e20 N force on a 1 kg box ended in "numerical trouble").
MAX_COMMAND = 1e6
MAX_FORCE = 1e9
# A free body's quaternion within this of unit norm is its normalized rotation (Drake
# normalizes it, and the step hands on a unit one): finite differences and float32 round
# trips stay within it.  Further is a caller's mistake (a zero quaternion, norm 2): refused.
QUATERNION_NORM_TOL = 1e-3


def _joint_names_by_position(plant) -> dict:
    """Return {position index: 'model::joint'} for every joint's first position."""
    from pydrake.multibody.tree import JointIndex
    names = {}
    for j in range(plant.num_joints()):
        joint = plant.get_joint(JointIndex(j))
        if joint.num_positions():
            model = plant.GetModelInstanceName(joint.model_instance())
            names[joint.position_start()] = f"{model}::{joint.name()}"
    return names


def _concat(parts: list) -> np.ndarray:
    return np.concatenate(parts).astype(int) if parts else np.zeros(0, dtype=int)
