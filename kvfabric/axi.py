"""The AXI4 front end's parameters and its burst-splitting rule (spec §14).

Neutral like :mod:`kvfabric.spec`: no Amaranth, no cocotb. The RTL
(:mod:`kvfabric.hw.axi`) elaborates from :class:`AxiParams`, and the test
benches predict the sub-bursts a tenant's burst becomes with
:func:`split_burst`, the one written form of spec §14.2's rule.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvfabric.spec import FabricParams, _check_int

__all__ = [
    "AxiParams", "SubBurst", "split_burst", "split_unsupported", "channel_of", "check_axi_params",
    "BURST_FIXED", "BURST_INCR", "BURST_WRAP", "RESP_OKAY", "RESP_EXOKAY", "RESP_SLVERR", "RESP_DECERR",
    "CLASS_NONE", "TENANT_USER_BITS",
]

BURST_FIXED, BURST_INCR, BURST_WRAP = 0, 1, 2
RESP_OKAY, RESP_EXOKAY, RESP_SLVERR, RESP_DECERR = 0, 1, 2, 3
#: Credit class field of a manager-side ID for a grant in no credit class (fcfs mode).
CLASS_NONE = 3
#: 4 KiB: no AXI burst may cross it (AMBA AXI, A3.4.1), so the split rule cuts there too.
PAGE_BYTES = 4096
#: AxUSER bits that name the tenant on the shared tenant port: the 4-bit tenant id of spec §1.
TENANT_USER_BITS = 4


def _pow2(x):
    return isinstance(x, int) and not isinstance(x, bool) and x > 0 and x & (x - 1) == 0


def _check(name, value, lo, hi, *, pow2=False):
    """spec's range check, the message naming the AXI parameter."""
    _check_int(f"AXI parameter {name}", value, lo, hi, pow2=pow2)


@dataclass(frozen=True)
class AxiParams:
    """Elaboration parameters of the AXI4 front end (spec §14.1).

    Parameters
    ----------
    addr_width : int
        Byte address width of every tenant and manager port, 12..64.
    data_width : int
        Data width in bits of every port, a power of two in 32..1024.
    id_width : int
        AXI ID width of a tenant port, 1..16.
    interleave_bytes : int
        Address unit dealt round robin over the channels (the system model's
        channel map with every tenant on every channel), a power of two from
        one beat (``data_width / 8``) to 4096.
    frag_beats : int
        Most beats in one sub-burst, a power of two in 1..256: the size of a
        read or write entry's data slot.
    read_entries, write_entries : int
        Sub-bursts each tenant port may have in flight for reads and for
        writes, from its address handshake until the tenant has its data (R)
        or response (B); powers of two in 2..64. A tenant's read reorder
        buffer and write buffer each hold ``entries * frag_beats`` beats.
    mem_clock : bool
        The manager ports in a clock domain of their own (``mem_clk``,
        ``mem_rst``), crossed by an asynchronous FIFO on each AXI channel
        (spec §14.8); otherwise they run on ``clk``.
    shared_port : bool
        One tenant port shared by every tenant, each burst's tenant in
        ``AxUSER[3:0]`` (spec §14.9), instead of one port per tenant.
    """

    addr_width: int = 34
    data_width: int = 256
    id_width: int = 6
    interleave_bytes: int = 256
    frag_beats: int = 8
    read_entries: int = 8
    write_entries: int = 8
    mem_clock: bool = False
    shared_port: bool = False

    def __post_init__(self):
        _check("addr_width", self.addr_width, 12, 64)
        _check("data_width", self.data_width, 32, 1024, pow2=True)
        _check("id_width", self.id_width, 1, 16)
        _check("interleave_bytes", self.interleave_bytes, self.data_width // 8, PAGE_BYTES, pow2=True)
        _check("frag_beats", self.frag_beats, 1, 256, pow2=True)
        _check("read_entries", self.read_entries, 2, 64, pow2=True)
        _check("write_entries", self.write_entries, 2, 64, pow2=True)
        for name in ("mem_clock", "shared_port"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"AXI parameter {name} must be True or False, not {getattr(self, name)!r}")

    @property
    def data_bytes(self) -> int:
        return self.data_width // 8

    @property
    def max_size(self) -> int:
        """Largest ``AxSIZE`` the ports carry: log2 of the data bytes."""
        return self.data_bytes.bit_length() - 1

    @property
    def entry_bits(self) -> int:
        return max(self.read_entries, self.write_entries).bit_length() - 1

    @property
    def max_sub_bytes(self) -> int:
        """Largest arbiter request a sub-burst makes: ``frag_beats`` full beats."""
        return self.frag_beats * self.data_bytes

    def tenant_bits(self, fabric: FabricParams) -> int:
        return max(1, (fabric.tenants - 1).bit_length())

    def manager_id_width(self, fabric: FabricParams) -> int:
        """ID width of a manager port: ``{class (2), tenant, entry}`` (spec §14.5)."""
        return 2 + self.tenant_bits(fabric) + self.entry_bits


def check_axi_params(axi: AxiParams, fabric: FabricParams) -> None:
    """Raise ``ValueError`` if ``axi`` cannot front ``fabric`` (spec §14.1)."""
    if not isinstance(axi, AxiParams):
        raise TypeError(f"AXI parameters must be an AxiParams, not {axi!r}")
    if not _pow2(fabric.channels):
        raise ValueError(f"The AXI front end needs a power-of-two channel count, not {fabric.channels}")
    if axi.max_sub_bytes > fabric.max_request_bytes:
        raise ValueError(f"AXI frag_beats x data bytes = {axi.max_sub_bytes} exceeds the arbiter's "
                         f"max_request_bytes = {fabric.max_request_bytes}: lower frag_beats to at most "
                         f"{fabric.max_request_bytes // axi.data_bytes}")
    id_bits = request_id_bits(axi, fabric)
    if id_bits > fabric.id_width:
        raise ValueError(f"The arbiter's id_width = {fabric.id_width} cannot hold a request id of "
                         f"{id_bits} bits ({{tenant (4), write (1), entry ({axi.entry_bits})}})")


def request_id_bits(axi: AxiParams, fabric: FabricParams) -> int:
    """Bits of an arbiter request id, ``{tenant, write, entry}`` (spec §14.3)."""
    return fabric.tenant_bits + 1 + axi.entry_bits


@dataclass(frozen=True)
class SubBurst:
    """One piece of a tenant burst: an arbiter request and a manager-port burst."""

    addr: int
    beats: int
    size: int
    channel: int
    last: bool

    @property
    def bytes(self) -> int:
        """What the arbiter is asked for: beats times the beat size (spec §14.2)."""
        return self.beats << self.size


def channel_of(addr: int, axi: AxiParams, channels: int) -> int:
    """Spec §14.2: the channel of a byte address."""
    return (addr // axi.interleave_bytes) % channels


def split_burst(addr: int, beats: int, size: int, axi: AxiParams, channels: int) -> list[SubBurst]:
    """Spec §14.2: the sub-bursts of an INCR burst of ``beats`` beats of ``2**size`` bytes at ``addr``.

    A piece ends at the next interleave or 4 KiB boundary after its first
    beat, or after ``frag_beats`` beats, whichever comes first; the next piece
    starts at the aligned address after it. Unsupported bursts are cut by
    :func:`split_unsupported` instead.
    """
    if not 1 <= beats <= 256:
        raise ValueError(f"AXI burst length must be 1..256 beats, not {beats}")
    if not 0 <= size <= axi.max_size:
        raise ValueError(f"AxSIZE must be 0..{axi.max_size}, not {size}")
    block = min(axi.interleave_bytes, PAGE_BYTES)
    step = 1 << size
    pieces = []
    done = 0
    a = addr
    while done < beats:
        aligned = a - a % step
        fit = (block - aligned % block) // step
        n = min(beats - done, fit, axi.frag_beats)
        done += n
        pieces.append(SubBurst(addr=a, beats=n, size=size, channel=channel_of(a, axi, channels),
                               last=done == beats))
        a = (aligned + n * step) % (1 << axi.addr_width)
    return pieces


def split_unsupported(beats: int, axi: AxiParams) -> list[int]:
    """Spec §14.6: the beat counts of the pieces an unsupported burst is cut
    into (``frag_beats`` each, the last one the rest), whatever its address."""
    if not 1 <= beats <= 256:
        raise ValueError(f"AXI burst length must be 1..256 beats, not {beats}")
    return [min(axi.frag_beats, beats - k) for k in range(0, beats, axi.frag_beats)]

