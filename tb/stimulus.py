"""Random stimulus of every test bench: configurations, request sizes, traffic, traces.

One generator, owned by the library, for the cocotb scenarios
(tb/tests/), the trace-driven soak and differential check
(:mod:`kvfabric.tb.trace_stimulus`), the Amaranth unit tests and the model
tests, so that no library module imports a test module and a new register
field is drawn in one place.  Plain Python on :class:`random.Random` (no
simulator), so the Amaranth tests can use it too.

Two ranges of configuration (:func:`random_tenant`):

* ``drainable=True`` (co-simulation): every enabled tenant has a peak rate of
  at least 8 B/cycle, so every valid request is eventually served and a test
  can drain the fabric (with credit limits, as long as the memory side returns
  credits);
* ``drainable=False`` (register and unit tests): any value a register field
  holds, rates and peaks 0 (a tenant never served) and the maxima included.
"""

from __future__ import annotations

import random

from kvfabric.model.registers import FabricConfig, TenantConfig
from kvfabric.spec import COORD_MIN_EPOCH

__all__ = ["random_tenant", "random_credits", "random_bulk_prio", "random_config", "drainable_config",
           "random_size", "make_invalid", "random_requests", "random_trace"]

#: The ``CREDITS`` limits the co-simulation draws from: mostly small; 0 = no check.
CREDIT_CHOICES = (0, 1, 1, 2, 3, 8)


def random_tenant(params, rng: random.Random, *, drainable: bool = True, enable: float = 0.85,
                  max_inv_weight: int = 0xFFFF, full_buckets: bool = False) -> TenantConfig:
    """One tenant's configuration (module docstring for the two ranges).

    ``enable``: probability the tenant is enabled; ``max_inv_weight`` caps the
    random inverse weights of the unit tests' range; ``full_buckets``: rates and
    capacities at their maxima, so every head conforms and only priority,
    urgency and tags decide."""
    p = params
    lmax = p.max_request_bytes
    if drainable:
        rate = rng.choice([0, 4, 16, 64, 256, 1024])
        t = TenantConfig(
            rate=rate,
            capacity=min(rng.choice([p.pcap, 2 * p.pcap, 16 * p.pcap, rate * 64 + p.pcap]), (1 << 28) - 1),
            peak_rate=max(rate, rng.choice([256, 1024, 4096, 8 * lmax])),
            inv_weight=rng.choice([256, 512, 768, 1024, 4096, 256 * p.tenants, 65535]),
            priority=rng.randrange(4),
            enable=1 if enable >= 1 else int(rng.random() < enable),
            slo_cycles=rng.choice([0, 8, 40, 400, (1 << 24) - 1]))
    else:
        t = TenantConfig(
            rate=rng.choice([0, rng.randrange(1, 64), rng.randrange(1, 1 << 16)]),
            capacity=rng.choice([0, rng.randrange(lmax << 4), rng.randrange(1 << 28)]),
            peak_rate=rng.choice([0, rng.randrange(1, 256), rng.randrange(1, 1 << 16), 0xFFFF]),
            inv_weight=rng.choice([256, rng.randrange(max_inv_weight + 1)]),
            priority=rng.randrange(4),
            enable=1 if enable >= 1 else int(rng.random() < enable),
            slo_cycles=rng.choice([0, rng.randrange(1, 40), rng.randrange(1 << 24)]))
    if full_buckets:
        t = TenantConfig(rate=0xFFFF, capacity=(1 << 28) - 1, peak_rate=0xFFFF, inv_weight=t.inv_weight,
                         priority=t.priority, enable=t.enable, slo_cycles=t.slo_cycles)
    return t


def random_credits(rng: random.Random, choices=CREDIT_CHOICES) -> tuple[int, int, int]:
    """``CREDITS`` limits (urgent, guaranteed, burst), each one of ``choices``."""
    return tuple(rng.choice(choices) for _ in range(3))


def random_bulk_prio(rng: random.Random) -> int:
    """A ``CREDITS.bulk_prio`` mask (one bit per priority)."""
    return rng.randrange(16)


def random_config(params, rng: random.Random, *, fcfs: int = 0, credits=False, drainable: bool = True,
                  starve=(0, 0, 64, 300, 2000), epoch=(0, 0, 97, 500), coordinator: bool = False,
                  arrival: bool = False, bulk_run: bool = False, **tenant_options) -> FabricConfig:
    """A random configuration of ``params.tenants`` tenants (:func:`random_tenant`
    with ``drainable`` and ``tenant_options``); tenant 0 is always enabled in the
    drainable range, so a test always has a tenant to send to.

    ``credits``: False = limits 0 and no bulk priorities; True = limits from
    :data:`CREDIT_CHOICES` and a random ``bulk_prio``; a tuple = limits drawn
    from those choices, with a random ``bulk_prio`` if any choice is not 0.
    ``starve`` and ``epoch``: the choices of ``STARVE_LIMIT`` and ``EPOCH_CYCLES``.
    ``coordinator``: the coordinator on (spec §13) with a random floor and its
    shortest epoch or a little more (no draws without it, so other
    configurations keep their random streams). ``arrival``: a random
    ``arrival_prio`` mask (spec §6.2; likewise drawn only then). ``bulk_run``:
    a random ``CTRL.bulk_run`` (spec §6.2: 1, a few grants or the longest run)
    with a non-zero ``bulk_prio`` (drawn only then too)."""
    tenants = []
    for i in range(params.tenants):
        opts = dict(tenant_options)
        if drainable and i == 0:
            opts["enable"] = 1.0
        tenants.append(random_tenant(params, rng, drainable=drainable, **opts))
    starve_limit, epoch_cycles = rng.choice(starve), rng.choice(epoch)
    limits, bulk = (0, 0, 0), 0
    if credits is True:
        limits, bulk = random_credits(rng), random_bulk_prio(rng)
    elif credits:
        limits = random_credits(rng, credits)
        bulk = random_bulk_prio(rng) if any(credits) else 0
    coord = {}
    if coordinator:
        coord = dict(coord_enable=1, coord_floor=rng.choice([0, 16, 128, 255]),
                     coord_epoch_cycles=rng.choice([0, COORD_MIN_EPOCH + 451]))
    # Every priority marked half the time, so that marked heads meet often.
    arrival_prio = rng.choice([15, rng.randrange(1, 16)]) if arrival else 0
    run = 0
    if bulk_run:
        run = rng.choice([1, 2, 7, 255])
        # Every priority bulk half the time, so that bulk heads meet often.
        bulk = rng.choice([15, bulk or rng.randrange(1, 16)])
    return FabricConfig(tenants, fcfs_bypass=fcfs, starve_limit=starve_limit, epoch_cycles=epoch_cycles,
                        credits=limits, bulk_prio=bulk, arrival_prio=arrival_prio, bulk_run=run, **coord)


def drainable_config(params, rng: random.Random) -> FabricConfig:
    """Every tenant enabled with a generous peak rate, no credit limits, no FCFS:
    whatever traffic is left drains (the soak's last phase)."""
    return FabricConfig([TenantConfig(rate=64, capacity=params.pcap, peak_rate=8 * params.max_request_bytes,
                                      inv_weight=rng.choice([256, 512, 1024]), priority=rng.randrange(4),
                                      enable=1, slo_cycles=400) for _ in range(params.tenants)],
                        starve_limit=300)


def random_size(params, rng: random.Random) -> int:
    """A valid request size: common powers of two, LMAX twice as often, any size."""
    lmax = params.max_request_bytes
    return rng.choice([32, 64, 256, lmax, lmax, rng.randrange(1, lmax + 1), rng.randrange(1, 65)])


def make_invalid(params, rng: random.Random, tenant: int, nbytes: int) -> tuple[int, int]:
    """``(tenant, bytes)`` made invalid (spec §4) one of three ways: a tag of
    N..15 (when N < 16), size 0, or a size above LMAX."""
    kind = rng.randrange(3)
    if kind == 0 and params.tenants < 16:
        return rng.randrange(params.tenants, 16), nbytes
    if kind == 1:
        return tenant, 0
    return tenant, rng.randrange(params.max_request_bytes + 1, 1 << params.bytes_bits)


def random_requests(params, rng: random.Random, count: int, *, start: int, span: int,
                    invalid: float = 0.02) -> list[tuple[int, int, int, int]]:
    """``count`` requests ``(cycle, channel, tenant, bytes)`` spread over ``span``
    cycles from ``start`` (not sorted), random channel, tenant and size; a
    fraction ``invalid`` is invalid (:func:`make_invalid`)."""
    out = []
    for _ in range(count):
        cyc = start + rng.randrange(span)
        ch = rng.randrange(params.channels)
        tenant = rng.randrange(params.tenants)
        nbytes = random_size(params, rng)
        if rng.random() < invalid:
            tenant, nbytes = make_invalid(params, rng, tenant, nbytes)
        out.append((cyc, ch, tenant, nbytes))
    return out


def random_trace(params, rng: random.Random, requests: int, *, deep: int = 0,
                 deep_tenant: int | None = None, gaps: int = 2) -> list:
    """A random replay trace (``model.trace.TraceRow``, ids = row indices) of about
    ``requests`` requests, for the differential check of the engines (issue #24):

    * ``deep`` requests of one (channel, tenant) in one cycle (tenant
      ``deep_tenant``, default a random one);
    * bursts: up to 16 requests in one cycle on every channel;
    * sizes 1 (minimum), LMAX (maximum), random, and 2 % invalid requests
      (:func:`make_invalid`);
    * ``gaps`` idle gaps of 2-3 x 2^tag_bits cycles, longer than the tag range
      and the lag window (spec §6.5), between stretches of traffic.
    """
    from kvfabric.model.trace import TraceRow
    p = params
    n, lmax = p.tenants, p.max_request_bytes
    events = []
    if deep:
        t, c = rng.randrange(64), rng.randrange(p.channels)
        i = rng.randrange(n) if deep_tenant is None else deep_tenant
        events += [(t, c, i, rng.choice([1, 64, lmax]))] * deep
    stretches = gaps + 1
    t = 0
    per = max(1, requests // stretches)
    for s in range(stretches):
        span = max(50, per * rng.choice([2, 8, 32]) // p.channels)
        k = 0
        while k < per:
            cyc = t + rng.randrange(span)
            burst = rng.randint(2, 16) if rng.random() < 0.05 else 1
            for c in (range(p.channels) if burst > 1 else [rng.randrange(p.channels)]):
                for _ in range(burst):
                    tenant = rng.randrange(n)
                    nbytes = rng.choice([1, lmax, random_size(p, rng)])
                    if rng.random() < 0.02:
                        tenant, nbytes = make_invalid(p, rng, tenant, nbytes)
                    events.append((cyc, c, tenant, nbytes))
                    k += 1
        t += span
        if s < gaps:
            t += rng.randint(2 << p.tag_bits, 3 << p.tag_bits)
    events.sort(key=lambda e: e[0])  # stable: a burst keeps its order
    return [TraceRow(k, *e) for k, e in enumerate(events)]
