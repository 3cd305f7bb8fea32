"""Run a simulation function under another Python, PyPy, and bring back its result.

The system model is plain Python that spends its time in a few hot loops
(the DRAM channel's ``tick``, the arbiter's ``step``), which PyPy's JIT runs
about three times as fast as CPython once warm (reports/family.md has the
rates of both).  The family's runs are millions of cycles each, so its
runs go to PyPy when it is at hand, one process per run; the driver,
the statistics and the plot stay in CPython.

The child process imports ``kvfabric.model`` and ``kvfabric.sim`` from the
folders this interpreter imports them from (an editable install maps them
onto the repository's top-level folders, a wheel keeps them under
``kvfabric/``), calls ``module.function(*args)`` and returns the result by
pickle, plain data only.  Results are the same, bit for bit, under either
interpreter (tests/test_sim_pypy.py): nothing in the simulation depends on
an interpreter's hash or set order.
"""

from __future__ import annotations

import os
import pickle
import platform
import subprocess
from pathlib import Path

__all__ = ["PYPY_ENV", "default_pypy", "interpreter_of", "package_folders", "call", "PyPyError"]

#: Environment variable naming the PyPy to use (``none`` or empty: none).
PYPY_ENV = "KVFABRIC_PYPY"

#: Packages whose folders the child must be told (the others sit inside them).
_PACKAGES = ("kvfabric", "kvfabric.model", "kvfabric.sim")

# The child's whole program: mount the packages where the parent has them,
# then run the call.  Kept free of anything but the standard library.
_CHILD = r"""
import importlib.util, pickle, sys
job = pickle.load(sys.stdin.buffer)
for name, folder in job["packages"]:
    spec = importlib.util.spec_from_file_location(name, folder + "/__init__.py",
                                                  submodule_search_locations=[folder])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)
target = importlib.import_module(job["module"])
result = getattr(target, job["function"])(*job["args"])
sys.stdout.buffer.write(pickle.dumps(result, protocol=4))
"""


class PyPyError(RuntimeError):
    """The child interpreter failed: its command and the end of its error output."""


def default_pypy(root=None):
    """The PyPy to use: ``$KVFABRIC_PYPY`` if set (``none`` or empty: None),
    else the repository's ``.pypy`` venv (``make`` creates it) when present, else None."""
    env = os.environ.get(PYPY_ENV)
    if env is not None:
        return None if env.strip().lower() in ("", "none") else env
    root = Path(root) if root else Path(__file__).resolve().parents[2]
    candidate = root / ".pypy" / "bin" / "python"
    return str(candidate) if candidate.exists() else None


def interpreter_of(python=None):
    """One line naming the interpreter ``python`` (None: this one), for reports."""
    if python is None:
        return f"{platform.python_implementation()} {platform.python_version()}"
    try:
        done = subprocess.run([python, "-c", "import platform; print(platform.python_implementation(), "
                               "platform.python_version())"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise PyPyError(f"{python}: not a Python interpreter that runs: {e}") from None
    return done.stdout.strip()


def package_folders():
    """``(package, folder)`` of the packages the child mounts, parents first."""
    import importlib

    return [(name, str(Path(importlib.import_module(name).__path__[0]).resolve())) for name in _PACKAGES]


def call(python, module, function, *args, timeout=None):
    """``module.function(*args)`` evaluated by the interpreter ``python``; its result.

    Raises :class:`PyPyError` naming the interpreter, the call and the tail of
    the child's standard error when the child fails or cannot be started.
    """
    job = {"packages": package_folders(), "module": module, "function": function, "args": args}
    what = f"{python}: {module}.{function}"
    try:
        done = subprocess.run([python, "-c", _CHILD], input=pickle.dumps(job, protocol=4),
                              capture_output=True, timeout=timeout, check=False)
    except OSError as e:
        raise PyPyError(f"{what}: cannot start the interpreter: {e}") from None
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-15:]
        raise PyPyError(f"{what} failed (exit {done.returncode}):\n" + "\n".join(tail))
    return pickle.loads(done.stdout)
