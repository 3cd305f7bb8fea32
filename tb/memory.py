"""Memory side of one channel: drives ``grant[c].ready`` (spec §8 service rule).

``ready`` is 1 when the channel is idle; a grant of s bytes transferred in
cycle t keeps it busy (``ready = 0``) during t+1 .. t+q(s)-1 with
``q(s) = max(1, ceil(s / B))``, so it is ready again at t+q(s).  The rule is
the golden model's :class:`model.replay.MemorySide`, reused so that every
engine drains grants identically.

Extra backpressure: with probability ``backpressure`` an idle channel still
holds ``ready`` low for a cycle (a refresh, a bank conflict); ``ready`` never
depends on ``grant.valid``.

Credits (spec §6.6): with probability ``credit_return`` each bit of
``credit_return[c]`` is 1 in a cycle, independently of what is in flight (a
return with nothing in flight must be ignored, and a class whose limit is
reached waits for one). The spec §8 replay memory side returns none (0).
"""

from __future__ import annotations

import random
from fractions import Fraction

from kvfabric.model.replay import MemorySide

__all__ = ["MemoryModel"]


class MemoryModel:
    def __init__(self, ports, bytes_per_cycle, rng: random.Random, *, backpressure: float = 0.0,
                 credit_return: float = 0.0):
        self.ports = ports  # list of tb.monitor.ChannelPorts
        self.side = MemorySide(len(ports), Fraction(bytes_per_cycle))
        self.rng = rng
        self.backpressure = backpressure
        self.credit_return = credit_return
        self.ready = [True] * len(ports)

    def reset(self) -> None:
        self.side.busy_until = [0] * len(self.ports)

    def drive(self, cycle: int) -> None:
        rule = self.side.ready(cycle)
        for c, port in enumerate(self.ports):
            r = rule[c] and not (self.backpressure and self.rng.random() < self.backpressure)
            self.ready[c] = r
            port.set_grant_ready(r)
            if self.credit_return:
                port.set_credit_return(sum(1 << k for k in range(3)
                                           if self.rng.random() < self.credit_return))
            else:
                port.set_credit_return(0)

    def observe(self, channel: int, cycle: int, nbytes: int) -> None:
        """A grant of ``nbytes`` was transferred on ``channel`` in ``cycle``."""
        self.side.transfer(channel, cycle, nbytes)

    def shift(self, cycles: int) -> None:
        """Cycle numbering restarted ``cycles`` earlier (after a reset)."""
        self.side.busy_until = [max(0, b - cycles) for b in self.side.busy_until]
