"""Protocol checkers for the AXI4 top's ports (spec §14), sampled every cycle.

:class:`HandshakeChecker` holds every channel of a port to AXI's handshake
rules: once VALID is high it stays high, with the payload unchanged, until
READY. :class:`ManagerChecker` adds what a manager port of channel c must
show: INCR bursts that stay inside one interleave unit of channel c (and so
never cross 4 KiB), sizes the data bus carries, W beats in AW order with WLAST
on each burst's last beat, AxQOS of spec §6.6's mapping for the grant each
burst issues (:meth:`ManagerChecker.expect_qos`, in grant order), and R and B
only for IDs in flight, R with RLAST after exactly the burst's beats. :class:`TenantChecker` checks a tenant
port's R and B the same way against its own AR and AW. Each records
violations as text (``errors``) with the cycle, so a test can assert there
are none and print the first ones.
"""

from __future__ import annotations

from collections import defaultdict, deque

from cocotb.triggers import ReadOnly, RisingEdge

from kvfabric.axi import AxiParams, BURST_INCR, channel_of

__all__ = ["HandshakeChecker", "ManagerChecker", "TenantChecker", "PortSampler"]

ADDRESS_FIELDS = ("id", "addr", "len", "size", "burst")


def _int(handle):
    v = handle.value
    try:
        return int(v)
    except ValueError:
        return None   # X or Z


class PortSampler:
    """The signals of one AXI4 port (``<prefix>_awvalid`` ...) read as integers."""

    def __init__(self, dut, prefix):
        self._dut, self._prefix = dut, prefix
        self._cache = {}

    def __getitem__(self, name):
        h = self._cache.get(name)
        if h is None:
            h = self._cache[name] = getattr(self._dut, f"{self._prefix}_{name}")
        return _int(h)


class HandshakeChecker:
    """VALID stays high, payload stable, until READY, on every channel of a port."""

    CHANNELS = {
        "aw": ("awid", "awaddr", "awlen", "awsize", "awburst", "awqos"),
        "w": ("wdata", "wstrb", "wlast"),
        "b": ("bid", "bresp"),
        "ar": ("arid", "araddr", "arlen", "arsize", "arburst", "arqos"),
        "r": ("rid", "rdata", "rresp", "rlast"),
    }

    def __init__(self, name, sampler, errors):
        self.name, self.s, self.errors = name, sampler, errors
        self._held = {}

    def sample(self, cycle):
        """Check one cycle; returns the channels that transferred, with their payloads."""
        fired = {}
        for ch, fields in self.CHANNELS.items():
            valid, ready = self.s[f"{ch}valid"], self.s[f"{ch}ready"]
            payload = tuple(self.s[f] for f in fields)
            held = self._held.pop(ch, None)
            if held is not None:
                if valid != 1:
                    self.errors.append(f"cycle {cycle}: {self.name} {ch.upper()}VALID dropped before READY")
                elif payload != held:
                    self.errors.append(f"cycle {cycle}: {self.name} {ch.upper()} payload changed while waiting: "
                                       f"{held} -> {payload}")
            if valid == 1 and ready == 1:
                fired[ch] = dict(zip(fields, payload))
            elif valid == 1:
                self._held[ch] = payload
            elif valid is None:
                self.errors.append(f"cycle {cycle}: {self.name} {ch.upper()}VALID is X")
        return fired


class _BurstBook:
    """Bursts in flight per ID: their beat counts, for R and B checks."""

    def __init__(self, name, errors):
        self.name, self.errors = name, errors
        self.reads = defaultdict(deque)    # id -> beats of each outstanding read, in order
        self.writes = defaultdict(int)     # id -> outstanding writes whose data has been sent
        self.r_beat = defaultdict(int)

    def on_r(self, cycle, r):
        rid = r["rid"]
        if not self.reads[rid]:
            self.errors.append(f"cycle {cycle}: {self.name} R for ID {rid} with no read in flight")
            return
        self.r_beat[rid] += 1
        beats = self.reads[rid][0]
        last = self.r_beat[rid] == beats
        if r["rlast"] != int(last):
            self.errors.append(f"cycle {cycle}: {self.name} RLAST={r['rlast']} on beat {self.r_beat[rid]} "
                               f"of a {beats}-beat read, ID {rid}")
        if last or r["rlast"]:
            self.reads[rid].popleft()
            self.r_beat[rid] = 0

    def on_b(self, cycle, b):
        bid = b["bid"]
        if self.writes[bid] <= 0:
            self.errors.append(f"cycle {cycle}: {self.name} B for ID {bid} with no write awaiting it")
        else:
            self.writes[bid] -= 1


class _WriteOrder:
    """W beats matched with their AWs in AW order (AXI lets W run ahead of its AW:
    such beats wait here), WLAST checked on every beat; a burst's last beat makes
    its B due in ``book``."""

    def __init__(self, name, book, errors):
        self.name, self.book, self.errors = name, book, errors
        self.due = deque()         # (id, beats) of AWs whose W beats are due, in AW order
        self.early = deque()       # WLAST of W beats not yet matched with an AW
        self.beat = 0

    def on_aw(self, a):
        self.due.append((a["awid"], a["awlen"] + 1))

    def on_w(self, cycle, w):
        self.early.append(w["wlast"])

    def match(self, cycle):
        while self.due and self.early:
            wid, beats = self.due[0]
            wlast = self.early.popleft()
            self.beat += 1
            last = self.beat == beats
            if wlast != int(last):
                self.errors.append(f"cycle {cycle}: {self.name} WLAST={wlast} on beat {self.beat} of {beats}")
            if last:
                self.due.popleft()
                self.beat = 0
                self.book.writes[wid] += 1


class ManagerChecker:
    """Channel ``channel``'s manager port: handshakes, burst placement, W order, R and B."""

    def __init__(self, dut, channel, axi: AxiParams, channels: int, errors):
        self.c, self.axi, self.channels, self.errors = channel, axi, channels, errors
        name = f"m_axi[{channel}]"
        self.hs = HandshakeChecker(name, PortSampler(dut, f"m_axi__{channel}_"), errors)
        self.book = _BurstBook(name, errors)
        self.w_order = _WriteOrder(name, self.book, errors)
        self.aw_count = self.ar_count = 0
        self.name = name
        self._qos = {"ar": deque(), "aw": deque()}

    def expect_qos(self, direction, qos, grant):
        """The channel's next ``direction`` ("ar" or "aw") burst issues ``grant``
        (text for the message) and must carry AxQOS ``qos``: the issue stage
        issues each direction's grants in grant order (spec §14.5)."""
        self._qos[direction].append((qos, grant))

    def unissued(self):
        """The grants expected (:meth:`expect_qos`) and not yet issued."""
        return [grant for q in self._qos.values() for _, grant in q]

    def _check_qos(self, cycle, ch, a):
        expected = self._qos[ch]
        if not expected:
            self.errors.append(f"cycle {cycle}: {self.name} {ch.upper()} {a[f'{ch}addr']:#x} issued "
                               f"with no grant left to issue")
            return
        qos, grant = expected.popleft()
        if a[f"{ch}qos"] != qos:
            self.errors.append(f"cycle {cycle}: {self.name} {ch.upper()}QOS {a[f'{ch}qos']}, spec §6.6 "
                               f"gives {qos} for {grant}")

    def _placement(self, cycle, ch, a):
        addr, beats, size = a[f"{ch}addr"], a[f"{ch}len"] + 1, a[f"{ch}size"]
        if a[f"{ch}burst"] != BURST_INCR:
            self.errors.append(f"cycle {cycle}: {self.name} {ch.upper()} burst type {a[f'{ch}burst']}, not INCR")
        if size > self.axi.max_size:
            self.errors.append(f"cycle {cycle}: {self.name} {ch.upper()}SIZE {size} wider than the bus")
        first = addr - addr % (1 << size)
        end = first + (beats << size) - 1
        unit = self.axi.interleave_bytes
        if first // unit != end // unit or first // 4096 != end // 4096:
            self.errors.append(f"cycle {cycle}: {self.name} {ch.upper()} {addr:#x}+{beats}x{1 << size} B crosses "
                               f"an interleave or 4 KiB boundary")
        if channel_of(addr, self.axi, self.channels) != self.c:
            self.errors.append(f"cycle {cycle}: {self.name} {ch.upper()} {addr:#x} belongs to channel "
                               f"{channel_of(addr, self.axi, self.channels)}")

    def sample(self, cycle):
        fired = self.hs.sample(cycle)
        if "aw" in fired:
            a = fired["aw"]
            self._placement(cycle, "aw", a)
            self._check_qos(cycle, "aw", a)
            self.w_order.on_aw(a)
            self.aw_count += 1
        if "ar" in fired:
            a = fired["ar"]
            self._placement(cycle, "ar", a)
            self._check_qos(cycle, "ar", a)
            self.book.reads[a["arid"]].append(a["arlen"] + 1)
            self.ar_count += 1
        if "w" in fired:
            self.w_order.on_w(cycle, fired["w"])
        self.w_order.match(cycle)
        if "r" in fired:
            self.book.on_r(cycle, fired["r"])
        if "b" in fired:
            self.book.on_b(cycle, fired["b"])
        return fired


class TenantChecker:
    """Tenant ``tenant``'s subordinate port: handshakes, and R and B against its own AR and AW."""

    def __init__(self, dut, prefix, errors):
        """``prefix``: the port's signal prefix, ``s_axi__<t>_`` (``s_axi_`` for the shared port)."""
        name = prefix.rstrip("_").replace("__", "[") + ("]" if "__" in prefix else "")
        self.hs = HandshakeChecker(name, PortSampler(dut, prefix), errors)
        self.book = _BurstBook(name, errors)
        self.w_order = _WriteOrder(name, self.book, errors)

    def sample(self, cycle):
        fired = self.hs.sample(cycle)
        if "ar" in fired:
            self.book.reads[fired["ar"]["arid"]].append(fired["ar"]["arlen"] + 1)
        if "aw" in fired:
            self.w_order.on_aw(fired["aw"])
        if "w" in fired:
            self.w_order.on_w(cycle, fired["w"])
        self.w_order.match(cycle)
        if "r" in fired:
            self.book.on_r(cycle, fired["r"])
        if "b" in fired:
            self.book.on_b(cycle, fired["b"])
        return fired


async def watch(dut, checkers, stop, *, clock=None, reset=None):
    """Sample ``checkers`` at every rising edge of ``clock`` (default ``dut.clk``)
    while ``reset`` (default ``dut.rst``) is low, until ``stop()`` is true;
    returns the cycles watched."""
    clock = dut.clk if clock is None else clock
    reset = dut.rst if reset is None else reset
    cycle = 0
    while not stop():
        await RisingEdge(clock)
        await ReadOnly()
        if _int(reset) == 0:
            for ck in checkers:
                ck.sample(cycle)
        cycle += 1
    return cycle
