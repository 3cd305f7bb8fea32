"""The simulation loop: tenants, front-end policy, channel, CXL, events.

Time advances in memory-clock cycles but skips clocks in which nothing can
happen: the loop visits the next cycle at which a command could issue, a
data burst ends, a tenant timer fires or the front end could admit.
"""

import heapq
from collections import deque

from .dram import NEVER, Channel
from .hbm3 import HBM3_6400, HBM3_GEOMETRY
from .mapping import AddressMap

__all__ = ["System", "CxlLink"]


class CxlLink:
    """CXL-attached memory as a fixed latency behind a serialising link.

    Parameters
    ----------
    latency : int
        Cycles from the end of an access's transfer to its completion
        (the essay models 320 ns).
    cycles_per_access : int
        Link occupancy of one 32-byte access.
    """

    def __init__(self, *, latency, cycles_per_access):
        self.latency = latency
        self.cycles_per_access = cycles_per_access
        self.free_at = 0
        self.accesses = 0

    def serve(self, now):
        """Completion cycle of an access issued at ``now``."""
        self.free_at = max(self.free_at, now) + self.cycles_per_access
        self.accesses += 1
        return self.free_at + self.latency


class System:
    """One channel shared by tenants under a policy.

    Parameters
    ----------
    tenants : list of Tenant
        ``tenants[i].tenant_id`` must be ``i``.
    policy : Policy
    cxl : CxlLink or None
    timeline_window : int or None
        Record bytes per tenant per window of this many cycles.
    channel_args : dict
        Extra keyword arguments for :class:`~sim.dram.Channel`.
    """

    def __init__(self, tenants, policy, *, timing=HBM3_6400, geometry=HBM3_GEOMETRY, cxl=None,
                 timeline_window=None, channel_args=None):
        for i, t in enumerate(tenants):
            if t.tenant_id != i:
                raise ValueError(f"Tenant {i} has id {t.tenant_id}; ids must be 0..n-1 in order")
        self.timing = timing
        self.tenants = tenants
        self.policy = policy
        self.cxl = cxl
        self.address_map = AddressMap(len(tenants), coloring=policy.coloring, geometry=geometry)
        self.channel = Channel(timing=timing, geometry=geometry, scheduler=policy.scheduler,
                               n_tenants=len(tenants), **(channel_args or {}))
        if timeline_window:
            self.channel.stats.enable_timeline(timeline_window)
        self.sources = [deque() for _ in tenants]
        self.waiting = 0
        self.now = 0
        self.busy_cycles = 0      # cycles with work queued at the front end or controller
        self._events = []
        self._event_seq = 0
        self._seq = 0
        self._busy_since = None
        self._started = False

    # -- services for tenants ----------------------------------------------------
    def schedule(self, cycle, callback):
        """Call ``callback(cycle)`` at ``cycle``."""
        self._event_seq += 1
        heapq.heappush(self._events, (cycle, self._event_seq, callback))

    def submit(self, req, now):
        """A tenant issues ``req`` at ``now``."""
        self._seq += 1
        req.seq = self._seq
        req.arrival = now
        if req.to_cxl:
            req.done = self.cxl.serve(now)
            self.schedule(req.done, lambda cycle, r=req: r.owner.complete(r, cycle))
            return
        self.sources[req.tenant].append(req)
        self.waiting += 1
        self.policy.on_arrival(req, now)

    # -- the loop --------------------------------------------------------------
    def run(self, until, progress=None):
        """Simulate up to cycle ``until``.

        ``progress``, if given, is called with the number of cycles advanced.
        """
        if not self._started:
            self._started = True
            self.policy.prepare(self.tenants, self)
            for t in self.tenants:
                t.attach(self)
        channel = self.channel
        policy = self.policy
        sources = self.sources
        events = self._events
        now = self.now
        reported = now
        while now < until:
            while events and events[0][0] <= now:
                _, _, callback = heapq.heappop(events)
                callback(now)
            for req in channel.pop_completions(now):
                policy.on_complete(req, now)
                req.owner.complete(req, now)
            admit_next = NEVER
            if self.waiting and channel.has_room():
                heads = [q[0] for q in sources if q]
                req = policy.pick(now, heads)
                if req is not None:
                    sources[req.tenant].popleft()
                    self.waiting -= 1
                    channel.enqueue(req, now)
                    admit_next = now + 1
                else:
                    admit_next = policy.next_decision(now)
            nxt = channel.tick(now)
            busy = self.waiting or channel.occupancy
            nxt = min(nxt, channel.next_completion(), admit_next, events[0][0] if events else NEVER)
            nxt = max(nxt, now + 1)
            if busy:
                self.busy_cycles += min(nxt, until) - now
            now = nxt
            if progress is not None and now - reported >= 100_000:
                progress(min(now, until) - reported)
                reported = min(now, until)
        if progress is not None and until > reported:
            progress(until - reported)
        self.now = max(now, until)
        return self
