"""
The model's facts, and each step's data from them: what the formulation is built from and solves.

:class:`StepData` holds what is fixed for a scenario (the index sets of the
robots and objects, their masses and weights, the joint limits, the robots'
damping under ``robot_inertia``, the joint coupling) and builds from it the
formulation (``formulations/registry.py``) and, at each q, the step's
:class:`StepProblem`: plain arrays from Drake's MultibodyPlant (mass matrix,
gravity, body Jacobians, joint-limit bounds).
"""

from __future__ import annotations

from typing import Optional

import numpy as np
from pydrake.multibody.tree import JacobianWrtVariable, JointIndex

from quasistatic_drake.coupling import CoupledFormulation, Coupling
from quasistatic_drake.formulations import registry
from quasistatic_drake.formulations.base import (Formulation, ModelFacts, ObjectFrame,
                                                 StepProblem)
from quasistatic_drake.joint_limits import joint_limit_velocity_bounds
from quasistatic_drake.scenario import Scenario, ScenarioError
from quasistatic_drake.schema import SchemaError


class StepData:
    """The facts of a scenario's model, and the step's data at any q (module docstring)."""

    def __init__(self, scenario: Scenario, model):
        """Gather the facts of ``model`` (a QuasistaticModel built from ``scenario``)."""
        self.scenario, self.model = scenario, model
        self.h = scenario.time_step
        robots, objects = model.robots, model.objects
        self.robot_q_idx = _concat([r.q_idx for r in robots])
        self.robot_v_idx = _concat([r.v_idx for r in robots])
        self.object_v_idx = _concat([o.v_idx for o in objects])
        self.object_block = np.ix_(self.object_v_idx, self.object_v_idx)
        self.limits = self._position_limits()
        followers = tuple(f for r in robots for f in r.followers)
        # coupled joints (URDF <mimic>): the step solves for the independent velocities
        self.coupling = Coupling.build(model.n_v, followers) if followers else None

    # ----- the formulation -------------------------------------------------------------
    def formulation(self) -> Formulation:
        """Return the formulation the scenario names, built from the model's facts."""
        scenario, robots, model = self.scenario, self.model.robots, self.model
        model.set_positions(model.q_default)
        M_u = model.plant.CalcMassMatrix(model.plant_context)[self.object_block]
        coupling = self.coupling
        name = scenario.formulation
        try:
            cls = registry.formulation_class(name)
        except KeyError as err:
            raise ScenarioError(f"{scenario.source}: formulation: {err.args[0]}") from None
        facts = ModelFacts(
            h=self.h, n_v=model.n_v if coupling is None else len(coupling.kept),
            object_v_idx=(self.object_v_idx if coupling is None
                          else coupling.reduced(self.object_v_idx)),
            robot_v_idx=(self.robot_v_idx if coupling is None
                         else coupling.reduced(self.robot_v_idx)),
            stiffness=np.concatenate([r.stiffness for r in robots]) if robots else np.zeros(0),
            max_lead=np.concatenate([r.max_lead for r in robots]) if robots else np.zeros(0),
            object_mass_default=M_u, object_weight=self.weight_of_objects(),
            quasi_dynamic=scenario.quasi_dynamic,
            quasi_static_inertia_ratio=scenario.quasi_static_inertia_ratio,
            detection_tolerance=scenario.contact_detection_tolerance,
            robot_names=tuple(r.name for r in robots),
            robot_sizes=tuple(len(r.v_idx) for r in robots),
            object_names=tuple(o.name for o in model.objects),
            object_sizes=tuple(len(o.v_idx) for o in model.objects),
            object_masses=self.object_masses(),
            robot_damping=self._robot_damping(cls),
            plane_normal=model.motion_plane_normal, gravity=np.array(scenario.gravity),
            object_frames_default=self.object_frames() if cls.needs_object_frames else ())
        try:
            formulation = cls(facts, scenario.settings(name))
            return formulation if coupling is None else CoupledFormulation(formulation, coupling)
        except SchemaError as err:   # a key "scenario.<key>" is a top-level key
            key = (err.key[len("scenario."):] if err.key.startswith("scenario.")
                   else f"{name}.{err.key}")
            raise ScenarioError(f"{scenario.source}: {key}: {err.message}") from None

    def _robot_damping(self, cls: type) -> Optional[np.ndarray]:
        """
        Return D = 2 zeta sqrt(K M_ii) per robot joint under robot_inertia (None without).

        M_ii is the diagonal of the robots' mass matrix at the initial q, as
        the impedance controller of benchmarks/mbp_reference.py sets it.
        """
        scenario, model = self.scenario, self.model
        if not scenario.robot_inertia:
            return None
        if not cls.takes_robot_inertia:
            raise ScenarioError(f"{scenario.source}: robot_inertia: formulation "
                                f"{scenario.formulation!r} does not take the robots' inertia. "
                                "Fix: formulation: qp, or robot_inertia: false.")
        if self.coupling is not None:
            raise ScenarioError(f"{scenario.source}: robot_inertia: the robots have coupled "
                                "joints (<mimic>), whose inertia the step does not reduce. "
                                "Fix: robot_inertia: false, or command the joints apart.")
        M = model.plant.CalcMassMatrix(model.plant_context)
        diagonal = np.diag(M)[self.robot_v_idx]
        ratios = np.concatenate([np.full(len(r.v_idx), 1.0 if spec.damping_ratio is None
                                         else spec.damping_ratio)
                                 for r, spec in zip(model.robots, scenario.robots)])
        stiffness = np.concatenate([r.stiffness for r in model.robots])
        return 2.0 * ratios * np.sqrt(stiffness * diagonal)

    def weight_of_objects(self) -> float:
        """Return the objects' total weight |g| sum(m) [N]."""
        return float(np.linalg.norm(self.scenario.gravity)) * sum(self.object_masses())

    def object_masses(self) -> tuple[float, ...]:
        """Return each object's mass, all the bodies of its model instance [kg]."""
        plant = self.model.plant
        return tuple(sum(plant.get_body(b).default_mass()
                         for b in plant.GetBodyIndices(o.instance)) for o in self.model.objects)

    # ----- the step's data at q ----------------------------------------------------------
    def problem(self, q: np.ndarray, q_ref: np.ndarray, v_bar: np.ndarray,
                tau_ext: Optional[np.ndarray] = None, v_a: Optional[np.ndarray] = None,
                object_frames: bool = False) -> StepProblem:
        """Gather the formulation's data at q (the model must be at q)."""
        plant, context = self.model.plant, self.model.plant_context
        v_lower, v_upper = self.velocity_bounds(q)
        J_w, J_v, _ = self.model.body_jacobians()
        tau_u = plant.CalcGravityGeneralizedForces(context)[self.object_v_idx]
        M = plant.CalcMassMatrix(context)
        return StepProblem(
            M_a=None if v_a is None else M[np.ix_(self.robot_v_idx, self.robot_v_idx)],
            v_a=v_a, q_a=q[self.robot_q_idx], q_ref=q_ref, v_cmd=v_bar, v_lower=v_lower,
            v_upper=v_upper, M_u=M[self.object_block],
            tau_u=tau_u if tau_ext is None else tau_u + tau_ext[self.object_v_idx],
            J_w=J_w, J_v=J_v, body_radii=self.model.moving_radii,
            object_frames=self.object_frames() if object_frames else (), tau_ext=tau_ext)

    def object_frames(self) -> tuple[ObjectFrame, ...]:
        """Return each object's reported body's orientation and COM Jacobian (model at q)."""
        plant, context = self.model.plant, self.model.plant_context
        world = plant.world_frame()
        frames = []
        for info in self.model.objects:
            body = plant.GetBodyByName(info.base_body, info.instance)
            J = plant.CalcJacobianSpatialVelocity(
                context, JacobianWrtVariable.kV, body.body_frame(), body.default_com(),
                world, world)
            frames.append(ObjectFrame(
                R_WB=plant.EvalBodyPoseInWorld(context, body).rotation().matrix(),
                J_com=J[:, info.v_idx]))
        return tuple(frames)

    def _position_limits(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(q index, v index, lower, upper) of every 1-DOF joint with finite limits."""
        plant = self.model.plant
        lo, hi = plant.GetPositionLowerLimits(), plant.GetPositionUpperLimits()
        q_idx, v_idx = [], []
        for j in range(plant.num_joints()):
            joint = plant.get_joint(JointIndex(j))
            if joint.num_positions() == 1 and joint.num_velocities() == 1:
                s = joint.position_start()
                if np.isfinite(lo[s]) or np.isfinite(hi[s]):
                    q_idx.append(s)
                    v_idx.append(joint.velocity_start())
        q_idx, v_idx = np.array(q_idx, dtype=int), np.array(v_idx, dtype=int)
        return q_idx, v_idx, lo[q_idx], hi[q_idx]

    def velocity_bounds(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """
        Return the model files' joint limits as bounds on v'.

        Position limits: a joint already beyond a limit may stay there.
        Velocity limits (URDF ``<limit velocity>``, SDFormat ``<velocity>``):
        a joint moves no faster, whatever its command (the reference still
        advances by h v_cmd, within max_reference_lead).
        """
        q_idx, v_idx, lo, hi = self.limits
        lower, upper = joint_limit_velocity_bounds(self.model.n_v, self.h, q, q_idx, v_idx, lo,
                                                   hi)
        plant = self.model.plant
        return (np.maximum(lower, plant.GetVelocityLowerLimits()),
                np.minimum(upper, plant.GetVelocityUpperLimits()))


def _concat(parts: list) -> np.ndarray:
    return np.concatenate(parts).astype(int) if parts else np.zeros(0, dtype=int)
