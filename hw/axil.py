"""AXI4-Lite slave bridging to kvfabric's internal register bus.

The slave accepts one transaction of each direction at a time: a write is
performed once both its address (AW) and its data (W) have been received, in
whichever order and in whichever cycles they arrive, and the next write is
accepted after its response (B) has been taken. Reads are independent of
writes. All responses are OKAY: spec §9 makes unmapped addresses read 0 and
ignore writes, so there is no error to report.

Write timing (spec §9 relies on it): the register bus write strobe ``w_stb`` is
asserted *combinationally* in the cycle t in which the later of the AW and W
handshakes happens (or, when both happened earlier, in the cycle after the
later one), so a register file updating on ``w_stb`` holds the new value from
cycle t+1. ``BVALID`` rises in cycle t+1.

Read timing (spec §9): an AR handshake in cycle t registers the address; the
blocks register their level-1 read words for it at the end of cycle t+1 (the
registers' values of cycle t+1, :mod:`hw.readpipe`), their ORed level-2 data
``r_data`` is registered at the end of t+2 and presented with ``RVALID`` from
cycle t+3. The stages keep the wide read multiplexer off the AXI input pins
and split it in two.

Addresses (spec §9): AXI4-Lite transfers are always the full data width, and a
manager may signal an unaligned start address with the low address bits and
the byte strobes (AMBA AXI, unaligned transfers): a byte store to ``0x111``
arrives as ``AWADDR = 0x111``, ``WSTRB = 0b0010``. The slave therefore clears
the address bits below the data width before the register bus: the address
selects the word, ``WSTRB`` the bytes, and a read returns the whole word.
"""

from amaranth import *
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


__all__ = ["AXI4LiteSignature", "RegisterBusSignature", "AXI4LiteSlave"]


def _check_widths(addr_width, data_width):
    # bool is an int subclass; True would silently mean 1.
    if not isinstance(addr_width, int) or isinstance(addr_width, bool) or not 1 <= addr_width <= 32:
        raise TypeError(f"Address width must be an integer between 1 and 32, not {addr_width!r}")
    if not isinstance(data_width, int) or isinstance(data_width, bool) or data_width not in (32, 64):
        raise TypeError(f"Data width must be 32 or 64, not {data_width!r}")


class _BusSignature(wiring.Signature):
    # What the two bus signatures share: checked widths, equality by widths.
    def __init__(self, members, *, addr_width, data_width):
        _check_widths(addr_width, data_width)
        self._addr_width = addr_width
        self._data_width = data_width
        super().__init__(members(addr_width, data_width))

    @property
    def addr_width(self):
        return self._addr_width

    @property
    def data_width(self):
        return self._data_width

    def __eq__(self, other):
        return (type(other) is type(self) and self.addr_width == other.addr_width and
                self.data_width == other.data_width)

    def __hash__(self):
        return hash((type(self), self.addr_width, self.data_width))

    def __repr__(self):
        return f"{type(self).__name__}(addr_width={self.addr_width}, data_width={self.data_width})"


class AXI4LiteSignature(_BusSignature):
    """AXI4-Lite signature, from the manager's point of view.

    The slave uses ``In(AXI4LiteSignature(...))``. Member names are the AXI
    signal names in lower case, so the flattened Verilog ports of a member
    called ``s_axil`` are ``s_axil__awaddr`` and so on. ``AWPROT``/``ARPROT``
    are omitted: the register file has no privileged or secure registers, and
    AXI makes them optional for a slave that ignores them.

    Parameters
    ----------
    addr_width : :class:`int`
        Byte address width, 1 to 32.
    data_width : :class:`int`
        Data width, 32 or 64.

    Members
    -------
    awaddr, awvalid, awready : write address channel.
    wdata, wstrb, wvalid, wready : write data channel (``wstrb`` one bit per byte).
    bresp, bvalid, bready : write response channel.
    araddr, arvalid, arready : read address channel.
    rdata, rresp, rvalid, rready : read data channel.

    Raises
    ------
    :exc:`TypeError`
        If ``addr_width`` is not an integer between 1 and 32.
    :exc:`TypeError`
        If ``data_width`` is not 32 or 64.
    """
    def __init__(self, *, addr_width, data_width):
        super().__init__(lambda aw, dw: {
            "awaddr":  Out(aw),
            "awvalid": Out(1),
            "awready": In(1),
            "wdata":   Out(dw),
            "wstrb":   Out(dw // 8),
            "wvalid":  Out(1),
            "wready":  In(1),
            "bresp":   In(2),
            "bvalid":  In(1),
            "bready":  Out(1),
            "araddr":  Out(aw),
            "arvalid": Out(1),
            "arready": In(1),
            "rdata":   In(dw),
            "rresp":   In(2),
            "rvalid":  In(1),
            "rready":  Out(1),
        }, addr_width=addr_width, data_width=data_width)


class RegisterBusSignature(_BusSignature):
    """Internal register bus, from the initiator's (the AXI slave's) point of view.

    Writes: ``w_stb`` is a one-cycle strobe; ``w_addr``, ``w_data`` and
    ``w_strb`` (byte enables) are valid while it is 1. The target updates its
    registers at the end of that cycle. Reads have no side effects in kvfabric,
    so there is no read strobe: ``r_data`` in cycle s+1 is the word at the
    ``r_addr`` of cycle s (registered by the initiator), with the target's
    values of cycle s (one cycle of read latency, :mod:`hw.readpipe`).

    Addresses are byte addresses of whole words: :class:`AXI4LiteSlave` clears
    the bits below the data width (spec §9: an unaligned AXI address selects the
    word that contains it; the strobes select its bytes).

    Parameters
    ----------
    addr_width : :class:`int`
        Byte address width, 1 to 32.
    data_width : :class:`int`
        Data width, 32 or 64.

    Members
    -------
    w_addr : ``Out(addr_width)``
    w_data : ``Out(data_width)``
    w_strb : ``Out(data_width // 8)``
    w_stb : ``Out(1)``
    r_addr : ``Out(addr_width)``
    r_data : ``In(data_width)``

    Raises
    ------
    :exc:`TypeError`
        If ``addr_width`` is not an integer between 1 and 32.
    :exc:`TypeError`
        If ``data_width`` is not 32 or 64.
    """
    def __init__(self, *, addr_width, data_width):
        super().__init__(lambda aw, dw: {
            "w_addr": Out(aw),
            "w_data": Out(dw),
            "w_strb": Out(dw // 8),
            "w_stb":  Out(1),
            "r_addr": Out(aw),
            "r_data": In(dw),
        }, addr_width=addr_width, data_width=data_width)


class AXI4LiteSlave(wiring.Component):
    """AXI4-Lite slave with one outstanding read and one outstanding write.

    ``AWREADY``/``WREADY`` are 1 while the corresponding half of a write has
    not been received and no write response is pending; the two halves are
    buffered independently, so a manager may present W before AW, AW before
    W, or both together. ``ARREADY`` is 1 while no read is in progress. No
    ready depends on a valid.

    Parameters
    ----------
    addr_width : :class:`int`
        Byte address width. Optional, defaults to 16 (spec §2).
    data_width : :class:`int`
        Data width. Optional, defaults to 32 (spec §2).

    Members
    -------
    axil : ``In(AXI4LiteSignature(...))``
        AXI4-Lite slave port.
    bus : ``Out(RegisterBusSignature(...))``
        Register bus to the register file.

    Raises
    ------
    :exc:`TypeError`
        If ``addr_width`` is not an integer between 1 and 32.
    :exc:`TypeError`
        If ``data_width`` is not 32 or 64.
    """
    def __init__(self, *, addr_width=16, data_width=32):
        _check_widths(addr_width, data_width)
        self._addr_width = addr_width
        self._data_width = data_width
        super().__init__({
            "axil": In(AXI4LiteSignature(addr_width=addr_width, data_width=data_width)),
            "bus":  Out(RegisterBusSignature(addr_width=addr_width, data_width=data_width)),
        })

    @property
    def addr_width(self):
        """Byte address width.

        Returns
        -------
        :class:`int`
        """
        return self._addr_width

    @property
    def data_width(self):
        """Data width.

        Returns
        -------
        :class:`int`
        """
        return self._data_width

    def elaborate(self, platform):
        m = Module()
        axil, bus = self.axil, self.bus

        # Write path: each half is held in a skid register until the other
        # half arrives; the write happens as soon as both are available,
        # taking the half that arrives in the same cycle straight from the port.
        aw_full = Signal()
        aw_addr = Signal(self.addr_width)
        w_full  = Signal()
        w_data  = Signal(self.data_width)
        w_strb  = Signal(self.data_width // 8)
        b_valid = Signal()

        m.d.comb += [
            axil.awready.eq(~aw_full & ~b_valid),
            axil.wready.eq(~w_full & ~b_valid),
            axil.bvalid.eq(b_valid),
            axil.bresp.eq(0),  # OKAY
        ]
        # The word an address selects (spec §9): its bits below the data width cleared.
        word_mask = ~((self.data_width // 8) - 1) & ((1 << self.addr_width) - 1)
        aw_hs = axil.awvalid & axil.awready
        w_hs  = axil.wvalid & axil.wready
        # aw_full | aw_hs and w_full | w_hs, written from the registers and the
        # valids (aw_full and b_valid are never both 1) so that the strobe is
        # one LUT level from them, not behind the READY outputs.
        have_aw = aw_full | (axil.awvalid & ~b_valid)
        have_w  = w_full | (axil.wvalid & ~b_valid)

        m.d.comb += [
            bus.w_addr.eq(Mux(aw_full, aw_addr, axil.awaddr & word_mask)),
            bus.w_data.eq(Mux(w_full, w_data, axil.wdata)),
            bus.w_strb.eq(Mux(w_full, w_strb, axil.wstrb)),
            bus.w_stb.eq(have_aw & have_w),
        ]
        with m.If(have_aw & have_w):
            m.d.sync += [
                aw_full.eq(0),
                w_full.eq(0),
                b_valid.eq(1),
            ]
        with m.Else():
            with m.If(aw_hs):
                m.d.sync += [aw_full.eq(1), aw_addr.eq(axil.awaddr & word_mask)]
            with m.If(w_hs):
                m.d.sync += [w_full.eq(1), w_data.eq(axil.wdata), w_strb.eq(axil.wstrb)]
        with m.If(b_valid & axil.bready):
            m.d.sync += b_valid.eq(0)

        # Read path: address register, then the blocks' level-1 read registers
        # (hw.readpipe), then the data register.
        ar_full = Signal()
        ar_addr = Signal(self.addr_width)
        r_wait  = Signal()
        r_valid = Signal()
        r_data  = Signal(self.data_width)

        m.d.comb += [
            axil.arready.eq(~ar_full & ~r_wait & ~r_valid),
            axil.rvalid.eq(r_valid),
            axil.rdata.eq(r_data),
            axil.rresp.eq(0),  # OKAY
            bus.r_addr.eq(ar_addr),
        ]
        with m.If(axil.arvalid & axil.arready):
            m.d.sync += [ar_full.eq(1), ar_addr.eq(axil.araddr & word_mask)]
        with m.If(ar_full):
            m.d.sync += [ar_full.eq(0), r_wait.eq(1)]
        with m.If(r_wait):
            m.d.sync += [r_wait.eq(0), r_valid.eq(1), r_data.eq(bus.r_data)]
        with m.If(r_valid & axil.rready):
            m.d.sync += r_valid.eq(0)

        return m
