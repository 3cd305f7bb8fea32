"""A tenant port's read side (spec §14.3-§14.4): entries, requests, reorder buffer.

Every sub-burst of the tenant's AR bursts takes one *entry* when it leaves
the splitter and keeps it until the tenant has taken its last R beat. The
entry's data slot (``frag_beats`` beats) is reserved from the start, so a beat
coming back from memory always has a place to go: the manager ports' R
channels are never held up waiting for a slow tenant or for an older beat on
another channel, which is what makes reordering across channels deadlock-free
(a channel whose R waited for another channel could wait for a tenant that
waits for it). The cost is storage: the entries are the tenant's whole read
budget, ``read_entries * frag_beats`` beats in flight.

Three pointers walk the entries in program order: ``alloc`` (next entry the
splitter fills), ``ask`` (next entry offered to its channel's arbiter) and
``head`` (entry whose beats the tenant is reading). Between ``ask`` and
``head`` entries are in the arbiter or in memory, in any order across
channels; their beats land wherever they belong, and the tenant reads them in
program order, so a split burst's beats return in order with RLAST on the
last beat of the last piece.

An entry whose burst is unsupported (spec §14.6), or whose request the
arbiter dropped (its tenant disabled, spec §4), is answered with SLVERR beats
of zero data and never reaches memory.

Beats from several channels for this tenant in one cycle share the reorder
buffer's one write port round robin: the tenant port drains one beat a cycle,
so a second write port would only let the buffer fill faster.
"""

from amaranth.hdl import Module, Signal, Array, Cat, Mux
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from kvfabric.axi import AxiParams, RESP_SLVERR
from .layouts import descriptor_layout, fill_layout, request_layout
from .round_robin import round_robin
from .entries import PieceEntries, ring_full
from .splitter import BurstSplitter, address_layout

__all__ = ["ReadTracker", "r_layout"]


def r_layout(axi: AxiParams):
    return data.StructLayout({"id": axi.id_width, "data": axi.data_width, "resp": 2, "last": 1})


class ReadTracker(wiring.Component):
    """One tenant port's read entries and reorder buffer.

    Parameters
    ----------
    axi : AxiParams
    channels : int

    Members
    -------
    ar : In(stream of address_layout)
        The tenant's AR channel.
    r : Out(stream of r_layout)
        The tenant's R channel.
    req : Out(stream of request_layout)
        The oldest entry not yet offered to its channel's arbiter.
    dropped : In(1)
        The arbiter dropped the request ``req`` transfers in this cycle.
    lookup_entry : In(entry).array(channels)
        Channel c's granted entry; ``lookup[c]`` is its address, length and size.
    lookup : Out(descriptor_layout).array(channels)
    fill : In(stream of fill_layout).array(channels)
        Beats from each channel's R for this tenant.
    unsupported : Out(1)
        An unsupported burst's last piece took an entry this cycle (one per burst).
    """

    def __init__(self, axi: AxiParams, channels: int):
        self._axi, self._channels = axi, channels
        ebits = (axi.read_entries - 1).bit_length()
        super().__init__({
            "ar": In(stream.Signature(address_layout(axi))),
            "r": Out(stream.Signature(r_layout(axi))),
            "req": Out(stream.Signature(request_layout(axi, channels))),
            "dropped": In(1),
            "lookup_entry": In(ebits).array(channels),
            "lookup": Out(descriptor_layout(axi)).array(channels),
            "fill": In(stream.Signature(fill_layout(axi))).array(channels),
            "unsupported": Out(1),
        })

    def elaborate(self, platform):
        axi, nch = self._axi, self._channels
        n_ent, f = axi.read_entries, axi.frag_beats
        ebits, fbits = (n_ent - 1).bit_length(), (f - 1).bit_length()
        m = Module()
        m.submodules.splitter = split = BurstSplitter(axi, nch)
        wiring.connect(m, wiring.flipped(self.ar), split.burst)

        def field(name, shape):
            return Array(Signal(shape, name=f"rd_{name}_{e}") for e in range(n_ent))
        entries = PieceEntries.create("rd", n_ent, split.piece.payload)
        e_id, e_len, e_last, e_err = entries.id, entries.len, entries.last, entries.err
        e_count = field("count", range(f + 1))   # beats written into the slot

        alloc = Signal(ebits + 1, name="rd_alloc")
        ask = Signal(ebits + 1, name="rd_ask")
        head = Signal(ebits + 1, name="rd_head")
        beat = Signal(max(1, fbits), name="rd_beat")   # the tenant's beat within the head entry

        # Entries: the splitter takes one while not all are in use.
        # ``full`` (every entry in use) and ``pending`` (an entry waits to be
        # offered) are registers, computed from the next cycle's pointers: the
        # offer they decide reaches the channel's request port, and from there
        # the arbiter's ingress, in the same cycle (issue #40's timing).
        full = Signal(name="rd_full")
        m.d.comb += split.piece.ready.eq(~full)
        piece = split.piece.payload
        with m.If(split.piece.valid & ~full):
            a = alloc[:ebits]
            m.d.sync += [*entries.store(a, piece), e_count[a].eq(0), alloc.eq(alloc + 1)]
        m.d.comb += self.unsupported.eq(split.piece.valid & ~full & piece.error & piece.last)

        # Requests, in entry order; an error entry is stepped over. When no
        # entry waits, the piece leaving the splitter is offered in the cycle
        # it takes its entry (the bypass), so an idle tenant's read reaches
        # the request port one cycle after its AR handshake, not two.
        pending = Signal(name="rd_pending")    # ask != alloc
        arriving = Signal()
        m.d.comb += arriving.eq(~pending & split.piece.valid & ~full)
        asked = entries.offer(m, ask, alloc, split.piece.valid & ~full, pending, arriving, piece,
                              self.req, self.dropped)

        m.d.comb += entries.lookups(self.lookup_entry, self.lookup)

        # The reorder buffer: slot of entry e, beat b at address e * f + b.
        m.submodules.rob = rob = Memory(shape=axi.data_width + 2, depth=n_ent * f, init=[])
        wp = rob.write_port()
        rp = rob.read_port(domain="comb")

        served = [Signal(name=f"rd_fill_take_{c}") for c in range(nch)]
        grant, any_fill = round_robin(m, [self.fill[c].valid for c in range(nch)], Signal(init=1),
                                      name="rd_fill")
        fe = Signal(ebits)
        fdata = Signal(axi.data_width)
        fresp = Signal(2)
        for c in range(nch):
            m.d.comb += self.fill[c].ready.eq(grant[c])
            with m.If(grant[c]):
                m.d.comb += [fe.eq(self.fill[c].payload.entry), fdata.eq(self.fill[c].payload.data),
                             fresp.eq(self.fill[c].payload.resp)]
        m.d.comb += [
            wp.en.eq(any_fill),
            wp.addr.eq(Cat(e_count[fe][:fbits], fe) if fbits else fe),
            wp.data.eq(Cat(fdata, fresp)),
        ]
        with m.If(any_fill):
            m.d.sync += e_count[fe].eq(e_count[fe] + 1)

        # The tenant's R: the head entry's beats in order, once they are in.
        h = head[:ebits]
        ready_beat = Signal()
        m.d.comb += ready_beat.eq((head != ask) & (e_err[h] | (e_count[h] > beat)))
        end = Signal()
        m.d.comb += end.eq(beat == e_len[h][:max(1, fbits)] if fbits else 1)
        m.d.comb += [
            rp.addr.eq(Cat(beat[:fbits], h) if fbits else h),
            self.r.valid.eq(ready_beat),
            self.r.payload.id.eq(e_id[h]),
            self.r.payload.data.eq(Mux(e_err[h], 0, rp.data[:axi.data_width])),
            self.r.payload.resp.eq(Mux(e_err[h], RESP_SLVERR, rp.data[axi.data_width:])),
            self.r.payload.last.eq(e_last[h] & end),
        ]
        next_alloc, next_ask, next_head = Signal.like(alloc), Signal.like(ask), Signal.like(head)
        m.d.comb += [
            next_alloc.eq(alloc + (split.piece.valid & ~full)),
            next_ask.eq(ask + asked),
            next_head.eq(head + (self.r.valid & self.r.ready & end)),
        ]
        m.d.sync += [full.eq(ring_full(next_alloc, next_head, ebits)), pending.eq(next_ask != next_alloc)]
        with m.If(self.r.valid & self.r.ready):
            with m.If(end):
                m.d.sync += [beat.eq(0), head.eq(head + 1)]
            with m.Else():
                m.d.sync += beat.eq(beat + 1)
        return m
