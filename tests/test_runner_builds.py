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


def test_the_suite_builds_verilator_at_O0():
    # tests/conftest.py sets it for every run without --run-soak.
    assert runner.verilator_opt() == "-O0"


def test_a_run_asking_for_waves_on_a_build_without_tracing_is_refused(tmp_path):
    b = runner.Build(sim="verilator", toplevel="top", build_dir=tmp_path, waves=False)
    with pytest.raises(ValueError, match="no tracing compiled in"):
        runner.run(b, "kvfabric.tb.tests.cosim_tests", tmp_path / "run", vcd=tmp_path / "dump.vcd")
