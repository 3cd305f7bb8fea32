"""Contract compiler: TOML bandwidth contracts → register values (spec §12).

Every conversion is done on exact rationals and rounded in the direction that
never over-promises: a guaranteed rate and a bucket capacity round up (the
tenant gets at least what it was promised), a cap (peak rate, SLO threshold)
rounds down, and admission control counts the rounded-up rates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path

from kvfabric.spec import FabricParams

from kvfabric.spec import (ARRIVAL_PRIO_BITS, BULK_PRIO_BITS, BULK_RUN_BITS, COORD_EPOCH_BITS, COORD_FLOOR_BITS,
                           COORD_MIN_EPOCH, CREDIT_BITS, CREDIT_CLASS_NAMES)

from .compat import tomllib
from .registers import EPOCH_CYCLES_BITS, STARVE_LIMIT_BITS, FabricConfig, TenantConfig


class ContractError(ValueError):
    """A contract that is malformed, unrepresentable or not admissible."""


FABRIC_REQUIRED = {"clock_mhz", "channels", "channel_gbps", "admission_limit"}
#: The ``CREDITS`` register's keys (spec §6.2, §6.6, §12): one in-flight limit per
#: credit class, the bulk and the arrival-ordered priorities, and the memory
#: side's figures that size the limits a contract does not give.
CREDIT_KEYS = (*CREDIT_CLASS_NAMES, "bulk_priorities", "arrival_priorities", "memory_round_trip_ns",
               "memory_request_bytes")
#: The coordinator's keys (``COORD``, ``COORD_EPOCH``, spec §12, §13).
COORD_KEYS = ("coordinator", "coordinator_epoch_us", "coordinator_floor")
FABRIC_OPTIONAL = {"tenants", "queue_depth", "max_request_bytes", "tag_bits", "starvation_limit_us",
                   "epoch_ms", "fcfs_bypass", "bulk_run", *CREDIT_KEYS, *COORD_KEYS}
TENANT_REQUIRED = {"id", "name", "guaranteed_gbps", "burst_gbps", "burst_duration_ms",
                   "priority", "latency_slo_us"}
TENANT_OPTIONAL = {"weight", "hbm_quota_mb", "cxl_quota_mb", "page_color", "channels"}
DEFAULT_STARVATION_LIMIT_US = 50
DEFAULT_EPOCH_MS = 10


@dataclass(frozen=True)
class TenantContract:
    """One tenant's contract as written (GB/s are the tenant's totals over channels)."""

    id: int
    name: str
    guaranteed_gbps: Fraction
    burst_gbps: Fraction
    burst_duration_ms: Fraction
    priority: int
    latency_slo_us: Fraction
    weight: Fraction
    extra: dict = field(default_factory=dict)  # hbm_quota_mb, cxl_quota_mb, page_color, channels


@dataclass(frozen=True)
class CompiledContract:
    """Register values plus what they mean, for one clock and channel count."""

    params: FabricParams
    config: FabricConfig
    tenants: list[TenantContract]
    clock_mhz: Fraction
    channel_gbps: Fraction
    admission_limit: Fraction
    #: The keys of :data:`CREDIT_KEYS` the contract gives (the rest took their defaults).
    credit_keys: frozenset = frozenset()

    @property
    def bytes_per_cycle(self) -> Fraction:
        """Bytes one channel's memory side drains per cycle (spec §8)."""
        return self.channel_gbps * 1000 / self.clock_mhz

    @property
    def gives_credits(self) -> bool:
        """Whether the contract sets the credit limits: a limit, or the memory
        side's round trip they are sized from (spec §12)."""
        return bool(self.credit_keys & {*CREDIT_CLASS_NAMES, "memory_round_trip_ns"})

    @property
    def gives_bulk_priorities(self) -> bool:
        return "bulk_priorities" in self.credit_keys

    @property
    def config_without_credits(self) -> FabricConfig:
        """The contract with the ``CREDITS`` limits 0: what a memory side that
        returns no credits programs (a replay, spec §8)."""
        return replace(self.config, credits=(0,) * len(CREDIT_CLASS_NAMES))

    def tenant_by_id(self, tenant_id: int) -> TenantContract | None:
        return next((t for t in self.tenants if t.id == tenant_id), None)

    def gbps_of_rate(self, rate_reg: int) -> Fraction:
        """Total GB/s over all channels that a UQ13.3 per-channel rate register means."""
        return Fraction(rate_reg, 1 << self.params.frac) * self.clock_mhz / 1000 * self.params.channels


def _number(value, where: str, *, minimum=0, strict=False, integer=False) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ContractError(f"{where} must be a number, not {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ContractError(f"{where} must be finite, not {value!r}")
    if integer and not isinstance(value, int):
        raise ContractError(f"{where} must be an integer, not {value!r}")
    # Decimal text of the TOML value, so 0.1 means one tenth, not a binary float.
    q = Fraction(str(value)) if isinstance(value, float) else Fraction(value)
    if minimum is not None and (q < minimum or (strict and q == minimum)):
        op = ">" if strict else ">="
        raise ContractError(f"{where} must be {op} {minimum}, not {value!r}")
    return q


def _check_keys(table: dict, required: set, optional: set, where: str) -> None:
    unknown = sorted(set(table) - required - optional)
    if unknown:
        raise ContractError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: "
                            f"{', '.join(sorted(required | optional))}")
    missing = sorted(required - set(table))
    if missing:
        raise ContractError(f"{where}: missing key(s) {', '.join(missing)}")


def _register(value: int, bits: int, where: str, meaning: str) -> int:
    if value >= 1 << bits:
        raise ContractError(f"{where} is unrepresentable: {meaning} needs register value "
                            f"{value}, but the {bits}-bit register holds at most {(1 << bits) - 1}")
    return value


def load_contract(path: str | Path) -> CompiledContract:
    """Read and compile a TOML contract file."""
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ContractError(f"{path}: not valid TOML: {e}") from None
    try:
        return compile_contract(doc, source=str(path))
    except ContractError as e:  # every message names the file, whatever table it is about
        message = str(e)
        raise ContractError(message if message.startswith(f"{path}:") else f"{path}: {message}") from None


def _parse_fabric(doc: dict, source: str) -> dict:
    top_unknown = sorted(set(doc) - {"fabric", "tenant"})
    if top_unknown:
        raise ContractError(f"{source}: unknown table(s) {', '.join(top_unknown)}; "
                            f"allowed: [fabric], [[tenant]]")
    fabric = doc.get("fabric")
    if not isinstance(fabric, dict):
        raise ContractError(f"{source}: missing [fabric] table")
    _check_keys(fabric, FABRIC_REQUIRED, FABRIC_OPTIONAL, "[fabric]")
    out = {
        "clock_mhz": _number(fabric["clock_mhz"], "[fabric].clock_mhz", strict=True),
        "channel_gbps": _number(fabric["channel_gbps"], "[fabric].channel_gbps", strict=True),
        "admission_limit": _number(fabric["admission_limit"], "[fabric].admission_limit", minimum=None),
        "starvation_limit_us": _number(fabric.get("starvation_limit_us", DEFAULT_STARVATION_LIMIT_US),
                                       "[fabric].starvation_limit_us"),
        "epoch_ms": _number(fabric.get("epoch_ms", DEFAULT_EPOCH_MS), "[fabric].epoch_ms"),
    }
    if not 0 < out["admission_limit"] <= 1:
        raise ContractError(f"[fabric].admission_limit must be in (0, 1], not {fabric['admission_limit']!r}")
    fcfs = fabric.get("fcfs_bypass", False)
    if not isinstance(fcfs, bool):
        raise ContractError(f"[fabric].fcfs_bypass must be true or false, not {fcfs!r}")
    out["fcfs_bypass"] = fcfs
    out.update(_parse_credit_keys(fabric))
    # Spec §6.2, §12: absent, the longest run when some priority is bulk, else off.
    longest = (1 << BULK_RUN_BITS) - 1
    run = longest if out["bulk_priorities"] else 0
    if "bulk_run" in fabric:
        run = _integer_in(fabric["bulk_run"], "[fabric].bulk_run", 0, longest,
                          "fabric grants in a row a bulk tenant keeps while the other bulk tenants "
                          "wait, 0 = off")
    out["bulk_run"] = run
    out["coord"] = _coord_registers(fabric, out["clock_mhz"])
    sizes = {}
    for key, pkey in (("channels", "channels"), ("tenants", "tenants"),
                      ("queue_depth", "queue_depth"), ("max_request_bytes", "max_request_bytes"),
                      ("tag_bits", "tag_bits")):
        if key in fabric:
            sizes[pkey] = int(_number(fabric[key], f"[fabric].{key}", strict=True, integer=True))
    try:
        out["params"] = FabricParams(**sizes)
    except ValueError as e:
        raise ContractError(f"[fabric]: {e}") from None
    return out


def _integer_in(value, where: str, lo: int, hi: int, meaning: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ContractError(f"{where} must be an integer in {lo}..{hi} ({meaning}), not {value!r}")
    return value


def _parse_credit_keys(fabric: dict) -> dict:
    """The ``CREDITS`` keys of ``[fabric]`` (spec §12), checked; sized later."""
    limits = {name: _integer_in(fabric[name], f"[fabric].{name}", 0, (1 << CREDIT_BITS) - 1,
                                "grants of the class in flight per channel, 0 = no check")
              for name in CREDIT_CLASS_NAMES if name in fabric}
    bulk = _priority_list(fabric, "bulk_priorities", BULK_PRIO_BITS,
                          "guaranteed grants at these priorities take the burst class's credits")
    arrival = _priority_list(fabric, "arrival_priorities", ARRIVAL_PRIO_BITS,
                             "conforming requests at these priorities are served oldest first")
    round_trip = None
    if "memory_round_trip_ns" in fabric:
        round_trip = _number(fabric["memory_round_trip_ns"], "[fabric].memory_round_trip_ns", strict=True)
    elif "memory_request_bytes" in fabric:
        raise ContractError("[fabric].memory_request_bytes sizes the credit limits by Little's law "
                            "and needs [fabric].memory_round_trip_ns")
    return {"credit_limits": limits, "bulk_priorities": bulk, "arrival_priorities": arrival,
            "memory_round_trip_ns": round_trip, "credit_keys": frozenset(k for k in CREDIT_KEYS if k in fabric)}


def _priority_list(fabric: dict, key: str, bits: int, meaning: str) -> list:
    """A ``[fabric]`` list of distinct priorities (default empty), checked."""
    value = fabric.get(key, [])
    if (not isinstance(value, list) or len(set(map(repr, value))) != len(value)
            or any(isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < bits for p in value)):
        raise ContractError(f"[fabric].{key} must be a list of distinct priorities in 0..{bits - 1} "
                            f"({meaning}), not {value!r}")
    return value


def _coord_registers(fabric: dict, clock_mhz: Fraction) -> dict:
    """``COORD`` and ``COORD_EPOCH`` from the coordinator's keys (spec §12, §13)."""
    enable = fabric.get("coordinator", False)
    if not isinstance(enable, bool):
        raise ContractError(f"[fabric].coordinator must be true or false, not {enable!r}")
    epoch = 0  # the register's reset value: the shortest epoch, COORD_MIN_EPOCH cycles
    if "coordinator_epoch_us" in fabric:
        us = _number(fabric["coordinator_epoch_us"], "[fabric].coordinator_epoch_us", strict=True)
        epoch = math.ceil(us * clock_mhz)
        most = (1 << COORD_EPOCH_BITS) - 1
        if not COORD_MIN_EPOCH <= epoch <= most:
            raise ContractError(
                f"[fabric].coordinator_epoch_us = {fabric['coordinator_epoch_us']!r} is {epoch} cycles at "
                f"{float(clock_mhz):g} MHz; allowed {COORD_MIN_EPOCH}..{most} cycles "
                f"({float(Fraction(COORD_MIN_EPOCH) / clock_mhz):g}..{float(Fraction(most) / clock_mhz):g} us)")
    floor = 0
    if "coordinator_floor" in fabric:
        x = _number(fabric["coordinator_floor"], "[fabric].coordinator_floor")
        if x >= 1:
            raise ContractError(f"[fabric].coordinator_floor must be in 0 <= x < 1 (the fraction of its "
                                f"even split a tenant keeps on every channel), not "
                                f"{fabric['coordinator_floor']!r}")
        floor = math.floor(x * (1 << COORD_FLOOR_BITS))
    return {"coord_enable": int(enable), "coord_floor": floor, "coord_epoch_cycles": epoch}


def _credit_registers(fab: dict, tenants: list[TenantContract], params: FabricParams,
                      raw_fabric: dict) -> tuple[tuple[int, ...], int]:
    """``CREDITS``: the limits (urgent, guaranteed, burst) and ``bulk_prio`` (spec §12)."""
    bulk = fab["bulk_priorities"]
    bulk_prio = sum(1 << p for p in bulk)
    limits = dict(fab["credit_limits"])
    round_trip = fab["memory_round_trip_ns"]
    if round_trip is None:
        return tuple(limits.get(name, 0) for name in CREDIT_CLASS_NAMES), bulk_prio
    where = "[fabric].memory_request_bytes"
    size = _integer_in(raw_fabric.get("memory_request_bytes", params.max_request_bytes), where,
                       1, params.max_request_bytes, "bytes of a grant that takes one credit")
    cycles = round_trip * fab["clock_mhz"] / 1000
    channel = fab["channel_gbps"] * 1000 / fab["clock_mhz"]
    bpc = lambda gbps: gbps / params.channels * 1000 / fab["clock_mhz"]  # noqa: E731
    latency_bound = sum((bpc(t.burst_gbps) for t in tenants if t.priority not in bulk), Fraction(0))
    # Little's law (spec §6.6): a class carrying b bytes per cycle in grants of
    # `size` bytes that each hold a credit for `cycles` needs ceil(b * cycles / size).
    rates = {"credit_guaranteed": min(channel, latency_bound), "credit_burst": channel}
    for name, b in rates.items():
        if name in limits:
            continue
        need = max(1, math.ceil(b * cycles / size))
        if need >= 1 << CREDIT_BITS:
            raise ContractError(
                f"[fabric].memory_round_trip_ns is unrepresentable: Little's law sizes {name} at "
                f"ceil({float(b):.4g} B/cycle x {float(cycles):.4g} cycles / {size} B) = {need} grants "
                f"in flight, but the {CREDIT_BITS}-bit limit allows 0..{(1 << CREDIT_BITS) - 1}; give "
                f"{name} explicitly or a larger memory_request_bytes")
        # Spec §12: the latency-bound class gets twice its Little's-law need (up
        # to the register's range). Its steps arrive all at once, and a memory
        # side orders by class only the accesses it holds: at 1x the step's
        # last grants wait in the arbiter while the bulk class keeps its share
        # of the controller's entries.
        limits[name] = min(2 * need, (1 << CREDIT_BITS) - 1) if name == "credit_guaranteed" else need
    # Urgent grants rescue heads older than starve_limit; the contract bounds
    # their rate nowhere, so one in flight per contracted tenant.
    limits.setdefault("credit_urgent", min(len(tenants), (1 << CREDIT_BITS) - 1))
    return tuple(limits[name] for name in CREDIT_CLASS_NAMES), bulk_prio


def _parse_tenant(raw, index: int, params: FabricParams) -> TenantContract:
    if not isinstance(raw, dict):
        raise ContractError(f"[[tenant]] #{index + 1} must be a table")
    label = f"tenant #{index + 1}"
    if isinstance(raw.get("name"), str):
        label = f"tenant '{raw['name']}'"
    _check_keys(raw, TENANT_REQUIRED, TENANT_OPTIONAL, label)
    if not isinstance(raw["name"], str) or not raw["name"]:
        raise ContractError(f"{label}: name must be a non-empty string, not {raw['name']!r}")
    tid = int(_number(raw["id"], f"{label}: id", integer=True))
    if tid >= params.tenants:
        raise ContractError(f"{label}: id {tid} out of range 0..{params.tenants - 1}")
    prio = int(_number(raw["priority"], f"{label}: priority", integer=True))
    if prio > 3:
        raise ContractError(f"{label}: priority {prio} out of range 0..3 (0 is highest)")
    g = _number(raw["guaranteed_gbps"], f"{label}: guaranteed_gbps")
    b = _number(raw["burst_gbps"], f"{label}: burst_gbps")
    if b < g:
        raise ContractError(f"{label}: burst_gbps ({raw['burst_gbps']}) must be >= "
                            f"guaranteed_gbps ({raw['guaranteed_gbps']})")
    if "weight" in raw:
        weight = _number(raw["weight"], f"{label}: weight", strict=True)
    elif g > 0:
        weight = g
    else:
        raise ContractError(f"{label}: guaranteed_gbps is 0, so the default weight "
                            "(proportional to guaranteed_gbps) is 0; give an explicit weight > 0")
    extra = {}
    for key in ("hbm_quota_mb", "cxl_quota_mb"):
        if key in raw:
            extra[key] = _number(raw[key], f"{label}: {key}")
    if "page_color" in raw:
        extra["page_color"] = int(_number(raw["page_color"], f"{label}: page_color", integer=True))
    if "channels" in raw:
        extra["channels"] = _channel_set(raw["channels"], f"{label}: channels", params.channels)
    return TenantContract(
        id=tid, name=raw["name"], guaranteed_gbps=g, burst_gbps=b,
        burst_duration_ms=_number(raw["burst_duration_ms"], f"{label}: burst_duration_ms"),
        priority=prio,
        latency_slo_us=_number(raw["latency_slo_us"], f"{label}: latency_slo_us"),
        weight=weight, extra=extra)


def _channel_set(value, where: str, channels: int) -> tuple[int, ...]:
    """A tenant's channel set (spec §12, §13.7): distinct channel indices."""
    if not isinstance(value, list) or not value:
        raise ContractError(f"{where} must be a non-empty list of channel indices 0..{channels - 1}, "
                            f"not {value!r}")
    out = [int(_number(c, where, integer=True)) for c in value]
    if any(c >= channels for c in out) or len(set(out)) != len(out):
        raise ContractError(f"{where} must list distinct channels in 0..{channels - 1}, not {value!r}")
    return tuple(sorted(out))


def _tenant_registers(t: TenantContract, fab: dict, params: FabricParams,
                      weight_sum: Fraction) -> TenantConfig:
    label = f"tenant '{t.name}'"
    one = 1 << params.frac
    per_channel = Fraction(1, params.channels)
    cycles_per_us = fab["clock_mhz"]
    bpc = lambda gbps: gbps * per_channel * 1000 / fab["clock_mhz"]  # noqa: E731
    rate = _register(math.ceil(bpc(t.guaranteed_gbps) * one), params.rate_bits,
                     f"{label}: guaranteed_gbps", f"{float(bpc(t.guaranteed_gbps)):.4g} B/cycle per channel")
    peak = _register(max(math.floor(bpc(t.burst_gbps) * one), rate), params.peak_rate_bits,
                     f"{label}: burst_gbps", f"{float(bpc(t.burst_gbps)):.4g} B/cycle per channel")
    cap_bytes = t.guaranteed_gbps * per_channel * t.burst_duration_ms * 1_000_000
    # At least one maximum request, so that a guaranteed tenant's bucket can
    # cover any head; none without a guarantee, which never conforms (spec §6.2).
    capacity = _register(max(math.ceil(cap_bytes * one), params.pcap) if rate else 0, params.capacity_bits,
                         f"{label}: burst_duration_ms",
                         f"a bucket of {float(cap_bytes) / 1e6:.4g} MB per channel")
    inv = math.ceil(weight_sum / t.weight * (1 << params.wfrac))
    inv_weight = _register(inv, params.inv_weight_bits, f"{label}: weight",
                           f"a share of {float(t.weight / weight_sum):.4g} of the channel "
                           f"(the smallest representable share is 1/256)")
    max_cost = -(-params.max_request_bytes * inv_weight // (1 << (params.wfrac + params.tag_shift)))
    if 3 * max_cost >= params.lag_window:
        raise ContractError(f"{label}: weight is unrepresentable with tag_bits={params.tag_bits}: a "
                            f"maximum request costs {max_cost} tag units, spec §6.5 needs fewer than "
                            f"{-(-params.lag_window // 3)}; raise the weight or tag_bits")
    slo = _register(math.floor(t.latency_slo_us * cycles_per_us), params.slo_bits,
                    f"{label}: latency_slo_us", f"{float(t.latency_slo_us)} us at {float(fab['clock_mhz'])} MHz")
    return TenantConfig(rate=rate, capacity=capacity, peak_rate=peak, inv_weight=inv_weight,
                        priority=t.priority, enable=1, slo_cycles=slo)


def compile_contract(doc: dict, source: str = "contract") -> CompiledContract:
    """Compile a parsed TOML document; raise :class:`ContractError` naming tenant and field."""
    fab = _parse_fabric(doc, source)
    params: FabricParams = fab["params"]
    raw_tenants = doc.get("tenant", [])
    if not isinstance(raw_tenants, list) or not raw_tenants:
        raise ContractError(f"{source}: at least one [[tenant]] table is required")
    tenants = [_parse_tenant(raw, i, params) for i, raw in enumerate(raw_tenants)]
    seen: dict[int, str] = {}
    for t in tenants:
        if t.id in seen:
            raise ContractError(f"tenant '{t.name}': id {t.id} already used by tenant '{seen[t.id]}'")
        seen[t.id] = t.name
    weight_sum = sum((t.weight for t in tenants), Fraction(0))
    regs = [TenantConfig() for _ in range(params.tenants)]
    for t in tenants:
        regs[t.id] = _tenant_registers(t, fab, params, weight_sum)

    credits, bulk_prio = _credit_registers(fab, tenants, params, doc["fabric"])
    arrival_prio = sum(1 << p for p in fab["arrival_priorities"])
    compiled = CompiledContract(
        params=params,
        config=FabricConfig(
            regs,
            fcfs_bypass=int(fab["fcfs_bypass"]),
            credits=credits, bulk_prio=bulk_prio, arrival_prio=arrival_prio, bulk_run=fab["bulk_run"],
            **fab["coord"],
            starve_limit=_register(math.ceil(fab["starvation_limit_us"] * fab["clock_mhz"]),
                                   STARVE_LIMIT_BITS, "[fabric].starvation_limit_us", "the limit"),
            epoch_cycles=_register(math.ceil(fab["epoch_ms"] * 1000 * fab["clock_mhz"]),
                                   EPOCH_CYCLES_BITS, "[fabric].epoch_ms", "the epoch")),
        tenants=tenants, clock_mhz=fab["clock_mhz"], channel_gbps=fab["channel_gbps"],
        admission_limit=fab["admission_limit"], credit_keys=fab["credit_keys"])
    check_admission(compiled)
    return compiled


def check_admission(compiled: CompiledContract) -> None:
    """Admission control (essay §11): reject the first tenant whose rounded-up
    guaranteed rate pushes the per-channel sum above ``admission_limit × B``."""
    limit = compiled.admission_limit * compiled.bytes_per_cycle
    one = 1 << compiled.params.frac
    total = Fraction(0)
    for t in compiled.tenants:
        total += Fraction(compiled.config.tenants[t.id].rate, one)
        if total > limit:
            over = compiled.gbps_of_rate(1) * (total - limit) * one
            cap = compiled.gbps_of_rate(1) * limit * one
            raise ContractError(
                f"tenant '{t.name}': admission rejected: guaranteed bandwidth would reach "
                f"{float(compiled.gbps_of_rate(1) * total * one):.3f} GB/s, above admission_limit "
                f"{float(compiled.admission_limit)} x capacity = {float(cap):.3f} GB/s "
                f"by {float(over):.3f} GB/s")
    check_channel_sets(compiled)


def check_channel_sets(compiled: CompiledContract) -> None:
    """Spec §13.7: with tenants' channel sets given (``channels``), the
    coordinator's allocation can meet every total within the admission limit
    exactly when, for every set U of channels, the totals of the tenants
    confined to U fit U's limits (after the floors every tenant keeps on
    every channel): ``sum over S_i within U of C·(RATE_i − fr_i) <= |U|·(8·L −
    sum_j fr_j)``. Rejects the set U with the largest excess, naming it."""
    declared = [t for t in compiled.tenants if "channels" in t.extra]
    if not declared:
        return
    cfg, p = compiled.config, compiled.params
    if not cfg.coord_enable:
        t = declared[0]
        raise ContractError(f"tenant '{t.name}': channels needs [fabric].coordinator = true: with the even "
                            f"split a tenant on {len(t.extra['channels'])} of {p.channels} channels is "
                            f"guaranteed only that fraction of its total (spec §13)")
    one = 1 << p.frac
    C = p.channels
    fr = {t.id: cfg.coord_floor * cfg.tenants[t.id].rate >> 8 for t in compiled.tenants}
    room = compiled.admission_limit * compiled.bytes_per_cycle * one - sum(fr.values())
    masks = [(sum(1 << c for c in t.extra.get("channels", range(C))), C * (cfg.tenants[t.id].rate - fr[t.id]), t)
             for t in compiled.tenants]
    worst = None
    for u in range(1, 1 << C):
        confined = [(g, t) for m, g, t in masks if m & ~u == 0]
        if not confined:
            continue
        excess = sum(g for g, _ in confined) - bin(u).count("1") * room
        if excess > 0 and (worst is None or excess > worst[0]):
            worst = (excess, u, confined)
    if worst is not None:
        excess, u, confined = worst
        chans = [c for c in range(C) if u >> c & 1]
        gbps = compiled.gbps_of_rate(1) / C  # GB/s of one unit (1/8 byte per cycle) summed over channels
        raise ContractError(
            "admission rejected: no allocation of the guarantees over the tenants' channels fits the "
            f"admission limit (spec §13.7): the tenants confined to channels {chans} "
            f"({', '.join(repr(t.name) for _, t in confined)}) need "
            f"{float(gbps * sum(g for g, _ in confined)):.3f} GB/s, above admission_limit "
            f"{float(compiled.admission_limit)} x the capacity of those {len(chans)} channels "
            f"(less the floors) = {float(gbps * len(chans) * room):.3f} GB/s by {float(gbps * excess):.3f} GB/s")


def admit(doc: dict, new_tenant: dict) -> CompiledContract:
    """Admit one more tenant into the contract document ``doc``.

    Returns the recompiled contract (weights are renormalised over all
    tenants), or raises :class:`ContractError` saying by how much the new
    tenant's guaranteed rate exceeds the admission limit.
    """
    tenants = list(doc.get("tenant", [])) + [new_tenant]
    return compile_contract({**doc, "tenant": tenants})


def register_table(compiled: CompiledContract) -> list[dict]:
    """One row per contracted tenant: register values and what they deliver."""
    p = compiled.params
    one = 1 << p.frac
    rows = []
    for t in compiled.tenants:
        r = compiled.config.tenants[t.id]
        rows.append({
            "id": t.id, "name": t.name, "priority": r.priority,
            "rate": r.rate, "rate_gbps": float(compiled.gbps_of_rate(r.rate)),
            "peak_rate": r.peak_rate, "peak_gbps": float(compiled.gbps_of_rate(r.peak_rate)),
            "capacity": r.capacity, "capacity_bytes": r.capacity / one,
            "inv_weight": r.inv_weight, "share": (1 << p.wfrac) / r.inv_weight,
            "slo_cycles": r.slo_cycles,
        })
    return rows
