"""Oracles for the guarantees of spec §7, written from their definitions.

Nothing here imports or mirrors ``kvfabric.model.channel``: every check takes a
log of what a channel did (who was granted how many bytes, when the request
arrived, became head, was selected, was transferred) and the register values,
and recomputes the guarantee from the spec's formulas (§3 cost, §7 bounds) and
from first principles (a fluid GPS server, token-bucket arrival curves). The
same functions judge the golden model's closed-loop runs and the RTL's grant
logs (``kvfabric.engines.replay``), so a model that misreads the spec is caught
by a reading that does not share its code.

Every check returns a :class:`Verdict` (worst value, allowance, where) rather
than asserting, so the tests can print it and the mutation runner can reuse it.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable, Sequence

FRAC_ONE = 8  # UQ.3: register units per byte (spec §3)


@dataclass(frozen=True)
class Event:
    """One granted request, as a log states it (cycles; None = not known)."""

    tenant: int
    bytes: int
    kind: str = "guaranteed"  # "guaranteed" | "burst" | "fcfs" | "urgent"
    arrival: int | None = None
    accepted: int | None = None
    head: int | None = None
    selected: int | None = None
    transferred: int | None = None


@dataclass(frozen=True)
class Verdict:
    """Outcome of one check: ``worst`` must not exceed ``allowed``."""

    name: str
    worst: Fraction | int
    allowed: Fraction | int
    where: str = ""

    @property
    def ok(self) -> bool:
        return self.worst <= self.allowed

    def __str__(self) -> str:
        return (f"{self.name}: worst {float(self.worst):.1f} vs allowed {float(self.allowed):.1f}"
                f" ({'ok' if self.ok else 'VIOLATED'}) {self.where}")


# ---- definitions from the spec (§3), restated, not imported ------------------------------

def spec_cost(nbytes: int, inv_weight: int, wfrac: int = 8, tag_shift: int = 5) -> int:
    """§3: ``ceil(bytes * inv_weight / 2^(WFRAC + TAG_SHIFT))`` tag units."""
    return -(-(nbytes * inv_weight) // (1 << (wfrac + tag_shift)))


def share_of(inv_weight: int, wfrac: int = 8) -> Fraction:
    """φ = 2^WFRAC / inv_weight: the share of the channel a weight register means (§3)."""
    return Fraction(1 << wfrac, inv_weight)


def q_cycles(nbytes: int, bytes_per_cycle: Fraction) -> int:
    """§8: cycles one grant of ``nbytes`` occupies the memory side, ``ceil(s / B)``."""
    return -(-Fraction(nbytes) // Fraction(bytes_per_cycle))


# ---- fairness against a fluid GPS server ---------------------------------------------------

def gps_fairness(order: Sequence[Event], inv_weights: Sequence[int], *, lmax: int,
                 tag_unit: int = 32, wfrac: int = 8, tag_shift: int = 5) -> Verdict:
    """Spec §7 fairness: all tenants backlogged throughout, equal priority.

    The fluid GPS reference serves every backlogged tenant i at ``φ_i / Σφ`` of
    the channel, so after ``total`` bytes it has given i ``share_i * total``.
    The allowance at every grant is the spec's (re-derived in §7):
    ``2·LMAX + TAG_UNIT·N`` for the packetised WF2Q+ with a stale V, plus the
    rounding the per-request ``ceil`` in cost accumulates: each grant of i
    charges it up to ``ρ = TAG_UNIT·φ_i`` bytes more than it received, so i's
    bytes can trail its share by its own ``Σρ_i`` and lead it by
    ``share_i·Σ_j ρ_j``, its share of everyone's overcharge.
    """
    n = len(inv_weights)
    # Floats: the values are below 2^40 and the allowance has bytes of slack, so
    # double precision (53 bits) is exact enough and keeps a long log fast.
    phi = [float(share_of(x, wfrac)) for x in inv_weights]
    total_phi = sum(phi)
    share = [f / total_phi for f in phi]
    served = [0] * n
    grants = [0] * n
    total = 0
    charge_all = 0.0  # Σ_j TAG_UNIT·φ_j·g_j
    base = 2 * lmax + tag_unit * n
    worst = -1e18
    at = None
    for k, e in enumerate(order):
        i = e.tenant
        served[i] += e.bytes
        total += e.bytes
        grants[i] += 1
        charge_all += tag_unit * phi[i]
        for j in range(n):
            # Rounding only ever overcharges (ceil), so it can make a tenant trail
            # its share by its own overcharge and lead it by its share of everyone's.
            diff = served[j] - share[j] * total
            allowance = share[j] * charge_all if diff > 0 else tag_unit * phi[j] * grants[j]
            excess = abs(diff) - allowance
            if excess > worst:
                worst, at = excess, (j, k, served[j], share[j] * total)
    where = "" if at is None else (f"tenant {at[0]} after grant {at[1]}: {at[2]} B served, "
                                   f"GPS share {at[3]:.0f} B")
    return Verdict("GPS lag beyond cost rounding", worst, base + 1e-6, where)


def gps_charged_fairness(order: Sequence[Event], inv_weights: Sequence[int], *, lmax: int,
                         tag_unit: int = 32, wfrac: int = 8, tag_shift: int = 5) -> Verdict:
    """Step (1) of spec §7's fairness derivation, on its own: the *charged*
    service ``K_i = TAG_UNIT·φ_i·Σ cost`` (cost from §3's formula, i.e. bytes at
    tenant i's weight, rounded up per request) stays within ``2·LMAX +
    TAG_UNIT·N`` of its fluid GPS share of ``Σ K`` at every grant. No rounding
    allowance: this is the quantity the tags order, so it catches a model that
    rounds cost differently from §3."""
    n = len(inv_weights)
    phi = [float(share_of(x, wfrac)) for x in inv_weights]
    total_phi = sum(phi)
    share = [f / total_phi for f in phi]
    charged = [0.0] * n
    total = 0.0
    worst, at = -1e18, None
    for k, e in enumerate(order):
        c = tag_unit * phi[e.tenant] * spec_cost(e.bytes, inv_weights[e.tenant], wfrac, tag_shift)
        charged[e.tenant] += c
        total += c
        for j in range(n):
            lag = abs(charged[j] - share[j] * total)
            if lag > worst:
                worst, at = lag, (j, k, charged[j], share[j] * total)
    where = "" if at is None else (f"tenant {at[0]} after grant {at[1]}: charged {at[2]:.0f} B, "
                                   f"GPS share {at[3]:.0f} B")
    return Verdict("charged-service GPS lag", worst, 2 * lmax + tag_unit * n + 1e-6, where)


def gps_lag_exact(order: Sequence[Event], shares: Sequence[Fraction]) -> Fraction:
    """Largest |served_i - share_i * total| over every prefix of ``order`` (no allowance).
    For scenarios whose costs round exactly, so the lag is the scheduler's alone."""
    n = len(shares)
    served = [0] * n
    total = 0
    worst = Fraction(0)
    for e in order:
        served[e.tenant] += e.bytes
        total += e.bytes
        for j in range(n):
            worst = max(worst, abs(served[j] - shares[j] * total))
    return worst


# ---- token-bucket envelopes ----------------------------------------------------------------

def max_window_excess(events: Iterable[tuple[int, int]], rate: Fraction) -> Fraction:
    """max over every window [a, b] of cycles of ``bytes(a..b) - rate·(b - a + 1)``.

    ``events`` are (cycle, bytes) in cycle order. O(n): the best window ending
    at an event starts at the event that maximises ``rate·a - bytes before a``.
    """
    worst = None
    best_start = None
    before = 0
    for cycle, nbytes in events:
        start = rate * cycle - before
        best_start = start if best_start is None or start > best_start else best_start
        before += nbytes
        value = before - rate * (cycle + 1) + best_start
        worst = value if worst is None or value > worst else worst
    return Fraction(0) if worst is None else Fraction(worst)


def envelope(events: Sequence[Event], tenant: int, *, rate: int, capacity: int, peak_rate: int,
             pcap: int, at: str = "selected", lmax: int = 0) -> list[Verdict]:
    """§7 burst envelope of one tenant on one channel.

    Over every window of w cycles: all granted bytes ≤ ``PCAP/8 + w·peak_rate/8``
    and guaranteed-kind bytes ≤ ``capacity/8 + w·rate/8`` (register units are
    UQ.3). On transfer times (``at='transferred'``) the grant register may hold
    one more request, so ``lmax`` is added.
    """
    mine = sorted(((getattr(e, at), e.bytes, e.kind) for e in events if e.tenant == tenant),
                  key=lambda x: x[0])
    every = [(c, b) for c, b, _ in mine]
    # Urgent heads conform, and their grants debit the committed bucket (§6.3, §6.6).
    guaranteed = [(c, b) for c, b, k in mine if k in ("guaranteed", "urgent")]
    return [
        Verdict(f"tenant {tenant} peak envelope",
                max_window_excess(every, Fraction(peak_rate, FRAC_ONE)),
                Fraction(pcap, FRAC_ONE) + lmax),
        Verdict(f"tenant {tenant} committed envelope",
                max_window_excess(guaranteed, Fraction(rate, FRAC_ONE)),
                Fraction(capacity, FRAC_ONE) + lmax),
    ]


def committed_after_burst(events: Sequence[Event], tenant: int, *, rate: int) -> Verdict:
    """§6.3: a burst grant spends the committed bucket (its level becomes
    ``min(rate, capacity)``), so from the cycle after a burst selection b up to
    any later selection e, guaranteed-kind bytes selected in [b+1, e] are at
    most ``(e - b)·rate/8``: what the bucket can refill in that time. Returns
    the worst excess (must be <= 0). Needs selection cycles (model records)."""
    r = Fraction(rate, FRAC_ONE)
    mine = sorted((e.selected, e.bytes, e.kind) for e in events
                  if e.tenant == tenant and e.selected is not None)
    worst = Fraction(-10**18)
    where = "no burst grant followed by a guaranteed one"
    for k, (b, _, kind) in enumerate(mine):
        if kind != "burst":
            continue
        got = 0
        for e, nbytes, kind2 in mine[k + 1:]:
            if kind2 == "burst":
                break  # the next burst restarts the argument
            got += nbytes
            excess = got - r * (e - b)
            if excess > worst:
                worst, where = excess, f"burst at {b}, {got} B guaranteed by {e}"
    return Verdict(f"tenant {tenant} committed bytes after a burst", worst, 0, where)


def max_occupancy(events: Sequence[Event], tenant: int) -> int:
    """§4: a request accepted at a occupies its tenant's queue (ingress register,
    then FIFO) from a+1 through its selection cycle; ``ready = occupancy < D``
    keeps this at most D. Returns the largest occupancy the log implies."""
    delta: dict[int, int] = {}
    for e in events:
        if e.tenant == tenant and e.accepted is not None and e.selected is not None:
            delta[e.accepted + 1] = delta.get(e.accepted + 1, 0) + 1
            delta[e.selected + 1] = delta.get(e.selected + 1, 0) - 1
    level = worst = 0
    for cycle in sorted(delta):
        level += delta[cycle]
        worst = max(worst, level)
    return worst


# ---- guaranteed rate, delay, starvation ----------------------------------------------------

def guaranteed_rate(events: Sequence[Event], tenant: int, *, rate: int, capacity: int, lmax: int,
                    start: int, end: int) -> Verdict:
    """§7 guaranteed rate: in every window [a, b] with start ≤ a ≤ b < end, tenant's
    transferred bytes ≥ ``rate/8·w - capacity/8 - LMAX``. Returns the worst shortfall
    ``rate/8·w - bytes`` over those windows."""
    r = Fraction(rate, FRAC_ONE)
    pts = sorted((e.transferred, e.bytes) for e in events
                 if e.tenant == tenant and e.transferred is not None and start <= e.transferred < end)
    # shortfall over [a, b] = r·(b - a + 1) - bytes in [a, b]; maximise over a at the
    # window start (just after an event or at `start`) and b at the window end (just
    # before an event or at end - 1).
    worst = Fraction(0)
    best = -r * start  # max over window starts a of (bytes before a) - r·a
    before = 0
    for cycle, nbytes in pts:
        # window ending just before this event: b = cycle - 1
        worst = max(worst, r * cycle + best - before)
        before += nbytes
        best = max(best, -r * (cycle + 1) + before)
    worst = max(worst, r * end + best - before)
    return Verdict(f"tenant {tenant} guaranteed-rate shortfall", worst,
                   Fraction(capacity, FRAC_ONE) + lmax)


def delay_bound(*, rate: int, capacity: int, lmax: int, bytes_per_cycle: Fraction) -> Fraction:
    """§7 delay: ``capacity/rate + LMAX·8/rate + q(LMAX) + 3`` cycles (UQ.3 registers)."""
    return (Fraction(capacity, rate) + Fraction(lmax * FRAC_ONE, rate)
            + q_cycles(lmax, bytes_per_cycle) + 3)


def delays(events: Sequence[Event], tenant: int, bound: Fraction) -> Verdict:
    """Worst arrival-to-transfer wait of ``tenant`` against ``bound``."""
    waits = [(e.transferred - e.arrival, e) for e in events
             if e.tenant == tenant and e.transferred is not None]
    if not waits:
        return Verdict(f"tenant {tenant} delay", 0, bound, "no grants")
    w, e = max(waits, key=lambda x: x[0])
    return Verdict(f"tenant {tenant} delay", w, bound, f"arrived {e.arrival}, transferred {e.transferred}")


def starvation_bound(*, starve_limit: int, rate: int, tenants: int, queue_depth: int, lmax: int,
                     bytes_per_cycle: Fraction) -> int:
    """§7 starvation: ``max(H, T_fill) + (N-1)·D·q(LMAX) + 1`` with
    ``T_fill = ceil((LMAX << 3) / rate)``."""
    t_fill = -(-(lmax * FRAC_ONE) // rate)
    return max(starve_limit, t_fill) + (tenants - 1) * queue_depth * q_cycles(lmax, bytes_per_cycle) + 1


def head_waits(events: Sequence[Event], tenant: int, bound: int) -> Verdict:
    """Worst head-to-selection wait of ``tenant`` against ``bound``."""
    waits = [(e.selected - e.head, e) for e in events
             if e.tenant == tenant and e.selected is not None and e.head is not None]
    if not waits:
        return Verdict(f"tenant {tenant} head wait", 0, bound, "no grants")
    w, e = max(waits, key=lambda x: x[0])
    return Verdict(f"tenant {tenant} head wait", w, bound, f"head at {e.head}, selected {e.selected}")


# ---- virtual time and tags, cycle by cycle (spec §6.4) ------------------------------------

def _lt(a: int, b: int, bits: int) -> bool:
    """§6.1 ``tag_lt``: ``(a - b) mod 2^bits >= 2^(bits-1)``."""
    return (a - b) % (1 << bits) >= 1 << (bits - 1)


def expected_tag_state(*, tags, vt, served, vmin, vmin_valid, nonempty, winner, winner_bytes, winner_cost,
                       fabric, tag_bits, tag_shift, lag_window):
    """Registers of §6.4 at t+1 from those at t, in the spec's words:

    served' = served(s_w) after a fabric-mode winner, else 0; vmin' = tag_min over
    non-empty FIFOs (valid iff any); V' = tag_max(V + served, vmin) if vmin_valid,
    else V + served; the winner's tag becomes its finish tag; every other tag is
    raised to V (empty FIFO) or V - LAG_WINDOW (non-empty), then capped at
    V + LAG_WINDOW. Returns (tags', V', served', vmin', vmin_valid')."""
    mask = (1 << tag_bits) - 1
    tmax = lambda a, b: b if _lt(a, b, tag_bits) else a  # noqa: E731
    tmin = lambda a, b: a if not _lt(b, a, tag_bits) else b  # noqa: E731
    new_served = -(-winner_bytes // (1 << tag_shift)) if (winner is not None and fabric) else 0
    busy = [i for i, ne in enumerate(nonempty) if ne]
    if busy:
        new_vmin = tags[busy[0]]
        for i in busy[1:]:
            new_vmin = tmin(new_vmin, tags[i])
    else:
        new_vmin = 0
    new_vt = (vt + served) & mask
    if vmin_valid:
        new_vt = tmax(new_vt, vmin)
    out = []
    for i, tag in enumerate(tags):
        if fabric and i == winner:
            out.append((tag + winner_cost) & mask)
            continue
        raised = tmax(tag, vt if not nonempty[i] else (vt - lag_window) & mask)
        out.append(tmin(raised, (vt + lag_window) & mask))
    return out, new_vt, new_served, new_vmin, int(bool(busy))


def expected_winner(*, heads, levels, peaks, tags, v_prev, now, tenants, starve_limit, fcfs, tag_bits,
                    ts_bits, frac=3):
    """§6.2's winner among ``heads`` (per tenant None or (bytes, ts, cost)), in the
    spec's words; returns (tenant, kind) or None. ``tenants`` are TenantConfigs;
    ``v_prev`` is V in the previous cycle (0 in cycle 0), which eligibility uses."""
    best = None
    for i, h in enumerate(heads):
        if h is None:
            continue
        nbytes, ts, cost = h
        if fcfs:
            key = (ts,)
            if best is None or _lt(ts, best[1][0], ts_bits):
                best = (i, key, "fcfs")
            continue
        need = nbytes << frac
        # A tenant without a committed rate has no guaranteed tokens (§6.2).
        conform = tenants[i].rate != 0 and levels[i] >= need and peaks[i] >= need
        burst_ok = peaks[i] >= need
        old = not _lt((now - starve_limit) % (1 << ts_bits), ts, ts_bits)  # ts_le(ts, now - H)
        if conform and starve_limit != 0 and old:
            cls = 0
        elif conform:
            cls = 1 + tenants[i].priority
        elif burst_ok:
            cls = 5
        else:
            continue
        eligible = not _lt(v_prev, tags[i], tag_bits)  # tag_le(tag, V at t-1)
        finish = (tags[i] + cost) % (1 << tag_bits)
        key = (cls, eligible, finish, ts)
        if best is None or _precedes(key, best[1], tag_bits, ts_bits):
            best = (i, key, "urgent" if cls == 0 else "guaranteed" if cls <= 4 else "burst")
    return None if best is None else (best[0], best[2])


def _precedes(a, b, tag_bits, ts_bits) -> bool:
    """Key a strictly before key b (§6.2 rules 1-2; rule 3, the lower index, is the
    caller's scan order)."""
    if a[0] != b[0]:
        return a[0] < b[0]
    if a[0] == 0:
        return _lt(a[3], b[3], ts_bits)
    if a[1] != b[1]:
        return a[1]
    return _lt(a[2], b[2], tag_bits)


# ---- adapters ------------------------------------------------------------------------------

KIND_BY_CODE = {0: "guaranteed", 1: "burst", 2: "fcfs", 3: "urgent"}  # spec §2 grant kinds


def from_records(records, *, every: bool = False) -> list[Event]:
    """Events of ``kvfabric.model.harness`` records, in transfer order: the
    transferred ones, or with ``every`` all accepted ones (untransferred last)."""
    if every:
        out = [Event(r.tenant, r.bytes, KIND_BY_CODE.get(r.kind, "none"), r.arrival, r.accepted, r.head,
                     r.selected if r.selected is not None else 10**12, r.transferred)
               for r in records if r.accepted is not None]
        return sorted(out, key=lambda e: e.selected)
    out = [Event(r.tenant, r.bytes, KIND_BY_CODE[r.kind], r.arrival, r.accepted, r.head, r.selected,
                 r.transferred)
           for r in records if r.transferred is not None]
    return sorted(out, key=lambda e: (e.transferred, e.selected))


def from_grant_log(rows, channel: int | None = None) -> list[Event]:
    """Events of a replay grant log (``LogRow``: grant_cycle is the transfer cycle, §8)."""
    out = [Event(r.tenant, r.bytes, r.kind, r.arrival_cycle, transferred=r.grant_cycle)
           for r in rows if r.grant_cycle is not None and (channel is None or r.channel == channel)]
    return sorted(out, key=lambda e: e.transferred)
