"""Stimulus of the trace-driven co-simulation: the random soak, and a replay trace.

Why a generator of its own: the cocotb soak (``random_long`` in
tb/tests/cosim_tests.py) decides when a phase ends by watching the fabric
drain, which needs the model or the RTL in the loop.  Here the whole stimulus
is written before any simulator starts, so phases have fixed lengths (the
fabric is often still busy when the next configuration is programmed, which
the cocotb soak only does in ``reprogram_under_traffic``) and every event has
a global cycle.  The random choices are those of the cocotb soak: the same
:func:`random_config` (rates, capacities, peak rates, weights, priorities,
enables, SLOs, starvation limit, epoch), its request sizes and 2 % invalid
requests, FCFS phases, idle insertion, extra backpressure, credit returns,
plus resets in the middle of traffic.  Configurations become register writes
through :func:`kvfabric.model.regfile.config_writes`, as in every cocotb test.
"""

from __future__ import annotations

import random
from fractions import Fraction

from kvfabric.model.regfile import config_writes
from kvfabric.model.registers import FabricConfig, TenantConfig

from .trace_format import END, MEMORY, MODE, PROB_ONE, REQ, RESET, SEED, WRITE, ZERO, Event

__all__ = ["WRITE_GAP", "program_events", "soak_stimulus", "replay_stimulus", "random_trace"]

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


def _drainable(params, rng) -> FabricConfig:
    """Every tenant enabled with a generous peak rate, no credit limits, no FCFS:
    whatever is left of the traffic drains (the soak's last phase)."""
    return FabricConfig([TenantConfig(rate=64, capacity=params.pcap, peak_rate=8 * params.max_request_bytes,
                                      inv_weight=rng.choice([256, 512, 1024]), priority=rng.randrange(4),
                                      enable=1, slo_cycles=400) for _ in range(params.tenants)],
                        starve_limit=300)


def soak_stimulus(params, seed: int, cycles: int, *, bytes_per_cycle: int = 64,
                  tail: int = 60_000, max_span: int = 20_000) -> list[Event]:
    """``cycles`` cycles of random phases (the cocotb soak's choices, see the module
    docstring) of at most ``max_span`` cycles of traffic each, the last ``tail``
    cycles a drainable configuration without new traffic, so every request that
    a reset did not flush is granted."""
    from .tests.cosim_tests import random_config, random_size  # the cocotb soak's own choices
    rng = random.Random(seed)
    p = params
    n, lmax = p.tenants, p.max_request_bytes
    seed64 = rng.getrandbits(64)
    ev = [Event(SEED, 0, seed64 & 0xFFFFFFFF, seed64 >> 32), Event(MEMORY, 0, bytes_per_cycle, 1)]
    reqs: list[Event] = []
    next_id = [0] * p.channels
    id_mask = (1 << p.id_width) - 1
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
        for _ in range(count):
            cyc = t + rng.randrange(span)
            ch = rng.randrange(p.channels)
            tenant = rng.randrange(n)
            nbytes = random_size(p, rng)
            if rng.random() < 0.02:
                kind = rng.randrange(3)
                if kind == 0 and n < 16:
                    tenant = rng.randrange(n, 16)
                elif kind == 1:
                    nbytes = 0
                else:
                    nbytes = rng.randrange(lmax + 1, 1 << p.bytes_bits)
            reqs.append(Event(REQ, cyc, ch, tenant, nbytes, 0))
        if rng.random() < 0.2:
            # Reset in the middle of the traffic; traffic after it is dropped by
            # the generator (the drivers flush at reset anyway).
            r = t + rng.randrange(span)
            k = rng.randrange(1, 4)
            ev.append(Event(RESET, r, k))
            reqs = [q for q in reqs if q.cycle < r]
            t = r + k + 1
        else:
            # The next phase reprograms a fabric that may still be busy.
            t += span + rng.randrange(span // 2 + 1)
        ev.extend(reqs)
        reqs = []
    t = program_events(ev, max(t, last_phase), _drainable(p, rng))
    ev.append(Event(MODE, t, 0, 0, 0, 0))
    end = max(cycles, t + 1)
    ev.append(Event(END, end))
    ev.sort(key=lambda e: e.cycle)  # stable: same-cycle events keep their order
    out = []
    for e in ev:
        if e.op == REQ:
            ch = e.a
            e = Event(REQ, e.cycle, ch, e.b, e.c, next_id[ch])
            next_id[ch] = (next_id[ch] + 1) & id_mask
        out.append(e)
    return out


def replay_stimulus(params, config: FabricConfig, rows, bytes_per_cycle, *, backpressure: float = 0.0,
                    credit_return: float = 0.0, seed: int = 0) -> tuple[list[Event], int]:
    """The stimulus of ``kvfabric replay --engine icarus|verilator`` for trace ``rows``.

    The configuration is programmed from cycle 0; the trace's cycle 0 is the
    testbench's cycle ``start`` (returned), in which every bucket level is
    deposited back to 0 (ZERO), so the RTL starts the trace from the state the
    model engine starts from (tags and V are still 0: no request has arrived).
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
    id_mask = (1 << params.id_width) - 1
    last = 0
    for r in rows:
        if not (0 <= r.channel < params.channels and 0 <= r.tenant < 16
                and 0 <= r.bytes < 1 << params.bytes_bits):
            raise ValueError(f"trace row {r.id} (cycle {r.cycle}): channel {r.channel}, tenant {r.tenant}, "
                             f"bytes {r.bytes}; the generated Verilog takes channels 0..{params.channels - 1}, "
                             f"tenant tags 0..15, bytes 0..{(1 << params.bytes_bits) - 1}")
        ev.append(Event(REQ, start + r.cycle, r.channel, r.tenant, r.bytes, r.id & id_mask))
        last = max(last, r.cycle)
    return ev, start


def random_trace(params, rng: random.Random, requests: int, *, deep: int = 0,
                 deep_tenant: int | None = None, gaps: int = 2) -> list:
    """A random replay trace (``model.trace.TraceRow``, ids = row indices) of about
    ``requests`` requests, for the differential check of the engines (issue #24):

    * ``deep`` requests of one (channel, tenant) in one cycle (tenant
      ``deep_tenant``, default a random one);
    * bursts: up to 16 requests in one cycle on every channel;
    * sizes 1 (minimum), LMAX (maximum), random, and 2 % invalid requests (a tag
      of N..15, size 0, size above LMAX);
    * ``gaps`` idle gaps of 2-3 x 2^tag_bits cycles, longer than the tag range
      and the lag window (spec §6.5), between stretches of traffic.
    """
    from kvfabric.model.trace import TraceRow
    from .tests.cosim_tests import random_size  # the cocotb tests' own size mix
    p = params
    n, lmax = p.tenants, p.max_request_bytes
    events = []
    if deep:
        t, c = rng.randrange(64), rng.randrange(p.channels)
        i = rng.randrange(n) if deep_tenant is None else deep_tenant
        events += [(t, c, i, rng.choice([1, 64, lmax]))] * deep
    stretches = gaps + 1
    t = 0
    per = max(1, requests // stretches)
    for s in range(stretches):
        span = max(50, per * rng.choice([2, 8, 32]) // p.channels)
        k = 0
        while k < per:
            cyc = t + rng.randrange(span)
            burst = rng.randint(2, 16) if rng.random() < 0.05 else 1
            for c in (range(p.channels) if burst > 1 else [rng.randrange(p.channels)]):
                for _ in range(burst):
                    tenant = rng.randrange(n)
                    nbytes = rng.choice([1, lmax, random_size(p, rng)])
                    if rng.random() < 0.02:
                        kind = rng.randrange(3)
                        if kind == 0 and n < 16:
                            tenant = rng.randrange(n, 16)
                        else:
                            nbytes = 0 if kind == 1 else rng.randrange(lmax + 1, 1 << p.bytes_bits)
                    events.append((cyc, c, tenant, nbytes))
                    k += 1
        t += span
        if s < gaps:
            t += rng.randint(2 << p.tag_bits, 3 << p.tag_bits)
    events.sort(key=lambda e: e[0])  # stable: a burst keeps its order
    return [TraceRow(k, *e) for k, e in enumerate(events)]
