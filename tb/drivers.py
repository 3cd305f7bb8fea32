"""Request driver of one channel's ``req[c]`` port (spec §2, §8 driver rule).

Requests arrive at their cycle into a pending list (row order).  Each cycle the
driver presents the first pending request whose tenant is invalid
(``tenant >= N``) or whose ``queue_full`` bit is 0, as spec §8 prescribes for
upstream logic ("one tenant's full queue never blocks another"); in FCFS mode,
or with ``honour_queue_full=False`` (a naive upstream that exercises the
push-back path), strictly the first one.  A presented request that is not
accepted stays presented with the same payload (spec §2: the payload holds
while ``valid & ~ready``).

Idle insertion: with probability ``idle`` the driver presents nothing in a
cycle where it could (only when it is not already holding a request, so the
hold rule is never broken).
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass

__all__ = ["Req", "RequestDriver"]


@dataclass(frozen=True, slots=True)
class Req:
    """A request of the test's stimulus: arrives at ``cycle`` on ``channel``."""

    cycle: int
    channel: int
    tenant: int
    bytes: int
    id: int


class RequestDriver:
    """Drives ``req[c]``; call :meth:`drive` after the falling edge of every cycle
    and :meth:`observe` with the cycle's sampled handshake."""

    def __init__(self, port, params, channel: int, rng: random.Random, *, idle: float = 0.0,
                 honour_queue_full: bool = True):
        self.port = port  # tb.monitor.ChannelPorts
        self.params = params
        self.channel = channel
        self.rng = rng
        self.idle = idle
        self.honour_queue_full = honour_queue_full
        self.fcfs = False
        self.arrivals: deque[Req] = deque()  # future, sorted by cycle
        self.pending: list[Req] = []
        self.presented: Req | None = None
        self.held = False  # presented last cycle and not accepted
        self.sent = 0

    def add(self, reqs) -> None:
        """Queue stimulus (sorted by cycle) for this channel."""
        for r in reqs:
            if self.arrivals and r.cycle < self.arrivals[-1].cycle:
                raise ValueError("requests must be added in cycle order")
            self.arrivals.append(r)

    def busy(self) -> bool:
        return bool(self.arrivals or self.pending or self.presented)

    def next_arrival(self) -> int | None:
        return self.arrivals[0].cycle if self.arrivals else None

    def flush(self) -> list[Req]:
        """Forget everything not yet accepted (a reset); returns what was dropped."""
        lost = list(self.pending) + list(self.arrivals)
        self.pending.clear()
        self.arrivals.clear()
        self.presented = None
        self.held = False
        self.port.set_request(None)
        return lost

    def withdraw(self) -> list[Req]:
        """Upstream gives up on everything not yet accepted, except a request it
        is holding on the port (spec §2: the payload holds until accepted)."""
        keep = [self.presented] if self.held else []
        gone = [r for r in [*self.pending, *self.arrivals] if r not in keep]
        self.pending = keep
        self.arrivals.clear()
        return gone

    def drive(self, cycle: int) -> None:
        while self.arrivals and self.arrivals[0].cycle <= cycle:
            self.pending.append(self.arrivals.popleft())
        if self.held:
            r = self.presented  # spec §2: hold until accepted
        else:
            r = None
            if self.pending and not (self.idle and self.rng.random() < self.idle):
                if self.fcfs or not self.honour_queue_full:
                    r = self.pending[0]
                else:
                    full = self.port.queue_full()
                    n = self.params.tenants
                    r = next((q for q in self.pending if q.tenant >= n or not full >> q.tenant & 1), None)
        self.presented = r
        self.port.set_request(r)

    def observe(self, accepted: bool) -> Req | None:
        """Record the cycle's handshake; returns the accepted request, if any."""
        r = self.presented
        if r is None:
            self.held = False
            return None
        if accepted:
            self.pending.remove(r)
            self.presented = None
            self.held = False
            self.sent += 1
            return r
        self.held = True
        return None
