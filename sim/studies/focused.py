"""Focused studies beside the essay's two setups.

* :func:`isolation` — every tenant backlogged with very different appetites;
  how far does each tenant's share drift from its target (essay §5)?
* :func:`idle_tenant` — one tenant idle: does its partition sit empty
  (static partitioning, essay §2.5) or is its bandwidth reused?
* :func:`admission` — eight prefills start at once (essay §11); admission
  control at a limit, or none.
* :class:`PowerCap` — the §9 loop: power from bytes served every metrics
  period; over budget, the burst caps of low-priority tenants come down.
"""

from dataclasses import replace
from fractions import Fraction

from kvfabric.model.contract import ContractError, compile_contract

from ..dram import NEVER
from ..fabric import FabricPolicy, FabricQosPolicy, contract_doc
from .scenarios import CHANNEL_GBPS, FABRIC_MHZ, MEMORY_MHZ, REQUEST_BYTES, Essay, make_policy
from ..tenants import GreedyTenant, PrefillTenant

__all__ = ["isolation", "idle_tenant", "admission", "PowerCap", "power_w"]


def _equal_contract(n, *, guaranteed=0, admission_limit=Fraction(1)):
    """n tenants, equal weights, one priority, each may burst to the channel."""
    return contract_doc(
        [dict(id=i, name=f"t{i}", guaranteed_gbps=guaranteed, burst_gbps=CHANNEL_GBPS,
              burst_duration_ms=Fraction(1, 10), priority=1, latency_slo_us=25, weight=1)
         for i in range(n)],
        channel_gbps=CHANNEL_GBPS, clock_mhz=FABRIC_MHZ, admission_limit=admission_limit)


class Study:
    """Tenants, policy and horizon of one run, plus what to report."""

    def __init__(self, tenants, policy, horizon, extract=None):
        self.tenants = tenants
        self.policy = policy
        self.horizon = horizon
        self.extract = extract or (lambda system: {})


def isolation(policy_name, cycles, *, writes=True, knobs=None, seed=7):
    """Tenant 0 streams with 300 transactions in flight, one in four a write
    (none with ``writes=False``); tenants 1-3 read random 256 B blocks with 32
    each, their addresses drawn from ``seed``.  Target: a quarter each.
    ``knobs``: the QoS controller's (:class:`~sim.fabric.QosKnobs`,
    Fabric-QoS only)."""
    tenants = [GreedyTenant(0, window=300, pattern="stream", write_share=4 if writes else 0, name="stream")]
    tenants += [GreedyTenant(i, window=32, pattern="random", block=2, seed=seed, name=f"random{i}")
                for i in (1, 2, 3)]
    policy = _policy(policy_name, _equal_contract(4), knobs=knobs)
    return Study(tenants, policy, cycles)


def idle_tenant(policy_name, cycles, pattern="stream"):
    """Tenant 1 never issues; tenant 0 reads as fast as it can, streaming or
    random 256 B blocks (KV-cache like)."""
    tenants = [GreedyTenant(0, window=300, pattern=pattern, block=2, seed=3, name="busy"),
               GreedyTenant(1, window=300, pattern="stream", start_at=NEVER, name="idle")]
    policy = _policy(policy_name, _equal_contract(2, guaranteed=CHANNEL_GBPS * Fraction(4, 10)))
    return Study(tenants, policy, cycles)


def _policy(name, contract, knobs=None):
    if knobs is not None and name != "Fabric-QoS":
        raise ValueError(f"QoS knobs apply to Fabric-QoS only, not {name!r}")
    if name == "Fabric":
        return FabricPolicy(contract, memory_mhz=MEMORY_MHZ, request_bytes=REQUEST_BYTES)
    if name == "Fabric-QoS":
        return FabricQosPolicy(contract, memory_mhz=MEMORY_MHZ, knobs=knobs, request_bytes=REQUEST_BYTES)
    return make_policy(name, None, None)


def admission(limit, *, job_bytes, cycles, tenants=8, share=Fraction(1, 6)):
    """``tenants`` prefills of ``job_bytes`` arrive together, each asking a
    guaranteed ``share`` of the channel; ``limit`` is the admission limit
    (None: admit everything, the registers overcommitted).

    Admission is the contract compiler's own check (spec §12): a job is
    admitted if the contract with its guarantee added still compiles.
    """
    guaranteed = CHANNEL_GBPS * share
    base = _equal_contract(tenants, admission_limit=limit or 1)
    prefills = [PrefillTenant(i, job_bytes=job_bytes, period=NEVER // 2, phase=i, max_jobs=1,
                              window=300, name=f"prefill{i}") for i in range(tenants)]
    policy = FabricPolicy(base, memory_mhz=MEMORY_MHZ, name="Fabric", request_bytes=REQUEST_BYTES)
    active = set()

    def doc_with(ids):
        doc = {"fabric": dict(base["fabric"]), "tenant": [dict(t) for t in base["tenant"]]}
        for t in doc["tenant"]:
            if t["id"] in ids:
                t["guaranteed_gbps"] = float(guaranteed)
        return doc

    if limit is None:
        # What the registers hold if software writes every guarantee anyway:
        # the compiler would refuse, the hardware does not check.
        one = compile_contract(doc_with({0}))
        rate_regs = one.config.tenants[0]
        config = replace(policy.compiled.config, tenants=[
            replace(t, rate=rate_regs.rate, capacity=rate_regs.capacity)
            for t in policy.compiled.config.tenants])
        policy.compiled = replace(policy.compiled, config=config)
    else:
        def admit(tenant, now):
            try:
                policy.reconfigure(doc_with(active | {tenant.tenant_id}))
            except ContractError:
                return False
            active.add(tenant.tenant_id)
            return True

        def job_end(tenant, now):
            active.discard(tenant.tenant_id)
            policy.reconfigure(doc_with(active))
            for t in prefills:
                if t.deferred and admit(t, now):
                    t.release(now)

        for t in prefills:
            t.admit = admit
            t.on_job_end = job_end

    def extract(system):
        return {"guaranteed_gbps": float(guaranteed),
                "rejected": sum(t.rejected for t in prefills)}

    return Study(prefills, policy, cycles, extract)


def power_w(gpu_gbps, baseline_w=0):
    """The essay's §9 estimate: 0.023 W per GB/s plus a baseline."""
    return Essay.power_w_per_gbps * Fraction(gpu_gbps) + baseline_w


class PowerCap:
    """The §9 control loop around a :class:`FabricPolicy`.

    Every ``interval`` cycles it turns the bytes served into GPU-wide GB/s
    (times ``channels``) and watts; above ``budget_w`` it halves the burst
    cap of every tenant whose priority number is at least ``low_priority``
    (never below its guarantee); below 80% of the budget it raises them by
    half again, up to the contract.
    """

    def __init__(self, policy, *, budget_w, interval, channels, low_priority=2):
        self.policy = policy
        self.budget_w = Fraction(budget_w)
        self.interval = interval
        self.channels = channels
        self.low_priority = low_priority
        self.trace = []       # (cycle, watts, {tenant: burst_gbps})
        self._last_bytes = 0

    def attach(self, system):
        self.system = system
        system.schedule(self.interval, self._tick)

    def _tick(self, now):
        served = sum(self.system.channel.stats.bytes)
        channel_gbps = Fraction(served - self._last_bytes) * MEMORY_MHZ * 10**6 / self.interval / 10**9
        self._last_bytes = served
        watts = power_w(channel_gbps * self.channels)
        doc = self.policy.doc
        new = {"fabric": dict(doc["fabric"]), "tenant": [dict(t) for t in doc["tenant"]]}
        caps = {}
        for t in new["tenant"]:
            if t["priority"] >= self.low_priority:
                cap = Fraction(str(t["burst_gbps"]))
                if watts > self.budget_w:
                    cap = max(Fraction(str(t["guaranteed_gbps"])), cap / 2)
                elif watts < self.budget_w * Fraction(8, 10):
                    cap = min(CHANNEL_GBPS, cap * Fraction(3, 2))
                t["burst_gbps"] = round(float(cap), 3)
                caps[t["name"]] = t["burst_gbps"]
        self.policy.reconfigure(new)
        self.trace.append((now, float(watts), caps))
        self.system.schedule(now + self.interval, self._tick)
