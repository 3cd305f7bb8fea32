"""Two-level register read multiplexer with one cycle of latency (spec §9 reads).

A block's read port is ``r_addr`` (the register bus address, registered by the
AXI slave) in; the word at that address with the registers' values *of the
cycle in which ``r_addr`` is presented* out, one cycle later. The multiplexer is
split at that register so that neither half is deep:

* level 1, registered at the end of cycle s: for every register of every block
  of the description, the word of the element that ``r_addr``'s index bits
  select (a plain multiplexer on those few bits, no comparison), and one
  select bit, ``r_addr`` is that register of an implemented element (the full
  address decode, in parallel);
* level 2, combinational in cycle s+1: the OR over the registers of
  ``select & word``. Constant registers (``ID``, ``PARAMS``) are no level-1
  word, only their select bit.

Every address that selects no register reads 0. The caller ORs level 2 of
several blocks and registers the result (:class:`hw.axil.AXI4LiteSlave`).
"""

from collections import defaultdict

from amaranth import *

from kvfabric.regmap import DATA_WIDTH


__all__ = ["pipelined_read"]


def _log2(n):
    if n <= 0 or n & (n - 1):
        raise ValueError(f"{n} is not a power of two")
    return n.bit_length() - 1


def pipelined_read(m, r_addr, entries, *, name):
    """Build the read multiplexer of ``entries`` in ``m``; return level 2 (a ``DATA_WIDTH`` value).

    ``entries`` are ``(address, block, index, register, word)``: ``word`` the
    register's read word of element ``index`` (a :class:`Value` or an ``int``).
    ``name`` prefixes the level-1 registers.
    """
    groups = defaultdict(list)
    for addr, block, index, reg, word in entries:
        groups[block, reg.name].append((index, addr, reg, Value.cast(word)))
    out = Const(0, DATA_WIDTH)
    for (block, reg_name), elems in groups.items():
        elems.sort(key=lambda e: e[0])
        n = len(elems)
        if [e[0] for e in elems] != list(range(n)):
            raise ValueError(f"{block.name}.{reg_name}: elements must be 0..{n - 1}")
        reg = elems[0][2]
        if block.count == 1:
            sel_cond = r_addr[2:] == elems[0][1] >> 2
            order = [0]
            idx = C(0, 1)
        else:
            # Element i at word-group b + i of r_addr[lo:] (b = base / stride):
            # element i sits at position (b + i) mod 2^j of the multiplexer.
            lo = _log2(block.stride)
            if block.base % block.stride or reg.offset >= block.stride:
                raise ValueError(f"block {block.name}: base or offset not a multiple of its stride")
            # Only as many index bits as the implemented elements need (j): the
            # select bit checks the whole address, so the multiplexer need not.
            j = max(1, (n - 1).bit_length())
            b = block.base >> lo
            idx = r_addr[lo:lo + j]
            order = [(v - b) % (1 << j) for v in range(1 << j)]
            group = r_addr[lo:]
            sel_cond = (group >= b) & (group < b + n) & (r_addr[2:lo] == reg.offset >> 2)
        sel = Signal(name=f"{name}_sel_{block.name.lower()}_{reg_name.lower()}")
        m.d.sync += sel.eq(sel_cond)
        words = [e[3] for e in elems]
        mask = reg.read_mask
        if all(isinstance(w, Const) for w in words) and len({w.value for w in words}) == 1:
            out = out | Mux(sel, words[0].value & mask, 0)
            continue
        width = mask.bit_length()
        word = Signal(width, name=f"{name}_word_{block.name.lower()}_{reg_name.lower()}")
        choice = words[0] if n == 1 else Array(words[i] if i < n else C(0, DATA_WIDTH)
                                                    for i in order)[idx]
        m.d.sync += word.eq(choice & mask)
        out = out | (word & sel.replicate(width))
    return out
