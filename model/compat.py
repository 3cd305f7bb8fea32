"""What the golden model and the system model need from the interpreter,
for the interpreters they run under.

The package needs Python 3.11, but the simulation code (``kvfabric.model``,
``kvfabric.sim``) also runs under PyPy 3.9, Debian's PyPy: the workload
family hands its long runs to it when it is at hand, about three times as
many simulated cycles per second once the JIT has warmed
(:mod:`kvfabric.sim.studies.pypy`).  Two things differ there: ``tomllib``
came in 3.11 (PyPI's ``tomli`` is the same parser, installed for PyPy by
``make family``), and ``dataclass(slots=True)`` in 3.10.
"""

import sys
from dataclasses import dataclass

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11 (PyPy 3.9)
    import tomli as tomllib

__all__ = ["tomllib", "frozen_record"]

#: A frozen dataclass, with ``__slots__`` where the interpreter's dataclasses
#: make them (smaller and faster instances under CPython; PyPy's own object
#: layout needs none).
frozen_record = dataclass(frozen=True, slots=True) if sys.version_info >= (3, 10) else dataclass(frozen=True)
