"""
A message while numba compiles the contact kernels on their first use.

The kernels (manifold.py, contact.py, formulations/) are compiled once per
environment and cached on disk (next to the sources, or in NUMBA_CACHE_DIR);
the first run spends about half a minute there.  :func:`compile_notice`
says so if the work it wraps takes longer than NOTICE_DELAY, so a first run
is never silent; a run that loads the cache finishes well before.
"""

from __future__ import annotations

import logging
import os
import threading
from contextlib import contextmanager

NOTICE_DELAY = 2.0   # [s] loading cached kernels takes well under this
LOGGER = logging.getLogger("quasistatic_drake")


def notice_text() -> str:
    """Return the message printed while the kernels compile."""
    where = os.environ.get("NUMBA_CACHE_DIR") or "__pycache__ beside the sources"
    return ("quasistatic_drake: compiling the contact kernels with numba (the first run in "
            f"this environment only, about 30 s; they are cached in {where}) ...")


@contextmanager
def compile_notice():
    """Log notice_text() (a warning, shown by default) if the wrapped work is slow."""
    timer = threading.Timer(NOTICE_DELAY, LOGGER.warning, args=(notice_text(),))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
