"""
A frozen record with some fields changed, at the cost of a dict copy.

``dataclasses.replace`` looks the fields up and runs ``__init__`` again:
about 13 us a call, and the step's gradients made 30 of them a step (a
perturbed problem or island per column), a fifth of the cost of the
command columns on the two pads.  :func:`changed` copies the instance's
``__dict__`` instead.  It is for the step's plain records (StepProblem,
ContactSet, IslandData): frozen dataclasses without ``__post_init__`` or
slots, whose fields need no check.
"""

from __future__ import annotations

from typing import TypeVar

Record = TypeVar("Record")


def changed(record: Record, **fields) -> Record:
    """Return a copy of ``record`` with ``fields`` set (``replace`` without __init__)."""
    unknown = fields.keys() - record.__dataclass_fields__.keys()
    if unknown:
        raise TypeError(f"{type(record).__name__} has no field {sorted(unknown)}")
    copy = object.__new__(type(record))
    copy.__dict__.update(record.__dict__)
    copy.__dict__.update(fields)
    return copy
