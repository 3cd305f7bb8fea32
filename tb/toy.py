"""A tiny Amaranth design that exercises the co-simulation toolchain.

It has the same kinds of ports as the real top (request and grant streams per
channel with ``lib.data`` payloads, an AXI4-Lite slave, an internal register in
a submodule that the scoreboard reads hierarchically) so that the runner, the
cocotb idioms and both simulators are proven independently of the arbiter.
``ToyModel`` is its golden model.

Behaviour per channel c: a one-entry buffer. ``req.ready = ~full``; an accepted
request fills the buffer at the next edge; the buffer is the grant; a
transferred grant empties it and adds its bytes to the submodule's ``level``.
AXI4-Lite: 0x0 ``ID`` = 0x544F5921, 0x4 ``SCRATCH`` RW, 0x8 ``GRANTS`` RO
(grants transferred on all channels).
"""

from amaranth import Module, Signal
from amaranth.back import verilog
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Toy", "ToyModel", "TOY_ID", "generate_toy"]

TOY_ID = 0x544F5921


def _payload():
    return data.StructLayout({"tenant": 4, "bytes": 8})


class AxiLiteSignature(wiring.Signature):
    """AXI4-Lite port, master view (member names as cocotbext-axi expects);
    the slave declares it ``In(AxiLiteSignature())``."""

    def __init__(self, addr_width=16):
        super().__init__({
            "awaddr": Out(addr_width), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(32), "wstrb": Out(4), "wvalid": Out(1), "wready": In(1),
            "bresp": In(2), "bvalid": In(1), "bready": Out(1),
            "araddr": Out(addr_width), "arvalid": Out(1), "arready": In(1),
            "rdata": In(32), "rresp": In(2), "rvalid": In(1), "rready": Out(1),
        })


class _ToyChannel(wiring.Component):
    req: In(stream.Signature(_payload()))
    grant: Out(stream.Signature(_payload()))
    transferred: Out(1)

    def elaborate(self, platform):
        m = Module()
        level = Signal(16, name="level")  # read hierarchically by the scoreboard
        full = Signal()
        m.d.comb += [
            self.req.ready.eq(~full),
            self.grant.valid.eq(full),
            self.transferred.eq(self.grant.valid & self.grant.ready),
        ]
        with m.If(self.grant.valid & self.grant.ready):
            m.d.sync += [full.eq(0), level.eq(level + self.grant.payload.bytes)]
        with m.If(self.req.valid & self.req.ready):
            m.d.sync += [full.eq(1), self.grant.payload.eq(self.req.payload)]
        return m


class Toy(wiring.Component):
    def __init__(self, channels=2):
        self._channels = channels
        super().__init__({
            "req": In(stream.Signature(_payload())).array(channels),
            "grant": Out(stream.Signature(_payload())).array(channels),
            "axil": In(AxiLiteSignature()),
        })

    def elaborate(self, platform):
        m = Module()
        grants = Signal(32)
        scratch = Signal(32)
        n_tr = 0
        for c in range(self._channels):
            ch = m.submodules[f"chan_{c}"] = _ToyChannel()
            wiring.connect(m, wiring.flipped(self.req[c]), ch.req)
            wiring.connect(m, ch.grant, wiring.flipped(self.grant[c]))
            n_tr = n_tr + ch.transferred
        m.d.sync += grants.eq(grants + n_tr)

        ax = self.axil
        bvalid, rvalid = Signal(), Signal()
        rdata = Signal(32)
        m.d.comb += [ax.bvalid.eq(bvalid), ax.rvalid.eq(rvalid), ax.rdata.eq(rdata)]
        # Write: take address and data together, one response at a time.
        take_w = ax.awvalid & ax.wvalid & ~bvalid
        m.d.comb += [ax.awready.eq(take_w), ax.wready.eq(take_w)]
        with m.If(take_w):
            m.d.sync += bvalid.eq(1)
            with m.If(ax.awaddr == 0x4):
                m.d.sync += scratch.eq(ax.wdata)
        with m.Elif(bvalid & ax.bready):
            m.d.sync += bvalid.eq(0)
        take_r = ax.arvalid & ~rvalid
        m.d.comb += ax.arready.eq(take_r)
        with m.If(take_r):
            m.d.sync += rvalid.eq(1)
            with m.Switch(ax.araddr):
                with m.Case(0x0):
                    m.d.sync += rdata.eq(TOY_ID)
                with m.Case(0x4):
                    m.d.sync += rdata.eq(scratch)
                with m.Case(0x8):
                    m.d.sync += rdata.eq(grants)
                with m.Default():
                    m.d.sync += rdata.eq(0)
        with m.Elif(rvalid & ax.rready):
            m.d.sync += rvalid.eq(0)
        return m


def generate_toy(path, channels=2):
    """Write the toy's Verilog (top ``toy``) to ``path``."""
    text = verilog.convert(Toy(channels), name="toy", emit_src=False)
    with open(path, "w") as f:
        f.write(text)
    return path


class ToyModel:
    """Golden model of :class:`Toy`: ``step(inputs)`` once per cycle."""

    def __init__(self, channels=2):
        self.channels = channels
        self.full = [False] * channels
        self.buf = [(0, 0)] * channels
        self.level = [0] * channels
        self.grants = 0

    def outputs(self):
        """Outputs during the current cycle (register values only)."""
        return [{"req_ready": not self.full[c], "grant_valid": self.full[c],
                 "grant": self.buf[c], "level": self.level[c]} for c in range(self.channels)]

    def step(self, req_valid, req_payload, grant_ready):
        n = 0
        for c in range(self.channels):
            full = self.full[c]
            if full and grant_ready[c]:
                self.full[c] = False
                self.level[c] = (self.level[c] + self.buf[c][1]) & 0xFFFF
                n += 1
            if req_valid[c] and not full:
                self.full[c] = True
                self.buf[c] = req_payload[c]
        self.grants = (self.grants + n) & 0xFFFFFFFF
