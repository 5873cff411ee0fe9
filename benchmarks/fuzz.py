"""
Fuzz the stepping engine: seeded random commands and injected penetrations, per scene.

Each scene (every scenario in config/ but sim.yaml, the ROS node's parameter
file, or ``--scenes``) runs from its default q for a budget of steps, chaining
``result = sim.step(state, cmds)`` and ``state = result.state_next``.  The
robots' commands switch between modes at seeded random times (segments of 5 to 50 steps):

* smooth: a seeded Ornstein-Uhlenbeck velocity within the joints' velocity
  limits (the plant's, 1 unit/s where infinite);
* extreme: random magnitudes of 10 to 100 times the limits;
* reversal: a velocity within the limits whose sign flips every step;
* zero;
* home: the reference driven back to the initial joint positions, so the
  robot comes back to the objects.

At seeded random times a robot is teleported 2 to 10 mm into an object or
the environment (Newton steps on the normal Jacobian of a contact pair: a
robot's joints, or an object pushed into the table), and q_ref is reset to
the robot's new positions.  The steps until the minimum signed distance is
back above -1 mm are that injection's recovery window; an injection not
recovered within 50 steps is a non-recovery.  When every object is lost, a
new episode starts from the default q.

Every step records: an exception raised by the step or a measurement (any
type; the last q is kept), the status (failed unless ``result.success``), the
minimum signed distance at q_next over all pairs, whether it is inside a
recovery window, objects whose base-body origin is inside a welded
environment box ("below support") or more than 1 m below the lowest
environment geometry ("lost": over an environment box, so it fell through,
or beside it, so it fell off), and the step's wall time.  The first
offending state of each kind (the first step into a penetration deeper than
-1 mm and the deepest one, both outside the recovery windows, an exception,
a failed step, an object below support or lost, a non-recovered injection
with its 50 commands) is saved as lists of floats, so that
``sim.step(sim.initial_state(np.array(s['q']), q_ref=np.array(s['q_ref']),
warm_start=s['warm_start']), s['commands'])``
repeats it (``--replay`` does that).

MIQP scenes (10 to 500 ms a step) get ``--miqp-steps``.  Prints a table,
writes JSON and a PNG (per scene, the minimum signed distance of every step);
the exit code is 0: it reports.  Tests call :func:`fuzz_scene`.

    .venv/bin/python benchmarks/fuzz.py [--steps 2000] [--miqp-steps 400] [--seed 0]
        [--quick] [--qp-only] [--scenes PATHS ...] [--inject-rate 0.02]
        [--miqp-backend gurobi|scip] [--series] [--json out/fuzz.json] [--png out/fuzz.png]
    .venv/bin/python benchmarks/fuzz.py --replay out/fuzz.json
    .venv/bin/python benchmarks/fuzz.py --hostile 1000 [--seed 0] --json out/hostile.json

``--hostile`` runs the hostile family instead (benchmarks/hostile_fuzz.py:
mutated scenarios and directives in worker processes, a peer attacking a
running node); test/test_hostile_fuzz.py runs its 1000-case slice.
"""

import argparse
from collections import Counter
import functools
import json
from pathlib import Path
import sys
import time
from typing import Optional
import zlib

import matplotlib
import numpy as np
from pydrake.multibody.tree import BodyIndex

from quasistatic_drake import QuasistaticSimulator, Scenario
from quasistatic_drake.paths import package_share_dir
from quasistatic_drake.shapes import BOX
from report import machine, write_json

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the Agg backend)

PHI_LIMIT = -1e-3            # [m] deepest tolerated penetration; ends a recovery window
INJECT_DEPTH = (2e-3, 10e-3)  # [m] an injection's target penetration
INJECT_MAX_DEPTH = 20e-3     # [m] an injection deeper than this anywhere is refused
INJECT_REACH = 0.1           # [m] candidate pairs: within this of the nearest one
RECOVERY_STEPS = 50          # an injection not recovered within this is a non-recovery
LOST_DROP = 1.0              # [m] below the lowest environment geometry: lost
SEGMENT = (5, 50)            # steps per command segment
MODES = ('smooth', 'extreme', 'reversal', 'zero', 'home')
MODE_WEIGHTS = (0.35, 0.1, 0.15, 0.1, 0.3)
OU_THETA = 1.0               # [1/s] Ornstein-Uhlenbeck mean reversion
OU_SIGMA = 0.7               # x limit / sqrt(s): stationary std 0.5 limit
HOME_STEPS = 5               # the home mode closes the reference's gap in about this many
OBJECT_INJECTION_SHARE = 0.25
QUICK_STEPS = 300
STATE_KINDS = ('first_penetration', 'deepest_penetration', 'exception', 'failed_step',
               'below_support', 'lost', 'unrecovered_injection')


def default_scenes() -> list:
    """Return every scenario in config/ except sim.yaml (the ROS node's parameters)."""
    return sorted(p for p in (package_share_dir() / 'config').glob('*.yaml')
                  if p.name != 'sim.yaml')


def load_scenario(path, miqp_backend: Optional[str] = None) -> Scenario:
    """Load a scenario, with its MIQP backend replaced when ``miqp_backend`` is given."""
    scenario = Scenario.from_yaml(path)
    if miqp_backend:
        scenario = scenario.with_formulation('miqp', backend=miqp_backend)
    return scenario


def scene_rng(seed: int, path) -> np.random.Generator:
    """Return the generator of one scene: the seed and the scene's file name."""
    return np.random.default_rng([seed, zlib.crc32(Path(path).name.encode())])


def velocity_limits(sim: QuasistaticSimulator, robot) -> np.ndarray:
    """Return a robot's joint velocity limits from the plant (1 unit/s where infinite)."""
    upper = np.abs(sim.model.plant.GetVelocityUpperLimits()[robot.v_idx])
    return np.where(np.isfinite(upper) & (upper > 0.0), upper, 1.0)


class Commander:
    """The seeded command modes of one robot (module docstring)."""

    def __init__(self, rng: np.random.Generator, limits: np.ndarray, home: np.ndarray,
                 h: float):
        """Drive joints with velocity ``limits`` whose initial positions are ``home``."""
        self.rng, self.limits, self.home, self.h = rng, limits, home, h
        self.mode, self.left = 'zero', 0
        self.ou = np.zeros_like(limits)
        self.reversal = np.zeros_like(limits)

    def command(self, q_ref: np.ndarray) -> np.ndarray:
        """Return the next command; ``q_ref`` is the robot's reference now."""
        if self.left == 0:
            self.mode = str(self.rng.choice(MODES, p=MODE_WEIGHTS))
            self.left = int(self.rng.integers(SEGMENT[0], SEGMENT[1] + 1))
            self.reversal = self.limits * self.rng.uniform(0.5, 1.0, self.limits.size) \
                * self.rng.choice([-1.0, 1.0], self.limits.size)
        self.left -= 1
        n = self.limits.size
        if self.mode == 'smooth':
            self.ou += -OU_THETA * self.h * self.ou \
                + OU_SIGMA * self.limits * np.sqrt(self.h) * self.rng.standard_normal(n)
            self.ou = np.clip(self.ou, -self.limits, self.limits)
            return self.ou.copy()
        if self.mode == 'extreme':
            return self.limits * self.rng.uniform(10.0, 100.0, n) \
                * self.rng.choice([-1.0, 1.0], n)
        if self.mode == 'reversal':
            self.reversal = -self.reversal
            return self.reversal.copy()
        if self.mode == 'home':
            bound = 100.0 * self.limits
            return np.clip((self.home - q_ref) / (HOME_STEPS * self.h), -bound, bound)
        return np.zeros(n)


class Scene:
    """A simulator and the facts the fuzzer measures with."""

    def __init__(self, path, miqp_backend: Optional[str] = None):
        """Load the scenario at ``path`` (with another MIQP backend if given)."""
        self.path = Path(path)
        self.name = self.path.stem
        self.sim = QuasistaticSimulator(load_scenario(path, miqp_backend))
        model = self.sim.model
        self.miqp = self.sim.scenario.formulation == 'miqp'
        self.robot_q_idx = np.concatenate([r.q_idx for r in model.robots])
        gravity = np.asarray(self.sim.scenario.gravity, dtype=float)
        norm = np.linalg.norm(gravity)
        self.up = -gravity / norm if norm > 0.0 else np.array([0.0, 0.0, 1.0])
        environment = {e.name for e in self.sim.scenario.environment}
        self.env = [(gid, info) for gid, info in model.geometries.items()
                    if not info.moves and info.body_name.split('::')[0] in environment]
        model.set_positions(model.q_default)
        query = model.query_object()
        self.env_boxes = [(gid, info.shape.half) for gid, info in self.env
                          if info.shape.kind == BOX]
        self.lowest = min((self._lowest_point(query.GetPoseInWorld(gid), info.shape)
                           for gid, info in self.env), default=-np.inf)
        # Where an object is: the origins of its bodies with collision geometry (its
        # base body may be a massless slider of a jointed object, as in paper_2d.yaml).
        self.object_bodies = {
            obj.name: [model.plant.get_body(BodyIndex(b)) for b in sorted(
                {g.body_index for g in model.geometries.values()
                 if g.body_name.split('::')[0] == obj.name})]
            or [model.plant.GetBodyByName(obj.base_body, obj.instance)]
            for obj in model.objects}

    def _lowest_point(self, X_WG, shape) -> float:
        """Return the height (along -gravity) of a geometry's lowest point."""
        if shape.kind == BOX:
            corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1)
                                for sz in (-1, 1)]) * shape.half
            return float(np.min((X_WG.rotation().matrix() @ corners.T).T
                                @ self.up + X_WG.translation() @ self.up))
        return float(X_WG.translation() @ self.up - shape.bounding_radius)

    def objects_below_support(self, q: np.ndarray) -> tuple[list, dict]:
        """
        Return the objects with a body origin inside an environment box, and those lost.

        Lost objects (a body origin more than 1 m below the lowest environment
        geometry) map to whether that body is over an environment box (inside
        its footprint across the up direction: fell through it) or not (fell off).
        """
        model = self.sim.model
        model.set_positions(self.sim.checked_positions(q))
        query = model.query_object()
        boxes = [(query.GetPoseInWorld(gid), half) for gid, half in self.env_boxes]
        below, lost = [], {}
        for name, bodies in self.object_bodies.items():
            for body in bodies:
                p = model.plant.EvalBodyPoseInWorld(model.plant_context, body).translation()
                inside, over = self._over_boxes(p, boxes)
                if inside and name not in below:
                    below.append(name)
                if p @ self.up < self.lowest - LOST_DROP:
                    lost[name] = over
        return below, lost

    def _over_boxes(self, p: np.ndarray, boxes: list) -> tuple[bool, bool]:
        """Return whether p is strictly inside a box, and whether it is over one."""
        over = False
        for X_WG, half in boxes:
            p_G = X_WG.inverse().multiply(p)
            if np.all(np.abs(p_G) < half):
                return True, True
            across = np.arange(3) != np.argmax(np.abs(X_WG.rotation().matrix().T @ self.up))
            over = over or bool(np.all(np.abs(p_G[across]) <= half[across]))
        return False, over

    def robot_positions(self, q: np.ndarray) -> np.ndarray:
        """Return all robots' joint positions: the q_ref of a robot without preload."""
        return q[self.robot_q_idx].copy()

    def deepest_pair(self, q: np.ndarray) -> tuple[float, str, str]:
        """Return the deepest contact at q: phi and its two bodies."""
        self.sim.model.set_positions(q)
        contacts = self.sim.detector.detect(np.inf)
        if contacts.n_c == 0:
            return np.inf, '', ''
        i = int(np.argmin(contacts.phi))
        return float(contacts.phi[i]), contacts.body_a[i], contacts.body_b[i]


# ----- injections -------------------------------------------------------------------------
def _pair_rows(contacts, mover: str, exclude: set) -> dict:
    """Rows of contact pairs between the model ``mover`` and a model not in ``exclude``."""
    pairs: dict = {}
    for i, (a, b) in enumerate(zip(contacts.body_a, contacts.body_b)):
        ma, mb = a.split('::')[0], b.split('::')[0]
        if (ma == mover and mb not in exclude) or (mb == mover and ma not in exclude):
            pairs.setdefault((a, b), []).append(i)
    return pairs


def _push_into(scene: Scene, q: np.ndarray, pair: tuple, info, target: float):
    """Newton steps moving model ``info`` so the pair's deepest point reaches ``target``."""
    sim = scene.sim
    plant, context = sim.model.plant, sim.model.plant_context
    lower = plant.GetPositionLowerLimits()[info.q_idx]
    upper = plant.GetPositionUpperLimits()[info.q_idx]
    q = q.copy()
    for _ in range(20):
        sim.model.set_positions(q)
        contacts = sim.detector.detect(np.inf)
        rows = [i for i, p in enumerate(zip(contacts.body_a, contacts.body_b)) if p == pair]
        if not rows:
            return None
        i = min(rows, key=lambda r: contacts.phi[r])
        phi = contacts.phi[i]
        if -INJECT_DEPTH[1] <= phi <= -INJECT_DEPTH[0]:
            return q
        row = contacts.J_n[i, info.v_idx].copy()
        if len(info.q_idx) == len(info.v_idx):      # 1-DOF joints: drop those at a limit
            direction = row * (target - phi)
            row[((q[info.q_idx] >= upper) & (direction > 0))
                | ((q[info.q_idx] <= lower) & (direction < 0))] = 0.0
        if row @ row < 1e-12:
            return None
        v = np.zeros(sim.model.n_v)
        v[info.v_idx] = row * (target - phi) / (row @ row)
        q = q + plant.MapVelocityToQDot(context, v)
        for s in sim.model.quaternion_starts:
            q[s:s + 4] /= np.linalg.norm(q[s:s + 4])
        q[info.q_idx] = np.clip(q[info.q_idx], lower, upper)
    return None


def inject(scene: Scene, q: np.ndarray, rng: np.random.Generator, tries: int = 8):
    """
    Teleport a robot (or an object resting on the environment) 2 to 10 mm into a body.

    Returns (q, kind, min signed distance, bodies) or None when no try worked.
    """
    sim = scene.sim
    model = sim.model
    objects = {o.name for o in model.objects}
    model.set_positions(q)
    contacts = sim.detector.detect(np.inf)
    candidates = []
    if objects and rng.random() < OBJECT_INJECTION_SHARE:
        for obj in model.objects:
            for pair, rows in _pair_rows(contacts, obj.name, objects | {
                    r.name for r in model.robots}).items():
                if min(contacts.phi[rows]) < 5e-3:     # resting on it
                    candidates.append(('object', obj, pair, float(min(contacts.phi[rows]))))
    if not candidates:
        for robot in model.robots:
            for pair, rows in _pair_rows(contacts, robot.name, {robot.name}).items():
                i = min(rows, key=lambda r: contacts.phi[r])
                if np.linalg.norm(contacts.J_n[i, robot.v_idx]) > 1e-3:   # it can move
                    candidates.append(('robot', robot, pair, float(contacts.phi[i])))
    if not candidates:
        return None
    nearest = min(c[3] for c in candidates)
    candidates = [c for c in candidates if c[3] <= nearest + INJECT_REACH]
    for _ in range(tries):
        kind, info, pair, _ = candidates[int(rng.integers(len(candidates)))]
        target = -rng.uniform(*INJECT_DEPTH)
        q_new = _push_into(scene, q, pair, info, target)
        if q_new is None:
            continue
        phi = sim.min_signed_distance(q_new)
        if -INJECT_MAX_DEPTH <= phi < -INJECT_DEPTH[0]:
            return q_new, kind, phi, pair
    return None


# ----- the fuzzer -------------------------------------------------------------------------
def _floats(values) -> list:
    return [float(x) for x in values]


def _state(step: int, q, q_ref, commands: dict, warm_start=None, **detail) -> dict:
    """
    Return a reproducible state: what initial_state takes, and the commands.

    A MIP start (a sequence) is kept; the QP's contact memory is not: the
    state is reproduced from q and q_ref, with the memory initial_state settles.
    """
    start = (_floats(warm_start) if isinstance(warm_start, (list, tuple, np.ndarray))
             else None)
    return {'step': step, 'q': _floats(q), 'q_ref': _floats(q_ref), 'warm_start': start,
            'commands': {k: _floats(v) for k, v in commands.items()}, **detail}


def _error_text(err: BaseException) -> str:
    return f'{type(err).__name__}: {err}'[:300]


class _Run:
    """The state and the tallies of one scene's fuzzing (:func:`fuzz_scene`)."""

    def __init__(self, path, seed: int, inject_rate: float, miqp_backend: Optional[str]):
        self.scene = Scene(path, miqp_backend)
        self.sim = sim = self.scene.sim
        self.rng = scene_rng(seed, path)
        self.inject_rate = inject_rate
        self.home = sim.default_positions()
        self.commanders = {r.name: Commander(self.rng, velocity_limits(sim, r),
                                             self.home[r.q_idx], sim.h)
                           for r in sim.model.robots}
        self.offsets = np.cumsum([0] + [len(r.q_idx) for r in sim.model.robots])
        self.q, self.q_ref = self.home.copy(), self.scene.robot_positions(self.home)
        self.warm_start = None         # the MIQP's, handed from step to step
        self.phi = sim.min_signed_distance(self.q)
        self.series = {'phi': [], 'window': [], 'mode': [], 'time': []}
        self.statuses, self.errors, self.exceptions = Counter(), Counter(), Counter()
        self.states: dict = {}
        self.injections = {'count': 0, 'robot': 0, 'object': 0, 'skipped': 0,
                           'recovered': 0, 'unrecovered': 0, 'recovery_steps': [],
                           'depths_mm': []}
        self.window = None            # steps since the injection, while recovering
        self.window_state: dict = {}
        self.deepest = {'phi_mm': np.inf}
        self.below_steps, self.below_objects, self.lost = 0, Counter(), {}
        self.episodes = 1

    def inject(self, k: int) -> None:
        """Teleport into a body, reset q_ref to the robot's positions, open a window."""
        try:
            injected = inject(self.scene, self.q, self.rng)
        except (Exception, SystemExit) as err:  # noqa: B902 - a Drake check, recorded
            self.exceptions[f'inject: {_error_text(err)}'] += 1
            injected = None
        if injected is None:
            self.injections['skipped'] += 1
            return
        self.q, kind, self.phi, _ = injected
        self.warm_start = None
        if kind == 'robot':
            self.q_ref = self.scene.robot_positions(self.q)
        self.injections['count'] += 1
        self.injections[kind] += 1
        self.injections['depths_mm'].append(1e3 * self.phi)
        self.window = 0
        self.window_state = _state(k, self.q, self.q_ref, {}, injected=kind,
                                   phi_injected_mm=1e3 * self.phi, command_sequence=[])

    def commands(self) -> tuple[dict, str]:
        """Return the robots' commands of this step and the mode(s) they come from."""
        commands = {}
        for i, (name, commander) in enumerate(self.commanders.items()):
            commands[name] = commander.command(self.q_ref[self.offsets[i]:self.offsets[i + 1]])
        return commands, '+'.join(sorted({c.mode for c in self.commanders.values()}))

    def step(self, k: int) -> None:
        """Take one step and record everything about it (module docstring)."""
        if self.window is None and k > 0 and self.rng.random() < self.inject_rate:
            self.inject(k)
        commands, mode = self.commands()
        if self.window is not None and self.window < RECOVERY_STEPS:
            self.window_state['command_sequence'].append(
                {n: _floats(c) for n, c in commands.items()})
        q, q_ref, warm_start, phi_before = self.q, self.q_ref, self.warm_start, self.phi
        tick = time.perf_counter()
        try:
            result = self.sim.step(
                self.sim.initial_state(q, q_ref=q_ref, warm_start=warm_start), commands)
        except KeyboardInterrupt:
            raise
        except BaseException as err:  # noqa: B902 - the fuzzer records every failure
            result = None
            self.exceptions[_error_text(err)] += 1
            self.states.setdefault('exception', _state(k, q, q_ref, commands, warm_start,
                                                       error=_error_text(err)))
        self.series['time'].append(time.perf_counter() - tick)
        below, gone, phi = [], {}, np.nan
        if result is not None:
            if not result.success:
                self.statuses[result.status] += 1
                if result.diagnostics.error:
                    self.errors[result.diagnostics.error[:300]] += 1
                self.states.setdefault('failed_step', _state(
                    k, q, q_ref, commands, warm_start, status=result.status,
                    error=result.diagnostics.error))
            self.q, self.q_ref = result.q_next, result.state_next.q_ref
            self.warm_start = result.state_next.warm_start
            try:
                phi = self.sim.min_signed_distance(self.q)
                below, gone = self.scene.objects_below_support(self.q)
            except KeyboardInterrupt:
                raise
            except BaseException as err:  # noqa: B902
                self.exceptions[f'measure: {_error_text(err)}'] += 1
                self.states.setdefault('exception', _state(
                    k, q, q_ref, commands, warm_start, error=f'measure: {_error_text(err)}'))
        self.phi = phi
        for key, value in (('phi', phi), ('window', self.window is not None), ('mode', mode)):
            self.series[key].append(value)
        state = functools.partial(_state, k, q, q_ref, commands, warm_start)
        if self.window is None:
            self.penetration(k, phi, phi_before, state)
        else:
            self.recovery(phi)
        self.support(k, below, gone, state)

    def penetration(self, k: int, phi: float, phi_before: float, state) -> None:
        """Keep the deepest penetration outside windows, and the first step into one."""
        if phi < PHI_LIMIT and not phi_before < PHI_LIMIT:
            self.states.setdefault('first_penetration', state(
                phi_before_mm=1e3 * phi_before, phi_next_mm=1e3 * phi))
        if phi < 1e-3 * self.deepest['phi_mm']:
            _, body_a, body_b = self.scene.deepest_pair(self.q)
            self.deepest = {'phi_mm': 1e3 * phi, 'step': k, 'bodies': [body_a, body_b]}
            if phi < PHI_LIMIT:
                self.states['deepest_penetration'] = state(
                    phi_before_mm=1e3 * phi_before, phi_next_mm=1e3 * phi,
                    bodies=[body_a, body_b])

    def recovery(self, phi: float) -> None:
        """Advance the recovery window: closed once phi >= -1 mm."""
        self.window += 1
        if phi >= PHI_LIMIT:
            self.injections['recovered'] += 1
            self.injections['recovery_steps'].append(self.window)
            self.window = None
        elif self.window == RECOVERY_STEPS:
            self.injections['unrecovered'] += 1
            self.window_state['commands'] = self.window_state['command_sequence'][0]
            self.window_state['phi_after_mm'] = 1e3 * phi
            self.states.setdefault('unrecovered_injection', self.window_state)

    def support(self, k: int, below: list, gone: dict, state) -> None:
        """Tally objects inside the environment and lost; restart when all are lost."""
        if below:
            self.below_steps += 1
            self.below_objects.update(below)
            self.states.setdefault('below_support', state(objects=below))
        for name, over in gone.items():
            if name not in self.lost:
                self.lost[name] = {'step': k, 'over_support': over}
                self.states.setdefault('lost', state(objects=list(gone)))
        objects = self.sim.model.objects
        if objects and len(gone) == len(objects):
            self.episodes += 1          # nothing left to touch: start again
            self.q, self.q_ref = self.home.copy(), self.scene.robot_positions(self.home)
            self.warm_start = None
            self.phi = self.sim.min_signed_distance(self.q)
            self.window = None

    def summary(self, steps: int, seed: int, wall: float) -> dict:
        """Return the figures of the run (fuzz_scene)."""
        phi = np.array(self.series['phi'], dtype=float)
        in_window = np.array(self.series['window'], dtype=bool)
        modes = np.array(self.series['mode'])
        counted = ~in_window & np.isfinite(phi)
        by_mode = {}
        for mode in sorted(set(self.series['mode'])):
            mask = (modes == mode) & counted
            by_mode[mode] = {'steps': int(np.sum(modes == mode)),
                             'min_phi_mm': float(1e3 * phi[mask].min()) if mask.any() else None,
                             'steps_below_limit': int(np.sum(phi[mask] < PHI_LIMIT))}
        finite = phi[np.isfinite(phi)]
        times = np.array(self.series['time'])
        injections = dict(self.injections)
        recovery, depths = injections.pop('recovery_steps'), injections.pop('depths_mm')
        injections.update(
            unrecovered_at_end=int(self.window is not None and self.window < RECOVERY_STEPS),
            max_recovery_steps=max(recovery) if recovery else None,
            mean_recovery_steps=float(np.mean(recovery)) if recovery else None,
            deepest_injection_mm=min(depths) if depths else None)
        sim = self.sim
        return {
            'scene': self.scene.name, 'path': str(self.scene.path),
            'formulation': sim.scenario.formulation, 'time_step': sim.h, 'seed': seed,
            'steps': steps, 'episodes': self.episodes,
            'failed_steps': int(sum(self.statuses.values())),
            'failed_statuses': dict(self.statuses),
            'failed_errors': dict(self.errors.most_common(10)),
            'exceptions': int(sum(self.exceptions.values())),
            'exception_messages': dict(self.exceptions.most_common(10)),
            'min_phi_outside_injection_mm': float(1e3 * phi[counted].min())
            if counted.any() else None,
            'steps_below_limit_outside_injection': int(np.sum(phi[counted] < PHI_LIMIT)),
            'min_phi_overall_mm': float(1e3 * finite.min()) if finite.size else None,
            'deepest_outside_injection': self.deepest if counted.any() else None,
            'injections': injections,
            'below_support_steps': self.below_steps,
            'below_support_objects': dict(self.below_objects),
            'lost_objects': self.lost,
            'lost_over_support': sorted(n for n, v in self.lost.items() if v['over_support']),
            'steps_per_s': float(len(times) / times.sum()) if times.sum() > 0 else None,
            'step_time_ms': {'median': float(1e3 * np.median(times)),
                             'p90': float(1e3 * np.percentile(times, 90)),
                             'max': float(1e3 * times.max())} if times.size else None,
            'wall_s': wall,
            'by_mode': by_mode,
            'offending_states': {kind: self.states[kind] for kind in STATE_KINDS
                                 if kind in self.states},
        }


def fuzz_scene(path, steps: int, seed: int = 0, inject_rate: float = 0.02,
               keep_series: bool = False, miqp_backend: Optional[str] = None) -> dict:
    """
    Fuzz one scene for ``steps`` steps; return its figures (see the module docstring).

    Deterministic for a given seed, scene and engine.  With ``keep_series``,
    the result also has the per-step min phi [mm] and recovery flags under 'series'.
    ``miqp_backend`` replaces the scenario's MIQP backend (gurobi or scip).
    """
    start = time.perf_counter()
    run = _Run(path, seed, inject_rate, miqp_backend)
    for k in range(steps):
        run.step(k)
    summary = run.summary(steps, seed, time.perf_counter() - start)
    summary['miqp_backend'] = run.sim.scenario.settings('miqp').backend if run.scene.miqp else None
    if keep_series:
        summary['series'] = {'min_phi_mm': [1e3 * p for p in run.series['phi']],
                             'in_window': run.series['window']}
    return summary


def replay(path, state: dict, miqp_backend: Optional[str] = None):
    """Repeat one saved step on a fresh simulator; return its StepResult."""
    sim = QuasistaticSimulator(load_scenario(path, miqp_backend))
    start = sim.initial_state(np.array(state['q']), q_ref=np.array(state['q_ref']),
                              warm_start=state.get('warm_start'))
    return sim.step(start, state['commands'])


# ----- report -----------------------------------------------------------------------------
def _mm(value) -> str:
    return '-' if value is None else f'{value:.2f}'


def print_table(results: list) -> None:
    """Print one row per scene."""
    print(f"{'scene':<27} {'steps':>5} {'fail':>4} {'exc':>4} {'phi out':>8} {'phi all':>8} "
          f"{'inj':>3} {'rec':>3} {'unrec':>5} {'max rec':>7} {'below':>5} {'lost':>4} "
          f"{'steps/s':>7}")
    for r in results:
        inj = r['injections']
        print(f"{r['scene']:<27} {r['steps']:5d} {r['failed_steps']:4d} {r['exceptions']:4d} "
              f"{_mm(r['min_phi_outside_injection_mm']):>8} {_mm(r['min_phi_overall_mm']):>8} "
              f"{inj['count']:3d} {inj['recovered']:3d} {inj['unrecovered']:5d} "
              f"{inj['max_recovery_steps'] or '-':>7} {r['below_support_steps']:5d} "
              f"{len(r['lost_objects']):4d} {r['steps_per_s'] or 0:7.0f}")
    print('phi out: deepest min signed distance outside injection recovery windows [mm]; '
          'phi all: overall [mm]; below: steps with an object inside the environment')
    for r in results:
        inj = r['injections']
        notes = []
        if r['deepest_outside_injection']:
            d = r['deepest_outside_injection']
            notes.append(f"deepest {d['phi_mm']:.2f} mm at step {d['step']} "
                         f"({d['bodies'][0]} / {d['bodies'][1]})")
        worst = {m: f"{v['min_phi_mm']:.1f} ({v['steps_below_limit']}/{v['steps']})"
                 for m, v in r['by_mode'].items()
                 if v['min_phi_mm'] is not None and v['min_phi_mm'] < 1e3 * PHI_LIMIT}
        if worst:
            notes.append(f'by mode, min phi [mm] (steps below -1 mm / steps): {worst}')
        if inj['unrecovered_at_end']:
            notes.append('an injection was still recovering at the end')
        if r['failed_statuses']:
            notes.append(f"failed {r['failed_statuses']}")
        for message in list(r['failed_errors'])[:2] + list(r['exception_messages'])[:3]:
            notes.append(message[:160])
        if r['below_support_objects']:
            notes.append(f"below support {r['below_support_objects']}")
        for name, lost in r['lost_objects'].items():
            notes.append(f"lost {name} at step {lost['step']}, "
                         + ('over its support (fell through)' if lost['over_support']
                            else 'off its support (fell off)')
                         + f" (episodes {r['episodes']})")
        if notes:
            print(f"  {r['scene']}: " + '\n    '.join(notes))


def plot(results: list, path: Path) -> None:
    """Per scene, the min signed distance of every step (symlog), with -1 mm marked."""
    fig, ax = plt.subplots(figsize=(12, 0.6 * len(results) + 1.5))
    rng = np.random.default_rng(0)
    for row, r in enumerate(results):
        phi = np.array(r['series']['min_phi_mm'], dtype=float)
        window = np.array(r['series']['in_window'], dtype=bool)
        phi = np.clip(phi, -1e3, 1e4)
        y = row + rng.uniform(-0.3, 0.3, phi.size)
        ax.scatter(phi[~window], y[~window], s=3, alpha=0.4, color='tab:blue',
                   label='outside injection windows' if row == 0 else None)
        ax.scatter(phi[window], y[window], s=3, alpha=0.4, color='tab:orange',
                   label='recovering from an injection' if row == 0 else None)
    ax.axvline(1e3 * PHI_LIMIT, color='tab:red', label='-1 mm')
    ax.set_xscale('symlog', linthresh=0.1)
    ax.set_yticks(range(len(results)))
    ax.set_yticklabels([r['scene'] for r in results])
    ax.set_xlabel('min signed distance at q_next [mm] (symlog)')
    ax.set_title('fuzz: min signed distance per step')
    ax.legend(loc='upper left', bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def run_replay(json_path: Path) -> None:
    """Repeat every saved offending state of a fuzz JSON and print what the step gives."""
    data = json.loads(json_path.read_text())
    for r in data['scenes']:
        scene = Scene(r['path'], r.get('miqp_backend'))
        for kind, state in r['offending_states'].items():
            try:
                result = replay(r['path'], state, r.get('miqp_backend'))
            except Exception as err:   # noqa: B902 - the state's exception, reproduced
                print(f"{r['scene']} {kind} (step {state['step']}): {_error_text(err)}")
                continue
            phi = scene.sim.min_signed_distance(result.q_next)
            below = scene.objects_below_support(result.q_next)
            print(f"{r['scene']} {kind} (step {state['step']}): status {result.status} "
                  f"{result.diagnostics.error[:120]} min phi at q_next {1e3 * phi:.3f} mm, "
                  f"below support / lost {below}")


def run_hostile(cases: int, seed: int, path: Path) -> None:
    """Run the hostile family (hostile_fuzz.py); print its counts and findings; write JSON."""
    from hostile_fuzz import fuzz_node, fuzz_scenarios
    node_cases = max(1, cases // 10)
    scenarios = fuzz_scenarios(cases - node_cases, seed)
    print(f"{scenarios['cases']} mutated scenarios in {scenarios['seconds']:.1f} s: "
          f"{scenarios['counts']}; refusals without a fix: {scenarios['refused_without_fix']}")
    node = fuzz_node(node_cases, seed)
    print(f"{node['cases']} peer actions against the node in {node['seconds']:.1f} s: "
          f"{node['counts']}")
    for finding in scenarios['findings'] + node['findings']:
        print('  finding:', json.dumps(finding)[:400])
    write_json(path, {'machine': machine(), 'seed': seed, 'scenarios': scenarios,
                      'node': node})
    print(f'written to {path}')


def main() -> None:
    """Fuzz, print and save."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--scenes', type=Path, nargs='+', help='scenario files (default: '
                        'every config/*.yaml but sim.yaml)')
    parser.add_argument('--steps', type=int, default=2000, help='steps per QP scene')
    parser.add_argument('--miqp-steps', type=int, help='steps per MIQP scene (default '
                        'steps / 5)')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--inject-rate', type=float, default=0.02,
                        help='chance per step of an injection (outside recovery windows)')
    parser.add_argument('--quick', action='store_true', help=f'{QUICK_STEPS} steps per scene')
    parser.add_argument('--qp-only', action='store_true', help='skip the MIQP scenes')
    parser.add_argument('--miqp-backend', choices=('gurobi', 'scip'),
                        help="replace the MIQP scenes' backend")
    parser.add_argument('--series', action='store_true', help='keep the per-step min phi '
                        'in the JSON')
    parser.add_argument('--json', type=Path, default=Path('out/fuzz.json'))
    parser.add_argument('--png', type=Path, default=Path('out/fuzz.png'))
    parser.add_argument('--replay', type=Path, metavar='JSON',
                        help='repeat the offending states saved in a fuzz JSON, then exit')
    parser.add_argument('--hostile', type=int, metavar='N',
                        help='the hostile family instead (hostile_fuzz.py): N cases, 9/10 '
                             'mutated scenarios, 1/10 a peer attacking the node; writes --json')
    args = parser.parse_args()
    if args.replay:
        run_replay(args.replay)
        return
    if args.hostile:
        run_hostile(args.hostile, args.seed, args.json)
        return
    steps = QUICK_STEPS if args.quick else args.steps
    miqp_steps = args.miqp_steps or max(1, steps // 5)
    results, errors = [], []
    for path in args.scenes or default_scenes():
        try:
            miqp = load_scenario(path).formulation == 'miqp'
            if miqp and args.qp_only:
                continue
            print(f'fuzzing {Path(path).name} ({miqp_steps if miqp else steps} steps) ...',
                  flush=True)
            results.append(fuzz_scene(path, miqp_steps if miqp else steps, args.seed,
                                      args.inject_rate, keep_series=True,
                                      miqp_backend=args.miqp_backend))
        except Exception as err:  # noqa: B902 - a scene that cannot run is reported
            errors.append({'path': str(path), 'error': _error_text(err)})
            print(f'  {path}: {_error_text(err)}')
    print_table(results)
    args.png.parent.mkdir(parents=True, exist_ok=True)
    if results:
        plot(results, args.png)
    if not args.series:
        for r in results:
            r.pop('series')
    summary = {'machine': machine(),
               'command': ' '.join(sys.argv), 'seed': args.seed, 'scenes': results,
               'scene_errors': errors}
    write_json(args.json, summary, indent=1)
    print(f'wrote {args.json} and {args.png}')


if __name__ == '__main__':
    main()
