"""
Calling Drake where its own checks may fail, so that every failure is an exception with its reason.

pydrake raises a failed internal check (DRAKE_DEMAND, a directive's
``IsValid()``) as ``SystemExit``, with only the condition in its text
("condition 'directives.IsValid()' failed"); the reason ("add_weld: `parent`
must be non-empty") goes to the ``drake`` logger just before.
:func:`call_drake` turns both into one :class:`DrakeRefusal`, which callers
catch with the RuntimeErrors Drake raises otherwise and report as a
ScenarioError naming the key.
"""

from __future__ import annotations

import logging
from typing import Any, Callable


class DrakeRefusal(RuntimeError):
    """Drake refused its input: its logged reason, then its own message."""


def call_drake(function: Callable, *args: Any, **kwargs: Any) -> Any:
    """
    Return ``function(*args, **kwargs)``; a failed Drake check raises DrakeRefusal.

    Drake's log records during the call are held back: on success they go on
    to the ``drake`` logger's usual handlers; on failure they are the
    refusal's text, and are not printed a second time.
    """
    logger = logging.getLogger("drake")
    held = _Held()
    propagate, handlers = logger.propagate, logger.handlers[:]
    logger.propagate, logger.handlers = False, [held]
    try:
        result = function(*args, **kwargs)
    except SystemExit as exit_:        # pydrake's failed DRAKE_DEMAND
        raise DrakeRefusal(_text(held.records, exit_)) from None
    except RuntimeError as err:
        if any(r.levelno >= logging.ERROR for r in held.records):
            raise DrakeRefusal(_text(held.records, err)) from None
        raise
    finally:
        logger.propagate, logger.handlers = propagate, handlers
    for record in held.records:
        logger.handle(record)
    return result


class _Held(logging.Handler):
    """Hold the ``drake`` logger's records during one call."""

    def __init__(self):
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _text(records: list, err: BaseException) -> str:
    reasons = [r.getMessage() for r in records if r.levelno >= logging.WARNING]
    return "; ".join([*reasons, str(err)]) if reasons else str(err)
