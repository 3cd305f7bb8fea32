"""The fabric policy: the golden model's arbiter in front of the controller.

This is a thin adapter, not a re-implementation.  The arbiter is
:class:`model.channel.ChannelModel` configured by :func:`model.contract.
compile_contract`; every fabric clock it is stepped with

* the request the upstream network presents: the oldest waiting transaction
  of a tenant whose fabric queue is not full (``queue_full``, spec §2),
* ``grant.ready`` = the controller's transaction queue has room for one
  transaction,

and a transferred grant moves its transaction into the controller, whose
FR-FCFS scheduler serves it.  The fabric decides tenant order; the DRAM
model serves.

The fabric runs at ``clock_mhz`` of the contract: its clock edges fall on
the memory clocks ``ceil(k * memory_mhz / clock_mhz)`` (every 4th at
400 MHz, where one grant per fabric clock of a 128-byte transaction is
exactly the channel's 51.2 GB/s; a clock that does not divide the memory
clock's 1600 MHz, such as 300 MHz, gets unevenly spaced edges with the
contract's average rate, the nearest the memory clock can resolve).
"""

from dataclasses import dataclass, replace
from fractions import Fraction
from itertools import islice

from kvfabric.model.channel import Request as FabricRequest
from kvfabric.model.channel import BURST, NO_CREDIT_RETURN, ChannelModel
from kvfabric.model.contract import compile_contract
from kvfabric.model.coordinator import Coordinator

from kvfabric import spec as _spec

from .controller import (BURST_CLASS, GUARANTEED_CLASS, URGENT_CLASS, CreditReturn, PreemptingDrain,
                         QosRefresh, QosScheduler, ReservedEntries, YieldingCreditReturn, qos_rank)
from .dram import NEVER
from .policies import Policy
from .mapping import TRANSACTION_BYTES
from .system import TRANSACTION_ACCESSES

__all__ = ["FabricPolicy", "FabricQosPolicy", "FabricCoordinator", "QosKnobs", "contract_doc", "grant_class",
           "grant_axqos", "FABRIC_MHZ", "REQUEST_BYTES"]

#: The arbiter clock the system model's front end assumes: one 128 B grant per
#: fabric clock is the channel's 51.2 GB/s peak.
FABRIC_MHZ = 400

#: Bytes one arbiter request may carry (:class:`FabricPolicy`'s ``request_bytes``).
REQUEST_BYTES = (TRANSACTION_BYTES, 2 * TRANSACTION_BYTES)


_BURST_RANK = 1 << 40  # rank offset of burst-path accesses in a kind-aware controller


def contract_doc(tenants, *, channel_gbps, clock_mhz, admission_limit=Fraction(85, 100),
                 queue_depth=4, starvation_limit_us=50):
    """A one-channel contract document (spec §12) for ``compile_contract``.

    Parameters
    ----------
    tenants : list of dict
        ``[[tenant]]`` tables: id, name, guaranteed_gbps, burst_gbps,
        burst_duration_ms, priority, latency_slo_us, optional weight.
        GB/s are this channel's share.
    """
    return {
        "fabric": {
            "clock_mhz": _toml_number(clock_mhz),
            "channels": 1,
            "channel_gbps": _toml_number(channel_gbps),
            "admission_limit": _toml_number(admission_limit),
            "tenants": len(tenants),
            "queue_depth": queue_depth,
            "starvation_limit_us": _toml_number(starvation_limit_us),
        },
        "tenant": [{k: _toml_number(v) for k, v in t.items()} for t in tenants],
    }


def _toml_number(value):
    """TOML has ints and floats only; the compiler reads a float's decimal text."""
    if isinstance(value, Fraction):
        return value.numerator if value.denominator == 1 else float(value)
    return value


class FabricPolicy(Policy):
    """Front end driven by the golden model; FR-FCFS command scheduling.

    Parameters
    ----------
    doc : dict
        Contract document (see :func:`contract_doc`).
    memory_mhz : int
        Memory clock; the contract's ``clock_mhz`` need not divide it
        (fabric edges at ``ceil(k * memory_mhz / clock_mhz)``, :meth:`edge`).
    coloring : bool
        Page coloring in the address map (the essay's §8 with the fabric).
    kind_aware : bool
        Let the controller's scheduler see the grant kind: accesses granted
        on the burst path rank behind guaranteed ones (our extension; the
        arbiter's decisions are unchanged).
    request_bytes : int
        Most bytes one arbiter request carries: 128 (the default: every
        128 B transaction is a request of its own) or 256.  At 256 the
        upstream presents a tenant's head transaction together with the next
        one in its queue when that one is contiguous with it on the channel
        (same direction, the next 128 B of the same aligned 256 B, inside one
        interleave unit): one request of 256 B, one grant, one credit, as the
        AXI front end's pieces of up to ``frag_beats`` beats are (spec §14.1
        and §14.2: 8 x 32 B = 256 B by default).  A fabric clock then moves up
        to twice the channel's peak at 400 MHz instead of exactly it (issue
        #41, reports/grant_rate.md).
    name : str
    """

    scheduler = "frfcfs"
    #: The :class:`FabricCoordinator` this channel's arbiter shares with the
    #: others' (spec §13), or None: the contract's registers on every channel.
    coordinator = None

    def __init__(self, doc, *, memory_mhz=1600, coloring=False, kind_aware=False, name="Fabric",
                 request_bytes=TRANSACTION_BYTES):
        if request_bytes not in REQUEST_BYTES:
            raise ValueError(f"request_bytes must be one of {', '.join(map(str, REQUEST_BYTES))}, "
                             f"not {request_bytes!r}")
        self.request_bytes = request_bytes
        self.doc = doc
        self.compiled = compile_contract(doc)
        if request_bytes > self.compiled.params.max_request_bytes:
            raise ValueError(f"request_bytes {request_bytes} exceeds the contract's max_request_bytes "
                             f"({self.compiled.params.max_request_bytes}): the arbiter takes no larger request")
        #: Memory clocks per fabric clock (exact; 4 at 400 MHz).
        self.period = Fraction(memory_mhz) / self.compiled.clock_mhz
        self.coloring = coloring
        self.kind_aware = kind_aware
        self.name = name
        self.ts_mask = (1 << self.compiled.params.ts_bits) - 1
        self.id_mask = (1 << self.compiled.params.id_width) - 1
        self.depth = self.compiled.params.queue_depth

    def prepare(self, tenants, system):
        super().prepare(tenants, system)
        if len(tenants) != self.compiled.params.tenants:
            raise ValueError(f"Contract has {self.compiled.params.tenants} tenants, "
                             f"the system {len(tenants)}")
        self.model = ChannelModel(self.compiled.params, self._config())
        #: The registers as the contract sets them; the coordinator's rates replace its tenants' (spec §13.3).
        self.base_config = self.model.config
        self.in_fabric = {}       # request id -> transaction accepted by the fabric
        self.fabric_cycle = 0     # the next fabric clock edge's number ...
        self.next_edge = 0        # ... and its memory cycle (:meth:`edge`)
        self.grants = [0] * len(tenants)
        self.burst_grants = [0] * len(tenants)
        # Transactions per request, and per interleave unit of this channel
        # (a request never spans two: with one channel, nothing to span).
        self.piece = self.request_bytes // TRANSACTION_BYTES
        system = getattr(self.system, "system", self.system)
        ports = getattr(system, "ports", ())
        self.unit = system.channel_map.unit if len(ports) > 1 else self.piece

    def reconfigure(self, doc):
        """Commit a new contract (all tenants at once, as COMMIT does); the
        arbiter's dynamic state (buckets, tags, queues) carries over."""
        if self.coordinator is not None:
            raise ValueError("A coordinated fabric cannot be reconfigured: a COMMIT would discard the "
                             "coordinator's rates (spec §13.3), which the system model does not model")
        self.doc = doc
        self.compiled = compile_contract(doc)
        self.model.config = self.base_config = self._config()

    def _config(self):
        """The arbiter's registers: the contract's, with the ``CREDITS`` limits 0,
        for this memory side returns no credits."""
        return self.compiled.config_without_credits

    def edge(self, k):
        """Memory cycle of fabric clock edge ``k``: the first at or after
        ``k`` fabric periods (``k * period`` when the period is whole)."""
        period = self.period
        return -(-k * period.numerator // period.denominator)

    # -- the front end ----------------------------------------------------------
    def front_end(self, now):
        model = self.model
        system = self.system
        while self.next_edge <= now:
            if not system.waiting and not self.in_fabric and model.quiescent():
                # Nothing to arbitrate: only buckets refill, exactly (model.skip),
                # over every edge up to now (the last is floor(now / period)).
                period = self.period
                last = now * period.denominator // period.numerator
                if self.coordinator is None:
                    model.skip(last - self.fabric_cycle + 1)
                else:
                    self._skip_coordinated(last - self.fabric_cycle + 1)
                self.fabric_cycle = last + 1
                self.next_edge = self.edge(self.fabric_cycle)
                break
            self._clock(now, self.fabric_cycle)
            self.fabric_cycle += 1
            self.next_edge = self.edge(self.fabric_cycle)
        if system.waiting or self.in_fabric or not model.quiescent():
            return self.next_edge
        return NEVER

    def _clock(self, now, fabric_cycle):
        system = self.system
        model = self.model
        if self.coordinator is not None and fabric_cycle >= self.next_apply:
            self._apply(fabric_cycle)
        offer = None
        if system.waiting:
            # Upstream presents, among tenants with room (spec §2), the one
            # whose arbiter queue is emptiest; of equally empty ones a tenant
            # whose priority is not bulk (spec §6.6's bulk_prio) before a
            # bulk one, then the oldest.  Presenting simply the oldest
            # request would keep a backlogged tenant's queue topped up and
            # leave a high-priority tenant's queue empty at every other
            # selection: the ingress takes one request per clock and needs
            # two clocks to make it visible.  The tie rule, because the
            # oldest head of two equally empty queues is nearly always the
            # backlogged prefill's: where one grant per clock is just the
            # channel's peak (400 MHz, 128 B), every ingress slot a prefill
            # takes in a decode step is a grant the step never gets back
            # (issue #41: the family's draw 1, decode p99 over decode-only
            # 1.224x / 1.190x at seeds 1 / 2 with the oldest first, 1.188x /
            # 1.140x with the tie rule; pooled over seeds 1-6, 1.219x and
            # 1.184x).  Ties only: a bulk tenant whose queue is emptier still
            # goes first, so its guaranteed heads reach the arbiter, which
            # alone decides whose request is served.
            occupancy = model.occupancy()
            cfg = model.config
            bulk_prio, tenant_cfg = cfg.bulk_prio, cfg.tenants
            best_key = 2 * self.depth  # only a queue with room takes the offer
            for source in system.sources:
                if source:
                    head = source[0]
                    if (head.seq & self.id_mask) in self.in_fabric:
                        # Its id (the issue order's low ID_WIDTH bits) is still
                        # outstanding here: upstream never presents an id twice,
                        # and the grant could not name its transaction.
                        continue
                    t = head.tenant
                    key = 2 * occupancy[t] + (bulk_prio >> tenant_cfg[t].priority & 1)
                    if key < best_key or (key == best_key and offer is not None and head.seq < offer.seq):
                        best_key, offer = key, head
        request = None
        if offer is not None:
            group = self._piece(offer)
            request = FabricRequest(offer.tenant, sum(t.nbytes for t in group), offer.seq & self.id_mask)
        # The memory side's ready depends on the grant's direction (separate
        # read and write queues); the grant register's payload holds still.
        held = model.grant
        ready = held is None or self._ready(held)
        result = self._step(now, fabric_cycle & self.ts_mask, request, ready)
        if result.accepted and not result.dropped:
            for txn in group:
                system.take(txn)
            self.in_fabric[request.id] = group
            if self.coordinator is not None:
                self.coordinator.count(self.coord_channel, fabric_cycle, request.tenant, request.bytes,
                                       model.queue_full()[request.tenant])
        selected = model.grant
        if selected is not None and selected is not held:
            for txn in self.in_fabric[selected.id]:
                txn.granted = now
        grant = result.transferred
        if grant is not None:
            group = self.in_fabric.pop(grant.id)
            self._transferred(grant, group)
            for txn in group:
                self.grants[txn.tenant] += 1
                if grant.kind == BURST:
                    self.burst_grants[txn.tenant] += 1
                self._mark(txn, grant)
                system.enqueue(txn, now)

    def _piece(self, head):
        """The transactions one request of ``head``'s carries: ``head``, and
        while the request has room the ones queued right behind it that
        continue it on the channel (same direction and link, the next
        channel-local 128 B, inside the aligned ``request_bytes`` and the
        interleave unit)."""
        piece = self.piece
        if piece == 1 or head.local < 0 or head.local % piece:
            return [head]
        group = [head]
        unit = head.local // self.unit
        for txn in islice(self.system.sources[head.tenant], 1, piece):
            local = head.local + len(group)
            if (txn.local != local or txn.is_write != head.is_write or txn.to_cxl != head.to_cxl
                    or local // self.unit != unit):
                break
            group.append(txn)
        return group

    def _transferred(self, grant, group):
        """A grant of ``group`` went to the controller (the memory side's bookkeeping)."""

    # -- the coordinator (spec §13; FabricCoordinator says when what happens) ------
    def _apply(self, fabric_cycle):
        """``fabric_cycle`` is an apply cycle: the rates of the result in force
        from it on (spec §13.5: tenant i's from ``t_a(k) + i·C + c``), before
        the cycle steps."""
        coord = self.coordinator
        n, nc = self.compiled.params.tenants, self.compiled.params.channels
        k, into = divmod(fabric_cycle - coord.latency - self.coord_channel, coord.epoch)
        upto = min(into // nc, n - 1)      # tenants 0..upto hold result k, the others result k - 1
        self.model.config = coord.channel_config(self, k, upto)
        if upto < n - 1:
            self.next_apply = k * coord.epoch + coord.latency + (upto + 1) * nc + self.coord_channel
        else:
            self.next_apply = (k + 1) * coord.epoch + coord.latency + self.coord_channel

    def _skip_coordinated(self, cycles):
        """``model.skip(cycles)`` from :attr:`fabric_cycle`, split at apply cycles
        (the refill rates change there)."""
        cycle, end = self.fabric_cycle, self.fabric_cycle + cycles
        while cycle < end:
            if cycle >= self.next_apply:
                self._apply(cycle)
            stop = min(end, self.next_apply)
            self.model.skip(stop - cycle)
            cycle = stop

    def catch_up(self, fabric_cycle):
        """Skip an idle arbiter to ``fabric_cycle`` (no waiting work was offered
        before it: see :class:`FabricCoordinator`)."""
        assert not self.in_fabric and self.model.quiescent(), "only an idle port is caught up"
        if fabric_cycle > self.fabric_cycle:
            self._skip_coordinated(fabric_cycle - self.fabric_cycle)
            self.fabric_cycle = fabric_cycle
            self.next_edge = self.edge(fabric_cycle)

    def _ready(self, held):
        """The memory side's grant.ready for the grant register's payload."""
        group = self.in_fabric[held.id]
        return self.system.channel.has_room(TRANSACTION_ACCESSES * len(group), group[0].is_write)

    def _step(self, now, fabric_now, request, ready):
        return self.model.step(fabric_now, request, ready)

    def _mark(self, txn, grant):
        """What the controller learns from the grant (here: the kind-aware rank)."""
        if self.kind_aware and grant.kind == BURST:
            for a in txn.accesses:
                a.rank += _BURST_RANK


class FabricCoordinator:
    """The coordinator of spec §13 over the channels' :class:`FabricPolicy` s.

    model/fabric.py's ``FabricModel`` steps every channel in the same cycle
    and its :class:`~kvfabric.model.coordinator.Coordinator` between cycles.
    Here each channel's arbiter is stepped by its own port (sim/system.py),
    at its own wake-ups; this object keeps what the coordinator decides
    exact all the same, with the model's arithmetic
    (:meth:`Coordinator.count`, :meth:`Coordinator.end_epoch`, i.e.
    ``allocate``, and :meth:`Coordinator.channel_configs`).

    **When.** The contract enables the coordinator from reset and the system
    model never writes ``COORD`` or commits (:meth:`FabricPolicy.reconfigure`
    refuses), so epoch ``e`` is fabric cycles ``eE .. (e+1)E - 1`` (spec
    §13.4: ``ec`` = 0 in cycle 0) and the result of epoch ``k - 1``, result
    ``k``, holds for tenant i on channel c from its apply cycle
    ``t_a(k) + i·C + c``, with ``t_a(k) = kE + COORD_LATENCY``, to
    ``t_a(k+1) + i·C + c``; before that every channel uses the registers
    (the even split).  All ports number fabric clocks alike, so a channel
    counts an acceptance of fabric cycle t into epoch ``t // E`` and loads
    tenant i's part of result k into its ``ChannelModel`` before it steps
    ``t_a(k) + i·C + c``, in a step or inside a skip
    (:meth:`FabricPolicy._skip_coordinated` splits
    a skip there: the refill rates change).

    **Demand complete before its result.** The loop visits memory cycles in
    order, and a port that has work (a waiting or granted transaction, or a
    non-quiescent arbiter) asks to be called at its next fabric edge, so it
    steps every edge at that edge's memory cycle: when any port reaches
    ``t_a(k)`` (memory cycle ``edge(t_a(k))``) such a port has stepped every
    fabric cycle up to ``t_a(k) - 1`` (the edge of this very memory cycle
    may still be ahead of it), far past the epoch's end ``kE - 1``, since
    ``COORD_LATENCY`` > 0.  Only a port whose front end went idle (returned
    NEVER: nothing waiting, nothing granted, the arbiter quiescent) can lag:
    its arbiter stays at the first fabric edge after its last visit until a
    visit skips it on, and a transaction handed to it later would be
    offered from that stale edge on (its earlier edges are stepped when it
    wakes; a property of the loop, the same with the coordinator off).  Its
    arbiter has accepted nothing since, so the demand it counted is final
    up to its lag; what it could still count at an edge up to ``kE - 1`` is
    only such a stale offer.  So result k is computed lazily, when the
    first port reaches ``t_a(k)`` (not at the epoch's end, when the ports
    stepping their edges in the same memory cycle may not all have passed
    it), and first every lagging port is skipped to ``kE``
    (:meth:`FabricPolicy.catch_up`: exact, it is quiescent and nothing was
    offered to it; a transaction that reaches it later is offered from
    ``kE`` on, which only ever moves a stale offer nearer its arrival).
    Then no port can count demand of epoch ``k - 1`` any more (:meth:`count`
    asserts it), and the result is the rule's on the whole epoch.  A port
    that catches up crosses ``t_a(k - 1)`` at most, whose result exists.

    Parameters
    ----------
    policies : list of FabricPolicy
        One per channel, in channel order (channel c is ``policies[c]``).
    config : FabricConfig
        The contract's registers (``coord_enable`` set): every tenant's
        ``RATE``, ``PEAK_RATE`` and ``enable``, ``coord_floor`` and the epoch.

    Attributes
    ----------
    results : list
        Per result k = 1, 2, ... computed so far: ``(t_a, demand, splits)``,
        the epoch's demand per tenant per channel (32-byte units, as
        counted) and each tenant's ``(rate, peak)`` per channel (None: the
        even split).
    """

    def __init__(self, policies, config):
        if not config.coord_enable:
            raise ValueError("The contract does not enable the coordinator (coordinator = true, spec §12)")
        self.policies = list(policies)
        self.config = config
        self.params = self.policies[0].compiled.params
        if len(self.policies) != self.params.channels:
            raise ValueError(f"{len(self.policies)} channel policies for a contract of {self.params.channels} channels")
        #: E and COORD_LATENCY, in fabric cycles.
        self.epoch = config.coord_epoch
        self.latency = _spec.COORD_LATENCY
        self.results = []
        #: Per result k = 1, 2, ...: its epoch's backlog bits per tenant per channel (spec §13.4).
        self.backlogs = []
        self._splits = [[None] * self.params.tenants]   # result k's splits; 0: the registers
        self._open = {}                                  # epoch -> Coordinator counting its demand
        self._previous = None                            # the last result's rates (damped descent, §13.5)
        for c, p in enumerate(self.policies):
            p.coordinator = self
            p.coord_channel = c
            p.next_apply = self.epoch + self.latency + c  # tenant 0's rates on channel c load c cycles after t_a

    def count(self, channel, fabric_cycle, tenant, nbytes, full):
        """A valid request accepted on ``channel`` in ``fabric_cycle`` (spec
        §13.4); ``full``: it left the tenant's queue there full."""
        e = fabric_cycle // self.epoch
        assert e >= len(self._splits) - 1, (f"demand of epoch {e} on channel {channel} after its result "
                                            f"was computed")
        acc = self._open.get(e)
        if acc is None:
            acc = self._open[e] = Coordinator(self.params)
        acc.count(channel, tenant, nbytes, full)

    def channel_config(self, policy, k, upto):
        """The configuration ``policy``'s channel c uses from ``t_a(k) + upto·C + c``
        on: result k's rates for tenants 0..upto, result k - 1's for the others."""
        holder = Coordinator(self.params)
        now = self._result(k)
        before = self._result(k - 1) if k > 0 else now
        holder.splits = [s if i <= upto else b for i, (s, b) in enumerate(zip(now, before))]
        return holder.channel_configs(policy.base_config)[policy.coord_channel]

    def _result(self, k):
        """Result k's splits, computed when first asked for (see the class docstring)."""
        while len(self._splits) <= k:
            j = len(self._splits)
            end = j * self.epoch - 1                  # t_e of epoch j - 1
            for p in self.policies:
                if p.fabric_cycle <= end:
                    p.catch_up(end + 1)
            acc = self._open.pop(j - 1, None) or Coordinator(self.params)
            demand = [row[:] for row in acc.demand]
            self.backlogs.append([row[:] for row in acc.backlog])
            acc.previous = self._previous
            acc.end_epoch(end, self.config)
            self._previous = acc.previous
            t_a = acc.pending[0]
            while acc.pending is not None:  # every pair's rates (each at t_a + i·C + c)
                acc.apply()
            self._splits.append(list(acc.splits))
            self.results.append((t_a, demand, tuple(acc.splits)))
        return self._splits[k]


def grant_class(kind, priority=0, bulk_prio=0, arrival_prio=0):
    """Controller class of a grant: its credit class (spec §6.6: urgent,
    guaranteed, which also takes burst grants of the priorities in
    ``arrival_prio`` not in ``bulk_prio``, or burst, which also takes
    guaranteed grants of the priorities in ``bulk_prio``); fcfs grants,
    which use no credit, as burst."""
    k = _spec.credit_class(kind, priority, bulk_prio, arrival_prio)
    return BURST_CLASS if k is None else k


def grant_axqos(kind, priority, credit=None):
    """AxQOS of a grant (spec §6.6's mapping, :func:`kvfabric.spec.axqos`):
    urgent 15, guaranteed 11 - priority, burst 4 (5 in the guaranteed credit
    class ``credit``), fcfs 0."""
    return _spec.axqos(kind, priority, credit)


@dataclass(frozen=True)
class QosKnobs:
    """What a user sets on the QoS controller behind the fabric.

    Attributes
    ----------
    entries : tuple of 3 ints, or None
        32-byte controller entries reserved for the urgent, guaranteed and
        burst classes (reads and writes of a class share them).  Size each
        class by Little's law: entries >= rate (accesses per cycle) x the
        time an access stays queued; the arbiter's credit limits are these
        entries / 4 (one credit per 128-byte grant).  A contract that gives
        credit limits (spec §12) overrides this for the classes it limits.
        None (the default) is (16, 192, 128) when some tenant's priority is
        in ``bulk_priorities`` and (16, 128, 128) otherwise: a guaranteed
        class of latency-bound tenants gains from more of a decode step in
        flight at once, one shared with throughput tenants lets more of
        their reads in ahead of the decodes; with bulk tenants the burst
        class carries the prefill and must hold enough of its reads for its
        bandwidth (reports/experiments.md measures these choices).
    row_hit_caps : tuple of 3 ints
        Row hits that may bypass an older request of their class.
    write_high, write_low : int (write_high: or None)
        Write-drain watermarks per pseudo-channel.  ``write_high`` None
        (the default) is 28 when some tenant's priority is in
        ``bulk_priorities`` and 56 otherwise (:meth:`drain_high`).  Without
        bulk priorities (setup B: prefills and decodes at one priority) the
        prefills' guaranteed reads and writes share the guaranteed class
        with the decodes' reads and no read holds a drain off
        (``preempt_below`` 1), so a pseudo-channel alternates drains and
        read turns of ``write_high - write_low`` each
        (:class:`~sim.controller.WatermarkDrain`), two bus turnarounds a
        pair, and a decode read queued behind the prefills' waits through
        several of them.  Measured on setup B on 8 channels (seeds 1-3
        pooled, reports/experiments.md): 28 gave the decodes 2.50x their
        decode-only p99 and the prefill 99 % of its FR-FCFS rate, 56
        1.01x and 103 %.  With bulk priorities (the workload family, setup
        A) 56 gained nothing the family's two seeds could tell from noise
        (draws 4 and 8 moved both ways, by up to 0.04x and 4 points; issue
        #41's note), so 28 stays there.
    drain_interval : int or None
        Cycles after a pseudo-channel's last drain at which more than
        ``write_low`` queued writes make a drain due
        (:class:`~sim.controller.WatermarkDrain`; None: watermarks only).
        A slow writer's writes then leave in batches of what one interval
        brings instead of waiting for ``write_high``, which keeps its bytes
        in the window they were granted in (the isolation study of
        reports/experiments.md).
    guard_activations : bool
        Burst-class reads open rows only into an empty tFAW window while
        guaranteed or urgent reads wait in their pseudo-channel
        (:class:`~sim.controller.QosScheduler`).
    bulk_priorities : tuple of ints
        Priorities whose guaranteed grants use the burst class's credits and
        entries (``CREDITS.bulk_prio``, spec §6.6; a contract's
        ``bulk_priorities`` overrides it): tenants with a rate
        guarantee but no latency target, such as prefills.  Their reads then
        queue with best-effort traffic, behind every protected read, and
        leave the guaranteed credits to latency-bound tenants.  Give such
        tenants a priority of their own and list it here.
    preempt_below : int or None
        Reads of classes below this hold write drains off and cut them short
        (1: urgent only, 2: urgent and guaranteed; :class:`~sim.controller.PreemptingDrain`).
        None (the default) picks 2 when some tenant's priority is in
        ``bulk_priorities`` (the guaranteed class then carries only
        latency-bound reads) and 1 otherwise (guaranteed reads of
        throughput tenants would hold their own writes back).
    preempt_min_batch : int
        Writes a drain serves before protected reads may end it.
    preempt_max_hold : int
        Cycles a due drain may be held off for protected reads before it
        runs regardless (write starvation bound).
    preempt_recuts : int
        Times in a row protected reads may cut a drain released after its
        hold, each time holding the writes left again
        (:class:`~sim.controller.PreemptingDrain`'s ``max_recuts``; 0: a
        released drain runs to the low watermark).  2, measured on the
        workload family (issue #41's note): with the read-only yield budget
        a released drain otherwise writes its whole backlog inside a decode
        step (draw 1's decode p99 1.21-1.23x decode-only against 1.18-1.20x).
    refresh_postpone : int
        Per-bank refresh slots a refresh may be postponed while every
        candidate bank has guaranteed reads waiting (0: never).
    yield_burst : bool or None
        The memory side holds burst credits back while urgent or guaranteed
        reads are queued (:class:`~sim.controller.YieldingCreditReturn`), so
        the burst class may be large enough for a bulk tenant's bandwidth
        without that many of its reads queued ahead of every decode step.
        None (the default) turns it on when some tenant's priority is in
        ``bulk_priorities`` (the guaranteed class then carries only
        latency-bound reads; with throughput tenants in it, it is queued
        nearly always and the hold would only delay the burst path).
    yield_max_hold : int
        Cycles in a row the burst credits may be held (best effort's
        starvation bound).
    yield_budget : int
        Queued reads (all classes together) below which a held burst credit
        goes back anyway while no write drain runs or is due
        (:class:`~sim.controller.YieldingCreditReturn`'s ``budget``; 0: the
        hold is complete).  96 is three quarters of the default 128-entry
        read queue: of 64 and 96 entries, measured on the workload family's
        draws 3, 6 and 8 (issue #41's note), 96 kept draw 8's decode p99
        where the complete hold had it.
    """

    entries: tuple = None
    row_hit_caps: tuple = (16, 16, 4)
    guard_activations: bool = True
    write_high: int = None
    write_low: int = 4
    drain_interval: int = 600
    bulk_priorities: tuple = (2, 3)
    preempt_below: int = None
    preempt_min_batch: int = 8
    preempt_max_hold: int = 1000
    preempt_recuts: int = 2
    refresh_postpone: int = 8
    yield_burst: bool = None
    yield_max_hold: int = 1000
    yield_budget: int = 96

    def __post_init__(self):
        bulk = self.bulk_priorities
        if not isinstance(bulk, tuple) or any(not isinstance(p, int) or not 0 <= p <= 3 for p in bulk):
            raise ValueError(f"bulk_priorities must be a tuple of priorities 0..3, not {bulk!r}")

    def bulk_prio(self):
        """The ``CREDITS.bulk_prio`` mask of :attr:`bulk_priorities`."""
        return sum(1 << p for p in set(self.bulk_priorities))

    def class_entries(self, bulk_in_use):
        """:attr:`entries`, or its default for a contract with or without bulk tenants."""
        if self.entries is not None:
            return tuple(self.entries)
        return (16, 192, 128) if bulk_in_use else (16, 128, 128)

    def drain_high(self, bulk_in_use):
        """:attr:`write_high`, or its default for a contract with or without bulk tenants."""
        if self.write_high is not None:
            return self.write_high
        return 28 if bulk_in_use else 56

    def credits(self, bulk_in_use=False, entries_per_grant=TRANSACTION_ACCESSES):
        """Arbiter credit limits (urgent, guaranteed, burst), in grants of
        ``entries_per_grant`` entries at most."""
        return tuple(e // entries_per_grant for e in self.class_entries(bulk_in_use))


class FabricQosPolicy(FabricPolicy):
    """The fabric with per-class credits, in front of the QoS controller.

    The controller reserves entries per class; each grant's credit class
    becomes the class and its kind the AxQOS of its accesses; the memory side
    returns a grant's credit once as many entries of its class as the grant
    took have been freed, grants of a class in the order they were
    transferred (one credit per class per fabric clock, the credit_return
    port), and the arbiter keeps heads without credit out of the selection.
    A credit stands for the entries of the largest request
    (``request_bytes`` / 32: four at 128 B, eight at 256 B).  The
    ``CREDITS`` register comes from the contract when it gives credits (spec
    §12: limits, bulk priorities), each limited class then reserving that
    many entries per credit; what it does not give comes from
    :class:`QosKnobs` (its entries, a credit per largest request they hold).
    """

    #: The golden model has the credit interface (kept for the experiments' report field).
    model_credits = True

    def __init__(self, doc, *, knobs=None, name="Fabric-QoS", **kw):
        super().__init__(doc, name=name, **kw)
        self.knobs = knobs or QosKnobs()

    def controller_args(self):
        k = self.knobs
        return dict(scheduler=QosScheduler(k.row_hit_caps, k.guard_activations),
                    admission=ReservedEntries(self.class_entries()),
                    drain=PreemptingDrain(k.drain_high(self.bulk_in_use), k.write_low,
                                          preempt_below=self._preempt_below(), min_batch=k.preempt_min_batch,
                                          max_hold=k.preempt_max_hold,
                                          interval=k.drain_interval, max_recuts=k.preempt_recuts),
                    refresh_policy=QosRefresh(max_postponed=k.refresh_postpone))

    @property
    def bulk_prio(self):
        """``CREDITS.bulk_prio``: the contract's bulk priorities, or the knobs'."""
        if self.compiled.gives_bulk_priorities:
            return self.compiled.config.bulk_prio
        return self.knobs.bulk_prio()

    @property
    def limits(self):
        """``CREDITS``' limits (urgent, guaranteed, burst): the contract's, or the knobs'."""
        if self.compiled.gives_credits:
            return self.compiled.config.credits
        return self.knobs.credits(self.bulk_in_use, self.entries_per_grant)

    def class_entries(self):
        """Controller entries per class: four per credit of a class the contract
        limits, the knobs' entries for the others."""
        knob = self.knobs.class_entries(self.bulk_in_use)
        if not self.compiled.gives_credits:
            return knob
        return tuple(limit * self.entries_per_grant or e for limit, e in zip(self.limits, knob))

    @property
    def entries_per_grant(self):
        """Controller entries the largest request takes (one per 32 B access)."""
        return self.request_bytes // TRANSACTION_BYTES * TRANSACTION_ACCESSES

    @property
    def bulk_in_use(self):
        """Whether some enabled tenant's priority is one of the bulk priorities."""
        return any(self.bulk_prio >> t.priority & 1 for t in self.compiled.config.tenants if t.enable)

    @property
    def yields_burst(self):
        """Whether the memory side holds burst credits back for protected reads."""
        return self.bulk_in_use if self.knobs.yield_burst is None else self.knobs.yield_burst

    def _preempt_below(self):
        if self.knobs.preempt_below is not None:
            return self.knobs.preempt_below
        return 2 if self.bulk_in_use else 1

    def _config(self):
        return replace(self.compiled.config, credits=self.limits, bulk_prio=self.bulk_prio)

    def prepare(self, tenants, system):
        short = [k for k, e in enumerate(self.class_entries()) if e < self.entries_per_grant]
        if short:
            raise ValueError(f"Reserved entries {self.class_entries()} (urgent, guaranteed, burst): class "
                             f"{short[0]} holds no {self.request_bytes} B request ({self.entries_per_grant} "
                             "entries); give it at least that many")
        super().prepare(tenants, system)
        self.class_grants = [0, 0, 0]
        if self.yields_burst:
            self.credit_return = YieldingCreditReturn(max_hold=self.knobs.yield_max_hold,
                                                      budget=self.knobs.yield_budget)
        else:
            self.credit_return = CreditReturn()

    def _class(self, grant):
        cfg = self.model.config
        return grant_class(grant.kind, cfg.tenants[grant.tenant].priority, cfg.bulk_prio, cfg.arrival_prio)

    def _ready(self, held):
        # The arbiter selected the grant only if its class had credit (spec §6.6).
        return self.system.channel.has_room(TRANSACTION_ACCESSES * len(self.in_fabric[held.id]), False,
                                            self._class(held))

    def _transferred(self, grant, group):
        self.credit_return.granted(self._class(grant), TRANSACTION_ACCESSES * len(group))

    def _step(self, now, fabric_now, request, ready):
        ret = tuple(self.credit_return.step(self.system.channel, now))
        if ret == NO_CREDIT_RETURN:
            ret = NO_CREDIT_RETURN  # the model's own constant: no return, nothing to check
        return self.model.step(fabric_now, request, ready, credit_return=ret)

    def _mark(self, txn, grant):
        k = self._class(grant)
        self.class_grants[k] += 1
        axqos = grant_axqos(grant.kind, self.model.config.tenants[txn.tenant].priority, k)
        for a in txn.accesses:
            a.qclass = k
            a.axqos = axqos
            a.rank = qos_rank(axqos, a.seq, k)
