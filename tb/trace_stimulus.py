"""Stimulus of the trace-driven co-simulation: the random soak, and a replay trace.

Why a sequence of its own: the cocotb soak (``random_long`` in
tb/tests/cosim_tests.py) decides when a phase ends by watching the fabric
drain, which needs the model or the RTL in the loop.  Here the whole stimulus
is written before any simulator starts, so phases have fixed lengths (the
fabric is often still busy when the next configuration is programmed, which
the cocotb soak only does in ``reprogram_under_traffic``) and every event has
a global cycle.  The random choices are the library's (:mod:`kvfabric.tb.stimulus`),
the ones the cocotb soak draws from: :func:`~kvfabric.tb.stimulus.random_config`,
:func:`~kvfabric.tb.stimulus.random_requests` (sizes and 2 % invalid
requests), FCFS phases, idle insertion, extra backpressure, credit returns,
plus resets in the middle of traffic.  Configurations become register writes
through :func:`kvfabric.model.regfile.config_writes`, as in every cocotb test.
"""

from __future__ import annotations

import random
from dataclasses import replace
from fractions import Fraction

from kvfabric.model.regfile import COMMIT, TENANT, config_writes, tenant_words
from kvfabric.model.registers import FabricConfig, TenantConfig
from kvfabric.spec import COORD_LATENCY, COORD_MIN_EPOCH
from kvfabric.model.trace import TraceRow

from .stimulus import drainable_config, random_config, random_requests

from .trace_format import END, MEMORY, MODE, PROB_ONE, RESET, SEED, TRACE, WRITE, ZERO, Event

__all__ = ["WRITE_GAP", "program_events", "soak_stimulus", "replay_stimulus", "coordinator_stimulus"]

#: Cycles between two register writes of a stimulus: the register file takes
#: AW and W in one cycle and answers on B the next (spec §9); four leave room.
WRITE_GAP = 4


def program_events(ev: list, t: int, config: FabricConfig) -> int:
    """Append the writes of :func:`kvfabric.model.regfile.config_writes` (``config``) to
    ``ev`` from cycle ``t``, :data:`WRITE_GAP` apart; returns the cycle after."""
    for addr, data in config_writes(config):
        ev.append(Event(WRITE, t, addr, data, 0xF))
        t += WRITE_GAP
    return t


def _prob(p: float) -> int:
    return round(p * PROB_ONE)


def soak_stimulus(params, seed: int, cycles: int, *, bytes_per_cycle: int = 64,
                  tail: int = 60_000, max_span: int = 20_000) -> tuple[list[Event], list[TraceRow]]:
    """``cycles`` cycles of random phases (the cocotb soak's choices, see the module
    docstring) of at most ``max_span`` cycles of traffic each, the last ``tail``
    cycles a drainable configuration without new traffic, so every request that
    a reset did not flush is granted: the program and its trace (from cycle 0)."""
    rng = random.Random(seed)
    p = params
    seed64 = rng.getrandbits(64)
    ev = [Event(SEED, 0, seed64 & 0xFFFFFFFF, seed64 >> 32), Event(MEMORY, 0, bytes_per_cycle, 1),
          Event(TRACE, 0)]
    reqs: list[tuple[int, int, int, int]] = []
    requests: list[tuple[int, int, int, int]] = []
    t = 0
    last_phase = max(0, cycles - tail)

    while t < last_phase:
        fcfs = int(rng.random() < 0.15)
        idle = rng.choice([0.0, 0.3, 0.7])
        backpressure = rng.choice([0.0, 0.2, 0.6])
        credit_return = rng.choice([0.0, 0.1, 0.5])
        credits = bool(credit_return) and rng.random() < 0.5
        config = random_config(p, rng, fcfs=fcfs, credits=credits)
        t = program_events(ev, t, config)
        ev.append(Event(MODE, t, fcfs, _prob(idle), _prob(backpressure), _prob(credit_return)))
        span = min(max_span, max(500, last_phase - t))
        # Per channel one request every 16..128 cycles on average: from about 1.5x
        # the memory side's bandwidth (B = 64, mean request ~1.5 kB) down to 0.2x.
        count = span * p.channels // rng.choice([16, 32, 64, 128])
        reqs += random_requests(p, rng, count, start=t, span=span)
        if rng.random() < 0.2:
            # Reset in the middle of the traffic; traffic after it is dropped by
            # the generator (the drivers flush at reset anyway).
            r = t + rng.randrange(span)
            k = rng.randrange(1, 4)
            ev.append(Event(RESET, r, k))
            reqs = [q for q in reqs if q[0] < r]
            t = r + k + 1
        else:
            # The next phase reprograms a fabric that may still be busy.
            t += span + rng.randrange(span // 2 + 1)
        requests.extend(reqs)
        reqs = []
    t = program_events(ev, max(t, last_phase), drainable_config(p, rng))
    ev.append(Event(MODE, t, 0, 0, 0, 0))
    end = max(cycles, t + 1)
    ev.append(Event(END, end))
    ev.sort(key=lambda e: e.cycle)  # stable: same-cycle events keep their order
    requests.sort(key=lambda q: q[0])  # stable: same-cycle requests keep their order
    return ev, [TraceRow(k, *q) for k, q in enumerate(requests)]


def replay_stimulus(params, config: FabricConfig, bytes_per_cycle, *, backpressure: float = 0.0,
                    credit_return: float = 0.0, seed: int = 0) -> tuple[list[Event], int]:
    """The program of ``kvfabric replay --engine icarus|verilator`` (its trace, the
    replayed one, is written beside it by :func:`kvfabric.tb.trace_format.write_stimulus`).

    The configuration is programmed from cycle 0; the trace starts (TRACE) in
    the testbench's cycle ``start`` (returned), in which every bucket level and
    every tenant's previous-cycle ``enable`` are deposited back to 0 (ZERO), so
    the RTL starts the trace from the state the model engine starts from (tags
    and V are still 0: no request has arrived), and a tenant the configuration
    enables starts it with full buckets in both (spec §6.3).
    A request's id on the port is its row index modulo 2^id_width (as in the
    cocotb replay engine).

    ``backpressure`` and ``credit_return`` (probabilities per cycle, drawn from
    ``seed``) go beyond spec §8's replay memory side, which has neither: with
    them the stimulus is one for :func:`kvfabric.tb.trace_check.run_check`
    (the differential check with credits), not for the replay engines."""
    b = Fraction(bytes_per_cycle)
    seed &= (1 << 64) - 1
    ev = [Event(SEED, 0, seed & 0xFFFFFFFF, seed >> 32), Event(MEMORY, 0, b.numerator, b.denominator)]
    t = program_events(ev, 0, config)
    start = t + 4  # the last write (a COMMIT) is active from its handshake + 2
    ev.append(Event(MODE, start, int(config.fcfs_bypass), 0, _prob(backpressure), _prob(credit_return)))
    ev.append(Event(ZERO, start))
    ev.append(Event(TRACE, start))
    return ev, start


def coordinator_stimulus(params, seed: int, *, epochs: int = 2, bytes_per_cycle: int = 64,
                         tail: int = 1500) -> tuple[list[Event], list[TraceRow]]:
    """The coordinator (spec §13) on with the shortest epoch for ``epochs``
    epochs and their results' windows: tenant 0's traffic all on channel 0,
    the others' spread over every channel; a COMMIT of tenant 1 inside the
    first result's window (discarding its result); idle cycles and
    backpressure; then a drainable tail with the coordinator off."""
    rng = random.Random(seed)
    p = params
    seed64 = rng.getrandbits(64)
    ev = [Event(SEED, 0, seed64 & 0xFFFFFFFF, seed64 >> 32), Event(MEMORY, 0, bytes_per_cycle, 1),
          Event(TRACE, 0)]
    tenants = [TenantConfig(rate=8 * rng.choice([4, 8, 12]), capacity=2 * p.pcap,
                            peak_rate=8 * rng.choice([16, 24]), inv_weight=256 * (1 + i % 2),
                            priority=i % 2, enable=1, slo_cycles=200) for i in range(p.tenants)]
    config = FabricConfig(tenants, starve_limit=500, coord_enable=1, coord_floor=rng.choice([0, 32]))
    t = program_events(ev, 0, config)
    ev.append(Event(MODE, t, 0, _prob(0.1), _prob(0.1), 0))
    span = epochs * COORD_MIN_EPOCH + COORD_LATENCY + 200
    commit_at = COORD_MIN_EPOCH + COORD_LATENCY // 2
    new = replace(tenants[1], rate=tenants[1].rate + 8)
    for k, (name, word) in enumerate([*tenant_words(new).items(), (COMMIT.name, 1)]):
        ev.append(Event(WRITE, commit_at + k * WRITE_GAP, TENANT.address(name, 1), word, 0xF))
    requests = []
    for k in range(span // 3):
        tenant = rng.randrange(p.tenants)
        channel = 0 if tenant == 0 else rng.randrange(p.channels)
        requests.append((t + 3 * k + rng.randrange(3), channel, tenant, rng.choice([64, 256, 512])))
    t = program_events(ev, t + span, drainable_config(p, rng))
    ev.append(Event(MODE, t, 0, 0, 0, 0))
    ev.append(Event(END, t + tail))
    ev.sort(key=lambda e: e.cycle)
    requests.sort(key=lambda q: q[0])
    return ev, [TraceRow(k, *q) for k, q in enumerate(requests)]
