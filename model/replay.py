"""Trace replay (spec §8): upstream driver, memory side and the model engine.

The driver and the memory side are shared with the RTL engines in ``tb/``, so
every engine sees exactly the same inputs for the same outputs and the grant
logs can be compared byte for byte.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from fractions import Fraction

from .channel import KIND_NAMES, ChannelModel, Request
from .fabric import FabricModel
from .trace import LogRow, TraceRow


def percentile(ordered: list, p):
    """The ``p``-th percentile (``p`` in percent, an int or a Fraction) of sorted
    values by the inverted CDF, i.e. nearest rank: the smallest value with at
    least ``p`` % of the values at or below it, in exact arithmetic; ``None``
    for no values. The one percentile of the replay summary and ``kvfabric
    system``.
    """
    if not ordered:
        return None
    rank = max(1, -(-p * len(ordered) // 100))  # ceil(p * n / 100), at least the first
    return ordered[int(rank) - 1]


class ReplayError(RuntimeError):
    """The replay could not finish (requests that can never be granted)."""


class UpstreamDriver:
    """Per channel, the requests whose cycle has come, in row order (spec §8).

    Each cycle it presents the first pending request (lowest row id) whose
    tenant is outside the configured tenants or whose queue is not full; in
    fcfs mode strictly the first (one in-order queue, like a FCFS
    controller's). Pending requests are kept per tenant, so choosing is a
    minimum over at most 16 queue heads.
    """

    def __init__(self, params, rows: list[TraceRow], fcfs: bool):
        self.params = params
        self.rows = rows
        self.fcfs = fcfs
        self.next_row = 0
        self.pending: list[dict[int, deque[TraceRow]]] = [{} for _ in range(params.channels)]
        self.presented: list[TraceRow | None] = [None] * params.channels

    def idle(self) -> bool:
        return not any(any(q) for per in self.pending for q in per.values())

    def waiting(self) -> list[TraceRow]:
        return [r for per in self.pending for q in per.values() for r in q]

    def next_arrival(self) -> int | None:
        return self.rows[self.next_row].cycle if self.next_row < len(self.rows) else None

    def _arrive(self, cycle: int) -> None:
        rows = self.rows
        while self.next_row < len(rows) and rows[self.next_row].cycle <= cycle:
            r = rows[self.next_row]
            self.pending[r.channel].setdefault(r.tenant, deque()).append(r)
            self.next_row += 1

    def offer_one(self, channel: int, cycle: int, queue_full: list[bool]) -> TraceRow | None:
        """The request presented on ``channel`` in ``cycle`` (None: nothing)."""
        self._arrive(cycle)
        n = self.params.tenants
        chosen = None
        for tenant, q in self.pending[channel].items():
            if q and (self.fcfs or tenant >= n or not queue_full[tenant]):
                if chosen is None or q[0].id < chosen.id:
                    chosen = q[0]
        self.presented[channel] = chosen
        return chosen

    def offer(self, cycle: int, queue_full: list[list[bool]]) -> list[TraceRow | None]:
        """The requests presented on every channel in ``cycle``."""
        return [self.offer_one(c, cycle, queue_full[c]) for c in range(len(self.pending))]

    def accepted(self, channel: int) -> TraceRow:
        row = self.presented[channel]
        popped = self.pending[channel][row.tenant].popleft()
        assert popped is row
        return row


class MemorySide:
    """Each channel drains ``bytes_per_cycle``; a grant of s bytes transferred at
    t keeps it busy until t + ceil(s / bytes_per_cycle) (spec §8)."""

    def __init__(self, channels: int, bytes_per_cycle: Fraction):
        self.bytes_per_cycle = Fraction(bytes_per_cycle)
        self.busy_until = [0] * channels

    def service_cycles(self, nbytes: int) -> int:
        q = Fraction(nbytes) / self.bytes_per_cycle
        return max(1, -(-q.numerator // q.denominator))

    def ready(self, cycle: int) -> list[bool]:
        return [cycle >= b for b in self.busy_until]

    def transfer(self, channel: int, cycle: int, nbytes: int) -> None:
        self.busy_until[channel] = cycle + self.service_cycles(nbytes)


@dataclass
class ReplayResult:
    log: list[LogRow]
    cycles: int


def stall_limit(params, config) -> int:
    """Cycles without any grant or acceptance after which outstanding requests are
    declared stuck. With nothing granted only bucket levels and ages change, so
    the slowest enabled peak bucket's fill time plus the starvation guard is enough."""
    rates = [t.peak_rate for t in config.tenants if t.enable and t.peak_rate]
    fill = -(-params.pcap // min(rates)) if rates else 0
    return fill + config.starve_limit + 1000


def replay_model(params, config, rows: list[TraceRow], bytes_per_cycle: Fraction) -> ReplayResult:
    """Replay ``rows`` through the golden model; return the grant log sorted by id.

    Channels are independent, so each is replayed on its own with
    :class:`ChannelModel`, fast-forwarding over cycles in which provably
    nothing but bucket refills happens (idle channel, memory side busy, or no
    head with tokens). The co-simulation steps :class:`FabricModel` instead,
    cycle by cycle; both are the same per-cycle semantics.
    """
    by_channel: list[list[TraceRow]] = [[] for _ in range(params.channels)]
    for r in rows:
        by_channel[r.channel].append(r)
    log: dict[int, LogRow] = {}
    end = 0
    for c, mine in enumerate(by_channel):
        if mine:
            end = max(end, _replay_channel(params, config, c, mine, bytes_per_cycle, log))
    return ReplayResult([log[r.id] for r in rows], end)


class _InFlight:
    """Accepted requests not yet granted, per tenant in acceptance order.

    A tenant's requests on a channel leave its FIFO in order (spec §4, §6.2),
    so a grant belongs to the oldest of its tenant's: matching by the port
    id would be ambiguous once two waiting requests share their low
    ``id_width`` bits, which any backlog deeper than 2^id_width has."""

    def __init__(self):
        self._by_tenant: dict[int, deque[TraceRow]] = {}

    def add(self, row: TraceRow) -> None:
        self._by_tenant.setdefault(row.tenant, deque()).append(row)

    def take(self, grant, id_mask: int) -> TraceRow:
        row = self._by_tenant[grant.tenant].popleft()
        assert (row.id & id_mask, row.bytes) == (grant.id, grant.bytes), "grant does not match its request"
        return row

    def rows(self) -> list[TraceRow]:
        return [r for q in self._by_tenant.values() for r in q]

    def __bool__(self) -> bool:
        return any(self._by_tenant.values())


def _replay_channel(params, config, channel: int, rows: list[TraceRow], bytes_per_cycle: Fraction,
                    log: dict[int, LogRow]) -> int:
    ch = ChannelModel(params, config)
    driver = UpstreamDriver(params, rows, bool(config.fcfs_bypass))
    mem = MemorySide(1, bytes_per_cycle)
    id_mask = (1 << params.id_width) - 1
    ts_mask = (1 << params.ts_bits) - 1
    in_flight = _InFlight()
    limit = stall_limit(params, config)
    remaining = len(rows)
    last_progress = cycle = 0
    while remaining:
        offer = driver.offer_one(channel, cycle, ch.queue_full())
        nxt = driver.next_arrival()
        horizon = (nxt - cycle) if nxt is not None else None  # cycles until the next arrival
        blocked = offer is None or not ch.req_ready(offer.tenant, offer.bytes)
        if blocked and ch.ingress is None and horizon != 0:
            if not in_flight and ch.quiescent():
                k = horizon  # idle until the next arrival (there is one: remaining > 0)
                ch.skip(k)
            else:
                k = 0
                if ch.grant is not None and cycle < mem.busy_until[0]:
                    k = mem.busy_until[0] - cycle
                elif ch.grant is None:
                    k = ch.cycles_until_competing()
                    k = (limit + 1) if k is None else k
                if horizon is not None:
                    k = min(k, horizon)
                if k > 0:
                    ch.advance_inert(cycle, k)
            if k > 0:
                cycle += k
                if not in_flight and driver.idle():
                    last_progress = cycle
                if cycle - last_progress > limit:
                    _stuck(limit, cycle, in_flight.rows(), driver)
                continue
        req = Request(offer.tenant, offer.bytes, offer.id & id_mask) if offer is not None else None
        res = ch.step(cycle & ts_mask, req, mem.ready(cycle)[0])
        if res.accepted:
            row = driver.accepted(channel)
            if res.dropped:
                log[row.id] = LogRow(row.id, row.cycle, None, channel, row.tenant, row.bytes, "dropped")
                remaining -= 1
            else:
                in_flight.add(row)
            last_progress = cycle
        g = res.transferred
        if g is not None:
            row = in_flight.take(g, id_mask)
            log[row.id] = LogRow(row.id, row.cycle, cycle, channel, g.tenant, g.bytes, KIND_NAMES[g.kind])
            mem.transfer(0, cycle, g.bytes)
            remaining -= 1
            last_progress = cycle
        cycle += 1
        if cycle - last_progress > limit:
            _stuck(limit, cycle, in_flight.rows(), driver)
    return cycle


def replay_lockstep(params, config, rows: list[TraceRow], bytes_per_cycle: Fraction):
    """Reference replay: every channel of a :class:`FabricModel` stepped together,
    one cycle at a time, no fast-forward. Returns ``(ReplayResult, fabric)`` so
    telemetry can be read. Slow; :func:`replay_model` must agree with it."""
    fab = FabricModel(params, config)
    driver = UpstreamDriver(params, rows, bool(config.fcfs_bypass))
    mem = MemorySide(params.channels, bytes_per_cycle)
    id_mask = (1 << params.id_width) - 1
    log: dict[int, LogRow] = {}
    in_flight = [_InFlight() for _ in range(params.channels)]
    limit = stall_limit(params, config)
    last_progress = cycle = 0
    while len(log) < len(rows):
        offers = driver.offer(cycle, [ch.queue_full() for ch in fab.channels])
        reqs = [Request(r.tenant, r.bytes, r.id & id_mask) if r is not None else None for r in offers]
        results = fab.step(reqs, mem.ready(cycle))
        for c, res in enumerate(results):
            if res.accepted:
                row = driver.accepted(c)
                if res.dropped:
                    log[row.id] = LogRow(row.id, row.cycle, None, c, row.tenant, row.bytes, "dropped")
                else:
                    in_flight[c].add(row)
                last_progress = cycle
            g = res.transferred
            if g is not None:
                row = in_flight[c].take(g, id_mask)
                log[row.id] = LogRow(row.id, row.cycle, cycle, c, g.tenant, g.bytes, KIND_NAMES[g.kind])
                mem.transfer(c, cycle, g.bytes)
                last_progress = cycle
        if driver.idle() and not any(in_flight):
            last_progress = cycle
        cycle += 1
        if cycle - last_progress > limit:
            _stuck(limit, cycle, [r for f in in_flight for r in f.rows()], driver)
    return ReplayResult([log[i] for i in range(len(rows))], cycle), fab


def _stuck(limit: int, cycle: int, in_flight: list[TraceRow], driver: UpstreamDriver):
    waiting = sorted(r.id for r in in_flight)
    waiting += sorted(r.id for r in driver.waiting())
    raise ReplayError(
        f"no progress for {limit} cycles at cycle {cycle}: {len(waiting)} request(s) can never "
        f"be granted (e.g. ids {waiting[:8]}); check that their tenants have a non-zero "
        f"rate or burst_gbps")


def summarize(log: list[LogRow], compiled) -> list[dict]:
    """Per-tenant bytes, achieved GB/s against the contract, and wait percentiles."""
    out = []
    granted = [r for r in log if r.grant_cycle is not None]
    if not granted:
        return out
    span = max(r.grant_cycle for r in granted) - min(r.arrival_cycle for r in log) + 1
    tenants = sorted({r.tenant for r in log})
    for t in tenants:
        mine = [r for r in granted if r.tenant == t]
        waits = sorted(r.grant_cycle - r.arrival_cycle for r in mine)
        nbytes = sum(r.bytes for r in mine)
        contract = compiled.tenant_by_id(t) if compiled is not None else None
        gbps = nbytes * float(compiled.clock_mhz) / 1000 / span if compiled is not None else None
        out.append({
            "tenant": t,
            "name": contract.name if contract else "-",
            "requests": sum(1 for r in log if r.tenant == t),
            "dropped": sum(1 for r in log if r.tenant == t and r.grant_cycle is None),
            "bytes": nbytes,
            "share": nbytes / max(1, sum(r.bytes for r in granted)),
            "gbps": gbps,
            "guaranteed_gbps": float(contract.guaranteed_gbps) if contract else None,
            "burst_grants": sum(1 for r in mine if r.kind == "burst"),
            "wait_p50": None if not waits else float(percentile(waits, 50)),
            "wait_p99": None if not waits else float(percentile(waits, 99)),
            "wait_max": waits[-1] if waits else None,
        })
    return out
