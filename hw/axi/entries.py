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

__all__ = ["PieceEntries"]


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

    @classmethod
    def create(cls, prefix, n, piece):
        """``n`` entries shaped like ``piece`` (a splitter's sub-burst payload);
        registers named ``<prefix>_<field>_<entry>``."""
        def field(name, shape):
            return Array(Signal(shape, name=f"{prefix}_{name}_{e}") for e in range(n))
        return cls(id=field("id", len(piece.id)), addr=field("addr", len(piece.addr)), len=field("len", 8),
                   size=field("size", 3), channel=field("channel", len(piece.channel)),
                   bytes=field("bytes", len(piece.bytes)), last=field("last", 1), err=field("err", 1))

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

    def offer(self, m, ask, pending, arriving, from_piece, piece, req, dropped):
        """Drive ``req`` (the side's request stream) from the entries in order.

        ``ask`` is the pointer to the next entry to offer (advanced here);
        ``pending``: that entry is ready and waiting; ``arriving``: it becomes
        ready in this cycle (the bypass); ``from_piece``: it is the entry the
        splitter's piece takes (``ask`` = ``alloc``), so if it is offered at
        all it is being allocated in this cycle and its channel, bytes and
        error flag are ``piece``'s. (A pointer comparison, not ``arriving``,
        selects them: the multiplexer then settles while the offer's validity
        is still being worked out.)
        A request the arbiter drops (``dropped``) marks its entry erroneous.
        """
        k = ask[:len(ask) - 1]
        offer, err = Signal(), Signal()
        m.d.comb += [
            offer.eq(pending | arriving),
            err.eq(Mux(from_piece, piece.error, self.err[k])),
            req.valid.eq(offer & ~err),
            req.payload.channel.eq(Mux(from_piece, piece.channel, self.channel[k])),
            req.payload.bytes.eq(Mux(from_piece, piece.bytes, self.bytes[k])),
            req.payload.entry.eq(k),
        ]
        with m.If(offer & (err | req.ready)):
            m.d.sync += ask.eq(ask + 1)
        # After the store at allocation (statements above this call): a dropped
        # bypassed piece is marked too.
        with m.If(req.valid & req.ready & dropped):
            m.d.sync += self.err[k].eq(1)
