"""A user's workload file for ``kvfabric system``: parsing, checking, building.

Format (TOML)::

    [system]
    cycles = 400000          # memory cycles to simulate (1600 MHz)
    seed = 1                 # optional
    read_queue = 128         # optional, controller read entries (32 B accesses), default 128
    write_queue = 64         # optional, controller write entries, default 64
    request_bytes = 256      # optional, most bytes one fabric request carries: 128 (each 128 B
                             # transaction its own) or 256 (with the next contiguous one, as the
                             # AXI front end's 256 B pieces); fabric policies only.  Default: 256,
                             # or 128 when the contract's credits are sized for smaller grants or
                             # it enables the coordinator (kvfabric.system.default_request_bytes)

    [mapping]                # optional: how tenants' addresses spread over the contract's channels
    interleave_bytes = 256   # bytes dealt round robin over a tenant's channels (multiple of 128
                             # in 128..1048576; default 256, sim/mapping.py says why)

    [controller]             # optional: the fabric-qos controller's knobs (QosKnobs)
    reserved_entries = [16, 128, 128]  # urgent, guaranteed, burst entries (each 4..read_queue)
    drain_interval = 2000    # cycles between forced write drains (0: watermarks only)
    activation_guard = true  # burst reads open rows only into an empty tFAW window
    burst_yield = true       # burst credits wait while protected reads are queued
    burst_yield_budget = 96  # ... unless fewer reads are queued and no write drain runs or is due
                             # (0: always wait)
    drain_recuts = 2         # times in a row protected reads may cut a drain released after its hold
                             # (0..64; 0: a released drain runs to the low watermark)
    drain_high = 56          # writes queued per pseudo-channel that make a drain due (5..4096;
                             # it runs down to 4; default 28 with bulk priorities, else 56)
    drain_min_batch = 8      # writes a drain serves before protected reads may cut it (0..4096)

    [[tenant]]               # one per contract tenant, same id
    id = 0
    kind = "prefill"         # "decode", "prefill" or "idle"
    channels = [0, 1]        # optional, any kind: the channels its addresses interleave over
                             # (distinct, each in 0..channels-1 of the contract; default all)
    channel_weights = [3, 1] # optional: units of interleave_bytes per round on each of its
                             # channels (one integer 1..256 per channel of 'channels', in its
                             # order, or of all channels without it; default one each): a skew
    moves = [{ at_cycles = 200000, channels = [2, 3] }]
                             # optional: from at_cycles on (memory cycles, 1..2^40, increasing
                             # from move to move) its new transactions go to these channels,
                             # optionally with their own channel_weights: a demand shift
    job_bytes = 2097152
    period_cycles = 200000
    phase_cycles = 10000     # optional, default 0
    window = 300             # optional, transactions in flight (default 300)
    chunks = 1               # optional
    write_share = 4          # optional: one in N 1 KiB blocks is a write (0: none)

    [[tenant]]
    id = 1
    kind = "decode"
    step_bytes = 13568
    think_cycles = 16843
    block_bytes = 256        # optional
    cxl_fraction = 0.0       # optional, share of KV blocks read over CXL

Every error names the file, the tenant (or table), the field and the
allowed range, like the contract compiler's.
"""

from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from kvfabric.model.compat import tomllib

from .mapping import DEFAULT_INTERLEAVE_BYTES, TRANSACTION_BYTES, ChannelMap

__all__ = ["WorkloadError", "Workload", "TenantSpec", "load_workload", "parse_workload", "channel_map",
           "simulated_contract", "residency", "MB"]

_TXN = 128
_MAX = 1 << 40
#: Bytes of the contract's ``hbm_quota_mb`` and ``cxl_quota_mb`` (MiB, as memory is sized).
MB = 1 << 20


class WorkloadError(ValueError):
    """A workload file that cannot be simulated; the message names what and where."""


@dataclass
class TenantSpec:
    id: int
    kind: str
    fields: dict = field(default_factory=dict)
    #: The channels its addresses interleave over (None: every channel).
    channels: tuple = None
    #: Units per round on each channel of ``channels`` (None: one each).
    weights: tuple = None
    #: ``(at_cycles, channels, weights)`` of each move, in order.
    moves: tuple = ()


@dataclass
class Workload:
    cycles: int
    seed: int
    read_queue: int
    write_queue: int
    tenants: list
    #: Most bytes one fabric request carries (:class:`~sim.fabric.FabricPolicy`'s
    #: ``request_bytes``); None: as the contract suits (``kvfabric.system.default_request_bytes``).
    request_bytes: int = None
    #: The [controller] table's knobs as QosKnobs keyword arguments (fabric-qos only).
    controller: dict = field(default_factory=dict)
    #: Where they came from: "<file>: [controller] <fields as written>", for errors.
    controller_source: str = ""
    #: [mapping] interleave_bytes: the unit dealt round robin over a tenant's channels.
    interleave_bytes: int = DEFAULT_INTERLEAVE_BYTES
    #: The contract's channel count the file was checked against.
    channels: int = 1


_SYSTEM = {
    # name: (required, lo, hi, default)
    "cycles": (True, 1, _MAX, None),
    "seed": (False, 0, (1 << 32) - 1, 1),
    "read_queue": (False, 1, 4096, 128),
    "write_queue": (False, 1, 4096, 64),
    "request_bytes": (False, _TXN, 2 * _TXN, None),
}
#: [controller] fields: name -> (QosKnobs field, lo, hi, 0 means None) for integers; booleans below.
_CONTROLLER_INTS = {"drain_interval": ("drain_interval", 0, _MAX, True),
                    "burst_yield_budget": ("yield_budget", 0, 8192, False),
                    "drain_recuts": ("preempt_recuts", 0, 64, False),
                    "drain_high": ("write_high", 5, 4096, False),
                    "drain_min_batch": ("preempt_min_batch", 0, 4096, False)}
_CONTROLLER_BOOLS = {"activation_guard": "guard_activations", "burst_yield": "yield_burst"}
_CONTROLLER = {"reserved_entries", *_CONTROLLER_INTS, *_CONTROLLER_BOOLS}
_KINDS = {
    "decode": {
        "step_bytes": (True, _TXN, _MAX, None),
        "think_cycles": (True, 1, _MAX, None),
        "block_bytes": (False, _TXN, 1 << 20, 256),
        "cxl_fraction": (False, 0, 1, 0),
    },
    "prefill": {
        "job_bytes": (True, _TXN, _MAX, None),
        "period_cycles": (True, 1, _MAX, None),
        "phase_cycles": (False, 0, _MAX, 0),
        "window": (False, 1, 65536, 300),
        "chunks": (False, 1, 4096, 1),
        "write_share": (False, 0, 1 << 16, 4),
    },
    "idle": {},
}
_FLOAT_FIELDS = {"cxl_fraction"}
#: [mapping] fields: name -> (required, lo, hi, default); interleave_bytes also a multiple of 128.
_MAPPING = {"interleave_bytes": (False, TRANSACTION_BYTES, 1 << 20, DEFAULT_INTERLEAVE_BYTES)}


def load_workload(path, tenant_ids, channels=1):
    """Read and check ``path`` against the contract's tenant ids and channel count."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except FileNotFoundError:
        raise WorkloadError(f"{path}: no such file") from None
    except tomllib.TOMLDecodeError as e:
        raise WorkloadError(f"{path}: not valid TOML: {e}") from None
    return parse_workload(doc, tenant_ids, source=str(path), channels=channels)


def _value(table, name, rule, where):
    required, lo, hi, default = rule
    if name not in table:
        if required:
            raise WorkloadError(f"{where}: missing field '{name}' (allowed {lo}..{hi})")
        return default
    v = table[name]
    if name in _FLOAT_FIELDS:
        ok = isinstance(v, (int, float)) and not isinstance(v, bool)
        kind = "a number"
    else:
        ok = isinstance(v, int) and not isinstance(v, bool)
        kind = "an integer"
    if not ok or not lo <= v <= hi:
        raise WorkloadError(f"{where}: field '{name}' = {v!r} must be {kind} in {lo}..{hi}")
    return v


def _no_unknown(table, allowed, where):
    for name in table:
        if name not in allowed:
            raise WorkloadError(f"{where}: unknown field '{name}' (allowed: {', '.join(sorted(allowed))})")


def parse_workload(doc, tenant_ids, source="workload", channels=1):
    """Check a parsed TOML document; ``tenant_ids`` are the contract's, in
    order, ``channels`` its channel count (the range of a tenant's ``channels``)."""
    system = doc.get("system")
    if not isinstance(system, dict):
        raise WorkloadError(f"{source}: missing [system] table (fields: {', '.join(_SYSTEM)})")
    for name in doc:
        if name not in ("system", "tenant", "controller", "mapping"):
            raise WorkloadError(f"{source}: unknown table '{name}' "
                                f"(allowed: [system], [mapping], [controller], [[tenant]])")
    where = f"{source}: [system]"
    _no_unknown(system, _SYSTEM, where)
    values = {name: _value(system, name, rule, where) for name, rule in _SYSTEM.items()}
    if values["request_bytes"] is not None and values["request_bytes"] % _TXN:
        raise WorkloadError(f"{where}: field 'request_bytes' = {values['request_bytes']} must be {_TXN} or "
                            f"{2 * _TXN} (whole {_TXN} B transactions)")
    values["interleave_bytes"] = _mapping(doc.get("mapping", {}), source)
    values["channels"] = channels
    table = doc.get("controller", {})
    values["controller"] = _controller(table, values["read_queue"], source)
    if values["controller"]:
        values["controller_source"] = f"{source}: [controller] {', '.join(sorted(table))}"
    raw = doc.get("tenant", [])
    if not isinstance(raw, list):
        raise WorkloadError(f"{source}: 'tenant' must be an array of tables ([[tenant]])")
    seen = {}
    for i, t in enumerate(raw):
        label = f"{source}: tenant #{i + 1}"
        if "id" not in t:
            raise WorkloadError(f"{label}: missing field 'id' (a contract tenant id: "
                                f"{', '.join(map(str, tenant_ids))})")
        tid = t["id"]
        if tid not in tenant_ids or isinstance(tid, bool):
            raise WorkloadError(f"{label}: field 'id' = {tid!r} is not a contract tenant id "
                                f"(allowed: {', '.join(map(str, tenant_ids))})")
        label = f"{source}: tenant {tid}"
        if tid in seen:
            raise WorkloadError(f"{label}: listed twice")
        kind = t.get("kind")
        if kind not in _KINDS:
            raise WorkloadError(f"{label}: field 'kind' = {kind!r} must be one of "
                                f"{', '.join(repr(k) for k in _KINDS)}")
        rules = _KINDS[kind]
        _no_unknown(t, {"id", "kind", *_MAPPING_FIELDS, *rules}, label)
        fields = {name: _value(t, name, rule, label) for name, rule in rules.items()}
        _check_shapes(kind, fields, label)
        seen[tid] = TenantSpec(tid, kind, fields, *_tenant_mapping(t, channels, label))
    missing = [tid for tid in tenant_ids if tid not in seen]
    if missing:
        raise WorkloadError(f"{source}: no [[tenant]] for contract tenant(s) {', '.join(map(str, missing))} "
                            f"(give each a kind; \"idle\" for none)")
    return Workload(tenants=[seen[tid] for tid in tenant_ids], **values)


def _mapping(table, source):
    """The [mapping] table's interleave_bytes, checked (range and multiple of 128 B)."""
    where = f"{source}: [mapping]"
    if not isinstance(table, dict):
        raise WorkloadError(f"{where}: must be a table ({', '.join(_MAPPING)})")
    _no_unknown(table, _MAPPING, where)
    rule = _MAPPING["interleave_bytes"]
    v = _value(table, "interleave_bytes", rule, where)
    if v % TRANSACTION_BYTES:
        raise WorkloadError(f"{where}: field 'interleave_bytes' = {v!r} must be a multiple of "
                            f"{TRANSACTION_BYTES} in {rule[1]}..{rule[2]} (a {TRANSACTION_BYTES} B "
                            f"transaction never straddles channels)")
    return v


#: A tenant's mapping fields (a move's are the first two and at_cycles).
_MAPPING_FIELDS = ("channels", "channel_weights", "moves")
_WEIGHT_MAX = 256
_MOVE = {"at_cycles": (True, 1, _MAX, None)}


def _channel_list(t, channels, label):
    """A table's optional ``channels`` as written: a non-empty list of distinct channel numbers of the contract."""
    if "channels" not in t:
        return None
    v = t["channels"]
    if (not isinstance(v, list) or not v or len(set(map(repr, v))) != len(v)
            or any(isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < channels for c in v)):
        raise WorkloadError(f"{label}: field 'channels' = {v!r} must be a non-empty list of distinct "
                            f"channels in 0..{channels - 1} (the contract has channels = {channels})")
    return v


def _set_and_weights(t, channels, label):
    """``channels`` (sorted; None: absent) and ``channel_weights`` in the same order (None: absent)."""
    chosen = _channel_list(t, channels, label)
    if "channel_weights" not in t:
        return (None if chosen is None else tuple(sorted(chosen))), None
    v = t["channel_weights"]
    order = chosen if chosen is not None else list(range(channels))
    of = "one per channel of 'channels'" if chosen is not None else f"one per channel of the contract ({channels})"
    if (not isinstance(v, list) or len(v) != len(order)
            or any(isinstance(w, bool) or not isinstance(w, int) or not 1 <= w <= _WEIGHT_MAX for w in v)):
        raise WorkloadError(f"{label}: field 'channel_weights' = {v!r} must be {len(order)} integers in "
                            f"1..{_WEIGHT_MAX}, {of}")
    pairs = sorted(zip(order, v))
    return (None if chosen is None else tuple(c for c, _ in pairs)), tuple(w for _, w in pairs)


def _tenant_mapping(t, channels, label):
    """A tenant's channel set, weights and moves, every field checked."""
    chosen, weights = _set_and_weights(t, channels, label)
    moves = []
    if "moves" in t:
        v = t["moves"]
        if not isinstance(v, list) or not v or any(not isinstance(m, dict) for m in v):
            raise WorkloadError(f"{label}: field 'moves' = {v!r} must be a non-empty list of tables "
                                f"{{ at_cycles = .., channels = [..] }} (optional channel_weights)")
        last = 0
        for j, m in enumerate(v):
            where = f"{label}: moves[{j}]"
            _no_unknown(m, {"at_cycles", "channels", "channel_weights"}, where)
            if "channels" not in m:
                raise WorkloadError(f"{where}: missing field 'channels' (distinct channels in 0..{channels - 1})")
            at = _value(m, "at_cycles", _MOVE["at_cycles"], where)
            if at <= last:
                raise WorkloadError(f"{where}: field 'at_cycles' = {at} must be after the previous move's "
                                    f"({last}), in {last + 1}..{_MAX}")
            last = at
            moves.append((at, *_set_and_weights(m, channels, where)))
    return chosen, weights, tuple(moves)


def channel_map(workload):
    """The :class:`~sim.mapping.ChannelMap` of a checked workload: each
    tenant over its ``channels`` (default all) with its ``channel_weights``
    and ``moves``, at its ``interleave_bytes``."""
    n = workload.channels
    every = tuple(range(n))
    return ChannelMap(n, [t.channels or every for t in workload.tenants], workload.interleave_bytes,
                      weights=[t.weights for t in workload.tenants],
                      moves=[tuple((at, s or every, w) for at, s, w in t.moves) for t in workload.tenants])


def _controller(table, read_queue, source):
    """The [controller] table as QosKnobs keyword arguments, every field checked."""
    where = f"{source}: [controller]"
    if not isinstance(table, dict):
        raise WorkloadError(f"{where}: must be a table of knobs ({', '.join(sorted(_CONTROLLER))})")
    _no_unknown(table, _CONTROLLER, where)
    knobs = {}
    if "reserved_entries" in table:
        v = table["reserved_entries"]
        if (not isinstance(v, list) or len(v) != 3
                or any(not isinstance(e, int) or isinstance(e, bool) or not 4 <= e <= read_queue for e in v)):
            raise WorkloadError(f"{where}: field 'reserved_entries' = {v!r} must be three integers "
                                f"(urgent, guaranteed, burst) in 4..read_queue ({read_queue})")
        knobs["entries"] = tuple(v)
    for name, (knob, lo, hi, zero_is_none) in _CONTROLLER_INTS.items():
        if name in table:
            v = _value(table, name, (False, lo, hi, None), where)
            knobs[knob] = (v or None) if zero_is_none else v  # drain_interval 0: no forced drains
    for name, knob in _CONTROLLER_BOOLS.items():
        if name in table:
            if not isinstance(table[name], bool):
                raise WorkloadError(f"{where}: field '{name}' = {table[name]!r} must be true or false")
            knobs[knob] = table[name]
    return knobs


def _check_shapes(kind, f, label):
    if kind == "decode":
        if f["block_bytes"] % _TXN:
            raise WorkloadError(f"{label}: field 'block_bytes' = {f['block_bytes']} must be a multiple of {_TXN}")
        if f["step_bytes"] % f["block_bytes"]:
            raise WorkloadError(f"{label}: field 'step_bytes' = {f['step_bytes']} must be a multiple of "
                                f"block_bytes ({f['block_bytes']})")
    elif kind == "prefill":
        unit = _TXN * f["chunks"]
        if f["job_bytes"] % unit:
            raise WorkloadError(f"{label}: field 'job_bytes' = {f['job_bytes']} must be a multiple of "
                                f"{_TXN} x chunks = {unit}")


def residency(workload, quotas, source="the contract"):
    """Where each tenant's KV lives under the contract's quotas (spec §12:
    ``hbm_quota_mb`` and ``cxl_quota_mb`` bound a tenant's residency in each
    tier), one dict per workload tenant, or a :class:`WorkloadError` naming
    the tenant, the quota and the figures when a quota cannot be met.

    ``quotas`` maps a tenant id to ``{"hbm_quota_mb": .., "cxl_quota_mb": ..}``
    (either optional; the contract's ``extra``). The system model's KV:

    * a decode reads all of its KV, ``step_bytes``, every step, in blocks of
      ``block_bytes``. Under an HBM quota of Q bytes its first
      ``floor(Q / block_bytes)`` blocks live in HBM and the rest in CXL
      memory (``hbm_blocks``); so it never reads more than Q from HBM. Its
      CXL residency is the rest, or all of it while ``cxl_fraction`` spills
      blocks at random (any block may then be in CXL), and must fit the CXL
      quota;
    * a prefill reads ``job_bytes`` per job from HBM only (the model has no
      CXL path for prefills), which must fit its HBM quota;
    * an idle tenant holds nothing.
    """
    out = []
    for spec in workload.tenants:
        q = quotas.get(spec.id, {})
        hbm = q.get("hbm_quota_mb")
        cxl = q.get("cxl_quota_mb")
        f = spec.fields
        row = {"id": spec.id, "kind": spec.kind,
               "hbm_quota_mb": None if hbm is None else float(hbm),
               "cxl_quota_mb": None if cxl is None else float(cxl),
               "footprint_bytes": 0, "hbm_bytes": 0, "cxl_bytes": 0, "hbm_blocks": None}
        where = f"{source}: tenant {spec.id}"
        if spec.kind == "decode":
            step, block = f["step_bytes"], f["block_bytes"]
            row["footprint_bytes"] = step
            hbm_bytes = step
            if hbm is not None:
                blocks = min(step // block, int(Fraction(str(hbm)) * MB // block))
                row["hbm_blocks"] = blocks
                hbm_bytes = blocks * block
            cxl_bytes = step if float(f["cxl_fraction"]) else step - hbm_bytes
            row["hbm_bytes"], row["cxl_bytes"] = hbm_bytes, cxl_bytes
            if cxl is not None and cxl_bytes > Fraction(str(cxl)) * MB:
                why = ("its workload's cxl_fraction may spill any of its blocks"
                       if float(f["cxl_fraction"]) else
                       f"hbm_quota_mb = {float(hbm):g} holds {hbm_bytes} B of them" if hbm is not None else
                       "it has no HBM quota, yet its blocks are read over CXL")
                raise WorkloadError(
                    f"{where}: cxl_quota_mb = {float(cxl):g} ({int(Fraction(str(cxl)) * MB)} B) cannot hold its CXL "
                    f"residency: the decode reads {step} B of KV every step and {why}, so up to {cxl_bytes} B "
                    f"live in CXL memory; raise cxl_quota_mb to at least {_mb(cxl_bytes)} or hbm_quota_mb")
        elif spec.kind == "prefill":
            job = f["job_bytes"]
            row["footprint_bytes"] = row["hbm_bytes"] = job
            if hbm is not None and job > Fraction(str(hbm)) * MB:
                raise WorkloadError(
                    f"{where}: hbm_quota_mb = {float(hbm):g} ({int(Fraction(str(hbm)) * MB)} B) cannot hold the prefill's "
                    f"job of {job} B: the system model reads a prefill's KV from HBM only; raise hbm_quota_mb "
                    f"to at least {_mb(job)} or make job_bytes at most {int(Fraction(str(hbm)) * MB)}")
        out.append(row)
    return out


def _mb(nbytes):
    """``nbytes`` in MiB, rounded up to the micro-MiB, for an error's advice."""
    return f"{-(-nbytes * 10**6 // MB) / 10**6:g}"


def build_tenants(workload, hbm_blocks=None):
    """Tenant objects of the system model, ids in contract order (0..n-1).

    ``hbm_blocks`` maps a decode's id to its HBM residency bound in blocks
    (:func:`residency`); absent, unbounded."""
    from .tenants import DecodeTenant, GreedyTenant, PrefillTenant

    hbm_blocks = hbm_blocks or {}
    out = []
    for index, spec in enumerate(workload.tenants):
        f = spec.fields
        if spec.kind == "decode":
            out.append(DecodeTenant(index, step_bytes=f["step_bytes"], think=f["think_cycles"],
                                    block_bytes=f["block_bytes"], cxl_fraction=float(f["cxl_fraction"]),
                                    hbm_blocks=hbm_blocks.get(spec.id),
                                    seed=workload.seed, name=f"decode{spec.id}"))
        elif spec.kind == "prefill":
            out.append(PrefillTenant(index, job_bytes=f["job_bytes"], period=f["period_cycles"],
                                     phase=f["phase_cycles"], window=f["window"], chunks=f["chunks"],
                                     write_share=f["write_share"], name=f"prefill{spec.id}"))
        else:
            idle = GreedyTenant(index, window=1, pattern="stream", seed=workload.seed, name=f"idle{spec.id}")
            idle.kind = "idle"
            idle.start = lambda now: None  # never issues
            out.append(idle)
    return out


def needs_cxl(workload, hbm_blocks=None):
    """Whether a decode reads over CXL: by ``cxl_fraction``, or because its HBM
    quota (``hbm_blocks``, :func:`residency`) holds fewer blocks than its step."""
    hbm_blocks = hbm_blocks or {}
    return any(t.kind == "decode" and (t.fields["cxl_fraction"] or
                                       (t.id in hbm_blocks and
                                        hbm_blocks[t.id] < t.fields["step_bytes"] // t.fields["block_bytes"]))
               for t in workload.tenants)


def one_channel_contract(doc, channel_gbps, clock_mhz):
    """The contract as one simulated channel sees it.

    Each tenant's per-channel share of the contract's channel (its GB/s /
    channels / channel_gbps) is kept; GB/s are rescaled to the simulated
    channel's ``channel_gbps`` and the arbiter runs at ``clock_mhz``.
    """
    return _rescaled(doc, channel_gbps, clock_mhz, 1)


def simulated_contract(doc, channel_gbps):
    """The contract the system model runs: the contract's own channel count
    and clock, each channel the model's ``channel_gbps`` (HBM3-6400's 51.2).

    A contract written for that channel rate is returned as written (with
    ``tenants`` set to its tenant count, which the front end checks).
    Another rate cannot be simulated, so each tenant keeps its share of a
    channel (GB/s x ``channel_gbps`` / the contract's channel_gbps, rounded
    to 6 decimals), as :func:`one_channel_contract` has always done; with
    one channel the two agree.  Returns ``(doc, rescaled)``.
    """
    fab = doc["fabric"]
    rescaled = Fraction(str(fab["channel_gbps"])) != Fraction(str(channel_gbps))
    return _rescaled(doc, channel_gbps, fab["clock_mhz"], int(fab.get("channels", 1))), rescaled


def _rescaled(doc, channel_gbps, clock_mhz, channels):
    """``doc`` on ``channels`` channels of ``channel_gbps`` at ``clock_mhz``,
    each tenant keeping its share of one channel (GB/s as written when the share needs no scaling)."""
    fab = doc["fabric"]
    scale = (Fraction(str(channel_gbps)) * channels
             / (Fraction(str(fab["channel_gbps"])) * int(fab.get("channels", 1))))
    tenants = []
    for t in doc.get("tenant", []):
        t = dict(t)
        for name in ("guaranteed_gbps", "burst_gbps"):
            if name in t and scale != 1:
                v = Fraction(str(t[name])) * scale
                t[name] = float(round(v, 6)) if v.denominator != 1 else int(v)
        tenants.append(t)
    fabric = dict(fab, channels=channels, channel_gbps=float(channel_gbps), clock_mhz=clock_mhz)
    fabric["tenants"] = len(tenants)
    return {"fabric": fabric, "tenant": tenants}
