"""The simulator build variants of tb/runner.py: the C++ optimisation level
chosen by ``KVFABRIC_VERILATOR_OPT``, and tracing compiled in only when a run
asks for waves (docs/toolchain.md, "The suite's Verilator builds")."""

import pytest

from kvfabric.tb import runner


def test_verilator_opt_defaults_to_O1_and_rejects_other_levels(monkeypatch):
    monkeypatch.delenv(runner.VERILATOR_OPT_ENV, raising=False)
    assert runner.verilator_opt() == "-O1"
    monkeypatch.setenv(runner.VERILATOR_OPT_ENV, "-O0")
    assert runner.verilator_opt() == "-O0"
    monkeypatch.setenv(runner.VERILATOR_OPT_ENV, "-O3")
    with pytest.raises(ValueError, match=r"KVFABRIC_VERILATOR_OPT='-O3'.*-O0, -O1, -O2"):
        runner.verilator_opt()


class _Config:
    """The one option tests/conftest.py's pytest_configure reads, and the marker it adds."""

    def __init__(self, run_soak):
        self.run_soak = run_soak

    def getoption(self, name):
        assert name == "--run-soak"
        return self.run_soak

    def addinivalue_line(self, name, line):
        pass


def test_the_suite_builds_at_O0_the_soak_at_the_default_and_a_callers_level_is_kept(monkeypatch):
    from conftest import pytest_configure
    monkeypatch.delenv(runner.VERILATOR_OPT_ENV, raising=False)
    pytest_configure(_Config(run_soak=False))
    assert runner.verilator_opt() == "-O0"
    monkeypatch.delenv(runner.VERILATOR_OPT_ENV)
    pytest_configure(_Config(run_soak=True))
    assert runner.verilator_opt() == "-O1"
    monkeypatch.setenv(runner.VERILATOR_OPT_ENV, "-O2")
    pytest_configure(_Config(run_soak=False))
    assert runner.verilator_opt() == "-O2"


def test_the_trace_testbench_keeps_O2_unless_a_level_is_asked_for(monkeypatch):
    from kvfabric.tb.trace_tb import _verilator_tb_args
    monkeypatch.delenv(runner.VERILATOR_OPT_ENV, raising=False)
    assert {"OPT_FAST=-O2", "OPT_GLOBAL=-O1"} <= set(_verilator_tb_args())
    monkeypatch.setenv(runner.VERILATOR_OPT_ENV, "-O0")
    assert {"OPT_FAST=-O0", "OPT_GLOBAL=-O0"} <= set(_verilator_tb_args())


def test_a_run_asking_for_waves_on_a_build_without_tracing_is_refused(tmp_path):
    b = runner.Build(sim="verilator", toplevel="top", build_dir=tmp_path, waves=False)
    with pytest.raises(ValueError, match="no tracing compiled in"):
        runner.run(b, "kvfabric.tb.tests.cosim_tests", tmp_path / "run", vcd=tmp_path / "dump.vcd")


def test_runtime_objects_are_kept_once_and_restored_per_level_and_tracing(tmp_path, monkeypatch):
    """The shell commands around a Verilator build's make (runner.runtime_commands):
    the first build's runtime objects are kept, a later build of the same level
    and tracing gets copies, another level or tracing variant gets none, and a
    kept set is never overwritten."""
    import subprocess
    monkeypatch.setattr(runner, "BUILD_ROOT", tmp_path / "root")
    names = [f"{o}.{ext}" for o in runner._RUNTIME_OBJECTS for ext in ("o", "d")]
    first, second, other = (tmp_path / d for d in ("first", "second", "other"))
    for d in (first, second, other):
        d.mkdir()
    restore, keep = runner.runtime_commands(first, "-O0", False)
    subprocess.run(restore, check=True)               # nothing kept yet: nothing copied
    assert list(first.iterdir()) == []
    for name in names:
        (first / name).write_text(f"first {name}")
    subprocess.run(keep, check=True)
    kept = runner.runtime_cache_dir("-O0", False)
    assert sorted(p.name for p in kept.iterdir()) == sorted(names)

    (first / names[0]).write_text("changed")          # a later keep leaves the set alone
    subprocess.run(keep, check=True)
    assert (kept / names[0]).read_text() == f"first {names[0]}"

    subprocess.run(runner.runtime_commands(second, "-O0", False)[0], check=True)
    assert {p.name: p.read_text() for p in second.iterdir()} == {n: f"first {n}" for n in names}
    for opt, waves in (("-O1", False), ("-O0", True)):
        assert runner.runtime_cache_dir(opt, waves) != kept
        subprocess.run(runner.runtime_commands(other, opt, waves)[0], check=True)
    assert list(other.iterdir()) == []


class _Gpi:
    """A stand-in for a handle's GPI object (what tb/monitor.reader keeps)."""

    def get_signal_val_long(self):
        return 0

    def get_signal_val_binstr(self):
        return "0"


class _Handle:
    """A stand-in for a cocotb handle: records the path of every child asked for."""

    def __init__(self, path, seen):
        self._path, self._seen = path, seen
        self._handle = _Gpi()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        child = _Handle(f"{self._path}.{name}", self._seen)
        self._seen.append(child._path)
        return child

    def __len__(self):
        return 8


@pytest.mark.parametrize("tenants,channels", [(8, 8), (3, 2)])
def test_every_internal_signal_the_monitor_reads_is_made_public(tenants, channels):
    # The Verilator model makes public the top level and PUBLIC_INTERNAL below
    # it, not every signal; a name the monitor reads below the top level and no
    # pattern covers would be missing from the VPI table (every internal check
    # fails looking it up). The names are collected from
    # ChannelPorts itself, and the configuration file says each pattern once.
    import fnmatch

    from kvfabric.spec import FabricParams
    from kvfabric.tb.monitor import ChannelPorts
    seen = []
    top = _Handle("kvfabric", seen)
    for c in range(channels):
        ChannelPorts(top, FabricParams(tenants=tenants, channels=channels), c)
    internal = [p.split(".")[-1] for p in seen if p.count(".") >= 2]
    assert len(internal) > 10 * tenants and any(p.endswith(".coord_rates.rate__0__0") for p in seen)
    missing = [n for n in internal if not any(fnmatch.fnmatchcase(n, v) for v in runner.PUBLIC_INTERNAL)]
    assert missing == []
    config = runner.public_config().splitlines()
    assert config[0] == "`verilator_config"
    assert config[1:] == [f'public_flat_rw -module "*" -var "{v}"' for v in runner.PUBLIC_INTERNAL]
