"""Register map (spec §9) and configuration / telemetry helpers on cocotbext-axi's
``AxiLiteMaster``. What a register write does and what a read returns is the
golden model's register file (:class:`kvfabric.model.regfile.RegisterFile`),
which the scoreboards, the Amaranth tests (tests/support/) and this module share.

:class:`AxiStress` puts seeded idle cycles (AW, W, AR) and backpressure (B, R) on
every channel of that master, through cocotbext-axi's pause hooks, and counts and
checks on the bus what they did (spec §9's register behaviour must hold under all).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping

from kvfabric.model.regfile import (COMMIT, DROPPED, FABRIC, TEL, TENANT, config_writes, credits_values,
                                    tenant_words)
from kvfabric.model.registers import FabricConfig, TenantConfig
from kvfabric.regmap import REGMAP, params_word

__all__ = [
    "FABRIC", "TENANT", "TEL", "DROPPED",
    "ID", "VERSION", "PARAMS", "CTRL", "EPOCH_CYCLES", "STARVE_LIMIT", "EPOCH_COUNT", "CREDITS",
    "COORD", "COORD_EPOCH",
    "credits_word",
    "ID_VALUE", "VERSION_VALUE", "MARK_ADDR", "MARK_DATA", "MARK_GAP",
    "tenant_reg", "tel_reg", "dropped_reg", "params_word",
    "program", "commit_tenant", "take_snapshot",
    "read_telemetry",
    "write_strobed", "AXIL_CHANNELS", "PAUSE_PATTERNS", "pause_pattern", "AxiStress",
]

ID, VERSION, PARAMS, CTRL, EPOCH_CYCLES, STARVE_LIMIT, EPOCH_COUNT, CREDITS, COORD, COORD_EPOCH = (
    FABRIC.address(name) for name in ("ID", "VERSION", "PARAMS", "CTRL", "EPOCH_CYCLES",
                                      "STARVE_LIMIT", "EPOCH_COUNT", "CREDITS", "COORD", "COORD_EPOCH"))
ID_VALUE = FABRIC.register("ID").field("id").reset
VERSION_VALUE = FABRIC.register("VERSION").field("version").reset

#: Trace-start marker of the RTL replay engine (tb/tests/replay_tests.py): a write
#: of MARK_DATA to the unmapped MARK_ADDR (spec §9: ignored, OKAY response); the
#: trace's cycle 0 is MARK_GAP cycles after its write-response handshake.  The
#: VCD checker (tb/vcd_check.py) finds cycle 0 the same way.
MARK_ADDR = 0x0FFC
MARK_DATA = 0x54524143  # "TRAC"
MARK_GAP = 2
assert REGMAP.decode(MARK_ADDR) is None, "the trace marker must be an unmapped address"


def tenant_reg(i: int, name: str) -> int:
    """Address of tenant ``i``'s register ``name`` (``RATE`` .. ``COMMIT``)."""
    return TENANT.address(name, i)


def tel_reg(i: int, name: str) -> int:
    """Address of tenant ``i``'s snapshot register ``name`` (``BYTES_LO`` .. ``QUEUE_HWM``)."""
    return TEL.address(name, i)


def dropped_reg(c: int) -> int:
    return DROPPED.address("DROPPED", c)


def credits_word(credits, bulk_prio=0, arrival_prio=0) -> int:
    """The ``CREDITS`` word of the limits (urgent, guaranteed, burst) and the
    ``bulk_prio`` and ``arrival_prio`` masks, for a write of ``CREDITS`` alone
    (spec §6.2, §6.6, §9)."""
    return FABRIC.register("CREDITS").word(credits_values(credits, bulk_prio, arrival_prio))


# --- helpers on an AxiLiteMaster ------------------------------------------------------

async def commit_tenant(axil, i: int, t: TenantConfig) -> None:
    """Stage all of tenant i's registers, then COMMIT them at once."""
    for name, word in tenant_words(t).items():
        await axil.write_dword(tenant_reg(i, name), word)
    await axil.write_dword(tenant_reg(i, COMMIT.name), 1)


async def write_strobed(axil, addr: int, data: int, strb: int) -> int:
    """One write with any ``WSTRB`` (0 and non-contiguous ones such as ``0b0101``
    included), which ``AxiLiteMaster.write`` cannot express: it derives the strobes
    from the address and the length. Sends on the master's own AW and W channels (so
    their pause patterns apply) and takes the B response itself, so the master must
    have no write of its own in flight. Returns ``BRESP``."""
    from cocotbext.axi.axil_channels import AxiLiteAWTransaction, AxiLiteWTransaction
    wi = axil.write_if
    if not wi.idle():
        raise RuntimeError("write_strobed needs the master's write side idle")
    await wi.aw_channel.send(AxiLiteAWTransaction(awaddr=addr))
    await wi.w_channel.send(AxiLiteWTransaction(wdata=data, wstrb=strb))
    b = await wi.b_channel.recv()
    return int(b.bresp)


async def program(axil, config: FabricConfig) -> None:
    """Program all of ``config`` over AXI: the writes of :func:`config_writes`, in order."""
    for addr, data in config_writes(config):
        await axil.write_dword(addr, data)


async def take_snapshot(axil, config: FabricConfig) -> None:
    """``CTRL.snapshot``: snapshot now, ``CTRL``'s other fields rewritten with
    ``config``'s values (the configuration the fabric holds)."""
    ctrl = FABRIC.register("CTRL")
    await axil.write_dword(CTRL, ctrl.word({"fcfs_bypass": int(config.fcfs_bypass), "snapshot": 1,
                                            "bulk_run": config.bulk_run}))


async def read_telemetry(axil, params) -> dict:
    """All snapshot registers, as the model's ``Counters`` fields."""
    tenants = []
    for i in range(params.tenants):
        lo = await axil.read_dword(tel_reg(i, "BYTES_LO"))
        hi = await axil.read_dword(tel_reg(i, "BYTES_HI"))
        tenants.append({
            "bytes": lo | (hi & 0xFFFF) << 32,
            "bytes_hi_upper": hi >> 16,  # must read 0 (BYTES_HI is bits [47:32])
            "grants": await axil.read_dword(tel_reg(i, "GRANTS")),
            "burst_grants": await axil.read_dword(tel_reg(i, "BURST_GRANTS")),
            "slo_violations": await axil.read_dword(tel_reg(i, "SLO_VIOLATIONS")),
            "queue_hwm": await axil.read_dword(tel_reg(i, "QUEUE_HWM")),
        })
    dropped = [await axil.read_dword(dropped_reg(c)) for c in range(params.channels)]
    epoch_count = await axil.read_dword(EPOCH_COUNT)
    return {"tenants": tenants, "dropped": dropped, "epoch_count": epoch_count}


# --- idle insertion and backpressure on every AXI4-Lite channel ----------------------

#: The five channels, in AXI order: the manager drives AW, W and AR (a pause there is
#: an idle cycle, VALID low with a transfer waiting) and BREADY, RREADY (a pause there
#: is backpressure, READY low with a response waiting).
AXIL_CHANNELS = ("aw", "w", "b", "ar", "r")

#: Named pause patterns (:func:`pause_pattern`); ``none`` is the control.
PAUSE_PATTERNS = ("none", "random", "bursts", "periodic", "heavy")


def pause_pattern(name: str, rng: random.Random) -> Iterator[bool]:
    """An endless per-cycle pause pattern of one channel: True pauses that cycle.

    ``random``: each cycle with a probability drawn once in [0.2, 0.6];
    ``bursts``: runs of 1-6 free cycles and 1-12 paused ones, so a transfer can
    wait many cycles and its partner channel (AW for W, W for AW) runs ahead;
    ``periodic``: paused in all but one cycle of every 2-5 (a rhythm that can beat
    against the slave's own one-transaction-at-a-time rhythm), from a random
    phase and slipping by a cycle now and then, so that AW and W drawing the
    same period still come apart;
    ``heavy``: paused with probability 0.85; ``none``: never.
    Everything random comes from ``rng``, so a seed reproduces the pattern.
    """
    if name not in PAUSE_PATTERNS:
        raise ValueError(f"pause pattern must be one of {PAUSE_PATTERNS}, not {name!r}")

    def cycles():
        if name == "none":
            while True:
                yield False
        elif name == "random":
            p = rng.uniform(0.2, 0.6)
            while True:
                yield rng.random() < p
        elif name == "bursts":
            while True:
                yield from [False] * rng.randint(1, 6)
                yield from [True] * rng.randint(1, 12)
        elif name == "periodic":
            period = rng.randint(2, 5)
            yield from [True] * rng.randrange(period)  # a random phase
            while True:
                yield from [False] + [True] * (period - 1)
                if rng.random() < 0.1:
                    yield True  # a slip: two channels of one period never stay in step
        else:  # heavy
            while True:
                yield rng.random() < 0.85
    return cycles()


class AxiStress:
    """Idle cycles on the manager's AW, W and AR channels and backpressure (BREADY,
    RREADY low) on B and R, one seeded :func:`pause_pattern` per channel, through
    cocotbext-axi's pause hooks on ``axil`` (an ``AxiLiteMaster``); and counts, once
    per cycle from the bus (``ports``, a :class:`tb.monitor.AxiPorts`), what they did.

    :meth:`sample` also checks AXI's handshake rule on all five channels (AMBA AXI
    A3.2.1): once VALID is high it stays high, with the payload unchanged, until
    the handshake. A slave that drops a read or write response under backpressure
    fails in the cycle it does, instead of hanging the manager.

    Counters: ``<ch>_idle`` (AW, W, AR): cycles with VALID low and READY high while
    the manager had had that channel's transfer waiting since before the cycle's
    clock edge (so the source chose to pause); ``b_stall``/``r_stall``: cycles with
    VALID high and READY low; ``aw_first``/``w_first``/``aw_w_together``: writes by
    the order of their AW and W handshakes; ``writes``/``reads``: B and R handshakes.
    :meth:`check` fails unless every paused channel shows its counter above 0 (and
    the ``none`` control shows none), so a generator that never pauses fails.
    """

    def __init__(self, axil, ports, rng: random.Random, patterns: str | Mapping[str, str]):
        if isinstance(patterns, str):
            patterns = dict.fromkeys(AXIL_CHANNELS, patterns)
        self.patterns = dict(patterns)
        self.ports = ports
        self._sources = {"aw": axil.write_if.aw_channel, "w": axil.write_if.w_channel,
                         "ar": axil.read_if.ar_channel}
        channels = {**self._sources, "b": axil.write_if.b_channel, "r": axil.read_if.r_channel}
        for ch in AXIL_CHANNELS:
            channels[ch].set_pause_generator(pause_pattern(self.patterns[ch], random.Random(rng.random())))
        self._channels = channels
        self.counts = dict.fromkeys(("aw_idle", "w_idle", "ar_idle", "b_stall", "r_stall", "aw_first",
                                     "w_first", "aw_w_together", "writes", "reads"), 0)
        self._waiting = dict.fromkeys(self._sources, False)
        self._aw_at = self._w_at = None
        self._presented = dict.fromkeys(("AW", "W", "B", "AR", "R"))  # payload held from last cycle
        self._cycle = 0

    def stop(self) -> None:
        """Back to a manager that never pauses (the channels' generators removed)."""
        for channel in self._channels.values():
            channel.clear_pause_generator()

    def sample(self) -> None:
        """Count one cycle; call once per cycle with the signals settled (``ReadOnly``)."""
        a, n = self.ports, self.counts
        for name, valid, ready, payload in (
                ("AW", a.awvalid, a.awready, (a.awaddr,)), ("W", a.wvalid, a.wready, (a.wdata, a.wstrb)),
                ("B", a.bvalid, a.bready, (a.bresp,)), ("AR", a.arvalid, a.arready, (a.araddr,)),
                ("R", a.rvalid, a.rready, (a.rdata, a.rresp))):
            v = valid()
            now = tuple(r() for r in payload) if v else None
            held = self._presented[name]
            if held is not None and now != held:
                raise AssertionError(
                    f"AXI handshake rule broken on {name} in stress cycle {self._cycle}: presented "
                    f"{tuple(hex(x) for x in held)} without a handshake, now "
                    f"{'VALID low' if now is None else tuple(hex(x) for x in now)} (patterns {self.patterns})")
            self._presented[name] = now if v and not ready() else None
        for ch, source in self._sources.items():
            valid, ready = getattr(a, f"{ch}valid")(), getattr(a, f"{ch}ready")()
            waiting = not source.empty()
            if waiting and self._waiting[ch] and not valid and ready:
                n[f"{ch}_idle"] += 1
            self._waiting[ch] = waiting
        bvalid, bready, rvalid, rready = a.bvalid(), a.bready(), a.rvalid(), a.rready()
        n["b_stall"] += bvalid and not bready
        n["r_stall"] += rvalid and not rready
        n["writes"] += bvalid and bready
        n["reads"] += rvalid and rready
        if a.awvalid() and a.awready():
            self._aw_at = self._cycle
        if a.wvalid() and a.wready():
            self._w_at = self._cycle
        if self._aw_at is not None and self._w_at is not None:
            order = ("aw_first" if self._aw_at < self._w_at else
                     "w_first" if self._w_at < self._aw_at else "aw_w_together")
            n[order] += 1
            self._aw_at = self._w_at = None
        self._cycle += 1

    def check(self, *, min_transactions: int = 1) -> None:
        """Fail unless every channel's pattern showed on the bus (module docstring)."""
        n, pat = self.counts, self.patterns
        want = {"aw": "aw_idle", "w": "w_idle", "ar": "ar_idle", "b": "b_stall", "r": "r_stall"}
        problems = []
        if n["writes"] < min_transactions or n["reads"] < min_transactions:
            problems.append(f"fewer than {min_transactions} writes or reads completed")
        for ch, counter in want.items():
            paused = pat[ch] != "none"
            if paused and n[counter] == 0:
                problems.append(f"{ch.upper()} pattern {pat[ch]!r} never showed ({counter} = 0)")
            if not paused and n[counter] != 0:
                problems.append(f"{ch.upper()} never pauses, yet {counter} = {n[counter]}")
        if pat["aw"] != "none" and pat["w"] != "none" and not (n["aw_first"] and n["w_first"]):
            problems.append("AW and W never came in both orders on different cycles")
        if pat["aw"] == pat["w"] == "none" and (n["aw_first"] or n["w_first"]):
            problems.append("AW and W came apart although neither pauses")
        if problems:
            raise AssertionError(f"AXI stress {pat}: {'; '.join(problems)}; counts {n}")
