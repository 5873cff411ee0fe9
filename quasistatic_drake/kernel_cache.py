"""
Compile the contact kernels before the first run, on every core at once.

numba compiles a kernel on its first call and caches it on disk (beside the
sources, or in NUMBA_CACHE_DIR).  In a new environment the demo's kernels
take about 70 s of CPU to compile, one after another, which dominated
``make demo`` on a fresh clone.  The kernels the demo calls from Python (the
roots; each compiles the kernels it calls) are listed with their argument
types in ``kernel_signatures.json``.  :func:`warm` splits that list between
processes, balanced by each root's recorded compile time, and each process
compiles its share into numba's cache; the demo then loads them.

Compilation is per process and numba's cache is the only thing shared, so
the result is the same as a lazy first call: numba still checks each cached
kernel against its source.  A root missing from the list (the file is stale)
only costs time: it compiles on its first call as before.  ``--record``
rewrites the list from a headless demo in an empty cache, and
test/test_kernel_cache.py fails when the list no longer covers the demo.

Usage: ``python -m quasistatic_drake.kernel_cache [--jobs N]`` (the Makefile
runs it in ``make demo`` and ``make test``), ``--record`` to rewrite the list.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

SIGNATURES = Path(__file__).with_name("kernel_signatures.json")
_FIX = "run 'python -m quasistatic_drake.kernel_cache --record' to rewrite it"


class StaleKernelList(LookupError):
    """kernel_signatures.json names a kernel or argument types the sources no longer have."""


@dataclass(frozen=True)
class RootKernel:
    """One compiled kernel called from Python: where it is, its argument types, its cost."""

    kernel: str      # "module:qualname"
    args: str        # numba's signature syntax, e.g. "(float64[:, ::1], int64)"
    seconds: float   # compile time when recorded (only balances the processes)


def type_text(numba_type) -> str:
    """Return numba's signature syntax for an argument type (float64[:, ::1], int64, ...)."""
    from numba.core import types
    if isinstance(numba_type, types.Array):
        axes = [":"] * numba_type.ndim
        contiguous = {"C": -1, "F": 0}.get(numba_type.layout)
        if contiguous is not None:
            axes[contiguous] = "::1"
        return f"{type_text(numba_type.dtype)}[{', '.join(axes)}]"
    if isinstance(numba_type, types.Boolean):
        return "boolean"
    if isinstance(numba_type, (types.Integer, types.Float)):
        return str(numba_type)
    raise TypeError(f"kernel_cache: no signature syntax for argument type {numba_type!r}; "
                    "extend type_text() for it")


def parse_args(text: str) -> tuple:
    """Return the numba types of a RootKernel.args string."""
    from numba.core import sigutils
    parsed = sigutils._parse_signature_string(text)
    return parsed if isinstance(parsed, tuple) else (parsed,)


def load(path: Path = SIGNATURES) -> tuple[RootKernel, ...]:
    """Read the recorded roots."""
    try:
        return tuple(RootKernel(**entry) for entry in json.loads(path.read_text())["roots"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise StaleKernelList(f"{path}: not a kernel list ({type(error).__name__}: {error}); "
                              f"{_FIX}") from None


def shares(roots: tuple[RootKernel, ...], jobs: int) -> list[list[RootKernel]]:
    """Split roots into at most `jobs` lists of near-equal recorded time (longest first)."""
    bins: list[list[RootKernel]] = [[] for _ in range(max(1, min(jobs, len(roots))))]
    totals = [0.0] * len(bins)
    for root in sorted(roots, key=lambda r: (-r.seconds, r.kernel, r.args)):
        least = totals.index(min(totals))
        bins[least].append(root)
        totals[least] += root.seconds
    return [b for b in bins if b]


def dispatcher_of(kernel: str):
    """Return the numba dispatcher named "module:qualname"."""
    module_name, _, qualname = kernel.partition(":")
    try:
        target = importlib.import_module(module_name)
        for part in qualname.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as error:
        raise StaleKernelList(f"{SIGNATURES.name}: no kernel {kernel!r} ({error}); {_FIX}") \
            from None
    if not hasattr(target, "compile") or not hasattr(target, "py_func"):
        raise StaleKernelList(f"{SIGNATURES.name}: {kernel} is not a numba kernel; {_FIX}")
    return target


def compile_share(share: list[RootKernel]) -> list[str]:
    """
    Compile (or load from numba's cache) each root of one share.

    Return one message per root that no longer matches the sources (it will
    compile on its first call instead); the others are compiled regardless.
    """
    stale = []
    for root in share:
        try:
            dispatcher_of(root.kernel).compile(parse_args(root.args))
        except StaleKernelList as error:
            stale.append(str(error))
        except Exception as error:   # numba's typing errors: the arguments changed
            stale.append(f"{SIGNATURES.name}: {root.kernel}{root.args} no longer compiles "
                         f"({type(error).__name__}: {str(error).splitlines()[0]}); {_FIX}")
    return stale


def warm(jobs: int | None = None, path: Path = SIGNATURES) -> tuple[int, list[str]]:
    """
    Compile the recorded roots in `jobs` processes (default: the usable cores).

    Return how many roots there are and the messages of those that are stale.
    """
    roots = load(path)
    work = shares(roots, jobs or len(os.sched_getaffinity(0)))
    if len(work) == 1:
        return len(roots), compile_share(work[0])
    with ProcessPoolExecutor(len(work), mp_context=get_context("spawn")) as pool:
        return len(roots), [message for stale in pool.map(compile_share, work)
                            for message in stale]


_RECORDER = r"""
import json, sys, time
from numba.core import event
from quasistatic_drake.kernel_cache import type_text
roots, depth = [], [0]
class Roots(event.Listener):
    def on_start(self, ev):
        if depth[0] == 0:
            d = ev.data["dispatcher"].py_func
            roots.append({"kernel": f"{d.__module__}:{d.__qualname__}",
                          "args": "(" + ", ".join(map(type_text, ev.data["args"])) + ")",
                          "seconds": time.perf_counter()})
        depth[0] += 1
    def on_end(self, ev):
        depth[0] -= 1
        if depth[0] == 0:
            roots[-1]["seconds"] = round(time.perf_counter() - roots[-1]["seconds"], 2)
event.register("numba:compile", Roots())
from quasistatic_drake.apps.cli import main
code = main(["demo", "--no-meshcat"])
json.dump([r for r in roots if r["kernel"].startswith("quasistatic_drake.")], sys.stdout)
sys.exit(code or 0)
"""


def record(path: Path = SIGNATURES) -> tuple[RootKernel, ...]:
    """Run the demo headless in an empty numba cache and write the roots it compiled."""
    with tempfile.TemporaryDirectory(prefix="qd_numba_") as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        done = subprocess.run([sys.executable, "-c", _RECORDER], env=env, check=True,
                              stdout=subprocess.PIPE, text=True)
    roots = json.loads(done.stdout.strip().splitlines()[-1])
    path.write_text(json.dumps({
        "about": "Kernels the headless demo calls from Python, with their argument types; "
                 "written by 'python -m quasistatic_drake.kernel_cache --record'.",
        "roots": roots}, indent=1) + "\n")
    return load(path)


def main(argv: list[str] | None = None) -> int:
    """Command line: warm the cache (default) or --record the roots."""
    parser = argparse.ArgumentParser(prog="python -m quasistatic_drake.kernel_cache",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=None,
                        help="processes (default: the usable cores)")
    parser.add_argument("--record", action="store_true",
                        help=f"rewrite {SIGNATURES.name} from a headless demo run")
    options = parser.parse_args(argv)
    if options.jobs is not None and options.jobs < 1:
        parser.error(f"--jobs must be at least 1 (got {options.jobs})")
    start = time.perf_counter()
    if options.record:
        roots = record()
        print(f"kernel_cache: recorded {len(roots)} kernels in {SIGNATURES}")
        return 0
    try:
        count, stale = warm(options.jobs)
    except StaleKernelList as error:
        print(f"kernel_cache: error: {error}", file=sys.stderr)
        return 1
    for message in stale:
        print(f"kernel_cache: warning: {message}", file=sys.stderr)
    print(f"kernel_cache: {count - len(stale)} of {count} kernels compiled or loaded in "
          f"{time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
