"""How the arbiter's grant rate bounds a decode step's tail (issue #41).

The arbiter grants one request per fabric clock (spec §6.2), and the system
model's requests are 128 B transactions, so at ``clock_mhz`` the fabric
hands a channel at most ``clock_mhz x 128 B`` per microsecond.  At 400 MHz
that is 51.2 GB/s: exactly the HBM3-6400 channel's peak.  ``make family``
draws 400, 450 and 500 MHz (``sim/studies/family.py`` ``RANGES``), on the
argument that each of them covers the channel.  Covering it is not enough
for a decode step: without the fabric, FR-FCFS holds a step's first 128
accesses at once and overlaps their row misses across banks; through the
fabric the step arrives no faster than the channel serves it, so every
bubble the DRAM's row misses leave on the data bus delays the step's end
by its length and is never made up.

This study measures that apart from everything else.  It takes the
family's draws whose clock is the lowest drawn (400 MHz: the draws where
the fabric's grants only just cover the channel) and runs each under
``fabric-qos`` at several clocks, changing nothing but ``clock_mhz`` (the
credit limits, sized by Little's law from the clock, follow it as spec §12
says; the admission limit, a compile-time check, is raised to 0.86 because
the guarantees round to the clock's rate resolution), twice per clock:

* **decodes alone**: the draw's prefills made idle, so nothing but the
  fabric stands between the decodes and the channel;
* **with prefills**: the draw as the family runs it.

Each is judged as the family judges (the worst decode's p99 step latency
over its ``decode-only`` p99, the decodes alone under FR-FCFS, which has no
arbiter and no clock), per seed and with the seeds' steps pooled.

Every run sends each 128 B transaction as a request of its own
(:data:`REQUEST_BYTES`; the workload's ``request_bytes`` and the contract's
``memory_request_bytes``), as the family did when this was measured: the
family now sends two contiguous transactions a request, the AXI front end's
256 B pieces, which is what this study pointed to.

Run: ``python -m kvfabric.sim.studies.grant_rate`` (about 12 minutes on two
workers under PyPy) writes ``reports/grant_rate.json`` and ``.md``.
"""

import argparse
import copy
import json
import os
import sys
import time
from pathlib import Path

from kvfabric.provenance import describe, revision

from . import family as fam
from ..hbm3 import MEMORY_MHZ
from ..mapping import TRANSACTION_BYTES
from .metrics import NS_PER_CYCLE, PEAK_BYTES_PER_CYCLE, pct
from .pypy import default_pypy, interpreter_of

__all__ = ["CLOCKS", "lowest_clock_draws", "variant_draw", "plan", "judge", "write_report", "main"]

#: Clocks run (MHz): the family's three and one with twice 400 MHz's grant rate.
CLOCKS = (400, 450, 500, 800)
VARIANTS = ("decodes alone", "with prefills")
#: The variants' admission limit (:func:`variant_draw` says why).
ADMISSION_LIMIT = 0.86
#: Bytes of one request in this study's runs: one transaction.
REQUEST_BYTES = TRANSACTION_BYTES


def lowest_clock_draws(draws=fam.DEFAULT_DRAWS, seed=fam.FAMILY_SEED):
    """The family's draws at its lowest drawn clock."""
    low = min(fam.RANGES["clock_mhz"])
    return [k for k in range(draws) if fam.draw(seed, k)["contract"]["fabric"]["clock_mhz"] == low]


def variant_draw(d, clock_mhz, variant):
    """Draw ``d`` at ``clock_mhz``; ``"decodes alone"`` makes its prefills idle."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, not {variant!r}")
    d = copy.deepcopy(d)
    d["contract"]["fabric"]["clock_mhz"] = clock_mhz
    # The study's requests are single 128 B transactions (the family's
    # before issue #41 sent two contiguous ones per request), whatever the
    # family's request size: it measures what one transaction a clock costs.
    d["workload"]["system"]["request_bytes"] = d["contract"]["fabric"]["memory_request_bytes"] = REQUEST_BYTES
    # Only compilation reads the admission limit (spec §12); nothing simulated
    # does.  The guarantees round up to the rate register's resolution, which
    # depends on the clock, so a sum drawn just under 0.85 at one clock can
    # round over it at another (draw 2 at 450 MHz: by 0.3 of 174 GB/s).
    d["contract"]["fabric"]["admission_limit"] = ADMISSION_LIMIT
    if variant == "decodes alone":
        d["workload"]["tenant"] = [t if t["kind"] != "prefill" else {"id": t["id"], "kind": "idle"}
                                   for t in d["workload"]["tenant"]]
    return d


def plan(draws, seeds, clocks, build, python=None):
    """``(label, spec)`` pairs: each draw's decode-only references, then every
    (clock, variant) under fabric-qos.  ``label`` is ``(draw, clock, variant)``
    (clock and variant None for the reference)."""
    out = []
    for k in draws:
        d = fam.draw(fam.FAMILY_SEED, k)
        paths = fam.write_draw(d, Path(build) / "reference")
        out += [((k, None, None), s) for s in fam.plan([paths], seeds=seeds, policies=["decode-only"],
                                                       python=python, numbers=[k])]
        for clock in clocks:
            for variant in VARIANTS:
                folder = Path(build) / f"{clock}mhz-{variant.replace(' ', '-')}"
                paths = fam.write_draw(variant_draw(d, clock, variant), folder)
                out += [((k, clock, variant), s) for s in fam.plan([paths], seeds=seeds, policies=["fabric-qos"],
                                                                   python=python, numbers=[k])]
    return out


def _worst(results, meta, clock, variant, seeds):
    """(ratio, decode, p99 ns, decode-only p99 ns) of the worst decode of draw
    ``meta`` at (``clock``, ``variant``), its steps over ``seeds`` pooled:
    the family's own judgement (:func:`.family.pooled`, which leaves out a
    decode under-guaranteed on purpose), with its p99s beside it."""
    k = meta["draw"]
    res = {}
    for s in seeds:
        res[(k, "decode-only", s)] = results[(k, None, None, s)]
        res[(k, "fabric-qos", s)] = results[(k, clock, variant, s)]
    row, = fam.pooled(res, [meta], seeds)
    t = row["decode"]
    lat = [x for s in seeds for x in res[(k, "fabric-qos", s)]["decodes"][t]["lat"]]
    base = [x for s in seeds for x in res[(k, "decode-only", s)]["decodes"][t]["lat"]]
    return row["p99_ratio"], t, pct(lat, 99) * NS_PER_CYCLE, pct(base, 99) * NS_PER_CYCLE


def judge(results, draws, seeds, clocks):
    """One row per (draw, clock, variant): the worst decode ratio per seed and pooled."""
    rows = []
    for k in draws:
        d = fam.draw(fam.FAMILY_SEED, k)
        meta, drawn = d["meta"], d["contract"]["fabric"]["clock_mhz"]
        for clock in clocks:
            for variant in VARIANTS:
                per_seed = [_worst(results, meta, clock, variant, (s,)) for s in seeds]
                pool = _worst(results, meta, clock, variant, tuple(seeds))
                runs = [results[(k, clock, variant, s)] for s in seeds]
                rows.append({
                    "draw": k, "channels": meta.get("channels", 1), "drawn_clock_mhz": drawn,
                    "clock_mhz": clock, "variant": variant,
                    "grant_over_peak": clock * REQUEST_BYTES / (PEAK_BYTES_PER_CYCLE * MEMORY_MHZ),
                    "ratio_per_seed": [r[0] for r in per_seed], "decode_per_seed": [r[1] for r in per_seed],
                    "pooled_ratio": pool[0], "pooled_decode": pool[1],
                    "p99_ns": pool[2], "base_p99_ns": pool[3],
                    "utilisation": sum(r["utilisation"] for r in runs) / len(runs),
                })
    return rows


def write_report(rows, *, out_dir, meta_run):
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    doc = {"revision": meta_run.get("revision"), "dirty": meta_run.get("dirty"), "meta": meta_run, "rows": rows}
    (out_dir / "grant_rate.json").write_text(json.dumps(doc, indent=1) + "\n")
    seeds = meta_run["seeds"]
    lines = []
    w = lines.append
    w("# The arbiter's grant rate and a decode step's tail (issue #41)")
    w("")
    w(f"Written by `python -m kvfabric.sim.studies.grant_rate` at {describe(meta_run)} "
      f"({meta_run['runs']} runs, {meta_run['wall_s']:.0f} s wall on {meta_run['jobs']} workers). "
      "The module docstring says what is run and why.")
    w("")
    w("The arbiter grants one request per fabric clock, and the system model's requests are 128 B, so "
      "at 400 MHz the fabric hands a channel at most 51.2 GB/s: the HBM3-6400 channel's peak, no more. "
      f"Below: `make family`'s draws at its lowest clock ({', '.join(str(k) for k in meta_run['draws'])}), "
      "run under fabric-qos at each clock with nothing else changed, with their prefills idle "
      "(decodes alone: the fabric is all that stands between the decodes and the channel) and as the "
      "family runs them. The ratio is the family's: the worst decode's p99 step latency over its p99 "
      "in the decodes-alone FR-FCFS run (`decode-only`), which has no arbiter and no clock; "
      f"per seed ({', '.join(map(str, seeds))}) and with the seeds' steps pooled. "
      "The family's target is 1.2x.")
    w("")
    w("| draw | channels | clock MHz | grant rate / channel peak | variant | decode ratio per seed "
      "| pooled | worst decode p99 ns (decode-only) | utilisation |")
    w("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        mark = " (drawn)" if r["clock_mhz"] == r["drawn_clock_mhz"] else ""
        w(f"| {r['draw']} | {r['channels']} | {r['clock_mhz']}{mark} | {r['grant_over_peak']:.3g} | "
          f"{r['variant']} | {' / '.join(f'{x:.3f}' for x in r['ratio_per_seed'])} | "
          f"**{r['pooled_ratio']:.3f}x** | {r['p99_ns']:.0f} ({r['base_p99_ns']:.0f}) | "
          f"{r['utilisation']:.1%} |")
    w("")
    w("Read it as: the decodes-alone rows are what the fabric's own grant rate costs a decode step at "
      "that clock, before any other tenant; the with-prefills rows add what the prefills cost. "
      "`kvfabric system` notes a contract whose clock grants less than 1.25 times the channel's peak.")
    (out_dir / "grant_rate.md").write_text("\n".join(lines) + "\n")


def _int_list(text):
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m kvfabric.sim.studies.grant_rate", description=__doc__.split("\n")[0])
    ap.add_argument("--draws", type=_int_list, default=None,
                    help="family draws (default: those at the family's lowest clock)")
    ap.add_argument("--clocks", type=_int_list, default=list(CLOCKS), help=f"MHz (default {CLOCKS})")
    ap.add_argument("--seeds", type=_int_list, default=list(fam.RUN_SEEDS), help="run seeds (default 1,2)")
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("JOBS", 2)), help="workers (default 2, JOBS)")
    ap.add_argument("--out", default="reports", help="report directory (default reports)")
    ap.add_argument("--build", default="build/grant_rate", help="where the drawn files go")
    ap.add_argument("--python", default=default_pypy(), help="interpreter for the runs (default: the PyPy)")
    args = ap.parse_args(argv)
    draws = args.draws if args.draws is not None else lowest_clock_draws()
    bad = [c for c in args.clocks if not 1 <= c <= 2000]
    if bad:
        ap.error(f"--clocks: {bad} outside 1..2000 MHz")
    from kvfabric.sweep import run_sweep

    labelled = plan(draws, args.seeds, args.clocks, args.build, python=args.python)
    # Longest first: more channels, then the reference.
    channels = {k: fam.channels_of(k) for k in draws}
    labelled.sort(key=lambda ls: -channels[ls[0][0]])
    tasks = [(f"draw {k}, {clock or 'decode-only'} {variant or ''}, seed {s['seed']}".strip(), (s,))
             for (k, clock, variant), s in labelled]
    t0 = time.time()
    swept = run_sweep(fam.run_spec, tasks, workers=args.jobs, desc="grant rate")
    failed = [r for r in swept if not r.ok]
    if failed:
        print("runs failed:\n" + "\n".join(f"  {r.task_id}: {r.error}" for r in failed), file=sys.stderr)
        return 1
    results = {}
    for ((k, clock, variant), spec), r in zip(labelled, swept):
        results[(k, clock, variant, spec["seed"])] = r.value[1]
    rows = judge(results, draws, args.seeds, args.clocks)
    meta_run = {**revision(), "draws": draws, "seeds": args.seeds, "clocks": args.clocks,
                "runs": len(tasks), "wall_s": time.time() - t0, "jobs": args.jobs,
                "python": interpreter_of(args.python or None)}
    write_report(rows, out_dir=args.out, meta_run=meta_run)
    for r in rows:
        print(f"draw {r['draw']} {r['clock_mhz']} MHz {r['variant']}: pooled {r['pooled_ratio']:.3f}x, per seed "
              + " / ".join(f"{x:.3f}" for x in r["ratio_per_seed"]))
    print(f"wrote {args.out}/grant_rate.md and .json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
