"""The synthesis reports: ``reports/synth.json`` and the readable ``reports/synth.md``.

The JSON holds one entry per target, merged with the entries earlier runs
wrote for other targets; the Markdown is made from the merged JSON alone, so
that it can be regenerated from a committed JSON without running a tool.
"""

from __future__ import annotations

import json
from pathlib import Path

from .families import GENERIC_GATES, TARGETS

__all__ = ["one_cell", "format_markdown", "load_results", "load_default_run", "write_reports"]


def _load(json_path):
    json_path = Path(json_path)
    if not json_path.exists():
        return {}
    try:
        data = json.loads(json_path.read_text())
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def load_results(json_path):
    """The ``targets`` of an earlier ``reports/synth.json``; empty if there is
    none or it cannot be read (a run then starts a fresh report)."""
    return _load(json_path).get("targets", {})


def load_default_run(json_path):
    """The ``default_run`` of an earlier ``reports/synth.json`` (how long the
    last run of every default target took), or ``None``."""
    return _load(json_path).get("default_run")


def write_reports(json_path, md_path, results, default_run=None):
    """Write the merged results as JSON and as Markdown; ``default_run``
    replaces the recorded run of the default targets (``None`` keeps it)."""
    json_path, md_path = Path(json_path), Path(md_path)
    default_run = default_run or load_default_run(json_path)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    data = {"targets": results}
    if default_run:
        data["default_run"] = default_run
    json_path.write_text(json.dumps(data, indent=2) + "\n")
    md_path.write_text(format_markdown(results, default_run))


def one_cell(text):
    """A log line that can sit in one Markdown table cell (router progress lines hold '|')."""
    return " ".join(text.replace("|", " ").split())


def _num(v, fmt="{}"):
    return "—" if v is None else fmt.format(v)


def _fmt_duration(seconds):
    return f"{int(seconds) // 60} min {int(seconds) % 60:02d} s"


def _headline(results, default_run):
    """The lines under the summary table: the area line, the 8 x 8's
    estimate, the generic depth and how long the default targets took."""
    lines = []
    area = results.get("ecp5_area")
    if area and area.get("per_channel") is not None:
        chans = ", ".join(str(p["channels"]) for p in area["points"])
        met = "met" if area["meets_target"] else "not met"
        lines.append(f"- **Area per channel** (`ecp5_area`): {area['per_channel']:,.0f} "
                     f"`{area['resource']}` per added channel and {area['fixed']:,.0f} fixed, "
                     f"the least-squares line through the {chans}-channel builds (target "
                     f"≤ {area['target_per_channel']:,} per channel: {met}).")
    est = results.get("ecp5")
    if est and est.get("predicted_fmax_mhz") is not None:
        comb = est.get("utilisation", {}).get("TRELLIS_COMB")
        area_txt = (f"{comb['used']:,} `TRELLIS_COMB` ({comb['percent']}% of the device)"
                    if comb else "")
        p = est["top_paths"][0]
        lines.append(f"- **8 × 8 from synthesis alone** (`ecp5`, not placed): {area_txt}; "
                     f"predicted worst path {p['delay']:g} ns (≈{est['predicted_fmax_mhz']:g} "
                     f"MHz, the rough delay model of scripts/netlist_paths.py), `{p['start']}` → "
                     f"`{p['end']}`.")
        if area and area.get("per_channel") is not None and comb:
            d = est.get("design", {}).get("channels")
            if isinstance(d, int):
                line = area["fixed"] + area["per_channel"] * d
                lines[-1] += (f" The area line predicts {line:,.0f} for {d} channels "
                              f"({100 * (comb['used'] - line) / line:+.1f}% off).")
    gen = results.get("generic")
    if gen and gen.get("logic_depth_reg_to_reg") is not None:
        mapping = gen.get("mapping", "area")
        lines.append(f"- **ASIC proxy** (`generic`): {gen['logic_depth_reg_to_reg']:g} two-input "
                     f"gate levels register to register with {gen.get('adders', 'default')} "
                     f"adders and the {mapping} mapping (`{gen.get('abc', 'abc -g ' + GENERIC_GATES)}`).")
    if default_run:
        lines.append(f"- **`make synth`** (default targets {', '.join(default_run['targets'])}; "
                     f"seeds {','.join(map(str, default_run.get('seeds', [])))}): "
                     f"{_fmt_duration(default_run['wall_s'])} wall-clock on {default_run['date']}, "
                     f"{default_run.get('cpus', '?')} CPUs, load average "
                     f"{default_run.get('load_at_start', '?')} at the start"
                     + (f"; {default_run['note']}" if default_run.get("note") else "") + ".")
    return lines


def _area_section(r):
    res = r["resource"]
    lines = [f"Logic area of the fabric by channel count: `kvfabric verilog --channels N`, "
             f"synthesised in the place-and-route harness and packed by nextpnr (`--pack-only`, "
             f"no placement). `{res}` is the row of nextpnr's utilisation table (a LUT4, half a "
             "CCU2C or half a DPR16X4, and the feed-through LUTs packing adds: what the other "
             "entries' utilisation shows); LUT4-eq. = LUT4 + 2 × CCU2C + 2 × DPR16X4 counts "
             "Yosys's cells before packing.", "",
             f"| channels | `{res}` | LUT4-eq. | LUT4 | CCU2C | PFUMX+L6MUX | FFs (harness) | "
             "netlist sha256 |",
             "|---|---|---|---|---|---|---|---|"]
    for p in r["points"]:
        lines.append(f"| {p['channels']} | {p[res]:,} | {p['lut_equivalents']:,} | {p['luts']:,} | "
                     f"{p['carry']:,} | {p['wide_mux']:,} | {p['ffs']:,} ({p['harness_ffs']}) | "
                     f"`{p['verilog_sha256']}` |")
    lines += ["", f"Least squares: **{r['per_channel']:,.1f} `{res}` per added channel**, "
              f"**{r['fixed']:,.1f} fixed** (largest residual {r['max_residual']:,.1f}); in "
              f"LUT4-eq. {r['lut_equivalents_per_channel']:,.1f} per channel and "
              f"{r['lut_equivalents_fixed']:,.1f} fixed. Target ≤ {r['target_per_channel']:,} "
              f"per channel: {'met' if r['meets_target'] else 'not met'}.", ""]
    return lines


def format_markdown(results, default_run=None):
    """``reports/synth.md`` from the merged results (and the recorded run of
    the default targets, if any)."""
    lines = ["# Synthesis results", "",
             "Generated by `python -m kvfabric.scripts.synth` (docs/synthesis.md). FPGA numbers include "
             "the place-and-route harness (shift-register inputs, registered outputs); its "
             "flip-flops are listed in the FF column.", "",
             "| target | device | design | status | Fmax MHz (target) | LUTs | FFs (harness) | "
             "carry | BRAM | DSP | logic depth | P&R time |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for target in TARGETS:
        r = results.get(target)
        if r is None or TARGETS[target].flow in ("breakdown", "area"):  # not one design
            continue
        d = r.get("design", {})
        design = (f"{d.get('tenants', '?')}x{d.get('channels', '?')} `{r.get('verilog')}` "
                  f"@{r.get('revision', '?')}")
        fmax = "—"
        if r.get("fmax_mhz") is not None:
            fmax = f"{r['fmax_mhz']:.1f} ({r['target_mhz']})"
            spread = [v for v in r.get("fmax_by_seed", {}).values() if v is not None]
            if len(spread) > 1:
                fmax = (f"{r['fmax_mhz']:.1f}, median of {len(spread)} seeds "
                        f"{min(spread):.1f}–{max(spread):.1f} ({r['target_mhz']})")
        elif r.get("fmax_placed_mhz") is not None:
            fmax = f"≈{r['fmax_placed_mhz']:.1f} placed, unrouted ({r['target_mhz']})"
        elif r.get("predicted_fmax_mhz") is not None:
            fmax = f"≈{r['predicted_fmax_mhz']:.1f} predicted, not placed ({r['target_mhz']})"
        harness = r.get("harness") or {}
        ffs = _num(r.get("ffs"))
        if harness:
            ffs += f" ({harness['ffs']})"
        depth = _num(r.get("logic_depth"))
        if r.get("logic_depth_reg_to_reg") is not None:
            depth += f" ({r['logic_depth_reg_to_reg']:g} reg→reg)"
        status = r.get("status", "?")
        if status != "ok":
            status += ": " + r.get("message", "")[:120]
        pnr = r.get("runtime_s", {}).get("nextpnr")
        lines.append(f"| {target} | {r.get('device', '')} | {design} | {status} | {fmax} | "
                     f"{_num(r.get('luts', r.get('gates')))} | {ffs} | {_num(r.get('carry'))} | "
                     f"{_num(r.get('bram'))} | {_num(r.get('dsp'))} | {depth} | "
                     f"{_num(pnr, '{:.0f} s')} |")
    headline = _headline(results, default_run)
    if headline:
        lines += [""] + headline
    for target in TARGETS:
        r = results.get(target)
        if r is None:
            continue
        lines += ["", f"## {target}", ""]
        if r.get("points"):
            lines += _area_section(r)
        if r.get("verilog_sha256"):
            lines += [f"Netlist `{r['verilog']}`, sha256 `{r['verilog_sha256']}`.", ""]
        if r.get("utilisation"):
            lines.append("Utilisation: " + ", ".join(
                f"{k} {v['used']}/{v['available']} ({v['percent']}%)"
                for k, v in r["utilisation"].items()) + ".")
            lines.append("")
        if r.get("fmax_by_seed"):
            lines += ["Fmax by nextpnr seed (MHz; `—` did not finish routing): " + ", ".join(
                f"{seed}: {_num(v, '{:.1f}')}" for seed, v in r["fmax_by_seed"].items())
                + f". Paths below are seed {r.get('reported_seed')}'s, the median.", ""]
        cp = r.get("critical_path")
        if cp:
            lines += [f"Critical path (nextpnr, routed): **{cp['start']} → {cp['end']}.{cp['end_port']}**, "
                      f"{cp['delay_ns']} ns = {cp['logic_ns']} ns logic + {cp['routing_ns']} ns routing; "
                      f"{cp['logic_levels']} logic levels and {cp['carry_steps']} carry steps.",
                      ""]
            if cp["through"]:
                lines += ["Through: " + ", ".join(f"`{n}`" for n in cp["through"]), ""]
        if r.get("modules"):
            d = r.get("design", {})
            lines += [f"ECP5 cells per module of `{r.get('verilog')}` ({d.get('tenants')}x"
                      f"{d.get('channels')}), instances of a pattern added up; LUT4 share counts a "
                      "CCU2C as two LUT4s:", "",
                      "| module | instances | LUT4 | CCU2C | PFUMX+L6MUX | FFs | LUT4 share |",
                      "|---|---|---|---|---|---|---|"]
            for m in r["modules"]:
                if m["luts"] or m["carry"] or m["ffs"]:
                    lines.append(f"| `{m['module']}` | {m['instances']} | {m['luts']} | {m['carry']} | "
                                 f"{m['wide_mux']} | {m['ffs']} | {100 * m['lut4_share']:.1f}% |")
            lines.append("")
        if r.get("abc"):
            lines += [f"Mapping: {r['adders']} adders (`synth -noabc"
                      f"{'' if r['adders'] == 'default' else ' -extra-map +/choices/' + r['adders'] + '.v'}`), "
                      f"then `{r['abc']}` ({r['mapping']} mapping).", ""]
        if r.get("logic_depth_path"):
            p = r["logic_depth_path"]
            lines += [f"Longest path (`ltp -noff`, any start and end): {r['logic_depth']} gates, "
                      f"`{p['start']}` → `{p['end']}`.", ""]
        if r.get("top_paths"):
            info = r["top_paths_model"]
            how = ("estimated with the rough delay model of scripts/netlist_paths.py; ranking only"
                   if info["model"] == "ecp5" else "gates on the path")
            lines += [f"Worst register-to-register paths by endpoint ({info['unit']}, {how}):", "",
                      f"| {info['unit']} | start | end | registers like the end | through |",
                      "|---|---|---|---|---|"]
            for p in r["top_paths"]:
                lines.append(f"| {p['delay']:g} | `{p['start']}` | `{p['end']}.{p['end_port']}` | "
                             f"{p.get('endpoints', 1)} `{p.get('end_pattern', p['end'])}` | "
                             f"{', '.join(p['through']) or '—'} |")
            lines.append("")
        lines.append("Tools: " + "; ".join(f"{k} {v['package']} ({v['banner']})"
                                           for k, v in r.get("tools", {}).items()))
        lines.append("")
        lines += ["Commands (run from the project root):", ""]
        lines += [f"    {c}" for c in r.get("commands", [])]
    return "\n".join(lines) + "\n"
