"""A tenant port's write side (spec §14.3-§14.4): entries, write buffer, one B per burst.

Every sub-burst of the tenant's AW bursts takes one *entry* when it leaves
the splitter and keeps it until its write response has been merged into the
tenant's B. The tenant's W beats fill the entries in program order (the
subordinate waits for the address before taking data, which AXI allows, but
only until the piece leaves the splitter: a beat may go into the entry being
allocated in that cycle), and
an entry is offered to its channel's arbiter only once all its beats are in:
store and forward, so that once a channel has issued an AW its W beats follow
back to back and a tenant that writes slowly never holds a memory port's W
channel (AXI-REALM's write buffer does the same for the same reason).
When no older full entry waits, an entry is offered in the cycle its last
beat arrives, so an idle tenant's one-beat write costs no more cycles than
a read (spec §14.7).

Four pointers walk the entries in program order: ``alloc`` (next entry the
splitter fills), ``fill`` (entry the tenant's W beats go to), ``ask`` (next
full entry offered to the arbiter) and ``retire`` (oldest entry whose
response is awaited). Responses come back in any order across channels; they
are merged in program order, worst response first (DECERR > SLVERR > EXOKAY >
OKAY by their codes), and the tenant receives one B per burst, when its last
piece retires.

Keeping the data until the response is simpler than freeing it after the last
W beat (an entry then has one lifetime), and costs write-buffer space for the
memory's write round trip; spec §14.4 says so.

An entry whose burst is unsupported (spec §14.6), or whose request the
arbiter dropped (tenant disabled), still takes its W beats (the tenant must be
able to finish the burst) and is answered SLVERR without reaching memory.
"""

from amaranth.hdl import Module, Signal, Array, Cat, Mux
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from kvfabric.axi import AxiParams, RESP_SLVERR
from .layouts import beat_layout, descriptor_layout, done_layout, request_layout
from .entries import PieceEntries, ring_full
from .splitter import BurstSplitter, address_layout

__all__ = ["WriteTracker", "w_layout", "b_layout"]


def w_layout(axi: AxiParams):
    return data.StructLayout({"data": axi.data_width, "strb": axi.data_bytes, "last": 1})


def b_layout(axi: AxiParams):
    return data.StructLayout({"id": axi.id_width, "resp": 2})


class WriteTracker(wiring.Component):
    """One tenant port's write entries, write buffer and response merge.

    Parameters
    ----------
    axi : AxiParams
    channels : int

    Members
    -------
    aw : In(stream of address_layout)
    w : In(stream of w_layout)
    b : Out(stream of b_layout)
        The tenant's AW, W and B channels.
    req : Out(stream of request_layout)
        The oldest full entry not yet offered to its channel's arbiter.
    dropped : In(1)
        The arbiter dropped the request ``req`` transfers in this cycle.
    lookup_entry : In(entry).array(channels)
    lookup : Out(descriptor_layout).array(channels)
        Channel c's granted entry and its address, length and size.
    read_entry, read_beat : In(entry), In(beat) per channel
    read : Out(beat_layout).array(channels)
        Channel c's W beat (combinational read of the write buffer).
    done : In(done_layout).array(channels)
        Each channel's B for this tenant (never refused).
    unsupported : Out(1)
        An unsupported burst's last piece took an entry this cycle.
    wlast_mismatch : Out(1)
        A W beat's WLAST disagreed with the burst's length (protocol error of the tenant).
    """

    def __init__(self, axi: AxiParams, channels: int):
        self._axi, self._channels = axi, channels
        ebits = (axi.write_entries - 1).bit_length()
        fbits = max(1, (axi.frag_beats - 1).bit_length())
        super().__init__({
            "aw": In(stream.Signature(address_layout(axi))),
            "w": In(stream.Signature(w_layout(axi))),
            "b": Out(stream.Signature(b_layout(axi))),
            "req": Out(stream.Signature(request_layout(axi, channels))),
            "dropped": In(1),
            "lookup_entry": In(ebits).array(channels),
            "lookup": Out(descriptor_layout(axi)).array(channels),
            "read_entry": In(ebits).array(channels),
            "read_beat": In(fbits).array(channels),
            "read": Out(beat_layout(axi)).array(channels),
            "done": In(done_layout(axi)).array(channels),
            "unsupported": Out(1),
            "wlast_mismatch": Out(1),
        })

    def elaborate(self, platform):
        axi, nch = self._axi, self._channels
        n_ent, f = axi.write_entries, axi.frag_beats
        ebits, fbits = (n_ent - 1).bit_length(), (f - 1).bit_length()
        m = Module()
        m.submodules.splitter = split = BurstSplitter(axi, nch)
        wiring.connect(m, wiring.flipped(self.aw), split.burst)

        def field(name, shape):
            return Array(Signal(shape, name=f"wr_{name}_{e}") for e in range(n_ent))
        entries = PieceEntries.create("wr", n_ent, split.piece.payload)
        e_id, e_len, e_last, e_err = entries.id, entries.len, entries.last, entries.err
        e_done = field("done", 1)
        e_resp = field("resp", 2)

        alloc = Signal(ebits + 1, name="wr_alloc")
        fill = Signal(ebits + 1, name="wr_fill")
        ask = Signal(ebits + 1, name="wr_ask")
        retire = Signal(ebits + 1, name="wr_retire")
        fill_beat = Signal(max(1, fbits), name="wr_fill_beat")
        worst = Signal(2, name="wr_worst")   # worst response of the retired pieces of the current burst

        # ``full`` (every entry in use) and ``pending`` (a full entry waits to be
        # offered) are registers, computed from the next cycle's pointers, as
        # ``fill_new`` and ``fill_end`` below are (issue #40's timing).
        full = Signal(name="wr_full")
        m.d.comb += split.piece.ready.eq(~full)
        piece = split.piece.payload
        with m.If(split.piece.valid & ~full):
            a = alloc[:ebits]
            m.d.sync += [*entries.store(a, piece), e_done[a].eq(0), alloc.eq(alloc + 1)]
        m.d.comb += self.unsupported.eq(split.piece.valid & ~full & piece.error & piece.last)

        # The write buffer: entry e's beat b at e * f + b; one comb read port per channel.
        # W beats may go into the entry being allocated in this cycle (``fill`` =
        # ``alloc``): its length and last flag then come from the piece itself.
        # Whether the W beat's entry is the one being allocated (``fill_new``)
        # and whether the beat is its entry's last (``fill_end``) are kept in
        # registers, computed from the next cycle's pointers, so that a W beat's
        # arrival reaches the request offer (the write bypass) and from there the
        # channel's request port through a few gates, not through a pointer
        # comparison and the entry table's length multiplexer (issue #40's timing).
        m.submodules.wbuf = wbuf = Memory(shape=axi.data_width + axi.data_bytes, depth=n_ent * f, init=[])
        wp = wbuf.write_port()
        fi = fill[:ebits]
        allocating = Signal()
        fill_new = Signal(init=1, name="wr_fill_new")    # fill == alloc
        fill_end_old = Signal(name="wr_fill_end_old")    # fill_beat is entry fill's last beat (fill != alloc)
        fill_last = Signal()
        fill_end = Signal()
        w_take = Signal()
        low = max(1, fbits)
        m.d.comb += [
            allocating.eq(split.piece.valid & ~full),
            fill_last.eq(Mux(fill_new, piece.last, e_last[fi])),
            # A new entry has taken no beat yet: its beat 0 is its last if its length is 0.
            fill_end.eq(Mux(fill_new, piece.len[:low] == 0, fill_end_old) if fbits else 1),
            self.w.ready.eq(~fill_new | allocating),
            w_take.eq(self.w.valid & self.w.ready),
            wp.en.eq(w_take),
            wp.addr.eq(Cat(fill_beat[:fbits], fi) if fbits else fi),
            wp.data.eq(Cat(self.w.payload.data, self.w.payload.strb)),
            self.wlast_mismatch.eq(w_take & (self.w.payload.last != (fill_end & fill_last))),
        ]
        next_fill = Signal.like(fill)
        next_beat = Signal.like(fill_beat)
        next_alloc = Signal.like(alloc)
        next_len = Signal(8)
        m.d.comb += [
            next_fill.eq(fill + (w_take & fill_end)),
            next_beat.eq(Mux(w_take, Mux(fill_end, 0, fill_beat + 1), fill_beat)),
            next_alloc.eq(alloc + allocating),
            # Entry next_fill's length as it will be: the piece's if the piece takes
            # that entry now (when next_fill = alloc and nothing is allocated, the
            # entry stays new and fill_end_old is not used).
            next_len.eq(Mux(next_fill == alloc, piece.len, e_len[next_fill[:ebits]])),
        ]
        m.d.sync += [
            fill_new.eq(next_fill == next_alloc),
            fill_end_old.eq(next_beat == next_len[:low] if fbits else 1),
        ]
        with m.If(w_take):
            with m.If(fill_end):
                m.d.sync += [fill_beat.eq(0), fill.eq(fill + 1)]
            with m.Else():
                m.d.sync += fill_beat.eq(fill_beat + 1)
        for c in range(nch):
            rp = wbuf.read_port(domain="comb")
            m.d.comb += [
                rp.addr.eq(Cat(self.read_beat[c][:fbits], self.read_entry[c]) if fbits else self.read_entry[c]),
                self.read[c].data.eq(rp.data[:axi.data_width]),
                self.read[c].strb.eq(rp.data[axi.data_width:]),
            ]

        # Requests, in entry order, once the entry's data is in. When no full
        # entry waits (``ask`` = ``fill``), the entry whose last beat arrives in
        # this cycle is offered in the same cycle (the bypass), from the piece
        # itself if it is also being allocated now: an idle tenant's single-beat
        # write reaches the request port one cycle after its AW handshake.
        pending = Signal(name="wr_pending")    # ask != fill
        arriving = Signal()
        m.d.comb += arriving.eq(~pending & w_take & fill_end)
        asked = entries.offer(m, ask, alloc, allocating, pending, arriving, piece, self.req, self.dropped)
        next_ask = Signal.like(ask)
        m.d.comb += next_ask.eq(ask + asked)
        m.d.sync += pending.eq(next_ask != next_fill)

        m.d.comb += entries.lookups(self.lookup_entry, self.lookup)
        for c in range(nch):
            done = self.done[c]
            with m.If(done.valid):
                m.d.sync += [e_done[done.entry].eq(1), e_resp[done.entry].eq(done.resp)]

        # Merge responses in program order: one entry retires per cycle.
        r = retire[:ebits]
        resp = Signal(2)
        merged = Signal(2)
        ready_entry = Signal()
        m.d.comb += [
            ready_entry.eq((retire != ask) & (e_err[r] | e_done[r])),
            resp.eq(Mux(e_err[r], RESP_SLVERR, e_resp[r])),
            merged.eq(Mux(resp > worst, resp, worst)),
            self.b.valid.eq(ready_entry & e_last[r]),
            self.b.payload.id.eq(e_id[r]),
            self.b.payload.resp.eq(merged),
        ]
        retiring = Signal()
        next_retire = Signal.like(retire)
        m.d.comb += [
            retiring.eq(ready_entry & (~e_last[r] | self.b.ready)),
            next_retire.eq(retire + retiring),
        ]
        with m.If(retiring):
            m.d.sync += [retire.eq(retire + 1), worst.eq(Mux(e_last[r], 0, merged))]
        m.d.sync += full.eq(ring_full(next_alloc, next_retire, ebits))
        return m
