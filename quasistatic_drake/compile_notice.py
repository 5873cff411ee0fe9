"""
A message while numba compiles the contact kernels on their first use.

The kernels (manifold.py, contact.py, formulations/) are compiled once per
environment and cached on disk (next to the sources, or in NUMBA_CACHE_DIR);
the first run spends about a minute of CPU there (``make demo`` and ``make
test`` compile the demo's kernels beforehand, on every core:
kernel_cache.py).  :func:`compile_notice`
says so when numba starts compiling (its "numba:compile" event; loading a
cached kernel raises none) and the work it wraps is still going
NOTICE_DELAY later, so a first run is never silent, and a slow load that
compiles nothing (a busy machine, a large model) says nothing.
"""

from __future__ import annotations

import logging
import os
import threading
from contextlib import contextmanager

from numba.core import event

NOTICE_DELAY = 2.0   # [s] after the first compilation starts: a single kernel is quicker
LOGGER = logging.getLogger("quasistatic_drake")


def notice_text() -> str:
    """Return the message printed while the kernels compile."""
    where = os.environ.get("NUMBA_CACHE_DIR") or "__pycache__ beside the sources"
    return ("quasistatic_drake: compiling the contact kernels with numba (the first run in "
            f"this environment only, up to a minute; they are cached in {where}) ...")


class _FirstCompilation(event.Listener):
    """Start the notice's timer when numba starts its first compilation."""

    def __init__(self, timer: threading.Timer):
        self.timer = timer

    def on_start(self, ev) -> None:
        if not self.timer.is_alive() and not self.timer.finished.is_set():
            self.timer.start()

    def on_end(self, ev) -> None:
        pass


@contextmanager
def compile_notice():
    """Log notice_text() (a warning, shown by default) if numba compiles for long."""
    timer = threading.Timer(NOTICE_DELAY, LOGGER.warning, args=(notice_text(),))
    timer.daemon = True
    listener = _FirstCompilation(timer)
    event.register("numba:compile", listener)
    try:
        yield
    finally:
        event.unregister("numba:compile", listener)
        timer.cancel()
