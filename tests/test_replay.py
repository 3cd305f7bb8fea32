"""Trace replay through the golden model: the service rule and the log's invariants."""

import dataclasses
import random
import subprocess
import sys
from fractions import Fraction

import pytest

from kvfabric.spec import KIND_NAMES, FabricParams
from kvfabric.model.contract import compile_contract
from kvfabric.model.replay import MemorySide, ReplayError, grant_log, replay_lockstep, replay_model
from kvfabric.model.trace import LogRow, TraceError, TraceRow, parse_trace, read_log
from kvfabric.tb.stimulus import random_trace

CONTRACT = {
    "fabric": {"clock_mhz": 1000, "channels": 4, "channel_gbps": 64, "admission_limit": 0.85},
    "tenant": [
        {"id": i, "name": f"t{i}", "guaranteed_gbps": g, "burst_gbps": b, "burst_duration_ms": 0.01,
         "priority": pr, "latency_slo_us": 0.2}
        for i, (g, b, pr) in enumerate([(40, 256, 0), (60, 128, 1), (20, 40, 1), (60, 256, 2)])
    ],
}


@pytest.mark.parametrize("fcfs", [0, 1])
def test_replay_invariants(seed, fcfs):
    rng = random.Random(seed)
    compiled = compile_contract(CONTRACT)
    config = compiled.config
    config.fcfs_bypass = fcfs
    p = compiled.params
    # The library's trace (bursts, sizes 1 and LMAX, 2 % invalid requests), no idle gaps.
    rows = random_trace(p, rng, 1500, gaps=0)
    log = replay_model(p, config, rows, compiled.bytes_per_cycle).log
    mem = MemorySide(p.channels, compiled.bytes_per_cycle)

    # Every request appears exactly once, in id order, with its own fields.
    assert [r.id for r in log] == [r.id for r in rows]
    for row, entry in zip(rows, log):
        assert (entry.arrival_cycle, entry.channel, entry.tenant, entry.bytes) == \
               (row.cycle, row.channel, row.tenant, row.bytes)
        # Tenants 4.. are not contracted (disabled); sizes 0 and above LMAX are invalid (spec §4).
        invalid = row.tenant >= 4 or not 0 < row.bytes <= p.max_request_bytes
        assert (entry.kind == "dropped") == invalid, entry
        if not invalid:
            assert entry.grant_cycle >= entry.arrival_cycle + 3, "faster than the 3-cycle latency"
            assert entry.kind == ("fcfs" if fcfs else entry.kind)
            assert entry.kind in (("fcfs",) if fcfs else ("guaranteed", "burst"))

    granted = [e for e in log if e.grant_cycle is not None]
    # The trace exercised drops and every channel.
    assert len(granted) < len(log) and {e.channel for e in granted} == set(range(p.channels))
    for c in range(p.channels):
        mine = sorted((e for e in granted if e.channel == c), key=lambda e: e.grant_cycle)
        # One grant per channel per cycle, none while the memory side is busy.
        for a, b in zip(mine, mine[1:]):
            assert b.grant_cycle >= a.grant_cycle + mem.service_cycles(a.bytes), (a, b)
        # FIFO order per tenant per channel.
        for t in range(4):
            ids = [e.id for e in mine if e.tenant == t]
            assert ids == sorted(ids), f"channel {c} tenant {t} served out of order"
        if fcfs:  # FCFS: the whole channel in arrival order
            assert [e.id for e in mine] == sorted(e.id for e in mine)


def test_fast_replay_equals_lockstep_and_telemetry_matches_log(seed):
    """The fast-forwarding per-channel replay gives exactly the grant log of the
    plain cycle-by-cycle fabric model, whose counters equal sums over that log."""
    rng = random.Random(seed)
    compiled = compile_contract(CONTRACT)
    p = compiled.params
    rows = random_trace(p, rng, 800, gaps=0)
    fast = replay_model(p, compiled.config, rows, compiled.bytes_per_cycle)
    slow, fab = replay_lockstep(p, compiled.config, rows, compiled.bytes_per_cycle)
    assert fast.log == slow.log
    for _ in range(3):  # let the two-stage counter pipeline drain
        fab.step([None] * p.channels, [True] * p.channels)
    live = fab.telemetry.live
    log = slow.log
    for t in range(p.tenants):
        mine = [e for e in log if e.tenant == t and e.grant_cycle is not None]
        assert live.tenants[t].bytes == sum(e.bytes for e in mine)
        assert live.tenants[t].grants == len(mine)
        assert live.tenants[t].burst_grants == sum(e.kind == "burst" for e in mine)
        assert 0 < live.tenants[t].queue_hwm <= p.queue_depth or not mine
    for c in range(p.channels):
        assert live.dropped[c] == sum(1 for e in log if e.channel == c and e.kind == "dropped")


def test_backlog_deeper_than_the_id_space_replays():
    """Port ids are the trace row's index modulo 2^id_width, so a backlog deeper
    than 2^id_width repeats ids among the requests waiting; each grant still
    belongs to the oldest waiting request of its tenant (FIFO order, spec §4), so
    both engines replay such a trace, every request once, in order per tenant."""
    compiled = compile_contract(CONTRACT)
    p = dataclasses.replace(compiled.params, id_width=2)
    rows = [TraceRow(i, i // 40, 0, i % 4, 64 * (1 + i % 3)) for i in range(160)]
    fast = replay_model(p, compiled.config, rows, compiled.bytes_per_cycle)
    slow, _ = replay_lockstep(p, compiled.config, rows, compiled.bytes_per_cycle)
    assert fast.log == slow.log
    assert all(e.grant_cycle is not None for e in fast.log)
    for t in range(4):
        mine = sorted((e for e in fast.log if e.tenant == t), key=lambda e: e.grant_cycle)
        assert [e.id for e in mine] == [r.id for r in rows if r.tenant == t]


def test_stuck_requests_are_an_error():
    """A tenant with zero burst and guaranteed rate gets only the full peak
    bucket it starts with (PCAP = one LMAX request, spec §6.3); its next request
    can never be served: error, not a drop."""
    doc = {"fabric": dict(CONTRACT["fabric"]),
           "tenant": [{"id": 0, "name": "mute", "guaranteed_gbps": 0, "burst_gbps": 0, "weight": 1,
                       "burst_duration_ms": 1, "priority": 0, "latency_slo_us": 1}]}
    compiled = compile_contract(doc)
    rows = [TraceRow(0, 0, 0, 0, compiled.params.max_request_bytes), TraceRow(1, 0, 0, 0, 64)]
    with pytest.raises(ReplayError, match="can never be granted"):
        replay_model(compiled.params, compiled.config, rows, compiled.bytes_per_cycle)


@pytest.mark.parametrize("text, message", [
    ("cycle,channel,tenant\n", "header must be"),
    ("cycle,channel,tenant,bytes\n0,0,0\n", ":2: expected 4 fields"),
    ("cycle,channel,tenant,bytes\n0,0,0,64\n1,x,0,64\n", ":3: channel must be an integer"),
    ("cycle,channel,tenant,bytes\n0,9,0,64\n", ":2: channel = 9 out of range 0..7"),
    ("cycle,channel,tenant,bytes\n0,0,16,64\n", ":2: tenant = 16 out of range 0..15"),
    ("cycle,channel,tenant,bytes\n0,0,1,8192\n", ":2: bytes = 8192 out of range 0..8191"),
    ("cycle,channel,tenant,bytes\n5,0,1,64\n4,0,1,64\n", ":3: cycle 4 is before"),
    ("cycle,channel,tenant,bytes\n-1,0,1,64\n", ":2: cycle = -1 out of range >= 0"),
])
def test_malformed_trace_names_line_and_field(text, message):
    with pytest.raises(TraceError, match=message):
        parse_trace(text.splitlines(keepends=True), FabricParams(), source="t.csv")


def test_cli_replay_end_to_end(tmp_path):
    (tmp_path / "c.toml").write_text("""
[fabric]
clock_mhz = 500
channels = 2
channel_gbps = 32
admission_limit = 0.85
[[tenant]]
id = 0
name = "a"
guaranteed_gbps = 10
burst_gbps = 30
burst_duration_ms = 0.01
priority = 0
latency_slo_us = 1
[[tenant]]
id = 1
name = "b"
guaranteed_gbps = 20
burst_gbps = 64
burst_duration_ms = 0.01
priority = 1
latency_slo_us = 1
""")
    lines = ["cycle,channel,tenant,bytes"] + [f"{i // 3},{i % 2},{i % 2},256" for i in range(200)]
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    out = tmp_path / "g.csv"
    run = subprocess.run([sys.executable, "-m", "kvfabric.cli", "replay", "--config", str(tmp_path / "c.toml"),
                          "--trace", str(tmp_path / "t.csv"), "--out", str(out)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    log = read_log(out)
    assert len(log) == 200 and all(e.grant_cycle is not None for e in log)
    assert "wait p99" in run.stdout
    # A malformed row: exit code 2 and the line number, nothing written over the old log.
    (tmp_path / "bad.csv").write_text("cycle,channel,tenant,bytes\n0,0,0,64\n0,0,zero,64\n")
    run = subprocess.run([sys.executable, "-m", "kvfabric.cli", "replay", "--config", str(tmp_path / "c.toml"),
                          "--trace", str(tmp_path / "bad.csv"), "--out", str(out)],
                         capture_output=True, text=True)
    assert run.returncode == 2
    assert "bad.csv:3: tenant must be an integer" in run.stderr
    assert len(read_log(out)) == 200


def test_memory_service_rule():
    mem = MemorySide(1, Fraction(400))
    assert [mem.service_cycles(s) for s in (1, 400, 401, 4096)] == [1, 1, 2, 11]
    mem = MemorySide(1, Fraction(64, 3))  # 21.33 B/cycle
    assert mem.service_cycles(64) == 3 and mem.service_cycles(65) == 4


def test_grants_are_matched_per_tenant_when_port_ids_repeat():
    """With 8-bit port ids, 600 requests of tenant 0 wait on channel 0 and a
    request of tenant 1 (row 600, port id 88) is granted before tenant 0's row
    88: the testbench replay's conversion to the grant log (model/replay.py
    grant_log) gives each grant to the oldest request of its
    (channel, tenant), not to the oldest with its port id; a grant that is not
    that request's, or of a tenant with none waiting, or before its arrival,
    is an error."""
    burst = next(k for k, name in KIND_NAMES.items() if name == "burst")

    rows = [TraceRow(k, 0, 0, 0, 64) for k in range(600)] + [TraceRow(600, 2, 0, 1, 32),
                                                             TraceRow(601, 2, 0, 9, 64)]

    def valid(r):
        return r.tenant < 4
    grants = [(5 + k, 0, 0, 64, k % 256, 1) for k in range(3)] + [(9, 0, 1, 32, 600 % 256, burst)]
    grants += [(10 + k, 0, 0, 64, k % 256, 2) for k in range(3, 600)]
    log, waiting = grant_log(rows, grants, valid, 8)
    assert waiting == []
    assert log[600] == LogRow(600, 2, 9, 0, 1, 32, "burst")
    assert [r.grant_cycle for r in log[:600]] == [5, 6, 7] + list(range(13, 610))
    assert log[601] == LogRow(601, 2, None, 0, 9, 64, "dropped")
    log, waiting = grant_log(rows, grants[:-1], valid, 8)
    assert waiting == [599] and len(log) == 601
    for bad, message in (((9, 0, 1, 32, 89, 2), "grant of tenant 1 id 89 bytes 32, but its oldest"),
                         ((9, 0, 2, 32, 88, 2), "grant of tenant 2 .id 88. with no request"),
                         ((1, 0, 1, 32, 88, 2), "cycle 1 channel 0: grant of tenant 1 id 88")):
        with pytest.raises(AssertionError, match=message):
            grant_log(rows, grants[:3] + [bad] + grants[4:], valid, 8)
