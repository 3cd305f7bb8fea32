"""``kvfabric`` command line: compile contracts, replay traces, check waveforms."""

from __future__ import annotations

import argparse
import json
import sys

from .contract import ContractError, load_contract, register_table
from .replay import ReplayError, replay_model, summarize
from .trace import TraceError, read_trace, write_log

ENGINES = ("model", "icarus", "verilator")


def format_table(rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    """Plain fixed-width table: columns are (key, heading, format)."""
    cells = [[h for _, h, _ in columns]]
    for r in rows:
        cells.append(["-" if r.get(k) is None else format(r[k], f) for k, _, f in columns])
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


SUMMARY_COLUMNS = [
    ("tenant", "tenant", "d"), ("name", "name", "s"), ("requests", "requests", "d"),
    ("dropped", "dropped", "d"), ("bytes", "bytes", "d"), ("gbps", "GB/s", ".1f"),
    ("guaranteed_gbps", "contract GB/s", ".1f"), ("share", "share", ".3f"),
    ("burst_grants", "burst", "d"), ("wait_p50", "wait p50", ".0f"),
    ("wait_p99", "wait p99", ".0f"), ("wait_max", "wait max", "d"),
]


def cmd_compile(args) -> int:
    compiled = load_contract(args.config)
    rows = register_table(compiled)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(format_table(rows, [
            ("id", "id", "d"), ("name", "name", "s"), ("priority", "prio", "d"),
            ("rate", "RATE", "d"), ("rate_gbps", "GB/s", ".3f"), ("peak_rate", "PEAK_RATE", "d"),
            ("peak_gbps", "GB/s", ".3f"), ("capacity", "CAPACITY", "d"),
            ("inv_weight", "INV_WEIGHT", "d"), ("slo_cycles", "SLO_CYCLES", "d")]))
        print(f"starve_limit={compiled.config.starve_limit} epoch_cycles={compiled.config.epoch_cycles} "
              f"bytes/cycle/channel={float(compiled.bytes_per_cycle):g}")
    return 0


def cmd_replay(args) -> int:
    compiled = load_contract(args.config)
    rows = read_trace(args.trace, compiled.params)
    if args.engine == "model":
        log = replay_model(compiled.params, compiled.config, rows, compiled.bytes_per_cycle).log
    else:
        from tb.replay_engine import replay_rtl  # needs cocotb and a simulator
        log = replay_rtl(compiled.params, compiled.config, rows, args.engine,
                         bytes_per_cycle=compiled.bytes_per_cycle, waves=args.waves)
    write_log(args.out, log)
    print(f"{len(log)} requests replayed with engine {args.engine}; grant log written to {args.out}")
    print(format_table(summarize(log, compiled), SUMMARY_COLUMNS))
    return 0


def cmd_vcd_check(args) -> int:
    from tb.vcd_check import check_vcd  # vcdvcd-based reader of the top level's ports
    compiled = load_contract(args.config)
    mismatches = check_vcd(args.vcd, compiled, trace=args.trace)
    if mismatches:
        for m in mismatches[:20]:
            print(m, file=sys.stderr)
        print(f"vcd-check: {len(mismatches)} mismatch(es) against the golden model", file=sys.stderr)
        return 1
    print("vcd-check: grant log in the VCD matches the golden model")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kvfabric", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compile", help="compile a TOML contract into register values")
    c.add_argument("--config", required=True, help="contract TOML file")
    c.add_argument("--json", action="store_true", help="print JSON instead of a table")
    c.set_defaults(func=cmd_compile)
    r = sub.add_parser("replay", help="replay a trace CSV and write the grant log")
    r.add_argument("--config", required=True, help="contract TOML file")
    r.add_argument("--trace", required=True, help="trace CSV: cycle,channel,tenant,bytes")
    r.add_argument("--out", required=True, help="grant log CSV to write")
    r.add_argument("--engine", choices=ENGINES, default="model",
                   help="golden model, or the generated Verilog under a simulator")
    r.add_argument("--waves", action="store_true", help="dump a VCD (RTL engines)")
    r.set_defaults(func=cmd_replay)
    v = sub.add_parser("vcd-check", help="rebuild the grant log from a VCD and check it")
    v.add_argument("--vcd", required=True)
    v.add_argument("--config", required=True)
    v.add_argument("--trace", help="the trace that was driven (default: rebuilt from the VCD)")
    v.set_defaults(func=cmd_vcd_check)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ContractError, TraceError, ReplayError, FileNotFoundError) as e:
        print(f"kvfabric {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
