"""Mutation testing of the golden model: ``make mutants`` (issue #16).

Each mutant is one deliberate misreading of the spec, written as a text
substitution in ``model/channel.py`` (the coordinator's in
``model/coordinator.py``). For every mutant a fresh Python process
loads the mutated module in place of ``kvfabric.model.channel`` (or
``kvfabric.model.coordinator``; nothing on disk changes) and runs the fast model-level tests - never the RTL tests, so a
mutant must be caught by an oracle of the model's own, not by disagreeing with
the Verilog. A mutant is *killed* when some test fails (or the run exceeds the
time limit). The score is killed / (mutants - equivalent), written with the
survivors to ``reports/mutants.md`` and ``reports/mutants.json``.

A mutant whose text no longer occurs in ``model/channel.py`` is an error, not a
survivor: the list must follow the model (rename the substitution).

    python -m kvfabric.scripts.mutants [--jobs 2] [--only NAME ...] [--out reports]

``--target sim`` (``make mutants TARGET=sim``, issue #30) runs the curated
mutants of the system model instead: semantic misreadings of ``sim/dram.py``,
``sim/controller.py`` and ``sim/hbm3.py`` against the system-model tests, into
``reports/mutants_sim.md`` and ``.json``.  Each of them is first confirmed to
change observable behaviour: a fixed probe (three schedulers over seeded
random traffic, the preset's figures) must give another command log than the
unmutated model, else the mutant is reported as unconfirmed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from kvfabric.provenance import describe, revision
from kvfabric.sweep import run_sweep

ROOT = Path(__file__).resolve().parents[1]
TARGET = "model/channel.py"
MODULE = "kvfabric.model.channel"
#: Fast model-level tests, most discriminating first (the run stops at the first failure).
TESTS = [
    "tests/test_model_credits.py",  # seconds: kills the credit mutants before the long oracles run
    "tests/test_model_bulk_run.py",  # a second: the bulk run's mutants
    "tests/test_model_bucket_start.py",
    "tests/test_oracles.py",
    "tests/test_model_bounds.py",
    "tests/test_model_urgency.py",
    "tests/test_replay.py",
    "tests/test_model_telemetry.py",
    "tests/test_model_wrap.py",
    "tests/test_model_coordinator.py",  # the coordinator's mutants (model/coordinator.py) die here
]
#: Runs the CLI in a subprocess, which would load the unmutated model.
DESELECT = ["tests/test_replay.py::test_cli_replay_end_to_end"]
TIME_LIMIT = 900  # seconds per mutant; the unmutated suite takes about 150 s on one core


@dataclass(frozen=True)
class Mutant:
    name: str
    what: str  # the misreading, in the spec's words
    edits: tuple[tuple[str, str], ...]  # (text in model/channel.py, replacement)
    listed: bool = False  # one of the mutants issue #16 lists
    equivalent: str = ""  # reason, if the mutant cannot change behaviour the spec defines
    file: str = TARGET  # the file the edits apply to


def M(name, what, *edits, listed=False, equivalent="", file=TARGET):
    return Mutant(name, what, tuple(edits), listed, equivalent, file)


MUTANTS = [
    # ---- the eleven of issue #16 ----
    M("wfq_no_eligibility", "WF2Q+ eligibility removed (plain WFQ)",
      ("eligible = not mod_lt(self.vt_prev, self.tag[i], p.tag_bits)", "eligible = True"), listed=True),
    M("sfq_start_tag_order", "heads ordered by start tag instead of finish tag",
      ("finish = (self.tag[i] + head.cost) & ((1 << p.tag_bits) - 1)", "finish = self.tag[i]"), listed=True),
    M("v_never_jumps_to_vmin", "V never jumps to vmin",
      ("next_vt = mod_max(next_vt, self.vmin, p.tag_bits)", "pass"), listed=True),
    M("v_twice_as_fast", "V advances by twice the served units",
      ("next_vt = (self.vt + self.served) & tag_mask", "next_vt = (self.vt + 2 * self.served) & tag_mask"),
      listed=True),
    M("burst_keeps_level", "a burst grant keeps the committed level (spec §6.3 spends it)",
      ("level[i] = min(cfg.rate, cfg.capacity)", "level[i] = min(level[i] + cfg.rate, cfg.capacity)"),
      listed=True),
    M("conform_ignores_peak", "conform ignores the peak bucket",
      ("conform = peak_ok and cfg.rate != 0 and self.level[i] >= need",
       "conform = cfg.rate != 0 and self.level[i] >= need"), listed=True),
    M("capacity_never_applied", "the committed capacity never caps the level",
      ("level[i] = min(level[i] - debit + cfg.rate, cfg.capacity)", "level[i] = level[i] - debit + cfg.rate"),
      ("level[i] = x if x < cfg.capacity else cfg.capacity", "level[i] = x"), listed=True),
    M("urgent_youngest_first", "urgent heads served youngest first",
      ("return mod_lt(a[3], b[3], p.ts_bits)", "return mod_lt(b[3], a[3], p.ts_bits)"), listed=True),
    M("queue_depth_plus_one", "a queue accepts D + 1 entries",
      ("return [o >= depth for o in self.occupancy()]", "return [o > depth for o in self.occupancy()]"),
      ("return self.occupancy()[tenant] < self.params.queue_depth",
       "return self.occupancy()[tenant] <= self.params.queue_depth"),
      ("return occ < self.params.queue_depth, False", "return occ <= self.params.queue_depth, False"), listed=True),
    M("committed_never_conforms", "the committed bucket never conforms",
      ("conform = peak_ok and cfg.rate != 0 and self.level[i] >= need", "conform = peak_ok and False"),
      listed=True),
    M("committed_never_refills", "the committed bucket never refills",
      ("level[i] = min(level[i] - debit + cfg.rate, cfg.capacity)", "level[i] = min(level[i] - debit, cfg.capacity)"),
      ("level[i] = min(cfg.rate, cfg.capacity)", "level[i] = 0"),
      ("x = level[i] + cfg.rate", "x = level[i]"), listed=True),
    M("buckets_start_empty", "a tenant's buckets do not start full when it is enabled (spec §6.3)",
      ("if cfg.enable:  # enabled now: full at t+1", "if False:"),
      ("if cfg.enable:  # enabled now, as in _update_buckets", "if False:")),
    M("buckets_full_every_cycle", "every cycle of an enabled tenant counts as its enabling (spec §6.3)",
      ("if cfg.enable != prev[i]:  # an enable edge (spec §6.3's start)", "if True:"),
      ("if cfg.enable != prev[i]:  # an enable edge, as in _update_buckets", "if True:")),
    # ---- selection ----
    M("tie_to_higher_index", "equal keys go to the higher tenant index",
      ("if best is None or self._beats(key, best_key):", "if best is None or not self._beats(best_key, key):")),
    M("eligible_strict", "eligible only when the start tag is strictly below V",
      ("eligible = not mod_lt(self.vt_prev, self.tag[i], p.tag_bits)", "eligible = mod_lt(self.tag[i], self.vt_prev, p.tag_bits)")),
    M("ineligible_first", "ineligible heads before eligible ones",
      ("        if a[1] != b[1]:\n            return a[1]", "        if a[1] != b[1]:\n            return b[1]")),
    M("priority_inverted", "priority 3 is the highest",
      ("cls = 0 if (limit != 0 and old) else 1 + cfg.priority",
       "cls = 0 if (limit != 0 and old) else 4 - cfg.priority")),
    M("priority_ignored", "every conforming head in class 1",
      ("cls = 0 if (limit != 0 and old) else 1 + cfg.priority", "cls = 0 if (limit != 0 and old) else 1")),
    M("burst_as_priority_zero", "a burst head competes in class 1",
      ("        elif peak_ok:\n            cls = 5", "        elif peak_ok:\n            cls = 1")),
    M("zero_limit_still_urgent", "starve_limit = 0 does not disable the guard",
      ("cls = 0 if (limit != 0 and old) else", "cls = 0 if old else")),
    M("old_strictly_older", "old means age > starve_limit instead of >=",
      ("old = not mod_lt(deadline, head.ts, p.ts_bits)", "old = mod_lt(head.ts, deadline, p.ts_bits)")),
    M("fcfs_youngest_first", "FCFS bypass serves the youngest head",
      ("if q and (best is None or mod_lt(q[0].ts, best_key, p.ts_bits)):",
       "if q and (best is None or mod_lt(best_key, q[0].ts, p.ts_bits)):")),
    M("burst_kind_guaranteed", "class-5 grants reported (and charged) as guaranteed",
      ("(URGENT if cls == 0 else GUARANTEED if cls <= 4 else BURST)", "(URGENT if cls == 0 else GUARANTEED)")),
    M("urgent_kind_guaranteed", "class-0 grants reported as guaranteed (spec §6.6's kind 3 lost)",
      ("(URGENT if cls == 0 else GUARANTEED if cls <= 4 else BURST)", "(GUARANTEED if cls <= 4 else BURST)")),
    # ---- memory-side credits (spec §6.6) ----
    M("credit_not_checked", "a head competes whatever its class's credit",
      ("if key[0] == NO_CLASS or not credit[self._credit_class_of(key[0], i)]:", "if key[0] == NO_CLASS:")),
    M("credit_limit_off_by_one", "a class may hold one more than its limit",
      ("return tuple(limit == 0 or held < limit", "return tuple(limit == 0 or held <= limit")),
    M("credit_return_underflow", "a return with nothing in flight is not ignored",
      ("inflight[k] = x - 1 if (credit_return[k] and x > 0) else x", "inflight[k] = (x - 1) % 256 if credit_return[k] else x")),
    M("credit_no_saturation", "the in-flight count wraps instead of saturating at 255",
      ("x = x if x < _INFLIGHT_MAX else _INFLIGHT_MAX", "x = x % (_INFLIGHT_MAX + 1)")),
    M("load_ignores_ready", "the grant register is reloaded while the memory side refuses it",
      ("load = self.grant is None or grant_ready", "load = True")),
    # ---- buckets ----
    M("guaranteed_no_debit", "a guaranteed grant does not debit the committed level",
      ("level[i] = min(level[i] - debit + cfg.rate, cfg.capacity)", "level[i] = min(level[i] + cfg.rate, cfg.capacity)")),
    M("peak_no_debit", "a grant does not debit the peak level",
      ("peak[i] = min(peak[i] - debit + cfg.peak_rate, pcap)", "peak[i] = min(peak[i] + cfg.peak_rate, pcap)")),
    M("peak_uncapped", "the peak level is not capped at PCAP",
      ("peak[i] = min(peak[i] - debit + cfg.peak_rate, pcap)", "peak[i] = peak[i] - debit + cfg.peak_rate"),
      ("peak[i] = x if x < pcap else pcap", "peak[i] = x")),
    M("bucket_test_strict", "a bucket covers a request only when strictly above it",
      ("peak_ok = self.peak[i] >= need", "peak_ok = self.peak[i] > need")),
    # ---- tags and virtual time ----
    M("winner_tag_kept", "the winner's tag does not advance by its cost",
      ("tag[i] = (tag[i] + head.cost) & tag_mask", "tag[i] = tag[i]")),
    M("cost_rounded_down", "cost rounds down instead of up",
      ("return (nbytes * inv_weight + (1 << shift) - 1) >> shift", "return (nbytes * inv_weight) >> shift")),
    M("served_rounded_down", "served(bytes) rounds down instead of up",
      ("self.served = ((fabric_head.bytes + (1 << p.tag_shift) - 1) >> p.tag_shift",
       "self.served = (fabric_head.bytes >> p.tag_shift")),
    M("vmin_over_empty_queues", "vmin taken over every tenant, idle ones included",
      ("nonempty = [i for i in range(p.tenants) if self.fifo[i]]", "nonempty = list(range(p.tenants))")),
    M("idle_tenant_not_raised", "a newly backlogged tenant keeps its old tag (banks credit while idle)",
      ("floor = lag_floor if fifo[i] else vt", "floor = lag_floor")),
    M("backlogged_raised_to_v", "a backlogged tenant's tag is raised to V, not V - LAG_WINDOW",
      ("floor = lag_floor if fifo[i] else vt", "floor = vt")),
    M("no_tag_ceiling", "no upper clamp at V + LAG_WINDOW",
      ("            if ((ceiling - tag[i]) & tag_mask) >= half:  # tag_min(tag, ceiling)\n"
       "                tag[i] = ceiling\n", "")),
    # ---- ingress ----
    M("ready_ignores_ingress", "acceptance ignores the request held in the ingress register",
      ("        if self.ingress is not None and self.ingress[0] == req.tenant:\n"
       "            occ += 1\n", "")),
    M("oversize_request_valid", "a request above LMAX is not invalid",
      ("or nbytes == 0 or nbytes > p.max_request_bytes)", "or nbytes == 0)")),
    # ---- the coordinator across channels (spec §13), model/coordinator.py ----
    M("coord_level_rounds_down", "a tenant's water level is one below the least that places its total "
      "(spec §13.5)", ("            h = water_level(others, mask, need[i], top, lo, lev) if need[i] else 0",
                       "            h = max(water_level(others, mask, need[i], top, lo, lev) - 1, 0) if need[i] else 0"),
      file="model/coordinator.py"),
    M("coord_backlog_ignored", "every pair with demand is levelled: a light pair does not keep its even split "
      "(spec §13.5)", ("                          backlog=backlog)", "                          backlog=None)"),
      file="model/coordinator.py"),
    M("coord_light_pair_levelled", "a light pair of a tenant backlogged elsewhere is levelled too (spec §13.5)",
      ("                    x[i][c] = max(lo[c], h - others[c]) if lev[c] else lo[c]",
       "                    x[i][c] = max(lo[c], h - others[c])"), file="model/coordinator.py"),
    M("coord_one_pass", "the allocation makes one pass over the tenants instead of P (spec §13.5)",
      ("    for _ in range(passes):\n", "    for _ in range(1):\n"), file="model/coordinator.py"),
    M("coord_applies_late", "an epoch's result applies one cycle after t_e + 1 + COORD_LATENCY",
      ("self.pending = [cycle + 1 + COORD_LATENCY, dict(enumerate(result)), 0]",
       "self.pending = [cycle + 2 + COORD_LATENCY, dict(enumerate(result)), 0]"), file="model/coordinator.py"),
    M("coord_floor_ignored", "the floor f of the even split is not kept on every channel (spec §13.5)",
      ("    fr = [floor * t.rate >> 8 for t in tenants]", "    fr = [0 for t in tenants]"),
      file="model/coordinator.py"),
    M("coord_damping_ignored", "a backlogged pair does not keep half its previous rate (spec §13.5's damped "
      "descent)", ("min(previous[i][c] >> 1, t.rate - f) if previous is not None else 0", "0"),
      file="model/coordinator.py"),
    M("coord_damping_unhalved", "a backlogged pair keeps all of its previous rate, not half (spec §13.5)",
      ("min(previous[i][c] >> 1, t.rate - f)", "min(previous[i][c], t.rate - f)"), file="model/coordinator.py"),
    M("coord_previous_kept_when_off", "the previous rates survive the coordinator being turned off (spec §13.5)",
      ("            self.previous = None", "            pass"), file="model/coordinator.py"),
    # ---- the bulk run (spec §6.2, issue #41) ----
    M("run_holds_urgent", "the bulk run holds other bulk tenants' urgent heads out too",
      ("if run is not None and i != run and key[0] != 0 and self._is_bulk(i):",
       "if run is not None and i != run and self._is_bulk(i):")),
    M("run_holds_every_tenant", "the bulk run holds out tenants that are not bulk too",
      ("if run is not None and i != run and key[0] != 0 and self._is_bulk(i):",
       "if run is not None and i != run and key[0] != 0:")),
    M("run_count_unsaturated", "the run's 8-bit count wraps instead of saturating at 255",
      ("self.run_count = min(self.run_count + 1, _RUN_MAX)", "self.run_count = (self.run_count + 1) & _RUN_MAX")),
    M("run_counts_every_grant", "a grant to a tenant that is not bulk starts a run too",
      ("if choice is None or choice[1] == FCFS or not self._is_bulk(choice[0]):",
       "if choice is None or choice[1] == FCFS:")),
    M("run_one_grant_long", "a run lasts bulk_run + 1 grants",
      ("if not 0 < n < self.config.bulk_run or", "if not 0 < n <= self.config.bulk_run or")),
]


# ---- the system model (issue #30): sim/dram.py, sim/controller.py, sim/hbm3.py ----
_D, _C, _H = "sim/dram.py", "sim/controller.py", "sim/hbm3.py"


def S(name, what, file, *edits):
    return Mutant(name, what, tuple(edits), file=file)


SIM_MUTANTS = [
    # ---- channel timing (sim/dram.py) ----
    S("trrd_swapped", "tRRD_S within a bank group, tRRD_L across groups", _D,
      ("max(self.bg_next_act[bg], now + tm.tRRD_L)", "max(self.bg_next_act[bg], now + tm.tRRD_S)"),
      ("max(self.pc_next_act[pc], now + tm.tRRD_S)", "max(self.pc_next_act[pc], now + tm.tRRD_L)")),
    S("trcd_wr_is_trcd_rd", "a write waits tRCD_RD after its ACT", _D,
      ("self.next_wr[b] = now + tm.tRCD_WR", "self.next_wr[b] = now + tm.tRCD_RD")),
    S("twtr_from_command", "tWTR counted from the WR command, not the end of its data", _D,
      ("max(self.bg_next_rd[bg], end + tm.tWTR_L)", "max(self.bg_next_rd[bg], now + tm.tWTR_L)"),
      ("max(self.pc_next_rd[pc], end + tm.tWTR_S)", "max(self.pc_next_rd[pc], now + tm.tWTR_S)")),
    S("twr_from_command", "write recovery counted from the WR command", _D,
      ("max(self.next_pre[b], end + tm.tWR)", "max(self.next_pre[b], now + tm.tWR)")),
    S("tccd_l_is_tccd_s_for_reads", "reads within a bank group spaced by tCCD_S", _D,
      ("max(self.bg_next_rd[bg], now + tm.tCCD_L)", "max(self.bg_next_rd[bg], now + tm.tCCD_S)")),
    S("tccd_r_ignored", "no tCCD_R on a stack-ID switch", _D,
      ("if ok and pc_last_sid[p] != sid_of[b]:", "if False:"),
      ("if self.pc_last_sid[pc] != self._sid_of[b]:", "if False:")),
    S("tfaw_three_acts", "the tFAW window counts three activates", _D,
      ("self.pc_faw = [[-NEVER] * 4 for _ in range(npc)]", "self.pc_faw = [[-NEVER] * 3 for _ in range(npc)]")),
    S("trtw_ignored", "no read-to-write turnaround", _D,
      ("self.pc_next_wr[pc] = max(self.pc_next_wr[pc], now + tm.tRTW)", "pass")),
    S("tras_ignored", "a row may close right after its ACT", _D,
      ("self.next_pre[b] = now + tm.tRAS", "self.next_pre[b] = now")),
    S("trc_ignored", "no tRC between activates of a bank", _D,
      ("self.next_act[b] = now + tm.tRC", "self.next_act[b] = now")),
    S("trp_one_more", "tRP applied one clock too long (too conservative)", _D,
      ("max(self.next_act[b], now + tm.tRP)", "max(self.next_act[b], now + tm.tRP + 1)")),
    S("trtp_ignored", "a read's row may close at once", _D,
      ("max(self.next_pre[b], now + tm.tRTP)", "self.next_pre[b]")),
    S("tppd_ignored", "no tPPD between precharges", _D,
      ("self.pc_next_pre[pc] = now + tm.tPPD", "pass")),
    S("row_bus_rounds_down", "a command in the second half of a clock counts from that clock", _D,
      ("return (start_half + 1) // 2", "return start_half // 2")),
    S("trfcpb_is_trp", "a refreshed bank is busy tRP, not tRFCpb", _D,
      ("self.next_act[b] = now + tm.tRFCpb", "self.next_act[b] = now + tm.tRP")),
    S("refresh_no_stagger", "both pseudo-channels refresh in the same slot", _D,
      ("timing.tREFIpb + p * (timing.tREFIpb // npc)", "timing.tREFIpb")),
    S("refresh_bank_repeats", "a refreshed bank stays in its round", _D,
      ("                todo.discard(b)\n", "")),
    S("act_wake_late", "the wake-up for an ACT one clock late", _D,
      ("self.pc_faw[pc][0] + self.timing.tFAW, self._row_bus_cycle())",
       "self.pc_faw[pc][0] + self.timing.tFAW, self._row_bus_cycle()) + 1")),
    # ---- scheduling rules (sim/controller.py) ----
    S("frfcfs_no_hit_first", "FR-FCFS serves the oldest request, hits or not", _C,
      ("if r.row == row and (hit is None or rank < hit_rank):", "if r is head and r.row == row:")),
    S("hit_cap_off_by_one", "cap + 1 hits may bypass", _C,
      ("return ch.bypassed[b] < self.row_hit_cap", "return ch.bypassed[b] <= self.row_hit_cap")),
    S("bypass_never_counted", "bypassing hits are not counted (no cap)", _D,
      ("        if self.policy.bypasses(self, req):\n            self.bypassed[b] += 1\n", "")),
    S("qos_bypass_any_axqos", "a QoS hit may bypass a higher AxQOS", _C,
      ("return (hit.qclass == head.qclass and hit.axqos == head.axqos\n", "return (hit.qclass == head.qclass\n")),
    S("qos_one_cap", "every class gets the largest cap", _C,
      ("ch.bypassed[b] < self.row_hit_caps[hit.qclass]", "ch.bypassed[b] < self.row_hit_cap")),
    S("reserved_entries_pooled", "classes share their reserved entries", _C,
      ("return ch.class_queued[qclass] + entries <= self.reserved[qclass]",
       "return sum(ch.class_queued) + entries <= sum(self.reserved)")),
    S("drain_enters_above_high", "a drain starts one write above the high watermark", _C,
      ("elif writes >= self.high or", "elif writes > self.high or")),
    S("drain_batch_unbounded", "a drain runs to the low watermark however long", _C,
      ("return writes <= self.low or ch.write_batch[pc] >= self.high - self.low", "return writes <= self.low")),
    S("read_turn_never_owed", "a drain leaving with reads waiting owes them no read turn", _C,
      ("                    if reads > 0:\n                        self._turn_owed.add(pc)\n", "")),
    S("read_turn_off_by_one", "the read turn is one read longer", _C,
      ("ch.read_turn[pc] >= self.read_run", "ch.read_turn[pc] > self.read_run")),
    S("drain_interval_never_resets", "the drain interval counts from time 0, not the last drain", _C,
      ("                    self._left_at[pc] = now\n", "")),
    S("drain_interval_ignores_low", "an interval drain starts with any write queued", _C,
      ("interval is not None and writes > self.low and now", "interval is not None and writes > 0 and now")),
    S("hold_unbounded", "a due drain is held as long as protected reads wait", _C,
      ("if now - since < self.max_hold:", "if True:")),
    S("released_drain_stops_at_batch", "a released drain stops after high - low writes (the bug of issue #30)", _C,
      ("            if writes <= self.low:\n                return True\n",
       "            if writes <= self.low or ch.write_batch[pc] >= self.high - self.low:\n"
       "                return True\n")),
    S("recut_unbounded", "a released drain is re-cut however often", _C,
      ("if (self._recuts.get(pc, 0) < self.max_recuts and writes", "if (self.max_recuts and writes")),
    S("recut_chain_never_restarts", "the re-cut count never starts over", _C,
      ("            self._recuts.pop(pc, None)    # the last drain was not re-cut: a new chain\n",
       "            pass\n")),
    S("recut_ignores_force", "a released drain is re-cut with force writes queued", _C,
      ("self.max_recuts and writes < self.force\n", "self.max_recuts\n")),
    S("yield_budget_counts_writes", "the burst yield's budget counts queued writes too", _C,
      ("ch.occupancy - ch.writes_queued < self.budget", "ch.occupancy < self.budget")),
    S("yield_ignores_drains", "a held burst credit goes back during a write drain", _C,
      (" and not ch.drain.pending(ch)):", "):")),
    S("preempt_ignores_min_batch", "protected reads end a drain at once", _C,
      ("if writes < self.force and ch.write_batch[pc] >= self.min_batch and self._urgent_reads(ch, pc):",
       "if writes < self.force and self._urgent_reads(ch, pc):")),
    S("preempt_despite_protected_writes", "protected reads hold protected writes back", _C,
      ("                and not any(writes[:self.preempt_below]))", ")")),
    S("preempt_ignores_force", "a drain is held however many writes are queued", _C,
      ("if writes < self.force and self._urgent_reads(ch, pc):\n            since",
       "if self._urgent_reads(ch, pc):\n            since")),
    S("guard_holds_writes", "the activation guard holds burst writes too", _C,
      ("if not self.guard_activations or req.qclass != BURST_CLASS or req.is_write:",
       "if not self.guard_activations or req.qclass != BURST_CLASS:")),
    S("guard_urgent_only", "the activation guard ignores guaranteed reads", _C,
      ("if not (waiting[URGENT_CLASS] or waiting[GUARANTEED_CLASS]):", "if not waiting[URGENT_CLASS]:")),
    S("guard_window_strict", "the guard wants the last ACT more than tFAW ago", _C,
      ("return max(ch.pc_faw[pc]) <= window_start", "return max(ch.pc_faw[pc]) < window_start")),
    S("refresh_postpone_if_any", "a refresh waits if any remaining bank is protected", _C,
      ("if all(self._protected(ch, b) for b in todo):", "if any(self._protected(ch, b) for b in todo):")),
    S("refresh_postpone_unbounded", "a refresh is postponed without limit", _C,
      ("if late + self.retry >= self.max_postponed * ch.timing.tREFIpb:", "if False:")),
    S("refresh_pick_busy", "round-robin refresh picks the busiest bank", _C,
      ("return min(todo, key=lambda b: (len(ch.bank_queue[b]), ch.open_row[b] >= 0, b))",
       "return max(todo, key=lambda b: (len(ch.bank_queue[b]), ch.open_row[b] >= 0, b))")),
    # ---- the preset (sim/hbm3.py) ----
    S("preset_trcd_swapped", "tRCD_RD and tRCD_WR exchanged", _H,
      ("    tRCD_RD=31,\n    tRCD_WR=15,", "    tRCD_RD=15,\n    tRCD_WR=31,")),
    S("preset_trrd_swapped", "tRRD_S and tRRD_L exchanged", _H,
      ("    tRRD_S=4,\n    tRRD_L=5,", "    tRRD_S=5,\n    tRRD_L=4,")),
    S("preset_cl_21", "CL 21", _H, ("    CL=20,", "    CL=21,")),
    S("preset_tfaw_32", "tFAW 32 (an older part's figure)", _H, ("    tFAW=24,", "    tFAW=32,")),
    S("ns_rounds_down", "ns_to_cycles rounds down", _H,
      ("return -((-ps.numerator) // (ps.denominator * tck_ps))", "return ps.numerator // (ps.denominator * tck_ps)")),
    S("bank_group_is_stack", "a bank group spans the whole stack ID (tCCD_L, tRRD_L there)", _H,
      ("return bank_id // self.banks_per_group\n", "return bank_id // (self.banks_per_group * self.bank_groups)\n")),
]

#: Each target: its mutants, its tests (fastest and most discriminating first) and report name.
TARGETS = {
    "model": dict(mutants=MUTANTS, tests=TESTS, deselect=DESELECT, report="mutants",
                  title="the golden model", package="kvfabric.model"),
    "sim": dict(mutants=SIM_MUTANTS, tests=["tests/test_sim_timing.py", "tests/test_sim_sched.py",
                                            "tests/test_sim_dram.py"],
                deselect=[], report="mutants_sim", title="the system model", package="kvfabric.sim"),
}


def _sim_fingerprint() -> str:
    """sha256 of what the system model does on a fixed probe: the preset,
    organisation and ``ns_to_cycles`` of a few durations, and the command logs
    of FR-FCFS (small cap and watermarks), FCFS and the QoS controller (every
    class, small knobs, postponable refresh, and the credits its burst yield
    returns) under seeded random requests:
    phases of dense traffic and of sparse writes, a few hot banks of three
    rows, and the channel visited only when it asks to be (its wake-up times)
    or a request arrives, as the system loop does."""
    import dataclasses
    import hashlib
    import random

    from kvfabric.sim import controller as c
    from kvfabric.sim.dram import Channel, Request
    from kvfabric.sim.hbm3 import HBM3_6400, HBM3_GEOMETRY, ns_to_cycles

    setups = {
        "frfcfs": dict(scheduler=c.FrFcfsScheduler(2), drain=c.WatermarkDrain(10, 3)),
        "fcfs": dict(scheduler="fcfs"),
        "qos": dict(scheduler=c.QosScheduler((3, 5, 2)), admission=c.ReservedEntries((12, 24, 48)),
                    drain=c.PreemptingDrain(10, 3, preempt_below=2, min_batch=3, max_hold=60, force=12,
                                            interval=400, max_recuts=1),
                    refresh_policy=c.QosRefresh(max_postponed=2)),
    }
    figures = (dataclasses.asdict(HBM3_6400), HBM3_GEOMETRY,
               [ns_to_cycles(x) for x in ("0.626", "12.5", "121.9", 320, 3900)])
    digest = hashlib.sha256(repr(figures).encode())
    for name, kw in setups.items():
        rng = random.Random(30)
        ch = Channel(n_tenants=1, log_commands=True, **kw)
        # The QoS controller's burst yield too (its returns go into the digest),
        # with a hold longer than the probe keeps protected reads queued and a
        # budget its read-queue depths cross both ways (24 was crossed 63 times
        # in 10,710 steps: the yield mutants went unconfirmed).
        credits = c.YieldingCreditReturn(max_hold=3000, budget=40) if name == "qos" else None
        opened = [0, 0, 0]  # entries enqueued per class: a grant of 4 is taken at the first of each 4
        returns = []
        hot = [(rng.randrange(HBM3_GEOMETRY.banks), rng.randrange(64)) for _ in range(8)]
        hot = [(bank, row + i) for bank, row in hot for i in range(3)]
        arrivals, t = [], 0
        while t < 12_000:  # (cycle, is_write): dense phases, then sparse writes among reads
            dense = (t // 1500) % 2 == 0
            t += rng.randrange(1, 3 if dense else 12)
            arrivals.append((t, rng.random() < (0.35 if dense else 0.08)))
        seq, now, i = 0, 0, 0
        while now < 12_000:
            while i < len(arrivals) and arrivals[i][0] <= now:
                seq += 1
                bank, row = rng.choice(hot) if rng.random() < 0.7 else (rng.randrange(64), rng.randrange(64))
                r = Request(0, arrivals[i][1], bank, row, now)
                k = rng.randrange(3)
                # AxQOS mostly the class's own (as the fabric's front end gives it), so hits of
                # one level meet their cap; protected writes only in every other 3,000 cycles.
                r.seq, r.axqos = seq, (15, 10, 4)[k] if rng.randrange(4) else rng.randrange(16)
                r.qclass = k if not r.is_write or ((now // 3000) % 2 and not rng.randrange(4)) else c.BURST_CLASS
                r.rank = c.qos_rank(r.axqos, r.seq, r.qclass) if name == "qos" else r.seq
                if ch.has_room(1, r.is_write, r.qclass):
                    ch.enqueue(r, now)
                    if credits is not None and opened[r.qclass] % 4 == 0:
                        credits.granted(r.qclass, 4)
                    opened[r.qclass] += 1
                i += 1
            nxt = arrivals[i][0] if i < len(arrivals) else 12_000
            ch.pop_completions(now)
            if credits is not None:
                returns.append((now, tuple(credits.step(ch, now))))
            now = min(ch.tick(now, nxt), nxt)
        digest.update(repr(ch.log).encode())
        digest.update(repr(returns).encode())
    return digest.hexdigest()


# ---- worker: one mutant, in this process ---------------------------------------------------

class _FirstFailure:
    """pytest plugin: remember the first failing test's id."""

    def __init__(self):
        self.failed: str | None = None

    def pytest_runtest_logreport(self, report):
        if report.failed and self.failed is None:
            self.failed = report.nodeid


def _install(mutant: Mutant | None, file: str = TARGET) -> None:
    """Load ``file`` (model/channel.py or sim/<name>.py), mutated, as its
    kvfabric module before anything imports it."""
    import importlib.util

    file = mutant.file if mutant is not None else file
    folder, stem = file[:-3].split("/")
    package_name = f"kvfabric.{folder}"
    package = importlib.import_module(package_name)
    name = f"{package_name}.{stem}"
    path = ROOT / file
    source = path.read_text()
    if mutant is not None:
        source = apply(source, mutant)
    spec = importlib.util.spec_from_loader(name, loader=None, origin=str(path))
    module = importlib.util.module_from_spec(spec)
    module.__file__ = str(path)
    module.__package__ = package_name
    sys.modules[name] = module
    exec(compile(source, str(path), "exec"), module.__dict__)
    setattr(package, stem, module)


def apply(source: str, mutant: Mutant) -> str:
    for old, new in mutant.edits:
        count = source.count(old)
        if count != 1:
            raise ValueError(f"mutant {mutant.name}: {old!r} occurs {count} times in {mutant.file} (need 1)")
        source = source.replace(old, new)
    return source


def _worker(name: str, result_path: str, target: str = "model") -> int:
    import pytest

    t = TARGETS[target]
    mutant = None if name == "none" else next(m for m in t["mutants"] if m.name == name)
    if mutant is not None or target == "model":
        _install(mutant)
    fingerprint = _sim_fingerprint() if target == "sim" else None
    plugin = _FirstFailure()
    args = ["-x", "-q", "-n", "0", "-p", "no:cacheprovider", "-p", "no:randomly", "--rootdir", str(ROOT),
            *t["tests"]]
    for d in t["deselect"]:
        args += ["--deselect", d]  # node ids are relative to the rootdir (cwd)
    code = pytest.main(args, plugins=[plugin])
    Path(result_path).write_text(json.dumps({"exit": int(code), "failed": plugin.failed,
                                             "fingerprint": fingerprint}))
    return 0


# ---- driver ----------------------------------------------------------------------------------

@dataclass
class Outcome:
    name: str
    status: str  # killed | survived | equivalent | timeout | error
    seconds: float
    killed_by: str | None = None
    detail: str = ""
    extra: dict = field(default_factory=dict)


def run_one(name: str, workdir: Path, target: str = "model", baseline: str | None = None) -> Outcome:
    """Run one mutant; for the sim target, ``baseline`` is the unmutated
    model's fingerprint and a mutant that does not change it is 'unconfirmed'."""
    result = workdir / f"{target}-{name}.json"
    result.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "KVFABRIC_SEED"}  # the CI seeds
    start = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "kvfabric.scripts.mutants", "--worker", name,
                               "--target", target, "--result", str(result)], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=TIME_LIMIT)
    except subprocess.TimeoutExpired:
        return Outcome(name, "timeout", time.monotonic() - start, detail=f"over {TIME_LIMIT} s")
    seconds = time.monotonic() - start
    if not result.exists():
        return Outcome(name, "error", seconds, detail=(proc.stderr or proc.stdout)[-2000:])
    data = json.loads(result.read_text())
    extra = {"fingerprint": data["fingerprint"]} if data.get("fingerprint") else {}
    if baseline is not None and data.get("fingerprint") == baseline:
        return Outcome(name, "unconfirmed", seconds, killed_by=data["failed"], extra=extra,
                       detail="the probe's command logs equal the unmutated model's")
    if data["exit"] == 0:
        return Outcome(name, "survived", seconds, extra=extra)
    if data["failed"]:
        return Outcome(name, "killed", seconds, killed_by=data["failed"], extra=extra)
    # pytest exited non-zero without a failing test: collection or usage error
    return Outcome(name, "error", seconds, detail=proc.stdout[-2000:])


def _mutant_task(name: str, workdir: str, target: str, reference: str | None, equivalent: bool) -> Outcome:
    """One sweep task: a mutant's outcome (an equivalent mutant is not run)."""
    if equivalent:
        return Outcome(name, "equivalent", 0.0)
    return run_one(name, Path(workdir), target, reference)


def _outcome_of(res) -> Outcome:
    """A sweep task's Outcome; a task that raised (or killed its workers) is an error."""
    return res.value if res.ok else Outcome(res.task_id, "error", res.wall_s, detail=res.error[-2000:])


def report(outcomes: list[Outcome], baseline: Outcome, wall: float, out: Path, note: str = "",
           target: str = "model", rev: dict | None = None, previous_revision: str | None = None) -> dict:
    """Writes the report. ``rev``: the revision the run started at (``kvfabric.provenance``;
    now when not given); ``previous_revision``: in a re-run of survivors, the
    revision the other results come from (the report names both)."""
    t = TARGETS[target]
    mutants = t["mutants"]
    by_name = {m.name: m for m in mutants}
    files = sorted({m.file for m in mutants})
    counted = [o for o in outcomes if o.status != "equivalent"]
    killed = [o for o in counted if o.status in ("killed", "timeout")]
    score = len(killed) / len(counted) if counted else 0.0
    listed = [o for o in outcomes if by_name[o.name].listed]
    summary = {
        **(rev or revision()), "previous_revision": previous_revision,
        "target": ", ".join(files), "tests": t["tests"], "deselected": t["deselect"],
        "mutants": len(outcomes), "equivalent": sum(o.status == "equivalent" for o in outcomes),
        "killed": len(killed), "survived": [o.name for o in counted if o.status == "survived"],
        "unconfirmed": [o.name for o in counted if o.status == "unconfirmed"],
        "errors": [o.name for o in counted if o.status == "error"],
        "score": round(score, 4),
        "listed_killed": sum(o.status in ("killed", "timeout") for o in listed), "listed": len(listed),
        "baseline_seconds": round(baseline.seconds, 1), "wall_seconds": round(wall, 1), "note": note,
        "results": [{"name": o.name, "file": by_name[o.name].file, "what": by_name[o.name].what,
                     "listed": by_name[o.name].listed, "status": o.status, "killed_by": o.killed_by,
                     "seconds": round(o.seconds, 1), "reason": by_name[o.name].equivalent, "detail": o.detail}
                    for o in outcomes],
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{t['report']}.json").write_text(json.dumps(summary, indent=2) + "\n")
    command = ("`make mutants` (`python -m kvfabric.scripts.mutants`)" if target == "model" else
               f"`make mutants TARGET={target}` (`python -m kvfabric.scripts.mutants --target {target}`)")
    lines = [
        f"# Mutation score of {t['title']}",
        "",
        f"Command: {command}, {len(outcomes)} curated mutants "
        f"of {', '.join(f'`{f}`' for f in files)} against {', '.join(x.split('/')[-1] for x in t['tests'])}"
        + ("; no RTL test" if target == "model" else "")
        + ", each in its own process, stopping at the first failing test.",
        "",
    ]
    if target == "sim":
        lines += ["Each mutant is first confirmed to change observable behaviour: the command logs of a fixed "
                  "probe (FR-FCFS, FCFS and the QoS controller under seeded random requests, 12,000 cycles "
                  "each, the channel visited at its own wake-up times) and the preset's figures must differ from the unmutated model's "
                  "(`_sim_fingerprint`); a mutant that does not is listed as unconfirmed, not counted as "
                  "killed.", ""]
    lines += [
        f"- **Score: {len(killed)} / {len(counted)} = {score:.1%}** "
        f"(equivalent mutants excluded: {summary['equivalent']})",
    ]
    if listed:
        lines.append(f"- Issue #16's listed mutants killed: {summary['listed_killed']} / {summary['listed']}")
    lines += [
        f"- Survivors: {', '.join(summary['survived']) or 'none'}",
        *([f"- Unconfirmed (no change on the probe): {', '.join(summary['unconfirmed']) or 'none'}"]
          if target == "sim" else []),
        f"- Errors: {', '.join(summary['errors']) or 'none'}",
        f"- Wall time: {wall / 60:.1f} min ({note or 'one run'}); the unmutated suite alone: "
        f"{baseline.seconds:.0f} s",
        f"- Revision: {describe(summary)}"
        + (f" (the results not re-run: {describe({'revision': previous_revision})})" if note else ""),
        "",
    ]
    if target == "model":
        lines += ["| mutant | misreading | listed | result | first failing test | s |", "|---|---|---|---|---|---|"]
    else:
        lines += ["| mutant | file | misreading | result | first failing test | s |", "|---|---|---|---|---|---|"]
    for o in outcomes:
        m = by_name[o.name]
        what = m.what + (f" — equivalent: {m.equivalent}" if m.equivalent else "")
        middle = f"{'yes' if m.listed else ''}" if target == "model" else f"`{m.file}`"
        first = m.what if target == "model" else what
        cells = ([f"`{o.name}`", what, middle] if target == "model" else [f"`{o.name}`", middle, first])
        lines.append("| " + " | ".join(cells) + f" | {o.status} | "
                     f"{('`' + o.killed_by.split('tests/')[-1] + '`') if o.killed_by else ''} | {o.seconds:.0f} |")
    (out / f"{t['report']}.md").write_text("\n".join(lines) + "\n")
    return summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=1, help="local Dask workers (default 1)")
    ap.add_argument("--scheduler", default=None,
                    help="address of a running Dask scheduler (default: $KVFABRIC_SCHEDULER, else local workers)")
    ap.add_argument("--only", nargs="*", help="run only these mutants (no report files)")
    ap.add_argument("--out", default=str(ROOT / "reports"), help="where mutants.md/.json go")
    ap.add_argument("--rerun-survivors", action="store_true",
                    help="re-run only the survivors of OUT/mutants.json (after adding tests) and "
                         "rewrite the report with their new results")
    ap.add_argument("--target", choices=sorted(TARGETS), default="model",
                    help="model: model/channel.py (default); sim: sim/dram.py, controller.py, hbm3.py")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return _worker(args.worker, args.result, args.target)

    target = args.target
    mutants = TARGETS[target]["mutants"]
    report_name = TARGETS[target]["report"]
    for m in mutants:  # every substitution must still match: fail before spending minutes
        apply((ROOT / m.file).read_text(), m)
    names = [m.name for m in mutants]
    previous = None
    if args.rerun_survivors:
        previous = json.loads((Path(args.out) / f"{report_name}.json").read_text())
        known = {r["name"] for r in previous["results"]}
        # survivors, errors, and mutants added to the list since that run
        args.only = [r["name"] for r in previous["results"] if r["status"] in ("survived", "error", "unconfirmed")]
        args.only += [n for n in names if n not in known]
    if args.only:
        unknown = sorted(set(args.only) - set(names))
        if unknown:
            ap.error(f"unknown mutant(s) {', '.join(unknown)}")
        names = [n for n in names if n in args.only]
    workdir = ROOT / "build" / "mutants"
    workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    rev = revision()
    # The unmutated model must pass first (skipped for --only, a quick re-check, unless the
    # mutants are to be confirmed against its fingerprint).
    quick = args.only and not previous and target == "model"
    baseline = Outcome("none", "survived", 0.0) if quick else run_one("none", workdir, target)
    reference = baseline.extra.get("fingerprint")
    print(f"unmutated suite: {baseline.status} in {baseline.seconds:.0f} s", flush=True)
    if baseline.status != "survived":
        print(f"the unmutated model fails the suite ({baseline.killed_by or baseline.detail}); stopping")
        return 2
    by_name = {m.name: m for m in mutants}

    def show(res):
        o = _outcome_of(res)
        print(f"{o.name:28s} {o.status:9s} {o.seconds:5.0f} s  {o.killed_by or o.detail[:200]}", flush=True)

    # One task per mutant on the sweep layer (kvfabric.sweep): local Dask
    # workers, or the scheduler of --scheduler / $KVFABRIC_SCHEDULER.
    swept = run_sweep(_mutant_task, [(name, (name, str(workdir), target, reference, bool(by_name[name].equivalent)))
                                     for name in names],
                      workers=max(1, args.jobs), scheduler=args.scheduler, desc=f"mutants ({target})",
                      progress=False, on_result=show)
    outcomes = [_outcome_of(r) for r in swept]
    wall = time.monotonic() - t0
    if previous is not None:
        rerun = {o.name: o for o in outcomes}
        merged = [rerun.get(r["name"]) or Outcome(r["name"], r["status"], r["seconds"], r["killed_by"],
                                                   r["detail"]) for r in previous["results"]]
        merged += [o for o in outcomes if o.name not in {r["name"] for r in previous["results"]}]
        note = (f"{previous['wall_seconds'] / 60:.1f} min for the full run, then "
                f"{wall / 60:.1f} min re-running {len(outcomes)} survivor(s)/new mutant(s) "
                f"({', '.join(o.name for o in outcomes)}) after tests were added")
        summary = report(merged, baseline, previous["wall_seconds"] + wall, Path(args.out), note=note,
                         target=target, rev=rev, previous_revision=previous.get("revision"))
        print(f"score {summary['score']:.1%}, survivors {summary['survived']}")
        return 0 if not summary["survived"] and not summary["errors"] and not summary["unconfirmed"] else 1
    if args.only:
        return 0 if all(o.status in ("killed", "timeout", "equivalent") for o in outcomes) else 1
    summary = report(outcomes, baseline, wall, Path(args.out), target=target, rev=rev)
    print(f"score {summary['score']:.1%}, survivors {summary['survived']}, "
          f"unconfirmed {summary['unconfirmed']}, {wall / 60:.1f} min")
    return 0 if not summary["survived"] and not summary["errors"] and not summary["unconfirmed"] else 1


if __name__ == "__main__":
    sys.exit(main())
