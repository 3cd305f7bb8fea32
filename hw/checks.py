"""Safety properties of the channel arbiter, as Amaranth ``Assert`` statements.

The statements sit in the sync domain: they are checked at each clock edge
on the settled values of the cycle, never on a combinational transient. The
same statements serve two purposes. Every Amaranth-simulator test builds
its channels with ``checks=True``, so each simulated cycle checks them; and
``kvfabric.scripts.formal`` proves them for every reachable state with
SymbiYosys (k-induction). Generated Verilog for synthesis is built with
``checks=False`` and carries none of them.

Each property is written from spec §4-§6, not from the RTL's own
expressions, and is named so that a proof can select it:

``one_winner``
    At most one tenant wins the selection in a cycle (one grant per channel
    per cycle; the winner is one-hot).
``grant_has_request``
    A tenant wins only while its queue holds a request, and a queue is
    popped only when it is not empty.
``queue_bounds``
    No queue holds more than D entries, counting the ingress register (§4).
``bucket_caps``
    The peak level never exceeds PCAP, and the committed level after a
    cycle never exceeds that cycle's ``capacity`` (§6.3).
``charged_only_when_granted``
    A tenant that did not win in fabric mode loses no tokens: its committed
    level is at least ``min(level, capacity)`` of the previous cycle and its
    peak level at least the previous peak level (§6.3).
``tag_window``
    The start tag of a tenant that did not win lies within ``LAG_WINDOW`` of
    the previous cycle's V (the clamps of §6.4, the bound of §6.5).
``credit_limits``
    A selection never takes a credit class above its limit: with a nonzero
    limit, ``inflight`` after a cycle is at most the larger of its value
    before and the limit (a lowered limit is honoured by waiting, spec §6.6);
    and the registered ``has_credit[k]`` equals its definition from the
    cycle's own registers, ``limit[k] = 0 or inflight[k] < limit[k]`` (the RTL
    computes it one cycle early, spec §11).
``guaranteed_needs_rate``
    A grant of kind guaranteed or urgent goes only to a tenant whose
    committed rate is not 0 in the cycle it is selected: a tenant without a
    guaranteed rate has no guaranteed tokens, however full its committed
    bucket (§6.2).
"""

from dataclasses import dataclass

from amaranth.hdl import Assert, Cat, Mux, Signal

from .layouts import Kind

__all__ = ["PROPERTIES", "ChannelView", "channel_checks", "check_names"]

PROPERTIES = ("one_winner", "grant_has_request", "queue_bounds", "bucket_caps",
              "charged_only_when_granted", "tag_window", "credit_limits", "guaranteed_needs_rate")


def check_names(checks):
    """The property names selected by ``checks``: ``False``/``None`` none, ``True`` all,
    or an iterable of names from :data:`PROPERTIES`."""
    if checks is True:
        return frozenset(PROPERTIES)
    if not checks:
        return frozenset()
    names = frozenset(checks)
    unknown = sorted(names - set(PROPERTIES))
    if unknown:
        raise ValueError(f"Unknown channel check(s) {', '.join(unknown)}; "
                         f"the checks are {', '.join(PROPERTIES)}")
    return names


@dataclass
class ChannelView:
    """The channel's signals the properties read (lists are per tenant)."""

    win: list
    fab_win: list
    pop: list
    head_valid: list
    queue_level: list
    occupancy: list
    level: list
    peak: list
    tag: list
    capacity: list
    rate: list
    vt: Signal
    inflight: list
    credit_limit: list
    has_credit: list
    load: Signal
    grant_valid: Signal
    grant_tenant: Signal
    grant_kind: Signal


def _past(m, value, name):
    """A register holding ``value`` of the previous cycle."""
    reg = Signal.like(value, name=f"chk_past_{name}", reset_less=True)
    m.d.sync += reg.eq(value)
    return reg


def channel_checks(m, p, view: ChannelView, checks):
    """Add the selected properties to module ``m`` of a channel with parameters ``p``."""
    names = check_names(checks)
    if not names:
        return
    n, T, D = p.tenants, p.tag_bits, p.queue_depth
    past_valid = Signal(name="chk_past_valid")
    m.d.sync += past_valid.eq(1)

    if "one_winner" in names:
        wins = Cat(*view.win)
        m.d.sync += Assert((wins & (wins - 1)) == 0, "more than one winner in a cycle")
    if "grant_has_request" in names:
        for i in range(n):
            m.d.sync += [
                Assert(~view.win[i] | view.head_valid[i], f"tenant {i} wins with an empty queue"),
                Assert(~view.pop[i] | (view.queue_level[i] != 0), f"queue {i} popped while empty"),
            ]
    if "queue_bounds" in names:
        for i in range(n):
            # occupancy = entries + the ingress register's request; checked
            # against the entries too, so that no width truncation hides an
            # overflow.
            m.d.sync += [
                Assert(view.queue_level[i] <= D, f"queue {i} holds more than D entries"),
                Assert(view.occupancy[i] <= D, f"queue {i} holds more than D requests"),
                Assert(view.occupancy[i] >= view.queue_level[i], f"queue {i}: occupancy below its entries"),
            ]
    needs_past = names & {"bucket_caps", "charged_only_when_granted", "tag_window", "credit_limits",
                          "guaranteed_needs_rate"}
    if not needs_past:
        return
    if "guaranteed_needs_rate" in names:
        # The grant register written at the last edge holds that cycle's winner.
        loaded = _past(m, view.load, "load")
        conforming = Signal(name="chk_grant_conforming")
        m.d.comb += conforming.eq(view.grant_valid & ((view.grant_kind == Kind.GUARANTEED)
                                                      | (view.grant_kind == Kind.URGENT)))
        for i in range(n):
            rate_past = _past(m, view.rate[i], f"rate_{i}")
            m.d.sync += Assert(~past_valid | ~loaded | ~conforming | (view.grant_tenant != i) | (rate_past != 0),
                               f"tenant {i}: a guaranteed or urgent grant with a committed rate of 0")
    if "credit_limits" in names:
        for k, (count, limit) in enumerate(zip(view.inflight, view.credit_limit)):
            count_past = _past(m, count, f"inflight_{k}")
            limit_past = _past(m, limit, f"credit_limit_{k}")
            ceiling = Signal.like(count_past, name=f"chk_inflight_ceiling_{k}")
            m.d.comb += ceiling.eq(Mux(count_past > limit_past, count_past, limit_past))
            m.d.sync += Assert(~past_valid | (limit_past == 0) | (count <= ceiling),
                               f"credit class {k}: a selection went above its limit")
            m.d.sync += Assert(view.has_credit[k] == ((limit == 0) | (count < limit)),
                               f"credit class {k}: has_credit differs from limit = 0 or inflight < limit")
    vt_past = _past(m, view.vt, "vt")
    for i in range(n):
        cap_past = _past(m, view.capacity[i], f"capacity_{i}")
        level_past = _past(m, view.level[i], f"level_{i}")
        peak_past = _past(m, view.peak[i], f"peak_{i}")
        won_past = _past(m, view.fab_win[i], f"fab_win_{i}")
        if "bucket_caps" in names:
            m.d.sync += [
                Assert(view.peak[i] <= p.pcap, f"tenant {i}: peak level above PCAP"),
                Assert(~past_valid | (view.level[i] <= cap_past),
                       f"tenant {i}: committed level above the capacity"),
            ]
        if "charged_only_when_granted" in names:
            floor = Signal.like(level_past, name=f"chk_level_floor_{i}")
            m.d.comb += floor.eq(_min(level_past, cap_past))
            m.d.sync += Assert(~past_valid | won_past | (view.level[i] >= floor),
                               f"tenant {i}: committed tokens taken without a grant")
            m.d.sync += Assert(~past_valid | won_past | (view.peak[i] >= _min(peak_past, p.pcap)),
                               f"tenant {i}: peak tokens taken without a grant")
        if "tag_window" in names:
            offset = Signal(T, name=f"chk_tag_offset_{i}")
            m.d.comb += offset.eq(view.tag[i] - vt_past + p.lag_window)
            m.d.sync += Assert(~past_valid | won_past | (offset <= 2 * p.lag_window),
                               f"tenant {i}: start tag outside V +- LAG_WINDOW")


def _min(a, b):
    return Mux(a < b, a, b)
