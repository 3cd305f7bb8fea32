"""Closed-loop traffic for one channel: backlogged, paced and contract-shaped tenants.

Trace replay (``model.replay``) is open-loop. Fairness and bound checks need
tenants that stay backlogged, or that send exactly as fast as their contract
allows; this module generates such traffic on the fly and records, for every
request, when it arrived, became the head of its queue, was selected and was
transferred. Used by the tests and by anyone checking a configuration.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from fractions import Fraction

from .channel import ChannelModel, Request
from .replay import ChannelDriver, MemorySide


@dataclass
class Record:
    """Life of one request (cycles)."""

    tenant: int
    bytes: int
    arrival: int
    accepted: int | None = None
    head: int | None = None
    selected: int | None = None
    transferred: int | None = None
    kind: int | None = None


class Source:
    """A tenant's traffic: asked every cycle for the requests arriving then."""

    def arrivals(self, cycle: int) -> list[int]:  # request sizes
        raise NotImplementedError


@dataclass
class Backlogged(Source):
    """Keeps its queue full: ``keep`` requests not yet selected, upstream or queued."""

    sizes: list[int]
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    keep: int = 8
    outstanding: int = 0  # requests not yet selected; maintained by ClosedLoop

    def arrivals(self, cycle: int) -> list[int]:
        return [self.rng.choice(self.sizes) for _ in range(self.keep - self.outstanding)]


@dataclass
class Paced(Source):
    """Sends ``size``-byte requests at ``bytes_per_cycle`` on average, from ``start``."""

    size: int
    bytes_per_cycle: Fraction
    start: int = 0
    credit: Fraction = Fraction(0)

    def arrivals(self, cycle: int) -> list[int]:
        if cycle < self.start:
            return []
        self.credit += self.bytes_per_cycle
        out = []
        while self.credit >= self.size:
            self.credit -= self.size
            out.append(self.size)
        return out


@dataclass
class Greedy(Source):
    """Sends as fast as an arrival curve ``burst + rate·t`` (bytes) allows: the
    worst case of traffic that conforms to a (capacity, rate) contract."""

    size: int
    burst_bytes: Fraction
    rate: Fraction  # bytes per cycle
    start: int = 0
    sent: int = 0

    def arrivals(self, cycle: int) -> list[int]:
        if cycle < self.start:
            return []
        allowed = self.burst_bytes + self.rate * (cycle - self.start)
        out = []
        while self.sent + self.size <= allowed:
            self.sent += self.size
            out.append(self.size)
        return out


class ClosedLoop:
    """Drive one :class:`ChannelModel` with sources; record every request."""

    def __init__(self, params, config, sources: dict[int, Source], bytes_per_cycle: Fraction,
                 on_cycle=None):
        self.params = params
        self.channel = ChannelModel(params, config)
        self.sources = sources
        self.memory = MemorySide(1, bytes_per_cycle)
        self.driver = ChannelDriver(params.tenants)  # spec §8's upstream driver
        self.records: list[Record] = []
        self.in_queue: dict[int, Record] = {}  # id -> record
        self.cycle = 0
        self.on_cycle = on_cycle  # called with (cycle, channel, grant_ready) before each step
        self._next_id = 0
        self.hold_grants_until = 0  # memory side not ready before this cycle

    def run(self, cycles: int) -> "ClosedLoop":
        ch = self.channel
        mask = (1 << self.params.id_width) - 1
        for _ in range(cycles):
            t = self.cycle
            for tenant, src in self.sources.items():
                for size in src.arrivals(t):
                    rec = Record(tenant, size, t)
                    self.driver.arrive(tenant, rec)
                    self.records.append(rec)
                    if isinstance(src, Backlogged):
                        src.outstanding += 1  # noqa: SIM113
            for i, q in enumerate(ch.fifo):
                if q:
                    rec = self.in_queue[q[0].id]
                    if rec.head is None:
                        rec.head = t
            tag = self.driver.present(ch.queue_full)
            req = None
            if tag >= 0:
                offer = self.driver.head(tag)
                req = Request(offer.tenant, offer.bytes, self._next_id & mask)
            ready = self.memory.ready(t)[0] and t >= self.hold_grants_until
            if self.on_cycle is not None:
                self.on_cycle(t, ch, ready)
            before = ch.grant
            res = ch.step(t & ((1 << self.params.ts_bits) - 1), req, ready)
            offer = self.driver.handshake(tag, res.accepted)
            if offer is not None:
                offer.accepted = t
                self.in_queue[self._next_id & mask] = offer
                self._next_id += 1
            if res.transferred is not None:
                g = res.transferred
                rec = self.in_queue.pop(g.id)
                rec.transferred = t
                self.memory.transfer(0, t, g.bytes)
            if ch.grant is not None and (before is None or res.transferred is not None):
                rec = self.in_queue[ch.grant.id]
                rec.selected, rec.kind = t, ch.grant.kind
                src = self.sources[rec.tenant]
                if isinstance(src, Backlogged):
                    src.outstanding -= 1
            self.cycle += 1
        return self

    def served(self) -> list[Record]:
        """Transferred requests in transfer order."""
        return sorted((r for r in self.records if r.transferred is not None),
                      key=lambda r: r.transferred)
