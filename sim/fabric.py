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

The fabric runs at ``clock_mhz`` of the contract, an integer divisor of the
memory clock; one grant per fabric clock of a 128-byte transaction at
400 MHz is exactly the channel's 51.2 GB/s.
"""

from dataclasses import replace
from fractions import Fraction

from kvfabric.model.channel import Request as FabricRequest
from kvfabric.model.channel import BURST, ChannelModel
from kvfabric.model.contract import compile_contract

from .dram import NEVER
from .policies import Policy

__all__ = ["FabricPolicy", "contract_doc"]

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
        Memory clock; must be a multiple of the contract's ``clock_mhz``.
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
        clock = self.compiled.clock_mhz
        if Fraction(memory_mhz) % clock:
            raise ValueError(f"Memory clock {memory_mhz} MHz is not a multiple of the fabric "
                             f"clock {clock} MHz")
        self.ratio = int(Fraction(memory_mhz) / clock)
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
        self.model = ChannelModel(self.compiled.params, self.compiled.config)
        self.in_fabric = {}       # request id -> transaction accepted by the fabric
        self.next_edge = 0        # memory cycle of the next fabric clock edge
        self.grants = [0] * len(tenants)
        self.burst_grants = [0] * len(tenants)

    def reconfigure(self, doc):
        """Commit a new contract (all tenants at once, as COMMIT does); the
        arbiter's dynamic state (buckets, tags, queues) carries over."""
        self.doc = doc
        self.compiled = compile_contract(doc)
        self.model.config = replace(self.compiled.config)

    # -- the front end ----------------------------------------------------------
    def front_end(self, now):
        model = self.model
        system = self.system
        while self.next_edge <= now:
            if not system.waiting and not self.in_fabric and model.quiescent():
                # Nothing to arbitrate: only buckets refill, exactly (model.skip).
                edges = (now - self.next_edge) // self.ratio + 1
                model.skip(edges)
                self.next_edge += edges * self.ratio
                break
            self._clock(now, self.next_edge // self.ratio)
            self.next_edge += self.ratio
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
        ready = held is None or system.channel.has_room(4, self.in_fabric[held.id].is_write)
        result = model.step(fabric_cycle & self.ts_mask, request, ready)
        if result.accepted and not result.dropped:
            system.take(offer)
            self.in_fabric[request.id] = offer
        grant = result.transferred
        if grant is not None:
            txn = self.in_fabric.pop(grant.id)
            self.grants[txn.tenant] += 1
            if grant.kind == BURST:
                self.burst_grants[txn.tenant] += 1
                if self.kind_aware:
                    for a in txn.accesses:
                        a.rank += _BURST_RANK
            system.enqueue(txn, now)
