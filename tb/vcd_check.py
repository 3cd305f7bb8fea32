"""``kvfabric vcd-check``: rebuild the grant log from a VCD of the top level and
check it against the golden model.

Only top-level ports are read (``clk``, ``rst``, ``req__<c>__*``,
``grant__<c>__*``, ``credit_return__<c>`` and the AXI4-Lite write handshakes), sampled just before
each rising edge of ``clk`` - the values the edge acts on.  Port names are
found at the shallowest scope that has them, so VCDs from Icarus (module scope
``kvfabric``) and Verilator (``TOP`` plus ``TOP.kvfabric``) both work.

:func:`check_vcd` drives the golden model with the recorded port inputs and
compares the recorded outputs every cycle (any VCD of the top level), and for a
replay's VCD also compares the rebuilt grant log with the model engine's.

Cycle 0 of the trace is located by the trace-start marker that
``kvfabric replay --engine icarus|verilator`` writes (tb/tests/replay_tests.py:
a write of ``MARK_DATA`` to the unmapped ``MARK_ADDR``; cycle 0 is ``MARK_GAP``
cycles after its write response).  Without a marker, cycle 0 is the first
cycle with reset low (spec numbering).

The rebuilt log has the grant-log format of ``model/trace.py``: a request's
arrival cycle is the first cycle it was presented (``valid``), which is its
trace cycle for the spec §8 driver unless its queue was full; requests are
numbered in arrival order.  Given the original trace, rows and ids are taken
from it instead (a request's id on the port is its row index modulo
``2^id_width``).  Requests and grants are matched by the replay's one rule,
:meth:`kvfabric.model.replay.InFlight.take`: a tenant's requests are accepted
in row order and granted in acceptance order on their channel (spec §4, §8),
checked by port id and bytes, so ids that repeat in a deep backlog are no
ambiguity.
"""

from __future__ import annotations

import logging
from pathlib import Path

from vcdvcd import VCDVCD

from kvfabric.model.channel import ChannelModel
from kvfabric.model.replay import InFlight, PortGrant, replay_model
from kvfabric.model.trace import LogRow, TraceRow, read_trace

from kvfabric.spec import KIND_NAMES

from .monitor import Layouts
from .axil import MARK_ADDR, MARK_DATA, MARK_GAP

__all__ = ["VcdError", "sample_ports", "grant_log_from_vcd", "lockstep_vcd", "check_vcd"]

KINDS = KIND_NAMES


class VcdError(ValueError):
    pass


def _port_names(params) -> list[str]:
    names = ["clk", "rst", "s_axil__awvalid", "s_axil__awready", "s_axil__awaddr",
             "s_axil__wvalid", "s_axil__wready", "s_axil__wdata", "s_axil__wstrb",
             "s_axil__bvalid", "s_axil__bready", "s_axil__arvalid", "s_axil__arready",
             "s_axil__araddr", "s_axil__rvalid", "s_axil__rready", "s_axil__rdata"]
    for c in range(params.channels):
        names += [f"req__{c}__valid", f"req__{c}__ready", f"req__{c}__payload",
                  f"grant__{c}__valid", f"grant__{c}__ready", f"grant__{c}__payload",
                  f"queue_full__{c}", f"credit_return__{c}"]
    return names


def _resolve(references, wanted):
    """Map each wanted port name to the shallowest VCD reference with that name."""
    best = {}
    for ref in references:
        leaf = ref.rsplit(".", 1)[-1].split("[", 1)[0].strip()
        if leaf in wanted:
            depth = ref.count(".")
            if leaf not in best or depth < best[leaf][0]:
                best[leaf] = (depth, ref)
    missing = [w for w in wanted if w not in best]
    if missing:
        raise VcdError(f"VCD has no top-level signal(s) {', '.join(missing[:6])}"
                       f"{' ...' if len(missing) > 6 else ''}")
    return {w: best[w][1] for w in wanted}


def _to_int(v: str) -> int | None:
    try:
        return int(v, 2)
    except ValueError:
        return None  # x or z


def sample_ports(path, params):
    """Per rising edge of ``clk``: a dict port -> value (None for X/Z) of the values
    just before the edge.  Returns the list of samples, one per cycle from time 0."""
    header = VCDVCD(str(path), only_sigs=True)
    refs = _resolve(header.references_to_ids.keys(), _port_names(params))
    vcd = VCDVCD(str(path), signals=list(refs.values()), store_tvs=True)
    tvs = {name: vcd[ref].tv for name, ref in refs.items()}
    clk = tvs.pop("clk")
    edges = [t for (t, v), (_, prev) in zip(clk[1:], clk[:-1]) if v == "1" and prev == "0"]
    if clk and clk[0][1] == "1" and clk[0][0] > 0:
        edges.insert(0, clk[0][0])
    edges.sort()
    samples = [dict() for _ in edges]
    for name, tv in tvs.items():
        k = 0
        cur = None
        for e, t_edge in enumerate(edges):
            while k < len(tv) and tv[k][0] < t_edge:
                cur = tv[k][1]
                k += 1
            samples[e][name] = None if cur is None else _to_int(cur)
    return samples


def _marker_cycle(samples) -> int | None:
    """Index of the sample of trace cycle 0 after a replay marker, or None."""
    last_aw = None
    last_w = None
    mark_b = None
    for k, s in enumerate(samples):
        if s["s_axil__awvalid"] and s["s_axil__awready"]:
            last_aw = s["s_axil__awaddr"]
        if s["s_axil__wvalid"] and s["s_axil__wready"]:
            last_w = s["s_axil__wdata"]
        if s["s_axil__bvalid"] and s["s_axil__bready"] and last_aw == MARK_ADDR and last_w == MARK_DATA:
            mark_b = k
    return None if mark_b is None else mark_b + MARK_GAP


def _start_cycle(samples) -> int:
    mark = _marker_cycle(samples)
    if mark is not None:
        return mark
    for k, s in enumerate(samples):
        if s["rst"] == 0:
            return k
    raise VcdError("reset is never released in the VCD")


def grant_log_from_vcd(path, params, trace_rows: list[TraceRow] | None = None, *, samples=None,
                       invalid=None):
    """Rebuild ``(log, trace)``: the grant log (``LogRow``s sorted by id) and the
    trace as the ports saw it (``TraceRow``s), from a VCD of the top level.

    ``invalid(tenant, bytes)``: spec §4's requests that are accepted and
    dropped, never granted (default: the rule's part that needs no
    configuration, a tag >= N or a size 0 or above LMAX; a disabled tenant's
    requests then stay in flight, which no grant of that tenant meets)."""
    if samples is None:
        samples = sample_ports(path, params)
    start = _start_cycle(samples)
    lay = Layouts.of(params)
    id_mask = (1 << params.id_width) - 1
    C = params.channels
    if invalid is None:
        def invalid(tenant, nbytes):
            return tenant >= params.tenants or not 0 < nbytes <= params.max_request_bytes
    presented_since = [None] * C
    accepted = []  # (arrival, accept_cycle, channel, tenant, bytes, port_id)
    # InFlight matches by tenant and checks ``id & id_mask`` and bytes: here a row's
    # id is the accepted request's port id and its cycle the request's index in ``accepted``.
    in_flight = [InFlight() for _ in range(C)]
    grants = {}
    for k in range(start, len(samples)):
        s = samples[k]
        cyc = k - start
        for c in range(C):
            v = s[f"req__{c}__valid"]
            if v is None or s[f"grant__{c}__valid"] is None:
                raise VcdError(f"cycle {cyc}: X/Z on channel {c}'s valid")
            if v:
                if presented_since[c] is None:
                    presented_since[c] = cyc
                if s[f"req__{c}__ready"]:
                    tenant, nbytes, rid = lay.unpack_req(s[f"req__{c}__payload"])
                    if not invalid(tenant, nbytes):
                        in_flight[c].add(TraceRow(rid, len(accepted), c, tenant, nbytes))
                    accepted.append((presented_since[c], cyc, c, tenant, nbytes, rid))
                    presented_since[c] = None
            else:
                presented_since[c] = None
            if s[f"grant__{c}__valid"] and s[f"grant__{c}__ready"]:
                tenant, nbytes, gid, kind = lay.unpack_grant(s[f"grant__{c}__payload"])
                try:
                    j = in_flight[c].take(PortGrant(cyc, c, tenant, nbytes, gid, kind), id_mask,
                                          f"cycle {cyc} channel {c}").cycle
                except AssertionError as e:
                    raise VcdError(str(e)) from None
                grants[j] = (cyc, KINDS.get(kind, str(kind)))
    if trace_rows is None:
        order = sorted(range(len(accepted)), key=lambda k: (accepted[k][0], accepted[k][2]))
        rows = [TraceRow(i, *(accepted[k][j] for j in (0, 2, 3, 4))) for i, k in enumerate(order)]
        pairs = list(zip(rows, order))
    else:
        # Each accepted request is its (channel, tenant)'s oldest trace row not yet
        # accepted, with its port id (row index mod 2^id_width) and bytes.
        pending = [InFlight() for _ in range(C)]
        for row in trace_rows:
            if 0 <= row.channel < C:
                pending[row.channel].add(row)
        pairs = []
        for k, (_, cyc, c, tenant, nbytes, rid) in enumerate(accepted):
            try:
                row = pending[c].take(PortGrant(cyc, c, tenant, nbytes, rid, 0), id_mask,
                                      f"cycle {cyc} channel {c}: accepted request")
            except AssertionError as e:
                raise VcdError(str(e)) from None
            pairs.append((row, k))
        rows = list(trace_rows)
    log = []
    for row, k in pairs:
        rec = accepted[k]
        g = grants.get(k)
        if g is None:
            log.append(LogRow(row.id, row.cycle, None, rec[2], rec[3], rec[4], "dropped"))
        else:
            log.append(LogRow(row.id, row.cycle, g[0], rec[2], rec[3], rec[4], g[1]))
    log.sort(key=lambda r: r.id)
    return log, rows


def lockstep_vcd(path, params, samples=None) -> list[str]:
    """Drive the golden model with the port inputs recorded in the VCD (requests,
    grant ready, AXI4-Lite writes, resets) and compare the recorded outputs every
    cycle with the lockstep scoreboard of the co-simulation (``tb/scoreboard.py``).
    At a replay marker the model's buckets restart
    (:meth:`~kvfabric.model.channel.ChannelModel.restart_buckets`), as the
    replay engine restarts the RTL's.  Returns the first mismatch (or an empty list)."""
    from .monitor import Sample
    from .scoreboard import Mismatch, Scoreboard
    if samples is None:
        samples = sample_ports(path, params)
    mark = _marker_cycle(samples)
    lay = Layouts.of(params)
    quiet = logging.getLogger("kvfabric.vcd_check")
    quiet.setLevel(logging.CRITICAL)
    sb = Scoreboard(params, seed="(from VCD)", channels=None, check_internal=False, log=quiet)
    C = params.channels
    in_reset = True
    for k, x in enumerate(samples):
        if x["rst"] is None or x["rst"]:
            in_reset = True
            continue
        if in_reset:
            sb.reset()
            in_reset = False
        if k == mark:
            for ch in sb.model.channels:
                ch.restart_buckets()
        smp = Sample()
        for c in range(C):
            v = x[f"req__{c}__valid"]
            gv = x[f"grant__{c}__valid"]
            smp.req_valid.append(v)
            smp.req_ready.append(x[f"req__{c}__ready"])
            smp.req.append(lay.unpack_req(x[f"req__{c}__payload"]) if v else None)
            smp.grant_valid.append(gv)
            smp.grant_ready.append(x[f"grant__{c}__ready"])
            smp.grant.append(lay.unpack_grant(x[f"grant__{c}__payload"]) if gv else None)
            smp.queue_full.append(x[f"queue_full__{c}"])
            smp.credit_return.append(x[f"credit_return__{c}"])
        if x["s_axil__awvalid"] and x["s_axil__awready"]:
            smp.aw = (x["s_axil__awaddr"],)
        if x["s_axil__wvalid"] and x["s_axil__wready"]:
            smp.w = (x["s_axil__wdata"], x["s_axil__wstrb"])
        if x["s_axil__arvalid"] and x["s_axil__arready"]:
            smp.ar = x["s_axil__araddr"]
        if x["s_axil__rvalid"] and x["s_axil__rready"]:
            smp.r = x["s_axil__rdata"]
        try:
            sb.step(smp)
        except Mismatch as e:
            return [f"{Path(path)}: {e}"]
        except TypeError:
            return [f"{Path(path)}: X or Z on a port at VCD cycle {k}"]
    return []


def check_vcd(vcd, compiled, trace=None) -> list[str]:
    """Check a VCD of the top level against the golden model, in two ways:

    1. port-level lockstep (:func:`lockstep_vcd`): every output of every cycle,
       for any VCD (a co-simulation test's ``WAVES=1`` dump or a replay's);
    2. for a replay's VCD (it has the trace-start marker): the grant log rebuilt
       from the VCD against the model engine's replay of the same trace
       (``trace``: the trace CSV, else the trace rebuilt from the VCD) under
       ``compiled``'s configuration and memory-side bandwidth.
    """
    params = compiled.params
    try:
        samples = sample_ports(vcd, params)
    except VcdError as e:
        return [f"{Path(vcd)}: {e}"]
    out = lockstep_vcd(vcd, params, samples)
    if _marker_cycle(samples) is None:
        return out
    trace_rows = read_trace(trace, params) if trace is not None else None
    try:
        got, rows = grant_log_from_vcd(vcd, params, trace_rows, samples=samples,
                                       invalid=ChannelModel(params, compiled.config).is_invalid)
    except VcdError as e:
        return out + [f"{Path(vcd)}: {e}"]
    want = replay_model(params, compiled.config_without_credits, rows, compiled.bytes_per_cycle).log
    by_id = {r.id: r for r in got}
    for w in want:
        g = by_id.get(w.id)
        if g is None:
            out.append(f"request {w.id} (channel {w.channel}, arrival {w.arrival_cycle}): in the model's "
                       f"log ({w.kind} at cycle {w.grant_cycle}) but never accepted in the VCD")
            continue
        for f in ("arrival_cycle", "grant_cycle", "channel", "tenant", "bytes", "kind"):
            if getattr(w, f) != getattr(g, f):
                out.append(f"request {w.id}: {f}: model {getattr(w, f)} vcd {getattr(g, f)}")
    extra = set(by_id) - {w.id for w in want}
    for i in sorted(extra):
        out.append(f"request {i}: in the VCD but not in the model's log")
    return out
