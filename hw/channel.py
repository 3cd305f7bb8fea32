"""Per-channel arbiter core (spec §4–§6, timing structure §11).

Fairness rule
-------------
Each channel arbitrates among the heads of N per-tenant queues. A head competes
in fabric mode when its tenant's peak bucket covers it (``burst_ok``); it is
*guaranteed* when the committed bucket covers it too (``conform``), and
*urgent* when it is also older than ``starve_limit`` cycles. The winner has the
smallest key ``(class, sub-key, tenant index)`` where class 0 = urgent (sub-key
age, oldest first), 1..4 = guaranteed at priority 0..3, 5 = burst, and the
sub-key of classes 1..5 is WF2Q+ order: eligible (start tag <= the previous
cycle's V) before
ineligible, then the smaller finish tag. In FCFS-bypass mode every non-empty
queue competes and the oldest head wins. Buckets refill every cycle; the
winner's start tag becomes its finish tag; everyone else's tag is clamped to
V (empty queue) or to V - LAG_WINDOW (backlogged). V advances by the previous
grant's unweighted cost and catches up to the previous cycle's minimum start
tag (two one-cycle delays that keep V out of the selection loop).

Timing structure
----------------
Registers: per-tenant ``dyn_level``/``dyn_peak``/``dyn_tag``, the queue heads
(``q_*``: a head register in front of a LUT-RAM ring), the per-tenant
selection keys (``key_*``: competes, class/eligibility key, order value,
conform and finish tag of the current head) and the grant register. Per cycle,
in parallel:

* per pair of tenants (all pairs, no tree): "higher index strictly precedes
  lower index" from the registered keys and order values;
* per tenant: winner = it competes and no competing tenant precedes it
  (one-hot);
* per tenant, from registers only: every "if granted" and "if not granted"
  next value of the level, peak and tag, and next cycle's key for both
  outcomes (the head after a pop or the same head), under the configuration
  and V of the next cycle;
* final two-way choices selected by the one-hot winner: next state, next
  key, queue pops, grant register.

V, served and vmin are per-channel registers updated from registers only.

Memory-side credits (spec §6.6): per channel ``inflight_k`` for the credit
classes k = 0 urgent, 1 guaranteed, 2 burst. ``has_credit[k]`` is a register
(computed a cycle early from ``inflight_k`` and the next ``CREDITS`` limits)
and each head's credit class a one-hot register beside its key, so credits
enter the selection loop as one gate per pair term: a head whose credit
class lacks credit neither wins nor keeps another head from winning. The key
registers are not changed by credits.

Naming (the state-budget script counts flip-flops by name): per-tenant dynamic
state is exactly ``dyn_level_i``, ``dyn_peak_i``, ``dyn_tag_i``; queue storage
and the ingress register are ``q_*``; per-channel registers are ``vt``,
``served``, ``vmin``, ``vmin_valid``, ``grant_*`` and ``inflight_*``;
selection keys are ``key_*`` (derived state, spec §11).
"""

from dataclasses import dataclass

from amaranth.hdl import C, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .fifo import HeadQueue
from .ingress import Ingress
from .layouts import Kind, grant_signature, queue_entry_layout, request_signature, tenant_config_layout
from kvfabric.spec import (BULK_PRIO_BITS, CREDIT_BITS, CREDIT_BURST, CREDIT_CLASSES, CREDIT_GUARANTEED,
                           CREDIT_URGENT, check_params)

from .checks import ChannelView, channel_checks, check_names

__all__ = ["ChannelArbiter", "mod_lt"]


def mod_lt(a, b, bits):
    """``((a - b) mod 2^bits) >= 2^(bits-1)`` (spec §6.1) for unsigned ``a``, ``b``."""
    # The low bits of the (signed) difference are the modular difference.
    return (a - b)[bits - 1]


class ChannelArbiter(wiring.Component):
    """One arbitration channel: ingress, N queues, selection, buckets, tags, V.

    Parameters
    ----------
    params : FabricParams
    checks : bool or iterable of str
        Safety properties (:mod:`kvfabric.hw.checks`) to add as ``Assert``
        statements: ``True`` for all of them. Simulation tests and formal
        proofs turn them on; Verilog for synthesis leaves them out.

    Members
    -------
    req : In(request_signature(params))
        Request stream (sink). ``ready`` depends on the payload's tenant (§4).
    grant : Out(grant_signature(params))
        Grant stream (source), driven by the grant register.
    grant_ts : Out(ts_bits)
        Arrival timestamp of the request in the grant register (for SLO telemetry).
    queue_full : Out(N)
        Bit i: tenant i's occupancy is at least D (§4).
    tenant_cfg : In(tenant_config_layout(params)).array(N)
        Active per-tenant configuration.
    burst_level : In(level_bits).array(N)
        ``min(rate_i, capacity_i)`` of the active configuration: the committed
        level after a burst grant (spec §6.3). It depends on the configuration
        only, so the top computes it once for all channels.
    fcfs_bypass : In(1)
    fcfs_bypass_next, starve_limit_next : In(1), In(23)
        The values ``fcfs_bypass`` and ``starve_limit`` have in the next cycle
        (the configuration registers' inputs): selection keys are computed
        one cycle ahead (spec §11). A ``starve_limit`` of 0 disables the
        starvation guard.
    priority_next : In(2).array(N)
        Each tenant's ``priority`` in the next cycle, for the same reason.
    now : In(ts_bits)
        Fabric-wide timestamp, ``t mod 2^TS_BITS``.
    now_next : In(ts_bits)
        ``(t + 1) mod 2^TS_BITS``, from a register of its own in the top so
        that next cycle's starvation deadline (spec §6.2) starts from a register.
    credit_limit : In(CREDIT_BITS).array(3)
        The ``CREDITS`` register's limits (urgent, guaranteed, burst) in this
        cycle; 0 = no check (spec §6.6). Read only by the safety checks: the
        arbiter reads ``credit_limit_next``.
    credit_limit_next : In(CREDIT_BITS).array(3)
        The limits in the next cycle: ``has_credit`` is a register (spec §11).
    credit_return : In(3)
        Bit k: the memory side returns one credit of class k (spec §6.6).
    bulk_prio_next : In(4)
        ``CREDITS.bulk_prio`` in the next cycle: bit p set, guaranteed heads
        and grants of priority p use the burst class's credits (spec §6.6).
        Read one cycle early because each head's credit class is registered
        with its key.
    dropped : Out(1)
        Pulse: an invalid request is accepted in this cycle.
    occupancy : Out(range(D + 1)).array(N)
        Entries in queue i plus one if the ingress register holds a request of i.

    Attributes
    ----------
    dyn_level, dyn_peak, dyn_tag : list of Signal
        Per-tenant dynamic state registers (spec §5).
    vt, served, vmin, vmin_valid : Signal
        Per-channel virtual-time registers (spec §6.4).
    inflight : list of Signal
        Per-channel credit counters ``inflight_k`` (spec §6.6).
    """

    def __init__(self, params, *, checks=False):
        self._params = check_params(params)
        self._checks = check_names(checks)
        p = params
        n = p.tenants
        super().__init__({
            "req":          In(request_signature(p)),
            "grant":        Out(grant_signature(p)),
            "grant_ts":     Out(p.ts_bits),
            "queue_full":   Out(n),
            "tenant_cfg":   In(tenant_config_layout(p)).array(n),
            "burst_level":  In(p.level_bits).array(n),
            "fcfs_bypass":  In(1),
            "fcfs_bypass_next":  In(1),
            "starve_limit_next": In(p.starve_bits),
            "now_next":     In(p.ts_bits),
            "priority_next": In(p.priority_bits).array(n),
            "now":          In(p.ts_bits),
            "credit_limit": In(CREDIT_BITS).array(CREDIT_CLASSES),
            "credit_limit_next": In(CREDIT_BITS).array(CREDIT_CLASSES),
            "credit_return": In(CREDIT_CLASSES),
            "bulk_prio_next": In(BULK_PRIO_BITS),
            "dropped":      Out(1),
            "occupancy":    Out(range(p.queue_depth + 1)).array(n),
        })
        self.dyn_level = [Signal(p.level_bits, name=f"dyn_level_{i}") for i in range(n)]
        self.dyn_peak = [Signal(p.peak_bits, name=f"dyn_peak_{i}") for i in range(n)]
        self.dyn_tag = [Signal(p.tag_bits, name=f"dyn_tag_{i}") for i in range(n)]
        self.vt = Signal(p.tag_bits, name="vt")
        self.served = Signal(p.served_bits, name="served")
        self.vmin = Signal(p.tag_bits, name="vmin")
        self.vmin_valid = Signal(name="vmin_valid")
        self.inflight = [Signal(CREDIT_BITS, name=f"inflight_{k}") for k in range(CREDIT_CLASSES)]

    @property
    def params(self):
        return self._params

    def elaborate(self, platform):
        p = self._params
        n = p.tenants
        T = p.tag_bits
        D = p.queue_depth
        m = Module()

        # ---------------------------------------------------------- ingress, queues
        m.submodules.q_ingress = ingress = Ingress(p)
        wiring.connect(m, wiring.flipped(self.req), ingress.req)
        m.d.comb += [
            ingress.now.eq(self.now),
            self.dropped.eq(ingress.dropped),
        ]
        queues = []
        for i in range(n):
            q = HeadQueue(queue_entry_layout(p), D, prefix="q")
            m.submodules[f"q_fifo_{i}"] = q
            queues.append(q)
            cfg = self.tenant_cfg[i]
            held = Signal(name=f"held_{i}")
            occ = self.occupancy[i]
            m.d.comb += [
                held.eq(ingress.push_valid & (ingress.push_tenant == i)),
                q.w_en.eq(held),
                q.w_data.eq(ingress.push_entry),
                occ.eq(q.level + held),
                ingress.room[i].eq(occ < D),
                self.queue_full[i].eq(occ >= D),
                ingress.enable[i].eq(cfg.enable),
                ingress.inv_weight[i].eq(cfg.inv_weight),
            ]

        # ---------------------------------------------------------- grant register
        g_valid = Signal(name="grant_valid")
        g_tenant = Signal(p.tenant_bits, name="grant_tenant")
        g_bytes = Signal(p.bytes_bits, name="grant_bytes")
        g_id = Signal(p.id_width, name="grant_id")
        g_kind = Signal(Kind, name="grant_kind")
        g_ts = Signal(p.ts_bits, name="grant_ts_r")
        m.d.comb += [
            self.grant.valid.eq(g_valid),
            self.grant.payload.tenant.eq(g_tenant),
            self.grant.payload.bytes.eq(g_bytes),
            self.grant.payload.id.eq(g_id),
            self.grant.payload.kind.eq(g_kind),
            self.grant_ts.eq(g_ts),
        ]
        load = Signal()
        m.d.comb += load.eq(~g_valid | self.grant.ready)

        fcfs = self.fcfs_bypass
        vt, served, vmin, vmin_valid = self.vt, self.served, self.vmin, self.vmin_valid

        # V at t+1 (spec §6.4), from registers only. Next cycle's eligibility
        # is taken against V at t (spec §6.2), so V's choice stays off the keys.
        v_sum = Signal(T, name="vt_sum")
        vt_take_min = Signal(name="vt_take_min")
        vt_next = Signal(T, name="vt_next")
        m.d.comb += [
            v_sum.eq(vt + served),
            vt_take_min.eq(vmin_valid & mod_lt(v_sum, vmin, T)),
            vt_next.eq(Mux(vt_take_min, vmin, v_sum)),
        ]
        m.d.sync += vt.eq(vt_next)

        # The clamp bounds of spec §6.4, per channel. _shift_lag and
        # _lag_position rely on LAG_WINDOW = 2^(T-3). Eligibility at t+1 is
        # taken against V at t (spec §6.2), the register itself.
        assert p.lag_window == 1 << (T - 3)
        vt_lo = Signal(T, name="vt_minus_lag")
        vt_hi = Signal(T, name="vt_plus_lag")
        m.d.comb += [vt_lo.eq(_shift_lag(vt, -1)), vt_hi.eq(_shift_lag(vt, 1))]
        fcfs_next = self.fcfs_bypass_next
        limit_next = self.starve_limit_next
        starve_on_next = Signal(name="starve_on_next")
        # A head is old at t+1 when ts_le(ts, now - starve_limit) (spec
        # §6.2): one subtraction per channel, one comparison per head.
        deadline_next = Signal(p.ts_bits, name="starve_deadline_next")
        m.d.comb += [
            starve_on_next.eq(limit_next != 0),
            deadline_next.eq(self.now_next - limit_next),
        ]

        # ---------------------------------------------------------- per tenant
        # Selection keys are registers (spec §11): ``key_*`` hold the key,
        # order value and conformance of the current head, computed in the
        # previous cycle for both outcomes of that cycle's selection.
        W = max(T, p.ts_bits)
        timing = _ChannelTiming(
            vt=vt, vt_lo=vt_lo, vt_hi=vt_hi, fcfs=fcfs, fcfs_next=fcfs_next,
            starve_on_next=starve_on_next, deadline_next=deadline_next)
        tenants = [_tenant_candidates(m, p, i, timing, cfg=self.tenant_cfg[i], q=queues[i],
                                      level=self.dyn_level[i], peak=self.dyn_peak[i], tag=self.dyn_tag[i],
                                      burst_level=self.burst_level[i], priority_next=self.priority_next[i],
                                      bulk_prio_next=self.bulk_prio_next)
                   for i in range(n)]
        hv = [t.head_valid for t in tenants]
        heads = [t.head for t in tenants]
        competes = [t.key_competes for t in tenants]
        key = [t.key_class for t in tenants]
        order = [t.key_order for t in tenants]
        conform = [t.key_conform for t in tenants]
        finish = [t.key_finish for t in tenants]
        credit = [t.key_credit for t in tenants]
        lvl_win = [t.lvl_win for t in tenants]
        lvl_idle = [t.lvl_idle for t in tenants]
        pk_win = [t.pk_win for t in tenants]
        pk_idle = [t.pk_idle for t in tenants]
        tag_idle = [t.tag_idle for t in tenants]
        key_next_keep = [t.key_next_keep for t in tenants]
        key_next_win = [t.key_next_pop for t in tenants]

        # ---------------------------------------------------------- all-pairs selection
        # first[hi][lo] (hi > lo): tenant hi strictly precedes tenant lo.
        # Within a key, class 0 orders by timestamp and the others by finish
        # tag: one comparator per pair on the order value (spec §11).
        first = {}
        for hi in range(n):
            for lo in range(hi):
                tie = Signal(name=f"tie_first_{hi}_{lo}")
                m.d.comb += tie.eq(mod_lt(order[hi], order[lo], W))
                f = Signal(name=f"first_{hi}_{lo}")
                m.d.comb += f.eq(_lt_logic(key[hi], key[lo]) | ((key[hi] == key[lo]) & tie))
                first[hi, lo] = f

        # Credits (spec §6.6): has_credit[k] is a register, computed in the
        # previous cycle for both outcomes of that cycle's count (see the
        # credit counters below); each head's credit class is a one-hot
        # register beside its key (key_credit_i: bit 0 urgent, 1 guaranteed,
        # 2 burst, all clear in FCFS mode, where credits are not checked). So
        # a head's credit test is one LUT of registers.
        has_credit = [Signal(name=f"key_has_credit_{k}", init=1) for k in range(CREDIT_CLASSES)]
        credit_ok = []
        for i in range(n):
            ok = Signal(name=f"credit_ok_{i}")
            m.d.comb += ok.eq(~(credit[i] & ~Cat(*has_credit)).any())
            credit_ok.append(ok)

        win = []
        for i in range(n):
            # A non-competing j has key 15 and comes after any competing i; a
            # j without credit precedes nobody.
            terms = [competes[i] & credit_ok[i]]
            terms += [first[i, lo] | ~credit_ok[lo] for lo in range(i)]
            terms += [~(first[hi, i] & credit_ok[hi]) for hi in range(i + 1, n)]
            w = Signal(name=f"win_{i}")
            m.d.comb += w.eq(Cat(*terms).all())
            win.append(w)
        any_win = Signal()
        m.d.comb += any_win.eq(Cat(*win).any())

        # ---------------------------------------------------------- state update
        pops, fab_wins = [], []
        for i in range(n):
            pop = Signal(name=f"pop_{i}")
            fab_win = Signal(name=f"fab_win_{i}")
            pops.append(pop)
            fab_wins.append(fab_win)
            m.d.comb += [
                pop.eq(load & win[i]),
                fab_win.eq(pop & ~fcfs),
                queues[i].r_en.eq(pop),
            ]
            # The precomputed key of the head this tenant has next cycle.
            nxt = Mux(pop, Cat(*key_next_win[i]), Cat(*key_next_keep[i]))
            m.d.sync += Cat(competes[i], key[i], order[i], conform[i], finish[i], credit[i]).eq(nxt)
            with m.If(fab_win):
                m.d.sync += [
                    self.dyn_level[i].eq(lvl_win[i]),
                    self.dyn_peak[i].eq(pk_win[i]),
                    self.dyn_tag[i].eq(finish[i]),
                ]
            with m.Else():
                m.d.sync += [
                    self.dyn_level[i].eq(lvl_idle[i]),
                    self.dyn_peak[i].eq(pk_idle[i]),
                    self.dyn_tag[i].eq(tag_idle[i]),
                ]

        # Grant register: one-hot AND-OR mux of the heads.
        w_bytes = Signal(p.bytes_bits)
        w_id = Signal(p.id_width)
        w_ts = Signal(p.ts_bits)
        w_tenant = Signal(p.tenant_bits)
        w_conf = Signal()
        w_urgent = Signal()
        m.d.comb += [
            w_urgent.eq(_or_all(win[i] & (key[i] == 0) for i in range(n))),
            w_bytes.eq(_or_all(win[i].replicate(p.bytes_bits) & heads[i].bytes for i in range(n))),
            w_id.eq(_or_all(win[i].replicate(p.id_width) & heads[i].id for i in range(n))),
            w_ts.eq(_or_all(win[i].replicate(p.ts_bits) & heads[i].ts for i in range(n))),
            w_tenant.eq(_or_all(win[i].replicate(p.tenant_bits) & i for i in range(n))),
            w_conf.eq(_or_all(win[i] & conform[i] for i in range(n))),
        ]
        # The payload is captured on every load (it is all zeros without a
        # winner and then irrelevant): only the valid bit waits for any_win.
        with m.If(load):
            m.d.sync += [
                g_valid.eq(any_win),
                g_tenant.eq(w_tenant),
                g_bytes.eq(w_bytes),
                g_id.eq(w_id),
                g_ts.eq(w_ts),
            ]
            with m.If(fcfs):
                m.d.sync += g_kind.eq(Kind.FCFS)
            with m.Elif(w_urgent):
                m.d.sync += g_kind.eq(Kind.URGENT)
            with m.Elif(w_conf):
                m.d.sync += g_kind.eq(Kind.GUARANTEED)
            with m.Else():
                m.d.sync += g_kind.eq(Kind.BURST)

        # ---------------------------------------------------------- credit counters
        # inflight_k at t+1 = sat255(inflight_k + sel_k) - ret_k (spec §6.6):
        # a fabric-mode winner is counted in its class when it is selected; a
        # return with nothing in flight (after the increment) is ignored.
        # Both outcomes of sel_k, and has_credit_k of the next cycle under the
        # next limits for each, come from registers and the return input; the
        # winner only chooses (sat255(x + 1) is never 0, so a return always
        # counts after a selection).
        selected = Signal(name="credit_selected")
        m.d.comb += selected.eq(load & any_win & ~fcfs)
        for k in range(CREDIT_CLASSES):
            cnt = self.inflight[k]
            ret = self.credit_return[k]
            limit = self.credit_limit_next[k]
            sel_k = Signal(name=f"credit_sel_{k}")
            m.d.comb += sel_k.eq(selected & _or_all(win[i] & credit[i][k] for i in range(n)))
            full = Signal(name=f"inflight_full_{k}")
            kept = Signal(CREDIT_BITS, name=f"inflight_kept_{k}")
            counted = Signal(CREDIT_BITS, name=f"inflight_counted_{k}")
            m.d.comb += [
                full.eq(cnt == (1 << CREDIT_BITS) - 1),
                kept.eq(cnt - (ret & (cnt != 0))),
                counted.eq(cnt + ~full - ret),
            ]
            m.d.sync += [
                cnt.eq(Mux(sel_k, counted, kept)),
                has_credit[k].eq((limit == 0) | Mux(sel_k, counted < limit, kept < limit)),
            ]

        # ---------------------------------------------------------- virtual time
        # served(s) = ceil(s / TAG_UNIT) of a fabric-mode winner (zero without
        # a winner). Computing it per head before the mux instead cost about
        # 2000 LUT4s on ECP5 (synthesis duplicated selection logic per bit).
        w_served = Signal(p.served_bits)
        m.d.comb += w_served.eq((w_bytes >> p.tag_shift) + (w_bytes[:p.tag_shift] != 0))
        with m.If(load & ~fcfs):
            m.d.sync += served.eq(w_served)
        with m.Else():
            m.d.sync += served.eq(0)

        # vmin: tag_min over the backlogged tenants' start tags as a balanced
        # tree (N-1 comparators instead of N(N-1)/2; spec §6.4 makes the
        # result order-independent). vmin is off the selection loop.
        nodes = [(hv[i], self.dyn_tag[i]) for i in range(n)]
        level_no = 0
        while len(nodes) > 1:
            merged = []
            for k in range(0, len(nodes) - 1, 2):
                (va, ta), (vb, tb) = nodes[k], nodes[k + 1]
                take_b = Signal(name=f"vmin_take_b_{level_no}_{k // 2}")
                # b replaces a when a is absent, or both are present and b < a.
                m.d.comb += take_b.eq(vb & (~va | mod_lt(tb, ta, T)))
                vm = Signal(name=f"vmin_valid_{level_no}_{k // 2}")
                tm = Signal(T, name=f"vmin_tag_{level_no}_{k // 2}")
                m.d.comb += [vm.eq(va | vb), tm.eq(Mux(take_b, tb, ta))]
                merged.append((vm, tm))
            if len(nodes) % 2:
                merged.append(nodes[-1])
            nodes = merged
            level_no += 1
        any_valid, min_tag = nodes[0]
        m.d.sync += [
            vmin.eq(Mux(any_valid, min_tag, 0)),
            vmin_valid.eq(any_valid),
        ]

        channel_checks(m, p, ChannelView(
            win=win, fab_win=fab_wins, pop=pops, head_valid=hv,
            queue_level=[q.level for q in queues], occupancy=list(self.occupancy),
            level=self.dyn_level, peak=self.dyn_peak, tag=self.dyn_tag,
            capacity=[self.tenant_cfg[i].capacity for i in range(n)], vt=vt,
            inflight=self.inflight, credit_limit=list(self.credit_limit),
            has_credit=has_credit), self._checks)
        return m


@dataclass
class _ChannelTiming:
    """Per-channel values every tenant's candidates read (spec §6.4, §11)."""

    vt: Signal
    vt_lo: Signal
    vt_hi: Signal
    fcfs: Signal
    fcfs_next: Signal
    starve_on_next: Signal
    deadline_next: Signal


@dataclass
class _TenantCandidates:
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
    lvl_win: Signal
    lvl_idle: Signal
    pk_win: Signal
    pk_idle: Signal
    tag_idle: Signal
    key_next_keep: tuple
    key_next_pop: tuple


def _tenant_candidates(m, p, i, timing, *, cfg, q, level, peak, tag, burst_level, priority_next,
                       bulk_prio_next):
    """Tenant i's selection key registers and, from registers only, its next
    state for both outcomes of the selection (spec §6.3-§6.4, §11): the
    bucket levels and tag if it wins or not, and next cycle's key if its
    head is kept or popped."""
    T = p.tag_bits
    W = max(T, p.ts_bits)
    vt, vt_lo, vt_hi = timing.vt, timing.vt_lo, timing.vt_hi
    fcfs, fcfs_next = timing.fcfs, timing.fcfs_next
    starve_on_next, deadline_next = timing.starve_on_next, timing.deadline_next
    head = q.r_data
    k_comp = Signal(name=f"key_competes_{i}")
    k_key = Signal(4, name=f"key_class_{i}", init=15)
    k_order = Signal(W, name=f"key_order_{i}")
    k_conf = Signal(name=f"key_conform_{i}")
    k_credit = Signal(CREDIT_CLASSES, name=f"key_credit_{i}")
    # Next cycle's priority is marked in next cycle's bulk_prio: the same for
    # the kept and the popped head.
    bulk_next = Signal(name=f"bulk_next_{i}")
    m.d.comb += bulk_next.eq(_or_all((priority_next == prio) & bulk_prio_next[prio]
                                     for prio in range(BULK_PRIO_BITS)))
    need = Signal(p.peak_bits, name=f"need_{i}")
    # The head's finish tag, tag + cost, precomputed like the key.
    s_fin = Signal(T, name=f"key_finish_{i}")
    m.d.comb += need.eq(head.bytes << p.frac)

    # Next-state candidates, all from registers, in parallel with selection.
    # level - need is only used when the head conforms (level >= need),
    # peak - need only when it is burst_ok (peak >= need).
    # Sum widths: the larger operand plus a carry (peak_rate is wider
    # than the peak level when LMAX < 4096).
    lsum_bits = max(p.level_bits, p.rate_bits) + 1
    psum_bits = max(p.peak_bits, p.peak_rate_bits) + 1
    s_lw_g = Signal(lsum_bits, name=f"lvl_sum_g_{i}")
    s_li = Signal(lsum_bits, name=f"lvl_sum_i_{i}")
    s_pw = Signal(psum_bits, name=f"pk_sum_w_{i}")
    s_pi = Signal(psum_bits, name=f"pk_sum_i_{i}")
    m.d.comb += [
        s_li.eq(level + cfg.rate),
        s_lw_g.eq(s_li - need),
        s_pi.eq(peak + cfg.peak_rate),
        s_pw.eq(s_pi - need),
    ]
    cap = cfg.capacity
    lw = Signal(p.level_bits, name=f"lvl_win_{i}")
    li = Signal(p.level_bits, name=f"lvl_idle_{i}")
    pw = Signal(p.peak_bits, name=f"pk_win_{i}")
    pi_ = Signal(p.peak_bits, name=f"pk_idle_{i}")
    m.d.comb += [
        li.eq(_min(s_li, cap)),
        pw.eq(_min_pow2(s_pw, p.pcap)),
        pi_.eq(_min_pow2(s_pi, p.pcap)),
        # A burst grant spends the committed tokens (B_i = 0).
        lw.eq(Mux(k_conf, _min(s_lw_g, cap), burst_level)),
    ]

    # Tag clamps (spec §6.4): empty queue -> max(tag, V),
    # backlogged -> max(tag, V - LAG_WINDOW); then min(., V + LAG_WINDOW).
    # Written as parallel comparisons of tag with fixed bounds: a
    # raised tag (the floor) never exceeds the ceiling, because the
    # floor is V or V - LAG_WINDOW and the ceiling V + LAG_WINDOW,
    # less than the half range above it. All three comparisons come
    # from one subtraction (_lag_position).
    below = Signal(name=f"tag_below_floor_{i}")
    above = Signal(name=f"tag_above_ceiling_{i}")
    floor_ = Signal(T, name=f"tag_floor_{i}")
    ti = Signal(T, name=f"tag_idle_{i}")
    lt_vt, lt_vt_lo, gt_vt_hi, vt_lt = _lag_position(m, tag, vt, T, f"tag_{i}")
    m.d.comb += [
        below.eq(Mux(q.r_rdy, lt_vt_lo, lt_vt)),
        above.eq(~below & gt_vt_hi),
        floor_.eq(Mux(q.r_rdy, vt_lo, vt)),
        ti.eq(Mux(below, floor_, Mux(above, vt_hi, tag))),
    ]
    # Eligibility of the clamped tag against V at t (spec §6.2: V one cycle
    # old at t+1): a floor (V or V - LAG_WINDOW) is at most V, the ceiling
    # V + LAG_WINDOW is above it, and a tag in between is eligible unless
    # tag_lt(V, tag), which the clamp's subtraction already gives.
    elig_ti = Signal(name=f"eligible_tag_idle_{i}")
    m.d.comb += elig_ti.eq(below | (~above & ~vt_lt))

    # The key of the next cycle's head, for both outcomes of this
    # cycle's selection. Bucket tests use min(a, cap) >= n <=> a >= n
    # and cap >= n, so no comparison waits for a min().
    keep_head = Signal.like(head, name=f"keep_head_{i}")
    m.d.comb += keep_head.eq(Mux(q.r_rdy, head, q.w_data))
    keep_need = Signal(p.peak_bits, name=f"keep_need_{i}")
    m.d.comb += keep_need.eq(keep_head.bytes << p.frac)
    # Finish tag of the kept head: the clamp's choice made after the
    # additions (V + cost shifted by LAG_WINDOW for the bounds).
    keep_fin = Signal(T, name=f"keep_finish_{i}")
    v_cost = Signal(T, name=f"keep_vt_cost_{i}")
    t_cost = Signal(T, name=f"keep_tag_cost_{i}")
    m.d.comb += [
        v_cost.eq(vt + keep_head.cost),
        t_cost.eq(tag + keep_head.cost),
        keep_fin.eq(Mux(below, Mux(q.r_rdy, _shift_lag(v_cost, -1), v_cost),
                        Mux(above, _shift_lag(v_cost, 1), t_cost))),
    ]
    keep = _next_key(
        m, p, f"keep_{i}",
        valid=q.r_rdy | q.w_en, head=keep_head,
        level_ok=_ge(s_li, keep_need) & _ge(cap, keep_need),
        peak_ok=_ge(s_pi, keep_need),
        eligible=elig_ti, finish=keep_fin, deadline_next=deadline_next,
        fcfs_next=fcfs_next, starve_on_next=starve_on_next,
        priority_next=priority_next, bulk_next=bulk_next)

    # After a pop: the committed bucket is debited only by a
    # guaranteed fabric-mode grant (level + rate - need >= 0 then),
    # spent by a burst one, the peak bucket debited by any fabric-mode
    # grant (peak + peak_rate - need >= 0 then), nothing in FCFS mode.
    pop_head = q.pop_data
    pop_need = Signal(p.peak_bits, name=f"pop_need_{i}")
    m.d.comb += pop_need.eq(pop_head.bytes << p.frac)
    pop_cap_ok = _ge(cap, pop_need)
    pop_level_ok = Mux(fcfs, _ge(s_li, pop_need) & pop_cap_ok,
                       Mux(k_conf, _ge(s_lw_g, pop_need) & pop_cap_ok,
                           _ge(burst_level, pop_need)))
    pop_peak_ok = Mux(fcfs, _ge(s_pi, pop_need), _ge(s_pw, pop_need))
    pop_tag = Signal(T, name=f"pop_tag_{i}")
    pop_fin = Signal(T, name=f"pop_finish_{i}")
    elig_fin = Signal(name=f"eligible_finish_{i}")
    m.d.comb += elig_fin.eq(~mod_lt(vt, s_fin, T))
    m.d.comb += [
        pop_tag.eq(Mux(fcfs, ti, s_fin)),
        pop_fin.eq(pop_tag + pop_head.cost),
    ]
    won = _next_key(
        m, p, f"pop_{i}",
        valid=(q.level >= 2) | q.w_en, head=pop_head,
        level_ok=pop_level_ok, peak_ok=pop_peak_ok,
        eligible=Mux(fcfs, elig_ti, elig_fin), finish=pop_fin, deadline_next=deadline_next,
        fcfs_next=fcfs_next, starve_on_next=starve_on_next,
        priority_next=priority_next, bulk_next=bulk_next)

    return _TenantCandidates(
        head_valid=q.r_rdy, head=head, key_competes=k_comp, key_class=k_key, key_order=k_order,
        key_conform=k_conf, key_finish=s_fin, key_credit=k_credit, lvl_win=lw, lvl_idle=li, pk_win=pw, pk_idle=pi_,
        tag_idle=ti, key_next_keep=keep, key_next_pop=won)


def _next_key(m, p, sfx, *, valid, head, level_ok, peak_ok, eligible, finish, deadline_next,
              fcfs_next, starve_on_next, priority_next, bulk_next):
    """Selection key of a head in the next cycle (spec §6.2, evaluated one cycle early).

    ``valid``: the tenant has a head next cycle; ``head``: that head;
    ``level_ok``/``peak_ok``: next cycle's committed/peak level covers it;
    ``eligible``: next cycle's start tag is at most this cycle's V (spec §6.2);
    ``finish``: next cycle's start tag plus the head's cost;
    ``deadline_next``: next cycle's ``now - starve_limit``. Returns the
    register inputs ``(competes, key, order, conform, finish, credit)`` in
    the order of the ``key_*`` registers; ``credit`` is the head's credit
    class one-hot (spec §6.6: urgent; guaranteed, or burst when ``bulk_next``
    says its priority is marked in ``bulk_prio``; burst), all clear in FCFS
    mode.
    """
    T, W = p.tag_bits, max(p.tag_bits, p.ts_bits)
    conf = Signal(name=f"conform_{sfx}")
    old = Signal(name=f"old_{sfx}")
    urg = Signal(name=f"urgent_{sfx}")
    comp = Signal(name=f"competes_{sfx}")
    key0 = Signal(name=f"key0_{sfx}")
    key = Signal(4, name=f"key_{sfx}")
    order = Signal(W, name=f"order_{sfx}")
    m.d.comb += [
        conf.eq(peak_ok & level_ok),
        old.eq(~mod_lt(deadline_next, head.ts, p.ts_bits)),
        urg.eq(conf & starve_on_next & old),
        comp.eq(valid & (fcfs_next | peak_ok)),
        # Class 0 (urgent, or every head in FCFS mode) orders by timestamp.
        key0.eq(fcfs_next | urg),
        # Timestamp or finish tag, shifted to a common width W so that the
        # W-bit modular comparison equals the T- or TS_BITS-bit one (the low
        # bits are zero on both sides); keys are only compared by order when
        # equal, so both sides then hold the same kind (spec §11).
        order.eq(Mux(key0, head.ts << (W - p.ts_bits), finish << (W - T))),
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
        m.d.comb += key.eq(Cat(~eligible, priority_next + 1))
    with m.Else():
        m.d.comb += key.eq(Cat(~eligible, C(5, 3)))
    credit = Signal(CREDIT_CLASSES, name=f"credit_{sfx}")
    with m.If(fcfs_next):
        m.d.comb += credit.eq(0)
    with m.Elif(key0):
        m.d.comb += credit.eq(1 << CREDIT_URGENT)
    with m.Elif(conf & ~bulk_next):
        m.d.comb += credit.eq(1 << CREDIT_GUARANTEED)
    with m.Else():
        m.d.comb += credit.eq(1 << CREDIT_BURST)
    return comp, key, order, conf, finish, credit


def _shift_lag(x, sign):
    """``(x ± LAG_WINDOW) mod 2^T`` with ``LAG_WINDOW = 2^(T-3)``: only the
    top three bits change, so the low bits are wired through. Written so for
    clarity: flattened ECP5 synthesis already trimmed the T-bit form (17 LUT4s
    apart for one channel, issue #6)."""
    low = len(x) - 3
    return Cat(x[:low], (x[low:] + sign)[:3])


def _lag_position(m, tag, vt, bits, sfx):
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


def _ge(big, small):
    """``big >= small`` for unsigned values where ``small`` is the narrower:
    a carry chain over the low bits and an OR of ``big``'s high bits."""
    k = len(small)
    if len(big) <= k:
        return big >= small
    return (big[k:] != 0) | (big[:k] >= small)


def _lt_logic(a, b):
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


def _min_pow2(a, limit):
    """``min(a, limit)`` for a power-of-two ``limit`` (PCAP, spec §1): the
    comparison is an OR of the high bits, not a carry chain."""
    k = limit.bit_length() - 1
    assert limit == 1 << k
    return Mux(a[k:].any(), limit, a)


def _or_all(values):
    acc = None
    for v in values:
        acc = v if acc is None else acc | v
    return acc
