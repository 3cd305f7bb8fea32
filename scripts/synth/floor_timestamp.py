"""Floor core ``timestamp``: one channel with all of its per-cycle state, under a timestamp rule.

docs/synthesis.md "A timestamp rule: what the published designs do, measured"
states the rule (a candidate for spec §6, not the spec) and what this core
measured; ``tests/test_floor_timestamp.py`` checks it cycle by cycle against a
Python model of that rule.  The question it answers: with token buckets as
GCRA theoretical times (ITU-T I.371 "virtual scheduling"), whose state moves
only by the tenant's own grants while ``now`` is known ahead, can a channel
keep every per-cycle state of spec §6 (buckets, start tags, V, the lag
clamps, starvation deadlines, per-class credits, queues) and still give the
selection the ``fast`` core's registered class-relation / order-bit matrix?

Why each structure (the rule is in the docs; these are the registers that make
every next-key path one carry chain from registers, the winner choosing among
candidates afterwards):

- **GCRA in cumulative form.**  Each queue entry carries ``C``, the running sum
  of its tenant's increments (``bytes * inc``, in 1/16 cycle, at least one
  cycle) up to and including it, and ``C + tau``, both added at ingress.  Per
  tenant and bucket ``z`` = ``now + 1 - B + tau`` and ``cpt`` = ``Cprev +
  tau`` (and both plus one cycle), where ``R = B + Cprev`` is the floored
  theoretical time (GCRA's TAT after ``max(TAT, now)``, never below ``now``)
  and ``Cprev`` the running sum before the head.  Every bucket test of the
  rule is then one comparison of an entry's ``C`` with one of these
  registers; a grant adds a cycle to ``z``; no per-cycle refill adds anything.
- **Keys two cycles ahead.**  In cycle t the key each tenant would have in
  t+2 is computed for the four outcomes of t and t+1 (kept or granted, twice)
  and t's winner picks two of them as the registered candidates of t+1, so
  the pair class bits compare registered keys (comparing keys computed in
  the same cycle was v1's critical path).  Eligibility is therefore read
  from the start tag and V of two cycles before.
- **Two order values per tenant, both registers.**  ``fin`` (= start tag +
  head cost) and ``nxt`` (= ``fin`` + second cost) as in ``fast``, and the
  head and second timestamps for the urgent class.  Per pair three order
  subtractions per order kind: (neither wins) ``fin - fin``, (hi wins) ``nxt
  - fin``, (lo wins) ``fin - nxt``.  The registered order bit is the
  timestamp one when both candidates' keys are urgent.
- **Credits one cycle old.**  ``has_credit`` for cycle t+1 is a LUT of flags
  of the count of t-1 (compared with the limit plus -2..2 a cycle earlier),
  so the winner never feeds a counter in the cycle it is chosen.
- **Winner copies.**  A winner drives some 600 register inputs per tenant;
  the pair and active bits are kept in three copies, one winner per group
  of registers.
- **V, vmin.**  V's work term is the previous grant (as spec §6.4); vmin is a
  three-stage registered tree, three cycles old.
"""

from amaranth.hdl import C, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["TimestampFloor", "FRAC", "GCRA_BITS", "COST_BITS", "SRV_BITS", "IDLE_KEY"]

#: Fractional bits of GCRA times and increments (1/16 cycle).
FRAC = 4
#: Width of GCRA times (modular): 20 integer bits and FRAC fractional.
GCRA_BITS = 24
COST_BITS = 16
SRV_BITS = 8
#: Key values: 0 urgent, 2 + 2*prio + ineligible guaranteed, 10 + ineligible burst, 15 does not compete.
IDLE_KEY = 15
CREDIT_CLASSES = 3


def _lt(a, b, width):
    """a before b modulo 2^width: the sign bit of one subtraction (spec §6.1)."""
    return (a - b)[width - 1]


def _le(a, b, width):
    return ~_lt(b, a, width)


def _key(m, name, urgent, confc, confp, elig, prio):
    """The 4-bit key of spec §11: 0 urgent, 2*class + ineligible for classes 1..5, 15 none."""
    key = Signal(4, name=name)
    with m.If(urgent):
        m.d.comb += key.eq(0)
    with m.Elif(confc & confp):
        m.d.comb += key.eq(Cat(~elig, prio, C(0, 1)) + 2)
    with m.Elif(confp):
        m.d.comb += key.eq(Cat(~elig, C(0b101, 3)))
    with m.Else():
        m.d.comb += key.eq(IDLE_KEY)
    return key


def _credit_class(m, name, key, prio, bulk):
    """One-hot credit class of a key (spec §6.6): urgent, guaranteed (or burst when its
    priority is bulk), burst; zero when the key does not compete."""
    cc = Signal(CREDIT_CLASSES, name=name)
    guaranteed = (key >= 2) & (key <= 9)
    is_bulk = bulk.bit_select(prio, 1)
    m.d.comb += cc.eq(Cat(key == 0, guaranteed & ~is_bulk, (guaranteed & is_bulk) | (key == 10) | (key == 11)))
    return cc


class TimestampFloor(wiring.Component):
    """One channel under the timestamp rule (docs/synthesis.md), selection by the registered matrix.

    Ports: one push per cycle (``push_valid``, ``push_tenant``, ``push_cost``
    in tag units, ``push_srv`` = served units for V, ``push_xc``/``push_xp``
    = the GCRA increments in 1/16 cycle); configuration ``tau_c``/``tau_p``
    (tolerances = capacity / rate, 1/16 cycle, held constant after reset),
    ``prio``, ``bulk``, ``starve`` (0 disables urgency), ``limit``;
    ``credit_return``; outputs the one-hot ``win`` of this cycle and
    ``full`` (a push now could overflow the tenant's queue).
    """

    def __init__(self, tenants=8, order_bits=24, depth=4):
        self.tenants, self.depth = tenants, depth
        self.ts_bits = order_bits
        self.tag_bits = max(order_bits - 4, 8)
        g = GCRA_BITS
        super().__init__({
            "push_valid": In(1), "push_tenant": In(max(1, (tenants - 1).bit_length())),
            "push_cost": In(COST_BITS), "push_srv": In(SRV_BITS), "push_xc": In(g), "push_xp": In(g),
            "tau_c": In(g).array(tenants), "tau_p": In(g).array(tenants), "prio": In(2).array(tenants),
            "bulk": In(4), "starve": In(order_bits - 1), "limit": In(8).array(CREDIT_CLASSES),
            "credit_return": In(CREDIT_CLASSES),
            "win": Out(tenants), "full": Out(tenants),
        })

    def elaborate(self, platform):
        m = Module()
        n, D, T, TS, G = self.tenants, self.depth, self.tag_bits, self.ts_bits, GCRA_BITS
        ONE = 1 << FRAC                      # one cycle in GCRA units
        W = 1 << (T - 3)                     # LAG_WINDOW

        # ---- time ------------------------------------------------------------------------
        now = Signal(TS, name="now")
        nowp3 = Signal(TS, name="now_plus3", init=3)
        deadline2 = Signal(TS, name="deadline2")      # now + 2 - starve: 'old' two cycles ahead
        init = Signal(init=1, name="init")
        m.d.sync += [now.eq(now + 1), nowp3.eq(nowp3 + 1), deadline2.eq(nowp3 - self.starve), init.eq(0)]
        urgency_on = self.starve != 0

        # ---- ingress register: one entry, written into its queue the cycle after the push --
        # cc, cp: running sums of the increments (this entry included); ccp, cpp: the same plus
        # tau; minc, min2: the committed increment is one cycle, at most two cycles.
        fields = [("cost", COST_BITS), ("srv", SRV_BITS), ("ts", TS), ("cc", G), ("cp", G), ("ccp", G),
                  ("cpp", G), ("minc", 1), ("min2", 1)]
        ing_valid = Signal(name="ing_valid")
        ing_tenant = Signal(len(self.push_tenant), name="ing_tenant")
        ing = {f: Signal(w, name=f"ing_{f}") for f, w in fields if f not in ("ccp", "cpp")}
        ing_qsum = Signal(T, name="ing_qsum")        # this cost + the cost pushed before it
        clast_c = [Signal(G, name=f"clast_c_{i}") for i in range(n)]
        clast_p = [Signal(G, name=f"clast_p_{i}") for i in range(n)]
        lastcost = [Signal(COST_BITS, name=f"lastcost_{i}") for i in range(n)]

        # Increments arrive at least one cycle (the ingress multiply rounds them, as it rounds
        # cost).  Every tenant's sums are formed and the pushed tenant's chosen after the
        # carry chains, so that no multiplexer sits in front of them.
        xc_in, xp_in = self.push_xc, self.push_xp
        sel_last = Signal(COST_BITS, name="push_lastcost")
        sums_c = [Signal(G, name=f"push_cc_{i}") for i in range(n)]
        sums_p = [Signal(G, name=f"push_cp_{i}") for i in range(n)]
        m.d.comb += [sums_c[i].eq(clast_c[i] + xc_in) for i in range(n)]
        m.d.comb += [sums_p[i].eq(clast_p[i] + xp_in) for i in range(n)]
        new_cc = Signal(G, name="push_cc")
        new_cp = Signal(G, name="push_cp")
        with m.Switch(self.push_tenant):
            for i in range(n):
                with m.Case(i):
                    m.d.comb += [new_cc.eq(sums_c[i]), new_cp.eq(sums_p[i]), sel_last.eq(lastcost[i])]
        m.d.sync += [ing_valid.eq(self.push_valid), ing_tenant.eq(self.push_tenant),
                     ing["cost"].eq(self.push_cost), ing["srv"].eq(self.push_srv), ing["ts"].eq(now),
                     ing["cc"].eq(new_cc), ing["cp"].eq(new_cp), ing["minc"].eq(xc_in == ONE),
                     ing["min2"].eq(xc_in <= 2 * ONE),
                     ing_qsum.eq(self.push_cost + sel_last)]
        with m.If(self.push_valid):
            with m.Switch(self.push_tenant):
                for i in range(n):
                    with m.Case(i):
                        m.d.sync += [clast_c[i].eq(sums_c[i]), clast_p[i].eq(sums_p[i]),
                                     lastcost[i].eq(self.push_cost)]

        def ing_for(i):
            """The ingress entry as tenant i's queue stores it (tau added on the way in)."""
            return dict(ing, ccp=ing["cc"] + self.tau_c[i], cpp=ing["cp"] + self.tau_p[i])

        # ---- per-tenant registers ----------------------------------------------------------
        slots = [[{f: Signal(w, name=f"q{i}_{k}_{f}") for f, w in fields} for k in range(D)] for i in range(n)]
        # Queue occupancy as a thermometer (bit k: at least k + 1 entries), so that every
        # "at least k entries" choice in front of a carry chain is a register bit.
        occ = [Signal(D, name=f"occupancy_{i}") for i in range(n)]

        def at_least(i, k):
            return C(1, 1) if k <= 0 else occ[i][k - 1]

        def exactly(i, k):
            return ~occ[i][0] if k == 0 else occ[i][k - 1] & (~occ[i][k] if k < D else C(1, 1))
        S = [Signal(T, name=f"start_{i}") for i in range(n)]
        fin = [Signal(T, name=f"fin_{i}") for i in range(n)]
        nxt = [Signal(T, name=f"nxt_{i}") for i in range(n)]
        q12 = [Signal(T, name=f"q12_{i}") for i in range(n)]
        z = [[Signal(G, name=f"z_{b}_{i}") for i in range(n)] for b in "cp"]
        cpt = [[Signal(G, name=f"cpt_{b}_{i}") for i in range(n)] for b in "cp"]
        zu = [[Signal(G, name=f"z_plus1_{b}_{i}") for i in range(n)] for b in "cp"]         # z + 1 cycle
        cptu = [[Signal(G, name=f"cpt_plus1_{b}_{i}") for i in range(n)] for b in "cp"]     # cpt + 1 cycle
        key_keep = [Signal(4, name=f"key_keep_{i}", init=IDLE_KEY) for i in range(n)]  # key at t+1 if kept at t
        key_pop = [Signal(4, name=f"key_pop_{i}", init=IDLE_KEY) for i in range(n)]    # ... if granted at t
        key = [Signal(4, name=f"key_{i}", init=IDLE_KEY) for i in range(n)]
        ccls = [Signal(CREDIT_CLASSES, name=f"ccls_{i}") for i in range(n)]
        V = Signal(T, name="vt")
        served_q = Signal(SRV_BITS, name="served_q")
        taus = [self.tau_c, self.tau_p]

        # ---- credits: has_credit for t+1 from the count of t (one cycle old) -------------------
        # cnt = n(t-1); n(t) = sat(cnt + sel_q) - ret' is a chain, so has_credit for t+1 (which the
        # active candidates need before the winner) is a LUT of flags of cnt registered a cycle
        # earlier: cnt < L, cnt + 1 < L, cnt <= L, cnt != 0, cnt == 255.
        cnt = [Signal(8, name=f"inflight_prev_{k}") for k in range(CREDIT_CLASSES)]   # n(t-1)
        sel_q = Signal(CREDIT_CLASSES, name="sel_q")            # class selected at t-1
        ret_q = Signal(CREDIT_CLASSES, name="ret_q")
        hc_next = Signal(CREDIT_CLASSES, name="has_credit_next")
        for k in range(CREDIT_CLASSES):
            L = self.limit[k]
            # The limit plus -2..2, registered (configuration one cycle late), so that each flag
            # of the next count is one comparison of registers chosen by the count's step.
            thr = {d: Signal(signed(10), name=f"limit_{k}_plus{d}".replace("-", "m")) for d in range(-2, 3)}
            m.d.sync += [thr[d].eq(L + d) for d in thr]
            lt0, lt1, le0, nz, full8 = (Signal(name=f"inflight_{what}_{k}", init=init) for what, init in
                                        (("lt", 0), ("lt_minus1", 0), ("le", 1), ("nonzero", 0), ("sat", 0)))
            up = sel_q[k] & ~full8
            ret = ret_q[k] & (sel_q[k] | nz)
            step_up, step_down = up & ~ret, ret & ~up
            cur = Signal(8, name=f"inflight_{k}")              # n(t)
            m.d.comb += cur.eq(Mux(step_up, cnt[k] + 1, Mux(step_down, cnt[k] - 1, cnt[k])))

            def below(d):       # n(t) < L + d
                return Mux(step_up, cnt[k] < thr[d - 1] if d - 1 >= -2 else cnt[k] < L - 3,
                           Mux(step_down, cnt[k] < thr[d + 1], cnt[k] < thr[d]))
            m.d.sync += [cnt[k].eq(cur), lt0.eq(below(0)), lt1.eq(below(-1)), le0.eq(below(1)),
                         nz.eq(Mux(step_up, 1, Mux(step_down, cnt[k] != 1, cnt[k] != 0))),
                         full8.eq(Mux(step_up, cnt[k] >= 254, Mux(step_down, 0, cnt[k] == 255)))]
            n_lt_limit = Mux(sel_q[k], Mux(ret, Mux(full8, L == 255, lt0), ~full8 & lt1),
                             Mux(ret, le0, lt0))
            m.d.comb += hc_next[k].eq((L == 0) | n_lt_limit)
        m.d.sync += ret_q.eq(self.credit_return)

        # ---- pair registers and the winner (as the fast core) -------------------------------
        # The winner drives some 600 register inputs per tenant (queue shift, tags, buckets, keys).
        # One winner net that wide is mostly routing, so the pair bits and active bits are kept
        # in three copies and each copy's winner drives one group: "sel" the pair bits, keys and
        # grant, "queue" the queue, "state" the tags and buckets.  Each copy is loaded through its
        # own winner, so that no two copies have the same next-state logic (Yosys merges
        # registers with equal inputs, ``keep`` or not).
        copies = ("sel", "queue", "state")
        pair_copies = {g: {} for g in copies}
        active_copies = {g: [Signal(name=f"active_{g}_{i}", attrs={"keep": 1}) for i in range(n)] for g in copies}
        wins = {}
        for g in copies:
            prec = {}
            for hi in range(n):
                for lo in range(hi):
                    pair_copies[g][hi, lo] = [Signal(name=f"{w}_{g}_{hi}_{lo}", attrs={"keep": 1})
                                              for w in ("class_less", "class_equal", "order_less")]
                    less, equal, before = pair_copies[g][hi, lo]
                    prec[hi, lo] = less | (equal & before)
            act = active_copies[g]
            wins[g] = []
            for i in range(n):
                terms = [act[i]]
                terms += [prec[i, lo] | ~act[lo] for lo in range(i)]
                terms += [~(act[hi] & prec[hi, i]) for hi in range(i + 1, n)]
                w = Signal(name=f"win_{g}_{i}")
                m.d.comb += w.eq(Cat(*terms).all())
                wins[g].append(w)
        win = wins["sel"]
        m.d.comb += self.win.eq(Cat(*win))

        # ---- candidates for t+1 ------------------------------------------------------------
        VmW = Signal(T, name="v_minus_w")
        VpW = Signal(T, name="v_plus_w")
        m.d.comb += [VmW.eq(V - W), VpW.eq(V + W)]
        # Keys two cycles ahead (for t+2, computed in t from registers, one carry chain each):
        # KK kept in t and t+1, KP kept then granted, PK granted then kept, PP granted twice.
        # The winner of t picks which pair becomes key_keep / key_pop for t+1.
        def is_burst(k):
            return (k == 10) | (k == 11)
        cand = {}
        for i in range(n):
            q = slots[i]
            ing_i = Signal(name=f"ing_for_{i}")
            m.d.comb += ing_i.eq(ing_valid & (ing_tenant == i))
            # the queue of t+1 as it will be after the ingress entry is written
            entering = ing_for(i)
            pos = [{f: Mux(at_least(i, k + 1), q[min(k, D - 1)][f], entering[f]) for f, _ in fields}
                   for k in range(3)]
            burst_now, burst_next_kept, burst_next_popped = is_burst(key[i]), is_burst(key_keep[i]), \
                is_burst(key_pop[i])
            conf = {sc: [] for sc in ("KK", "KP", "PK", "PP")}
            for b, field, plus in ((0, "cc", "ccp"), (1, "cp", "cpp")):
                zz, cc_, cu = zu[b][i], cpt[b][i], cptu[b][i]
                kk = _le(pos[0][field], zz, G) & _le(pos[0][field], cc_, G)
                kp_charged = _le(pos[1][field], zz, G) & _le(pos[1][field], cu, G)
                ok2 = _le(pos[1][field], q[0][plus], G)              # x2 <= tau
                pk_charged = _le(pos[1][field], zz, G) & ok2
                pp_charged = _le(pos[2][field], zz, G)
                if b == 0:
                    kp = Mux(burst_next_kept, pos[1]["minc"], kp_charged)
                    pk = Mux(burst_now, pos[1]["min2"] & ok2, pk_charged)
                    pp = Mux(burst_next_popped, pos[2]["minc"],
                             Mux(burst_now, pos[1]["minc"] & pos[2]["minc"], pp_charged))
                else:
                    kp, pk, pp = kp_charged, pk_charged, pp_charged
                for sc, v in (("KK", kk), ("KP", kp), ("PK", pk), ("PP", pp)):
                    bit = Signal(name=f"conf_{sc}_{'cp'[b]}_{i}")
                    m.d.comb += bit.eq(v)
                    conf[sc].append(bit)
            head = {"KK": pos[0], "KP": pos[1], "PK": pos[1], "PP": pos[2]}
            start = {"KK": S[i], "KP": fin[i], "PK": fin[i], "PP": nxt[i]}
            key2 = {}
            for sc in conf:
                old = urgency_on & _le(head[sc]["ts"], deadline2, TS)
                elig = _le(start[sc], V, T)
                cc2, cp2 = conf[sc]
                key2[sc] = _key(m, f"key_{sc}_{i}", cc2 & cp2 & old, cc2, cp2, elig, self.prio[i])
            m.d.sync += [key_keep[i].eq(Mux(win[i], key2["PK"], key2["KK"])),
                         key_pop[i].eq(Mux(win[i], key2["PP"], key2["KP"]))]
            key_k, key_p = key_keep[i], key_pop[i]
            cc_k = _credit_class(m, f"ccls_keep_{i}", key_k, self.prio[i], self.bulk)
            cc_p = _credit_class(m, f"ccls_pop_{i}", key_p, self.prio[i], self.bulk)
            act_k = at_least(i, 1) & (key_k != IDLE_KEY) & (cc_k & hc_next).any()
            act_p = at_least(i, 2) & (key_p != IDLE_KEY) & (cc_p & hc_next).any()
            e2 = q[1] if D > 1 else q[0]
            cand[i] = dict(key_k=key_k, key_p=key_p, ts_k=q[0]["ts"], ts_p=e2["ts"], ing=ing_i)
            m.d.sync += [key[i].eq(Mux(win[i], key_p, key_k)), ccls[i].eq(Mux(win[i], cc_p, cc_k)),
                         *[active_copies[g][i].eq(Mux(wins[g][i], act_p, act_k)) for g in copies]]

        # ---- next pair bits, chosen by the winner -----------------------------------------------
        def order_less(a_key, a_ts, a_fin, b_key, b_ts, b_fin):
            return Mux((a_key == 0) & (b_key == 0), _lt(a_ts, b_ts, TS), _lt(a_fin, b_fin, T))
        for hi, lo in pair_copies["sel"]:
            a, b = cand[hi], cand[lo]
            # (neither, hi, lo wins) candidates of each bit, computed once for all copies
            cands = [(a["key_k"] < b["key_k"], a["key_p"] < b["key_k"], a["key_k"] < b["key_p"]),
                     (a["key_k"] == b["key_k"], a["key_p"] == b["key_k"], a["key_k"] == b["key_p"]),
                     (order_less(a["key_k"], a["ts_k"], fin[hi], b["key_k"], b["ts_k"], fin[lo]),
                      order_less(a["key_p"], a["ts_p"], nxt[hi], b["key_k"], b["ts_k"], fin[lo]),
                      order_less(a["key_k"], a["ts_k"], fin[hi], b["key_p"], b["ts_p"], nxt[lo]))]
            named = []
            for what, trio in zip(("less", "equal", "order"), cands):
                sigs = [Signal(name=f"{what}_if_{case}_{hi}_{lo}") for case in ("neither", "hi", "lo")]
                m.d.comb += [sig.eq(v) for sig, v in zip(sigs, trio)]
                named.append(sigs)
            for g in copies:
                w_hi, w_lo = wins[g][hi], wins[g][lo]
                m.d.sync += [reg.eq(Mux(w_hi, hi_, Mux(w_lo, lo_, neither)))
                             for reg, (neither, hi_, lo_) in zip(pair_copies[g][hi, lo], named)]

        # ---- per-tenant state updates ----------------------------------------------------------
        for i in range(n):
            q, h = slots[i], slots[i][0]
            e2 = q[1] if D > 1 else q[0]
            e3 = q[2] if D > 2 else e2
            ing_i = cand[i]["ing"]
            w, w_queue = wins["state"][i], wins["queue"][i]
            # queue: shift on a win, the ingress entry appended behind the last entry
            for k in range(D):
                after_pop = q[k + 1] if k + 1 < D else q[k]
                write = ing_i & Mux(w_queue, exactly(i, k + 1), exactly(i, k))
                entering = ing_for(i)
                for f, _ in fields:
                    m.d.sync += q[k][f].eq(Mux(write, entering[f], Mux(w_queue, after_pop[f], q[k][f])))
            with m.If(ing_i & ~w):
                m.d.sync += occ[i].eq(Cat(C(1, 1), occ[i][:-1]))
            with m.Elif(w & ~ing_i):
                m.d.sync += occ[i].eq(Cat(occ[i][1:], C(0, 1)))
            # tags (spec §6.4 clamps; the winner's start tag is its finish tag)
            low_b = _lt(S[i], VmW, T)
            low_e = _lt(S[i], V, T)
            high = _lt(VpW, S[i], T)
            q_sel = Mux(at_least(i, 2), q12[i], ing_qsum)
            c3 = Mux(at_least(i, 3), e3["cost"], ing["cost"])
            c2 = Mux(at_least(i, 2), e2["cost"], ing["cost"])
            with m.If(w):
                m.d.sync += [S[i].eq(fin[i]), fin[i].eq(Mux(at_least(i, 2), nxt[i], fin[i] + ing["cost"])),
                             nxt[i].eq(nxt[i] + c3),
                             q12[i].eq(Mux(at_least(i, 3), e2["cost"] + e3["cost"], ing_qsum))]
            with m.Elif(at_least(i, 1)):
                with m.If(low_b):
                    m.d.sync += [S[i].eq(VmW), fin[i].eq(VmW + h["cost"]), nxt[i].eq(VmW + q_sel)]
                with m.Elif(high):
                    m.d.sync += [S[i].eq(VpW), fin[i].eq(VpW + h["cost"]), nxt[i].eq(VpW + q_sel)]
                with m.Else():
                    m.d.sync += nxt[i].eq(Mux(at_least(i, 2), nxt[i], fin[i] + c2))
                m.d.sync += q12[i].eq(q_sel)
            with m.Elif(ing_i):
                m.d.sync += fin[i].eq(S[i] + ing["cost"])
            with m.Else():
                with m.If(low_e):
                    m.d.sync += S[i].eq(V)
                with m.Elif(high):
                    m.d.sync += S[i].eq(VpW)
            # GCRA: a grant charges (or, burst, empties the committed bucket); otherwise the floor
            for b, field in ((0, "cc"), (1, "cp")):
                fl = _lt(cpt[b][i], z[b][i], G)
                burst = (key[i] == 10) | (key[i] == 11)
                plus = "ccp" if b == 0 else "cpp"
                with m.If(init):
                    m.d.sync += [z[b][i].eq(taus[b][i] + ONE), zu[b][i].eq(taus[b][i] + 2 * ONE),
                                 cpt[b][i].eq(taus[b][i]), cptu[b][i].eq(taus[b][i] + ONE)]
                with m.Elif(w):
                    m.d.sync += [cpt[b][i].eq(h[plus]), cptu[b][i].eq(h[plus] + ONE)]
                    if b == 0:
                        m.d.sync += [z[b][i].eq(Mux(burst, h[field] + 2 * ONE, z[b][i] + ONE)),
                                     zu[b][i].eq(Mux(burst, h[field] + 3 * ONE, z[b][i] + 2 * ONE))]
                    else:
                        m.d.sync += [z[b][i].eq(z[b][i] + ONE), zu[b][i].eq(z[b][i] + 2 * ONE)]
                with m.Else():      # the floor: the comparison and both sums side by side
                    m.d.sync += [z[b][i].eq(Mux(fl, cptu[b][i], z[b][i] + ONE)),
                                 zu[b][i].eq(Mux(fl, cptu[b][i] + ONE, zu[b][i] + ONE))]
            m.d.comb += self.full[i].eq(occ[i][D - 1] | (occ[i][D - 2] & ing_i))

        # ---- channel: credit class and work of the winner, V, vmin ------------------------------
        m.d.sync += sel_q.eq(Cat(*[Cat(*[win[i] & ccls[i][k] for i in range(n)]).any()
                                   for k in range(CREDIT_CLASSES)]))
        m.d.sync += served_q.eq(Cat(*[Cat(*[win[i] & slots[i][0]["srv"][b] for i in range(n)]).any()
                                      for b in range(SRV_BITS)]))
        level = [(S[i], occ[i][0]) for i in range(n)]
        stage = 0
        while len(level) > 1:
            nxt_level = []
            for j in range(0, len(level), 2):
                (a, va), (b, vb) = level[j], level[j + 1] if j + 1 < len(level) else (level[j][0], C(0, 1))
                val = Signal(T, name=f"vmin_{stage}_{j // 2}")
                ok = Signal(name=f"vmin_valid_{stage}_{j // 2}")
                take_b = vb & (~va | _lt(b, a, T))
                m.d.sync += [val.eq(Mux(take_b, b, a)), ok.eq(va | vb)]
                nxt_level.append((val, ok))
            level, stage = nxt_level, stage + 1
        vmin, vmin_ok = level[0]
        vs = Signal(T, name="v_plus_served")
        m.d.comb += vs.eq(V + served_q)
        m.d.sync += V.eq(Mux(vmin_ok & _lt(vs, vmin, T), vmin, vs))
        return m
