"""The trace-driven co-simulation (tb/trace_*.py, issue #16 item 5), short.

``make soak`` runs it for millions of cycles; here 20k cycles of the same
random soak stimulus on the 4-tenant, 2-channel build on each simulator, the
grant log compared with the model's.  The comparison itself must be able to
fail: a log with one grant changed, dropped or added, or a register write
moved, is reported at the right cycle, channel and field.
"""

import random
from collections import Counter
from dataclasses import replace

import pytest

from kvfabric.model.trace import TraceError, TraceRow, read_log, read_trace
from kvfabric.spec import FabricParams
from kvfabric.tb.axil import COORD, CREDITS
from kvfabric.tb.runner import node_dir, sims_from_env
from kvfabric.tb.trace_check import run_check
from kvfabric.tb.trace_compare import SimLog, first_mismatch, read_sim_log
from kvfabric.tb.trace_format import (MODE, REQ_FILE_MAGIC, REQ_RECORD_BYTES, RESET, SEED, TRACE, WRITE,
                                      Event, draw, index_file, read_stimulus, trace_file, write_stimulus)
from kvfabric.tb.trace_model import StimulusError, model_log
from kvfabric.tb.trace_stimulus import coordinator_stimulus, soak_stimulus

pytestmark = pytest.mark.cosim

SMALL = FabricParams(tenants=4, channels=2)
CYCLES = 20_000


@pytest.mark.parametrize("sim", sims_from_env())
def test_trace_cosim_matches_model(sim, seed, request):
    """20k cycles of the soak stimulus (reconfiguration, FCFS, idle, backpressure,
    credit returns, resets) give the model's grant log exactly, and the stimulus
    did exercise what it is for."""
    events, rows = soak_stimulus(SMALL, seed, CYCLES, tail=4000, max_span=2500)
    ops = {e.op for e in events}
    assert {TRACE, WRITE, MODE} <= ops and len(rows) > 100
    lines = []
    res = run_check(SMALL, events, rows, [sim], node_dir(request.node.nodeid), jobs=1, log=lines.append,
                    progress_every=4096)
    s = res.sims[0]
    # The testbench's progress lines, every 4096 cycles (issue #24), reach the log.
    progress = [ln for ln in lines if ln.startswith(f"[trace-check] {sim}: cycle ")]
    assert [int(ln.split()[3].rstrip(",").replace(",", "")) for ln in progress] == list(
        range(4096, res.cycles + 1, 4096)), progress
    assert s.mismatch is None, f"{s.mismatch} (seed {seed}; logs in {s.log.parent})"
    assert s.grants == res.model_grants > 100
    assert res.waiting_at_end == 0, "the drainable tail left requests waiting"
    kinds = {g[5] for g in read_sim_log(s.log).grants}
    assert len(kinds) >= 2, kinds
    assert sum(e.op == MODE for e in events) >= 4, "several phases" 


@pytest.mark.parametrize("sim", sims_from_env())
def test_trace_cosim_coordinator(sim, seed, request):
    """The coordinator on (spec §13) with the shortest epoch and skewed
    traffic (tenant 0 on channel 0 only) for two epochs and their results'
    windows, a COMMIT discarding one tenant's result, then off: the RTL's
    grant log is the model's (its channels in lockstep with the model's
    coordinator), and the coordinator did change it (the same program with
    COORD.coord_enable = 0 gives another log)."""
    events, rows = coordinator_stimulus(SMALL, seed)
    res = run_check(SMALL, events, rows, [sim], node_dir(request.node.nodeid), jobs=1, log=lambda _: None,
                    progress_every=0)
    s = res.sims[0]
    assert s.mismatch is None, f"{s.mismatch} (seed {seed}; logs in {s.log.parent})"
    assert s.grants == res.model_grants > 1000
    assert res.waiting_at_end == 0
    off = [replace(e, b=e.b & ~1) if e.op == WRITE and e.a == COORD else e for e in events]
    assert model_log(SMALL, off, rows).grants != model_log(SMALL, events, rows).grants


@pytest.mark.parametrize("sim", sims_from_env())
def test_testbench_rules_are_the_models(sim, seed, request, tmp_path):
    """Spec §8's upstream driver and memory side are written once
    (model/replay.py); the plain-Verilog testbench's translation drives, in
    every cycle of a soak stimulus (idle draws, backpressure, credit returns,
    FCFS phases, resets, full queues, held requests), exactly the inputs the
    Python rule drives for the same RTL outputs.  And the check can fail: a
    changed input is reported at its line, cycle, channel and field."""
    from kvfabric.tb.trace_check import IO_FIELDS, check_driver_rule
    from kvfabric.tb.trace_tb import build_trace_tb, run_trace_tb

    events, rows = soak_stimulus(SMALL, seed, 8000, tail=1500, max_span=1500)
    # Backlogs deeper than a queue on every channel, so queues fill up, the last
    # one behind an FCFS driver (strictly the first request: held while its
    # queue is full), with idle cycles, backpressure and credit returns.
    events = sorted(events + [Event(MODE, 5400, 1, 1000, 800, 400)], key=lambda e: e.cycle)
    deep = [(cyc, c, tenant, 64) for cyc in (1500, 3500, 5500)
            for c in range(SMALL.channels) for tenant in (0, 1) for _ in range(12)]
    merged = sorted([(r.cycle, r.channel, r.tenant, r.bytes) for r in rows] + deep, key=lambda q: q[0])
    rows = [TraceRow(k, *q) for k, q in enumerate(merged)]
    work = node_dir(request.node.nodeid)
    work.mkdir(parents=True, exist_ok=True)
    stim, io = work / "stimulus.txt", work / "io.log"
    write_stimulus(stim, events, rows, SMALL)
    run_trace_tb(build_trace_tb(SMALL, sim), stim, work / "grants.log", io_log=io)
    checked = check_driver_rule(SMALL, stim, io)
    lines = [ln.split()[1:] for ln in io.read_text().splitlines()]
    col = {name: [int(ln[k]) for ln in lines] for k, name in enumerate(IO_FIELDS)}
    assert checked == len(lines) > 2 * 6000
    # What the rules had to react to did happen.
    assert any(q for q in col["queue_full"]), "no queue ever full"
    assert any(v and not r for v, r in zip(col["valid"], col["req_ready"])), "no request ever held"
    assert any(col["credit_return"]) and not all(col["grant_ready"])
    # A changed driven value is reported where it is.
    k = next(i for i, v in enumerate(col["valid"]) if v)
    for name, flip in (("valid", 1), ("payload", 16), ("grant_ready", 1), ("credit_return", 2)):
        bad = [list(ln) for ln in lines]
        pos = IO_FIELDS.index(name)
        bad[k][pos] = str(int(bad[k][pos]) ^ flip)
        path = tmp_path / f"io-{name}.log"
        path.write_text("".join("I " + " ".join(ln) + "\n" for ln in bad))
        with pytest.raises(AssertionError, match=rf"io-{name}.log:{k + 1}: cycle {lines[k][0]} "
                                                 rf"channel {lines[k][1]}: the testbench drives {name} "):
            check_driver_rule(SMALL, stim, path)


def _model_and_log(seed):
    run = model_log(SMALL, *soak_stimulus(SMALL, seed, 6000, tail=2000))
    log = SimLog(list(run.grants), list(run.writes), run.end, None)
    return run, log


def test_corrupted_logs_are_reported(seed):
    """The comparison is not vacuous: each kind of corruption of a log that matches
    is found, at the corrupted grant's cycle and channel, naming the field."""
    run, log = _model_and_log(seed)
    assert first_mismatch(run, log, SMALL.channels) is None
    assert len(log.grants) > 20
    k = len(log.grants) // 2
    g = log.grants[k]
    # The index of the grant among its channel's grants, as the report counts.
    index = sum(1 for x in log.grants[:k] if x[1] == g[1])
    for field, pos, value in (("tenant", 2, (g[2] + 1) % SMALL.tenants), ("bytes", 3, g[3] + 1),
                              ("id", 4, g[4] ^ 1), ("kind", 5, (g[5] + 1) % 4), ("cycle", 0, g[0] + 1)):
        bad = list(log.grants)
        bad[k] = g[:pos] + (value,) + g[pos + 1:]
        m = first_mismatch(run, replace(log, grants=bad), SMALL.channels)
        assert m is not None and m.field == field and m.channel == g[1] and m.index == index, (field, m)
        assert m.cycle == g[0], (field, m)
    m = first_mismatch(run, replace(log, grants=log.grants[:k] + log.grants[k + 1:]), SMALL.channels)
    assert m is not None and m.channel == g[1] and m.cycle <= g[0], m
    m = first_mismatch(run, replace(log, grants=log.grants + [(run.end - 1, 0, 0, 64, 7, 0)]),
                       SMALL.channels)
    assert m is not None and m.field == "grant" and m.actual.startswith("a grant"), m
    w = log.writes[3]
    m = first_mismatch(run, replace(log, writes=log.writes[:3] + [(w[0] + 1, w[1])] + log.writes[4:]),
                       SMALL.channels)
    assert m is not None and m.field.startswith("AXI write") and m.cycle == w[0], m
    m = first_mismatch(run, replace(log, end=run.end - 1), SMALL.channels)
    assert m is not None and m.field == "end of run", m


def test_model_reacts_to_the_stimulus(seed):
    """The model's log depends on what the testbench would see: a changed seed of
    the per-cycle draws or a reset moves grants (so equal logs are not trivial)."""
    events, rows = soak_stimulus(SMALL, seed, 6000, tail=2000)
    base = model_log(SMALL, events, rows).grants
    reseeded = [replace(e, a=e.a ^ 1) if e.op == SEED else e for e in events]
    assert model_log(SMALL, reseeded, rows).grants != base or all(
        e.b == e.c == e.d == 0 for e in events if e.op == MODE)
    reset = Event(RESET, rows[0].cycle + 50, 2)
    with_reset = sorted(events + [reset], key=lambda e: e.cycle)
    assert model_log(SMALL, with_reset, rows).grants != base
    # The trace is what arrives: a later TRACE start moves grants.
    later = [replace(e, cycle=e.cycle + 7) if e.op == TRACE else e for e in events]
    assert model_log(SMALL, sorted(later, key=lambda e: e.cycle), rows).grants != base


def _read_index(path, channels):
    """The index by its documented layout (trace_format's docstring)."""
    raw = path.read_bytes()
    assert len(raw) % REQ_RECORD_BYTES == 0
    recs = [tuple(int(x) for x in raw[k:k + REQ_RECORD_BYTES].split())
            for k in range(0, len(raw), REQ_RECORD_BYTES)]
    nq = channels * 16
    assert recs[0][0] == channels and recs[0][2] == REQ_FILE_MAGIC
    queues = {}
    for q in range(nq):
        first, length, name = recs[1 + q]
        assert name == q
        queues[q] = recs[1 + nq + first:1 + nq + first + length]
    assert sum(map(len, queues.values())) == len(recs) - 1 - nq == recs[0][1]
    return queues


def test_stimulus_files_round_trip_and_errors(tmp_path):
    """The program round-trips; its requests are a CSV trace that model/trace.py
    reads back (the one trace format); the index names, per (channel, tag) in
    row order, each row and the byte where its line starts in that CSV."""
    events, rows = soak_stimulus(SMALL, 3, 3000, tail=1000)
    path = tmp_path / "s.txt"
    assert write_stimulus(path, events, rows, SMALL) == len(events)
    assert read_stimulus(path, SMALL) == (events, rows)
    assert read_trace(trace_file(path), SMALL) == rows
    queues = _read_index(index_file(path), SMALL.channels)
    raw = trace_file(path).read_bytes()
    expected = {q: [] for q in queues}
    for r in rows:
        q = r.channel * 16 + r.tenant
        at = raw.index(f"\n{r.cycle},{r.channel},{r.tenant},{r.bytes}\n".encode(),
                       expected[q][-1][1] if expected[q] else 0) + 1
        expected[q].append((r.id, at, q))
    assert queues == expected and len(rows) > 10
    for r in rows:
        (rec,) = [x for x in queues[r.channel * 16 + r.tenant] if x[0] == r.id]
        line = raw[rec[1]:raw.index(b"\n", rec[1])].decode()
        assert line == f"{r.cycle},{r.channel},{r.tenant},{r.bytes}"
    path.write_text("5 10 0 1 64 0\n")
    with pytest.raises(ValueError, match=r"s.txt:1: expected 7 fields"):
        read_stimulus(path, SMALL)
    with pytest.raises(ValueError, match="must be sorted"):
        write_stimulus(path, [Event(WRITE, 5), Event(WRITE, 4)], [], SMALL)
    # A row the design cannot take is refused as any trace's is: file, line, field, range.
    with pytest.raises(TraceError, match=r"s\.csv:3: channel = 2 out of range 0\.\.1"):
        write_stimulus(path, [Event(TRACE, 0)], [TraceRow(0, 5, 1, 3, 64), TraceRow(1, 6, 2, 0, 64)], SMALL)
    with pytest.raises(TraceError, match=r"s\.csv:2: tenant = 16 out of range 0\.\.15"):
        write_stimulus(path, [Event(TRACE, 0)], [TraceRow(0, 5, 1, 16, 64)], SMALL)
    with pytest.raises(TraceError, match=r"2 TRACE events"):
        write_stimulus(path, [Event(TRACE, 0), Event(TRACE, 3)], [], SMALL)
    with pytest.raises(StimulusError, match="no END"):
        model_log(SMALL, [Event(TRACE, 1)], [TraceRow(0, 0, 0, 0, 64)])


def test_draw_is_splitmix64():
    """The per-cycle draw is splitmix64's output for state seed + (i+1) * golden,
    i = cycle * channels + channel (reference values of the published algorithm:
    seed 0 gives 0xE220A8397B1DCDAF first)."""
    assert draw(0, 0, 0, 1) == 0xE220A8397B1DCDAF
    assert draw(0, 0, 1, 2) == draw(0, 1, 0, 1)


# --- the engines against each other (issue #24) ---------------------------------------

#: Narrow tags (T = 12: the idle gaps of random_trace exceed the tag range and the
#: lag window within a few thousand cycles) and LMAX = 256 (tests/test_cosim.py's
#: NARROW).  Ids stay 16 bits: the cocotb scoreboard tracks requests by port id
#: (row index mod 2^id_width), and narrow ids with deep backlogs would repeat
#: one among the requests in flight.
DIFF = FabricParams(tenants=4, channels=2, max_request_bytes=256, tag_bits=12)


def _within_wrap_bound(params, config):
    """``config`` with every ``inv_weight`` capped so that the largest request's cost
    stays below a third of the lag window (spec §6.5's condition for modular tag
    comparison; with T = 12 and LMAX = 256 random_config's weights up to 65535
    break it, and then the model and the RTL may order differently)."""
    unit = 1 << (params.wfrac + params.tag_shift)  # inv_weight x bytes per tag unit
    cap = (params.lag_window - 1) // 3 * unit // params.max_request_bytes
    assert 3 * -(-params.max_request_bytes * cap // unit) < params.lag_window
    return replace(config, tenants=[replace(t, inv_weight=min(t.inv_weight, cap)) for t in config.tenants])


def _differential(seed, request, *, requests, deep, gaps):
    from fractions import Fraction

    from kvfabric.tb.runner import node_dir
    from kvfabric.tb.stimulus import random_config, random_credits, random_trace
    from kvfabric.tb.trace_check import differential_check

    rng = random.Random(seed)
    config = _within_wrap_bound(DIFF, random_config(DIFF, rng, fcfs=int(rng.random() < 0.2)))
    credited = replace(config, fcfs_bypass=0, credits=tuple(max(1, c) for c in random_credits(rng)),
                       bulk_prio=rng.randrange(16))
    bpc = Fraction(rng.choice([16, 32, 64, 100]), rng.choice([1, 3]))
    # The deep backlog on tenant 0, which random_config always enables.
    rows = random_trace(DIFF, rng, requests, deep=deep, deep_tenant=0, gaps=gaps)
    print(f"[differential] seed {seed}: {len(rows):,} requests, B = {bpc} bytes/cycle, "
          f"fcfs {config.fcfs_bypass}, credits {credited.credits} bulk_prio {credited.bulk_prio:#x}")
    res = differential_check(DIFF, config, rows, bpc, sims_from_env(), node_dir(request.node.nodeid),
                             credit_config=credited, credit_return=0.1, seed=seed)
    return rows, config, credited, res


def _check_differential(seed, rows, config, credited, res, *, deep):
    assert res.ok, (f"engines differ (seed {seed}): replay {res.replay_same}, with credits "
                    f"{res.credit_same}; logs in {res.replay_logs['model'].parent}")
    assert set(res.replay_same) == set(res.credit_same) == set(sims_from_env())
    log = read_log(res.replay_logs["model"])
    granted = [r for r in log if r.grant_cycle is not None]
    # The trace did exercise what it is for.
    assert res.max_waiting >= deep, res.max_waiting
    assert {1, DIFF.max_request_bytes} <= {r.bytes for r in granted}
    assert any(r.tenant >= DIFF.tenants for r in log) and any(r.grant_cycle is None for r in log)
    gap = max(b.cycle - a.cycle for a, b in zip(rows, rows[1:]))
    assert gap > 1 << DIFF.tag_bits, gap
    per_cycle = Counter(r.cycle for r in rows)
    deep_cycle = per_cycle.most_common(1)[0][0]
    assert max(v for c, v in per_cycle.items() if c != deep_cycle) >= 4, "no burst in one cycle"
    # With credits every valid request was granted, and the credits did throttle:
    # the same stimulus with CREDITS 0 gives another log in the model.
    check = res.credit_check
    n_valid = sum(1 for r in rows if r.tenant < DIFF.tenants and credited.tenants[r.tenant].enable
                  and 0 < r.bytes <= DIFF.max_request_bytes)
    assert check.model_grants == n_valid and check.waiting_at_end == 0
    stim, trace = read_stimulus(check.sims[0].log.parent / "stimulus.txt", DIFF)
    assert trace == rows
    free = [replace(e, b=e.b & ~0xFFFFFF) if e.op == WRITE and e.a == CREDITS else e for e in stim]
    assert model_log(DIFF, free, rows).grants != model_log(DIFF, stim, rows).grants, "credits changed nothing"


def test_differential_engines(seed, request):
    """Random traces (a deep backlog on one channel and tenant, bursts in one cycle,
    minimum and maximum sizes, invalid tags and sizes, idle gaps longer than the
    tag range) give byte-identical grant logs from the model engine and from
    Icarus and Verilator through the trace testbench; and, with CREDITS limits,
    bulk priorities, backpressure and late credit returns, from the trace model
    and both simulators.  Short and fixed-seed here; ``make soak`` runs it long."""
    rows, config, credited, res = _differential(seed, request, requests=1000, deep=300, gaps=2)
    _check_differential(seed, rows, config, credited, res, deep=300)


@pytest.mark.soak
@pytest.mark.parametrize("round_", range(4))
def test_differential_engines_soak(seed, request, round_):
    """``make soak``: the differential check on four longer traces of 30 k requests,
    each with 12 k of them waiting at once on one channel and tenant (each round
    its own seed, printed)."""
    rows, config, credited, res = _differential(seed, request, requests=30_000, deep=12_000, gaps=4)
    _check_differential(seed, rows, config, credited, res, deep=12_000)
