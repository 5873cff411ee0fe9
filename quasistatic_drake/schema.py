"""
One typed schema for YAML: frozen dataclasses whose fields say their key, type, default and check.

The scenario (scenario.py) and every formulation's settings block
(``miqp:``, formulations/) are dataclasses whose fields are declared with
:func:`setting`: a default (or none: the key is required), a check that
turns the YAML value into the field's value, and a one-line meaning.
:func:`read` builds such a dataclass from a mapping, nested dataclasses and
lists of them included, and :func:`checked` validates one built in code
(for example by ``dataclasses.replace``).  Every error is a
:class:`SchemaError` that names the key path (``robots[0].stiffness[1]``),
what was wrong, and the fix; the scenario adds its file name.

Why not Drake's ``yaml_load_typed``: it reads the same kind of dataclasses,
but its errors name neither the key path nor a fix, and it has no checks
(a negative time step would load).  Drake's own schemas (``ModelDirectives``)
are still read with it, through pydrake.  This module imports neither
Drake nor numba.
"""

from __future__ import annotations

import difflib

import math
from dataclasses import dataclass, field, fields, is_dataclass, MISSING, replace
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np


class SchemaError(ValueError):
    """A value that cannot be used; ``key`` is its path (``robots[0].stiffness``)."""

    def __init__(self, key: str, message: str):
        """Record the key path and the message."""
        super().__init__(f"{key or 'top level'}: {message}")
        self.key = key
        self.message = message


def did_you_mean(unknown, allowed) -> str:
    """Return " Did you mean 'x' for 'y'?" for the unknown keys close to an allowed one."""
    guesses = []
    for key in unknown:
        close = difflib.get_close_matches(str(key), [str(a) for a in allowed], n=1, cutoff=0.6)
        if close:
            guesses.append(f"'{close[0]}' for '{key}'")
    return f" Did you mean {', '.join(guesses)}?" if guesses else ""


Check = Callable[[Any, str], Any]   # (value, key path) -> the field's value, or SchemaError


def setting(default: Any = MISSING, check: Optional[Check] = None, doc: str = "",
            factory: Any = MISSING) -> Any:
    """
    Declare a schema field: its default (none: required), its check and its meaning.

    ``factory`` makes a fresh default (for arrays and dataclasses).
    """
    metadata = {"check": check, "doc": doc}
    if factory is not MISSING:
        return field(default_factory=factory, metadata=metadata)
    if default is MISSING:
        return field(metadata=metadata)
    return field(default=default, metadata=metadata)


def keys_of(schema: type) -> list[str]:
    """Return the keys a schema reads (its fields that have a check)."""
    return [f.name for f in fields(schema) if f.metadata.get("check") is not None]


def read(schema: type, data: Any, where: str = "", extra: Sequence[str] = (),
         **fixed: Any):
    """
    Return ``schema`` built from the mapping ``data``; keys left out take their defaults.

    ``where`` is the mapping's key path, for the messages.  Keys in ``extra``
    are allowed and left for the caller (``data[key]``); ``fixed`` sets
    fields that are not read from YAML (a source file name, say).
    """
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise SchemaError(where, f"expected a mapping, got {type(data).__name__}.")
    known = {f.name: f for f in fields(schema) if f.metadata.get("check") is not None}
    unknown = sorted(set(map(str, data)) - set(known) - set(extra))
    if unknown:
        allowed = [*known, *extra]
        raise SchemaError(where, f"unknown key(s) {unknown}.{did_you_mean(unknown, allowed)} "
                          f"Allowed keys: {sorted(allowed)}.")
    values = {}
    for name, f in known.items():
        if name in data:
            values[name] = _checked(f, data[name], join(where, name))
        elif f.default is MISSING and f.default_factory is MISSING:
            raise SchemaError(join(where, name), "is required but missing.")
    return schema(**values, **fixed)


def checked(instance, where: str = ""):
    """Return a schema dataclass with every read field checked again, or raise SchemaError."""
    if not is_dataclass(instance):
        raise SchemaError(where, f"expected a settings dataclass, got {instance!r}.")
    values = {f.name: _checked(f, getattr(instance, f.name), join(where, f.name))
              for f in fields(instance) if f.metadata.get("check") is not None}
    return replace(instance, **values)


def describe(schema: type) -> list[tuple[str, Any, str]]:
    """Return (key, default, meaning) of each key, for documentation and help texts."""
    rows = []
    for f in fields(schema):
        if f.metadata.get("check") is None:
            continue
        default = (f.default if f.default is not MISSING else
                   f.default_factory() if f.default_factory is not MISSING else "required")
        rows.append((f.name, default, f.metadata.get("doc", "")))
    return rows


def join(where: str, key: str) -> str:
    """Return the key path of ``key`` inside ``where``."""
    return f"{where}.{key}" if where else key


def _checked(f, value: Any, where: str) -> Any:
    try:
        return f.metadata["check"](value, where)
    except SchemaError:
        raise
    except ValueError as err:
        raise SchemaError(where, str(err)) from None


# ----- checks: each takes (value, key path) and returns the field's value ---------------
def number(positive: bool = False, nonnegative: bool = False,
           none_word: Optional[str] = None, infinite: bool = False,
           within: Optional[tuple[float, float]] = None) -> Check:
    """
    Check a finite number, > 0 or >= 0 if asked; ``none_word`` ('auto') stands for None.

    ``within`` (low, high): the range the engine can work in; a finite value
    outside it (a time step of 1e300 s) is refused with the range.
    """
    def check(value: Any, where: str) -> Optional[float]:
        if none_word is not None and (value is None or value == none_word):
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            also = f" or {none_word!r}" if none_word else ""
            raise ValueError(f"expected a number{also}, got {value!r}.")
        value = float(value)
        if math.isnan(value) or (math.isinf(value) and not (infinite and value > 0)):
            allowed = " (or .inf)" if infinite else ""
            raise ValueError(f"must be finite{allowed}, got {value}.")
        if positive and value <= 0.0:
            raise ValueError(f"must be > 0, got {value}.")
        if nonnegative and value < 0.0:
            raise ValueError(f"must be >= 0, got {value}.")
        if within is not None and math.isfinite(value) and not within[0] <= value <= within[1]:
            raise ValueError(f"must be within [{within[0]:g}, {within[1]:g}] (the range the "
                             f"engine works in), got {value:g}.")
        return value
    return check


def flag() -> Check:
    """Check true or false."""
    def check(value: Any, where: str) -> bool:
        if not isinstance(value, bool):
            raise ValueError(f"expected true or false, got {value!r}.")
        return value
    return check


def removed(reason: str) -> Check:
    """Refuse a key that is no longer read, saying why and what to do instead (None: absent)."""
    def check(value: Any, where: str) -> Any:
        if value is None:
            return None
        raise ValueError(f"this key was removed: {reason}")
    return check


def one_of(*choices: str, what: str = "value") -> Check:
    """Check one of ``choices``."""
    def check(value: Any, where: str) -> str:
        if value not in choices:
            raise ValueError(f"unknown {what} {value!r}. Available: {list(choices)}.")
        return value
    return check


def positive_int(none_means: str = "", none_word: Optional[str] = None) -> Check:
    """
    Check a positive integer, or None where ``none_means`` says what None does.

    None is given by leaving the key out, or by ``none_word`` (such as 'all')
    where the default is not None.
    """
    def check(value: Any, where: str) -> Optional[int]:
        if none_means and (value is None or (none_word is not None and value == none_word)):
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            alternative = (f" (or {none_word!r} for {none_means})" if none_word else
                           f" (or leave it out for {none_means})" if none_means else "")
            raise ValueError(f"expected a positive integer{alternative}, got {value!r}.")
        return value
    return check


def count() -> Check:
    """Check a whole number >= 0."""
    def check(value: Any, where: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"expected a whole number >= 0, got {value!r}.")
        return value
    return check


def text(pattern_doc: str = "a non-empty string", allow: Callable[[str], bool] = bool) -> Check:
    """Check a string that ``allow`` accepts (described by ``pattern_doc``)."""
    def check(value: Any, where: str) -> str:
        if not isinstance(value, str) or not allow(value):
            raise ValueError(f"expected {pattern_doc}, got {value!r}.")
        return value
    return check


def vector(size: Optional[int] = None, positive: bool = False,
           within: Optional[tuple[float, float]] = None) -> Check:
    """Check a list of numbers (of ``size`` if given; each > 0, or ``within``, if asked)."""
    element = number(positive=positive, within=within)

    def check(value: Any, where: str) -> np.ndarray:
        if not isinstance(value, (list, tuple, np.ndarray)):
            raise ValueError(f"expected a list of numbers, got {value!r}.")
        out = np.array([_checked_element(element, x, f"{where}[{i}]")
                        for i, x in enumerate(value)], dtype=float)
        if size is not None and out.size != size:
            raise ValueError(f"expected {size} numbers, got {out.size}.")
        return out
    return check


def optional(inner: Check) -> Check:
    """Check None, or what ``inner`` checks."""
    def check(value: Any, where: str) -> Any:
        return None if value is None else inner(value, where)
    return check


def nested(schema: type) -> Check:
    """Check a mapping read as the dataclass ``schema``."""
    def check(value: Any, where: str) -> Any:
        return value if isinstance(value, schema) else read(schema, value, where)
    return check


def list_of(item: Check) -> Check:
    """Check a list (None: empty) whose items ``item`` checks; returns a tuple."""
    def check(value: Any, where: str) -> tuple:
        if value is None:
            return ()
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"expected a list, got {type(value).__name__}.")
        return tuple(item(x, f"{where}[{i}]") for i, x in enumerate(value))
    return check


def mapping_of(item: Check, key_doc: str = "a name") -> Check:
    """Check a mapping of string keys (``key_doc``) to values ``item`` checks; returns a dict."""
    def check(value: Any, where: str) -> dict:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise ValueError(f"expected a mapping of {key_doc} to values, got "
                             f"{type(value).__name__}.")
        out = {}
        for key, x in value.items():
            if not isinstance(key, str) or not key:
                raise SchemaError(where, f"expected {key_doc} as each key, got {key!r}.")
            out[key] = item(x, join(where, key))
        return out
    return check


def anything() -> Check:
    """Accept any value as it is (a block another module validates)."""
    return lambda value, where: value


def _checked_element(check: Check, value: Any, where: str) -> Any:
    try:
        return check(value, where)
    except SchemaError:
        raise
    except ValueError as err:
        raise SchemaError(where, str(err)) from None


@dataclass(frozen=True)
class NoSettings:
    """The settings type of a formulation that has no settings of its own (an empty block)."""
