"""Physical address to (bank, row) mapping, with and without page coloring.

Addresses are channel-local 32-byte access indices: the GPU interleaves
channels above this, and every tenant is assumed to spread evenly over all
channels, so one channel sees a 1/N slice of each tenant's traffic.

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

from .hbm3 import HBM3_GEOMETRY

__all__ = ["AddressMap"]


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
        g = self.geometry
        a = index
        pc = a % g.pseudo_channels
        a //= g.pseudo_channels
        a >>= self._col_lo_bits
        bg = a % g.bank_groups
        a //= g.bank_groups
        pairs = self._sets[tenant]
        n = len(pairs)
        k = a % n
        a //= n
        a //= self._col_hi
        row = a % self.rows_per_tenant
        sid, bank = pairs[(k + row) % n]
        return g.bank_id(pc, sid, bg, bank), self._row_base[tenant] + row
