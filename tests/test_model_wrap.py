"""Tag wrap-around: a 12-bit-tag channel must behave exactly like the same
channel with tags too wide to ever wrap (spec §6.5)."""

import random
from types import SimpleNamespace

from kvfabric.spec import FabricParams
from kvfabric.model.channel import ChannelModel, Request
from kvfabric.model.registers import FabricConfig, TenantConfig

PARAM_NAMES = ["tenants", "channels", "queue_depth", "max_request_bytes", "id_width", "tag_bits",
               "tenant_bits", "frac", "level_bits", "bytes_bits", "peak_bits", "pcap", "tag_shift",
               "tag_unit", "wfrac", "ts_bits", "lag_window"]


def unbounded_twin(p):
    """Same constants, but 62-bit tags (no wrap in any test) and the narrow LAG_WINDOW."""
    ns = {name: getattr(p, name) for name in PARAM_NAMES}
    ns["tag_bits"] = 62
    return SimpleNamespace(**ns)


def test_narrow_tags_match_unbounded_reference(seed):
    rng = random.Random(seed)
    p = FabricParams(channels=1, tenants=6, max_request_bytes=256, tag_bits=12)
    wide = unbounded_twin(p)
    tenants = [TenantConfig(rate=rng.randint(0, 60), capacity=rng.randint(p.pcap, 8 * p.pcap),
                            peak_rate=rng.choice([rng.randint(60, 400), 65535]),
                            inv_weight=rng.randint(256, 1024), priority=rng.randrange(4), enable=1)
               for _ in range(p.tenants)]
    cfg = FabricConfig(tenants, starve_limit=rng.choice([0, 200]))
    narrow_ch, wide_ch = ChannelModel(p, cfg), ChannelModel(wide, cfg)
    mask = (1 << p.tag_bits) - 1
    wraps = 0
    last_v = 0
    for t in range(20000):
        req = None
        if rng.random() < 0.8:
            req = Request(rng.randrange(p.tenants), rng.choice([32, 64, 128, 256]), t & 0xFFFF)
        ready = rng.random() < 0.7
        a = narrow_ch.step(t, req, ready)
        b = wide_ch.step(t, req, ready)
        assert a == b, f"cycle {t}: port behaviour differs: {a} vs {b}"
        assert narrow_ch.grant == wide_ch.grant, f"cycle {t}: grant differs"
        assert narrow_ch.tag == [x & mask for x in wide_ch.tag], f"cycle {t}: tags differ"
        assert narrow_ch.vt == wide_ch.vt & mask
        assert narrow_ch.level == wide_ch.level and narrow_ch.peak == wide_ch.peak
        if narrow_ch.vt < last_v:
            wraps += 1
        last_v = narrow_ch.vt
    assert wraps >= 5, f"only {wraps} wraps of V: the test did not exercise wrap-around"


def test_priority_skew_keeps_tags_in_range(seed):
    """A heavy-cost tenant served by priority while a starved tenant pins vmin:
    without the upper clamp its tag would run away and wrap (found in review).
    The 20-bit channel must equal its wide-tag twin, and every tag stays within
    LAG_WINDOW of V (plus one cost for the last winner)."""
    rng = random.Random(seed)
    p = FabricParams(channels=1, tenants=3)
    wide = unbounded_twin(p)
    cfg = FabricConfig([
        TenantConfig(rate=800, capacity=8 * p.pcap, peak_rate=800, inv_weight=65535, priority=0, enable=1),
        TenantConfig(rate=0, capacity=p.pcap, peak_rate=0, inv_weight=256, priority=1, enable=1),
        TenantConfig(rate=0, capacity=p.pcap, peak_rate=65535, inv_weight=256, priority=1, enable=1),
    ])
    narrow_ch, wide_ch = ChannelModel(p, cfg), ChannelModel(wide, cfg)
    mask = (1 << p.tag_bits) - 1
    w = p.lag_window
    for t in range(40000):
        tenant = rng.randrange(3)
        req = Request(tenant, 4096, t & 0xFFFF)
        a = narrow_ch.step(t, req, True)
        b = wide_ch.step(t, req, True)
        assert a == b and narrow_ch.grant == wide_ch.grant, f"cycle {t}: differs"
        assert narrow_ch.tag == [x & mask for x in wide_ch.tag], f"cycle {t}: tags differ"
        for x in wide_ch.tag:
            assert wide_ch.vt - w - (1 << 15) <= x <= wide_ch.vt + w + (1 << 15), f"cycle {t}: tag {x} far from V"
    assert wide_ch.vt > 1 << p.tag_bits, "V did not wrap: the test did not exercise wrap-around"
