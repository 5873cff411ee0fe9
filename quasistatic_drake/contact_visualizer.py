"""
Contact forces in Meshcat: an arrow per contact, drawn from a QuasistaticPlant's contact results.

Drake's ``ContactVisualizer`` draws a MultibodyPlant's ``ContactResults``.
pydrake (1.51) cannot build one with contacts in it: ``ContactResults`` has
only its empty constructor in Python, and no method adds a
``PointPairContactInfo``.  So the plant's ``contact_results`` port carries
its own contacts (``simulator.Contact``: bodies, point, normal, phi, force),
and :class:`ContactForceVisualizer` draws them the way ContactVisualizer
draws point contacts: at every contact whose force is at least
``force_threshold``, an arrow from the contact point along the force on
body_b, ``newtons_per_meter`` long per newton, in one Meshcat object of line
segments under ``prefix`` (hidden when there is no force to draw).

Wire it with :meth:`ContactForceVisualizer.AddToBuilder`, like Drake's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from pydrake.common.value import AbstractValue
from pydrake.geometry import Meshcat, Rgba
from pydrake.systems.framework import Context, DiagramBuilder, LeafSystem, OutputPort

HEAD_FRACTION = 0.25      # the arrowhead's length, as a fraction of the arrow's
HEAD_HALF_ANGLE = 0.45    # [rad] between the shaft and each side of the head


@dataclass(frozen=True)
class ContactForceVisualizerParams:
    """How contact forces are drawn (the names of Drake's ContactVisualizerParams)."""

    publish_period: float = 1.0 / 32.0     # [s]
    color: Rgba = field(default_factory=lambda: Rgba(0.0, 1.0, 0.0, 1.0))
    prefix: str = "contact_forces"
    delete_on_initialization_event: bool = True
    force_threshold: float = 0.01          # [N] smaller forces are not drawn
    newtons_per_meter: float = 10.0        # [N/m] an arrow is |f| / this long
    line_width: float = 3.0                # [px] (WebGL may draw 1 px whatever is asked)


def force_arrow_segments(points_W: np.ndarray, forces_W: np.ndarray,
                         params: ContactForceVisualizerParams) -> tuple[np.ndarray, np.ndarray]:
    """
    Return the line segments of the arrows (start, end: 3 x 3k for k drawn forces).

    Each drawn force gives three segments: the shaft from the point p to
    the tip p + f / newtons_per_meter, and two sides of the head from the
    tip back towards the shaft, in a plane that contains the force.
    """
    points_W = np.asarray(points_W, dtype=float).reshape(-1, 3)
    forces_W = np.asarray(forces_W, dtype=float).reshape(-1, 3)
    magnitude = np.linalg.norm(forces_W, axis=1)
    drawn = magnitude >= params.force_threshold
    starts, ends = [], []
    for p, f, size in zip(points_W[drawn], forces_W[drawn], magnitude[drawn]):
        along = f / size
        tip = p + f / params.newtons_per_meter
        side = _perpendicular(along)
        back = HEAD_FRACTION * size / params.newtons_per_meter
        for sign in (1.0, -1.0):
            head = (np.cos(HEAD_HALF_ANGLE) * -along + sign * np.sin(HEAD_HALF_ANGLE) * side)
            starts.append(tip)
            ends.append(tip + back * head)
        starts.append(p)
        ends.append(tip)
    if not starts:
        return np.zeros((3, 0)), np.zeros((3, 0))
    return np.asfortranarray(np.array(starts).T), np.asfortranarray(np.array(ends).T)


def _perpendicular(unit: np.ndarray) -> np.ndarray:
    """Return a unit vector perpendicular to ``unit``."""
    other = np.array([1.0, 0.0, 0.0]) if abs(unit[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    side = np.cross(unit, other)
    return side / np.linalg.norm(side)


class ContactForceVisualizer(LeafSystem):
    """
    Draws the contact forces of a QuasistaticPlant's ``contact_results`` port in Meshcat.

    Input port ``contact_results``: a sequence of ``simulator.Contact``
    (each with ``point_W`` and ``force_W``; contacts whose ``force_W`` is
    None, scaled impulses under ``formulation: lcp``, are not drawn).  A periodic publish event
    draws them; an initialization event deletes what an earlier run drew.
    """

    def __init__(self, meshcat: Meshcat,
                 params: ContactForceVisualizerParams = ContactForceVisualizerParams()):
        """Draw into ``meshcat`` with ``params``."""
        LeafSystem.__init__(self)
        if not params.publish_period > 0.0 or not params.newtons_per_meter > 0.0:
            raise ValueError("ContactForceVisualizerParams: publish_period and "
                             "newtons_per_meter must be > 0, got "
                             f"{params.publish_period} and {params.newtons_per_meter}.")
        self._meshcat = meshcat
        self._params = params
        self._input = self.DeclareAbstractInputPort("contact_results", AbstractValue.Make(()))
        self.DeclarePeriodicPublishEvent(params.publish_period, 0.0, self._draw)
        self.DeclareForcedPublishEvent(self._draw)
        if params.delete_on_initialization_event:
            self.DeclareInitializationPublishEvent(self._delete)

    @staticmethod
    def AddToBuilder(builder: DiagramBuilder, contact_results_port: OutputPort,  # noqa: N802
                     meshcat: Meshcat,
                     params: ContactForceVisualizerParams = ContactForceVisualizerParams()
                     ) -> "ContactForceVisualizer":
        """Add a visualizer to ``builder``, connect it to the port, and return it."""
        visualizer = builder.AddSystem(ContactForceVisualizer(meshcat, params))
        visualizer.set_name("contact_force_visualizer")
        builder.Connect(contact_results_port, visualizer.get_input_port())
        return visualizer

    def _draw(self, context: Context) -> None:
        # Impulses known only up to a scale (formulation: lcp) have no force in newtons
        # to draw at newtons_per_meter: those contacts are left out.
        contacts = [c for c in self._input.Eval(context) if c.force_W is not None]
        points = np.array([c.point_W for c in contacts]).reshape(-1, 3)
        forces = np.array([c.force_W for c in contacts]).reshape(-1, 3)
        start, end = force_arrow_segments(points, forces, self._params)
        path = self._params.prefix
        if start.shape[1] == 0:
            if self._meshcat.HasPath(path):
                self._meshcat.SetProperty(path, "visible", False)
            return
        self._meshcat.SetLineSegments(path, start, end, self._params.line_width,
                                      self._params.color)
        self._meshcat.SetProperty(path, "visible", True)

    def Delete(self) -> None:  # noqa: N802 (Drake's ContactVisualizer.Delete)
        """Delete what this visualizer drew (Meshcat's path ``params.prefix``)."""
        self._meshcat.Delete(self._params.prefix)

    def _delete(self, context: Context) -> None:
        self.Delete()
