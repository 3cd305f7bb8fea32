"""Run a simulation function under another Python, PyPy, and bring back its result.

The system model is plain Python that spends its time in a few hot loops
(the DRAM channel's ``tick``, the arbiter's ``step``), which PyPy's JIT runs
about three times as fast as CPython once warm (reports/family.md has the
rates of both).  The family's runs are millions of cycles each, so its
runs go to PyPy when it is at hand; the driver, the statistics and the plot
stay in CPython.

Two ways to call: :func:`call` starts a process for one call, and
:class:`Worker` keeps one process for call after call.  The JIT compiles
the hot loops anew in every process, seconds of CPU that a run of a few
million cycles pays again each time (a one-channel run of a million cycles
took 21.5 s in a fresh process and 13.9 s in one that had just run it,
measured under PyPy 3.9.16), so the family gives each of its workers one
:class:`Worker` (:func:`warm_call`).  A run's result does not depend on what
the process ran before it (tests/test_sim_pypy.py): the simulation keeps no
state between calls.

The child process imports ``kvfabric.model`` and ``kvfabric.sim`` from the
folders this interpreter imports them from (an editable install maps them
onto the repository's top-level folders, a wheel keeps them under
``kvfabric/``), calls ``module.function(*args)`` and returns the result by
pickle, plain data only.  Results are the same, bit for bit, under either
interpreter (tests/test_sim_pypy.py): nothing in the simulation depends on
an interpreter's hash or set order.
"""

from __future__ import annotations

import atexit
import os
import pickle
import platform
import subprocess
import tempfile
import threading
from pathlib import Path

__all__ = ["PYPY_ENV", "default_pypy", "interpreter_of", "package_folders", "call", "Worker", "warm_call",
           "PyPyError"]

#: Environment variable naming the PyPy to use (``none`` or empty: none).
PYPY_ENV = "KVFABRIC_PYPY"

#: Packages whose folders the child must be told (the others sit inside them).
_PACKAGES = ("kvfabric", "kvfabric.model", "kvfabric.sim")

# Mounting the packages where the parent has them, the first part of both
# children's programs.  Kept free of anything but the standard library.
_MOUNT = r"""
import importlib, importlib.util, os, pickle, sys, traceback
def mount(packages):
    for name, folder in packages:
        spec = importlib.util.spec_from_file_location(name, folder + "/__init__.py",
                                                      submodule_search_locations=[folder])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)
"""

# The one-call child's program: mount, run the call, write its result.
_CHILD = _MOUNT + r"""
job = pickle.load(sys.stdin.buffer)
mount(job["packages"])
target = importlib.import_module(job["module"])
result = getattr(target, job["function"])(*job["args"])
sys.stdout.buffer.write(pickle.dumps(result, protocol=4))
"""


def _tail(text):
    """The last 15 lines of a child's error output, for a :class:`PyPyError`."""
    return "\n".join(text.strip().splitlines()[-15:])


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
        raise PyPyError(f"{what} failed (exit {done.returncode}):\n" + _tail(done.stderr.decode(errors="replace")))
    return pickle.loads(done.stdout)


# The kept child's program: mount the packages once, then answer jobs read
# from standard input one pickle at a time, each with ("ok", result) or
# ("error", traceback) on the protocol stream, until standard input ends.
# The protocol has standard output's file to itself: anything the simulation
# prints goes to standard error.
_SERVER = _MOUNT + r"""
out = os.fdopen(os.dup(1), "wb")
os.dup2(2, 1)
sys.stdout = sys.stderr
jobs = sys.stdin.buffer
mounted = False
while True:
    try:
        job = pickle.load(jobs)
    except EOFError:
        break
    try:
        if not mounted:
            mount(job["packages"])
            mounted = True
        target = importlib.import_module(job["module"])
        answer = ("ok", getattr(target, job["function"])(*job["args"]))
    except Exception:
        answer = ("error", traceback.format_exc())
    pickle.dump(answer, out, protocol=4)
    out.flush()
"""


class Worker:
    """One interpreter process kept for call after call, so that the JIT's
    compiled loops serve every call after the first.

    A call that raises in the child comes back as :class:`PyPyError` and the
    process goes on serving; a child that dies or cannot start is a
    :class:`PyPyError` too, after which the worker starts a new process at
    its next call.  One call at a time: its pipe carries one job and its
    answer, so a worker is never shared between threads (:func:`warm_call`
    keeps one per thread).
    """

    def __init__(self, python):
        self.python = python
        self._proc = None
        self._stderr = None
        self.calls = 0  # calls answered by the current process

    def _start(self):
        self.close()  # a process that died between calls: reaped, its error file closed
        self._stderr = tempfile.TemporaryFile()
        try:
            self._proc = subprocess.Popen([self.python, "-c", _SERVER], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=self._stderr)
        except OSError as e:
            self._proc = None
            raise PyPyError(f"{self.python}: cannot start the interpreter: {e}") from None
        self.calls = 0

    def _stderr_tail(self):
        self._stderr.seek(0)
        return _tail(self._stderr.read().decode(errors="replace"))

    def call(self, module, function, *args):
        """``module.function(*args)`` evaluated by this worker's process; its result."""
        if self._proc is None or self._proc.poll() is not None:
            self._start()
        what = f"{self.python}: {module}.{function}"
        job = {"packages": package_folders(), "module": module, "function": function, "args": args}
        try:
            pickle.dump(job, self._proc.stdin, protocol=4)
            self._proc.stdin.flush()
            status, value = pickle.load(self._proc.stdout)
        except (OSError, EOFError, pickle.UnpicklingError):
            code = self._proc.wait()
            tail = self._stderr_tail()
            self.close()
            raise PyPyError(f"{what}: the interpreter died (exit {code}):\n" + tail) from None
        if status != "ok":
            raise PyPyError(f"{what} failed:\n" + _tail(value))
        self.calls += 1
        return value

    def close(self):
        """End the process (it exits when its standard input ends)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


# Kept workers per thread: a worker's pipe carries one call at a time, and a
# sweep's workers may be threads of one process (kvfabric.sweep, processes=False).
_KEPT = threading.local()
_ALL_WORKERS: list[Worker] = []


def warm_call(python, module, function, *args):
    """:func:`call`, but in this thread's kept :class:`Worker` for ``python``
    (started at the thread's first call, ended when this process exits)."""
    kept = getattr(_KEPT, "workers", None)
    if kept is None:
        kept = _KEPT.workers = {}
    worker = kept.get(python)
    if worker is None:
        worker = kept[python] = Worker(python)
        _ALL_WORKERS.append(worker)
    return worker.call(module, function, *args)


@atexit.register
def _close_workers():
    for worker in _ALL_WORKERS:
        worker.close()
    _ALL_WORKERS.clear()
