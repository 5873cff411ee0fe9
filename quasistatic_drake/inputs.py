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
from quasistatic_drake.state import State


class InputChecks:
    """The checks for one model's states, commands and forces (module docstring)."""

    def __init__(self, model, coupling, robot_inertia: bool):
        """Check against ``model`` (a QuasistaticModel) and its joint ``coupling`` (or None)."""
        self.model = model
        self.coupling = coupling
        self.robot_inertia = robot_inertia
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
        broken = self.coupling.violation(q) if self.coupling is not None else []
        if broken:
            raise CommandError(f"q breaks the model's joint coupling (<mimic>): {broken}. Fix: "
                               "set each coupled joint from its leader, or start from "
                               "default_positions().")
        return q

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
                    values[robot.name], n, f"{what}[{robot.name!r}]", robot.joint_names)))
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
                                             [f"v[{i}]" for i in obj.v_idx])
        return tau

    @staticmethod
    def vector(value, n: int, where: str, names) -> np.ndarray:
        """Return ``value`` as n finite floats, or raise CommandError naming ``where``."""
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
        return vec


def _concat(parts: list) -> np.ndarray:
    return np.concatenate(parts).astype(int) if parts else np.zeros(0, dtype=int)
