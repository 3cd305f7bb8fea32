"""Per-channel arbiter core (spec §4–§6, timing structure §11).

Fairness rule
-------------
Each channel arbitrates among the heads of N per-tenant queues. A head competes
in fabric mode when its tenant's peak bucket covers it (``burst_ok``); it is
*guaranteed* when the committed bucket covers it too (``conform``), and
*urgent* when it is also older than ``starve_limit`` cycles. The winner has the
smallest key ``(class, sub-key, tenant index)`` where class 0 = urgent (sub-key
age, oldest first), 1..4 = guaranteed at priority 0..3, 5 = burst, and the
sub-key of classes 1..5 is WF2Q+ order: eligible (start tag <= V) before
ineligible, then the smaller finish tag. In FCFS-bypass mode every non-empty
queue competes and the oldest head wins. Buckets refill every cycle; the
winner's start tag becomes its finish tag; everyone else's tag is clamped to
V (empty queue) or to V - LAG_WINDOW (backlogged). V advances by the previous
grant's unweighted cost and catches up to the previous cycle's minimum start
tag (two one-cycle delays that keep V out of the selection loop).

Timing structure
----------------
Registers: per-tenant ``dyn_level``/``dyn_peak``/``dyn_tag``, the queue heads
(``q_*``, shift-register queues whose head is a register) and the grant
register. Per cycle, in parallel:

* per tenant: ``conform``/``burst_ok``/``urgent``/``eligible``/``finish`` from
  registers, and every "if granted" and "if not granted" next value of the
  level, peak and tag;
* per pair of tenants (all pairs, no tree): "higher index strictly precedes
  lower index" from the class, eligibility, finish tags and timestamps;
* per tenant: winner = it competes and no competing tenant precedes it
  (one-hot);
* final muxes selected by the one-hot winner: next state, queue pops, grant
  register.

V, served and vmin are per-channel registers updated from registers only.

Naming (the state-budget script counts flip-flops by name): per-tenant dynamic
state is exactly ``dyn_level_i``, ``dyn_peak_i``, ``dyn_tag_i``; queue storage
and the ingress register are ``q_*``; per-channel registers are ``vt``,
``served``, ``vmin``, ``vmin_valid`` and ``grant_*``.
"""

from amaranth.hdl import C, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .fifo import HeadQueue
from .ingress import Ingress
from .layouts import Kind, grant_signature, queue_entry_layout, request_signature, tenant_config_layout
from .params import check_params

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
    starve_limit : In(24)
        0 disables the starvation guard.
    now : In(ts_bits)
        Fabric-wide timestamp, ``t mod 2^TS_BITS``.
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
    """

    def __init__(self, params):
        self._params = check_params(params)
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
            "starve_limit": In(p.starve_bits),
            "now":          In(p.ts_bits),
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
        starve_on = self.starve_limit != 0

        # ---------------------------------------------------------- per tenant
        hv, heads, conform, key, elig, finish, competes = [], [], [], [], [], [], []
        key0 = []
        lvl_win, lvl_idle, pk_win, pk_idle, tag_idle = [], [], [], [], []
        for i in range(n):
            cfg = self.tenant_cfg[i]
            head = queues[i].r_data
            level, peak, tag = self.dyn_level[i], self.dyn_peak[i], self.dyn_tag[i]
            need = Signal(p.peak_bits, name=f"need_{i}")
            m.d.comb += need.eq(head.bytes << p.frac)

            s_burst = Signal(name=f"burst_ok_{i}")
            s_conf = Signal(name=f"conform_{i}")
            s_elig = Signal(name=f"eligible_{i}")
            s_fin = Signal(T, name=f"finish_{i}")
            s_old = Signal(name=f"old_{i}")
            s_urg = Signal(name=f"urgent_{i}")
            s_key = Signal(4, name=f"key_{i}")
            s_comp = Signal(name=f"competes_{i}")
            m.d.comb += [
                s_burst.eq(peak >= need),
                # need < 2^peak_bits: compare only the low bits of the level
                # with a chain, the high bits with an OR.
                s_conf.eq(s_burst & ((level[p.peak_bits:] != 0) | (level[:p.peak_bits] >= need))),
                s_elig.eq(~mod_lt(vt, tag, T)),
                s_fin.eq(tag + head.cost),
                # A three-operand form (now - ts - limit, one chain) measured
                # 500 LUT4s more on ECP5 for no gain: keep subtract + compare.
                s_old.eq((self.now - head.ts)[:p.ts_bits] >= self.starve_limit),
                s_urg.eq(s_conf & starve_on & s_old),
                s_comp.eq(queues[i].r_rdy & (fcfs | s_burst)),
            ]
            # Selection key: class, eligibility and "competes" folded into one
            # 4-bit number so that a pair compares one small key plus one tag
            # or timestamp bit. 0 = urgent (or FCFS mode: oldest first), then
            # 2*class + ineligible for classes 1..5 (2..11), 15 = does not
            # compete (after everyone).
            # Class 0 (urgent, or every head in FCFS mode) orders by timestamp.
            s_key0 = Signal(name=f"key0_{i}")
            m.d.comb += s_key0.eq(fcfs | s_urg)
            key0.append(s_key0)
            with m.If(~s_comp):
                m.d.comb += s_key.eq(15)
            with m.Elif(s_key0):
                m.d.comb += s_key.eq(0)
            with m.Elif(s_conf):
                m.d.comb += s_key.eq(Cat(~s_elig, cfg.priority + 1))
            with m.Else():
                m.d.comb += s_key.eq(Cat(~s_elig, C(5, 3)))

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
            # The "if granted" sums reuse the refill sums: one adder chain and
            # one subtractor instead of two three-operand chains.
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
            ]
            with m.If(s_conf):
                m.d.comb += lw.eq(_min(s_lw_g, cap))
            with m.Else():
                # Burst grant: the committed tokens are spent (B_i = 0).
                m.d.comb += lw.eq(self.burst_level[i])

            # Tag clamps (spec §6.4): empty queue -> max(tag, V),
            # backlogged -> max(tag, V - LAG_WINDOW); then min(., V + LAG_WINDOW).
            floor_ = Signal(T, name=f"tag_floor_{i}")
            ceiling = Signal(T, name=f"tag_ceiling_{i}")
            raised = Signal(T, name=f"tag_raised_{i}")
            ti = Signal(T, name=f"tag_idle_{i}")
            with m.If(queues[i].r_rdy):
                m.d.comb += floor_.eq(vt - p.lag_window)
            with m.Else():
                m.d.comb += floor_.eq(vt)
            m.d.comb += [ceiling.eq(vt + p.lag_window), raised.eq(tag), ti.eq(raised)]
            with m.If(mod_lt(tag, floor_, T)):
                m.d.comb += raised.eq(floor_)
            with m.If(mod_lt(ceiling, raised, T)):
                m.d.comb += ti.eq(ceiling)

            hv.append(queues[i].r_rdy)
            heads.append(head)
            conform.append(s_conf)
            key.append(s_key)
            elig.append(s_elig)
            finish.append(s_fin)
            competes.append(s_comp)
            lvl_win.append(lw)
            lvl_idle.append(li)
            pk_win.append(pw)
            pk_idle.append(pi_)
            tag_idle.append(ti)

        # ---------------------------------------------------------- all-pairs selection
        # first[hi][lo] (hi > lo): tenant hi strictly precedes tenant lo.
        # Within a key, class 0 orders by timestamp and the others by finish
        # tag: one comparator per pair on an order value that is the
        # timestamp or the finish tag, shifted to a common width W so that
        # the W-bit modular comparison equals the T- or TS_BITS-bit one
        # (the low bits are zero on both sides). Two keys are only compared
        # by order when they are equal, so both sides hold the same kind.
        W = max(T, p.ts_bits)
        order = []
        for i in range(n):
            o = Signal(W, name=f"order_{i}")
            m.d.comb += o.eq(Mux(key0[i], heads[i].ts << (W - p.ts_bits), finish[i] << (W - T)))
            order.append(o)
        first = {}
        for hi in range(n):
            for lo in range(hi):
                tie = Signal(name=f"tie_first_{hi}_{lo}")
                m.d.comb += tie.eq(mod_lt(order[hi], order[lo], W))
                f = Signal(name=f"first_{hi}_{lo}")
                m.d.comb += f.eq(_lt_logic(key[hi], key[lo]) | ((key[hi] == key[lo]) & tie))
                first[hi, lo] = f

        win = []
        for i in range(n):
            # A non-competing j has key 15 and comes after any competing i.
            terms = [competes[i]]
            terms += [first[i, lo] for lo in range(i)]
            terms += [~first[hi, i] for hi in range(i + 1, n)]
            w = Signal(name=f"win_{i}")
            m.d.comb += w.eq(Cat(*terms).all())
            win.append(w)
        any_win = Signal()
        m.d.comb += any_win.eq(Cat(*win).any())

        # ---------------------------------------------------------- state update
        for i in range(n):
            pop = Signal(name=f"pop_{i}")
            fab_win = Signal(name=f"fab_win_{i}")
            m.d.comb += [
                pop.eq(load & win[i]),
                fab_win.eq(pop & ~fcfs),
                queues[i].r_en.eq(pop),
            ]
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
        m.d.comb += [
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
            with m.Elif(w_conf):
                m.d.sync += g_kind.eq(Kind.GUARANTEED)
            with m.Else():
                m.d.sync += g_kind.eq(Kind.BURST)

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

        v_sum = Signal(T, name="vt_sum")
        m.d.comb += v_sum.eq(vt + served)
        with m.If(vmin_valid & mod_lt(v_sum, vmin, T)):
            m.d.sync += vt.eq(vmin)
        with m.Else():
            m.d.sync += vt.eq(v_sum)

        return m


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
