"""The ``kvfabric`` command: one subcommand per job.

    kvfabric demo                         the essay's scenario, FCFS versus the fabric
    kvfabric compile --config C.toml [--writes]   contract -> register values (or the writes)
    kvfabric replay --config C.toml --trace T.csv --out grants.csv [--engine E]
    kvfabric vcd-check --vcd dump.vcd --config C.toml
    kvfabric verilog --out build/kvfabric.v [--tenants N --channels C ...]
    kvfabric verilog --axi --out build/kvfabric_axi.v [--data-width W --interleave B ...]   the AXI4 top
    kvfabric system --contract C.toml --workload W.toml --policy P [--json out.json]
    kvfabric regs [--out build/regs] [--sync]   C header, IP-XACT, docs from the register description

Errors in user input (contracts, traces, parameters) print one line naming the
file, line or field and exit with status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from kvfabric import system as _system
from kvfabric.engines import ENGINES, replay
from kvfabric.model.contract import ContractError, load_contract, register_table
from kvfabric.model.regfile import FABRIC, config_values, config_writes
from kvfabric.model.replay import ReplayError, summarize
from kvfabric.model.trace import TraceError, read_trace, write_log
from kvfabric.regmap import REGMAP
from kvfabric.spec import CREDIT_CLASS_NAMES, FabricParams
from kvfabric.tables import SUMMARY_COLUMNS, format_table

__all__ = ["main", "build_parser"]


def cmd_demo(args) -> int:
    from kvfabric.demo import run_demo
    return run_demo(config=args.config, cycles=args.cycles, out_dir=args.out_dir)


def _credits_line(compiled) -> str:
    """The ``CREDITS`` word, its fields and where they came from (spec §12)."""
    cfg = compiled.config
    word = FABRIC.register("CREDITS").word(config_values(cfg))
    fields = " ".join(f"{name}={v}" for name, v in zip(CREDIT_CLASS_NAMES, cfg.credits))
    if "memory_round_trip_ns" in compiled.credit_keys:
        why = "limits the contract does not give sized by Little's law from memory_round_trip_ns"
    elif compiled.gives_credits:
        why = "limits as the contract gives them"
    else:
        why = "the contract gives no limits: 0, no credit check"
    return (f"CREDITS=0x{word:08X}: {fields} bulk_prio=0b{cfg.bulk_prio:04b} "
            f"arrival_prio=0b{cfg.arrival_prio:04b} ({why})")


def _ctrl_line(compiled) -> str:
    """The ``CTRL`` word and its arbitration fields (spec §6.2, §9, §12)."""
    cfg = compiled.config
    word = FABRIC.register("CTRL").word(config_values(cfg))
    why = "the bulk run off" if not cfg.bulk_run else (
        f"a bulk tenant keeps up to {cfg.bulk_run} grants in a row against the other bulk tenants")
    return f"CTRL=0x{word:08X}: fcfs_bypass={cfg.fcfs_bypass} bulk_run={cfg.bulk_run} ({why})"


def _coord_line(compiled) -> str:
    """The ``COORD`` and ``COORD_EPOCH`` words and their fields (spec §12, §13)."""
    cfg, values = compiled.config, config_values(compiled.config)
    return (f"COORD=0x{FABRIC.register('COORD').word(values):08X}: coord_enable={cfg.coord_enable} "
            f"coord_floor={cfg.coord_floor}/256 COORD_EPOCH=0x{FABRIC.register('COORD_EPOCH').word(values):08X}: "
            f"coord_epoch_cycles={cfg.coord_epoch_cycles} (epoch {cfg.coord_epoch} cycles)")


def cmd_compile(args) -> int:
    compiled = load_contract(args.config)
    if args.writes:
        writes = [{"address": a, "data": d, "register": REGMAP.decode(a, compiled.params)[2].name}
                  for a, d in config_writes(compiled.config)]
        if args.json:
            print(json.dumps(writes, indent=2))
        else:
            for w in writes:
                print(f"0x{w['address']:04X} 0x{w['data']:08X} {w['register']}")
        return 0
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
        print(_ctrl_line(compiled))
        print(_credits_line(compiled))
        print(_coord_line(compiled))
    return 0


def cmd_replay(args) -> int:
    compiled = load_contract(args.config)
    rows = read_trace(args.trace, compiled.params)
    log = replay(args.engine, compiled.params, compiled.config_without_credits, rows, compiled.bytes_per_cycle,
                 waves=args.waves)
    write_log(args.out, log)
    print(f"{len(log)} requests replayed with engine {args.engine}; grant log written to {args.out}")
    print(format_table(summarize(log, compiled), SUMMARY_COLUMNS))
    return 0


def cmd_vcd_check(args) -> int:
    from kvfabric.tb.vcd_check import check_vcd  # vcdvcd-based reader of the top level's ports
    compiled = load_contract(args.config)
    mismatches = check_vcd(args.vcd, compiled, trace=args.trace)
    if mismatches:
        for m in mismatches[:20]:
            print(m, file=sys.stderr)
        print(f"vcd-check: {len(mismatches)} mismatch(es) against the golden model", file=sys.stderr)
        return 1
    print("vcd-check: grant log in the VCD matches the golden model")
    return 0


def cmd_verilog(args) -> int:
    from kvfabric.axi import AxiParams, check_axi_params
    from kvfabric.hw.verilog import AXI_TOP_NAME, TOP_NAME, write_verilog  # Amaranth is needed only here
    params = FabricParams(**{f.name: getattr(args, f.name) for f in dataclasses.fields(FabricParams)})
    axi = None
    if args.axi:
        axi = AxiParams(**_axi_values(args))
        check_axi_params(axi, params)
    elif any(getattr(args, dest) is not None for dest in _AXI_OPTIONS.values()):
        given = [opt for opt, dest in _AXI_OPTIONS.items() if getattr(args, dest) is not None]
        raise ValueError(f"AXI options ({', '.join(_axi_flag(o) for o in given)}) need --axi")
    if args.fpga and axi is not None:
        raise ValueError("--fpga applies to the bare top only, not with --axi")
    write_verilog(params, args.out, axi, fpga=args.fpga)
    what = f"{params}" if axi is None else f"{params} behind {axi}"
    print(f"Verilog of {what} written to {args.out} (top module {TOP_NAME if axi is None else AXI_TOP_NAME})")
    return 0


#: AxiParams field -> argparse dest of its option (``--axi-id-width`` for ``id_width``,
#: which would otherwise read as the arbiter's ``--id-width``; ``--interleave`` for
#: ``interleave_bytes``).
_AXI_OPTIONS = {"addr_width": "axi_addr_width", "data_width": "axi_data_width", "id_width": "axi_id_width",
                "interleave_bytes": "axi_interleave", "frag_beats": "axi_frag_beats",
                "read_entries": "axi_read_entries", "write_entries": "axi_write_entries",
                "mem_clock": "axi_mem_clock", "shared_port": "axi_shared_port"}
_AXI_FLAGS = {"addr_width": "--addr-width", "data_width": "--data-width", "id_width": "--axi-id-width",
              "interleave_bytes": "--interleave", "frag_beats": "--frag-beats",
              "read_entries": "--read-entries", "write_entries": "--write-entries", "mem_clock": "--mem-clock",
              "shared_port": "--shared-port"}


def _axi_flag(name):
    return _AXI_FLAGS[name]


def _add_axi_options(parser: argparse.ArgumentParser) -> None:
    """``--axi`` and one option per AxiParams field (spec §14.1)."""
    from kvfabric.axi import AxiParams
    defaults = AxiParams()
    parser.add_argument("--axi", action="store_true",
                        help="generate the AXI4 top (module kvfabric_axi, spec §14) instead of the bare arbiter")
    for name, dest in _AXI_OPTIONS.items():
        if name in ("mem_clock", "shared_port"):
            continue
        parser.add_argument(_AXI_FLAGS[name], dest=dest, type=int, default=None,
                            help=f"with --axi: AxiParams.{name} (default {getattr(defaults, name)})")
    parser.add_argument("--mem-clock", dest="axi_mem_clock", action="store_const", const=True, default=None,
                        help="with --axi: manager ports on their own clock mem_clk / mem_rst (spec §14.8)")
    parser.add_argument("--shared-port", dest="axi_shared_port", action="store_const", const=True, default=None,
                        help="with --axi: one tenant port s_axi shared by all tenants, the tenant in "
                             "AxUSER[3:0] (spec §14.9)")


def _axi_values(args):
    return {name: getattr(args, dest) for name, dest in _AXI_OPTIONS.items() if getattr(args, dest) is not None}


def cmd_regs(args) -> int:
    from kvfabric import regs  # systemrdl-compiler and PeakRDL: the `regs` extra
    if args.sync:
        changed = regs.sync(args.checkout)
        print("regs --sync: " + (", ".join(map(str, changed)) + " rewritten" if changed
                                 else "kvfabric/regmap_table.py and docs/spec.md are current"))
    for path in regs.export(args.out):
        print(f"{path}: {regs.EXPORTS[path.name]}")
    return 0


def _add_param_options(parser: argparse.ArgumentParser) -> None:
    """One option per FabricParams field (``queue_depth`` -> ``--queue-depth``)."""
    defaults = FabricParams()
    for f in dataclasses.fields(FabricParams):
        parser.add_argument("--" + f.name.replace("_", "-"), dest=f.name, type=int,
                            default=getattr(defaults, f.name),
                            help=f"FabricParams.{f.name} (default %(default)s)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kvfabric", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="the essay's prefill-vs-decode scenario, FCFS versus the fabric")
    d.add_argument("--config", default=None, help="contract TOML (default: the shipped essay.toml)")
    d.add_argument("--cycles", type=int, default=40000, help="decode traffic duration in cycles")
    d.add_argument("--out-dir", default="build/demo", help="where the trace and grant logs go")
    d.set_defaults(func=cmd_demo)
    c = sub.add_parser("compile", help="compile a TOML contract into register values")
    c.add_argument("--config", required=True, help="contract TOML file")
    c.add_argument("--json", action="store_true", help="print JSON instead of a table")
    c.add_argument("--writes", action="store_true",
                   help="print the register writes that program the contract (address, data), in order")
    c.set_defaults(func=cmd_compile)
    r = sub.add_parser("replay", help="replay a trace CSV and write the grant log")
    r.add_argument("--config", required=True, help="contract TOML file")
    r.add_argument("--trace", required=True, help="trace CSV: cycle,channel,tenant,bytes")
    r.add_argument("--out", required=True, help="grant log CSV to write")
    r.add_argument("--engine", choices=tuple(ENGINES), default="model",
                   help="golden model, or the generated Verilog under a simulator")
    r.add_argument("--waves", action="store_true", help="dump a VCD (RTL engines)")
    r.set_defaults(func=cmd_replay)
    v = sub.add_parser("vcd-check", help="rebuild the grant log from a VCD and check it")
    v.add_argument("--vcd", required=True)
    v.add_argument("--config", required=True)
    v.add_argument("--trace", help="the trace that was driven (default: rebuilt from the VCD)")
    v.set_defaults(func=cmd_vcd_check)
    g = sub.add_parser("verilog", help="generate the Verilog of the top level (module kvfabric)")
    g.add_argument("--out", required=True, help="Verilog file to write")
    g.add_argument("--fpga", action="store_true",
                   help="channels in their FPGA form: chained sums instead of carry-save trees, vmin as a "
                        "tree (same values every cycle, about a third less ECP5 logic per channel, longer "
                        "ASIC paths)")
    _add_param_options(g)
    _add_axi_options(g)
    g.set_defaults(func=cmd_verilog)
    _system.add_parser(sub)
    e = sub.add_parser("regs", help="C header, IP-XACT and docs from the register description")
    e.add_argument("--out", default="build/regs", help="directory to write (default %(default)s)")
    e.add_argument("--sync", action="store_true",
                   help="first rewrite kvfabric/regmap_table.py and spec §9's table in a checkout")
    e.add_argument("--checkout", default=".", help="the checkout --sync rewrites (default: .)")
    e.set_defaults(func=cmd_regs)
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ContractError, TraceError, ReplayError, FileNotFoundError) as e:
        print(f"kvfabric {args.command}: error: {e}", file=sys.stderr)
        return 2
    except ValueError as e:  # parameter ranges (FabricParams) and engine names
        if args.command not in ("verilog", "replay", "system"):
            raise
        print(f"kvfabric {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
