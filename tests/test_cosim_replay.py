"""``kvfabric replay --engine icarus|verilator`` and ``kvfabric vcd-check`` (issue #4).

The RTL engines must write a grant log byte-identical to the model engine's
for the same trace and contract; the VCD of such a replay, read back with
vcdvcd, must give the same grant log again, and a VCD checked against a
different contract must be reported.
"""

import filecmp
from dataclasses import replace

import pytest

from kvfabric.cli import main as kvfabric
from kvfabric.model.contract import load_contract
from kvfabric.model.replay import replay_model
from kvfabric.model.scenario import essay_trace
from kvfabric.model.trace import TraceError, TraceRow, read_log, write_trace
from kvfabric.tb.runner import sims_from_env
from kvfabric.tb.vcd_check import VcdError, check_vcd, grant_log_from_vcd

pytestmark = pytest.mark.cosim

# 4 tenants on 2 channels (the parameters of tests/test_cosim.py's SMALL build):
# a prefill and two decodes, one uncontracted (disabled) tenant.
CONTRACT = """\
[fabric]
clock_mhz = 1000
channels = 2
tenants = 4
channel_gbps = 64
admission_limit = 0.9
starvation_limit_us = 0.5
epoch_ms = 0.001

[[tenant]]
id = 0
name = "prefill"
guaranteed_gbps = 20
burst_gbps = 100
burst_duration_ms = 0.001
priority = 2
latency_slo_us = 5

[[tenant]]
id = 1
name = "decode-a"
guaranteed_gbps = 12
burst_gbps = 64
burst_duration_ms = 0.002
priority = 1
latency_slo_us = 0.2

[[tenant]]
id = 2
name = "decode-b"
guaranteed_gbps = 12
burst_gbps = 64
burst_duration_ms = 0.002
priority = 1
latency_slo_us = 0.2
"""


def _trace(seed):
    """The essay's shape, small, plus invalid requests and an idle gap (fast-forward)."""
    rows = essay_trace(2, prefill_bytes=64 << 10, prefill_start=100, prefill_issue_per_cycle=2,
                       decode_tenants=(1, 2), decode_step_bytes=2048, step_cycles=300,
                       cycles=1200, seed=seed)
    events = [(r.cycle, r.channel, r.tenant, r.bytes) for r in rows]
    events += [(40, 0, 7, 64), (41, 1, 3, 64), (42, 0, 1, 0), (43, 1, 2, 5000),
               (4000, 1, 1, 256), (4000, 0, 0, 4096), (4001, 0, 2, 33)]
    return [TraceRow(i, *e) for i, e in enumerate(sorted(events))]


@pytest.mark.parametrize("sim", sims_from_env())
def test_replay_and_vcd_check(sim, seed, tmp_path, monkeypatch):
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONTRACT)
    compiled = load_contract(cfg)
    rows = _trace(seed)
    trace = tmp_path / "trace.csv"
    write_trace(trace, rows)

    # The CLI, as a user runs it: model engine, then the RTL engine with waves.
    monkeypatch.chdir(tmp_path)
    assert kvfabric(["replay", "--config", str(cfg), "--trace", str(trace),
                     "--out", "model.csv", "--engine", "model"]) == 0
    assert kvfabric(["replay", "--config", str(cfg), "--trace", str(trace),
                     "--out", "rtl.csv", "--engine", sim, "--waves"]) == 0
    assert filecmp.cmp(tmp_path / "model.csv", tmp_path / "rtl.csv", shallow=False), \
        f"grant logs differ (seed {seed}): see {tmp_path}/model.csv and rtl.csv"
    log = read_log(tmp_path / "rtl.csv")
    assert sum(r.kind == "dropped" for r in log) == 4

    # The VCD tells the same story, with and without the original trace.
    assert check_vcd(tmp_path / "dump.vcd", compiled) == []
    assert check_vcd(tmp_path / "dump.vcd", compiled, trace=trace) == []
    assert kvfabric(["vcd-check", "--vcd", "dump.vcd", "--config", str(cfg)]) == 0
    rebuilt, _ = grant_log_from_vcd(tmp_path / "dump.vcd", compiled.params, rows)
    assert rebuilt == log

    # ... and a VCD checked against another contract is caught.
    other = replace(compiled, config=replace(compiled.config, fcfs_bypass=1))
    bad = check_vcd(tmp_path / "dump.vcd", other, trace=trace)
    assert bad and all(m.startswith("request ") for m in bad), bad[:3]


def test_vcd_check_reports_a_missing_vcd_port(tmp_path):
    """A VCD without the top level's ports is an error naming them, not a crash."""
    vcd = tmp_path / "empty.vcd"
    vcd.write_text("$timescale 1ps $end\n$scope module top $end\n$var wire 1 ! clk $end\n"
                   "$upscope $end\n$enddefinitions $end\n#0\n0!\n#5\n1!\n")
    compiled = load_contract_text(tmp_path, CONTRACT)
    msgs = check_vcd(vcd, compiled)
    assert len(msgs) == 1 and "has no top-level signal" in msgs[0] and "rst" in msgs[0]


def load_contract_text(tmp_path, text):
    p = tmp_path / "c.toml"
    p.write_text(text)
    return load_contract(p)


def test_model_engine_reference(tmp_path):
    """The trace used above keeps every mechanism busy in the model (a sanity check
    of the stimulus itself, independent of any simulator)."""
    compiled = load_contract_text(tmp_path, CONTRACT)
    log = replay_model(compiled.params, compiled.config, _trace(1), compiled.bytes_per_cycle).log
    kinds = {r.kind for r in log}
    assert {"guaranteed", "burst", "dropped"} <= kinds


@pytest.mark.parametrize("sim", sims_from_env())
def test_vcd_check_of_a_cosim_dump(sim, seed, tmp_path, request):
    """A ``WAVES=1`` dump of a co-simulation test (AXI programming, reads, resets in
    mid-burst) passes the port-level lockstep check; a corrupted grant is caught."""
    from kvfabric.tb.design import run_cosim
    from kvfabric.tb.runner import node_dir
    from kvfabric.tb.vcd_check import lockstep_vcd, sample_ports

    compiled = load_contract_text(tmp_path, CONTRACT)
    d = node_dir(request.node.nodeid)
    run_cosim(compiled.params, sim, "reset_mid_burst", d, seed=seed, waves=True)
    vcd = d / "dump.vcd"
    assert check_vcd(vcd, compiled) == []
    samples = sample_ports(vcd, compiled.params)
    k = next(k for k, s in enumerate(samples) if s["grant__1__valid"] and not s["rst"])
    samples[k]["grant__1__payload"] ^= 1 << 4  # one bit of the granted bytes
    msgs = lockstep_vcd(vcd, compiled.params, samples)
    assert len(msgs) == 1 and "channel 1 field grant.bytes" in msgs[0], msgs


@pytest.mark.parametrize("sim", sims_from_env())
def test_replay_trace_tb_equals_model(sim, seed, tmp_path, monkeypatch):
    """Without ``--waves`` the RTL engines take the trace-driven testbench
    (tb/trace_tb.py, no Python per cycle); its grant log is byte-identical to
    the model engine's too."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONTRACT)
    trace = tmp_path / "trace.csv"
    write_trace(trace, _trace(seed))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("WAVES", raising=False)
    assert kvfabric(["replay", "--config", str(cfg), "--trace", str(trace),
                     "--out", "model.csv", "--engine", "model"]) == 0
    assert kvfabric(["replay", "--config", str(cfg), "--trace", str(trace),
                     "--out", "rtl.csv", "--engine", sim]) == 0
    assert filecmp.cmp(tmp_path / "model.csv", tmp_path / "rtl.csv", shallow=False), \
        f"grant logs differ (seed {seed}): see {tmp_path}/model.csv and rtl.csv"
    assert not (tmp_path / "dump.vcd").exists(), "the trace-driven path writes no VCD"
    log = read_log(tmp_path / "rtl.csv")
    assert sum(r.kind == "dropped" for r in log) == 4
    assert {"guaranteed", "burst"} <= {r.kind for r in log}


#: Requests of (channel 0, tenant 0) that all arrive in cycle 0 (issue #24: the
#: trace testbench used to stop at 1,024 waiting per channel and tenant).
DEEP = 12_000


def _deep_trace():
    """DEEP minimum-cost requests of the prefill on channel 0 at cycle 0, a decode
    beside it on the same channel, a maximum-size request on channel 1 and
    invalid ones (an unconfigured tag, a tag outside N, size 0 and LMAX + 1)."""
    events = [(0, 0, 0, 64)] * DEEP + [(7 * k, 0, 1, 256) for k in range(300)]
    events += [(5, 1, 2, 4096), (9, 0, 9, 64), (11, 0, 3, 64), (12, 0, 1, 0), (13, 1, 2, 4097)]
    return [TraceRow(i, *e) for i, e in enumerate(sorted(events, key=lambda e: e[0]))]


@pytest.mark.parametrize("sim", sims_from_env())
def test_replay_deep_backlog(sim, tmp_path, monkeypatch):
    """More than 10 k requests waiting on one (channel, tenant): ``kvfabric replay
    --engine <sim>`` without ``--waves`` (the trace testbench) writes the model
    engine's grant log byte for byte."""
    import time
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONTRACT)
    trace = tmp_path / "trace.csv"
    write_trace(trace, _deep_trace())
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("WAVES", raising=False)
    assert kvfabric(["replay", "--config", str(cfg), "--trace", str(trace),
                     "--out", "model.csv", "--engine", "model"]) == 0
    t0 = time.monotonic()
    assert kvfabric(["replay", "--config", str(cfg), "--trace", str(trace),
                     "--out", "rtl.csv", "--engine", sim]) == 0
    print(f"[deep backlog] {sim}: {time.monotonic() - t0:.1f} s (build included if not cached)")
    assert filecmp.cmp(tmp_path / "model.csv", tmp_path / "rtl.csv", shallow=False), \
        f"grant logs differ: see {tmp_path}/model.csv and rtl.csv"
    log = read_log(tmp_path / "rtl.csv")
    first = min(r.grant_cycle for r in log if (r.channel, r.tenant) == (0, 0))
    waiting = sum(1 for r in log if (r.channel, r.tenant) == (0, 0) and r.arrival_cycle <= first)
    assert waiting > 10_000, waiting
    assert sum(r.kind == "dropped" for r in log) == 4
    assert sum(r.grant_cycle is not None and r.bytes == 4096 for r in log) == 1


def test_rtl_replay_refuses_what_the_verilog_cannot_take(tmp_path, monkeypatch, capsys):
    """A trace row outside the generated Verilog (a channel it does not have, a
    size wider than its bytes field) is refused before anything is built or
    simulated, by the one trace reader (model/trace.py) reading the trace the
    testbench would read: its file, line, field and allowed range; so is a CSV
    naming a channel beyond the contract's, from the command line."""
    from kvfabric.tb import replay_engine, trace_tb

    def no_build(*args, **kwargs):
        raise AssertionError("built a simulator for a trace it cannot take")
    monkeypatch.setattr(trace_tb, "build_trace_tb", no_build)
    compiled = load_contract_text(tmp_path, CONTRACT)
    p = compiled.params
    for bad, message in ((TraceRow(1, 3, 2, 0, 64), r"channel = 2 out of range 0\.\.1"),
                         (TraceRow(1, 3, 0, 0, 1 << p.bytes_bits),
                          rf"bytes = {1 << p.bytes_bits} out of range 0\.\.{(1 << p.bytes_bits) - 1}")):
        with pytest.raises(TraceError, match=rf"stimulus\.csv:3: {message}$"):
            replay_engine.replay_trace_tb(p, compiled.config, [TraceRow(0, 0, 0, 0, 64), bad], "icarus",
                                          bytes_per_cycle=compiled.bytes_per_cycle, work_dir=tmp_path)
    trace = tmp_path / "t.csv"
    trace.write_text("cycle,channel,tenant,bytes\n0,0,0,64\n5,2,1,64\n")
    monkeypatch.chdir(tmp_path)
    assert kvfabric(["replay", "--config", str(tmp_path / "c.toml"), "--trace", str(trace),
                     "--out", "g.csv", "--engine", "icarus"]) == 2
    assert "t.csv:3: channel = 2 out of range 0..1" in capsys.readouterr().err


def test_vcd_grants_are_matched_per_tenant_when_port_ids_repeat():
    """The VCD's grant log pairs requests and grants by the replay's one rule
    (model/replay.py InFlight.take): with 2-bit port ids, tenant 1's row 5 (port
    id 1) is granted before tenant 0's row 1 (port id 1 too) and each grant still
    finds its own request; an accepted invalid request (size 0) is dropped and
    does not hold up its tenant's later grants; a grant no request explains is
    an error naming its cycle and channel."""
    from kvfabric.spec import FabricParams
    from kvfabric.tb.monitor import Layouts

    p = FabricParams(tenants=4, channels=1, id_width=2)
    lay = Layouts.of(p)
    bb, iw = p.bytes_bits, p.id_width
    rows = [TraceRow(k, 0, 0, 0 if k != 5 else 1, 0 if k == 2 else 64 * (k + 1)) for k in range(7)]
    idle = {"rst": 0, "s_axil__awvalid": 0, "s_axil__awready": 0, "s_axil__awaddr": 0, "s_axil__wvalid": 0,
            "s_axil__wready": 0, "s_axil__wdata": 0, "s_axil__bvalid": 0, "s_axil__bready": 0,
            "req__0__valid": 0, "req__0__ready": 0, "req__0__payload": 0,
            "grant__0__valid": 0, "grant__0__ready": 0, "grant__0__payload": 0}
    samples = [dict(idle) for _ in range(20)]
    for k, r in enumerate(rows):  # accepted one per cycle, in row order
        samples[k].update({"req__0__valid": 1, "req__0__ready": 1,
                           "req__0__payload": lay.pack_req(r.tenant, r.bytes, r.id & 3)})

    def grant(cycle, r, kind=1):
        samples[cycle].update({"grant__0__valid": 1, "grant__0__ready": 1, "grant__0__payload":
                               r.tenant | r.bytes << 4 | (r.id & 3) << (4 + bb) | kind << (4 + bb + iw)})
    order = [5, 0, 1, 3, 4, 6]  # row 2 (size 0) is dropped
    for k, i in enumerate(order):
        grant(8 + k, rows[i])
    log, _ = grant_log_from_vcd(None, p, rows, samples=samples)
    assert [(r.id, r.grant_cycle) for r in log] == [(0, 9), (1, 10), (2, None), (3, 11), (4, 12), (5, 8),
                                                    (6, 13)]
    assert log[2].kind == "dropped"
    grant(15, TraceRow(9, 0, 0, 2, 64))
    with pytest.raises(VcdError, match=r"cycle 15 channel 0: grant of tenant 2 \(id 1\) with no request"):
        grant_log_from_vcd(None, p, rows, samples=samples)
