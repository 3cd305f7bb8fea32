"""The entry table both tracker sides keep per tenant (spec §14.4).

A read entry and a write entry describe their sub-burst the same way: the
tenant's ID, address, length, size, channel, request bytes, whether it is its
burst's last piece, and whether it is answered without memory (``err``). Each
field is a register per entry, indexed by an entry pointer; the splitter's
piece is stored at allocation and the channels read a granted entry's
descriptor through ``lookup``. The sides add their own per-entry state (beats
received, response) beside it.
"""

from dataclasses import dataclass

from amaranth.hdl import Array, Signal

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
