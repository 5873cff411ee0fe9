"""
The formulations by name: the scenario's ``formulation:`` picks one of these.

The built-in formulations are named here by module and class, and imported
on first use.  Adding one to the package is one new module and one line in
``_BUILT_IN``; code outside the package (a test, a user's own formulation)
calls :func:`register` with its class.  The engine and the scenario reach a
formulation only through this registry.
"""

from __future__ import annotations

from importlib import import_module

_BUILT_IN = {
    "qp": "quasistatic_drake.formulations.qp:QpFormulation",
    "miqp": "quasistatic_drake.formulations.miqp:MiqpFormulation",
    "lcp": "quasistatic_drake.formulations.lcp:LcpFormulation",
}
_registered: dict[str, type] = {}


def register(formulation: type) -> None:
    """
    Make a :class:`Formulation` subclass available under its ``name``.

    Registering another class under a name in use replaces it (a built-in
    too), so that a test can swap a formulation; the scenario then reads
    the formulation's block with the new settings type.
    """
    name = getattr(formulation, "name", None)
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"{formulation!r} needs a class attribute 'name' that is an "
                         "identifier (it is also the scenario's block key).")
    if not hasattr(formulation, "settings_type"):
        raise ValueError(f"formulation {name!r} needs a class attribute 'settings_type'.")
    _registered[name] = formulation


def unregister(name: str) -> None:
    """Remove a formulation added with :func:`register` (the built-ins come back)."""
    _registered.pop(name, None)


def names() -> tuple[str, ...]:
    """Return the names of the available formulations."""
    return tuple(dict.fromkeys([*_BUILT_IN, *_registered]))


def formulation_class(name: str) -> type:
    """Return the formulation class registered as ``name`` (KeyError listing the names)."""
    if name in _registered:
        return _registered[name]
    if name not in _BUILT_IN:
        raise KeyError(f"unknown formulation {name!r}. Available: {list(names())}.")
    module, cls = _BUILT_IN[name].split(":")
    return getattr(import_module(module), cls)


def settings_type(name: str) -> type:
    """Return the settings type of a formulation (its scenario block's schema)."""
    return formulation_class(name).settings_type
