"""
The hostile family of benchmarks/fuzz.py: mutated scenarios, and a peer attacking a running node.

Scenarios.  Seeded mutations of three small scenes (the two pads, the finger
push, and the same scene built by Drake model directives, whose directive
bodies are mutated too): a leaf or a subtree replaced by a hostile value (NaN,
infinities, 1e308, 1e-300, zero, negatives, empty strings and containers, a
10,000-character string, deep nesting, devices and missing files, wrong
types), a key removed, an unknown key added.  Each case is written to a file
and run in a worker process: Scenario.from_yaml, the engine, three steps under
a command.  The worker reports each case's outcome; the parent records a
worker that dies (its exit code and signal) or hangs (killed after
CASE_TIMEOUT s), and starts a new one for the next case.  Outcomes:

* ran: loaded and stepped, every q finite, every status one the engine reports;
* refused: a ScenarioError or CommandError (the CLI's exit 2), which must say
  where (a key path, a file or an argument) and, with "Fix", how to mend it;
* exception: any other exception (a traceback at the CLI);
* wrong: stepped to a non-finite q or an unknown status;
* died, hung: the worker process.

The node.  The console script runs in a process of its own; a peer sends it
seeded parameter sets (any of its parameters, values of any type and size
through the SetParameters service) and command messages (extreme, non-finite,
wrong sizes, unknown and repeated names).  After each case the peer sets
real_time_rate back to 0 and waits until /clock, /joint_states and /tf have
each delivered a new message and ~/status counts more steps.  Outcomes: alive,
or dead (the process ended), or stalled (no new message in NODE_TIMEOUT s).

    .venv/bin/python benchmarks/fuzz.py --hostile 1000 [--seed 0] [--json out/hostile.json]
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
import random
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any, Optional

import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
CASE_TIMEOUT = 120.0         # [s] a case taking longer than this is a hang (worker killed)
NODE_TIMEOUT = 60.0          # [s] a node that publishes nothing new for this long has stalled
STEPS = 3                    # steps per scenario that loads
KNOWN_STATUSES = {"optimal", "infeasible", "numerical trouble", "cycling", "time limit",
                  "iteration limit", "error", "solver limit", "unbounded"}

HOSTILE_VALUES = (
    math.nan, math.inf, -math.inf, 1e308, -1e308, 1.79e308, 1e-300, -1e-300, 0, 0.0, -1,
    -0.5, 1e20, 2 ** 63, -(2 ** 63), True, False, None, "", " ", "x" * 10000, "nan", "1e999",
    [], {}, [[[[[[]]]]]], [math.nan] * 3, [1e308] * 3, [0, 0, 0], [0, 0, 0, 0],
    {"a": None}, "/dev/zero", "/dev/null", "/proc/self/status", "/nonexistent/model.urdf",
    "package://nowhere/model.urdf", "package://quasistatic_drake/urdf/",
    "package://quasistatic_drake/../../../etc/passwd", "file:///etc/passwd", "::", "world",
    "box::box_link", "!Rpy", {"deg": [90, 0, 0]})

DIRECTIVES_SCENE = {
    "time_step": 0.1,
    "directives": [
        {"add_model": {"name": "box", "file": "package://quasistatic_drake/urdf/box.urdf",
                       "default_free_body_pose": {"box_link": {"translation": [0, 0, 0.05]}}}},
        {"add_model": {"name": "table",
                       "file": "package://quasistatic_drake/urdf/table.urdf"}},
        {"add_weld": {"parent": "world", "child": "table::table_top",
                      "X_PC": {"translation": [0, 0, -0.05]}}},
        {"add_frame": {"name": "marker", "X_PF": {"base_frame": "world",
                                                  "translation": [0.1, 0, 0]}}},
    ],
    "robots": [{"name": "pads", "file": "package://quasistatic_drake/urdf/two_pads.urdf",
                "stiffness": [1000, 1000, 1000], "initial_positions": [0.05, -0.07, 0.07]}],
    "objects": [{"name": "box"}],
    "environment": [{"name": "table"}],
}


# ----- scenarios: the cases ----------------------------------------------------------
def base_scenes() -> dict[str, Any]:
    """Return the scenes mutated: {name: YAML tree}."""
    scenes = {name: yaml.safe_load((REPO_ROOT / "config" / f"{name}.yaml").read_text())
              for name in ("two_pads_lift", "finger_push")}
    scenes["directives"] = DIRECTIVES_SCENE
    return scenes


def scenario_cases(count: int, seed: int) -> list[dict]:
    """Return ``count`` seeded mutated scenarios: {index, scene, mutation, yaml}."""
    rng = random.Random(seed)
    scenes = base_scenes()
    names = sorted(scenes)
    cases = []
    for index in range(count):
        scene = names[index % len(names)]
        tree = json.loads(json.dumps(scenes[scene]))
        mutations = [_mutate(tree, rng) for _ in range(rng.choice((1, 1, 1, 2, 3)))]
        cases.append({"index": index, "scene": scene, "mutation": "; ".join(mutations),
                      "yaml": _dump(tree)})
    return cases


HOSTILE_NUMBERS = (math.nan, math.inf, -math.inf, 1e308, -1e308, 1e-300, -1e-300, 0, 0.0,
                   -1, -0.5, 1e20, -1e20, 2 ** 63, 1e6, -1e6, 1e-9)
HOSTILE_TEXTS = ("", " ", "x" * 10000, "/dev/zero", "/dev/null", "/proc/self/status",
                 "/nonexistent/model.urdf", "package://nowhere/model.urdf",
                 "package://quasistatic_drake/urdf/",
                 "package://quasistatic_drake/../../../etc/passwd", "::", "world", "a::b::c",
                 "box::box_link", "table::table_top", "pads", "box", "\x00", "..", "1e3")


def _mutate(tree: Any, rng: random.Random) -> str:
    """
    Apply one seeded mutation to ``tree`` in place; return what it did.

    Mostly a value of the same kind made hostile (a number becomes NaN,
    1e308, 1e-300..., a string a device, a missing file, a wrong name; a
    list grows, shrinks or empties), so that cases get past the schema into
    the model and the step; otherwise any hostile value, a removed key or an
    unknown one.
    """
    paths = list(_paths(tree, ()))[1:]
    path = rng.choice(paths)
    parent, current = _at(tree, path[:-1]), _at(tree, path)
    kind = rng.choices(("same kind", "any", "remove", "unknown"), (0.6, 0.2, 0.1, 0.1))[0]
    if kind == "remove" and isinstance(parent, dict):
        del parent[path[-1]]
        return f"removed {_name(path)}"
    if kind == "unknown" and isinstance(current, dict):
        current["hostile_key"] = rng.choice(HOSTILE_VALUES)
        return f"unknown key under {_name(path)}"
    value = _same_kind(current, rng) if kind == "same kind" else rng.choice(HOSTILE_VALUES)
    parent[path[-1]] = value
    return f"{_name(path)} = {_short(value)}"


def _same_kind(current: Any, rng: random.Random) -> Any:
    """Return a hostile value of the kind of ``current``."""
    if isinstance(current, bool):
        return rng.choice((not current, 0, 1, "yes", None))
    if isinstance(current, (int, float)):
        return rng.choice(HOSTILE_NUMBERS)
    if isinstance(current, str):
        return rng.choice(HOSTILE_TEXTS)
    if isinstance(current, list):
        change = rng.choice(("empty", "longer", "shorter", "numbers"))
        if change == "empty":
            return []
        if change == "longer":
            return current + [rng.choice(current) if current else 0] * rng.choice((1, 5, 100))
        if change == "shorter":
            return current[:-1]
        return [rng.choice(HOSTILE_NUMBERS) for _ in current]
    return rng.choice(HOSTILE_VALUES)


def _paths(tree: Any, prefix: tuple):
    """Yield the path of every node of ``tree`` (mapping keys and list indices)."""
    yield prefix
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(tree, list):
        for i, value in enumerate(tree):
            yield from _paths(value, (*prefix, i))


def _at(tree: Any, path: tuple) -> Any:
    for key in path:
        tree = tree[key]
    return tree


def _name(path: tuple) -> str:
    return "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path).lstrip(".") \
        or "(top)"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _dump(tree: Any) -> str:
    """YAML with NaN and infinities as YAML writes them (.nan, .inf)."""
    return yaml.safe_dump(tree, sort_keys=False, width=1000)


# ----- scenarios: the worker ---------------------------------------------------------
def run_case(text: str, workdir: Path) -> dict:
    """Run one scenario case in this process; return its outcome."""
    import numpy as np
    from quasistatic_drake import CommandError, QuasistaticSimulator, Scenario, ScenarioError
    path = workdir / "case.yaml"
    path.write_text(text)
    try:
        scenario = Scenario.from_yaml(path)
        sim = QuasistaticSimulator(scenario)
        state = sim.initial_state()
        command = {r.name: np.full(len(r.joint_names), 0.05) for r in sim.model.robots}
        for _ in range(STEPS):
            result = sim.step(state, command)
            if result.status not in KNOWN_STATUSES or not np.all(np.isfinite(
                    result.state_next.q)):
                return {"outcome": "wrong", "detail": f"status {result.status!r}, q "
                                                      f"{np.asarray(result.state_next.q)}"}
            state = result.state_next
        return {"outcome": "ran"}
    except (ScenarioError, CommandError) as err:
        text = str(err)
        return {"outcome": "refused", "error": type(err).__name__, "message": text,
                "fix": any(word in text for word in ("Fix", "expected", "Allowed", "Available",
                                                     "must be", "required"))}
    except Exception as err:   # noqa: B902 - every other exception is a finding
        return {"outcome": "exception", "error": type(err).__name__, "message": str(err),
                "traceback": traceback.format_exc(limit=6)}


def worker_main() -> None:
    """Read cases (JSON lines) on stdin; write one outcome (JSON line) per case on stdout."""
    out = os.fdopen(os.dup(1), "w")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)      # library prints go nowhere
    with tempfile.TemporaryDirectory() as tmp:
        for line in sys.stdin:
            case = json.loads(line)
            outcome = run_case(case["yaml"], Path(tmp))
            out.write(json.dumps({"index": case["index"], **outcome}) + "\n")
            out.flush()


class _Worker:
    """A worker process running scenario cases one at a time (worker_main)."""

    def __init__(self):
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--worker"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=REPO_ROOT)

    def run(self, case: dict) -> dict:
        """Return the case's outcome, or died/hung (the worker is then finished)."""
        self.process.stdin.write(json.dumps(case) + "\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], CASE_TIMEOUT)
        line = self.process.stdout.readline() if ready else ""
        if line:
            return json.loads(line)
        if not ready:
            self.process.kill()
        code = self.process.wait()
        if not ready:
            return {"index": case["index"], "outcome": "hung", "seconds": CASE_TIMEOUT}
        return {"index": case["index"], "outcome": "died", "exit_code": code,
                "signal": signal.Signals(-code).name if code < 0 else None}

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait(timeout=60)


def fuzz_scenarios(count: int, seed: int) -> dict:
    """Run ``count`` mutated scenarios in worker processes; return the outcomes and counts."""
    cases = scenario_cases(count, seed)
    worker, outcomes = _Worker(), []
    start = time.monotonic()
    for case in cases:
        outcome = worker.run(case)
        outcome.update(scene=case["scene"], mutation=case["mutation"])
        outcomes.append(outcome)
        if outcome["outcome"] in ("died", "hung"):
            outcome["yaml"] = case["yaml"]
            worker = _Worker()
    worker.close()
    return _summary(outcomes, time.monotonic() - start)


def _summary(outcomes: list[dict], seconds: float) -> dict:
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome["outcome"]] = counts.get(outcome["outcome"], 0) + 1
    refused = [o for o in outcomes if o["outcome"] == "refused"]
    return {"cases": len(outcomes), "seconds": seconds, "counts": counts,
            "refused_without_fix": sum(not o["fix"] for o in refused),
            "findings": [o for o in outcomes
                         if o["outcome"] in ("exception", "wrong", "died", "hung")],
            "refusals_without_fix": [o for o in refused if not o["fix"]][:20]}


if __name__ == "__main__" and sys.argv[1:] == ["--worker"]:
    worker_main()


# ----- the node ------------------------------------------------------------------------
NODE_PARAMETERS = ("scenario", "real_time_rate", "publish_rate", "clock_rate", "command_timeout",
                   "meshcat", "meshcat_port", "meshcat_host", "frame_prefix", "publish_robot_tf",
                   "no_such_parameter", "use_sim_time")


def node_cases(count: int, seed: int) -> list[dict]:
    """Return ``count`` seeded peer actions: parameter sets and command messages, alternating."""
    rng = random.Random(seed)
    cases = []
    for index in range(count):
        if index % 2 == 0:
            names = rng.sample(NODE_PARAMETERS, rng.choice((1, 1, 2, 3)))
            cases.append({"index": index, "kind": "parameters",
                          "values": {name: _parameter_value(rng) for name in names}})
        else:
            cases.append({"index": index, "kind": "command", **_command(rng)})
    return cases


def _parameter_value(rng: random.Random) -> tuple[str, Any]:
    """Return (ROS parameter type, value): any type a peer can send."""
    kind = rng.choice(("double", "double", "double", "integer", "string", "bool",
                       "double_array", "string_array", "integer_array"))
    if kind == "double":
        return kind, float(rng.choice(HOSTILE_NUMBERS + (1e-11, 1e-10, 1e-6, 0.5, 2.0, 1e6)))
    if kind == "integer":
        return kind, rng.choice((0, -1, 1, 2 ** 63 - 1, -(2 ** 63), 65536, 7000))
    if kind == "string":
        return kind, rng.choice(HOSTILE_TEXTS + ("localhost", "*", "0.0.0.0"))
    if kind == "bool":
        return kind, rng.choice((True, False))
    if kind == "double_array":
        return kind, [float(rng.choice(HOSTILE_NUMBERS)) for _ in range(rng.randrange(0, 4))]
    if kind == "integer_array":
        return kind, [rng.randrange(-5, 5) for _ in range(rng.randrange(0, 4))]
    return kind, [rng.choice(HOSTILE_TEXTS) for _ in range(rng.randrange(0, 3))]


def _command(rng: random.Random) -> dict:
    """Return a command message: an array or named velocities, hostile in values or shape."""
    joints = ["lift_z", "left", "right"]
    size = rng.choice((3, 3, 3, 0, 1, 2, 4, 100))
    values = [float(rng.choice(HOSTILE_NUMBERS + (0.1, -0.1, 1.0))) for _ in range(size)]
    if rng.random() < 0.5:
        return {"topic": "velocity_commands", "data": values}
    names = [rng.choice(joints + ["nope", "", "lift_z"]) for _ in range(rng.choice((1, 2, 3, 4)))]
    return {"topic": "joint_commands", "names": names, "data": values[:len(names)]
            if rng.random() < 0.7 else values}


def fuzz_node(count: int, seed: int) -> dict:
    """Attack a running node with ``count`` peer actions; return the outcomes and counts."""
    cases = node_cases(count, seed)
    outcomes, start = [], time.monotonic()
    with HostilePeer(REPO_ROOT / "config" / "two_pads_lift.yaml", NODE_TIMEOUT) as peer:
        for case in cases:
            if case["kind"] == "parameters":
                answer = peer.set_parameters(case["values"])
            else:
                answer = peer.send_command(case)
            outcome = peer.check_alive()
            outcomes.append({"index": case["index"], "kind": case["kind"], "answer": answer,
                             **outcome, "case": _short(case)})
            if outcome["outcome"] != "alive":
                break
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome["outcome"]] = counts.get(outcome["outcome"], 0) + 1
    return {"cases": len(outcomes), "seconds": time.monotonic() - start, "counts": counts,
            "findings": [o for o in outcomes if o["outcome"] != "alive"]}


class HostilePeer:
    """
    The node (the console script, a process of its own) and a peer that attacks it.

    The peer sets parameters through the node's SetParameters service and
    publishes on its command topics, as any ROS peer can.  ``check_alive``
    sets real_time_rate back to 0 and waits for a new /clock, /joint_states
    and /tf message and for ~/status to count more steps.
    """

    NS = "/quasistatic_sim"

    def __init__(self, scenario: Path, timeout: float):
        """Start the node on ``scenario`` (as fast as it can) in this ROS domain."""
        self.scenario, self.timeout = scenario, timeout

    def __enter__(self) -> "HostilePeer":
        import threading

        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        os.environ.setdefault("ROS_DOMAIN_ID", str(1 + os.getpid() % 100))
        os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
        node_script = Path(sys.executable).parent / "quasistatic-drake-node"
        self.process = subprocess.Popen(
            [str(node_script), "--ros-args", "-p", f"scenario:={self.scenario}",
             "-p", "meshcat:=false", "-p", "real_time_rate:=0.0"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.peer = self._make_peer()
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.peer)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()
        self._wait(lambda: self.seen["status"] > 0 or self.process.poll() is not None,
                   "the node's first ~/status", 600.0)
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10.0)
        self.executor.shutdown(timeout_sec=2.0)
        self.peer.destroy_node()
        self.context.try_shutdown()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            self.process.communicate(timeout=60)

    def _make_peer(self):
        from rcl_interfaces.srv import SetParameters
        from rclpy.node import Node
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from rosgraph_msgs.msg import Clock
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray, String
        from tf2_msgs.msg import TFMessage
        peer = Node("hostile_peer", context=self.context)
        self.seen = {"clock": 0, "joint_states": 0, "tf": 0, "status": 0}
        self.steps = -1

        def count(key):
            def callback(msg):
                self.seen[key] += 1
                if key == "status":
                    self.steps = json.loads(msg.data).get("steps", -1)
            return callback
        peer.create_subscription(Clock, "/clock", count("clock"),
                                 QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT))
        peer.create_subscription(JointState, "/joint_states", count("joint_states"), 10)
        peer.create_subscription(TFMessage, "/tf", count("tf"), 10)
        peer.create_subscription(String, self.NS + "/status", count("status"), 10)
        self.array_pub = peer.create_publisher(Float64MultiArray, self.NS + "/velocity_commands",
                                               10)
        self.named_pub = peer.create_publisher(JointState, self.NS + "/joint_commands", 10)
        self.parameters = peer.create_client(SetParameters, self.NS + "/set_parameters")
        return peer

    def _spin(self) -> None:
        while not self._stop.is_set() and self.context.ok():
            self.executor.spin_once(timeout_sec=0.05)

    def _wait(self, predicate, what: str, timeout: Optional[float] = None) -> bool:
        deadline = time.monotonic() + (timeout or self.timeout)
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.005)
        return False

    def set_parameters(self, values: dict) -> Any:
        """Send one SetParameters request; return each result's (successful, reason)."""
        from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
        from rcl_interfaces.srv import SetParameters
        request = SetParameters.Request()
        for name, (kind, value) in values.items():
            v = ParameterValue(type=getattr(ParameterType, f"PARAMETER_{kind.upper()}"))
            setattr(v, f"{kind}_value", value)
            request.parameters.append(Parameter(name=name, value=v))
        if not self.parameters.wait_for_service(timeout_sec=self.timeout):
            return "no service"
        future = self.parameters.call_async(request)
        if not self._wait(future.done, "the SetParameters reply"):
            return "no reply"
        return [(r.successful, r.reason[:120]) for r in future.result().results]

    def send_command(self, case: dict) -> str:
        """Publish one command message."""
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray
        if case["topic"] == "velocity_commands":
            self.array_pub.publish(Float64MultiArray(data=case["data"]))
        else:
            self.named_pub.publish(JointState(name=case["names"], velocity=case["data"]))
        return "published"

    def check_alive(self) -> dict:
        """Set real_time_rate 0; return alive, or dead or stalled with what was missing."""
        if self.process.poll() is not None:
            return self._dead()
        answer = self.set_parameters({"real_time_rate": ("double", 0.0)})
        before, steps = dict(self.seen), self.steps
        missing = [key for key in self.seen if not self._wait(
            lambda k=key: self.seen[k] > before[k] or self.process.poll() is not None, key)]
        if not self._wait(lambda: self.steps > steps or self.process.poll() is not None,
                          "steps"):
            missing.append("steps")
        if self.process.poll() is not None:
            return self._dead()
        if missing or answer != [(True, "")]:
            return {"outcome": "stalled", "missing": missing, "restore": answer}
        return {"outcome": "alive"}

    def _dead(self) -> dict:
        code = self.process.wait()
        return {"outcome": "dead", "exit_code": code,
                "signal": signal.Signals(-code).name if code < 0 else None,
                "stderr": self.process.stderr.read()[-2000:]}
