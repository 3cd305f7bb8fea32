"""Per-tenant selection keys and next-state candidates of a channel (spec
§6.2-§6.4, §6.6, timing structure §11).

Each tenant's ``key_*`` registers hold its current head's selection key; in
every cycle :func:`tenant_candidates` computes, from registers only, the
tenant's next bucket levels and tag if it wins or not (§6.3, §6.4) and next
cycle's key for both outcomes (the head kept or popped), so that
:class:`kvfabric.hw.channel.ChannelArbiter`'s winner only chooses. One
function per spec rule: :func:`bucket_update` (§6.3), :func:`tag_clamp`
(§6.4), :func:`next_key` (§6.2), :func:`credit_class` (§6.6).
"""

from dataclasses import dataclass

from amaranth.hdl import C, Cat, Mux, Signal, Value

from kvfabric.spec import (ARRIVAL_PRIO_BITS, BULK_PRIO_BITS, CREDIT_BURST, CREDIT_CLASSES, CREDIT_GUARANTEED,
                           CREDIT_URGENT)

__all__ = ["ChannelTiming", "TenantCandidates", "tenant_candidates", "mod_lt", "shift_lag", "lt_logic",
           "or_all"]


def mod_lt(a, b, bits):
    """``((a - b) mod 2^bits) >= 2^(bits-1)`` (spec §6.1) for unsigned ``a``, ``b``."""
    # The low bits of the (signed) difference are the modular difference.
    return (a - b)[bits - 1]


@dataclass
class ChannelTiming:
    """Per-channel values every tenant's candidates read (spec §6.4, §11)."""

    vt: Signal
    vt_lo: Signal
    vt_hi: Signal
    fcfs: Signal
    fcfs_next: Signal
    starve_on_next: Signal
    now_next: Signal
    starve_limit_next: Signal
    #: Sums of three or more operands and their comparisons as carry-save
    #: trees and one carry chain (the ASIC form, issue #42); False: as chains
    #: of additions (the FPGA form, cheaper in ECP5 LUTs). Same values.
    carry_save: bool = True


@dataclass
class TenantCandidates:
    """One tenant's registered selection key and every next-state candidate.

    Field names follow the RTL signal names (``key_*_<i>``, ``lvl_win_<i>``,
    ...). ``key_next_keep``/``key_next_pop`` are the register inputs of the
    ``key_*`` registers for the two outcomes of this cycle's selection.
    """

    head_valid: object
    head: object
    key_competes: Signal
    key_class: Signal
    key_order: Signal
    key_conform: Signal
    key_finish: Signal
    key_credit: Signal
    key_bulk: Signal
    lvl_win: Signal
    lvl_idle: Signal
    pk_win: Signal
    pk_idle: Signal
    tag_idle: Signal
    key_next_keep: tuple
    key_next_pop: tuple


def tenant_candidates(m, p, i, timing, *, cfg, q, push_cost, level, peak, tag, burst_level, priority_next,
                       guaranteed_next, bulk_prio_next, arrival_prio_next, fill):
    """Tenant i's selection key registers and, from registers only, its next
    state for both outcomes of the selection (spec §6.3-§6.4, §11): the
    bucket levels and tag if it wins or not, and next cycle's key if its
    head is kept or popped. ``fill``: the tenant is enabled in this cycle,
    so its buckets are full at t+1 whatever happens (spec §6.3).
    ``guaranteed_next``: its committed rate is not 0 in the next cycle;
    without one no head conforms, however full the bucket (spec §6.2).
    ``push_cost``: the pushed request's cost as ``(floor, up)``
    (:func:`hw.ingress.cost_parts`), for the heads that are the pushed one:
    each sum takes ``up`` as its carry-in instead of the rounded cost."""
    T = p.tag_bits
    W = max(T, p.ts_bits)
    vt, vt_lo, vt_hi = timing.vt, timing.vt_lo, timing.vt_hi
    fcfs, fcfs_next = timing.fcfs, timing.fcfs_next
    starve_on_next = timing.starve_on_next
    cs = timing.carry_save
    deadline_next = (timing.now_next, timing.starve_limit_next)
    head = q.r_data
    k_comp = Signal(name=f"key_competes_{i}")
    k_key = Signal(4, name=f"key_class_{i}", init=15)
    k_order = Signal(W, name=f"key_order_{i}")
    k_conf = Signal(name=f"key_conform_{i}")
    k_credit = Signal(CREDIT_CLASSES, name=f"key_credit_{i}")
    # Next cycle's priority is marked in next cycle's bulk_prio, and in its
    # arrival_prio: the same for the kept and the popped head.
    bulk_next = _priority_marked(m, f"bulk_next_{i}", priority_next, bulk_prio_next, BULK_PRIO_BITS)
    arrival_next = _priority_marked(m, f"arrival_next_{i}", priority_next, arrival_prio_next, ARRIVAL_PRIO_BITS)
    # Whether the tenant is bulk in this cycle, for the bulk run (spec §6.2):
    # a register like the key, whatever the head.
    k_bulk = Signal(name=f"key_bulk_{i}")
    m.d.sync += k_bulk.eq(bulk_next)
    need = Signal(p.peak_bits, name=f"need_{i}")
    # The head's finish tag, tag + cost, precomputed like the key.
    s_fin = Signal(T, name=f"key_finish_{i}")
    m.d.comb += need.eq(head.bytes << p.frac)

    # Next-state candidates, all from registers, in parallel with selection.
    buckets = bucket_update(m, p, i, cfg=cfg, level=level, peak=peak, need=need, conform=k_conf,
                             burst_level=burst_level, fill=fill, carry_save=timing.carry_save)
    cap = cfg.capacity
    clamp = tag_clamp(m, p, i, tag=tag, vt=vt, vt_lo=vt_lo, vt_hi=vt_hi, backlogged=q.r_rdy)
    ti, elig_ti = clamp.tag, clamp.eligible

    # The key of the next cycle's head, for both outcomes of this
    # cycle's selection. Bucket tests use min(a, cap) >= n <=> a >= n
    # and cap >= n, so no comparison waits for a min(). Full buckets
    # (``fill``) cover any head the capacity covers (PCAP covers LMAX).
    keep_head = Signal.like(head, name=f"keep_head_{i}")
    m.d.comb += keep_head.eq(Mux(q.r_rdy, head, q.w_data))
    keep_need = Signal(p.peak_bits, name=f"keep_need_{i}")
    m.d.comb += keep_need.eq(keep_head.bytes << p.frac)
    # Finish tag of the kept head: the clamp's choice made after the
    # additions (V + cost shifted by LAG_WINDOW for the bounds).
    w_floor, w_up = push_cost
    keep_cost = Signal.like(keep_head.cost, name=f"keep_cost_floor_{i}")
    keep_up = Signal(name=f"keep_cost_up_{i}")
    m.d.comb += [keep_cost.eq(Mux(q.r_rdy, head.cost, w_floor)), keep_up.eq(~q.r_rdy & w_up)]
    keep_fin = clamped_plus(m, p, f"keep_{i}", clamp, tag=tag, vt=vt, vt_lo=vt_lo, vt_hi=vt_hi, cost=keep_cost,
                            backlogged=q.r_rdy, cost_up=keep_up)
    keep = next_key(
        m, p, f"keep_{i}",
        valid=q.r_rdy | q.w_en, head=keep_head,
        level_ok=(fill | ge_sum_wide(m, f"keep_level_ok_{i}", level, [cfg.rate], [keep_need], carry_save=cs))
        & _ge(cap, keep_need) & guaranteed_next,
        peak_ok=fill | ge_sum(m, f"keep_peak_ok_{i}", [peak, cfg.peak_rate], [keep_need], carry_save=cs),
        eligible=elig_ti, finish=keep_fin, deadline_next=deadline_next,
        fcfs_next=fcfs_next, starve_on_next=starve_on_next,
        priority_next=priority_next, bulk_next=bulk_next, arrival_next=arrival_next, carry_save=cs)

    # After a pop: the committed bucket is debited only by a
    # guaranteed fabric-mode grant (level + rate - need >= 0 then),
    # spent by a burst one, the peak bucket debited by any fabric-mode
    # grant (peak + peak_rate - need >= 0 then), nothing in FCFS mode.
    pop_head = q.pop_data
    # The head after a pop is the pushed request unless the ring holds one.
    pop_cost = Signal.like(pop_head.cost, name=f"pop_cost_floor_{i}")
    pop_up = Signal(name=f"pop_cost_up_{i}")
    m.d.comb += [pop_cost.eq(Mux(q.level >= 2, pop_head.cost, w_floor)), pop_up.eq((q.level < 2) & w_up)]
    pop_need = Signal(p.peak_bits, name=f"pop_need_{i}")
    m.d.comb += pop_need.eq(pop_head.bytes << p.frac)
    pop_cap_ok = _ge(cap, pop_need)
    # Each test compares pop_need with a sum of registers directly (ge_sum):
    # level + rate (fcfs: not debited), level + rate - need (a guaranteed
    # grant, whose level covered need), peak + peak_rate (- need).
    # After a burst grant the level is burst_level = min(rate, cap), and
    # min(rate, cap) >= pop_need is rate >= pop_need and cap >= pop_need: two
    # comparisons beside each other, not the top's min() and then one (issue
    # #42: capacity -> burst_level -> this test was the keys' longest path).
    # Every outcome needs cap >= pop_need, so it is taken once, last.
    pop_level_ok = pop_cap_ok & (fill | Mux(
        fcfs, ge_sum_wide(m, f"pop_level_ok_i_{i}", level, [cfg.rate], [pop_need], carry_save=cs),
        Mux(k_conf, ge_sum_wide(m, f"pop_level_ok_g_{i}", level, [cfg.rate], [need, pop_need], carry_save=cs),
            _ge(cfg.rate, pop_need))))
    pop_peak_ok = fill | Mux(fcfs, ge_sum(m, f"pop_peak_ok_i_{i}", [peak, cfg.peak_rate], [pop_need], carry_save=cs),
                             ge_sum(m, f"pop_peak_ok_w_{i}", [peak, cfg.peak_rate], [need, pop_need], carry_save=cs))
    # The next head's finish tag: its start tag (the finish tag of a
    # fabric-mode winner, the clamped tag in FCFS mode) plus its cost, the
    # clamp's choice made after the additions like the kept head's, so no
    # adder waits for the clamp.
    pop_fin = Signal(T, name=f"pop_finish_{i}")
    pop_fin_fab = Signal(T, name=f"pop_finish_fab_{i}")
    elig_fin = Signal(name=f"eligible_finish_{i}")
    m.d.comb += elig_fin.eq(~mod_lt(vt, s_fin, T))
    pop_fin_fcfs = clamped_plus(m, p, f"pop_{i}", clamp, tag=tag, vt=vt, vt_lo=vt_lo, vt_hi=vt_hi, cost=pop_cost,
                                backlogged=q.r_rdy, cost_up=pop_up)
    # The fabric-mode sum for the ring's entry (its cost is rounded already)
    # and for the pushed one (floor and carry-in) apart, chosen after the
    # adders: the queue's count and the ring's read stay off the carry chain
    # (issue #42: ring read -> pop_cost multiplexer -> two adders in a row
    # was the channel's longest path).
    fin_ring = Signal(T, name=f"pop_finish_ring_{i}")
    fin_push = Signal(T, name=f"pop_finish_push_{i}")
    m.d.comb += [
        fin_ring.eq(s_fin + q.ring_data.cost),
        fin_push.eq(sum_mod(m, f"pop_finish_push_sum_{i}", [s_fin, w_floor], [], T, ones=[w_up],
                            carry_save=cs)),
        pop_fin_fab.eq(Mux(q.level >= 2, fin_ring, fin_push)),
        pop_fin.eq(Mux(fcfs, pop_fin_fcfs, pop_fin_fab)),
    ]
    won = next_key(
        m, p, f"pop_{i}",
        valid=(q.level >= 2) | q.w_en, head=pop_head,
        level_ok=pop_level_ok & guaranteed_next, peak_ok=pop_peak_ok,
        eligible=Mux(fcfs, elig_ti, elig_fin), finish=pop_fin, deadline_next=deadline_next,
        fcfs_next=fcfs_next, starve_on_next=starve_on_next,
        priority_next=priority_next, bulk_next=bulk_next, arrival_next=arrival_next, carry_save=cs)

    return TenantCandidates(
        head_valid=q.r_rdy, head=head, key_competes=k_comp, key_class=k_key, key_order=k_order,
        key_conform=k_conf, key_finish=s_fin, key_credit=k_credit, key_bulk=k_bulk, lvl_win=buckets.level_win,
        lvl_idle=buckets.level_idle, pk_win=buckets.peak_win, pk_idle=buckets.peak_idle,
        tag_idle=ti, key_next_keep=keep, key_next_pop=won)


def bucket_update(m, p, i, *, cfg, level, peak, need, conform, burst_level, fill, carry_save=True):
    """Spec §6.3 for tenant i, from registers only: the committed and peak
    levels at t+1 if it wins (``win``) and if not (``idle``), and the sums
    the next keys' bucket tests read (``need`` is the head's ``s << FRAC``,
    ``conform`` its registered class, so a burst grant spends the committed
    tokens, B_i = 0). ``fill`` (the tenant is enabled in this cycle) makes
    both outcomes full buckets, so the choice stays off the winner's path."""
    # level - need is only used when the head conforms (level >= need),
    # peak - need only when it is burst_ok (peak >= need).
    # Sum widths: the larger operand plus a carry (peak_rate is wider
    # than the peak level when LMAX < 4096).
    lsum_bits = max(p.level_bits, p.rate_bits) + 1
    psum_bits = max(p.peak_bits, p.peak_rate_bits) + 1
    s_li = Signal(lsum_bits, name=f"lvl_sum_i_{i}")
    s_pi = Signal(psum_bits, name=f"pk_sum_i_{i}")
    m.d.comb += [
        s_li.eq(level + cfg.rate),
        s_pi.eq(peak + cfg.peak_rate),
    ]
    # The debited sums and every comparison with the capacity are one
    # carry-save tree and one carry chain each (sum_mod, ge_sum), in
    # parallel with the sums above instead of behind them.
    s_lw_g = sum_mod(m, f"lvl_sum_g_{i}", [level, cfg.rate], [need], lsum_bits, carry_save=carry_save)
    s_pw = sum_mod(m, f"pk_sum_w_{i}", [peak, cfg.peak_rate], [need], psum_bits, carry_save=carry_save)
    cap = cfg.capacity
    # level + rate < cap, and level + rate - need < cap (the latter used only
    # for a conforming head, whose level covers need).
    li_below = ~ge_sum(m, f"lvl_sum_i_ge_cap_{i}", [level, cfg.rate], [cap], carry_save=carry_save)
    lw_below = ~ge_sum(m, f"lvl_sum_g_ge_cap_{i}", [level, cfg.rate], [need, cap], carry_save=carry_save)
    lw = Signal(p.level_bits, name=f"lvl_win_{i}")
    li = Signal(p.level_bits, name=f"lvl_idle_{i}")
    pw = Signal(p.peak_bits, name=f"pk_win_{i}")
    pi_ = Signal(p.peak_bits, name=f"pk_idle_{i}")
    # Each comparison with a cap (the latest input) is one select of one
    # multiplexer, whose other input is ready before it (issue #42: the
    # comparison ran through the fill and conform multiplexers behind it).
    # min(s, PCAP) for the power of two PCAP (spec §1): s's bits from
    # PCAP's up are an OR, not a comparison.
    k = p.pcap.bit_length() - 1
    assert p.pcap == 1 << k
    m.d.comb += [
        li.eq(Mux(~fill & li_below, s_li, cap)),
        pw.eq(Mux(fill | s_pw[k:].any(), p.pcap, s_pw)),
        pi_.eq(Mux(fill | s_pi[k:].any(), p.pcap, s_pi)),
        # A burst grant spends the committed tokens (B_i = 0).
        lw.eq(Mux(conform & ~fill & lw_below, s_lw_g, Mux(conform | fill, cap, burst_level))),
    ]
    return BucketUpdate(level_sum=s_li, level_sum_debited=s_lw_g, peak_sum=s_pi, peak_sum_debited=s_pw,
                         level_win=lw, level_idle=li, peak_win=pw, peak_idle=pi_)


@dataclass
class BucketUpdate:
    """Tenant i's bucket candidates (spec §6.3): ``level + rate``, that less
    the head (``debited``), the same for the peak bucket, and the capped next
    levels if it wins or not."""

    level_sum: Signal
    level_sum_debited: Signal
    peak_sum: Signal
    peak_sum_debited: Signal
    level_win: Signal
    level_idle: Signal
    peak_win: Signal
    peak_idle: Signal


def tag_clamp(m, p, i, *, tag, vt, vt_lo, vt_hi, backlogged):
    """Spec §6.4's tag of a tenant that does not win: empty queue -> max(tag, V),
    backlogged -> max(tag, V - LAG_WINDOW); then min(., V + LAG_WINDOW); and
    whether that tag is eligible against V at t (spec §6.2)."""
    T = p.tag_bits
    # Written as parallel comparisons of tag with fixed bounds: a
    # raised tag (the floor) never exceeds the ceiling, because the
    # floor is V or V - LAG_WINDOW and the ceiling V + LAG_WINDOW,
    # less than the half range above it. All three comparisons come
    # from one subtraction (lag_position).
    below = Signal(name=f"tag_below_floor_{i}")
    above = Signal(name=f"tag_above_ceiling_{i}")
    floor_ = Signal(T, name=f"tag_floor_{i}")
    ti = Signal(T, name=f"tag_idle_{i}")
    lt_vt, lt_vt_lo, gt_vt_hi, vt_lt = lag_position(m, tag, vt, T, f"tag_{i}")
    m.d.comb += [
        below.eq(Mux(backlogged, lt_vt_lo, lt_vt)),
        above.eq(~below & gt_vt_hi),
        floor_.eq(Mux(backlogged, vt_lo, vt)),
        ti.eq(Mux(below, floor_, Mux(above, vt_hi, tag))),
    ]
    # Eligibility of the clamped tag against V at t (spec §6.2: V one cycle
    # old at t+1): a floor (V or V - LAG_WINDOW) is at most V, the ceiling
    # V + LAG_WINDOW is above it, and a tag in between is eligible unless
    # tag_lt(V, tag), which the clamp's subtraction already gives.
    elig_ti = Signal(name=f"eligible_tag_idle_{i}")
    m.d.comb += elig_ti.eq(below | (~above & ~vt_lt))
    return TagClamp(below=below, above=above, tag=ti, eligible=elig_ti)


def clamped_plus(m, p, sfx, clamp, *, tag, vt, vt_lo, vt_hi, cost, backlogged, cost_up=0):
    """``(clamped tag + cost + cost_up) mod 2^T`` (spec §6.4's clamp, then a
    head's cost, ``cost_up`` a carry-in: see :func:`hw.ingress.cost_parts`):
    both sums ``tag + cost`` and ``V + cost`` first, and the clamp's
    bound chosen after them, so the adders run beside the clamp's comparison
    instead of behind it. ``clamp`` is the :class:`TagClamp` of ``tag``;
    ``vt_lo``, ``vt_hi`` are ``V ∓ LAG_WINDOW`` (:func:`shift_lag`).

    ``V ∓ LAG_WINDOW + cost`` differ from ``V + cost`` in their top three
    bits only: the low bits' sum and its carry are shared, and each top is a
    3-bit sum of its own bound's top bits, the cost's and that carry, so no
    increment follows the carry chain (issue #42)."""
    T = p.tag_bits
    low = T - 3
    cost = Value.cast(cost)
    lo_sum = Signal(low + 1, name=f"{sfx}_vt_cost_low")
    t_cost = Signal(T, name=f"{sfx}_tag_cost")
    out = Signal(T, name=f"{sfx}_clamped_finish")
    m.d.comb += [
        lo_sum.eq(vt[:low] + cost[:low] + cost_up),
        t_cost.eq(tag + cost + cost_up),
    ]
    cost_top = cost[low:] if len(cost) > low else C(0, 1)

    def plus(bound, name):
        top = Signal(3, name=f"{sfx}_{name}_cost_top")
        m.d.comb += top.eq(bound[low:] + cost_top + lo_sum[low])
        return Cat(lo_sum[:low], top)

    v_cost, v_lo, v_hi = plus(vt, "vt"), plus(vt_lo, "vt_lo"), plus(vt_hi, "vt_hi")
    m.d.comb += out.eq(Mux(clamp.below, Mux(backlogged, v_lo, v_cost), Mux(clamp.above, v_hi, t_cost)))
    return out


@dataclass
class TagClamp:
    """Tenant i's clamped tag (spec §6.4) and which bound acted."""

    below: Signal
    above: Signal
    tag: Signal
    eligible: Signal


def _priority_marked(m, name, priority, mask, bits):
    """A signal: bit ``priority`` of the per-priority ``mask`` is set."""
    marked = Signal(name=name)
    m.d.comb += marked.eq(or_all((priority == prio) & mask[prio] for prio in range(bits)))
    return marked


def next_key(m, p, sfx, *, valid, head, level_ok, peak_ok, eligible, finish, deadline_next,
              fcfs_next, starve_on_next, priority_next, bulk_next, arrival_next, carry_save=True):
    """Selection key of a head in the next cycle (spec §6.2, evaluated one cycle early).

    ``valid``: the tenant has a head next cycle; ``head``: that head;
    ``level_ok``/``peak_ok``: next cycle's committed/peak level covers it;
    ``eligible``: next cycle's start tag is at most this cycle's V (spec §6.2);
    ``finish``: next cycle's start tag plus the head's cost;
    ``deadline_next``: next cycle's ``(now, starve_limit)``, whose
    difference is the starvation deadline; ``arrival_next``:
    next cycle's priority is marked in ``arrival_prio``. Returns the
    register inputs ``(competes, key, order, conform, finish, credit)`` in
    the order of the ``key_*`` registers; ``credit`` is the head's credit
    class one-hot (spec §6.6: urgent; guaranteed, or burst when ``bulk_next``
    says its priority is marked in ``bulk_prio``; burst), all clear in FCFS
    mode.
    """
    T, W = p.tag_bits, max(p.tag_bits, p.ts_bits)
    conf = Signal(name=f"conform_{sfx}")
    old = Signal(name=f"old_{sfx}")
    comp = Signal(name=f"competes_{sfx}")
    key = Signal(4, name=f"key_{sfx}")
    order = Signal(W, name=f"order_{sfx}")
    credit = Signal(CREDIT_CLASSES, name=f"credit_{sfx}")
    m.d.comb += [
        conf.eq(peak_ok & level_ok),
        # old: ts_le(ts, now - starve_limit), the top bit of
        # (now - starve_limit - ts) mod 2^TS_BITS clear: one carry-save
        # level and one carry chain from the registers, not a subtraction
        # and then a comparison (spec §6.2, issue #42).
        old.eq(~sum_mod(m, f"deadline_minus_ts_{sfx}", [deadline_next[0]],
                        [deadline_next[1], head.ts], p.ts_bits, carry_save=carry_save)[p.ts_bits - 1]),
        comp.eq(valid & (fcfs_next | peak_ok)),
    ]
    # The bucket tests (a carry-save tree and a carry chain each) are the
    # latest inputs: the key, order value and credit class are computed for
    # each of their three outcomes (peak bucket short; peak covers, level
    # short; both cover) from the earlier inputs, and the tests only choose
    # among them, one multiplexer level in front of the registers (issue #42:
    # rate -> key_order and key_class ran through the class logic behind the
    # tests). The same values as the rule written once.
    fields = {}
    for case, (pk, lv) in {"short": (0, 0), "burst": (1, 0), "conform": (1, 1)}.items():
        fields[case] = _key_for(m, f"{sfx}_{case}", conf=C(pk & lv, 1), comp=valid & (fcfs_next | pk),
                                eligible=eligible, old=old, fcfs_next=fcfs_next,
                                starve_on_next=starve_on_next, priority_next=priority_next, bulk_next=bulk_next,
                                arrival_next=arrival_next)
    for k, out in ((0, key), (2, credit)):
        m.d.comb += out.eq(Mux(peak_ok, Mux(level_ok, fields["conform"][k], fields["burst"][k]),
                               fields["short"][k]))
    # The order value: the timestamp or the finish tag (an adder's output,
    # as late as the tests), one multiplexer whose select the tests choose.
    # Both are shifted to a common width W so that the W-bit modular
    # comparison equals the T- or TS_BITS-bit one (the low bits are zero on
    # both sides); keys are only compared by order when equal, so both sides
    # then hold the same kind (spec §11): a class 1 + p key holds
    # arrival-ordered heads only or WF2Q+ ones only.
    m.d.comb += order.eq(Mux(Mux(conf, fields["conform"][1], fields["short"][1]),
                             head.ts << (W - p.ts_bits), finish << (W - T)))
    return comp, key, order, conf, finish, credit


def _key_for(m, sfx, *, conf, comp, eligible, old, fcfs_next, starve_on_next, priority_next,
             bulk_next, arrival_next):
    """:func:`next_key`'s key, whether the order value is the timestamp, and
    the credit class of a head for one outcome of its bucket tests (``conf``,
    a constant; ``comp``: it competes): spec §6.2's classes and §6.6's credit
    class."""
    urg = Signal(name=f"urgent_{sfx}")
    key0 = Signal(name=f"key0_{sfx}")
    arr = Signal(name=f"arrival_{sfx}")
    key = Signal(4, name=f"key_{sfx}")
    # The order value is the timestamp when key0 | arr: fcfs_next | arr, or
    # a conforming head under the guard that is old.
    ts_order = Signal(name=f"ts_order_{sfx}")
    m.d.comb += ts_order.eq((fcfs_next | arr) | ((conf & starve_on_next) & old))
    m.d.comb += [
        urg.eq(conf & starve_on_next & old),
        # Class 0 (urgent, or every head in FCFS mode) orders by timestamp,
        # and so does a conforming head of a priority marked in arrival_prio.
        key0.eq(fcfs_next | urg),
        arr.eq(conf & arrival_next),
    ]
    # Selection key: class, eligibility and "competes" folded into one
    # 4-bit number so that a pair compares one small key plus one order
    # bit. 0 = urgent (or FCFS mode: oldest first), then 2*class +
    # ineligible for classes 1..5 (2..11), 15 = does not compete.
    with m.If(~comp):
        m.d.comb += key.eq(15)
    with m.Elif(key0):
        m.d.comb += key.eq(0)
    with m.Elif(conf):
        # Arrival-ordered heads do not split by eligibility (spec §6.2).
        m.d.comb += key.eq(Cat(~eligible & ~arr, priority_next + 1))
    with m.Else():
        m.d.comb += key.eq(Cat(~eligible, C(5, 3)))
    credit = credit_class(m, sfx, fcfs=fcfs_next, urgent=key0, conform=conf, bulk=bulk_next,
                          arrival=arrival_next)
    return key, ts_order, credit


def credit_class(m, sfx, *, fcfs, urgent, conform, bulk, arrival):
    """Spec §6.6's credit class of a competing head, one-hot (bit k = class
    k): urgent for an urgent head; guaranteed for a conforming one unless its
    priority is marked in ``bulk_prio`` (``bulk``), and for a burst one whose
    priority is marked in ``arrival_prio`` (``arrival``) and not in
    ``bulk_prio``; burst otherwise; none in FCFS mode, where credits are
    neither checked nor counted. The RTL's one place for the rule that
    :func:`kvfabric.spec.credit_class` states for the model."""
    credit = Signal(CREDIT_CLASSES, name=f"credit_{sfx}")
    with m.If(fcfs):
        m.d.comb += credit.eq(0)
    with m.Elif(urgent):
        m.d.comb += credit.eq(1 << CREDIT_URGENT)
    with m.Elif(~bulk & (conform | arrival)):
        m.d.comb += credit.eq(1 << CREDIT_GUARANTEED)
    with m.Else():
        m.d.comb += credit.eq(1 << CREDIT_BURST)
    return credit


def shift_lag(x, sign):
    """``(x ± LAG_WINDOW) mod 2^T`` with ``LAG_WINDOW = 2^(T-3)``: only the
    top three bits change, so the low bits are wired through. Written so for
    clarity: flattened ECP5 synthesis already trimmed the T-bit form (17 LUT4s
    apart for one channel, issue #6)."""
    low = len(x) - 3
    return Cat(x[:low], (x[low:] + sign)[:3])


def lag_position(m, tag, vt, bits, sfx):
    """``tag_lt(tag, V)``, ``tag_lt(tag, V - W)``, ``tag_lt(V + W, tag)``
    for ``W = LAG_WINDOW = 2^(bits-3)`` (spec §6.4's clamp bounds) and
    ``tag_lt(V, tag)`` (eligibility, §6.2), from one subtraction.

    With ``d = (tag - V) mod 2^bits``: ``tag_lt(tag, V)`` is d's top bit;
    ``tag - (V - W) = d + W`` only adds to d's top three bits ``t``, so its
    top bit is a function of ``t``; ``(V + W) - tag = W - d`` is ``-d`` with
    ``W`` added, and the top three bits of ``-d`` are ``-t`` when d's low
    bits are zero (``tag`` and ``V`` agree below bit ``bits - 3``) and
    ``~t`` otherwise. The two small functions cost a LUT each instead of a
    comparator each.
    """
    low = bits - 3
    diff = Signal(bits, name=f"{sfx}_minus_vt")
    top = Signal(3, name=f"{sfx}_minus_vt_top")
    low_equal = Signal(name=f"{sfx}_low_equals_vt")
    neg_top = Signal(3, name=f"{sfx}_vt_minus_top")
    lt_v, lt_lo, gt_hi, v_lt = (Signal(name=f"{sfx}_{n}")
                                for n in ("lt_vt", "lt_vt_lo", "gt_vt_hi", "vt_lt"))
    m.d.comb += [
        diff.eq(tag - vt),
        top.eq(diff[low:]),
        low_equal.eq(tag[:low] == vt[:low]),
        neg_top.eq(Mux(low_equal, -top, ~top)),
        lt_v.eq(diff[bits - 1]),
        lt_lo.eq((top + 1)[2]),
        gt_hi.eq((neg_top + 1)[2]),
        # (V - tag) mod 2^bits = -d: its top bit is neg_top's.
        v_lt.eq(neg_top[2]),
    ]
    return lt_v, lt_lo, gt_hi, v_lt


def _extend(m, name, value, width):
    """``value`` zero-extended (or truncated) to ``width`` bits, as a named signal."""
    out = Signal(width, name=name)
    m.d.comb += out.eq(value)
    return out


def sum_mod(m, name, pos, neg, width, ones=(), *, carry_save=True):
    """``(sum(pos) - sum(neg) + sum(ones)) mod 2^width`` of unsigned values
    (``ones``: one-bit values): a carry-save tree of the operands (``-x =
    ~x + 1``) and one carry-propagate adder, so that three or four operands
    cost one carry chain, not one chain each (issue #42: the bucket sums and
    their comparisons were three chains in a row). Exact: the same integer as
    the chain of additions.

    The one-bit addends (the negations' 1s among them) cost no row of the
    tree: each takes bit 0 of a row's carry vector, which the shift leaves
    free, or the final adder's carry-in (a row against a constant 1 would
    cost two gates per bit and a level: Yosys does not fold it). The first
    ones take the first rows; there must be no more of ``ones`` than rows
    plus one.

    ``carry_save=False`` writes the same sum as a chain of additions and
    subtractions (:func:`_chained`): on an FPGA with carry chains (ECP5's
    CCU2C) a chain per operand is cheaper than a full-adder layer of LUTs
    per bit, and Yosys shares the identical partial sums of several calls."""
    if not carry_save:
        out = Signal(width, name=name)
        m.d.comb += out.eq(_chained(pos, neg, ones))
        return out
    ops = [_extend(m, f"{name}_p{k}", x, width) for k, x in enumerate(pos)]
    ops += [~_extend(m, f"{name}_n{k}", x, width) for k, x in enumerate(neg)]
    bits = [Value.cast(b) for b in ones]
    # Each negation's +1 is a one-bit addend while there is room for it: a
    # row holding their sum as a constant would be a half-adder level of its
    # own in front of the carry chain (issue #42: the bucket tests' fourth
    # carry-save level). Beyond the room, one row holds the rest.
    room = max(len(ops) - 2, 0) + 1 - len(bits)
    if len(neg) <= room:
        bits += [C(1, 1)] * len(neg)
    elif neg:
        bits.append(C(1, 1))
        ops.append(C((len(neg) - 1) % (1 << width), width))
    rows = max(len(ops) - 2, 0)
    if len(bits) > rows + 1:
        raise ValueError(f"{name}: {len(bits)} one-bit addends, room for {rows + 1}")
    level = 0
    while len(ops) > 2:
        nxt = []
        for k in range(0, len(ops) - 2, 3):
            a, b, c = ops[k:k + 3]
            sm = Signal(width, name=f"{name}_s{level}_{k // 3}")
            cy = Signal(width, name=f"{name}_c{level}_{k // 3}")
            low = bits.pop(0) if bits and width > 0 else C(0, 1)
            m.d.comb += [sm.eq(a ^ b ^ c), cy.eq((((a & b) | (a & c) | (b & c)) << 1) | low)]
            nxt += [sm, cy]
        nxt += ops[len(ops) - len(ops) % 3:] if len(ops) % 3 else []
        ops = nxt
        level += 1
    out = Signal(width, name=name)
    total = ops[0] + ops[1] if len(ops) == 2 else ops[0]
    m.d.comb += out.eq(total + bits[0] if bits else total)
    return out


def ge_sum(m, name, pos, neg, *, carry_save=True):
    """``sum(pos) >= sum(neg)`` for unsigned values, as the sign of their
    difference from :func:`sum_mod` (one carry chain after a carry-save tree).
    The width holds either sum plus a sign bit, so the difference never wraps.
    ``carry_save=False``: the two sums as chains of additions and a
    comparison of them, the same bit."""
    if not carry_save:
        ge = Signal(name=name)
        m.d.comb += ge.eq(_chained(pos, []) >= _chained(neg, []))
        return ge
    bound = sum((1 << len(Value.cast(x))) - 1 for x in pos) + sum((1 << len(Value.cast(x))) - 1 for x in neg)
    width = bound.bit_length() + 1
    diff = sum_mod(m, f"{name}_diff", pos, neg, width)
    ge = Signal(name=name)
    m.d.comb += ge.eq(~diff[width - 1])
    return ge


def ge_sum_wide(m, name, wide, pos, neg, *, carry_save=True):
    """``wide + sum(pos) >= sum(neg)`` for unsigned values, where ``wide`` is
    wider than the right side can reach (the committed level, 28 bits,
    against one or two heads' sizes, 16 bits each): with ``2^k`` above the
    largest ``sum(neg)``, ``wide >= 2^k`` decides it outright, and below
    that only ``wide``'s low k bits count. So the comparison's carry chain
    spans about k bits instead of ``wide``'s width, and an OR of ``wide``'s
    high bits (registers) lies beside it (issue #42: the bucket tests'
    30-bit chains were on the next key's paths). Exact."""
    wide = Value.cast(wide)
    k = sum((1 << len(Value.cast(x))) - 1 for x in neg).bit_length()
    if len(wide) <= k:
        return ge_sum(m, name, [wide, *pos], neg, carry_save=carry_save)
    high = Signal(name=f"{name}_high")
    m.d.comb += high.eq(wide[k:].any())
    return high | ge_sum(m, name, [wide[:k], *pos], neg, carry_save=carry_save)


def _chained(pos, neg, ones=()):
    """``sum(pos) - sum(neg) + sum(ones)`` as Amaranth arithmetic (one
    adder per operand, exact: Amaranth widens every sum)."""
    acc = None
    for x in pos:
        acc = Value.cast(x) if acc is None else acc + x
    acc = C(0, 1) if acc is None else acc
    for x in neg:
        acc = acc - x
    for b in ones:
        acc = acc + b
    return acc


def _ge(big, small):
    """``big >= small`` for unsigned values where ``small`` is the narrower:
    a carry chain over the low bits and an OR of ``big``'s high bits."""
    k = len(small)
    if len(big) <= k:
        return big >= small
    return (big[k:] != 0) | (big[:k] >= small)


def lt_logic(a, b):
    """``a < b`` for short unsigned values as plain logic.

    Written bit by bit so that synthesis keeps it in LUTs: a ``<`` operator
    becomes a carry chain, whose entry and exit routing cost more than the
    two LUT levels of a 4-bit comparison.
    """
    lt = C(0, 1)
    for k in range(len(a)):
        lt = (~a[k] & b[k]) | (~(a[k] ^ b[k]) & lt)
    return lt


def _min(a, b):
    return Mux(a < b, a, b)


def or_all(values):
    acc = None
    for v in values:
        acc = v if acc is None else acc | v
    return acc
