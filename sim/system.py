"""The simulation loop: tenants, front-end policy, channel, CXL, events.

Tenants issue :class:`Transaction` s: 128-byte memory requests (a GPU L2
line), each served by the channel as four 32-byte column accesses, two per
pseudo-channel.  The front end (the policy) moves transactions from the
tenants' source queues into the controller's transaction queue; the channel
serves their accesses; a transaction completes when its last burst ends.

Time advances in memory-clock cycles but skips clocks in which nothing can
happen: the loop visits the next cycle at which a command could issue, a
data burst ends, a tenant timer fires or the front end asks to be called.
"""

import heapq
from collections import deque

from .dram import NEVER, Channel, Request
from .hbm3 import HBM3_6400, HBM3_GEOMETRY
from .mapping import AddressMap

__all__ = ["System", "Transaction", "CxlLink", "TRANSACTION_ACCESSES"]

#: 32-byte accesses per transaction: 128 B, two bursts on each pseudo-channel.
TRANSACTION_ACCESSES = 4


class Transaction:
    """One tenant memory request of ``TRANSACTION_ACCESSES`` accesses.

    Attributes
    ----------
    tenant : int
    nbytes : int
    is_write : bool
    accesses : list of Request
    arrival, seq : int
        Cycle and global order of issue by the tenant.
    owner : Tenant
        Told ``owner.complete(txn, cycle)`` when the last access ends.
    tag : object
        The owner's bookkeeping.
    to_cxl : bool
        Served by the CXL link instead of HBM.
    granted, admitted, done : int
        Cycles of the arbiter's selection (-1 without an arbiter), of entry
        into the controller and of the end of the last data burst.
    """

    __slots__ = ("tenant", "nbytes", "is_write", "accesses", "left", "arrival", "seq", "owner",
                 "tag", "to_cxl", "granted", "admitted", "done")

    def __init__(self, tenant, is_write, accesses, arrival, owner, tag=None, to_cxl=False):
        self.tenant = tenant
        self.is_write = is_write
        self.accesses = accesses
        self.nbytes = sum(a.nbytes for a in accesses)
        self.left = len(accesses)
        self.arrival = arrival
        self.seq = 0
        self.owner = owner
        self.tag = tag
        self.to_cxl = to_cxl
        self.granted = -1    # selected by an arbiter in front of the controller, if any
        self.admitted = -1
        self.done = -1
        for a in accesses:
            a.owner = self

    @property
    def bank(self):
        """Bank of the first access (the others share its bank and row index)."""
        return self.accesses[0].bank


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

    def serve(self, now, accesses):
        """Completion cycle of ``accesses`` issued at ``now``."""
        self.free_at = max(self.free_at, now) + self.cycles_per_access * accesses
        self.accesses += accesses
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
        self.channel = Channel(timing=timing, geometry=geometry, n_tenants=len(tenants),
                               **{**policy.controller_args(), **(channel_args or {})})
        if timeline_window:
            self.channel.stats.enable_timeline(timeline_window)
        self.sources = [deque() for _ in tenants]
        self.waiting = 0
        self.now = 0
        self.busy_cycles = 0      # cycles with work at the front end or in the controller
        self._events = []
        self._event_seq = 0
        self._seq = 0
        self._started = False

    # -- services for tenants ----------------------------------------------------
    def schedule(self, cycle, callback):
        """Call ``callback(cycle)`` at ``cycle``."""
        self._event_seq += 1
        heapq.heappush(self._events, (cycle, self._event_seq, callback))

    def transaction(self, tenant, first_index, is_write, now, tag=None, to_cxl=False):
        """Build the transaction of ``tenant`` starting at access ``first_index``."""
        locate = self.address_map.locate
        accesses = []
        for i in range(first_index, first_index + TRANSACTION_ACCESSES):
            bank, row = locate(tenant.tenant_id, i)
            accesses.append(Request(tenant.tenant_id, is_write, bank, row, now))
        return Transaction(tenant.tenant_id, is_write, accesses, now, tenant, tag, to_cxl)

    def submit(self, txn, now):
        """A tenant issues ``txn`` at ``now``."""
        self._seq += 1
        txn.seq = self._seq
        txn.arrival = now
        for a in txn.accesses:
            a.seq = a.rank = self._seq
            a.arrival = now
        if txn.to_cxl:
            txn.done = self.cxl.serve(now, len(txn.accesses))
            self.schedule(txn.done, lambda cycle, t=txn: t.owner.complete(t, cycle))
            return
        self.sources[txn.tenant].append(txn)
        self.waiting += 1
        self.policy.on_arrival(txn, now)

    # -- services for the front end ------------------------------------------------
    def admit(self, txn, now):
        """Move ``txn`` from its tenant's source queue into the controller."""
        self.take(txn)
        self.enqueue(txn, now)

    def take(self, txn):
        """Remove ``txn`` from its tenant's source queue (a front end holds it)."""
        source = self.sources[txn.tenant]
        if source[0] is txn:
            source.popleft()
        else:
            source.remove(txn)
        self.waiting -= 1

    def enqueue(self, txn, now):
        """Put ``txn``'s accesses into the controller's transaction queue."""
        txn.admitted = now
        if txn.granted < 0:
            txn.granted = txn.arrival  # no arbiter: all its wait was for room
        for a in txn.accesses:
            self.channel.enqueue(a, now)

    def room_for(self, txn):
        return self.channel.has_room(len(txn.accesses), txn.is_write)

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
        events = self._events
        now = self.now
        reported = now
        while now < until:
            while events and events[0][0] <= now:
                _, _, callback = heapq.heappop(events)
                callback(now)
            for req in channel.pop_completions(now):
                txn = req.owner
                txn.left -= 1
                if not txn.left:
                    txn.done = now
                    policy.on_complete(txn, now)
                    txn.owner.complete(txn, now)
            nxt = min(policy.front_end(now), channel.next_completion(),
                      events[0][0] if events else NEVER)
            nxt = min(nxt, channel.tick(now, nxt))
            nxt = max(nxt, now + 1)
            if self.waiting or channel.occupancy:
                self.busy_cycles += min(nxt, until) - now
            now = nxt
            if progress is not None and now - reported >= 200_000:
                progress(min(now, until) - reported)
                reported = min(now, until)
        if progress is not None and until > reported:
            progress(until - reported)
        self.now = max(now, until)
        return self
