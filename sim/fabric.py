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

from kvfabric.model.channel import Request as FabricRequest
from kvfabric.model.channel import BURST, ChannelModel
from kvfabric.model.contract import compile_contract

from kvfabric import spec as _spec

from .controller import (BURST_CLASS, GUARANTEED_CLASS, URGENT_CLASS, CreditReturn, PreemptingDrain,
                         QosRefresh, QosScheduler, ReservedEntries, YieldingCreditReturn, qos_rank)
from .dram import NEVER
from .policies import Policy
from .system import TRANSACTION_ACCESSES

__all__ = ["FabricPolicy", "FabricQosPolicy", "QosKnobs", "contract_doc", "grant_class", "grant_axqos",
           "FABRIC_MHZ"]

#: The arbiter clock the system model's front end assumes: one 128 B grant per
#: fabric clock is the channel's 51.2 GB/s peak.
FABRIC_MHZ = 400

_URGENT_KIND = getattr(_spec, "URGENT", 3)

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
    name : str
    """

    scheduler = "frfcfs"

    def __init__(self, doc, *, memory_mhz=1600, coloring=False, kind_aware=False, name="Fabric"):
        self.doc = doc
        self.compiled = compile_contract(doc)
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
        self.in_fabric = {}       # request id -> transaction accepted by the fabric
        self.fabric_cycle = 0     # the next fabric clock edge's number ...
        self.next_edge = 0        # ... and its memory cycle (:meth:`edge`)
        self.grants = [0] * len(tenants)
        self.burst_grants = [0] * len(tenants)

    def reconfigure(self, doc):
        """Commit a new contract (all tenants at once, as COMMIT does); the
        arbiter's dynamic state (buckets, tags, queues) carries over."""
        self.doc = doc
        self.compiled = compile_contract(doc)
        self.model.config = self._config()

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
                model.skip(last - self.fabric_cycle + 1)
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
        offer = None
        if system.waiting:
            # Upstream presents, among tenants with room (spec §2), the one
            # whose arbiter queue is emptiest, oldest first.  Presenting
            # simply the oldest request would keep a backlogged tenant's
            # queue topped up and leave a high-priority tenant's queue empty
            # at every other selection: the ingress takes one request per
            # clock and needs two clocks to make it visible.
            occupancy = model.occupancy()
            depth = self.depth
            best = None
            for source in system.sources:
                if source:
                    head = source[0]
                    occ = occupancy[head.tenant]
                    if occ < depth and (best is None or (occ, head.seq) < best):
                        best, offer = (occ, head.seq), head
        request = None
        if offer is not None:
            request = FabricRequest(offer.tenant, offer.nbytes, offer.seq & self.id_mask)
        # The memory side's ready depends on the grant's direction (separate
        # read and write queues); the grant register's payload holds still.
        held = model.grant
        ready = held is None or self._ready(held)
        result = self._step(now, fabric_cycle & self.ts_mask, request, ready)
        if result.accepted and not result.dropped:
            system.take(offer)
            self.in_fabric[request.id] = offer
        selected = model.grant
        if selected is not None and selected is not held:
            self.in_fabric[selected.id].granted = now
        grant = result.transferred
        if grant is not None:
            txn = self.in_fabric.pop(grant.id)
            self.grants[txn.tenant] += 1
            if grant.kind == BURST:
                self.burst_grants[txn.tenant] += 1
            self._mark(txn, grant)
            system.enqueue(txn, now)

    def _ready(self, held):
        """The memory side's grant.ready for the grant register's payload."""
        return self.system.channel.has_room(TRANSACTION_ACCESSES, self.in_fabric[held.id].is_write)

    def _step(self, now, fabric_now, request, ready):
        return self.model.step(fabric_now, request, ready)

    def _mark(self, txn, grant):
        """What the controller learns from the grant (here: the kind-aware rank)."""
        if self.kind_aware and grant.kind == BURST:
            for a in txn.accesses:
                a.rank += _BURST_RANK


def grant_class(kind, priority=0, bulk_prio=0):
    """Controller class of a grant: its credit class (spec §6.6: urgent,
    guaranteed, or burst, which also takes guaranteed grants of the
    priorities in ``bulk_prio``); fcfs grants, which use no credit, as burst."""
    k = _spec.credit_class(kind, priority, bulk_prio)
    return BURST_CLASS if k is None else k


def grant_axqos(kind, priority):
    """AxQOS of a grant (spec §6.6's mapping): urgent 15, guaranteed 11 - priority, burst 4, fcfs 0."""
    if kind == _URGENT_KIND:
        return 15
    if kind == _spec.GUARANTEED:
        return 11 - priority
    if kind == _spec.BURST:
        return 4
    return 0


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
    write_high, write_low : int
        Write-drain watermarks per pseudo-channel.
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
    """

    entries: tuple = None
    row_hit_caps: tuple = (16, 16, 4)
    guard_activations: bool = True
    write_high: int = 28
    write_low: int = 4
    drain_interval: int = 600
    bulk_priorities: tuple = (2, 3)
    preempt_below: int = None
    preempt_min_batch: int = 8
    preempt_max_hold: int = 1000
    refresh_postpone: int = 8
    yield_burst: bool = None
    yield_max_hold: int = 1000

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

    def credits(self, bulk_in_use=False):
        """Arbiter credit limits (urgent, guaranteed, burst), in grants."""
        return tuple(e // TRANSACTION_ACCESSES for e in self.class_entries(bulk_in_use))


class FabricQosPolicy(FabricPolicy):
    """The fabric with per-class credits, in front of the QoS controller.

    The controller reserves entries per class; each grant's credit class
    becomes the class and its kind the AxQOS of its accesses; the memory side
    returns one credit of a class whenever four entries of that class have
    been freed (one per class per fabric clock, the credit_return port), and
    the arbiter keeps heads without credit out of the selection.  The
    ``CREDITS`` register comes from the contract when it gives credits (spec
    §12: limits, bulk priorities), each limited class then reserving four
    entries per credit; what it does not give comes from :class:`QosKnobs`.
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
                    drain=PreemptingDrain(k.write_high, k.write_low, preempt_below=self._preempt_below(),
                                          min_batch=k.preempt_min_batch, max_hold=k.preempt_max_hold,
                                          interval=k.drain_interval),
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
        return self.knobs.credits(self.bulk_in_use)

    def class_entries(self):
        """Controller entries per class: four per credit of a class the contract
        limits, the knobs' entries for the others."""
        knob = self.knobs.class_entries(self.bulk_in_use)
        if not self.compiled.gives_credits:
            return knob
        return tuple(limit * TRANSACTION_ACCESSES or e for limit, e in zip(self.limits, knob))

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
        super().prepare(tenants, system)
        self.class_grants = [0, 0, 0]
        if self.yields_burst:
            self.credit_return = YieldingCreditReturn(TRANSACTION_ACCESSES, max_hold=self.knobs.yield_max_hold)
        else:
            self.credit_return = CreditReturn(TRANSACTION_ACCESSES)

    def _class(self, grant):
        return grant_class(grant.kind, self.model.config.tenants[grant.tenant].priority,
                           self.model.config.bulk_prio)

    def _ready(self, held):
        # The arbiter selected the grant only if its class had credit (spec §6.6).
        return self.system.channel.has_room(TRANSACTION_ACCESSES, False, self._class(held))

    def _step(self, now, fabric_now, request, ready):
        ret = self.credit_return.step(self.system.channel, now)
        return self.model.step(fabric_now, request, ready, credit_return=tuple(ret))

    def _mark(self, txn, grant):
        k = self._class(grant)
        self.class_grants[k] += 1
        axqos = grant_axqos(grant.kind, self.model.config.tenants[txn.tenant].priority)
        for a in txn.accesses:
            a.qclass = k
            a.axqos = axqos
            a.rank = qos_rank(axqos, a.seq)
