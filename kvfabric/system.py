"""``kvfabric system``: a user's contract and workload through the system model.

One HBM3 channel (51.2 GB/s, 1600 MHz) carries the workload; the contract is
taken per channel (each tenant keeps its share of a channel, see
:func:`kvfabric.sim.workload.one_channel_contract`) and drives the golden
model's arbiter for the ``fabric`` and ``fabric-qos`` policies (``fabric-qos``
with the contract's ``CREDITS`` when it gives them, spec §12).

A decode whose measured demand exceeds :data:`HEADROOM` of its guarantee is
warned about: its bucket can run dry, and its reads then go burst-kind,
behind every guaranteed one (reports/experiments.md, the doubled steps).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import tomllib
from fractions import Fraction

from kvfabric.model.contract import ContractError, compile_contract
from kvfabric.model.replay import percentile
from kvfabric.sim.front_ends import FRONT_ENDS
from kvfabric.tables import format_table

__all__ = ["POLICIES", "SystemRun", "build_system", "run_system", "cmd_system"]

#: The front ends ``kvfabric system --policy`` runs: the engine factory's names.
POLICIES = FRONT_ENDS

#: A latency-bound (decode) tenant's measured demand may be this much of its
#: guarantee before ``kvfabric system`` warns that the contract leaves it no headroom.
HEADROOM = Fraction(4, 5)


def qos_knobs_for(read_queue, bulk_in_use):
    """The QoS controller's classes out of the workload's read queue size.

    The default classes of the system model's experiments
    (:meth:`~kvfabric.sim.fabric.QosKnobs.class_entries`: 16 / 192 / 128
    with bulk priorities in use, else 16 / 128 / 128, measured in
    reports/experiments.md) belong to a 128-entry read queue; another
    ``read_queue`` scales them (multiples of 4 entries, at least 4 each).
    Reads and writes of a class share its entries, so ``write_queue`` does
    not enter.  A class the contract limits (spec §12) reserves four entries
    per credit instead (:meth:`~kvfabric.sim.fabric.FabricQosPolicy.class_entries`).
    """
    from kvfabric.sim.fabric import QosKnobs

    base = QosKnobs().class_entries(bulk_in_use)
    return QosKnobs(entries=tuple(max(4, e * read_queue // 128 // 4 * 4) for e in base))


def make_policy(name, contract_doc, workload):
    from kvfabric.sim.controller import SharedQueues
    from kvfabric.sim.front_ends import make_front_end
    from kvfabric.sim.workload import WorkloadError

    policy = make_front_end(name, contract_doc)
    if name == "fabric-qos":
        knobs = qos_knobs_for(workload.read_queue, policy.bulk_in_use)
        policy.knobs = dataclasses.replace(knobs, **workload.controller)
        return policy
    if workload.controller:
        raise WorkloadError(f"{workload.controller_source}: these knobs belong to the fabric-qos "
                            f"controller; policy {name!r} has none")
    queues = SharedQueues(workload.read_queue, workload.write_queue)
    base = policy.controller_args

    def controller_args():
        return {**base(), "admission": queues}

    policy.controller_args = controller_args
    return policy


@dataclasses.dataclass
class SystemRun:
    """What ``kvfabric system`` simulates for a contract and a workload file."""

    system: object          # kvfabric.sim.system.System, not yet run
    workload: object        # kvfabric.sim.workload.Workload
    doc: dict               # the contract as written
    compiled: object        # ... compiled
    channel_doc: dict       # the one simulated channel's contract (one_channel_contract)
    channel: object         # ... compiled


def build_system(contract_path, workload_path, policy_name, *, seed=None, cycles=None, idle_prefills=False):
    """The system ``kvfabric system`` runs (its one construction, also the
    workload family's): the contract rescaled to one simulated channel, the
    workload's tenants, the CXL link when a decode spills, the policy.
    ``seed`` and ``cycles`` override the workload file's; ``idle_prefills``
    turns every prefill idle (a decode-only baseline)."""
    from kvfabric.sim.fabric import FABRIC_MHZ
    from kvfabric.sim.hbm3 import CHANNEL_GBPS, ns_to_cycles
    from kvfabric.sim.system import CxlLink, System
    from kvfabric.sim.workload import TenantSpec, build_tenants, load_workload, needs_cxl, one_channel_contract

    try:
        with open(contract_path, "rb") as f:
            doc = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ContractError(f"{contract_path}: not valid TOML: {e}") from None
    compiled = compile_contract(doc, source=str(contract_path))  # the user's contract as written
    ids = sorted(t.id for t in compiled.tenants)
    if ids != list(range(len(ids))):
        raise ContractError(f"{contract_path}: kvfabric system needs tenant ids 0..{len(ids) - 1}, "
                            f"found {', '.join(map(str, ids))}")
    channel_doc = one_channel_contract(doc, CHANNEL_GBPS, FABRIC_MHZ)
    try:
        channel = compile_contract(channel_doc, source=f"{contract_path} (one simulated channel)")
    except ContractError as e:
        raise ContractError(f"{e}; the contract's per-channel shares do not fit one "
                            f"{float(CHANNEL_GBPS)} GB/s channel") from None
    workload = load_workload(workload_path, ids)
    if seed is not None:
        workload.seed = seed
    if cycles:
        workload.cycles = cycles
    if idle_prefills:
        workload.tenants = [t if t.kind != "prefill" else TenantSpec(t.id, "idle") for t in workload.tenants]
    tenants = build_tenants(workload)
    policy = make_policy(policy_name, channel_doc, workload)
    cxl = None
    if needs_cxl(workload):
        # 320 ns behind a link of 25 GB/s per channel (setup B's scaled figures).
        cxl = CxlLink(latency=ns_to_cycles(320), cycles_per_access=ns_to_cycles(Fraction(32, 25)))
    return SystemRun(System(tenants, policy, cxl=cxl), workload, doc, compiled, channel_doc, channel)


def run_system(contract_path, workload_path, policy_name):
    """Simulate; return the result dict the command prints and writes."""
    from kvfabric.sim.hbm3 import MEMORY_MHZ

    run = build_system(contract_path, workload_path, policy_name)
    system, workload, compiled, channel, doc = run.system, run.workload, run.compiled, run.channel, run.doc
    tenants = system.tenants
    system.run(workload.cycles)
    ns = Fraction(1000, MEMORY_MHZ)
    stats = system.channel.stats
    rows, warnings = [], []
    for spec, t in zip(workload.tenants, tenants):
        gbps = Fraction(stats.bytes[t.tenant_id] * MEMORY_MHZ, workload.cycles * 1000)
        if spec.kind == "decode":
            warning = headroom_warning(compiled.tenant_by_id(spec.id), channel.tenant_by_id(spec.id), gbps)
            if warning:
                warnings.append(warning)
        row = {"id": spec.id, "kind": spec.kind, "steps": None, "p50_ns": None, "p99_ns": None,
               "gbps": round(float(gbps), 3)}
        if spec.kind == "decode":
            lat = sorted(lat for _, lat in t.steps)
            row["steps"] = len(lat)
            if lat:
                row["p50_ns"] = round(float(percentile(lat, 50) * ns), 1)
                row["p99_ns"] = round(float(percentile(lat, 99) * ns), 1)
        elif spec.kind == "prefill":
            row["jobs"] = len(t.jobs)
        rows.append(row)
    utilisation = Fraction(sum(stats.bytes), workload.cycles * 32)
    return {"policy": policy_name, "cycles": workload.cycles, "tenants": rows,
            "utilisation": round(float(utilisation), 4), "warnings": warnings,
            "simulated": simulated_channel(compiled, channel, doc)}


def simulated_channel(compiled, channel, doc):
    """What the system model ran instead of the contract as written: one
    HBM3-6400 channel with the arbiter at the front end's clock, each tenant's
    per-channel share of the contract rescaled to it (sim/workload.py
    one_channel_contract). Printed and written to the JSON, never silent."""
    fab = doc["fabric"]
    return {
        "contract": {"channels": int(fab.get("channels", 1)), "channel_gbps": float(fab["channel_gbps"]),
                     "clock_mhz": float(fab["clock_mhz"])},
        "channel": {"channels": 1, "channel_gbps": float(channel.channel_gbps),
                    "clock_mhz": float(channel.clock_mhz)},
        "tenants": [{"id": t.id, "guaranteed_gbps": [float(t.guaranteed_gbps),
                                                      float(channel.tenant_by_id(t.id).guaranteed_gbps)]}
                    for t in compiled.tenants],
    }


def headroom_warning(contract, channel, gbps):
    """The warning for a decode tenant whose measured ``gbps`` on the simulated
    channel exceeds :data:`HEADROOM` of its guarantee there (``channel``, the
    tenant in the one-channel contract; ``contract``, as the user wrote it), or None."""
    guarantee = channel.guaranteed_gbps
    if gbps <= HEADROOM * guarantee:
        return None
    # The contract's figure that would put the demand at HEADROOM: the
    # one-channel rescaling is linear, so scale the written guarantee.
    if guarantee:
        need = contract.guaranteed_gbps * gbps / (HEADROOM * guarantee)
        share = f"{float(gbps / guarantee):.0%} of its guarantee of {float(guarantee):.3f} GB/s"
    else:
        need = None
        share = "and it has no guarantee"
    advice = (f"guarantee a latency-bound tenant at least {float(1 / HEADROOM):g}x its demand"
              + (f": guaranteed_gbps >= {float(need):.3f} in the contract" if need is not None else ""))
    return (f"tenant {contract.id} ('{contract.name}', decode) measured {float(gbps):.3f} GB/s on the "
            f"simulated channel, {share}: above {float(HEADROOM):.0%} its bucket can run dry and its "
            f"reads then go burst-kind, behind every guaranteed one; {advice}")


def cmd_system(args) -> int:
    result = run_system(args.contract, args.workload, args.policy)
    for warning in result["warnings"]:
        print(f"kvfabric system: warning: {warning}", file=sys.stderr)
    sim = result["simulated"]
    c, ch = sim["contract"], sim["channel"]
    print(f"simulated: one {ch['channel_gbps']:g} GB/s HBM3-6400 channel, arbiter at {ch['clock_mhz']:g} MHz; "
          f"the contract's {c['channels']} x {c['channel_gbps']:g} GB/s at {c['clock_mhz']:g} MHz is rescaled "
          f"to it per channel (guaranteed GB/s, contract -> simulated: "
          + ", ".join(f"{t['id']}: {t['guaranteed_gbps'][0]:g} -> {t['guaranteed_gbps'][1]:.3g}"
                      for t in sim["tenants"]) + ")")
    print(f"policy {result['policy']}, {result['cycles']} cycles, "
          f"utilisation {result['utilisation']:.1%}")
    print(format_table(result["tenants"], [
        ("id", "id", "d"), ("kind", "kind", "s"), ("steps", "steps", "d"), ("p50_ns", "p50 ns", ".0f"),
        ("p99_ns", "p99 ns", ".0f"), ("gbps", "GB/s", ".3f")]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
        print(f"JSON written to {args.json}")
    return 0


def add_parser(sub) -> None:
    s = sub.add_parser("system", help="run a workload through the HBM3 system model under a policy")
    s.add_argument("--contract", required=True, help="contract TOML file")
    s.add_argument("--workload", required=True, help="workload TOML file ([system], [[tenant]])")
    s.add_argument("--policy", required=True, choices=POLICIES)
    s.add_argument("--json", help="write the per-tenant results as JSON here")
    s.set_defaults(func=cmd_system)
