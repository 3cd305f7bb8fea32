"""The simulation loop: tenants, front-end policies, channels, CXL, events.

Tenants issue :class:`Transaction` s: 128-byte memory requests (a GPU L2
line), each served by one channel as four 32-byte column accesses, two per
pseudo-channel.  The channel map (:class:`~sim.mapping.ChannelMap`) sends a
transaction to a channel; every channel is a :class:`ChannelPort`: its own
controller and HBM3 channel (:class:`~sim.dram.Channel`), its own front end
(a policy object; for the fabric, one golden-model channel as
model/fabric.py has one per channel) and its own source queues per tenant.
The front end moves transactions from its source queues into its
controller; the channel serves their accesses; a transaction completes when
its last burst ends.

Time advances in memory-clock cycles but skips clocks in which nothing can
happen: the loop visits the next cycle at which a command could issue, a
data burst ends, a tenant timer fires or a front end asks to be called.
With one channel its front end and controller are stepped at every visited
cycle, as before channels were ports (one-channel results are unchanged to
the byte).  With several, a port is stepped at its own wake-ups (what its
front end and controller asked for, its data bursts' ends) and whenever a
tenant hands it a transaction: visiting eight channels at every cycle any of
them needs would multiply the work by up to eight, and a channel's
decisions then depend only on its own traffic, not on when its neighbours
happen to be looked at.
"""

import heapq
from collections import deque

from .dram import NEVER, Channel, Request
from .hbm3 import HBM3_6400, HBM3_GEOMETRY
from .mapping import AddressMap, ChannelMap

__all__ = ["System", "ChannelPort", "Transaction", "CxlLink", "TRANSACTION_ACCESSES"]

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
    channel : int
        The channel that serves it (the channel map's choice).
    local : int
        Its index among the tenant's transactions on that channel (the
        channel-local address over 128 B; -1 when built by hand): a front end
        that sends several as one request needs them contiguous.
    """

    __slots__ = ("tenant", "nbytes", "is_write", "accesses", "left", "arrival", "seq", "owner",
                 "tag", "to_cxl", "granted", "admitted", "done", "channel", "local")

    def __init__(self, tenant, is_write, accesses, arrival, owner, tag=None, to_cxl=False, channel=0):
        self.tenant = tenant
        self.is_write = is_write
        self.accesses = accesses
        self.left = len(accesses)
        self.arrival = arrival
        self.seq = 0
        self.owner = owner
        self.tag = tag
        self.to_cxl = to_cxl
        self.granted = -1    # selected by an arbiter in front of the controller, if any
        self.admitted = -1
        self.done = -1
        self.channel = channel
        self.local = -1
        nbytes = 0
        for a in accesses:
            a.owner = self
            nbytes += a.nbytes
        self.nbytes = nbytes

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


class ChannelPort:
    """One channel of a :class:`System` as its front end sees it.

    A policy is prepared with its port (``policy.prepare(tenants, port)``)
    and uses what a one-channel system offered it: the tenants' source
    queues of this channel (``sources``, ``waiting``), its controller and
    HBM3 channel (``channel``), and ``take``, ``enqueue``, ``admit`` and
    ``room_for``.

    Attributes
    ----------
    index : int
    channel : Channel
    policy : Policy
    sources : list of deque
        Per tenant, its transactions for this channel not yet taken by the front end.
    waiting : int
        Transactions in ``sources``.
    wake : int
        The next cycle the port must be stepped (several channels only).
    """

    def __init__(self, system, index, channel, policy, n_tenants):
        self.system = system
        self.index = index
        self.channel = channel
        self.policy = policy
        self.sources = [deque() for _ in range(n_tenants)]
        self.waiting = 0
        self.wake = 0

    @property
    def tenants(self):
        return self.system.tenants

    @property
    def now(self):
        return self.system.now

    def take(self, txn):
        """Remove ``txn`` from its tenant's source queue (a front end holds it)."""
        source = self.sources[txn.tenant]
        if source[0] is txn:
            source.popleft()
        else:
            source.remove(txn)
        self.waiting -= 1
        self.system.waiting -= 1

    def enqueue(self, txn, now):
        """Put ``txn``'s accesses into this channel's controller queue."""
        txn.admitted = now
        if txn.granted < 0:
            txn.granted = txn.arrival  # no arbiter: all its wait was for room
        channel = self.channel
        for a in txn.accesses:
            channel.enqueue(a, now)

    def admit(self, txn, now):
        """Move ``txn`` from its tenant's source queue into the controller."""
        self.take(txn)
        self.enqueue(txn, now)

    def room_for(self, txn):
        return self.channel.has_room(len(txn.accesses), txn.is_write)


class System:
    """Channels shared by tenants, each under its own front-end policy.

    Parameters
    ----------
    tenants : list of Tenant
        ``tenants[i].tenant_id`` must be ``i``.
    policy : Policy, or list of Policy
        One front end per channel (a single policy: one channel).  Each is
        prepared with its :class:`ChannelPort`.
    cxl : CxlLink, list of CxlLink, or None
        The CXL link spilled reads go over; a list gives one per channel,
        taken by the channel the transaction's address maps to (the spill's
        CXL memory interleaved as the HBM is, with the same aggregate link).
    timeline_window : int or None
        Record bytes per tenant per window of this many cycles.
    channel_args : dict
        Extra keyword arguments for :class:`~sim.dram.Channel`.
    channel_map : ChannelMap or None
        Which channel serves each transaction; default: every tenant spread
        over every channel at the default interleave.
    """

    def __init__(self, tenants, policy, *, timing=HBM3_6400, geometry=HBM3_GEOMETRY, cxl=None,
                 timeline_window=None, channel_args=None, channel_map=None):
        for i, t in enumerate(tenants):
            if t.tenant_id != i:
                raise ValueError(f"Tenant {i} has id {t.tenant_id}; ids must be 0..n-1 in order")
        policies = list(policy) if isinstance(policy, (list, tuple)) else [policy]
        if not policies or len({id(p) for p in policies}) != len(policies):
            raise ValueError("Give one policy object per channel (a policy holds its channel's front-end state)")
        if len({p.coloring for p in policies}) != 1:
            raise ValueError("Every channel's policy must agree on page coloring (one address map)")
        if channel_map is None:
            channel_map = ChannelMap.spread(len(policies), len(tenants))
        if channel_map.channels != len(policies) or len(channel_map.sets) != len(tenants):
            raise ValueError(f"Channel map for {channel_map.channels} channels and {len(channel_map.sets)} "
                             f"tenants, system of {len(policies)} channels and {len(tenants)} tenants")
        self.timing = timing
        self.tenants = tenants
        self.cxl = cxl
        if isinstance(cxl, (list, tuple)) and len(cxl) != len(policies):
            raise ValueError(f"{len(cxl)} CXL links for {len(policies)} channels (give one, or one per channel)")
        self.channel_map = channel_map
        self.address_map = AddressMap(len(tenants), coloring=policies[0].coloring, geometry=geometry)
        self.ports = []
        for c, p in enumerate(policies):
            channel = Channel(timing=timing, geometry=geometry, n_tenants=len(tenants),
                              **{**p.controller_args(), **(channel_args or {})})
            if timeline_window:
                channel.stats.enable_timeline(timeline_window)
            self.ports.append(ChannelPort(self, c, channel, p, len(tenants)))
        self.channels = [port.channel for port in self.ports]
        self.policies = policies
        if len(self.ports) == 1:
            port = self.ports[0]
            self.channel, self.policy, self.sources = port.channel, port.policy, port.sources
            # The front end calls these every grant: the port's own, one call fewer.
            self.take, self.enqueue, self.room_for = port.take, port.enqueue, port.room_for
        #: Transactions issued to HBM and not yet taken by a front end, over every
        #: channel (an attribute, not a sum: a one-channel front end reads it every cycle).
        self.waiting = 0
        self.now = 0
        self.busy_cycles = 0      # cycles with work at a front end or in a controller
        self._events = []
        self._event_seq = 0
        self._seq = 0
        self._started = False

    # -- one channel: the names a one-channel system always had -------------------
    def __getattr__(self, name):
        # Only reached for names not set: channel, policy and sources are set on a
        # one-channel system (plain attributes: its front end reads them every cycle).
        if name in ("channel", "policy", "sources"):
            raise AttributeError(f"System.{name} names the one channel of a one-channel system; this one has "
                                 f"{len(self.ports)}: use System.ports[c] (.channel, .policy, .sources) "
                                 f"or System.channels[c]")
        raise AttributeError(f"'System' object has no attribute {name!r}")

    def take(self, txn):
        self.ports[txn.channel].take(txn)

    def enqueue(self, txn, now):
        self.ports[txn.channel].enqueue(txn, now)

    def admit(self, txn, now):
        self.take(txn)
        self.enqueue(txn, now)

    def room_for(self, txn):
        return self.ports[txn.channel].room_for(txn)

    # -- services for tenants ----------------------------------------------------
    def schedule(self, cycle, callback):
        """Call ``callback(cycle)`` at ``cycle``."""
        self._event_seq += 1
        heapq.heappush(self._events, (cycle, self._event_seq, callback))

    def capacity_transactions(self, tenant):
        """Transactions ``tenant`` may address over its channel set."""
        local = self.address_map.capacity(tenant) // TRANSACTION_ACCESSES
        return self.channel_map.capacity(tenant, local)

    def transaction(self, tenant, first_index, is_write, now, tag=None, to_cxl=False):
        """Build the transaction of ``tenant`` starting at access ``first_index``
        (a multiple of :data:`TRANSACTION_ACCESSES`), on the channel the map gives."""
        tid = tenant.tenant_id
        if len(self.ports) == 1:
            channel, first = 0, first_index
            local = first_index // TRANSACTION_ACCESSES
        else:
            channel, local = self.channel_map.locate(tid, first_index // TRANSACTION_ACCESSES, now)
            first = local * TRANSACTION_ACCESSES + first_index % TRANSACTION_ACCESSES
        accesses = [Request(tid, is_write, bank, row, now)
                    for bank, row in self.address_map.locate_run(tid, first, TRANSACTION_ACCESSES)]
        txn = Transaction(tid, is_write, accesses, now, tenant, tag, to_cxl, channel)
        txn.local = local
        return txn

    def submit(self, txn, now):
        """A tenant issues ``txn`` at ``now``."""
        self._seq += 1
        txn.seq = self._seq
        txn.arrival = now
        # Each access gets its own place in the arrival order (the
        # transaction's, then its address order), so no two banks' wishes
        # ever tie on rank and the scheduler's choice never depends on the
        # order in which it happens to look at the banks.
        first = self._seq * TRANSACTION_ACCESSES
        for i, a in enumerate(txn.accesses):
            a.seq = a.rank = first + i
            a.arrival = now
        if txn.to_cxl:
            link = self.cxl[txn.channel] if isinstance(self.cxl, (list, tuple)) else self.cxl
            txn.done = link.serve(now, len(txn.accesses))
            self.schedule(txn.done, lambda cycle, t=txn: t.owner.complete(t, cycle))
            return
        port = self.ports[txn.channel]
        port.sources[txn.tenant].append(txn)
        port.waiting += 1
        self.waiting += 1
        port.wake = now  # its front end sees the arrival now
        port.policy.on_arrival(txn, now)

    # -- the loop --------------------------------------------------------------
    def _prepare(self):
        if len(self.ports) == 1:
            # A one-channel system is its channel's port, as it always was
            # (the front end calls System.enqueue, which tests may wrap).
            self.policy.prepare(self.tenants, self)
        else:
            for port in self.ports:
                port.policy.prepare(self.tenants, port)
            # A front end sizes per-tenant state for its one channel: the
            # software throttle's quota is a share of one channel's peak.  A
            # tenant over k channels may issue k of them.
            for t in self.tenants:
                throttle = getattr(t, "throttle", None)
                if throttle is not None:
                    throttle.quota *= len(self.channel_map.sets[t.tenant_id])
        for t in self.tenants:
            t.attach(self)

    def run(self, until, progress=None):
        """Simulate up to cycle ``until``.

        ``progress``, if given, is called with the number of cycles advanced.
        """
        if not self._started:
            self._started = True
            self._prepare()
        ports = self.ports
        one = len(ports) == 1
        port = ports[0]
        events = self._events
        channel = port.channel
        inflight = channel.inflight
        front_end = port.policy.front_end
        tick = channel.tick
        now = self.now
        reported = now
        while now < until:
            while events and events[0][0] <= now:
                _, _, callback = heapq.heappop(events)
                callback(now)
            if one:
                # Stepped at every visited cycle, as before channels were ports.
                # (The inflight heap is read in place of next_completion(): the
                # hottest loop of every run.)
                if inflight and inflight[0][0] <= now:
                    self._complete(port, now)
                nxt = front_end(now)
                if inflight and inflight[0][0] < nxt:
                    nxt = inflight[0][0]
                if events and events[0][0] < nxt:
                    nxt = events[0][0]
                woken = tick(now, nxt)
                if woken < nxt:
                    nxt = woken
                busy = port.waiting or channel.occupancy
            else:
                nxt, busy = self._visit(now)
            if nxt <= now:
                nxt = now + 1
            if busy:
                self.busy_cycles += (nxt if nxt < until else until) - now
            now = nxt
            if progress is not None and now - reported >= 200_000:
                progress(min(now, until) - reported)
                reported = min(now, until)
        if progress is not None and until > reported:
            progress(until - reported)
        self.now = max(now, until)
        return self

    @staticmethod
    def _complete(port, now):
        """The port's accesses whose data burst has ended by ``now``; a
        transaction whose last one has is complete (its front end and owner are told)."""
        policy = port.policy
        for req in port.channel.pop_completions(now):
            txn = req.owner
            txn.left -= 1
            if not txn.left:
                txn.done = now
                policy.on_complete(txn, now)
                txn.owner.complete(txn, now)

    def _visit(self, now):
        """Several channels at ``now``: completions first (a tenant may hand a
        transaction to any port), then every port that is due.  Returns the
        next cycle to visit and whether any port has work."""
        ports = self.ports
        for port in ports:
            if port.channel.next_completion() <= now:
                self._complete(port, now)
                port.wake = now
        events = self._events
        nxt = events[0][0] if events else NEVER
        busy = False
        for port in ports:
            channel = port.channel
            if port.wake <= now:
                wake = min(port.policy.front_end(now), channel.next_completion())
                wake = min(wake, channel.tick(now, wake))
                port.wake = wake = max(wake, now + 1)
            else:
                wake = port.wake
            if wake < nxt:
                nxt = wake
            busy = busy or port.waiting or channel.occupancy
        return nxt, busy
