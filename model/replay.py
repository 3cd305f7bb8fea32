"""Trace replay (spec §8): upstream driver, memory side and the model engine.

The driver and the memory side are shared with the RTL engines in ``tb/``, so
every engine sees exactly the same inputs for the same outputs and the grant
logs can be compared byte for byte.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

from kvfabric.spec import COORD_LATENCY

from .channel import KIND_NAMES, ChannelModel, Request
from .coordinator import Coordinator
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


#: Tenant tags a request can carry (4 bits, spec §2): the driver's queues per channel.
TAGS = 16


class ChannelDriver:
    """Spec §8's upstream driver of one channel, with spec §2's hold rule: the one
    rule every engine drives ``req[c]`` by (the model's replay, the cocotb
    testbench's :class:`kvfabric.tb.drivers.RequestDriver`, the trace model
    :mod:`kvfabric.tb.trace_model`, and the plain-Verilog testbench, which
    tests/test_trace_cosim.py checks against this class cycle by cycle).

    Requests whose cycle has come wait in arrival (row) order, kept per tenant
    tag so choosing is a minimum over at most 16 queue heads. Each cycle
    (:meth:`present`) the driver presents the request it holds, if any (one
    presented and not accepted: its payload holds, spec §2); else, unless the
    cycle is an idle one, the first waiting request whose tag is invalid
    (``>= tenants``) or whose ``queue_full`` bit is 0 ("one tenant's full
    queue never blocks another"), or in ``strict`` mode (FCFS, or a naive
    upstream that ignores ``queue_full``) strictly the first one. A waiting
    item is any object; the driver only orders and hands them back.
    """

    __slots__ = ("tenants", "strict", "queues", "waiting", "held", "_seq")

    def __init__(self, tenants: int, strict: bool = False):
        self.tenants = tenants
        self.strict = strict
        self.queues = [deque() for _ in range(TAGS)]  # per tag: (arrival order, item)
        self.waiting = 0
        self.held = -1  # tag of the request held on the port, or -1
        self._seq = 0

    def arrive(self, tag: int, item) -> None:
        """A request of tenant tag ``tag`` arrives (call in row order)."""
        self.queues[tag].append((self._seq, item))
        self._seq += 1
        self.waiting += 1

    def _eligible(self, tag: int, queue_full) -> bool:
        return self.strict or tag >= self.tenants or not queue_full[tag]

    def present(self, queue_full, idle=False) -> int:
        """The tag whose oldest request is presented this cycle, or -1 (nothing).

        ``queue_full``: the channel's bits by tenant (a sequence, or a callable
        returning one, read only when a choice is made); ``idle``: this is an
        idle cycle (a bool, or a callable drawn only when the driver could
        present something new)."""
        if self.held >= 0:
            return self.held
        if not self.waiting or (idle() if callable(idle) else idle):
            return -1
        strict, n = self.strict, self.tenants
        if not strict and callable(queue_full):
            queue_full = queue_full()
        best, best_seq = -1, 0
        for tag, q in enumerate(self.queues):
            if q:
                seq = q[0][0]
                if (best < 0 or seq < best_seq) and (strict or tag >= n or not queue_full[tag]):
                    best, best_seq = tag, seq
        return best

    def blocked(self, queue_full) -> bool:
        """Nothing is held and nothing waiting can be presented: nothing waits, or
        (never in strict mode) every waiting request's tenant is valid and its
        queue full. ``queue_full`` as for :meth:`present`."""
        if self.held >= 0:
            return False
        if not self.waiting:
            return True
        if self.strict:
            return False
        if callable(queue_full):
            queue_full = queue_full()
        return not any(q and self._eligible(tag, queue_full) for tag, q in enumerate(self.queues))

    def head(self, tag: int):
        """The oldest waiting item of ``tag`` (the one :meth:`present` means)."""
        return self.queues[tag][0][1]

    def handshake(self, tag: int, accepted: bool):
        """The cycle's handshake of the request presented for ``tag`` (-1: none):
        the accepted item, or None (a refused one is held)."""
        if tag < 0:
            return None
        if accepted:
            self.held = -1
            self.waiting -= 1
            return self.queues[tag].popleft()[1]
        self.held = tag
        return None

    def items(self) -> list:
        """Every waiting item, in arrival order."""
        return [item for _, item in sorted((e for q in self.queues for e in q), key=lambda e: e[0])]

    def flush(self, keep_held: bool = False) -> list:
        """Forget every waiting request (a reset; with ``keep_held`` an upstream that
        gives up on all but the request it holds, spec §2); returns the forgotten."""
        kept = self.queues[self.held][0] if (keep_held and self.held >= 0) else None
        gone = [item for item in self.items() if kept is None or item is not kept[1]]
        for q in self.queues:
            q.clear()
        self.waiting = 0
        if kept is not None:
            self.queues[self.held].append(kept)
            self.waiting = 1
        else:
            self.held = -1
        return gone


class UpstreamDriver:
    """The replay's drivers: a trace's rows arrive at their cycle into one
    :class:`ChannelDriver` per channel (spec §8); fcfs mode is strict."""

    def __init__(self, params, rows: list[TraceRow], fcfs: bool):
        self.rows = rows
        self.next_row = 0
        self.channels = [ChannelDriver(params.tenants, fcfs) for _ in range(params.channels)]
        self.presented = [-1] * params.channels

    def idle(self) -> bool:
        return not any(d.waiting for d in self.channels)

    def waiting(self) -> list[TraceRow]:
        return [r for d in self.channels for r in d.items()]

    def next_arrival(self) -> int | None:
        return self.rows[self.next_row].cycle if self.next_row < len(self.rows) else None

    def _arrive(self, cycle: int) -> None:
        rows = self.rows
        while self.next_row < len(rows) and rows[self.next_row].cycle <= cycle:
            r = rows[self.next_row]
            self.channels[r.channel].arrive(r.tenant, r)
            self.next_row += 1

    def offer_one(self, channel: int, cycle: int, queue_full: list[bool]) -> TraceRow | None:
        """The request presented on ``channel`` in ``cycle`` (None: nothing)."""
        self._arrive(cycle)
        d = self.channels[channel]
        tag = self.presented[channel] = d.present(queue_full)
        return d.head(tag) if tag >= 0 else None

    def offer(self, cycle: int, queue_full: list[list[bool]]) -> list[TraceRow | None]:
        """The requests presented on every channel in ``cycle``."""
        return [self.offer_one(c, cycle, queue_full[c]) for c in range(len(self.channels))]

    def handshake(self, channel: int, accepted: bool) -> TraceRow | None:
        """The cycle's handshake on ``channel``: the accepted row, or None."""
        return self.channels[channel].handshake(self.presented[channel], accepted)


class MemorySide:
    """Spec §8's memory side, the one rule of every engine: each channel drains
    ``bytes_per_cycle`` (B, a rational); ``ready`` is 1 when the channel is idle
    and a grant of s bytes transferred at t keeps it busy until
    t + max(1, ceil(s / B)). ``backpressure`` (extra not-ready cycles of a
    test's memory side, beyond spec §8) is the caller's draw."""

    __slots__ = ("num", "den", "busy_until")

    def __init__(self, channels: int, bytes_per_cycle):
        self.set_rate(bytes_per_cycle)
        self.busy_until = [0] * channels

    def set_rate(self, bytes_per_cycle) -> None:
        b = Fraction(bytes_per_cycle)
        if b <= 0:
            raise ValueError(f"the memory side's bytes per cycle must be positive, not {b}")
        self.num, self.den = b.numerator, b.denominator

    @property
    def bytes_per_cycle(self) -> Fraction:
        return Fraction(self.num, self.den)

    def service_cycles(self, nbytes: int) -> int:
        q = -(-(nbytes * self.den) // self.num)  # ceil(nbytes / B)
        return q if q > 0 else 1

    def ready_on(self, channel: int, cycle: int, backpressure: bool = False) -> bool:
        return cycle >= self.busy_until[channel] and not backpressure

    def ready(self, cycle: int) -> list[bool]:
        return [cycle >= b for b in self.busy_until]

    def transfer(self, channel: int, cycle: int, nbytes: int) -> None:
        self.busy_until[channel] = cycle + self.service_cycles(nbytes)

    def reset(self) -> None:
        self.busy_until = [0] * len(self.busy_until)


@dataclass
class ReplayResult:
    log: list[LogRow]
    cycles: int


def stall_limit(params, config) -> int:
    """Cycles without any grant or acceptance after which outstanding requests are
    declared stuck. With nothing granted only bucket levels and ages change, so
    the slowest enabled peak bucket's fill time plus the starvation guard is enough.
    With the coordinator on (spec §13) a channel's peak rate may be as low as 1
    until a result that follows the demand applies, at most three epochs and
    the latency later (§13.7)."""
    rates = [t.peak_rate for t in config.tenants if t.enable and t.peak_rate]
    fill = -(-params.pcap // min(rates)) if rates else 0
    if config.coord_enable:
        fill = max(fill, params.pcap) + 3 * config.coord_epoch + COORD_LATENCY
    return fill + config.starve_limit + 1000


def replay_model(params, config, rows: list[TraceRow], bytes_per_cycle: Fraction) -> ReplayResult:
    """Replay ``rows`` through the golden model; return the grant log sorted by id.

    Channels are independent, so each is replayed on its own with
    :class:`ChannelModel`, fast-forwarding over cycles in which provably
    nothing but bucket refills happens (idle channel, memory side busy, or no
    head with tokens). The co-simulation steps :class:`FabricModel` instead,
    cycle by cycle; both are the same per-cycle semantics.

    With the coordinator on (spec §13) the channels depend on one another
    only through its results: every channel is replayed up to the end of an
    epoch, which then gives the result of their demand, and up to each apply
    cycle, from which they use its rates (:func:`_replay_coordinated`).
    """
    by_channel: list[list[TraceRow]] = [[] for _ in range(params.channels)]
    for r in rows:
        by_channel[r.channel].append(r)
    log: dict[int, LogRow] = {}
    replays = [_ChannelReplay(params, config, c, mine, bytes_per_cycle, log)
               for c, mine in enumerate(by_channel) if mine]
    if config.coord_enable:
        end = _replay_coordinated(params, config, replays)
    else:
        end = max((r.run() for r in replays), default=0)
    return ReplayResult([log[r.id] for r in rows], end)


def _replay_coordinated(params, config, replays: list["_ChannelReplay"]) -> int:
    """Replay the channels between the coordinator's events (spec §13.4,
    §13.5): each epoch's end (its demand is complete once every channel has
    stepped its last cycle) and each apply cycle (every channel steps it with
    the new rates). Exactly :class:`FabricModel`'s cycles, in another order."""
    coord = Coordinator(params)
    for r in replays:
        r.coordinator = coord
    epoch = config.coord_epoch
    epoch_end = epoch - 1  # the coordinator is on from cycle 0 (FabricModel's first step)
    end = 0
    while any(r.remaining for r in replays):
        stop = epoch_end + 1 if coord.pending is None else min(epoch_end + 1, coord.pending[0])
        for r in replays:
            if r.remaining:
                end = max(end, r.run(stop))
        if coord.pending is not None and coord.pending[0] == stop:
            coord.apply()
            for r, cfg in zip(replays, _configs_of(coord, config, replays)):
                r.channel.config = cfg
        if stop == epoch_end + 1:
            coord.end_epoch(epoch_end, config)
            epoch_end += epoch
    return end


def _configs_of(coord: Coordinator, config, replays) -> list:
    configs = coord.channel_configs(config)
    return [configs[r.channel_index] for r in replays]


class InFlight:
    """Accepted requests not yet granted, per tenant in acceptance order.

    A tenant's requests on a channel leave its FIFO in order (spec §4, §6.2),
    so a grant belongs to the oldest of its tenant's: matching by the port
    id would be ambiguous once two waiting requests share their low
    ``id_width`` bits, which any backlog deeper than 2^id_width has."""

    def __init__(self):
        self._by_tenant: dict[int, deque[TraceRow]] = {}

    def add(self, row: TraceRow) -> None:
        self._by_tenant.setdefault(row.tenant, deque()).append(row)

    def take(self, grant, id_mask: int, where: str = "") -> TraceRow:
        """The request ``grant`` (tenant, bytes, id) transfers: its tenant's oldest."""
        waiting = self._by_tenant.get(grant.tenant)
        if not waiting:
            raise AssertionError(f"{where}: grant of tenant {grant.tenant} (id {grant.id}) with no "
                                 f"request of that tenant in flight")
        row = waiting.popleft()
        if (row.id & id_mask, row.bytes) != (grant.id, grant.bytes):
            raise AssertionError(f"{where}: grant of tenant {grant.tenant} id {grant.id} bytes "
                                 f"{grant.bytes}, but its oldest request in flight is {row}")
        return row

    def rows(self) -> list[TraceRow]:
        return [r for q in self._by_tenant.values() for r in q]

    def __bool__(self) -> bool:
        return any(self._by_tenant.values())


class PortGrant(NamedTuple):
    """A grant transferred on a channel's grant port (spec §2), as a testbench sees it."""
    cycle: int
    channel: int
    tenant: int
    bytes: int
    id: int  # the port id: the request's row index mod 2^id_width
    kind: int  # spec §6.2's kind code (KIND_NAMES)


def grant_log(rows: list[TraceRow], grants, valid, id_width: int, *,
              where: str = "") -> tuple[list[LogRow], list[int]]:
    """The CSV grant log (``LogRow`` per row, in row order) of the grant-port
    events ``grants`` (:class:`PortGrant` fields, cycles of the trace, in cycle
    order) of a replay of ``rows``, and the ids of valid rows left without a
    grant: the one conversion of a testbench's grant-port log (tb/trace_tb.py)
    to the grant log of model/trace.py.

    Every ``valid(row)`` request is in flight from its arrival in row order (the
    upstream driver presents a tenant's requests in row order, spec §8); each
    grant is matched by :meth:`InFlight.take` (its tenant's oldest, checked by
    id and bytes) and must not precede that request's arrival; the rest are
    ``dropped``. An inconsistent grant is an AssertionError naming ``where``,
    its cycle and channel. (The model engines and the cocotb replay match each
    grant as it happens, with the same :meth:`InFlight.take`.)"""
    id_mask = (1 << id_width) - 1
    in_flight: dict[int, InFlight] = {}
    for r in rows:
        if valid(r):
            in_flight.setdefault(r.channel, InFlight()).add(r)
    log: dict[int, LogRow] = {}
    for g in map(PortGrant._make, grants):
        at = f"{where}: cycle {g.cycle} channel {g.channel}" if where else f"cycle {g.cycle} channel {g.channel}"
        row = in_flight.setdefault(g.channel, InFlight()).take(g, id_mask, at)
        if g.cycle < row.cycle:
            raise AssertionError(f"{at}: grant of tenant {g.tenant} id {g.id} before its request "
                                 f"{row} arrived")
        log[row.id] = LogRow(row.id, row.cycle, g.cycle, g.channel, g.tenant, g.bytes,
                             KIND_NAMES.get(g.kind, str(g.kind)))
    for r in rows:
        if not valid(r):
            log[r.id] = LogRow(r.id, r.cycle, None, r.channel, r.tenant, r.bytes, "dropped")
    waiting = sorted(r.id for f in in_flight.values() for r in f.rows())
    return [log[r.id] for r in rows if r.id in log], waiting


class _ChannelReplay:
    """One channel of :func:`replay_model`: its model, driver and memory side,
    replayed by :meth:`run` up to a given cycle or to the end of its rows."""

    def __init__(self, params, config, channel: int, rows: list[TraceRow], bytes_per_cycle: Fraction,
                 log: dict[int, LogRow]):
        self.params = params
        self.channel_index = channel
        self.channel = ChannelModel(params, config)
        self.driver = UpstreamDriver(params, rows, bool(config.fcfs_bypass))
        self.memory = MemorySide(1, bytes_per_cycle)
        self.in_flight = InFlight()
        self.limit = stall_limit(params, config)
        self.log = log
        self.remaining = len(rows)
        self.cycle = self.last_progress = 0
        #: A :class:`Coordinator` counting this channel's acceptances, or None.
        self.coordinator = None

    def run(self, stop: int = 1 << 62) -> int:
        """Replay cycles up to ``stop`` (excluded) or until every row is granted
        or dropped; return the cycle reached."""
        ch, driver, mem, in_flight, log = self.channel, self.driver, self.memory, self.in_flight, self.log
        channel, limit, coord = self.channel_index, self.limit, self.coordinator
        id_mask = (1 << self.params.id_width) - 1
        ts_mask = (1 << self.params.ts_bits) - 1
        remaining, last_progress, cycle = self.remaining, self.last_progress, self.cycle
        while remaining and cycle < stop:
            offer = driver.offer_one(channel, cycle, ch.queue_full())
            nxt = driver.next_arrival()
            horizon = (nxt - cycle) if nxt is not None else None  # cycles until the next arrival
            blocked = offer is None or not ch.req_ready(offer.tenant, offer.bytes)
            if blocked and ch.ingress is None and horizon != 0:
                if not in_flight and ch.quiescent():
                    k = horizon  # idle until the next arrival (there is one: remaining > 0)
                    k = min(k, stop - cycle)
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
                    k = min(k, stop - cycle)
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
            row = driver.handshake(channel, res.accepted)
            if row is not None:
                if res.dropped:
                    log[row.id] = LogRow(row.id, row.cycle, None, channel, row.tenant, row.bytes, "dropped")
                    remaining -= 1
                else:
                    in_flight.add(row)
                    if coord is not None:
                        coord.count(channel, row.tenant, row.bytes, ch.queue_full()[row.tenant])
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
        self.remaining, self.last_progress, self.cycle = remaining, last_progress, cycle
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
    in_flight = [InFlight() for _ in range(params.channels)]
    limit = stall_limit(params, config)
    last_progress = cycle = 0
    while len(log) < len(rows):
        offers = driver.offer(cycle, [ch.queue_full() for ch in fab.channels])
        reqs = [Request(r.tenant, r.bytes, r.id & id_mask) if r is not None else None for r in offers]
        results = fab.step(reqs, mem.ready(cycle))
        for c, res in enumerate(results):
            row = driver.handshake(c, res.accepted)
            if row is not None:
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
