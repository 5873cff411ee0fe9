"""
Settings types for the formulations' scenario blocks (``miqp:``, ``qp:``, ...), validated.

A formulation's settings type is a frozen dataclass whose fields are
declared with :func:`setting`: a default, a check and a one-line meaning.
:func:`read_settings` builds one from the scenario's block (a mapping, from
YAML) and :func:`checked_settings` validates one built in code (for
example by ``dataclasses.replace``).  Both raise :class:`SettingsError`
naming the key, what was wrong and the fix; the scenario adds its file name.
This module imports neither Drake nor numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any, Callable, Mapping, Optional


class SettingsError(ValueError):
    """A settings value that cannot be used; ``key`` names it within the block."""

    def __init__(self, key: str, message: str):
        """Record the key (a dotted path within the block) and the message."""
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message


Check = Callable[[Any], Any]   # returns the value to store, or raises ValueError(message)


def setting(default: Any, check: Check, doc: str = "") -> Any:
    """Declare a settings field: its default, its check and its meaning (for the docs)."""
    return field(default=default, metadata={"check": check, "doc": doc})


def read_settings(settings_type: type, block: Any, where: str):
    """
    Return ``settings_type`` built from a scenario block; keys left out take their defaults.

    ``where`` is the block's key path (``miqp``) for the messages.
    """
    if block is None:
        block = {}
    if not isinstance(block, Mapping):
        raise SettingsError(where, f"expected a mapping of settings, got "
                            f"{type(block).__name__}.")
    known = {f.name: f for f in fields(settings_type)}
    unknown = sorted(set(map(str, block)) - set(known))
    if unknown:
        raise SettingsError(where, f"unknown key(s) {unknown}. Allowed keys: {sorted(known)}.")
    values = {name: _checked(known[name], block[name], f"{where}.{name}") for name in block}
    return settings_type(**values)


def checked_settings(settings, where: str):
    """Return ``settings`` (a settings dataclass) with every field checked, or raise."""
    if not is_dataclass(settings):
        raise SettingsError(where, f"expected a settings dataclass, got {settings!r}.")
    values = {f.name: _checked(f, getattr(settings, f.name), f"{where}.{f.name}")
              for f in fields(settings)}
    return replace(settings, **values)


def describe(settings_type: type) -> list[tuple[str, Any, str]]:
    """Return (key, default, meaning) of each setting, for documentation and help texts."""
    return [(f.name, f.default, f.metadata.get("doc", "")) for f in fields(settings_type)]


def _checked(f, value: Any, where: str) -> Any:
    check = f.metadata.get("check")
    if check is None:
        return value
    try:
        return check(value)
    except ValueError as err:
        raise SettingsError(where, str(err)) from None


# ----- checks -----------------------------------------------------------------------
def number(positive: bool = False, nonnegative: bool = False,
           none_word: Optional[str] = None) -> Check:
    """Check a finite number, > 0 or >= 0 if asked; ``none_word`` ('auto') stands for None."""
    def check(value: Any) -> Optional[float]:
        if none_word is not None and (value is None or value == none_word):
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            also = f" or {none_word!r}" if none_word else ""
            raise ValueError(f"expected a number{also}, got {value!r}.")
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f"must be finite, got {value}.")
        if positive and value <= 0.0:
            raise ValueError(f"must be > 0, got {value}.")
        if nonnegative and value < 0.0:
            raise ValueError(f"must be >= 0, got {value}.")
        return value
    return check


def flag() -> Check:
    """Check true or false."""
    def check(value: Any) -> bool:
        if not isinstance(value, bool):
            raise ValueError(f"expected true or false, got {value!r}.")
        return value
    return check


def one_of(*choices: str, what: str = "value") -> Check:
    """Check one of ``choices``."""
    def check(value: Any) -> str:
        if value not in choices:
            raise ValueError(f"unknown {what} {value!r}. Available: {list(choices)}.")
        return value
    return check


def positive_int(none_means: str = "") -> Check:
    """Check a positive integer, or None (left out) when ``none_means`` says what None does."""
    def check(value: Any) -> Optional[int]:
        if value is None and none_means:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            alternative = f" (or leave it out for {none_means})" if none_means else ""
            raise ValueError(f"expected a positive integer{alternative}, got {value!r}.")
        return value
    return check


@dataclass(frozen=True)
class NoSettings:
    """The settings type of a formulation that has no settings of its own (an empty block)."""
