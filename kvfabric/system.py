"""``kvfabric system``: a user's contract and workload through the system model.

The contract's ``channels`` HBM3-6400 channels (51.2 GB/s each, memory clock
1600 MHz) carry the workload, each with its own controller and front end; the
workload's ``[mapping]`` and per-tenant ``channels`` say which channel serves
each address (:func:`kvfabric.sim.workload.channel_map`).  For ``fabric`` and
``fabric-qos`` every channel's front end is one golden-model channel
(``ChannelModel``, as ``model/fabric.py`` has one per channel) with the
contract's per-channel registers at the contract's ``clock_mhz``
(``fabric-qos`` with the contract's ``CREDITS`` when it gives them, spec §12).
A contract for another channel rate than 51.2 GB/s cannot be simulated as
written: each tenant keeps its share of a channel, rescaled to 51.2 GB/s
(:func:`kvfabric.sim.workload.simulated_contract`), and the command says so.

A decode whose measured demand exceeds :data:`HEADROOM` of its guarantee is
warned about: its bucket can run dry, and its reads then go burst-kind,
behind every guaranteed one (reports/experiments.md, the doubled steps).
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from fractions import Fraction

from kvfabric.model.compat import tomllib
from kvfabric.model.contract import ContractError, compile_contract
from kvfabric.model.replay import percentile
from kvfabric.sim.front_ends import FRONT_ENDS
from kvfabric.sim.mapping import TRANSACTION_BYTES
from kvfabric.spec import CREDIT_CLASS_NAMES
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
    not enter.  The burst yield's budget (``yield_budget``, 96 reads of 128) and
    the write drain's high watermark (``write_high``, 28 or 56 writes per
    pseudo-channel of 128 entries, :meth:`~kvfabric.sim.fabric.QosKnobs.drain_high`,
    at least 4 above the low one: the writes it waits for sit in the classes'
    entries) scale the same way.  A class the contract limits (spec §12) reserves four entries
    per credit instead (:meth:`~kvfabric.sim.fabric.FabricQosPolicy.class_entries`).
    """
    from kvfabric.sim.fabric import QosKnobs

    defaults = QosKnobs()
    base = defaults.class_entries(bulk_in_use)
    return QosKnobs(entries=tuple(max(4, e * read_queue // 128 // 4 * 4) for e in base),
                    yield_budget=defaults.yield_budget * read_queue // 128,
                    write_high=max(defaults.write_low + 4, defaults.drain_high(bulk_in_use) * read_queue // 128))


def make_policy(name, contract_doc, workload):
    from kvfabric.sim.controller import SharedQueues
    from kvfabric.sim.front_ends import make_front_end
    from kvfabric.sim.workload import WorkloadError

    defaulted = workload.request_bytes is None
    policy = make_front_end(name, contract_doc, request_bytes=workload.request_bytes or TRANSACTION_BYTES)
    if defaulted and name.startswith("fabric"):
        # Read when the policy is prepared; the default is the contract's to
        # allow (it never exceeds its max_request_bytes).
        policy.request_bytes = default_request_bytes(contract_doc, policy.compiled)
    if name == "fabric-qos":
        knobs = qos_knobs_for(workload.read_queue, policy.bulk_in_use)
        policy.knobs = dataclasses.replace(knobs, **workload.controller)
        if defaulted and min(policy.class_entries()) < policy.entries_per_grant:
            # The default only: a class of fewer entries than a 256 B request
            # (a small read_queue or [controller] reserved_entries) keeps 128 B.
            policy.request_bytes = TRANSACTION_BYTES
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
    channel_doc: dict       # the simulated contract (simulated_contract: as written, or rescaled)
    channel: object         # ... compiled
    rescaled: bool = False  # whether channel_doc rescales the contract's GB/s
    residency: list = None  # kvfabric.sim.workload.residency: each tenant's KV per tier under its quotas


def build_system(contract_path, workload_path, policy_name, *, seed=None, cycles=None, idle_prefills=False):
    """The system ``kvfabric system`` runs (its one construction, also the
    workload family's): the contract's channels at its clock (its GB/s
    rescaled per channel when its channel rate is not HBM3-6400's), the
    workload's tenants and channel map, one CXL link per channel when a
    decode spills, one policy per channel.  ``seed`` and ``cycles`` override
    the workload file's; ``idle_prefills`` turns every prefill idle (a
    decode-only baseline)."""
    from kvfabric.sim.hbm3 import CHANNEL_GBPS, ns_to_cycles
    from kvfabric.sim.system import CxlLink, System
    from kvfabric.sim.workload import (TenantSpec, build_tenants, channel_map, load_workload, needs_cxl,
                                       residency, simulated_contract)

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
    channel_doc, rescaled = simulated_contract(doc, CHANNEL_GBPS)
    try:
        channel = compile_contract(channel_doc, source=f"{contract_path} (as simulated)")
    except ContractError as e:
        raise ContractError(f"{e}; the contract's per-channel shares do not fit a "
                            f"{float(CHANNEL_GBPS)} GB/s channel") from None
    n = channel.params.channels
    workload = load_workload(workload_path, ids, channels=n)
    if seed is not None:
        workload.seed = seed
    if cycles:
        workload.cycles = cycles
    if idle_prefills:
        workload.tenants = [t if t.kind != "prefill" else TenantSpec(t.id, "idle") for t in workload.tenants]
    # The contract's hbm_quota_mb / cxl_quota_mb bound each tenant's KV in each tier (spec §12).
    quotas = {t.id: {k: t.extra[k] for k in ("hbm_quota_mb", "cxl_quota_mb") if k in t.extra}
              for t in compiled.tenants}
    placed = residency(workload, quotas, source=f"{contract_path} and {workload_path}")
    hbm_blocks = {r["id"]: r["hbm_blocks"] for r in placed if r["hbm_blocks"] is not None}
    tenants = build_tenants(workload, hbm_blocks)
    # One front end per channel: each holds its channel's arbiter or queue state.
    policies = [make_policy(policy_name, channel_doc, workload) for _ in range(n)]
    if workload.request_bytes is None:   # what make_policy chose (the baselines take transactions one by one)
        chosen = getattr(policies[0], "request_bytes", None)
        workload.request_bytes = chosen if chosen is not None else default_request_bytes(channel_doc, channel)
    if policy_name.startswith("fabric") and channel.config.coord_enable:
        # One coordinator over every channel's arbiter (spec §13); other
        # policies have no arbiter for it to set rates in.
        from kvfabric.sim.fabric import FabricCoordinator

        FabricCoordinator(policies, channel.config)
    cxl = None
    if needs_cxl(workload, hbm_blocks):
        # 320 ns behind a link of 25 GB/s per channel (setup B's scaled figures).
        links = [CxlLink(latency=ns_to_cycles(320), cycles_per_access=ns_to_cycles(Fraction(32, 25)))
                 for _ in range(n)]
        cxl = links[0] if n == 1 else links
    system = System(tenants, policies[0] if n == 1 else policies, cxl=cxl, channel_map=channel_map(workload))
    return SystemRun(system, workload, doc, compiled, channel_doc, channel, rescaled, placed)


def run_system(contract_path, workload_path, policy_name):
    """Simulate; return the result dict the command prints and writes."""
    from kvfabric.sim.hbm3 import MEMORY_MHZ

    run = build_system(contract_path, workload_path, policy_name)
    system, workload, compiled, channel, doc = run.system, run.workload, run.compiled, run.channel, run.doc
    tenants = system.tenants
    system.run(workload.cycles)
    ns = Fraction(1000, MEMORY_MHZ)
    all_stats = [c.stats for c in system.channels]
    n = len(all_stats)
    sets = system.channel_map.sets
    coordinated = getattr(system.policies[0], "coordinator", None) is not None
    rows, warnings = [], []
    for warning in (request_size_warning(doc, compiled, workload.request_bytes, policy_name),
                    coordinator_request_warning(compiled, workload.request_bytes, policy_name)):
        if warning:
            warnings.append(warning)
    for spec, t in zip(workload.tenants, tenants):
        per_channel = [Fraction(st.bytes[t.tenant_id] * MEMORY_MHZ, workload.cycles * 1000) for st in all_stats]
        gbps = sum(per_channel)
        if spec.kind == "decode":
            # With the coordinator a tenant's channels share its whole guarantee (spec §13).
            reach = n if coordinated else len(sets[t.tenant_id])
            warning = headroom_warning(compiled.tenant_by_id(spec.id), channel.tenant_by_id(spec.id), gbps,
                                       channels=n, reach=reach)
            if warning:
                warnings.append(warning)
        row = {"id": spec.id, "kind": spec.kind, "steps": None, "p50_ns": None, "p99_ns": None,
               "gbps": round(float(gbps), 3)}
        if n > 1:
            row["channel_gbps"] = [round(float(g), 3) for g in per_channel]
        if spec.kind == "decode":
            lat = sorted(lat for _, lat in t.steps)
            row["steps"] = len(lat)
            if lat:
                row["p50_ns"] = round(float(percentile(lat, 50) * ns), 1)
                row["p99_ns"] = round(float(percentile(lat, 99) * ns), 1)
        elif spec.kind == "prefill":
            row["jobs"] = len(t.jobs)
        rows.append(row)
    peak_bytes = sum(sum(st.bytes) for st in all_stats)
    utilisation = Fraction(peak_bytes, workload.cycles * 32 * n)
    result = {"policy": policy_name, "cycles": workload.cycles, "request_bytes": workload.request_bytes,
              "tenants": rows,
              "utilisation": round(float(utilisation), 4), "warnings": warnings,
              "simulated": simulated_channel(compiled, channel, doc, run.rescaled, system.channel_map)}
    if n > 1:
        result["channel_utilisation"] = [round(float(Fraction(sum(st.bytes), workload.cycles * 32)), 4)
                                         for st in all_stats]
    if any(r["hbm_quota_mb"] is not None or r["cxl_quota_mb"] is not None for r in run.residency):
        # Only with quotas (the JSON of before otherwise): each tenant's bound
        # per tier and, measured, the share of its reads that went over CXL.
        result["residency"] = []
        for r, t in zip(run.residency, tenants):
            row = {k: r[k] for k in ("id", "kind", "hbm_quota_mb", "cxl_quota_mb", "footprint_bytes",
                                     "hbm_bytes", "cxl_bytes")}
            issued = getattr(t, "transactions", None)
            row["cxl_read_share"] = (round(t.cxl_transactions / issued, 4) if issued else None)
            result["residency"].append(row)
    return result


def simulated_channel(compiled, channel, doc, rescaled=False, channel_map=None):
    """What the system model ran for the contract as written: its channels
    of HBM3-6400 with the arbiter at the contract's clock, each tenant's
    guarantee over them (``guaranteed_gbps``: as written, as simulated; they
    differ only when ``rescaled``, a contract for another channel rate, whose
    per-channel shares sim/workload.py simulated_contract keeps), and the
    address mapping. Printed and written to the JSON, never silent."""
    fab = doc["fabric"]
    out = {
        "contract": {"channels": int(fab.get("channels", 1)), "channel_gbps": float(fab["channel_gbps"]),
                     "clock_mhz": float(fab["clock_mhz"])},
        "channel": {"channels": channel.params.channels, "channel_gbps": float(channel.channel_gbps),
                    "clock_mhz": float(channel.clock_mhz)},
        "tenants": [{"id": t.id, "guaranteed_gbps": [float(t.guaranteed_gbps),
                                                      float(channel.tenant_by_id(t.id).guaranteed_gbps)]}
                    for t in compiled.tenants],
        "rescaled": rescaled,
    }
    if channel_map is not None:
        out["mapping"] = {"interleave_bytes": channel_map.interleave_bytes,
                          "tenant_channels": [list(s) for s in channel_map.sets]}
        if any(w is not None for w in channel_map.weights):  # only when given: the JSON of before otherwise
            out["mapping"]["tenant_weights"] = [None if w is None else list(w) for w in channel_map.weights]
        if any(channel_map.moves):
            out["mapping"]["tenant_moves"] = [
                [{"at_cycles": at, "channels": list(s), "channel_weights": None if w is None else list(w)}
                 for at, s, w in m] for m in channel_map.moves]
    cfg = channel.config
    if cfg.coord_enable:  # (the fabric policies run it; absent when off, as before it existed)
        out["coordinator"] = {"epoch_cycles": cfg.coord_epoch, "floor": cfg.coord_floor / 256}
    return out


def default_request_bytes(doc, compiled):
    """The request size of a workload that gives no ``request_bytes``: 256 B,
    two contiguous transactions a request as kvfabric's AXI front end's
    default pieces (spec §14.2), unless the contract sizes its credits for
    smaller grants or takes no larger request.  A contract that gives credit
    limits in grants (``credit_*``) without the size they assumed, or sizes
    them by Little's law for grants under 256 B (``memory_request_bytes``),
    keeps one 128 B transaction a request: larger grants would put that many
    more bytes behind each credit (the workload family with 256 B requests and
    credits for 128 B: draws 2, 7 and 11 at 1.37-1.75x their decode-only p99,
    against at most 1.13x with both at 256, issue #41).

    A contract that enables the coordinator (spec §13) keeps 128 B too:
    256 B requests arrive one a clock where the channel carries 128 B a
    clock, so every backlogged tenant's queue fills on every channel and the
    backlog bits (an acceptance that leaves the queue full, §13.4) no longer
    say where an in-order stream is short; the allocation then levels its
    guarantee off the channels it waits on (`make experiments`' shift row
    at 256 B: the spread prefill 0.95 of its total, 0.99 at 128 B; issue
    #43). Latency-bound (arrival-ordered) tenants are never levelled."""
    piece = 2 * TRANSACTION_BYTES
    if compiled.params.max_request_bytes < piece or compiled.config.coord_enable:
        return TRANSACTION_BYTES
    if not compiled.gives_credits:
        return piece
    if compiled.credit_keys & set(CREDIT_CLASS_NAMES):
        return TRANSACTION_BYTES
    return piece if _credits_sized_for(doc, compiled) >= piece else TRANSACTION_BYTES


def _credits_sized_for(doc, compiled):
    """Bytes of the grant the contract's credit limits are sized for by
    Little's law (spec §12: ``memory_request_bytes``, default
    ``max_request_bytes``), or None when it gives no ``memory_round_trip_ns``."""
    if "memory_round_trip_ns" not in compiled.credit_keys:
        return None
    return doc["fabric"].get("memory_request_bytes", compiled.params.max_request_bytes)


def request_size_warning(doc, compiled, request_bytes, policy_name):
    """The warning for a fabric-qos contract whose credit limits Little's law
    sized (``memory_round_trip_ns``, spec §12) for grants of another size
    than the workload's requests carry (``[system] request_bytes``), or None.
    Each credit holds one grant: sized for 128 B grants and given 256 B ones,
    the classes hold twice the bytes the contract meant (the workload family's
    draw 11, issue #41: its under-guaranteed decode's p99 went from 1.0x to
    1.37x its decode-only p99)."""
    sized = _credits_sized_for(doc, compiled)
    if policy_name != "fabric-qos" or sized is None or sized == request_bytes:
        return None
    return (f"the contract sizes its credits for grants of {sized} B (memory_request_bytes) and the workload's "
            f"requests carry up to {request_bytes} B (request_bytes): each credit holds one grant, so the "
            f"classes hold {request_bytes / sized:g}x the bytes Little's law asked for; give both the same size")


def coordinator_request_warning(compiled, request_bytes, policy_name):
    """The warning for a fabric policy whose contract enables the coordinator
    (spec §13) and whose workload asks for 256 B requests, or None: every
    backlogged queue then fills, and the backlog bits stop saying where a
    tenant is short (:func:`default_request_bytes` keeps 128 B for such
    contracts)."""
    if not policy_name.startswith("fabric") or not compiled.config.coord_enable \
            or request_bytes <= TRANSACTION_BYTES:
        return None
    return (f"the contract enables the coordinator and the workload's requests carry up to {request_bytes} B "
            f"(request_bytes): they arrive faster than the channel serves them, so every backlogged tenant's "
            f"queue fills on every channel and the coordinator's backlog bits (spec §13.4) no longer say where "
            f"a tenant is short; it may level an in-order stream's guarantee off the channels it waits on "
            f"(issue #43); request_bytes = {TRANSACTION_BYTES} avoids it")


def headroom_warning(contract, channel, gbps, *, channels=1, reach=1):
    """The warning for a decode tenant whose measured ``gbps`` on the simulated
    channels exceeds :data:`HEADROOM` of its guarantee there (``channel``, the
    tenant in the simulated contract; ``contract``, as the user wrote it), or None.

    Each channel enforces 1/``channels`` of a tenant's guarantee (spec §12),
    so a tenant whose addresses reach ``reach`` of them is guaranteed
    ``reach / channels`` of its contract; that is the guarantee judged."""
    guarantee = channel.guaranteed_gbps * reach / channels
    if gbps <= HEADROOM * guarantee:
        return None
    # The contract's figure that would put the demand at HEADROOM: the
    # rescaling and the per-channel split are linear, so scale the written guarantee.
    if guarantee:
        need = contract.guaranteed_gbps * gbps / (HEADROOM * guarantee)
        share = f"{float(gbps / guarantee):.0%} of its guarantee of {float(guarantee):.3f} GB/s"
        if reach < channels:
            share += (f" (its addresses reach {reach} of {channels} channels, each of which enforces "
                      f"1/{channels} of the contract's, spec §12)")
    else:
        need = None
        share = "and it has no guarantee"
    advice = (f"guarantee a latency-bound tenant at least {float(1 / HEADROOM):g}x its demand"
              + (f": guaranteed_gbps >= {float(need):.3f} in the contract" if need is not None else ""))
    where = "the simulated channel" if channels == 1 else f"the {channels} simulated channels"
    return (f"tenant {contract.id} ('{contract.name}', decode) measured {float(gbps):.3f} GB/s on "
            f"{where}, {share}: above {float(HEADROOM):.0%} its bucket can run dry and its "
            f"reads then go burst-kind, behind every guaranteed one; {advice}")


def describe_simulated(sim):
    """The first line ``kvfabric system`` prints: what it simulates, what it
    takes as written and what it rescales."""
    c, ch = sim["contract"], sim["channel"]
    n = ch["channels"]
    what = (f"one {ch['channel_gbps']:g} GB/s HBM3-6400 channel" if n == 1
            else f"{n} x {ch['channel_gbps']:g} GB/s HBM3-6400 channels")
    head = (f"simulated: {what}, arbiter at {ch['clock_mhz']:g} MHz; the contract's {c['channels']} x "
            f"{c['channel_gbps']:g} GB/s at {c['clock_mhz']:g} MHz")
    if sim["rescaled"]:
        text = (f"{head}: its channel rate is not the HBM3 model's, so each tenant keeps its share of a "
                f"channel, rescaled to {ch['channel_gbps']:g} GB/s (guaranteed GB/s, contract -> simulated: "
                + ", ".join(f"{t['id']}: {t['guaranteed_gbps'][0]:g} -> {t['guaranteed_gbps'][1]:.3g}"
                            for t in sim["tenants"]) + ")")
    else:
        text = f"{head}, as written (channels, clock and GB/s)"
    coord = sim.get("coordinator")
    if coord:
        text += (f"; coordinator on (spec §13: epoch {coord['epoch_cycles']} fabric cycles, floor "
                 f"{coord['floor']:g}; fabric policies only)")
    mapping = sim.get("mapping")
    if mapping and n > 1:
        narrow = [f"tenant {t}: channels {', '.join(map(str, s))}"
                  for t, s in enumerate(mapping["tenant_channels"]) if len(s) < n]
        text += (f"; {mapping['interleave_bytes']} B interleave, "
                 + ("; ".join(narrow) + ", the others on all" if narrow else "every tenant on all channels"))
        skewed = [t for t, w in enumerate(mapping.get("tenant_weights") or []) if w is not None]
        if skewed:
            text += "; weighted: tenant " + ", ".join(map(str, skewed))
        for t, m in enumerate(mapping.get("tenant_moves") or []):
            for move in m:
                text += (f"; tenant {t} moves to channels {', '.join(map(str, move['channels']))} "
                         f"at cycle {move['at_cycles']}")
    return text


#: A clock whose grants carry less than this many times the channel's peak is
#: noted: measured by ``python -m kvfabric.sim.studies.grant_rate``
#: (reports/grant_rate.md), which runs the workload family's 400 MHz draws at
#: several clocks with nothing else changed.
GRANT_HEADROOM = 1.25


def arbiter_note(sim, request_bytes=TRANSACTION_BYTES):
    """A note when the arbiter's clock grants the system model's requests of
    ``request_bytes`` (the workload's ``[system] request_bytes``; one a
    clock) at less than :data:`GRANT_HEADROOM` times the channel's peak, or
    None.

    Below the peak the fabric caps the channel.  Between the peak and
    :data:`GRANT_HEADROOM` it does not, but a decode step's requests reach the
    controller hardly faster than it serves them: FR-FCFS without a fabric
    holds a step's first accesses at once and overlaps their row misses
    across banks, while a step fed at the channel's own rate turns every
    data-bus bubble of a row miss into step latency that is never made up."""
    ch = sim["channel"]
    grant_gbps = ch["clock_mhz"] * request_bytes / 1000
    what = f"the system model's requests of {request_bytes} B"
    if grant_gbps + 1e-9 >= GRANT_HEADROOM * ch["channel_gbps"]:
        return None
    if grant_gbps + 1e-9 < ch["channel_gbps"]:
        return (f"note: the arbiter at {ch['clock_mhz']:g} MHz grants at most {grant_gbps:g} GB/s of {what} per "
                f"channel, below the channel's {ch['channel_gbps']:g} GB/s")
    need = math.ceil(GRANT_HEADROOM * ch["channel_gbps"] * 1000 / request_bytes - 1e-9)
    more = (f"; a workload's [system] request_bytes = {2 * TRANSACTION_BYTES} sends contiguous transactions "
            f"two to a request, as the AXI front end's pieces" if request_bytes == TRANSACTION_BYTES else "")
    return (f"note: the arbiter at {ch['clock_mhz']:g} MHz grants at most {grant_gbps:g} GB/s of {what} per "
            f"channel, {grant_gbps / ch['channel_gbps']:.2f}x the channel's "
            f"{ch['channel_gbps']:g} GB/s: a decode step's requests then reach the controller hardly faster than "
            f"it serves them, and the bus bubbles of its row misses become step latency "
            f"(reports/grant_rate.md); from {need} MHz the grants carry {GRANT_HEADROOM:g}x the channel's peak"
            + more)


def cmd_system(args) -> int:
    result = run_system(args.contract, args.workload, args.policy)
    for warning in result["warnings"]:
        print(f"kvfabric system: warning: {warning}", file=sys.stderr)
    sim = result["simulated"]
    print(describe_simulated(sim))
    note = arbiter_note(sim, result["request_bytes"])
    if note:
        print(note)
    if result["policy"].startswith("fabric"):
        rb = result["request_bytes"]
        print(f"requests: up to {rb} B a grant ("
              + (f"two contiguous {TRANSACTION_BYTES} B transactions, the AXI front end's piece"
                 if rb > TRANSACTION_BYTES else f"one {TRANSACTION_BYTES} B transaction")
              + "; [system] request_bytes)")
    print(f"policy {result['policy']}, {result['cycles']} cycles, "
          f"utilisation {result['utilisation']:.1%}"
          + (" (per channel: " + ", ".join(f"{u:.1%}" for u in result["channel_utilisation"]) + ")"
             if "channel_utilisation" in result else ""))
    columns = [("id", "id", "d"), ("kind", "kind", "s"), ("steps", "steps", "d"), ("p50_ns", "p50 ns", ".0f"),
               ("p99_ns", "p99 ns", ".0f"), ("gbps", "GB/s", ".3f")]
    rows = result["tenants"]
    if "channel_utilisation" in result:
        # Several channels: where each tenant's bytes went (a channel set shows here).
        columns.append(("per_channel", "GB/s per channel", "s"))
        rows = [dict(r, per_channel=" ".join(f"{g:.1f}" for g in r["channel_gbps"])) for r in rows]
    print(format_table(rows, columns))
    if "residency" in result:
        print("residency under the contract's quotas (spec §12; bytes of KV a tenant reads, per tier, "
              "and the share of its reads measured over CXL):")
        print(format_table(
            [dict(r, hbm=_quota(r["hbm_quota_mb"]), cxl=_quota(r["cxl_quota_mb"])) for r in result["residency"]],
            [("id", "id", "d"), ("kind", "kind", "s"), ("hbm", "hbm_quota_mb", "s"), ("cxl", "cxl_quota_mb", "s"),
             ("footprint_bytes", "KV B", "d"), ("hbm_bytes", "in HBM B (max)", "d"), ("cxl_bytes", "in CXL B (max)", "d"),
             ("cxl_read_share", "reads over CXL", ".3f")]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
        print(f"JSON written to {args.json}")
    return 0


def _quota(mb):
    return "-" if mb is None else f"{mb:g}"


def add_parser(sub) -> None:
    s = sub.add_parser("system", help="run a workload through the HBM3 system model under a policy")
    s.add_argument("--contract", required=True, help="contract TOML file")
    s.add_argument("--workload", required=True,
                   help="workload TOML file ([system], [[tenant]]; optional [mapping], [controller])")
    s.add_argument("--policy", required=True, choices=POLICIES)
    s.add_argument("--json", help="write the per-tenant results as JSON here")
    s.set_defaults(func=cmd_system)
