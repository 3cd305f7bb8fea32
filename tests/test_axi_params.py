"""The AXI4 front end's parameters, split rule and command line (spec §14.1, §14.2).

The split rule is checked from its definition: the pieces tile the burst's
beats in order, each stays inside one interleave unit and one 4 KiB page (so
inside one channel), none is longer than ``frag_beats``, and a piece ends
early only where a boundary or ``frag_beats`` forces it.
"""

import random

import pytest

from kvfabric.axi import AxiParams, check_axi_params, channel_of, split_burst, split_unsupported
from kvfabric.cli import main
from kvfabric.spec import FabricParams


@pytest.mark.parametrize("field, value, message", [
    ("addr_width", 11, "addr_width must be an integer in 12..64, not 11"),
    ("data_width", 48, "data_width must be a power of two in 32..1024, not 48"),
    ("id_width", 0, "id_width must be an integer in 1..16, not 0"),
    ("interleave_bytes", 16, "interleave_bytes must be a power of two in 32..4096, not 16"),
    ("interleave_bytes", 8192, "interleave_bytes must be a power of two in 32..4096, not 8192"),
    ("frag_beats", 3, "frag_beats must be a power of two in 1..256, not 3"),
    ("read_entries", 1, "read_entries must be a power of two in 2..64, not 1"),
    ("write_entries", 128, "write_entries must be a power of two in 2..64, not 128"),
    ("mem_clock", 1, "mem_clock must be True or False, not 1"),
])
def test_init_wrong_axi_parameter(field, value, message):
    with pytest.raises(ValueError, match=f"AXI parameter {message}$"):
        AxiParams(**{field: value})


def test_fabric_mismatches_are_named():
    with pytest.raises(ValueError, match="power-of-two channel count, not 3"):
        check_axi_params(AxiParams(), FabricParams(channels=3))
    with pytest.raises(ValueError, match="8192 exceeds the arbiter's max_request_bytes = 4096: lower frag_beats to at most 128"):
        check_axi_params(AxiParams(frag_beats=256, data_width=256), FabricParams())
    with pytest.raises(ValueError, match="id_width = 6 cannot hold a request id of 8 bits"):
        check_axi_params(AxiParams(read_entries=8), FabricParams(id_width=6))
    with pytest.raises(TypeError, match="must be an AxiParams"):
        check_axi_params({"data_width": 64}, FabricParams())


def _check_pieces(addr, beats, size, axi, channels):
    pieces = split_burst(addr, beats, size, axi, channels)
    step = 1 << size
    # The beats' addresses of the whole burst (AXI INCR: the first may be unaligned).
    beat_addrs = [addr] + [(addr - addr % step) + k * step for k in range(1, beats)]
    k = 0
    for i, p in enumerate(pieces):
        assert p.addr == beat_addrs[k], f"piece {i} starts at {p.addr:#x}, beat {k} is at {beat_addrs[k]:#x}"
        assert 1 <= p.beats <= axi.frag_beats
        covered = beat_addrs[k:k + p.beats]
        first, last_byte = covered[0], covered[-1] - covered[-1] % step + step - 1
        assert first // axi.interleave_bytes == last_byte // axi.interleave_bytes, "piece crosses an interleave unit"
        assert first // 4096 == last_byte // 4096, "piece crosses 4 KiB"
        assert p.channel == channel_of(p.addr, axi, channels)
        assert p.bytes == p.beats * step
        k += p.beats
        assert p.last == (k == beats)
        if k < beats and p.beats < axi.frag_beats:
            nxt = beat_addrs[k]
            unit = min(axi.interleave_bytes, 4096)
            assert nxt // unit != first // unit, f"piece {i} ended early at beat {k} without a boundary"
    assert k == beats


def test_split_rule_from_its_definition():
    rng = random.Random(40)
    print("seed 40")
    for _ in range(3000):
        axi = AxiParams(addr_width=20, data_width=rng.choice([32, 64, 256]),
                        interleave_bytes=rng.choice([64, 256, 4096]),
                        frag_beats=rng.choice([1, 4, 8, 16, 256]))
        if axi.interleave_bytes < axi.data_bytes:
            continue
        size = rng.randint(0, axi.max_size)
        beats = rng.randint(1, 256)
        addr = rng.randrange(0, (1 << 20) - beats * (1 << size))
        _check_pieces(addr, beats, size, axi, rng.choice([1, 2, 8]))


def test_split_examples():
    axi = AxiParams(data_width=256, interleave_bytes=256, frag_beats=8)
    # 16 beats of 32 B from 0x100: two units, channels 1 and 2.
    pieces = split_burst(0x100, 16, 5, axi, 8)
    assert [(p.addr, p.beats, p.channel, p.last) for p in pieces] == [(0x100, 8, 1, False), (0x200, 8, 2, True)]
    # Unaligned start: 0x1F1 with 32 B beats -> the first beat covers 0x1E0..0x1FF, one beat to the boundary.
    pieces = split_burst(0x1F1, 3, 5, axi, 8)
    assert [(p.addr, p.beats) for p in pieces] == [(0x1F1, 1), (0x200, 2)]
    assert split_unsupported(20, AxiParams(frag_beats=8)) == [8, 8, 4]


def test_split_rejects_bad_bursts():
    axi = AxiParams(data_width=64)
    with pytest.raises(ValueError, match="1..256 beats, not 0"):
        split_burst(0, 0, 0, axi, 2)
    with pytest.raises(ValueError, match="AxSIZE must be 0..3, not 4"):
        split_burst(0, 1, 4, axi, 2)


def test_cli_axi_errors(tmp_path, capsys):
    out = tmp_path / "x.v"
    assert main(["verilog", "--out", str(out), "--interleave", "128"]) == 2
    assert "AXI options (--interleave) need --axi" in capsys.readouterr().err
    assert main(["verilog", "--out", str(out), "--mem-clock"]) == 2
    assert "AXI options (--mem-clock) need --axi" in capsys.readouterr().err
    assert main(["verilog", "--axi", "--out", str(out), "--frag-beats", "3"]) == 2
    assert "AXI parameter frag_beats must be a power of two in 1..256, not 3" in capsys.readouterr().err
    assert main(["verilog", "--axi", "--out", str(out), "--channels", "3"]) == 2
    assert "power-of-two channel count, not 3" in capsys.readouterr().err
    assert not out.exists()


def test_cli_writes_the_axi_top(tmp_path, capsys):
    out = tmp_path / "axi.v"
    assert main(["verilog", "--axi", "--out", str(out), "--tenants", "2", "--channels", "2",
                 "--addr-width", "16", "--data-width", "32", "--axi-id-width", "2", "--interleave", "64",
                 "--frag-beats", "4", "--read-entries", "2", "--write-entries", "2"]) == 0
    text = out.read_text()
    assert "module kvfabric_axi(" in text
    for port in ("s_axi__1__awaddr", "m_axi__1__rdata", "s_axil__awaddr", "unsupported__1"):
        assert port in text
    assert "input [15:0] s_axi__0__araddr;" in text
    # Manager ID: class (2) + tenant (1) + entry (1).
    assert "output [3:0] m_axi__0__arid;" in text
    assert "mem_clk" not in text


def test_cli_memory_clock_ports(tmp_path):
    out = tmp_path / "axi.v"
    assert main(["verilog", "--axi", "--mem-clock", "--out", str(out), "--tenants", "1", "--channels", "1",
                 "--addr-width", "12", "--data-width", "32", "--axi-id-width", "1", "--interleave", "64",
                 "--frag-beats", "2", "--read-entries", "2", "--write-entries", "2"]) == 0
    text = out.read_text()
    assert "input mem_clk;" in text and "input mem_rst;" in text
    assert "posedge mem_clk" in text and "posedge 1'h0" not in text


def test_build_key_names_every_parameter():
    """Two AXI configurations never share a generated-Verilog file or a simulator
    build: every AxiParams field changes the key (a missing one once let a
    memory-clock build serve the single-clock tests)."""
    import dataclasses

    from kvfabric.tb.axi_design import axi_key
    base, params = AxiParams(), FabricParams()
    for f in dataclasses.fields(AxiParams):
        value = getattr(base, f.name)
        other = (not value) if isinstance(value, bool) else value * 2 if f.name != "addr_width" else value + 1
        assert axi_key(params, base) != axi_key(params, dataclasses.replace(base, **{f.name: other})), f.name
