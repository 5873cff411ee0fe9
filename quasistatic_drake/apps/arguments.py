"""Argument types of the quasistatic-drake subcommands: checked numbers, with argparse's errors."""

from __future__ import annotations

import argparse
import math


def positive(text: str) -> float:
    """Return a finite number > 0."""
    value = float(text)
    if not math.isfinite(value) or value <= 0.0:
        raise argparse.ArgumentTypeError(f'must be a positive number, got {text}')
    return value


def non_negative(text: str) -> float:
    """Return a finite number >= 0."""
    value = float(text)
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
