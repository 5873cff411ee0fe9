"""
Argument types of the quasistatic-drake subcommands, checked before anything runs.

Numbers (finite, within range) and output files: an output file is checked
when the arguments are parsed, before the computation, and written at
exactly the path given (argparse's error, exit 2, otherwise).
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Callable


def positive(text: str) -> float:
    """Return a finite number > 0."""
    value = _float(text)
    if not math.isfinite(value) or value <= 0.0:
        raise argparse.ArgumentTypeError(f'must be a positive number, got {text}')
    return value


def non_negative(text: str) -> float:
    """Return a finite number >= 0."""
    value = _float(text)
    if not math.isfinite(value) or value < 0.0:
        raise argparse.ArgumentTypeError(f'must be a number >= 0, got {text}')
    return value


def positive_int(text: str) -> int:
    """Return an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f'must be a positive integer, got {text}')
    return value


def at_most(largest: float, unit: str) -> Callable[[str], float]:
    """Return the type of a finite number > 0 and <= ``largest`` (``unit`` for the message)."""
    def check(text: str) -> float:
        value = positive(text)
        if value > largest:
            raise argparse.ArgumentTypeError(f'must be at most {largest:g} {unit}, got {text}')
        return value
    return check


def seed(text: str) -> int:
    """Return an integer >= 0 (numpy's generators take no negative seed)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f'must be an integer >= 0, got {text}')
    return value


def output_file(suffix: str, *others: str) -> Callable[[str], Path]:
    """
    Return the type of an output file ending in ``suffix`` (or ``others``), checked writable.

    Its name must end in one of the suffixes (numpy and matplotlib would
    otherwise write another path than the one given: ``--out /dev/full``
    wrote /dev/full.npz); it may not be a directory or a device; its nearest
    existing directory must be writable (the missing ones are made when it is
    written).
    """
    suffixes = (suffix, *others)

    def check(text: str) -> Path:
        path = Path(text).expanduser()
        if path.is_dir():
            raise argparse.ArgumentTypeError(f'{text} is a directory; give a file in it, e.g. '
                                             f'{path / ("out" + suffix)}')
        if path.suffix.lower() not in suffixes:
            raise argparse.ArgumentTypeError(
                f'{text}: the file name must end in {" or ".join(suffixes)} (the file '
                f'written), e.g. {path.name or "out"}{suffix}')
        if path.exists() and not path.is_file():
            raise argparse.ArgumentTypeError(f'{text} exists and is not a regular file')
        if path.exists() and not os.access(path, os.W_OK):
            raise argparse.ArgumentTypeError(f'{text} is not writable')
        parent = path.absolute().parent
        while not parent.exists():
            parent = parent.parent
        if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
            raise argparse.ArgumentTypeError(f'{text} cannot be created: {parent} is not a '
                                             'writable directory')
        return path
    return check


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'expected a number, got {text}') from None
