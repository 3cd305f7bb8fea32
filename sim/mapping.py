"""Tenant address to channel (:class:`ChannelMap`), and channel-local address
to (bank, row) (:class:`AddressMap`), with and without page coloring.

Channels: a tenant's address space is cut into units of ``interleave_bytes``
dealt round robin over the tenant's channel set (all channels unless the
workload gives the tenant ``channels = [...]``); each channel numbers the
units it receives consecutively, so a stream stays a stream inside every
channel.  Optional per-channel weights (``channel_weights``) deal a round of
``sum(weights)`` units instead, channel c receiving ``weights[c]`` of them
spread over the round (a skew); optional moves (``moves``) change a tenant's
set and weights from a given cycle on, for the transactions it issues from
then (a demand shift; addresses it used before are not remapped).  The default unit, :data:`DEFAULT_INTERLEAVE_BYTES` = 256 B, is the
largest run :class:`AddressMap` keeps in one bank group: 4 columns of 32 B
(HBM3's BL8 on a 32-bit pseudo-channel, sim/hbm3.py) in each of the two
pseudo-channels, one row activation per pseudo-channel.  A smaller unit
would split such a run over channels and double the activations per byte
of random 256 B reads (the tFAW bound, docs/system-model.md); a larger one
only keeps a tenant longer on one channel.  Transactions are 128 B, so the
unit is a multiple of 128 B and a transaction never straddles channels.

Within a channel, addresses are channel-local 32-byte access indices.

Bit order, low to high (HBM3 geometry)::

    pc (1) | col_lo (2) | bg (2) | bank-set index | col_hi (3) | row

Consecutive accesses alternate pseudo-channels and then walk four columns of
a row before moving to the next bank group, so a stream uses tCCD_S spacing
and keeps rows open (128 B per bank visit, returning to the same row eight
times).  The bank-set index picks one of the (stack ID, bank) pairs a tenant
may use, rotated by the row number: the permutation interleaving of Zhang
et al. (MICRO 2000) that spreads rows that would otherwise collide.

Without coloring every tenant may use all eight (stack ID, bank) pairs and
owns a contiguous slice of rows.  With coloring the OS hands each tenant only
pages of its color, here a disjoint subset of (stack ID, bank) pairs that
still spans every bank group and both pseudo-channels: a color made of
adjacent banks (the essay's "banks 0-3") would sit in one bank group and cap
the tenant at tCCD_L, half the stream bandwidth.
"""

from fractions import Fraction

from .hbm3 import HBM3_GEOMETRY

__all__ = ["AddressMap", "ChannelMap", "DEFAULT_INTERLEAVE_BYTES", "TRANSACTION_BYTES"]

#: Bytes of one transaction (sim/system.py: four 32 B accesses), the unit a channel set deals in.
TRANSACTION_BYTES = 128

#: Default channel interleave: the 256 B run :class:`AddressMap` keeps in one bank group
#: (pseudo-channel and low column bits: 2 x 4 columns of 32 B), see the module docstring.
DEFAULT_INTERLEAVE_BYTES = 256


class ChannelMap:
    """Map a tenant's transaction index to ``(channel, channel-local transaction index)``.

    Parameters
    ----------
    channels : int
        Channels of the system.
    sets : list of tuples, one per tenant
        The channels each tenant's addresses interleave over (ascending).
    interleave_bytes : int
        Unit dealt round robin over a tenant's set, a multiple of 128 B.
    weights : list, one per tenant, of None or a tuple of positive ints
        Units per round on each channel of the tenant's set (None: one each).
    moves : list, one per tenant, of tuples of ``(cycle, set, weights)``
        From ``cycle`` on (strictly increasing, > 0) the tenant's transactions
        are dealt over ``set`` with ``weights`` (None: one each).
    """

    def __init__(self, channels, sets, interleave_bytes=DEFAULT_INTERLEAVE_BYTES, weights=None, moves=None):
        if not isinstance(channels, int) or channels <= 0:
            raise ValueError(f"Channel count must be a positive integer, not {channels!r}")
        if (not isinstance(interleave_bytes, int) or interleave_bytes <= 0
                or interleave_bytes % TRANSACTION_BYTES):
            raise ValueError(f"Interleave must be a positive multiple of {TRANSACTION_BYTES} B, "
                             f"not {interleave_bytes!r}")
        for t, s in enumerate(sets):
            if not s or len(set(s)) != len(s) or any(not 0 <= c < channels for c in s):
                raise ValueError(f"Tenant {t}'s channel set {s!r} must be distinct channels in 0..{channels - 1}")
        self.channels = channels
        self.sets = [tuple(s) for s in sets]
        self.interleave_bytes = interleave_bytes
        self.unit = interleave_bytes // TRANSACTION_BYTES  # transactions per unit
        n = len(self.sets)
        self.weights = [None if w is None else tuple(w) for w in (weights or [None] * n)]
        self.moves = [tuple((at, tuple(s), None if w is None else tuple(w)) for at, s, w in m)
                      for m in (moves or [()] * n)]
        if len(self.weights) != n or len(self.moves) != n:
            raise ValueError(f"Give weights and moves for each of the {n} tenants")
        #: Per tenant None (one set, one unit per channel a round: the plain
        #: dealing), or its phases: (first cycle, set, round), the round a
        #: tuple of (channel, the channel's units per round, rank in the round).
        self._phases = []
        for t in range(n):
            phases = ((0, self.sets[t], self.weights[t]),) + self.moves[t]
            last = 0
            for k, (at, s, w) in enumerate(phases):
                if k and (not isinstance(at, int) or at <= last):
                    raise ValueError(f"Tenant {t}'s move {k} at {at!r} must be a cycle after {last}")
                last = at
                if not s or len(set(s)) != len(s) or any(not 0 <= c < channels for c in s):
                    raise ValueError(f"Tenant {t}'s channel set {s!r} must be distinct channels in 0..{channels - 1}")
                if w is not None and (len(w) != len(s) or any(not isinstance(x, int) or x <= 0 for x in w)):
                    raise ValueError(f"Tenant {t}'s channel weights {w!r} must be positive integers, one per "
                                     f"channel of {s!r}")
            plain = len(phases) == 1 and self.weights[t] is None
            self._phases.append(None if plain else tuple((at, s, _round(s, w)) for at, s, w in phases))

    @classmethod
    def spread(cls, channels, n_tenants, interleave_bytes=DEFAULT_INTERLEAVE_BYTES):
        """Every tenant over every channel."""
        return cls(channels, [tuple(range(channels))] * n_tenants, interleave_bytes)

    def locate(self, tenant, index, now=0):
        """Channel and channel-local index of the tenant's ``index``-th
        transaction, issued at cycle ``now`` (which matters to a tenant with moves)."""
        phases = self._phases[tenant]
        unit = self.unit
        if phases is None:
            s = self.sets[tenant]
            if len(s) == 1:
                return s[0], index
            u, offset = divmod(index, unit)
            q, r = divmod(u, len(s))
            return s[r], q * unit + offset
        rnd = phases[0][2]
        for at, _, later in phases[1:]:
            if now < at:
                break
            rnd = later
        u, offset = divmod(index, unit)
        q, r = divmod(u, len(rnd))
        channel, per_round, rank = rnd[r]
        return channel, (q * per_round + rank) * unit + offset

    def capacity(self, tenant, local):
        """Transactions the tenant may address given ``local`` per channel.

        One channel: ``local``.  Several: whole pairs of units per channel
        (``2 * unit`` transactions) times the set's size, so no channel-local
        index exceeds ``local`` and the tenant's two halves (a prefill's reads
        and writes, sim/tenants.py) start on the same channel.
        """
        phases = self._phases[tenant]
        if phases is None:
            k = len(self.sets[tenant])
            if k == 1:
                return local
            pair = 2 * self.unit
            return local // pair * pair * k
        # Weights or moves: whole pairs of rounds, in every phase (a channel of
        # weight w holds w units of each round).
        out = None
        for _, _, rnd in phases:
            rounds = local // self.unit // max(w for _, w, _ in rnd) // 2 * 2
            cap = rounds * len(rnd) * self.unit
            out = cap if out is None else min(out, cap)
        return out


def _round(channels, weights):
    """One round of units over ``channels``: ``weights[j]`` units for channel j
    (one each when None), spread over the round (stride order: channel j's
    k-th unit at (k + 1/2) / weights[j], ties in set order), each as (channel,
    its units per round, its rank among them)."""
    weights = weights or (1,) * len(channels)
    order = sorted((Fraction(2 * k + 1, 2 * w), j, k) for j, w in enumerate(weights) for k in range(w))
    return tuple((channels[j], weights[j], k) for _, j, k in order)


class AddressMap:
    """Map a tenant's access index to ``(bank_id, row)``.

    Parameters
    ----------
    n_tenants : int
    coloring : bool
        Give each tenant a disjoint set of (stack ID, bank) pairs.
    geometry : Geometry
    """

    def __init__(self, n_tenants, *, coloring=False, geometry=HBM3_GEOMETRY):
        if not isinstance(n_tenants, int) or n_tenants <= 0:
            raise ValueError(f"Tenant count must be a positive integer, not {n_tenants!r}")
        g = geometry
        pairs = [(sid, bank) for bank in range(g.banks_per_group) for sid in range(g.stack_ids)]
        if coloring and n_tenants > len(pairs):
            raise ValueError(f"Coloring supports at most {len(pairs)} tenants, not {n_tenants}")
        self.geometry = g
        self.n_tenants = n_tenants
        self.coloring = coloring
        if coloring:
            per = len(pairs) // n_tenants
            self._sets = [pairs[t * per:(t + 1) * per] for t in range(n_tenants)]
            self._row_base = [0] * n_tenants
            self.rows_per_tenant = g.rows
        else:
            self._sets = [pairs] * n_tenants
            self.rows_per_tenant = g.rows // n_tenants
            self._row_base = [t * self.rows_per_tenant for t in range(n_tenants)]
        self._col_lo_bits = 2
        self._col_hi = g.columns >> self._col_lo_bits
        # locate() runs for every access a tenant issues: per tenant, the flat
        # bank id of (pseudo-channel, bank group, k-th pair of its set) as a table.
        self._bank_ids = [[[[g.bank_id(pc, sid, bg, bank) for sid, bank in pairs]
                            for bg in range(g.bank_groups)] for pc in range(g.pseudo_channels)]
                          for pairs in self._sets]

    def bank_set(self, tenant):
        """(stack ID, bank) pairs the tenant's pages may occupy."""
        return list(self._sets[tenant])

    def banks_of(self, tenant):
        """Flat bank ids the tenant can touch."""
        g = self.geometry
        return sorted(g.bank_id(pc, sid, bg, bank)
                      for pc in range(g.pseudo_channels) for bg in range(g.bank_groups)
                      for sid, bank in self._sets[tenant])

    def capacity(self, tenant):
        """Accesses addressable by the tenant."""
        g = self.geometry
        return (g.pseudo_channels * g.columns * g.bank_groups * len(self._sets[tenant])
                * self.rows_per_tenant)

    def locate(self, tenant, index):
        """Bank and row of the tenant's ``index``-th 32-byte access."""
        return self.locate_run(tenant, index, 1)[0]

    def locate_run(self, tenant, first, count):
        """Bank and row of the tenant's accesses ``first .. first + count - 1``
        (a transaction's: one call where the system would make ``count``)."""
        g = self.geometry
        pcs, groups = g.pseudo_channels, g.bank_groups
        col_lo_bits, col_hi = self._col_lo_bits, self._col_hi
        rows, row_base = self.rows_per_tenant, self._row_base[tenant]
        bank_ids = self._bank_ids[tenant]  # per pseudo-channel and bank group: bank ids of its pairs
        out = []
        for a in range(first, first + count):
            pc = a % pcs
            a //= pcs
            a >>= col_lo_bits
            bg = a % groups
            a //= groups
            banks = bank_ids[pc][bg]
            n = len(banks)
            k = a % n
            a //= n
            a //= col_hi
            row = a % rows
            out.append((banks[(k + row) % n], row_base + row))
        return out
