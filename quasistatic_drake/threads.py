"""
One thread for BLAS and OpenMP inside a step: small linear algebra is slower on more.

On a busy two-core machine one ``numpy.linalg.svd`` of a 150 x 51 matrix
took 193 ms with OpenBLAS's default threads and 1 ms with one, and an
8-box scene stepped at 46 ms instead of 4.3 (issue 30).  The step's
matrices are small (tens of rows): threads only add their start-up and
their contention.  :func:`one_thread` holds every BLAS and OpenMP library
loaded in the process to one thread for the duration of a ``with`` block
(threadpoolctl), then gives back the counts it found: code outside the
step keeps its own.  Entering and leaving costs about 7 us.  The same
thread count also makes a step's round-off the same in every process
(the batch backends' results are equal bit for bit).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Optional

from threadpoolctl import ThreadpoolController

_controller: Optional[ThreadpoolController] = None
_libraries = 0


@contextmanager
def one_thread() -> Iterator[None]:
    """Hold BLAS and OpenMP to one thread inside the block (module docstring)."""
    with _current().limit(limits=1):
        yield


def _current() -> ThreadpoolController:
    """Return a controller of the libraries loaded now (a library loaded later is added)."""
    global _controller, _libraries
    import sys
    loaded = len(sys.modules)
    if _controller is None or loaded != _libraries:
        _controller, _libraries = ThreadpoolController(), loaded
    return _controller
