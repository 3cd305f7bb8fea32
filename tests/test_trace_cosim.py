"""The trace-driven co-simulation (tb/trace_*.py, issue #16 item 5), short.

``make soak`` runs it for millions of cycles; here 20k cycles of the same
random soak stimulus on the 4-tenant, 2-channel build on each simulator, the
grant log compared with the model's.  The comparison itself must be able to
fail: a log with one grant changed, dropped or added, or a register write
moved, is reported at the right cycle, channel and field.
"""

from dataclasses import replace

import pytest

from kvfabric.spec import FabricParams
from kvfabric.tb.runner import node_dir, sims_from_env
from kvfabric.tb.trace_check import run_check
from kvfabric.tb.trace_compare import SimLog, first_mismatch, read_sim_log
from kvfabric.tb.trace_format import (MODE, REQ, REQ_FILE_MAGIC, REQ_RECORD_BYTES, RESET, SEED, WRITE,
                                      Event, draw, read_stimulus, request_file, write_stimulus)
from kvfabric.tb.trace_model import StimulusError, model_log
from kvfabric.tb.trace_stimulus import soak_stimulus

pytestmark = pytest.mark.cosim

SMALL = FabricParams(tenants=4, channels=2)
CYCLES = 20_000


@pytest.mark.parametrize("sim", sims_from_env())
def test_trace_cosim_matches_model(sim, seed, request):
    """20k cycles of the soak stimulus (reconfiguration, FCFS, idle, backpressure,
    credit returns, resets) give the model's grant log exactly, and the stimulus
    did exercise what it is for."""
    events = soak_stimulus(SMALL, seed, CYCLES, tail=4000, max_span=2500)
    ops = {e.op for e in events}
    assert {REQ, WRITE, MODE} <= ops
    res = run_check(SMALL, events, [sim], node_dir(request.node.nodeid), jobs=1)
    s = res.sims[0]
    assert s.mismatch is None, f"{s.mismatch} (seed {seed}; logs in {s.log.parent})"
    assert s.grants == res.model_grants > 100
    assert res.waiting_at_end == 0, "the drainable tail left requests waiting"
    kinds = {g[5] for g in read_sim_log(s.log).grants}
    assert len(kinds) >= 2, kinds
    assert sum(e.op == MODE for e in events) >= 4, "several phases" 


def _model_and_log(seed):
    events = soak_stimulus(SMALL, seed, 6000, tail=2000)
    run = model_log(SMALL, events)
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
    events = soak_stimulus(SMALL, seed, 6000, tail=2000)
    base = model_log(SMALL, events).grants
    reseeded = [replace(e, a=e.a ^ 1) if e.op == SEED else e for e in events]
    assert model_log(SMALL, reseeded).grants != base or all(
        e.b == e.c == e.d == 0 for e in events if e.op == MODE)
    first_req = next(e for e in events if e.op == REQ)
    reset = Event(RESET, first_req.cycle + 50, 2)
    with_reset = sorted(events + [reset], key=lambda e: e.cycle)
    assert model_log(SMALL, with_reset).grants != base


def _read_request_file(path, channels):
    """The request file by its documented layout (trace_format's docstring)."""
    raw = path.read_bytes()
    assert len(raw) % REQ_RECORD_BYTES == 0
    recs = [tuple(int(x) for x in raw[k:k + REQ_RECORD_BYTES].split())
            for k in range(0, len(raw), REQ_RECORD_BYTES)]
    nq = channels * 16
    assert recs[0] == (channels, 16, REQ_FILE_MAGIC)
    queues = {}
    for q in range(nq):
        first, length, name = recs[1 + q]
        assert name == q
        queues[q] = recs[1 + nq + first:1 + nq + first + length]
    assert sum(map(len, queues.values())) == len(recs) - 1 - nq
    return queues


def test_stimulus_file_round_trip_and_errors(tmp_path):
    events = soak_stimulus(SMALL, 3, 3000, tail=1000)
    path = tmp_path / "s.txt"
    assert write_stimulus(path, events, SMALL.channels) == len(events)
    assert list(read_stimulus(path)) == events
    # The request file holds every request once, per (channel, tag) in stimulus
    # order, with its position among its channel's requests (the driver's order).
    queues = _read_request_file(request_file(path), SMALL.channels)
    expected = {q: [] for q in queues}
    seq = [0] * SMALL.channels
    for e in events:
        if e.op == REQ:
            expected[e.a * 16 + e.b].append((seq[e.a], e.c, e.d))
            seq[e.a] += 1
    assert queues == expected and sum(seq) > 10
    path.write_text("5 10 0 1 64 0\n")
    with pytest.raises(ValueError, match=r"s.txt:1: expected seven"):
        list(read_stimulus(path))
    with pytest.raises(ValueError, match="must be sorted"):
        write_stimulus(path, [Event(REQ, 5), Event(REQ, 4)], 1)
    with pytest.raises(ValueError, match=r"event 1 \(REQ at cycle 6\): channel 2, tag 0; allowed "
                                         r"channels 0..1, tags 0..15"):
        write_stimulus(path, [Event(REQ, 5, 1, 3, 64), Event(REQ, 6, 2, 0, 64)], 2)
    with pytest.raises(ValueError, match=r"tag 16; allowed"):
        write_stimulus(path, [Event(REQ, 5, 1, 16, 64)], 2)
    with pytest.raises(StimulusError, match="no END"):
        model_log(SMALL, [Event(REQ, 1, 0, 0, 64, 0)])


def test_draw_is_splitmix64():
    """The per-cycle draw is splitmix64's output for state seed + (i+1) * golden,
    i = cycle * channels + channel (reference values of the published algorithm:
    seed 0 gives 0xE220A8397B1DCDAF first)."""
    assert draw(0, 0, 0, 1) == 0xE220A8397B1DCDAF
    assert draw(0, 0, 1, 2) == draw(0, 1, 0, 1)
