"""The system model under PyPy (kvfabric.sim.studies.pypy): `make family` runs its
simulations there, so a run must give the same result, bit for bit, as under
CPython, and a failure in the child must come back as a clear error.

PyPy is installed by `make test`'s set-up (scripts/bootstrap.sh: Debian's pypy3
and a .pypy venv with tomli); these tests fail, not skip, without it.
"""

import math
import subprocess
import sys
from pathlib import Path

import pytest

from kvfabric.sim.studies import family as fam
from kvfabric.sim.studies.pypy import PYPY_ENV, PyPyError, Worker, call, default_pypy, interpreter_of

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def pypy():
    python = default_pypy(ROOT)
    assert python, "no PyPy: run `make test` (scripts/bootstrap.sh creates .pypy) or set KVFABRIC_PYPY"
    assert interpreter_of(python).startswith("PyPy ")
    return python


@pytest.fixture(scope="module")
def draw_files(tmp_path_factory):
    """A drawn workload with a backlogged prefill and CXL spill: the family's first draw."""
    d = fam.draw(fam.FAMILY_SEED, 0)
    return fam.write_draw(d, tmp_path_factory.mktemp("family"))


def _without_times(result):
    return {k: v for k, v in result.items() if k not in ("cpu_s", "wall_s")}


@pytest.mark.parametrize("policy", ["decode-only", "frfcfs", "fabric", "fabric-qos"])
def test_a_family_run_under_pypy_is_the_run_under_cpython(pypy, draw_files, policy):
    spec = fam.plan([draw_files], policies=[policy], seeds=[2], cycles=40_000)[0]
    key, here = fam.run_spec(spec)
    there_key, there = fam.run_spec({**spec, "python": pypy})
    assert there_key == key == (0, policy, 2)
    assert _without_times(there) == _without_times(here)
    assert sum(len(d["lat"]) for d in here["decodes"].values()) > 0  # something was compared
    assert type(here["utilisation"]) is float and 0 < here["utilisation"] <= 1  # plain data for the JSON report


def test_a_kept_process_gives_each_run_the_result_of_a_fresh_one(pypy, draw_files):
    """The family keeps one PyPy process per worker (.pypy.warm_call): a run
    after other runs in it is the run in a process of its own, bit for bit."""
    qos, frfcfs = (fam.plan([draw_files], policies=[p], seeds=[3], cycles=30_000)[0] for p in ("fabric-qos", "frfcfs"))
    args = ("kvfabric.sim.studies.family_run", "simulate")
    fresh = _without_times(call(pypy, *args, {**qos, "python": None})[1])
    worker = Worker(pypy)
    try:
        first = _without_times(worker.call(*args, {**qos, "python": None})[1])
        other = _without_times(worker.call(*args, {**frfcfs, "python": None})[1])
        again = _without_times(worker.call(*args, {**qos, "python": None})[1])
        assert worker.calls == 3  # one process answered all three
    finally:
        worker.close()
    assert first == again == fresh
    assert other != fresh  # the runs differ, so the equality above says something
    assert sum(len(d["lat"]) for d in fresh["decodes"].values()) > 0


def test_a_kept_process_reports_a_failed_call_and_serves_the_next(pypy):
    worker = Worker(pypy)
    try:
        with pytest.raises(PyPyError, match=r"family_run.simulate failed:\n(.|\n)*No such file"):
            worker.call("kvfabric.sim.studies.family_run", "simulate",
                        {"draw": 0, "policy": "frfcfs", "seed": 1, "contract": "/nonexistent.toml",
                         "workload": "/nonexistent.toml", "cycles": 1000})
        assert worker.call("kvfabric.sim.studies.family_run", "union_length", [(0, 5), (3, 9)]) == 9
        assert worker.calls == 1
        # A child that dies is a clear error, and the next call starts another.
        with pytest.raises(PyPyError, match=r"os._exit: the interpreter died \(exit 3\)"):
            worker.call("os", "_exit", 3)
        assert worker.call("kvfabric.sim.studies.family_run", "union_length", [(2, 4)]) == 2
        assert worker.calls == 1
    finally:
        worker.close()


def test_warm_call_keeps_one_process_per_thread(pypy):
    """A kept process answers one call at a time, so threads of one process
    (a sweep's local workers as threads) each get their own."""
    from concurrent.futures import ThreadPoolExecutor
    from threading import Barrier

    from kvfabric.sim.studies.pypy import warm_call

    together = Barrier(2)

    def pids(_):
        first = warm_call(pypy, "os", "getpid")
        together.wait(timeout=60)  # both threads have started their process
        return first, warm_call(pypy, "os", "getpid")

    with ThreadPoolExecutor(2) as pool:
        (a1, a2), (b1, b2) = pool.map(pids, range(2))
    assert a1 == a2 and b1 == b2  # each thread's calls went to its kept process
    assert a1 != b1  # and the two threads' processes are different


def test_a_kept_process_for_an_interpreter_that_does_not_exist_is_a_clear_error(tmp_path):
    worker = Worker(str(tmp_path / "no-such-python"))
    with pytest.raises(PyPyError, match="no-such-python.*cannot start"):
        worker.call("kvfabric.sim.studies.family_run", "union_length", [])


def test_every_simulation_module_is_python_3_9_for_pypy(pypy, tmp_path):
    """Syntax PyPy 3.9 lacks (match, parenthesised context managers, ...) fails at
    import under it: every module of the golden and the system model compiles there."""
    files = sorted(str(p) for folder in ("model", "sim") for p in (ROOT / folder).rglob("*.py"))
    assert len(files) > 20
    done = subprocess.run([pypy, "-c", "import sys\nfor f in sys.argv[1:]: "
                           "compile(open(f, encoding='utf-8').read(), f, 'exec')", *files],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_failing_child_names_the_call_and_its_error(pypy):
    with pytest.raises(PyPyError, match=r"kvfabric.sim.studies.family_run.simulate failed .*\n(.|\n)*No such file"):
        call(pypy, "kvfabric.sim.studies.family_run", "simulate",
             {"draw": 0, "policy": "frfcfs", "seed": 1, "contract": "/nonexistent.toml",
              "workload": "/nonexistent.toml", "cycles": 1000})


def test_an_interpreter_that_does_not_exist_is_a_clear_error(tmp_path):
    missing = str(tmp_path / "no-such-python")
    with pytest.raises(PyPyError, match="no-such-python.*cannot start"):
        call(missing, "kvfabric.sim.studies.family_run", "union_length", [])
    with pytest.raises(PyPyError, match="no-such-python: not a Python interpreter"):
        interpreter_of(missing)


def test_the_environment_chooses_the_interpreter(monkeypatch, tmp_path):
    monkeypatch.setenv(PYPY_ENV, "none")
    assert default_pypy(ROOT) is None
    monkeypatch.setenv(PYPY_ENV, "/opt/pypy/bin/pypy3")
    assert default_pypy(ROOT) == "/opt/pypy/bin/pypy3"
    monkeypatch.delenv(PYPY_ENV)
    assert default_pypy(tmp_path) is None  # no .pypy there
    assert default_pypy(ROOT) == str(ROOT / ".pypy" / "bin" / "python")
    assert interpreter_of(None).startswith(sys.implementation.name.replace("cpython", "CPython"))


def test_make_bench_measures_the_family_run_under_both_interpreters(pypy):
    from kvfabric.scripts import bench

    rows = bench.bench_system_family(20_000, policies=("frfcfs",))
    assert [r["sim"].split()[0] for r in rows] == ["CPython", "PyPy"]
    assert all(r["cycles"] == 20_000 and r["cycles_per_s"] > 0
               and math.isclose(r["cycles"] / r["cycles_per_s"], r["cpu_seconds"], abs_tol=0.006) for r in rows)
