"""The entry table both tracker sides keep per tenant (spec §14.4).

A read entry and a write entry describe their sub-burst the same way: the
tenant's ID, address, length, size, channel, request bytes, whether it is its
burst's last piece, and whether it is answered without memory (``err``). Each
field is a register per entry, indexed by an entry pointer; the splitter's
piece is stored at allocation and the channels read a granted entry's
descriptor through ``lookup``. The sides add their own per-entry state (beats
received, response) beside it.

Both sides also offer their entries to the channels' arbiters the same way
(spec §14.3): in entry order from a pointer ``ask``, an erroneous entry
stepped over, and, when no older entry waits, the entry that becomes ready
in this cycle offered in that cycle (the bypass), its descriptor taken from
the splitter's piece if the piece is taking the entry now.
"""

from dataclasses import dataclass

from amaranth.hdl import Array, Mux, Signal

__all__ = ["PieceEntries", "ring_full"]


def ring_full(a, b, bits):
    """Pointers ``a`` (the one that allocates) and ``b`` (the one that frees),
    each ``bits + 1`` bits wide, are a whole ring of ``2**bits`` entries apart."""
    return (a[:bits] == b[:bits]) & (a[bits] != b[bits])


@dataclass
class PieceEntries:
    """Per-entry registers of a tracker: one ``Array`` of ``n`` signals per field."""

    id: Array
    addr: Array
    len: Array
    size: Array
    channel: Array
    bytes: Array
    last: Array
    err: Array
    prefix: str = "entry"

    @classmethod
    def create(cls, prefix, n, piece):
        """``n`` entries shaped like ``piece`` (a splitter's sub-burst payload);
        registers named ``<prefix>_<field>_<entry>``."""
        def field(name, shape):
            return Array(Signal(shape, name=f"{prefix}_{name}_{e}") for e in range(n))
        return cls(id=field("id", len(piece.id)), addr=field("addr", len(piece.addr)), len=field("len", 8),
                   size=field("size", 3), channel=field("channel", len(piece.channel)),
                   bytes=field("bytes", len(piece.bytes)), last=field("last", 1), err=field("err", 1),
                   prefix=prefix)

    def store(self, index, piece):
        """Statements (for ``m.d.sync``) that write ``piece`` into entry ``index``."""
        return [self.id[index].eq(piece.id), self.addr[index].eq(piece.addr), self.len[index].eq(piece.len),
                self.size[index].eq(piece.size), self.channel[index].eq(piece.channel),
                self.bytes[index].eq(piece.bytes), self.last[index].eq(piece.last),
                self.err[index].eq(piece.error)]

    def lookups(self, lookup_entry, lookup):
        """Statements (for ``m.d.comb``) that answer each channel's ``lookup_entry[c]``
        with that entry's address, length and size on ``lookup[c]``."""
        stmts = []
        for entry, out in zip(lookup_entry, lookup):
            stmts += [out.addr.eq(self.addr[entry]), out.len.eq(self.len[entry]), out.size.eq(self.size[entry])]
        return stmts

    def offer(self, m, ask, alloc, allocating, pending, arriving, piece, req, dropped):
        """Drive ``req`` (the side's request stream) from the entries in order.

        ``ask`` is the pointer to the next entry to offer (advanced here);
        ``alloc`` the entry the splitter's piece takes, in this cycle if
        ``allocating``; ``pending``: the entry at ``ask`` is ready and
        waiting; ``arriving``: it becomes ready in this cycle (the bypass).
        A request the arbiter drops (``dropped``) marks its entry erroneous.
        Returns the signal that advances ``ask`` in this cycle.

        The offered entry's channel, bytes and error flag come from registers
        (``ask_*``), loaded with the next cycle's entry at ``ask``, or, when
        that is the entry being allocated (``ask`` = ``alloc``: if it is
        offered at all, it is being allocated in that cycle), from the
        splitter's piece, itself a register. No multiplexer over the entry
        table lies between a register and the channel's request port, which
        the offer reaches, and through it the arbiter's ingress, in the same
        cycle (issue #40's timing).
        """
        k = ask[:len(ask) - 1]
        at_alloc = Signal(init=1, name=f"{self.prefix}_ask_at_alloc")   # ask = alloc
        ask_channel = Signal.like(req.payload.channel, name=f"{self.prefix}_ask_channel")
        ask_bytes = Signal.like(req.payload.bytes, name=f"{self.prefix}_ask_bytes")
        ask_err = Signal(name=f"{self.prefix}_ask_err")
        offer, err = Signal(), Signal()
        m.d.comb += [
            offer.eq(pending | arriving),
            err.eq(Mux(at_alloc, piece.error, ask_err)),
            req.valid.eq(offer & ~err),
            req.payload.channel.eq(Mux(at_alloc, piece.channel, ask_channel)),
            req.payload.bytes.eq(Mux(at_alloc, piece.bytes, ask_bytes)),
            req.payload.entry.eq(k),
        ]
        advance = Signal()
        m.d.comb += advance.eq(offer & (err | req.ready))
        with m.If(advance):
            m.d.sync += ask.eq(ask + 1)
        # After the store at allocation (statements above this call): a dropped
        # bypassed piece is marked too.
        with m.If(req.valid & req.ready & dropped):
            m.d.sync += self.err[k].eq(1)
        # The next cycle's entry at ask. When it is the entry being allocated
        # now, the table does not hold it yet: the piece does. (An entry is
        # marked erroneous above only as ask leaves it.)
        next_ask, next_alloc = Signal.like(ask), Signal.like(alloc)
        nk = next_ask[:len(ask) - 1]
        new = Signal()
        m.d.comb += [next_ask.eq(ask + advance), next_alloc.eq(alloc + allocating), new.eq(next_ask == alloc)]
        m.d.sync += [
            at_alloc.eq(next_ask == next_alloc),
            ask_channel.eq(Mux(new, piece.channel, self.channel[nk])),
            ask_bytes.eq(Mux(new, piece.bytes, self.bytes[nk])),
            ask_err.eq(Mux(new, piece.error, self.err[nk])),
        ]
        return advance
