"""The neutral definitions of docs/spec.md that every implementation shares.

Parameters and their derived constants (spec §1), the fixed widths of the
formats and configuration registers (§3, §5, §9) and the grant kinds (§2).
Pure Python with no imports beyond the standard library and the register map
(:mod:`kvfabric.regmap`, itself plain data), so that the golden model
(``kvfabric.model``), the RTL (``kvfabric.hw``), the testbench
(``kvfabric.tb``) and the tests read the same numbers without depending on
one another. The configuration registers' widths are read from the register
description (``hw/kvfabric.rdl``), so they have one source.
"""

from dataclasses import dataclass

from kvfabric.regmap import REGMAP as _REGMAP

__all__ = [
    "FabricParams", "check_params", "CREDIT_URGENT", "CREDIT_GUARANTEED", "CREDIT_BURST",
    "GUARANTEED", "BURST", "FCFS", "URGENT", "KIND_NAMES",
    "CREDIT_CLASSES", "CREDIT_CLASS_NAMES", "CREDIT_BITS", "BULK_PRIO_BITS", "credit_class", "axqos",
    "LATENCY_BURST_AXQOS",
    "TENANT_FIELD_BITS", "STARVE_LIMIT_BITS", "EPOCH_CYCLES_BITS",
    "COORD_LATENCY", "COORD_MIN_EPOCH", "COORD_Q_BITS", "COORD_DEMAND_BITS", "COORD_FLOOR_BITS",
    "COORD_EPOCH_BITS", "COORD_MAX_PASSES", "coord_level_bits", "coord_passes",
]

#: Grant kinds (spec §2, §6.2): the value of the grant payload's 2-bit ``kind``.
#: ``URGENT`` is a class-0 winner (a conforming head older than
#: ``starve_limit``); buckets, tags and telemetry treat it as guaranteed.
GUARANTEED, BURST, FCFS, URGENT = 0, 1, 2, 3
#: Their names in grant logs and reports.
KIND_NAMES = {GUARANTEED: "guaranteed", BURST: "burst", FCFS: "fcfs", URGENT: "urgent"}

#: Credit classes of the memory-side interface (spec §6.6): the index ``k`` of
#: ``CREDITS``' limits, ``credit_return[k]`` and ``inflight[k]``.
CREDIT_URGENT, CREDIT_GUARANTEED, CREDIT_BURST = 0, 1, 2
CREDIT_CLASSES = 3
#: The field names of the ``CREDITS`` register, in class order (spec §9).
CREDIT_CLASS_NAMES = ("credit_urgent", "credit_guaranteed", "credit_burst")


def _width(register, field, block="FABRIC"):
    """Width of a field in the register description (spec §9)."""
    return _REGMAP.block(block).register(register).field(field).width


#: Width of one credit limit and of one ``inflight`` counter (spec §6.6, §9).
CREDIT_BITS = _width("CREDITS", CREDIT_CLASS_NAMES[0])
assert all(_width("CREDITS", name) == CREDIT_BITS for name in CREDIT_CLASS_NAMES), \
    "the credit classes' limits must be equally wide (one inflight counter width)"
#: Width of ``CREDITS.bulk_prio``: one bit per priority (spec §6.6, §9).
BULK_PRIO_BITS = _width("CREDITS", "bulk_prio")
#: Width of ``CREDITS.arrival_prio``: one bit per priority (spec §6.2, §9).
ARRIVAL_PRIO_BITS = _width("CREDITS", "arrival_prio")
#: Width of ``CTRL.bulk_run``: grants in a row of a bulk tenant's run (spec §6.2, §9).
BULK_RUN_BITS = _width("CTRL", "bulk_run")

_CREDIT_CLASS_OF_KIND = {URGENT: CREDIT_URGENT, GUARANTEED: CREDIT_GUARANTEED,
                         BURST: CREDIT_BURST, FCFS: None}


def credit_class(kind, priority=0, bulk_prio=0, arrival_prio=0):
    """The credit class (0 urgent, 1 guaranteed, 2 burst) of a grant of ``kind``,
    or None for fcfs grants, which use no credit (spec §6.6).

    A guaranteed grant of a tenant at ``priority`` whose bit is set in
    ``bulk_prio`` (``CREDITS.bulk_prio``) takes the burst class's credits: its
    tenant has a rate guarantee but no latency to protect (a prefill), so it
    must not hold the credits that latency-bound guaranteed grants wait for.

    A burst grant of a tenant whose priority is marked in ``arrival_prio``
    (``CREDITS.arrival_prio``) and not in ``bulk_prio`` takes the guaranteed
    class's credits: its tenant is latency-bound and ran past its guarantee
    (a decode whose contract under-guarantees it), and in the burst class it
    would wait for every bulk tenant's guaranteed grant to leave a credit
    free, far longer than FR-FCFS would have kept it (issue #41).
    """
    try:
        k = _CREDIT_CLASS_OF_KIND[kind]
    except (KeyError, TypeError):
        raise ValueError(f"grant kind must be one of {sorted(KIND_NAMES)}, not {kind!r}") from None
    if k == CREDIT_GUARANTEED and bulk_prio >> priority & 1:
        return CREDIT_BURST
    if k == CREDIT_BURST and arrival_prio >> priority & 1 and not bulk_prio >> priority & 1:
        return CREDIT_GUARANTEED
    return k


#: AxQOS of a burst grant that takes the guaranteed class's credits (spec §6.6).
LATENCY_BURST_AXQOS = 5


def axqos(kind, priority, credit=None):
    """``AxQOS`` of a grant toward an AXI memory side (spec §6.6): 15 urgent,
    ``11 - priority`` guaranteed, 4 burst (5 for a burst grant whose credit
    class ``credit`` is the guaranteed one), 0 fcfs.

    ``priority`` is the granted tenant's active priority (0 highest .. 3), so
    a controller that ranks by AxQOS serves a latency-bound tenant's
    guaranteed reads before a bulk tenant's, and every guaranteed read before
    any burst read; a latency-bound tenant's burst reads come after every
    guaranteed read and before the other burst reads, and a memory side that
    returns credits per class tells their class by it. The AXI4 front end
    drives its manager ports' AxQOS with it (spec §14.5); the system model's
    QoS controller ranks by it.
    """
    if kind not in KIND_NAMES:
        raise ValueError(f"grant kind must be one of {sorted(KIND_NAMES)}, not {kind!r}")
    if not (isinstance(priority, int) and 0 <= priority <= 3):
        raise ValueError(f"priority must be 0..3, not {priority!r}")
    if kind == BURST and credit == CREDIT_GUARANTEED:
        return LATENCY_BURST_AXQOS
    return {URGENT: 15, GUARANTEED: 11 - priority, BURST: 4, FCFS: 0}[kind]


#: Widths of the per-tenant configuration registers (spec §3, §5, §9): every
#: field of the description's staged registers (rate .. slo_cycles).
TENANT_FIELD_BITS = {f.name: f.width for r in _REGMAP.block("TENANT").registers if r.staged
                     for f in r.fields}
#: Width of the fabric's ``STARVE_LIMIT`` register (spec §9).
STARVE_LIMIT_BITS = _width("STARVE_LIMIT", "starve_limit")
#: Width of the fabric's ``EPOCH_CYCLES`` register (spec §9).
EPOCH_CYCLES_BITS = _width("EPOCH_CYCLES", "epoch_cycles")

# Coordination across channels (spec §13): constants both the model and the RTL
# use, so that they compute the same per-channel rates in the same cycles.
#: Cycles from the end of an epoch (t_e) to the last cycle before its result is
#: used: the result holds from t_e + 1 + COORD_LATENCY. Long enough for one
#: serial divider and multiplier to walk every (tenant, channel) pair off the
#: channels' critical paths.
COORD_LATENCY = 1024
#: The shortest coordinator epoch: ``COORD_EPOCH`` below it counts as it. Above
#: COORD_LATENCY, so an epoch's result has applied before the next epoch ends.
COORD_MIN_EPOCH = 2048
#: Precision of a channel's share of a tenant's demand: ``q`` in 0..2^COORD_Q_BITS
#: (spec §13.5 before issue #43; kept for the tests that restate the old split).
COORD_Q_BITS = 10
#: Most passes of the allocation's water-filling (spec §13.5): each pass
#: re-places every active tenant's total over its channels.
COORD_MAX_PASSES = 6
#: Width of the saturating per-(tenant, channel) demand counters (32-byte units).
COORD_DEMAND_BITS = 20
#: Widths of ``COORD.coord_floor`` (UQ0.8) and ``COORD_EPOCH.coord_epoch_cycles`` (spec §9).
COORD_FLOOR_BITS = _width("COORD", "coord_floor")
COORD_EPOCH_BITS = _width("COORD_EPOCH", "coord_epoch_cycles")
assert COORD_LATENCY < COORD_MIN_EPOCH < 1 << COORD_EPOCH_BITS, \
    "an epoch's result must apply before the next epoch ends (spec §13)"


def _check_int(name, value, lo, hi, *, pow2=False):
    # bool is an int subclass; True would silently mean 1.
    ok = isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi
    if pow2:
        ok = ok and value & (value - 1) == 0
        if not ok:
            raise ValueError(f"{name} must be a power of two in {lo}..{hi}, not {value!r}")
    elif not ok:
        raise ValueError(f"{name} must be an integer in {lo}..{hi}, not {value!r}")


@dataclass(frozen=True)
class FabricParams:
    """Elaboration parameters of the arbiter (spec §1).

    Parameters
    ----------
    tenants : int
        N, configured tenants, 1..16. Tenant tags N..15 are invalid.
    channels : int
        C, independent arbitration channels, 1..16.
    queue_depth : int
        D, FIFO entries per tenant per channel, power of two in 1..64.
    max_request_bytes : int
        LMAX, largest request in bytes, power of two in 32..4096.
    id_width : int
        Width of the request id carried to the grant, 1..32.
    tag_bits : int
        T, width of start/finish tags and virtual time, 12..32.

    Raises
    ------
    ValueError
        If a parameter is out of range.
    """

    tenants: int = 8
    channels: int = 8
    queue_depth: int = 4
    max_request_bytes: int = 4096
    id_width: int = 16
    tag_bits: int = 20

    def __post_init__(self):
        _check_int("tenants", self.tenants, 1, 16)
        _check_int("channels", self.channels, 1, 16)
        _check_int("queue_depth", self.queue_depth, 1, 64, pow2=True)
        _check_int("max_request_bytes", self.max_request_bytes, 32, 4096, pow2=True)
        _check_int("id_width", self.id_width, 1, 32)
        _check_int("tag_bits", self.tag_bits, 12, 32)

    # Fixed formats (spec §1, §3). They are properties rather than module
    # constants so that callers read every constant from one object.

    #: Width of the tenant field of requests and grants (tags 0..15).
    tenant_bits = 4
    #: Width of the grant kind field.
    kind_bits = 2
    #: Width of a per-tenant ``cost`` (tag units).
    cost_bits = 16
    #: Width of the per-channel ``served`` register.
    served_bits = 16
    #: Widths of the configuration fields (spec §3, §5).
    rate_bits = TENANT_FIELD_BITS["rate"]
    capacity_bits = TENANT_FIELD_BITS["capacity"]
    peak_rate_bits = TENANT_FIELD_BITS["peak_rate"]
    inv_weight_bits = TENANT_FIELD_BITS["inv_weight"]
    priority_bits = TENANT_FIELD_BITS["priority"]
    slo_bits = TENANT_FIELD_BITS["slo_cycles"]
    starve_bits = STARVE_LIMIT_BITS
    epoch_bits = EPOCH_CYCLES_BITS

    @property
    def frac(self):
        """Fractional bits of rates and bucket levels."""
        return 3

    @property
    def level_bits(self):
        """Committed bucket level width (UQ25.3)."""
        return 28

    @property
    def lmax_log2(self):
        """``log2(max_request_bytes)``."""
        return self.max_request_bytes.bit_length() - 1

    @property
    def bytes_bits(self):
        """Width of the request ``bytes`` field, ``log2(LMAX) + 1``."""
        return self.lmax_log2 + 1

    @property
    def peak_bits(self):
        """Peak bucket level width, UQ(log2(LMAX)+1).FRAC."""
        return self.bytes_bits + self.frac

    @property
    def pcap(self):
        """Peak bucket capacity, ``LMAX << FRAC``."""
        return self.max_request_bytes << self.frac

    @property
    def tag_shift(self):
        """``log2(TAG_UNIT)``: a tag unit is 32 bytes at weight 1."""
        return 5

    @property
    def tag_unit(self):
        """Bytes per tag unit."""
        return 1 << self.tag_shift

    @property
    def wfrac(self):
        """Fractional bits of ``inv_weight`` (UQ8.8)."""
        return 8

    @property
    def ts_bits(self):
        """Arrival timestamp width."""
        return 24

    @property
    def lag_window(self):
        """How far a start tag may lag V, ``2^(T-3)``."""
        return 1 << (self.tag_bits - 3)

    @property
    def dyn_bits(self):
        """Dynamic state bits per tenant per channel (spec §5)."""
        return self.level_bits + self.peak_bits + self.tag_bits


def coord_level_bits(params) -> int:
    """Width W of the allocation's water levels and channel loads (spec
    §13.5): ``rate_bits``, so a level reaches 2^W - 1 units, what one rate
    register holds (8 KiB per cycle per channel at 16 bits)."""
    return params.rate_bits


def coord_passes(params) -> int:
    """Passes P of the allocation's water-filling (spec §13.2): the most, up
    to COORD_MAX_PASSES, whose walk fits the coordinator's latency. A pass
    takes ``N * (W + 3)`` cycles (per tenant: two load cycles, one cycle per
    bit of its water level, a write cycle), the write-out of the rates
    ``N * C`` and two cycles more (its pipeline stages); the walk starts 2
    cycles after the epoch's end and must end before the cycle that reads
    the first pair's result."""
    per_pass = params.tenants * (coord_level_bits(params) + 3)
    room = COORD_LATENCY - 4 - params.tenants * params.channels
    return max(1, min(COORD_MAX_PASSES, room // per_pass))


def check_params(params):
    """Return ``params`` if it is a :class:`FabricParams`, else raise :exc:`TypeError`."""
    if not isinstance(params, FabricParams):
        raise TypeError(f"params must be a FabricParams, not {params!r}")
    return params
