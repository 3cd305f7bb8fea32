"""Port handles and the per-cycle monitor of the kvfabric top level.

:class:`ChannelPorts` owns the handles of one channel: the request and grant
streams and ``queue_full`` at the top level, and the channel's internal state
(spec §5, §6.4, §6.6: ``dyn_level_i``, ``dyn_peak_i``, ``dyn_tag_i``, ``vt``,
``served``, ``vmin``, ``vmin_valid``, ``inflight_k``, plus
``occupancy``/``dropped``) reached
hierarchically in instance ``channel_<c>``.  :class:`Monitor` samples every
observed signal once per cycle, at ``ReadOnly`` after the falling edge, i.e.
the settled values of the cycle that the next rising edge will act on.

Reads go through the GPI handle directly (``get_signal_val_long`` /
``get_signal_val_binstr``): building a ``LogicArray`` per read costs more than
the whole comparison, and the monitor reads a few hundred signals per cycle.
A value with X or Z bits raises :class:`XValue` naming the signal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["XValue", "reader", "two_state_simulator", "ChannelPorts", "AxiPorts", "Sample", "Monitor", "Layouts"]


class XValue(ValueError):
    pass


def two_state_simulator() -> bool:
    """True under Verilator, whose values have no X or Z bits to lose."""
    import cocotb

    return "verilator" in (getattr(cocotb, "SIM_NAME", None) or "").lower()


def reader(handle, name: str | None = None):
    """A fast ``() -> int`` reader of an unsigned signal.

    On a 4-state simulator (Icarus) every read goes through the bit string, so
    an X or Z bit on any compared signal raises :class:`XValue` instead of
    reading as 0 (``get_signal_val_long`` maps X and Z to 0). Verilator has
    no X or Z, so there small signals take the faster integer read.
    """
    gh = handle._handle
    width = len(handle)
    label = name or handle._path
    # get_signal_val_long is a signed C long of 32 bits on some simulators
    if width <= 31 and two_state_simulator():
        get_long = gh.get_signal_val_long
        mask = (1 << width) - 1

        def read_small():
            return get_long() & mask
        return read_small
    get_bin = gh.get_signal_val_binstr

    def read_wide():
        s = get_bin()
        try:
            return int(s, 2)
        except ValueError:
            raise XValue(f"{label} = {s}") from None
    return read_wide


def _child(parent, name: str):
    try:
        return getattr(parent, name)
    except AttributeError:
        raise AttributeError(f"{parent._path} has no signal or instance {name!r}") from None


@dataclass(frozen=True)
class Layouts:
    """Bit positions of the stream payloads (field order of spec §2)."""

    bytes_bits: int
    id_width: int

    @classmethod
    def of(cls, params) -> "Layouts":
        return cls(params.bytes_bits, params.id_width)

    def pack_req(self, tenant: int, nbytes: int, rid: int) -> int:
        return tenant | nbytes << 4 | rid << (4 + self.bytes_bits)

    def unpack_req(self, v: int):
        b = self.bytes_bits
        return v & 0xF, v >> 4 & ((1 << b) - 1), v >> (4 + b) & ((1 << self.id_width) - 1)

    def unpack_grant(self, v: int):
        b, i = self.bytes_bits, self.id_width
        return (v & 0xF, v >> 4 & ((1 << b) - 1), v >> (4 + b) & ((1 << i) - 1),
                v >> (4 + b + i) & 3)


class ChannelPorts:
    """Handles of channel ``c``: top-level ports and internal state."""

    def __init__(self, dut, params, c: int, *, internal: bool = True):
        self.c = c
        self.params = params
        self.lay = Layouts.of(params)
        self.h_req_valid = _child(dut, f"req__{c}__valid")
        self.h_req_payload = _child(dut, f"req__{c}__payload")
        self.h_grant_ready = _child(dut, f"grant__{c}__ready")
        self.h_credit_return = _child(dut, f"credit_return__{c}")
        self.r_credit_return = reader(self.h_credit_return)
        self._return_state = None
        self.r_req_valid = reader(self.h_req_valid)
        self.r_req_ready = reader(_child(dut, f"req__{c}__ready"))
        self.r_req_payload = reader(self.h_req_payload)
        self.r_grant_valid = reader(_child(dut, f"grant__{c}__valid"))
        self.r_grant_ready = reader(self.h_grant_ready)
        self.r_grant_payload = reader(_child(dut, f"grant__{c}__payload"))
        self.r_queue_full = reader(_child(dut, f"queue_full__{c}"))
        self._req_state = None
        self._ready_state = None
        self.internal = internal
        if internal:
            inst = _child(dut, f"channel_{c}")
            n = params.tenants
            self.r_level = [reader(_child(inst, f"dyn_level_{i}")) for i in range(n)]
            self.r_peak = [reader(_child(inst, f"dyn_peak_{i}")) for i in range(n)]
            self.r_tag = [reader(_child(inst, f"dyn_tag_{i}")) for i in range(n)]
            self.r_occ = [reader(_child(inst, f"occupancy__{i}")) for i in range(n)]
            self.r_vt = reader(_child(inst, "vt"))
            self.r_served = reader(_child(inst, "served"))
            self.r_vmin = reader(_child(inst, "vmin"))
            self.r_vmin_valid = reader(_child(inst, "vmin_valid"))
            self.r_dropped = reader(_child(inst, "dropped"))
            self.r_inflight = [reader(_child(inst, f"inflight_{k}")) for k in range(3)]
            self.h_level = [_child(inst, f"dyn_level_{i}") for i in range(n)]
            self.h_peak = [_child(inst, f"dyn_peak_{i}") for i in range(n)]
            # Each tenant's enable of the previous cycle (spec §6.3's start fill).
            self.h_enable_prev = [_child(inst, f"cfg_enable_prev_{i}") for i in range(n)]
            # This channel's rate and peak rate of each tenant: the coordinator's
            # registers (spec §13; RATE/PEAK_RATE while it is off).
            coord = _child(dut, "coord_rates")
            self.r_rate = [reader(_child(coord, f"rate__{c}__{i}")) for i in range(n)]
            self.r_peak_rate = [reader(_child(coord, f"peak_rate__{c}__{i}")) for i in range(n)]
            # Flat list in the scoreboard's order, with the spec's field names.
            self.r_state = [*self.r_level, *self.r_peak, *self.r_tag, *self.r_occ, self.r_vt,
                            self.r_served, self.r_vmin, self.r_vmin_valid, self.r_dropped,
                            *self.r_inflight]
            self.state_names = [*(f"{f}[{i}]" for f in ("dyn_level", "dyn_peak", "dyn_tag", "occupancy")
                                  for i in range(n)),
                                "vt", "served", "vmin", "vmin_valid", "dropped",
                                *(f"inflight[{k}]" for k in range(3))]
            self.r_rates = [*self.r_rate, *self.r_peak_rate]
            self.rate_names = [f"{f}[{i}]" for f in ("rate", "peak_rate") for i in range(n)]

    # ---- driving (only changes are written: a write is a GPI call) ----------------
    def set_request(self, r) -> None:
        state = None if r is None else (r.tenant, r.bytes, r.id)
        if state == self._req_state:
            return
        if state is None:
            self.h_req_valid.value = 0
        else:
            if self._req_state is None:
                self.h_req_valid.value = 1
            self.h_req_payload.value = self.lay.pack_req(*state)
        self._req_state = state

    def set_grant_ready(self, ready: bool) -> None:
        if ready != self._ready_state:
            self.h_grant_ready.value = int(ready)
            self._ready_state = ready

    def set_credit_return(self, bits: int) -> None:
        """``credit_return[c]``: bit k returns one credit of class k (spec §6.6)."""
        if bits != self._return_state:
            self.h_credit_return.value = bits
            self._return_state = bits

    def queue_full(self) -> int:
        return self.r_queue_full()

    def init(self) -> None:
        """Drive idle values (before the clock starts)."""
        self.h_req_valid.value = 0
        self.h_req_payload.value = 0
        self.h_grant_ready.value = 0
        self.h_credit_return.value = 0
        self._req_state = None
        self._ready_state = False
        self._return_state = 0


class AxiPorts:
    """Readers of the AXI4-Lite handshakes (for the scoreboard's register mirror)."""

    def __init__(self, dut, prefix: str = "s_axil"):
        g = lambda n: reader(_child(dut, f"{prefix}__{n}"))  # noqa: E731
        self.awvalid, self.awready, self.awaddr = g("awvalid"), g("awready"), g("awaddr")
        self.wvalid, self.wready, self.wdata, self.wstrb = g("wvalid"), g("wready"), g("wdata"), g("wstrb")
        self.arvalid, self.arready, self.araddr = g("arvalid"), g("arready"), g("araddr")
        self.rvalid, self.rready, self.rdata = g("rvalid"), g("rready"), g("rdata")
        self.bvalid, self.bready = g("bvalid"), g("bready")
        self.bresp, self.rresp = g("bresp"), g("rresp")


@dataclass(slots=True)
class Sample:
    """Everything observed in one cycle (lists indexed by channel)."""

    req_valid: list = field(default_factory=list)
    req_ready: list = field(default_factory=list)
    req: list = field(default_factory=list)        # (tenant, bytes, id) or None
    grant_valid: list = field(default_factory=list)
    grant_ready: list = field(default_factory=list)
    grant: list = field(default_factory=list)      # (tenant, bytes, id, kind) or None
    credit_return: list = field(default_factory=list)  # 3-bit credit_return[c]
    queue_full: list = field(default_factory=list)
    aw: tuple | None = None    # (addr,) handshake this cycle
    w: tuple | None = None     # (data, strb) handshake this cycle
    ar: int | None = None      # address of an AR handshake this cycle
    r: int | None = None       # data of an R handshake this cycle
    now: int | None = None


class Monitor:
    """Samples the top-level ports of every channel and the AXI handshakes."""

    def __init__(self, dut, params, channels: list[ChannelPorts], axi: AxiPorts | None):
        self.params = params
        self.ch = channels
        self.axi = axi
        self.r_now = reader(_child(dut, "now"))

    def sample(self) -> Sample:
        s = Sample()
        for p in self.ch:
            v = p.r_req_valid()
            s.req_valid.append(v)
            s.req_ready.append(p.r_req_ready())
            s.req.append(p.lay.unpack_req(p.r_req_payload()) if v else None)
            gv = p.r_grant_valid()
            s.grant_valid.append(gv)
            s.grant_ready.append(p.r_grant_ready())
            s.grant.append(p.lay.unpack_grant(p.r_grant_payload()) if gv else None)
            s.queue_full.append(p.r_queue_full())
            s.credit_return.append(p.r_credit_return())
        a = self.axi
        if a is not None:
            if a.awvalid() and a.awready():
                s.aw = (a.awaddr(),)
            if a.wvalid() and a.wready():
                s.w = (a.wdata(), a.wstrb())
            if a.arvalid() and a.arready():
                s.ar = a.araddr()
            if a.rvalid() and a.rready():
                s.r = a.rdata()
        s.now = self.r_now()
        return s
