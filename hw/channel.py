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
queue competes and the oldest head wins. Buckets refill every cycle (and
start full when a tenant is enabled); the
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
* per tenant, from registers only (:mod:`kvfabric.hw.keys`): every "if
  granted" and "if not granted" next value of the level, peak and tag, and
  next cycle's key for both outcomes (the head after a pop or the same head),
  under the configuration and V of the next cycle;
* final two-way choices selected by the one-hot winner: next state, next
  key, queue pops, grant register.

V, served and vmin are per-channel registers updated from registers only.

One method per spec rule: ``_ingress_and_queues`` (§4), ``_selection``
(§6.2 with §6.6's gate and ``_run_gate``, the bulk run's), ``_update_state``
(§6.3-§6.4 registers), ``_load_grant`` (§6.2's grant register),
``_count_credits`` (§6.6), ``_count_run`` (§6.2's bulk run),
``_virtual_time``, ``_update_served`` and ``_update_vmin`` (§6.4).

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

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .fifo import HeadQueue
from .ingress import Ingress
from .keys import ChannelTiming, lt_logic, mod_lt, or_all, shift_lag, sum_mod, tenant_candidates
from .layouts import (Kind, acceptance_layout, grant_signature, queue_entry_layout, request_signature,
                      tenant_config_layout)
from kvfabric.spec import ARRIVAL_PRIO_BITS, BULK_PRIO_BITS, BULK_RUN_BITS, CREDIT_BITS, CREDIT_CLASSES, check_params

from .checks import ChannelView, channel_checks, check_names

__all__ = ["ChannelArbiter", "mod_lt"]


class ChannelArbiter(wiring.Component):
    """One arbitration channel: ingress, N queues, selection, buckets, tags, V.

    Parameters
    ----------
    params : FabricParams
    checks : bool or iterable of str
        Safety properties (:mod:`kvfabric.hw.checks`) to add as ``Assert``
        statements: ``True`` for all of them. Simulation tests and formal
        proofs turn them on; Verilog for synthesis leaves them out.
    fpga : bool
        Write the wide sums and comparisons for an FPGA's carry chains
        instead of for an ASIC's gate delays (issue #42): sums of three or
        more operands as chains of additions rather than carry-save trees
        (:func:`kvfabric.hw.keys.sum_mod`), and ``vmin`` as a tree of
        ``tag_min`` rather than all pairs at once. Every register holds the
        same value in every cycle either way; on the ECP5 the FPGA form is
        about a third smaller. Default ``False`` (the ASIC form).

    Members
    -------
    req : In(request_signature(params))
        Request stream (sink). ``ready`` depends on the payload's tenant (§4).
    grant : Out(grant_signature(params))
        Grant stream (source), driven by the grant register.
    grant_ts : Out(ts_bits)
        Arrival timestamp of the request in the grant register (for SLO telemetry).
    grant_class : Out(3)
        One-hot credit class of the grant in the grant register (bit 0 urgent,
        1 guaranteed, 2 burst; none in fcfs mode), the class it was counted in
        (spec §6.6): the AXI front end returns its credit in that class.
    queue_full : Out(N)
        Bit i: tenant i's occupancy is at least D (§4).
    tenant_cfg : In(tenant_config_layout(params)).array(N)
        Active per-tenant configuration; ``rate`` and ``peak_rate`` are this
        channel's own (the coordinator's registers, spec §13: the active
        ``RATE``/``PEAK_RATE`` while it is off), the rest is shared.
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
    guaranteed_next : In(N)
        Bit i: tenant i's committed rate is not 0 in the next cycle (a head of
        a tenant whose rate is 0 never conforms, spec §6.2), for the same
        reason. The top tests the active ``RATE_i``, which is 0 exactly when
        this channel's rate of §13 is (§13.5).
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
    arrival_prio_next : In(4)
        ``CREDITS.arrival_prio`` in the next cycle: bit p set, conforming heads
        of priority p are ordered oldest first (spec §6.2). Read one cycle
        early because it decides each head's registered key and order value.
    bulk_run : In(8)
        ``CTRL.bulk_run`` in this cycle: the fabric grants in a row a bulk
        tenant keeps while the other bulk tenants' non-urgent heads wait
        (spec §6.2), 0 = off.
    dropped : Out(1)
        Pulse: an invalid request is accepted in this cycle.
    occupancy : Out(range(D + 1)).array(N)
        Entries in queue i plus one if the ingress register holds a request of i.
    accepted : Out(acceptance_layout(params))
        The ingress register: a valid request accepted in the previous cycle,
        its tenant and bytes (the coordinator's demand, spec §13).

    Attributes
    ----------
    dyn_level, dyn_peak, dyn_tag : list of Signal
        Per-tenant dynamic state registers (spec §5).
    vt, served, vmin, vmin_valid : Signal
        Per-channel virtual-time registers (spec §6.4); ``served`` is the sum
        of the registers ``served_floor`` and ``served_up``.
    inflight : list of Signal
        Per-channel credit counters ``inflight_k`` (spec §6.6).
    run_tenant, run_count : Signal
        The bulk run (spec §6.2): the tenant of the last bulk fabric grant
        and its bulk grants in a row (0: no run yet, saturating).
    """

    def __init__(self, params, *, checks=False, fpga=False):
        self._params = check_params(params)
        self._checks = check_names(checks)
        self._fpga = bool(fpga)
        p = params
        n = p.tenants
        super().__init__({
            "req":          In(request_signature(p)),
            "grant":        Out(grant_signature(p)),
            "grant_ts":     Out(p.ts_bits),
            "grant_class":  Out(CREDIT_CLASSES),
            "queue_full":   Out(n),
            "tenant_cfg":   In(tenant_config_layout(p)).array(n),
            "burst_level":  In(p.level_bits).array(n),
            "fcfs_bypass":  In(1),
            "fcfs_bypass_next":  In(1),
            "starve_limit_next": In(p.starve_bits),
            "now_next":     In(p.ts_bits),
            "priority_next": In(p.priority_bits).array(n),
            "guaranteed_next": In(n),
            "now":          In(p.ts_bits),
            "credit_limit": In(CREDIT_BITS).array(CREDIT_CLASSES),
            "credit_limit_next": In(CREDIT_BITS).array(CREDIT_CLASSES),
            "credit_return": In(CREDIT_CLASSES),
            "bulk_prio_next": In(BULK_PRIO_BITS),
            "arrival_prio_next": In(ARRIVAL_PRIO_BITS),
            "bulk_run":     In(BULK_RUN_BITS),
            "dropped":      Out(1),
            "occupancy":    Out(range(p.queue_depth + 1)).array(n),
            "accepted":     Out(acceptance_layout(p)),
        })
        self.dyn_level = [Signal(p.level_bits, name=f"dyn_level_{i}") for i in range(n)]
        self.dyn_peak = [Signal(p.peak_bits, name=f"dyn_peak_{i}") for i in range(n)]
        self.dyn_tag = [Signal(p.tag_bits, name=f"dyn_tag_{i}") for i in range(n)]
        self.vt = Signal(p.tag_bits, name="vt")
        # served is held as floor(s / TAG_UNIT) and the rounding bit, so no
        # increment follows the grant multiplexer; V adds the bit as a
        # carry-in. ``served`` is their sum (spec §6.4's value).
        self.served_floor = Signal(p.bytes_bits - p.tag_shift, name="served_floor")
        self.served_up = Signal(name="served_up")
        self.served = Signal(p.served_bits, name="served")
        self.vmin = Signal(p.tag_bits, name="vmin")
        self.vmin_valid = Signal(name="vmin_valid")
        self.inflight = [Signal(CREDIT_BITS, name=f"inflight_{k}") for k in range(CREDIT_CLASSES)]
        self.run_tenant = Signal(p.tenant_bits, name="run_tenant")
        self.run_count = Signal(BULK_RUN_BITS, name="run_count")

    @property
    def params(self):
        return self._params

    def elaborate(self, platform):
        p = self._params
        n = p.tenants
        m = Module()
        ingress, queues = self._ingress_and_queues(m)
        grant, load = self._grant_port(m)
        vt_lo, vt_hi = self._virtual_time(m)
        starve_on_next = self._starvation_guard(m)

        # Selection keys are registers (spec §11): ``key_*`` hold the key,
        # order value and conformance of the current head, computed in the
        # previous cycle for both outcomes of that cycle's selection.
        timing = ChannelTiming(
            vt=self.vt, vt_lo=vt_lo, vt_hi=vt_hi, fcfs=self.fcfs_bypass, fcfs_next=self.fcfs_bypass_next,
            starve_on_next=starve_on_next, now_next=self.now_next, starve_limit_next=self.starve_limit_next,
            carry_save=not self._fpga)
        fill = self._enabled_now(m)
        push_cost = (ingress.push_cost_floor, ingress.push_cost_up)
        tenants = [tenant_candidates(m, p, i, timing, cfg=self.tenant_cfg[i], q=queues[i], push_cost=push_cost,
                                      level=self.dyn_level[i], peak=self.dyn_peak[i], tag=self.dyn_tag[i],
                                      burst_level=self.burst_level[i], priority_next=self.priority_next[i],
                                      guaranteed_next=self.guaranteed_next[i],
                                      bulk_prio_next=self.bulk_prio_next,
                                      arrival_prio_next=self.arrival_prio_next, fill=fill[i])
                   for i in range(n)]

        win, picks, any_win, has_credit = self._selection(m, tenants, load)
        pops, fab_wins = self._update_state(m, tenants, queues, picks)
        w_bytes, w_tenant = self._load_grant(m, grant, load, tenants, win, any_win)
        self._count_credits(m, tenants, fab_wins, has_credit)
        self._count_run(m, tenants, fab_wins, w_tenant)
        self._update_served(m, w_bytes, load)
        self._update_vmin(m, [t.head_valid for t in tenants])

        channel_checks(m, p, ChannelView(
            win=win, fab_win=fab_wins, pop=pops, head_valid=[t.head_valid for t in tenants],
            queue_level=[q.level for q in queues], occupancy=list(self.occupancy),
            level=self.dyn_level, peak=self.dyn_peak, tag=self.dyn_tag,
            capacity=[self.tenant_cfg[i].capacity for i in range(n)],
            rate=[self.tenant_cfg[i].rate for i in range(n)], vt=self.vt,
            inflight=self.inflight, credit_limit=list(self.credit_limit),
            has_credit=has_credit, load=load, grant_valid=grant.valid, grant_tenant=grant.tenant,
            grant_kind=grant.kind), self._checks)
        return m

    def _ingress_and_queues(self, m):
        """Spec §4: the ingress register (cost, timestamp, validity) and the N
        per-tenant queues with their occupancy, ``ready`` and ``queue_full``."""
        p = self._params
        D = p.queue_depth
        m.submodules.q_ingress = ingress = Ingress(p, fpga=self._fpga)
        wiring.connect(m, wiring.flipped(self.req), ingress.req)
        m.d.comb += [
            ingress.now.eq(self.now),
            self.dropped.eq(ingress.dropped),
            self.accepted.valid.eq(ingress.push_valid),
            self.accepted.tenant.eq(ingress.push_tenant),
            self.accepted.bytes.eq(ingress.push_entry.bytes),
        ]
        queues = []
        for i in range(p.tenants):
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
        return ingress, queues

    def _enabled_now(self, m):
        """Spec §6.3's start: tenant i is enabled in this cycle (``enable`` is
        1 and was 0 in the previous cycle), so its buckets are full at t+1.
        ``cfg_enable_prev_i`` is the previous cycle's ``enable`` (reset 0)."""
        fill = []
        for i in range(self._params.tenants):
            enable = self.tenant_cfg[i].enable
            prev = Signal(name=f"cfg_enable_prev_{i}")
            f = Signal(name=f"bucket_fill_{i}")
            m.d.sync += prev.eq(enable)
            m.d.comb += f.eq(enable & ~prev)
            fill.append(f)
        return fill

    def _grant_port(self, m):
        """Spec §2: the grant register drives the grant port; ``load`` (§6.2)
        says it takes a new winner this cycle."""
        p = self._params
        g = _GrantRegister(
            valid=Signal(name="grant_valid"),
            tenant=Signal(p.tenant_bits, name="grant_tenant"),
            bytes=Signal(p.bytes_bits, name="grant_bytes"),
            id=Signal(p.id_width, name="grant_id"),
            kind=Signal(Kind, name="grant_kind"),
            ts=Signal(p.ts_bits, name="grant_ts_r"),
            credit=Signal(CREDIT_CLASSES, name="grant_credit"))
        m.d.comb += [
            self.grant.valid.eq(g.valid),
            self.grant.payload.tenant.eq(g.tenant),
            self.grant.payload.bytes.eq(g.bytes),
            self.grant.payload.id.eq(g.id),
            self.grant.payload.kind.eq(g.kind),
            self.grant_ts.eq(g.ts),
            self.grant_class.eq(g.credit),
        ]
        load = Signal()
        m.d.comb += load.eq(~g.valid | self.grant.ready)
        return g, load

    def _virtual_time(self, m):
        """Spec §6.4: V at t+1 from registers only, and the clamp bounds
        ``V ∓ LAG_WINDOW``. Next cycle's eligibility is taken against V at t
        (spec §6.2), the register itself, so V's choice stays off the keys."""
        p = self._params
        T = p.tag_bits
        vt, vmin, vmin_valid = self.vt, self.vmin, self.vmin_valid
        s_floor, s_up = self.served_floor, self.served_up
        v_sum = Signal(T, name="vt_sum")
        vt_take_min = Signal(name="vt_take_min")
        vt_next = Signal(T, name="vt_next")
        # tag_lt(V + served, vmin) is the top bit of V + served - vmin: one
        # carry-save level and one chain beside V + served, not behind it;
        # served's rounding bit is a carry-in of both.
        m.d.comb += [
            v_sum.eq(vt + s_floor + s_up),
            vt_take_min.eq(vmin_valid & sum_mod(m, "vt_sum_minus_vmin", [vt, s_floor], [vmin], T,
                                                ones=[s_up], carry_save=not self._fpga)[T - 1]),
            vt_next.eq(Mux(vt_take_min, vmin, v_sum)),
        ]
        m.d.sync += vt.eq(vt_next)

        # keys.shift_lag and keys.lag_position rely on LAG_WINDOW = 2^(T-3).
        assert p.lag_window == 1 << (T - 3)
        vt_lo = Signal(T, name="vt_minus_lag")
        vt_hi = Signal(T, name="vt_plus_lag")
        m.d.comb += [vt_lo.eq(shift_lag(vt, -1)), vt_hi.eq(shift_lag(vt, 1))]
        return vt_lo, vt_hi

    def _starvation_guard(self, m):
        """Spec §6.2's starvation guard for next cycle's keys: on when
        ``starve_limit != 0``. A head is old at t+1 when ``ts_le(ts, now -
        starve_limit)``, one three-operand sum per head (keys.next_key)."""
        starve_on_next = Signal(name="starve_on_next")
        m.d.comb += starve_on_next.eq(self.starve_limit_next != 0)
        return starve_on_next

    def _run_gate(self, m, tenants, credit_ok):
        """Spec §6.2's bulk run: per tenant, whether the run holds its head out
        of this cycle's selection. While ``0 < run_count < bulk_run`` and the
        run tenant is bulk and its head competes with credit, every other bulk
        tenant's non-urgent head (key 0 is urgent, §11) waits. Registers and
        one credit LUT in, beside the pair comparisons."""
        n = self._params.tenants
        bulk = [t.key_bulk for t in tenants]
        is_run = [Signal(name=f"run_is_{i}") for i in range(n)]
        holds = Signal(name="run_holds")
        m.d.comb += [is_run[i].eq(self.run_tenant == i) for i in range(n)]
        m.d.comb += holds.eq(~self.fcfs_bypass & (self.run_count != 0) & (self.run_count < self.bulk_run)
                             & or_all(is_run[i] & bulk[i] & tenants[i].key_competes & credit_ok[i]
                                      for i in range(n)))
        gate = []
        for i in range(n):
            g = Signal(name=f"run_gate_{i}")
            m.d.comb += g.eq(holds & bulk[i] & ~is_run[i] & (tenants[i].key_class != 0))
            gate.append(g)
        return gate

    def _count_run(self, m, tenants, fab_wins, w_tenant):
        """Spec §6.2: a fabric grant to a bulk tenant (``fab_wins``: per
        tenant, it wins with ``load`` in fabric mode; ``w_tenant``, the grant
        multiplexer's winner index) extends its run (the count saturates at
        2^8 - 1) or starts a new one at 1; other grants leave the run alone."""
        # Per tenant, from registers only: a grant to it would extend the
        # run (it is bulk, the run's tenant, and the run has begun) or start
        # a new one (bulk otherwise); the one-hot winner then picks with one
        # AND-OR each, and the saturating increment is precomputed.
        count, n = self.run_count, len(tenants)
        begun = Signal(name="run_begun")
        inc = Signal(BULK_RUN_BITS, name="run_count_inc")
        m.d.comb += [begun.eq(count != 0),
                     inc.eq(Mux(count != (1 << BULK_RUN_BITS) - 1, count + 1, count))]
        extends = [tenants[i].key_bulk & (self.run_tenant == i) & begun for i in range(n)]
        starts = [tenants[i].key_bulk & ~((self.run_tenant == i) & begun) for i in range(n)]
        w_ext = Signal(name="run_winner_extends")
        w_new = Signal(name="run_winner_starts")
        m.d.comb += [
            w_ext.eq(or_all(fab_wins[i] & extends[i] for i in range(n))),
            w_new.eq(or_all(fab_wins[i] & starts[i] for i in range(n))),
        ]
        with m.If(w_ext):
            m.d.sync += count.eq(inc)
        with m.Elif(w_new):
            m.d.sync += [self.run_tenant.eq(w_tenant), count.eq(1)]

    def _selection(self, m, tenants, load):
        """Spec §6.2 with §6.6's credit gate and the bulk run's: the one-hot
        winner from the registered keys by all-pairs comparison (spec §11).
        Also returns, per tenant, ``(pop, fabric win)``: the winner's AND
        with ``load`` and with ``load & ~fcfs_bypass`` folded in, so that the
        signals that select every next-state register of a tenant leave the
        AND itself, not a gate behind the winner (issue #42)."""
        p = self._params
        n = p.tenants
        W = max(p.tag_bits, p.ts_bits)
        key = [t.key_class for t in tenants]
        order = [t.key_order for t in tenants]
        # first[hi][lo] (hi > lo): tenant hi strictly precedes tenant lo.
        # Within a key, class 0 orders by timestamp and the others by finish
        # tag: one comparator per pair on the order value (spec §11).
        first = {}
        for hi in range(n):
            for lo in range(hi):
                tie = Signal(name=f"tie_first_{hi}_{lo}")
                m.d.comb += tie.eq(mod_lt(order[hi], order[lo], W))
                f = Signal(name=f"first_{hi}_{lo}")
                m.d.comb += f.eq(lt_logic(key[hi], key[lo]) | ((key[hi] == key[lo]) & tie))
                first[hi, lo] = f

        # Credits (spec §6.6): has_credit[k] is a register, computed in the
        # previous cycle for both outcomes of that cycle's count (see
        # _count_credits); each head's credit class is a one-hot register
        # beside its key (key_credit_i: bit 0 urgent, 1 guaranteed, 2 burst,
        # all clear in FCFS mode, where credits are not checked). So a head's
        # credit test is one LUT of registers.
        has_credit = [Signal(name=f"key_has_credit_{k}", init=1) for k in range(CREDIT_CLASSES)]
        has_class_credit = []
        for i in range(n):
            ok = Signal(name=f"credit_ok_{i}")
            m.d.comb += ok.eq(~(tenants[i].key_credit & ~Cat(*has_credit)).any())
            has_class_credit.append(ok)
        # A head the bulk run holds out is treated as one without credit:
        # it neither wins nor keeps another head from winning.
        gate = self._run_gate(m, tenants, has_class_credit)
        credit_ok = []
        for i in range(n):
            ok = Signal(name=f"select_ok_{i}")
            m.d.comb += ok.eq(has_class_credit[i] & ~gate[i])
            credit_ok.append(ok)

        win, picks = [], []
        for i in range(n):
            # A non-competing j has key 15 and comes after any competing i; a
            # j without credit precedes nobody.
            terms = [tenants[i].key_competes & credit_ok[i]]
            terms += [first[i, lo] | ~credit_ok[lo] for lo in range(i)]
            terms += [~(first[hi, i] & credit_ok[hi]) for hi in range(i + 1, n)]
            w = Signal(name=f"win_{i}")
            pop = Signal(name=f"pop_{i}")
            fab_win = Signal(name=f"fab_win_{i}")
            m.d.comb += [
                w.eq(Cat(*terms).all()),
                pop.eq(Cat(*terms, load).all()),
                fab_win.eq(Cat(*terms, load, ~self.fcfs_bypass).all()),
            ]
            win.append(w)
            picks.append((pop, fab_win))
        any_win = Signal()
        m.d.comb += any_win.eq(Cat(*win).any())
        return win, picks, any_win, has_credit

    def _update_state(self, m, tenants, queues, picks):
        """Spec §6.3-§6.4 for every tenant: the winner pops its queue and takes
        its "if granted" level, peak, tag and next key; everyone else the
        "if not granted" ones (all precomputed by tenant_candidates).
        ``picks``: per tenant, it wins with ``load`` (pops) and in fabric
        mode besides (from :meth:`_selection`)."""
        pops, fab_wins = [], []
        for i, t in enumerate(tenants):
            pop, fab_win = picks[i]
            pops.append(pop)
            fab_wins.append(fab_win)
            m.d.comb += queues[i].r_en.eq(pop)
            # The precomputed key of the head this tenant has next cycle.
            nxt = Mux(pop, Cat(*t.key_next_pop), Cat(*t.key_next_keep))
            m.d.sync += Cat(t.key_competes, t.key_class, t.key_order, t.key_conform, t.key_finish,
                            t.key_credit).eq(nxt)
            with m.If(fab_win):
                m.d.sync += [
                    self.dyn_level[i].eq(t.lvl_win),
                    self.dyn_peak[i].eq(t.pk_win),
                    self.dyn_tag[i].eq(t.key_finish),
                ]
            with m.Else():
                m.d.sync += [
                    self.dyn_level[i].eq(t.lvl_idle),
                    self.dyn_peak[i].eq(t.pk_idle),
                    self.dyn_tag[i].eq(t.tag_idle),
                ]
        return pops, fab_wins

    def _load_grant(self, m, g, load, tenants, win, any_win):
        """Spec §6.2's grant register write: a one-hot AND-OR multiplexer of
        the heads and the winner's kind. Returns the winner's byte count and
        tenant index (the bulk run counts it, spec §6.2)."""
        p = self._params
        n = p.tenants
        heads = [t.head for t in tenants]
        key = [t.key_class for t in tenants]
        w_bytes = Signal(p.bytes_bits)
        w_id = Signal(p.id_width)
        w_ts = Signal(p.ts_bits)
        w_tenant = Signal(p.tenant_bits)
        w_conf = Signal()
        w_urgent = Signal()
        m.d.comb += [
            w_urgent.eq(or_all(win[i] & (key[i] == 0) for i in range(n))),
            w_bytes.eq(or_all(win[i].replicate(p.bytes_bits) & heads[i].bytes for i in range(n))),
            w_id.eq(or_all(win[i].replicate(p.id_width) & heads[i].id for i in range(n))),
            w_ts.eq(or_all(win[i].replicate(p.ts_bits) & heads[i].ts for i in range(n))),
            w_tenant.eq(or_all(win[i].replicate(p.tenant_bits) & i for i in range(n))),
            w_conf.eq(or_all(win[i] & tenants[i].key_conform for i in range(n))),
        ]
        # The payload is captured on every load (it is all zeros without a
        # winner and then irrelevant): only the valid bit waits for any_win.
        with m.If(load):
            m.d.sync += [
                g.valid.eq(any_win),
                g.tenant.eq(w_tenant),
                g.bytes.eq(w_bytes),
                g.id.eq(w_id),
                g.ts.eq(w_ts),
                # The class the winner is counted in (spec §6.6); a head's
                # key_credit is all clear in fcfs mode.
                g.credit.eq(or_all(win[i].replicate(CREDIT_CLASSES) & tenants[i].key_credit
                                   for i in range(n))),
            ]
            with m.If(self.fcfs_bypass):
                m.d.sync += g.kind.eq(Kind.FCFS)
            with m.Elif(w_urgent):
                m.d.sync += g.kind.eq(Kind.URGENT)
            with m.Elif(w_conf):
                m.d.sync += g.kind.eq(Kind.GUARANTEED)
            with m.Else():
                m.d.sync += g.kind.eq(Kind.BURST)
        return w_bytes, w_tenant

    def _count_credits(self, m, tenants, fab_wins, has_credit):
        """Spec §6.6: ``inflight_k`` at t+1 = ``sat255(inflight_k + sel_k) -
        ret_k``; a fabric-mode winner is counted in its class when it is
        selected; a return with nothing in flight (after the increment) is
        ignored. Both outcomes of ``sel_k``, and ``has_credit_k`` of the next
        cycle under the next limits for each, come from registers and the
        return input; the winner only chooses (``sat255(x + 1)`` is never 0,
        so a return always counts after a selection)."""
        n = self._params.tenants
        for k in range(CREDIT_CLASSES):
            cnt = self.inflight[k]
            ret = self.credit_return[k]
            limit = self.credit_limit_next[k]
            sel_k = Signal(name=f"credit_sel_{k}")
            # A fabric-mode winner with load is selected (``fab_wins``, one
            # AND of the winner's terms: no OR of the winners behind it).
            m.d.comb += sel_k.eq(or_all(fab_wins[i] & tenants[i].key_credit[k] for i in range(n)))
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

    def _update_served(self, m, w_bytes, load):
        """Spec §6.4's work term: ``served(s) = ceil(s / TAG_UNIT)`` of a
        fabric-mode winner, zero without one. Computed behind the grant
        multiplexer: per head before it cost about 2000 LUT4s on ECP5
        (synthesis duplicated selection logic per bit). Held as
        ``floor(s / TAG_UNIT)`` and ``s mod TAG_UNIT != 0`` (``served_floor``,
        ``served_up``): no increment behind the multiplexer."""
        p = self._params
        m.d.comb += self.served.eq(self.served_floor + self.served_up)
        with m.If(load & ~self.fcfs_bypass):
            m.d.sync += [self.served_floor.eq(w_bytes >> p.tag_shift),
                         self.served_up.eq(w_bytes[:p.tag_shift] != 0)]
        with m.Else():
            m.d.sync += [self.served_floor.eq(0), self.served_up.eq(0)]

    def _update_vmin(self, m, head_valid):
        """Spec §6.4's ``vmin``: ``tag_min`` over the backlogged tenants' start
        tags. All pairs of tags are compared at once (N(N-1)/2 comparators)
        and the minimum taken by a one-hot AND-OR multiplexer: tenant i is
        chosen when it is backlogged and its tag is below every earlier
        backlogged tag and at most every later one. One comparator and one
        multiplexer deep instead of a tree of log2(N) comparator-multiplexer
        levels (issue #42: the tree was the channel's longest path on ASAP7).
        Within the half range (§6.5) the comparison is a total preorder, so
        exactly one backlogged tenant is chosen, the same tag as any order of
        ``tag_min`` gives. Off the selection loop. With ``fpga``: a balanced
        tree of ``tag_min`` (N - 1 comparators), the same tag."""
        p = self._params
        T, n = p.tag_bits, p.tenants
        tags = self.dyn_tag
        if self._fpga:
            self._update_vmin_tree(m, head_valid)
            return
        # lt[a, b]: tag_a < tag_b (tag_lt): one subtraction per pair; the
        # other order is "not below and not equal", which is tag_lt(b, a)
        # wherever the two are less than half the range apart (§6.5).
        lt = {}
        for i in range(n):
            for j in range(i + 1, n):
                i_lt_j = Signal(name=f"vmin_lt_{i}_{j}")
                j_lt_i = Signal(name=f"vmin_lt_{j}_{i}")
                m.d.comb += [i_lt_j.eq(mod_lt(tags[i], tags[j], T)),
                             j_lt_i.eq(~i_lt_j & (tags[i] != tags[j]))]
                lt[i, j], lt[j, i] = i_lt_j, j_lt_i
        pick = []
        for i in range(n):
            # Earlier tenants must not be at or below tag_i, later ones not below it.
            terms = [head_valid[i]]
            terms += [~head_valid[j] | lt[i, j] for j in range(i)]
            terms += [~head_valid[j] | ~lt[j, i] for j in range(i + 1, n)]
            sel = Signal(name=f"vmin_pick_{i}")
            m.d.comb += sel.eq(Cat(*terms).all())
            pick.append(sel)
        any_valid = Signal(name="vmin_any")
        m.d.comb += any_valid.eq(Cat(*head_valid).any())
        min_tag = or_all(pick[i].replicate(T) & tags[i] for i in range(n))
        m.d.sync += [
            self.vmin.eq(min_tag),
            self.vmin_valid.eq(any_valid),
        ]


    def _update_vmin_tree(self, m, head_valid):
        """``vmin`` as a balanced tree of ``tag_min`` (N - 1 comparators and
        multiplexers, log2 N deep): the FPGA form of :meth:`_update_vmin`."""
        p = self._params
        T = p.tag_bits
        nodes = [(head_valid[i], self.dyn_tag[i]) for i in range(p.tenants)]
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
            self.vmin.eq(Mux(any_valid, min_tag, 0)),
            self.vmin_valid.eq(any_valid),
        ]


@dataclass
class _GrantRegister:
    """The grant register's fields (spec §6.2: ``G``)."""

    valid: Signal
    tenant: Signal
    bytes: Signal
    id: Signal
    kind: Signal
    ts: Signal
    credit: Signal
