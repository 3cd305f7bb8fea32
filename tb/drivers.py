"""Request driver of one channel's ``req[c]`` port (spec §2, §8 driver rule).

The rule is the golden model's :class:`kvfabric.model.replay.ChannelDriver`
(the one every engine uses): requests arrive at their cycle, and each cycle
the driver presents the request it holds (spec §2: the payload holds while
``valid & ~ready``), else the first waiting request whose tenant is invalid
or whose ``queue_full`` bit is 0, as spec §8 prescribes for upstream logic;
in FCFS mode, or with ``honour_queue_full=False`` (a naive upstream that
exercises the push-back path), strictly the first one.  This module only
moves it onto the port.

Idle insertion: with probability ``idle`` the driver presents nothing in a
cycle where it could (only when it is not already holding a request, so the
hold rule is never broken).
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass

from kvfabric.model.replay import ChannelDriver

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
        self.rule = ChannelDriver(params.tenants, strict=not honour_queue_full)
        self.arrivals: deque[Req] = deque()  # future, sorted by cycle
        self.presented: Req | None = None
        self._tag = -1
        self.sent = 0

    @property
    def fcfs(self) -> bool:
        return self.rule.strict and self.honour_queue_full

    @fcfs.setter
    def fcfs(self, on: bool) -> None:
        self.rule.strict = bool(on) or not self.honour_queue_full

    @property
    def pending(self) -> list[Req]:
        """Requests whose cycle has come, not yet accepted, in arrival order."""
        return self.rule.items()

    def add(self, reqs) -> None:
        """Queue stimulus (sorted by cycle) for this channel."""
        for r in reqs:
            if self.arrivals and r.cycle < self.arrivals[-1].cycle:
                raise ValueError("requests must be added in cycle order")
            self.arrivals.append(r)

    def busy(self) -> bool:
        return bool(self.arrivals or self.rule.waiting)

    def next_arrival(self) -> int | None:
        return self.arrivals[0].cycle if self.arrivals else None

    def flush(self) -> list[Req]:
        """Forget everything not yet accepted (a reset); returns what was dropped."""
        lost = self.rule.flush() + list(self.arrivals)
        self.arrivals.clear()
        self.presented = None
        self._tag = -1
        self.port.set_request(None)
        return lost

    def withdraw(self) -> list[Req]:
        """Upstream gives up on everything not yet accepted, except a request it
        is holding on the port (spec §2: the payload holds until accepted)."""
        gone = self.rule.flush(keep_held=True) + list(self.arrivals)
        self.arrivals.clear()
        return gone

    def drive(self, cycle: int) -> None:
        while self.arrivals and self.arrivals[0].cycle <= cycle:
            r = self.arrivals.popleft()
            self.rule.arrive(r.tenant, r)
        idle = (lambda: self.rng.random() < self.idle) if self.idle else False
        n = self.params.tenants
        tag = self._tag = self.rule.present(
            lambda: [bool(self.port.queue_full() >> i & 1) for i in range(n)], idle)
        r = self.presented = self.rule.head(tag) if tag >= 0 else None
        self.port.set_request(r)

    def observe(self, accepted: bool) -> Req | None:
        """Record the cycle's handshake; returns the accepted request, if any."""
        r = self.rule.handshake(self._tag, accepted)
        if self._tag >= 0 and accepted:
            self.presented = None
            self.sent += 1
        return r
