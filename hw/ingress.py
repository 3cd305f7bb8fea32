"""Ingress stage of one channel (spec §4): request check, ingress register, cost.

A request is accepted in cycle a when ``valid & ready``. An invalid request
(tenant >= N, tenant disabled, 0 bytes or more than LMAX) is always ready and is
dropped. A valid request is ready when its tenant has room (``room``, computed
by the channel from registers only) and is written to the ingress register at
a together with the product ``bytes * inv_weight`` (the tenant's weight at a).
During a+1 the product is rounded up to the ``cost`` and the request is pushed
into its tenant's queue: the multiply sits between the port and the ingress
register, two cycles before the request can be selected, so that neither it
nor the rounding is on a path into the channel's precomputed finish tags
(spec §4, §11).
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .keys import sum_mod
from .layouts import queue_entry_layout, request_signature
from kvfabric.spec import check_params

__all__ = ["Ingress", "cost_of_product"]


def cost_parts(params, product):
    """``(floor(product / 2^k), low k bits != 0)`` for k = WFRAC + TAG_SHIFT:
    the cost is their sum (spec §3's ceiling), at most 2^15, so the floor
    fits the cost width. An adder that adds the cost to a tag takes the bit
    as its carry-in, so no increment lies in front of it (issue #42: the
    rounding and the finish tag were two carry chains in a row)."""
    shift = params.wfrac + params.tag_shift
    return product[shift:][:params.cost_bits], product[:shift] != 0


def rounds_up(params, bytes_, weight):
    """Whether ``bytes * weight`` has a low ``k = WFRAC + TAG_SHIFT`` bit set
    (:func:`cost_parts`'s bit), from the operands' trailing zeros instead of
    the product: ``2^k`` divides ``b * w`` exactly when ``b``'s low ``j`` bits
    and ``w``'s low ``k - j`` bits are zero for some ``j`` in ``0..k`` (a zero
    operand has all of them), so the bit is an OR of ANDs of prefix-zero
    tests, a few gates beside the multiplier rather than behind it. The
    ingress register holds it, so the finish tags' adders take their carry-in
    from a register (issue #42: the OR of the product's low bits was in
    front of them)."""
    k = params.wfrac + params.tag_shift
    zb = [bytes_[:j] == 0 if j else 1 for j in range(k + 1)]
    zw = [weight[:j] == 0 if j else 1 for j in range(k + 1)]
    divisible = 0
    for j in range(k + 1):
        divisible = divisible | (zb[j] & zw[k - j])
    return ~divisible


def product_of(m, params, bytes_, weight, *, carry_save=True):
    """``bytes * weight`` (spec §4's product at acceptance). ``carry_save``:
    the partial products (``weight << j`` where bit j of ``bytes`` is set) as
    one carry-save tree and one carry chain (:func:`hw.keys.sum_mod`, five
    levels of full adders for 13 rows), the shape a timing-driven flow gives
    a multiplier (issue #42: Yosys maps ``*`` to an array of adders, nine
    XOR levels deep, the channel's longest path from the weight's register);
    otherwise ``*``, which an FPGA maps to its multiplier blocks. The same
    product either way."""
    width = len(bytes_) + len(weight)
    if not carry_save:
        return bytes_ * weight
    rows = [(weight & bytes_[j].replicate(len(weight))) << j for j in range(len(bytes_))]
    return sum_mod(m, "q_in_partial", rows, [], width)


def cost_of_product(params, product):
    """``ceil(product / 2^(WFRAC + TAG_SHIFT))`` truncated to the cost width (spec §3)."""
    floor, up = cost_parts(params, product)
    # ceil(p / 2^k) = floor(p / 2^k) + (low k bits != 0): one increment, no wide add.
    return (floor + up)[:params.cost_bits]


class Ingress(wiring.Component):
    """Request check, ingress register and cost computation of one channel.

    Parameters
    ----------
    params : FabricParams
    fpga : bool
        The product as ``*`` (an FPGA's multiplier blocks) rather than a
        carry-save tree (:func:`product_of`); the same value.

    Members
    -------
    req : In(request_signature(params))
        The channel's request port.
    room : In(N)
        Bit i: tenant i's occupancy is below D (spec §4).
    enable : In(N)
        Active ``enable`` bits of the tenants.
    inv_weight : In(16).array(N)
        Active ``inv_weight`` of the tenants (used at acceptance).
    now : In(ts_bits)
        Current timestamp, stored with an accepted request.
    dropped : Out(1)
        An invalid request is accepted in this cycle.
    push_valid : Out(1)
        The ingress register holds a request (pushed into its queue this cycle).
    push_tenant : Out(4)
    push_entry : Out(queue_entry_layout(params))
        ``{bytes, id, ts, cost}`` to push.
    push_cost_floor, push_cost_up : Out(16), Out(1)
        The pushed cost as :func:`cost_parts`: ``cost = floor + up``.
    """

    def __init__(self, params, *, fpga=False):
        self._params = check_params(params)
        self._fpga = bool(fpga)
        n = params.tenants
        super().__init__({
            "req":         In(request_signature(params)),
            "room":        In(n),
            "enable":      In(n),
            "inv_weight":  In(params.inv_weight_bits).array(n),
            "now":         In(params.ts_bits),
            "dropped":     Out(1),
            "push_valid":  Out(1),
            "push_tenant": Out(params.tenant_bits),
            "push_entry":  Out(queue_entry_layout(params)),
            "push_cost_floor": Out(params.cost_bits),
            "push_cost_up": Out(1),
        })

    @property
    def params(self):
        return self._params

    def elaborate(self, platform):
        p = self._params
        n = p.tenants
        m = Module()

        q_valid = Signal(name="q_in_valid")
        q_tenant = Signal(p.tenant_bits, name="q_in_tenant")
        q_bytes = Signal(p.bytes_bits, name="q_in_bytes")
        q_id = Signal(p.id_width, name="q_in_id")
        q_ts = Signal(p.ts_bits, name="q_in_ts")

        payload = self.req.payload
        tenant_ok = Signal()
        has_room = Signal()
        # Index the per-tenant bits only for in-range tenants: Amaranth's
        # out-of-range bit select would alias the last bit.
        m.d.comb += tenant_ok.eq(0)
        m.d.comb += has_room.eq(0)
        with m.Switch(payload.tenant):
            for i in range(n):
                with m.Case(i):
                    m.d.comb += [tenant_ok.eq(self.enable[i]), has_room.eq(self.room[i])]
        valid_req = Signal()
        m.d.comb += valid_req.eq(tenant_ok & (payload.bytes != 0)
                                 & (payload.bytes <= p.max_request_bytes))
        m.d.comb += [
            self.req.ready.eq(~valid_req | has_room),
            self.dropped.eq(self.req.valid & ~valid_req),
        ]

        # inv_weight of the offered tenant at the acceptance cycle (spec §4).
        weight = Signal(p.inv_weight_bits)
        with m.Switch(payload.tenant):
            for i in range(n):
                with m.Case(i):
                    m.d.comb += weight.eq(self.inv_weight[i])
        q_product = Signal(p.bytes_bits + p.inv_weight_bits, name="q_in_product")
        q_up = Signal(name="q_in_up")

        # Outside the If below: the tree's signals are combinational.
        product = product_of(m, p, payload.bytes, weight, carry_save=not self._fpga)
        accept = self.req.valid & valid_req & has_room
        m.d.sync += q_valid.eq(accept)
        with m.If(accept):
            m.d.sync += [
                q_tenant.eq(payload.tenant),
                q_bytes.eq(payload.bytes),
                q_id.eq(payload.id),
                q_ts.eq(self.now),
                q_product.eq(product),
                q_up.eq(rounds_up(p, payload.bytes, weight)),
            ]

        # The rounding bit is q_in_up, equal to cost_parts's bit of the product.
        floor, _ = cost_parts(p, q_product)
        up = q_up
        m.d.comb += [
            self.push_valid.eq(q_valid),
            self.push_tenant.eq(q_tenant),
            self.push_entry.bytes.eq(q_bytes),
            self.push_entry.id.eq(q_id),
            self.push_entry.ts.eq(q_ts),
            self.push_entry.cost.eq((floor + up)[:p.cost_bits]),
            self.push_cost_floor.eq(floor),
            self.push_cost_up.eq(up),
        ]
        return m
