"""HBM3 timing preset and organisation, in integer memory-clock cycles.

The preset is the public JEDEC-class HBM3 6400 MT/s set (JEDEC JESD238
HBM3; tCK = 0.625 ns, 1.6 GHz).  Figures that the source
gives in clock cycles are taken as they are; figures given in time (refresh
interval, refresh cycle time, and every workload or CXL delay elsewhere in
``sim``) go through :func:`ns_to_cycles`, which always rounds *up* so that a
converted constraint is never shorter than the real one.

All arithmetic is on integers or :class:`fractions.Fraction`: the DRAM model
must be exact, and a float ``3900 / 0.625`` is not.
"""

from dataclasses import dataclass
from fractions import Fraction
from numbers import Rational

__all__ = [
    "Geometry",
    "Timing",
    "HBM3_GEOMETRY",
    "HBM3_6400",
    "ns_to_cycles",
    "cycles_to_ns",
    "peak_bytes_per_cycle",
    "bytes_per_cycle_to_gbps",
    "MEMORY_MHZ",
    "CHANNEL_GBPS",
]


def _exact(value, what):
    if isinstance(value, bool) or isinstance(value, float):
        raise TypeError(f"{what} must be an int, a Fraction or a decimal string, not {value!r}")
    if isinstance(value, str):
        return Fraction(value)
    if isinstance(value, Rational):
        return Fraction(value)
    raise TypeError(f"{what} must be an int, a Fraction or a decimal string, not {value!r}")


def ns_to_cycles(ns, tck_ps=625):
    """Convert a duration in ns to whole clock cycles, rounding up.

    Parameters
    ----------
    ns : int, Fraction or str
        Duration in nanoseconds; a decimal string such as ``"121.875"`` is
        exact.  Floats are refused because their rounding is not ours.
    tck_ps : int
        Clock period in picoseconds (625 for HBM3 6400).

    Returns
    -------
    int
        The smallest cycle count whose duration is at least ``ns``.
    """
    ns = _exact(ns, "Duration")
    if ns < 0:
        raise ValueError(f"Duration must be non-negative, not {ns}")
    if not isinstance(tck_ps, int) or tck_ps <= 0:
        raise ValueError(f"Clock period must be a positive integer of ps, not {tck_ps!r}")
    ps = ns * 1000
    return -((-ps.numerator) // (ps.denominator * tck_ps))


def cycles_to_ns(cycles, tck_ps=625):
    """Exact duration of ``cycles`` clock cycles in ns, as a Fraction."""
    return Fraction(cycles * tck_ps, 1000)


@dataclass(frozen=True)
class Geometry:
    """Organisation of one HBM3 channel (two pseudo-channels).

    Attributes
    ----------
    pseudo_channels, stack_ids, bank_groups, banks_per_group : int
        A bank is named by (pseudo-channel, stack ID, bank group, bank).
    rows : int
        Rows per bank.
    row_bytes : int
        Row (page) size per pseudo-channel.
    access_bytes : int
        Bytes moved by one column command: BL8 on a 32-bit pseudo-channel.
    """

    pseudo_channels: int = 2
    stack_ids: int = 2
    bank_groups: int = 4
    banks_per_group: int = 4
    rows: int = 8192
    row_bytes: int = 1024
    access_bytes: int = 32

    @property
    def banks_per_pc(self):
        return self.stack_ids * self.bank_groups * self.banks_per_group

    @property
    def banks(self):
        """Banks in the whole channel (both pseudo-channels)."""
        return self.pseudo_channels * self.banks_per_pc

    @property
    def columns(self):
        """Column accesses per row."""
        return self.row_bytes // self.access_bytes

    def bank_id(self, pc, sid, bg, bank):
        """Flat bank index within the channel, pseudo-channel-major."""
        return ((pc * self.stack_ids + sid) * self.bank_groups + bg) * self.banks_per_group + bank

    def split_bank_id(self, bank_id):
        """Inverse of :meth:`bank_id`: ``(pc, sid, bg, bank)``."""
        bank = bank_id % self.banks_per_group
        rest = bank_id // self.banks_per_group
        bg = rest % self.bank_groups
        rest //= self.bank_groups
        return rest // self.stack_ids, rest % self.stack_ids, bg, bank

    def bank_group_id(self, bank_id):
        """Flat (pc, sid, bg) index: tCCD_L, tRRD_L and tWTR_L apply within it."""
        return bank_id // self.banks_per_group


@dataclass(frozen=True)
class Timing:
    """JEDEC timing set in memory-clock cycles.

    Column-to-column, activate and turnaround constraints are named as in the
    JEDEC standard.  ``burst`` is the data-bus occupancy of one BL8 access.
    The row-command bus is accounted in half cycles (``*_bus_half``) because
    an activate occupies it for 1.5 clocks.
    """

    tck_ps: int
    burst: int
    CL: int
    CWL: int
    tRCD_RD: int
    tRCD_WR: int
    tRP: int
    tRAS: int
    tRC: int
    tWR: int
    tRTP: int
    tCCD_S: int
    tCCD_L: int
    tCCD_R: int
    tRRD_S: int
    tRRD_L: int
    tFAW: int
    tWTR_S: int
    tWTR_L: int
    tRTW: int
    tPPD: int
    tREFI: int
    tREFIpb: int
    tRFCpb: int
    act_bus_half: int = 3
    pre_bus_half: int = 1
    ref_bus_half: int = 1

    @property
    def read_hit_latency(self):
        """Cycles from RD to the end of its data burst."""
        return self.CL + self.burst

    @property
    def read_miss_latency(self):
        """ACT, then RD: closed bank."""
        return self.tRCD_RD + self.CL + self.burst

    @property
    def read_conflict_latency(self):
        """PRE, ACT, then RD: bank open to another row (tRAS already met)."""
        return self.tRP + self.tRCD_RD + self.CL + self.burst

    @property
    def write_hit_latency(self):
        return self.CWL + self.burst

    @property
    def clock_hz(self):
        return Fraction(10**12, self.tck_ps)


# Refresh figures come in time units and are converted here; the rest are
# the datasheet's own clock counts (docs/system-model.md lists each with its source).  tREFIpb is tREFI / 32 banks.
HBM3_6400 = Timing(
    tck_ps=625,
    burst=2,
    CL=20,
    CWL=10,
    tRCD_RD=31,
    tRCD_WR=15,
    tRP=26,
    tRAS=45,
    tRC=72,
    tWR=33,
    tRTP=9,
    tCCD_S=2,
    tCCD_L=4,
    tCCD_R=3,
    tRRD_S=4,
    tRRD_L=5,
    tFAW=24,
    tWTR_S=7,
    tWTR_L=10,
    tRTW=20,
    tPPD=2,
    tREFI=ns_to_cycles(3900),
    tREFIpb=ns_to_cycles(Fraction(3900, 32)),
    tRFCpb=ns_to_cycles(200),
)

HBM3_GEOMETRY = Geometry()


def peak_bytes_per_cycle(timing=HBM3_6400, geometry=HBM3_GEOMETRY):
    """Channel peak: every pseudo-channel moves one access per burst."""
    return Fraction(geometry.pseudo_channels * geometry.access_bytes, timing.burst)


def bytes_per_cycle_to_gbps(bytes_per_cycle, timing=HBM3_6400):
    """Bytes per memory cycle to GB/s (10^9 bytes per second)."""
    return Fraction(bytes_per_cycle) * timing.clock_hz / 10**9


#: The model's clock (one memory cycle is tCK = 0.625 ns of HBM3-6400).
MEMORY_MHZ = HBM3_6400.clock_hz // 10**6
#: One channel's peak, both pseudo-channels busy (51.2 GB/s).
CHANNEL_GBPS = bytes_per_cycle_to_gbps(peak_bytes_per_cycle())
