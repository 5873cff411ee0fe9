"""
The packages of requirements-dev.txt, which the library and the demo run without.

``make demo`` installs requirements.txt only (the library and the demo); a
feature that needs one of these packages (the MIQP's Gurobi and SCIP
backends, the paper figures, Ray, the ROS node) says so with
:func:`missing_message` instead of a bare ModuleNotFoundError.  No imports here.
"""

from __future__ import annotations

# module name -> what needs it
DEV_PACKAGES = {
    "matplotlib": "the figures (--png) and the benchmark plots",
    "gurobipy": "the Gurobi backend (miqp, lcp)",
    "pyscipopt": "the SCIP backend (miqp, lcp)",
    "ray": "the batch's ray backend",
    "rclpy": "the ROS 2 node",
    "clarabel": "the clarabel backend",
    "qpsolvers": "the benchmark QP solvers",
    "proxsuite": "the benchmark QP solvers",
    "osqp": "the benchmark QP solvers",
    "quadprog": "the benchmark QP solvers",
}


def missing_message(module: str) -> str:
    """Return what needs ``module`` and how to install it."""
    top = module.split(".")[0]
    what = DEV_PACKAGES.get(top, "this feature")
    return (f"{what} needs the Python package '{top}', which this environment lacks "
            "(`make demo` installs the library and the demo only, requirements.txt). "
            "Fix: pip install -r requirements-dev.txt (`make test` installs it).")


def is_optional(module: str) -> bool:
    """Return whether ``module`` belongs to a package of requirements-dev.txt."""
    return bool(module) and module.split(".")[0] in DEV_PACKAGES
