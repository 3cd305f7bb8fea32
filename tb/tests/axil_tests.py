"""cocotb: the AXI4-Lite register file of the generated Verilog under idle cycles and
backpressure on every channel, partial strobes and unaligned addresses (spec §9).

Run inside the simulator by ``tests/test_cosim_axil.py``. Every scenario runs the
lockstep scoreboard of :mod:`tb.scoreboard`: every read's data is compared with
the register mirror (the spec's register behaviour on the description
``hw/kvfabric.rdl``) and the golden model's telemetry in the cycle the spec
says, and every write reaches the model in the cycle its later handshake says,
while random traffic on the channels is compared with the model cycle by cycle
(so a register write that lands in the wrong cycle, on the wrong bytes or in the
wrong register shows as a wrong grant too).

Environment: ``KVF_PARAMS`` (JSON of FabricParams) and ``KVF_SEED``.
"""

from __future__ import annotations

import random
import zlib

import cocotb
from cocotb.triggers import Combine
from cocotbext.axi import AxiResp

from kvfabric.regmap import REGMAP
from kvfabric.tb import axil as regs
from kvfabric.tb.axil import AXIL_CHANNELS, AxiStress
from kvfabric.tb.env import TB, seed_from_env
from kvfabric.tb.stimulus import random_config
from kvfabric.tb.tests.cosim_tests import _params, random_traffic

#: The pause patterns, one scenario each (``none`` is the control; ``mixed`` draws one per channel).
STRESS = ("none", "random", "bursts", "periodic", "heavy", "mixed")
_ACTIVE = ("random", "bursts", "periodic", "heavy")


def _address_pools(p):
    """Addresses the storm draws from: (writable, commits, read-only, unmapped)."""
    writable, commits, readonly = [], [], []
    for addr, block, i, reg in REGMAP.registers(p):
        if reg.commit:
            commits.append(addr)
        elif any(f.writable for f in reg.fields):
            writable.append(addr)
        else:
            readonly.append(addr)
    unmapped = [0x0020, 0x00FC, 0x0800, regs.MARK_ADDR, 0x17FC, 0xFFFC]
    if p.tenants < 16:  # the registers of tenant N do not exist (spec §9)
        unmapped += [regs.tenant_reg(p.tenants, name) for name in ("RATE", "PRIO_EN", "COMMIT")]
    if p.channels < 16:
        unmapped.append(regs.dropped_reg(p.channels))
    return writable, commits, readonly, unmapped


def _random_access(rng, pools):
    """(address, length): a word, or 1-3 bytes at any offset (an unaligned address
    and partial strobes; a span crossing a word boundary is two transfers)."""
    writable, commits, readonly, unmapped = pools
    base = rng.choice(rng.choices([writable, commits, readonly, unmapped], weights=[6, 1, 2, 2])[0])
    if rng.random() < 0.4:
        return base, 4
    offset = rng.randrange(4)
    length = rng.randint(1, 3)
    return base + offset, min(length, 0x10000 - base - offset)


async def register_storm(tb: TB, rng: random.Random, count: int) -> list:
    """``count`` random register accesses, issued in groups of 1-4 at once so that
    the manager's queues hold several transfers and the pauses fall between and
    inside transactions; returns every response code."""
    pools = _address_pools(tb.params)
    axil = tb.axil
    resps = []

    async def one():
        addr, length = _random_access(rng, pools)
        if rng.random() < 0.55:
            data = bytes(rng.randrange(256) for _ in range(length))  # CTRL: snapshots too
            r = await axil.write(addr, data)
        else:
            r = await axil.read(addr, length)
        resps.append((addr, length, r.resp))

    done = 0
    while done < count:
        group = min(rng.randint(1, 4), count - done)
        await Combine(*(cocotb.start_soon(one()) for _ in range(group)))
        done += group
    return resps


async def strobe_storm(tb: TB, rng: random.Random, count: int) -> list:
    """``count`` writes with random ``WSTRB`` (any of the 16, 0 and non-contiguous
    ones included) at random aligned and unaligned addresses, one at a time."""
    writable, commits, readonly, unmapped = _address_pools(tb.params)
    resps = []
    for _ in range(count):
        base = rng.choice(rng.choices([writable, commits, readonly, unmapped], weights=[8, 1, 1, 1])[0])
        addr = base + rng.choice([0, 0, rng.randrange(4)])
        strb = rng.choice([0b0000, 0b0101, 0b1010, 0b1001, 0b0110, rng.randrange(16)])
        resps.append((addr, strb, await regs.write_strobed(tb.axil, addr, rng.randrange(1 << 32), strb)))
        if rng.random() < 0.3:
            await tb.axil.read(addr & ~3, 4)  # checked by the scoreboard
    return resps


async def byte_lanes(tb: TB) -> None:
    """Directed sub-word writes with literal expectations (spec §9): the word a byte
    address selects, the bytes its strobes select; also checked by the scoreboard."""
    axil, rate, prio = tb.axil, regs.tenant_reg(0, "RATE"), regs.tenant_reg(0, "PRIO_EN")
    await axil.write_dword(rate, 0)
    await axil.write_dword(prio, 0x0000_0002)
    await axil.write(rate + 1, b"\x12")          # AWADDR rate+1, WSTRB 0b0010
    await axil.write(rate + 2, b"\xAB\xCD")      # bytes 2-3: RATE is [15:0], nothing
    await axil.write(rate, b"\x34")              # byte 0 alone
    await axil.write(prio + 1, b"\x01")          # the enable byte alone
    await axil.write(regs.tenant_reg(0, "COMMIT") + 3, b"\x00")  # COMMIT, any strobes
    got = [await axil.read_dword(rate), await axil.read_dword(prio),
           int.from_bytes((await axil.read(rate + 1, 1)).data, "little"),
           int.from_bytes((await axil.read(rate + 2, 2)).data, "little")]
    assert got == [0x1234, 0x102, 0x12, 0], \
        f"sub-word writes: RATE, PRIO_EN, RATE byte 1, RATE bytes 2-3 read {[hex(v) for v in got]}"


@cocotb.test()
@cocotb.parametrize(pattern=list(STRESS))
async def axil_stress(dut, pattern):
    """Random register traffic (words and 1-3 byte spans at every offset, to writable,
    read-only, COMMIT and unmapped addresses, several transfers queued at once)
    with channel traffic, under one pause pattern on all five channels (``mixed``:
    one per channel); then writes with any WSTRB (0 and non-contiguous included),
    the directed sub-word writes, a read of every
    register, and the usual end checks. Every response must be OKAY, and the
    pattern must show on the bus (:meth:`AxiStress.check`)."""
    p = _params()
    seed = seed_from_env() ^ zlib.crc32(pattern.encode())
    rng = random.Random(seed)
    tb = TB(dut, p, seed=seed, bytes_per_cycle=64, idle=0.3, backpressure=0.2, credit_return=0.3)
    await tb.reset()
    patterns = ({ch: rng.choice(_ACTIVE) for ch in AXIL_CHANNELS} if pattern == "mixed"
                else pattern)
    stress = AxiStress(tb.axil, tb.monitor.axi, random.Random(rng.random()), patterns)
    tb.log.info("AXI pause patterns %s, seed %d", stress.patterns, seed)
    tb.on_cycle = lambda _tb: stress.sample()
    await tb.program(random_config(p, rng))
    random_traffic(tb, rng, count=300, start=tb.cycle, span=1500)
    # A lost response hangs the manager: fail within a few times the storm's length.
    resps = await tb.run_task(register_storm(tb, rng, 160), limit=20_000)
    strobed = await tb.run_task(strobe_storm(tb, rng, 40), limit=20_000)
    resps += [(addr, 4, resp) for addr, _, resp in strobed]
    await tb.run_task(byte_lanes(tb))
    # Every register of the map and a few unmapped words, read under the same patterns.
    addrs = [a for a, *_ in REGMAP.registers(p)] + [0x0020, 0x0FFC, 0xFFFC]
    rng.shuffle(addrs)

    async def read_one(a):
        r = await tb.axil.read(a, 4)
        resps.append((a, 4, r.resp))

    async def read_map_all():
        for k in range(0, len(addrs), 4):
            await Combine(*(cocotb.start_soon(read_one(a)) for a in addrs[k:k + 4]))

    await tb.run_task(read_map_all())
    bad = [(hex(a), n, r) for a, n, r in resps if r != AxiResp.OKAY]
    assert not bad, f"responses other than OKAY (spec §9): {bad[:8]} (seed {seed})"
    # A drainable configuration (the storm wrote random words everywhere) and no
    # credit limits, then drain and the end checks, still under the patterns.
    await tb.run_task(tb.axil.write_dword(regs.CREDITS, 0))
    await tb.program(random_config(p, rng))
    await tb.end_checks()
    stress.check(min_transactions=100)
    tb.log.info("AXI stress %s: %s, %d accesses, %d comparisons", stress.patterns, stress.counts,
                len(resps), tb.scoreboard.compared)
