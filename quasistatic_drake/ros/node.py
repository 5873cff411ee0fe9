"""
The ``quasistatic_sim`` rclpy node: the simulator behind a ROS 2 interface.

It owns a :class:`~quasistatic_drake.ros.session.SimSession` (QuasistaticPlant,
optional Meshcat, a pydrake Simulator) and drives it from timers on the
steady clock, so rclpy keeps spinning between steps:

* the step timer takes the steps :class:`~quasistatic_drake.ros.pacing.Pacer`
  says are due at ``real_time_rate`` (0: as many as fit in a short time
  budget per callback);
* the publish timer (``publish_rate``) sends /joint_states and /tf when the
  simulation moved since the last time, and ~/status always;
* the clock timer (``clock_rate``) sends /clock.

Velocity commands arrive on ``~/velocity_commands`` (Float64MultiArray, one
per joint in /joint_states order) and ``~/joint_commands`` (JointState, by
name, velocity field).  Bad messages are refused whole with a throttled
warning; the last good command stays until ``command_timeout``.  Services
``~/reset``, ``~/pause`` and ``~/step``.  The README's "ROS 2 bridge" section
has the interface table.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from typing import Optional

import rclpy
from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rclpy.clock import Clock, ClockType
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import SetBool, Trigger
from tf2_msgs.msg import TFMessage

from quasistatic_drake.quasistatic_plant import StepOutcome
from quasistatic_drake.ros import conversions
from quasistatic_drake.ros.commands import CommandBuffer, Rejection
from quasistatic_drake.ros.description import robots_rooted_at_world
from quasistatic_drake.ros.frames import frame_layout, FrameNameClash
from quasistatic_drake.ros.pacing import Pacer
from quasistatic_drake.ros.params import (DESCRIPTIONS, DYNAMIC, NODE_NAME, node_params,
                                          NodeParams, ParameterError, PARAMETERS,
                                          scenario_path)
from quasistatic_drake.meshcat_server import make_meshcat
from quasistatic_drake.ros.session import SimSession
from quasistatic_drake.scenario import Scenario, ScenarioError

STEP_BUDGET = 0.01        # [s] of stepping per step-timer callback before rclpy spins again
RTF_WINDOW = 1.0          # [s] of wall time over which ~/status measures the real-time factor
WARN_PERIOD = 1.0         # [s] between two warnings of one kind

TF_QOS = QoSProfile(depth=100)
TF_STATIC_QOS = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                           reliability=ReliabilityPolicy.RELIABLE)
CLOCK_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
DEFAULT_QOS = QoSProfile(depth=10)


class SetupError(RuntimeError):
    """The node cannot start: a bad parameter or scenario; the message says how to fix it."""


class QuasistaticSimNode(Node):
    """The simulator node (module docstring).  Raises SetupError when it cannot start."""

    def __init__(self, **node_kwargs):
        """Declare the parameters, load the scenario, and start publishing."""
        super().__init__(NODE_NAME, **node_kwargs)
        self.params = self._declare_parameters()
        scenario = self._load_scenario()
        self._meshcat = self._open_meshcat()
        try:
            self.session = SimSession(scenario, self._meshcat)
        except ScenarioError as err:    # found when the models are built (QuasistaticModel)
            raise self._scenario_error(
                err, " Fix: correct that entry of the scenario file (README: 'Scenario "
                "files').") from None
        rooted = (set() if self.params.publish_robot_tf
                  else robots_rooted_at_world(self.session.plant.scenario))
        try:
            self.frames = frame_layout(self.session.model, self.params.frame_prefix,
                                       self.params.publish_robot_tf, rooted,
                                       self.params.model_prefix)
        except FrameNameClash as err:
            raise SetupError(f"parameter 'model_prefix' = false: {err}") from None
        self.commands = CommandBuffer(self.session.joints.names)
        self._paused = False
        self.failed_steps = 0
        self.error: Optional[str] = None
        self._last_warn: dict[str, float] = {}
        self._stale_reported: set[str] = set()
        self._published_time: Optional[float] = None
        self._rtf_mark = (time.monotonic(), self.session.time)
        self._rtf = 0.0
        self.pacer = Pacer(self.session.time_step, self.params.real_time_rate)
        self.pacer.restart(time.monotonic(), self.session.steps)
        self._create_interface()
        self._publish_static_tf()
        self._log_start()

    # ----- set-up ------------------------------------------------------------------
    def _declare_parameters(self) -> NodeParams:
        for name, default in PARAMETERS.items():
            self.declare_parameter(name, default, ParameterDescriptor(
                description=DESCRIPTIONS[name], dynamic_typing=True,
                read_only=name not in DYNAMIC))
        values = {name: self.get_parameter(name).value for name in PARAMETERS}
        try:
            params = node_params(values)
        except ParameterError as err:
            raise SetupError(str(err)) from None
        self.add_on_set_parameters_callback(self._on_set_parameters)
        return params

    def _load_scenario(self) -> Scenario:
        try:
            return Scenario.from_yaml(scenario_path(self.params.scenario))
        except (ValueError, OSError, RuntimeError) as err:
            raise self._scenario_error(
                err, " Fix: pass a valid scenario YAML with --ros-args -p "
                "scenario:=/path/to/scenario.yaml (README: 'Scenario files').") from None

    def _scenario_error(self, err: Exception, fix: str) -> SetupError:
        """Return a SetupError naming the scenario parameter, with ``fix`` unless err has one."""
        fix = "" if "Fix:" in str(err) else fix
        return SetupError(f"parameter 'scenario' = '{self.params.scenario}': {err}{fix}")

    def _open_meshcat(self):
        if not self.params.meshcat:
            return None
        try:
            return make_meshcat(self.params.meshcat_port, self.params.meshcat_host)
        except RuntimeError as err:
            raise SetupError(f"parameter 'meshcat_port' = {self.params.meshcat_port}: Meshcat "
                             f"could not start: {err} Fix: pick a free port, 0 for the first "
                             "free one from 7000, or -p meshcat:=false.") from None

    def _create_interface(self) -> None:
        self.joint_state_pub = self.create_publisher(JointState, "joint_states", DEFAULT_QOS)
        self.tf_pub = self.create_publisher(TFMessage, "/tf", TF_QOS)
        self.tf_static_pub = self.create_publisher(TFMessage, "/tf_static", TF_STATIC_QOS)
        self.clock_pub = self.create_publisher(ClockMsg, "/clock", CLOCK_QOS)
        self.status_pub = self.create_publisher(String, "~/status", DEFAULT_QOS)
        self.create_subscription(Float64MultiArray, "~/velocity_commands",
                                 self._on_velocity_commands, DEFAULT_QOS)
        self.create_subscription(JointState, "~/joint_commands", self._on_joint_commands,
                                 DEFAULT_QOS)
        self.create_service(Trigger, "~/reset", self._on_reset)
        self.create_service(SetBool, "~/pause", self._on_pause)
        self.create_service(Trigger, "~/step", self._on_step)
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self._step_timer = self.create_timer(self.pacer.period(), self._on_step_timer,
                                             clock=steady)
        self._publish_timers = (
            self.create_timer(1.0 / self.params.publish_rate, self._on_publish_timer,
                              clock=steady),
            self.create_timer(1.0 / self.params.clock_rate, self._on_clock_timer, clock=steady))

    def _log_start(self) -> None:
        scenario = self.session.plant.scenario
        self.get_logger().info(
            f"scenario {scenario.source}: h = {scenario.time_step} s, {scenario.formulation}; "
            f"joints {list(self.session.joints.names)}; {len(self.frames.moving)} frames on "
            f"/tf, {len(self.frames.static)} on /tf_static; real_time_rate "
            f"{self.params.real_time_rate or 'unlimited'}")
        if self._meshcat is not None:
            self.get_logger().info(f"Meshcat: open {self._meshcat.web_url()} in a browser")

    # ----- stepping ----------------------------------------------------------------
    @property
    def paused(self) -> bool:
        """Return whether the step timer is stopped (~/pause, or after an error)."""
        return self._paused

    @paused.setter
    def paused(self, value: bool) -> None:
        """
        Stop or restart the step timer.

        A paused node's step timer is cancelled: at real_time_rate 0 its period
        is 0, and a running zero-period timer that does nothing keeps the
        executor busy, so every service call waited about 1 s.
        """
        self._paused = bool(value)
        timer = getattr(self, "_step_timer", None)
        if timer is not None and self._paused:
            timer.cancel()
        elif timer is not None:
            timer.reset()

    def _on_step_timer(self) -> None:
        if self.paused:
            return
        now = time.monotonic()
        due = self.pacer.due(now, self.session.steps)
        if due.fell_behind:
            self._warn("slow", f"the simulation runs slower than real_time_rate = "
                       f"{self.pacer.rate}; continuing as fast as it can")
        deadline = now + STEP_BUDGET
        for _ in range(due.steps):
            if not self.step_once() or time.monotonic() > deadline or self._publishing_due():
                break

    def _publishing_due(self) -> bool:
        """Return whether a publish or clock timer is ready: they go before more steps."""
        return any(timer.is_ready() for timer in self._publish_timers)

    def step_once(self) -> bool:
        """
        Take one step under the current commands; return whether the node may go on.

        An exception of any type but KeyboardInterrupt (Drake's internal
        failures arrive as SystemExit) leaves the state as before the step
        (SimSession.step), pauses the node, sets ``error`` and logs how to
        resume; it returns False.  So does a step the engine reports as
        "error" (it caught a failure inside; q was kept); a solver failure
        is counted and logged, and stepping goes on.
        """
        now = time.monotonic()
        timeout = self.params.command_timeout
        self._report_stale(now, timeout)
        try:
            outcome = self.session.step(self.commands.current(now, timeout))
        except (Exception, SystemExit) as err:   # noqa: B902 - the node must keep running
            self._pause_on_error(f"{type(err).__name__}: {err}", "the step raised")
            return False
        if outcome.status == "error":     # the engine caught a failure inside the step
            self.failed_steps += 1
            self._pause_on_error(outcome.error, "the step failed inside the engine")
            return False
        if not outcome.success:
            self.failed_steps += 1
            self._warn("solver", f"step {outcome.steps} at t = {outcome.time:.3f} s: the "
                       f"solver reported '{outcome.status}'; q was kept (the last valid "
                       f"configuration). {self.failed_steps} failed step(s) so far.")
        return True

    def _pause_on_error(self, error: str, what: str) -> None:
        """Record ``error``, pause, and log it with how to resume."""
        self.error = error
        self.paused = True
        self.get_logger().error(
            f"step at t = {self.session.time:.3f} s: {what}: {error}. The state is kept as "
            "before the step and the simulation is paused: fix the cause, then call ~/reset "
            "or ~/pause with data: false.")

    def _report_stale(self, now: float, timeout: float) -> None:
        stale = set(self.commands.stale(now, timeout)) - self._stale_reported
        if stale:
            self.get_logger().warning(
                f"no command for joint(s) {sorted(stale)} in command_timeout = {timeout} s: "
                "holding them at zero velocity")
            self._stale_reported |= stale

    # ----- subscriptions -----------------------------------------------------------
    def _on_velocity_commands(self, msg: Float64MultiArray) -> None:
        self._accepted(self.commands.set_array(msg.data, time.monotonic()), "velocity_commands")

    def _on_joint_commands(self, msg: JointState) -> None:
        self._accepted(self.commands.set_named(msg.name, msg.velocity, time.monotonic()),
                       "joint_commands")

    def _accepted(self, rejection: Optional[Rejection], topic: str) -> None:
        if rejection is None:
            self._stale_reported.clear()
            return
        self._warn(f"{topic}:{rejection.kind}", f"ignored a message on ~/{topic}: "
                   f"{rejection.message}. The last good command is kept.")

    # ----- services ----------------------------------------------------------------
    def _on_reset(self, request: Trigger.Request, response: Trigger.Response):
        self.session.reset()
        self.commands.clear()
        self.failed_steps, self.error = 0, None
        self._published_time = None            # publish the reset state at the next tick
        self.pacer.restart(time.monotonic(), 0)
        self._rtf_mark, self._rtf = (time.monotonic(), 0.0), 0.0
        response.success = True
        response.message = ("reset: t = 0, the scenario's initial configuration, zero "
                            f"commands; {'paused' if self.paused else 'running'}")
        self.get_logger().info(response.message)
        return response

    def _on_pause(self, request: SetBool.Request, response: SetBool.Response):
        self.paused = bool(request.data)
        if not self.paused:
            self.error = None
            self.pacer.restart(time.monotonic(), self.session.steps)
        response.success = True
        response.message = f"{'paused' if self.paused else 'running'} at t = " \
                           f"{self.session.time:.3f} s"
        return response

    def _on_step(self, request: Trigger.Request, response: Trigger.Response):
        if not self.paused:
            response.success = False
            response.message = ("~/step takes one step only while paused. Fix: call ~/pause "
                                "with data: true first.")
            return response
        went_on = self.step_once()
        outcome = self.session.outcome()
        response.success = went_on and outcome.success
        response.message = json.dumps({"time": self.session.time, "steps": outcome.steps,
                                       "status": outcome.status if went_on else self.error})
        return response

    def _on_set_parameters(self, parameters) -> SetParametersResult:
        changes = {p.name: p.value for p in parameters if p.name in DYNAMIC}
        try:
            checked = node_params({**{k: getattr(self.params, k) for k in PARAMETERS},
                                   **changes})
        except ParameterError as err:
            return SetParametersResult(successful=False, reason=str(err))
        if "real_time_rate" in changes and hasattr(self, "pacer"):
            self.pacer.restart(time.monotonic(), self.session.steps, checked.real_time_rate)
            self._step_timer.timer_period_ns = int(self.pacer.period() * 1e9)
            if not self.paused:     # the next call was due after the old period: count anew
                self._step_timer.reset()
        self.params = checked
        return SetParametersResult(successful=True)

    # ----- publishing --------------------------------------------------------------
    def _publish_static_tf(self) -> None:
        poses = self.session.body_poses()
        self.tf_static_pub.publish(conversions.tf_msg(self.frames.static, poses,
                                                      self.session.time))

    def _on_publish_timer(self) -> None:
        t = self.session.time
        if t != self._published_time:
            self._published_time = t
            self.joint_state_pub.publish(conversions.joint_state_msg(
                self.session.joints.state_names, self.session.joint_sample()))
            if self.frames.moving:
                self.tf_pub.publish(conversions.tf_msg(self.frames.moving,
                                                       self.session.body_poses(), t))
        self.status_pub.publish(conversions.status_msg(self.status()))

    def _on_clock_timer(self) -> None:
        self.clock_pub.publish(conversions.clock_msg(self.session.time))

    def status(self) -> dict:
        """Return the ~/status fields now (conversions.status_dict, plus ``error``)."""
        outcome: StepOutcome = self.session.outcome()
        wall, t = time.monotonic(), self.session.time
        mark_wall, mark_t = self._rtf_mark
        if wall - mark_wall >= RTF_WINDOW:
            self._rtf = (t - mark_t) / (wall - mark_wall)
            self._rtf_mark = (wall, t)
        fields = conversions.status_dict(outcome, t, self.paused, self.commands.accepted,
                                         self.commands.rejected, self.failed_steps, self._rtf)
        fields["error"] = self.error
        return fields

    def _warn(self, kind: str, text: str) -> None:
        """Log a warning, at most once per WARN_PERIOD for each kind."""
        now = time.monotonic()
        if now - self._last_warn.get(kind, -float("inf")) >= WARN_PERIOD:
            self._last_warn[kind] = now
            self.get_logger().warning(text)

    def destroy_node(self) -> None:
        """Destroy the node and stop Meshcat's server."""
        super().destroy_node()
        self._meshcat = None


def main(args=None) -> int:
    """
    Run the node until SIGINT, SIGTERM or shutdown; return the exit code (2: cannot start).

    The node handles SIGINT and SIGTERM itself: a signal sets a flag that
    the spin loop reads between two callbacks (at most SPIN_TIMEOUT apart),
    and the node exits 0, however it was started (a shell's background job
    ignores SIGINT).  rclpy's own handlers shut the context down while a
    timer could still publish, which raised RCLError (exit 1).
    """
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    node = None
    try:
        rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
        node = QuasistaticSimNode()
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        while not stop.is_set() and rclpy.ok():
            executor.spin_once(timeout_sec=SPIN_TIMEOUT)
    except SetupError as err:
        print(f"[{NODE_NAME}] error: {err}", file=sys.stderr, flush=True)
        return 2
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    return 0


# [s] the longest the spin waits for a callback before it looks for a signal again
SPIN_TIMEOUT = 0.25


if __name__ == "__main__":
    sys.exit(main())
