"""Spec §6.3 "Buckets start full", checked on the golden model from the rule's words.

A tenant enabled in cycle t (``enable`` 1 at t, 0 at t-1, and 0 before cycle
0) has ``level = capacity`` and ``peak = PCAP`` at t+1, so its first
``capacity // (s << FRAC)`` requests of s bytes after enabling conform and are
granted as guaranteed; re-committing an enabled tenant does not refill. The
expected counts below are computed here from the configuration, not read from
the model. The RTL follows the same rule cycle by cycle in
``tests/test_hw_channel.py`` (its random configurations enable and disable
tenants through commits) and the co-simulation tests.
"""

from dataclasses import replace

from kvfabric.model.channel import BURST, GUARANTEED, ChannelModel, Request
from kvfabric.model.registers import FabricConfig, TenantConfig
from kvfabric.spec import FabricParams

P = FabricParams(tenants=2, channels=1)
SIZE = 512                      # bytes per request
NEED = SIZE << P.frac           # tokens one request takes
CAPACITY = 20 * NEED + NEED // 2  # 20 requests and half of one more
RATE = 1                        # 1/8 byte per cycle: no request refills within these runs


def tenant(enable):
    return TenantConfig(rate=RATE, capacity=CAPACITY, peak_rate=(1 << 16) - 1, inv_weight=256,
                        priority=0, enable=enable, slo_cycles=0)


def config(enable):
    return FabricConfig([tenant(enable), tenant(0)])


class Run:
    """One channel with tenant 0 kept backlogged by SIZE-byte requests and a
    memory side that takes a grant every cycle; records each grant's kind."""

    def __init__(self, cfg):
        self.ch = ChannelModel(P, cfg)
        self.now = 0
        self.kinds = []
        self.next_id = 0

    def step(self, cycles, offer=True):
        for _ in range(cycles):
            req = None
            if offer and not self.ch.queue_full()[0]:
                req = Request(0, SIZE, self.next_id % (1 << P.id_width))
            result = self.ch.step(self.now, req, True)
            if result.accepted and req is not None:
                self.next_id += 1
            if result.transferred is not None:
                self.kinds.append(result.transferred.kind)
            self.now += 1
        return self


def guaranteed_run(kinds):
    """Grants of kind guaranteed before the first other kind."""
    n = 0
    for k in kinds:
        if k != GUARANTEED:
            break
        n += 1
    return n


def test_tenant_enabled_from_reset_starts_full():
    full = CAPACITY // NEED  # whole requests the full bucket covers
    run = Run(config(1)).step(200)
    assert len(run.kinds) > full + 5, "the backlogged tenant was not served"
    # Every request the full bucket covers is guaranteed, then the bucket is
    # empty (RATE refills < 1 request in 200 cycles) and grants are burst.
    assert guaranteed_run(run.kinds) == full, run.kinds[:30]
    assert set(run.kinds[full:]) == {BURST}


def test_enabling_commit_fills_and_a_recommit_does_not():
    full = CAPACITY // NEED
    run = Run(config(0)).step(100, offer=False)   # disabled: refills at RATE only
    assert run.ch.level[0] == 100 * RATE
    run.ch.config = config(1)                      # a COMMIT enabling tenant 0
    run.step(1, offer=False)
    assert (run.ch.level[0], run.ch.peak[0]) == (CAPACITY, P.pcap), "not full after the enabling cycle"
    run.step(150)
    assert guaranteed_run(run.kinds) == full
    burst_before = len(run.kinds)
    # Re-commit an enabled tenant with another inverse weight: no refill.
    run.ch.config = FabricConfig([replace(tenant(1), inv_weight=512), tenant(0)])
    run.step(60)
    assert run.kinds[burst_before:] and set(run.kinds[burst_before:]) == {BURST}, \
        "a re-commit of an enabled tenant refilled its bucket"
    # Disable for one cycle, enable again: the enabling edge fills again.
    run.ch.config = config(0)
    run.step(1, offer=False)
    run.ch.config = config(1)
    run.step(1, offer=False)
    assert run.ch.level[0] == CAPACITY and run.ch.peak[0] == P.pcap


def test_skip_applies_the_start_like_single_steps():
    """The quiescent fast path (``skip``) fills an enabled tenant as steps do."""
    a, b = ChannelModel(P, config(0)), ChannelModel(P, config(0))
    a.config = b.config = config(1)
    for now in range(7):
        a.step(now, None, True)
    b.skip(7)
    assert (a.level, a.peak) == (b.level, b.peak)
    assert (a.level[0], a.peak[0]) == (CAPACITY, P.pcap)
