"""Lockstep scoreboard: the golden model stepped with exactly the DUT's inputs.

Every cycle t, with the :class:`tb.monitor.Sample` of cycle t (settled values
just before the rising edge that ends it):

1. compare the DUT's outputs with the model's registers of cycle t: per
   channel ``queue_full``, ``req.ready`` (when ``req.valid``), ``grant.valid``
   and the grant payload (tenant, bytes, id, kind), the ``now`` timestamp; and
   the internal state of spec §5/§6.4/§6.6 read hierarchically: every tenant's
   ``dyn_level``, ``dyn_peak``, ``dyn_tag`` (start tag = previous finish tag)
   and occupancy, the channel's ``vt``, ``served``, ``vmin``,
   ``vmin_valid``, ``dropped`` and ``inflight[k]``; after the model's step,
   the coordinator's rate and peak rate of every tenant on the channel
   against the rates the model's channel used in the cycle (spec §13);
2. step the model with the sampled inputs (request valid/payload, grant
   ready, ``credit_return``) and the AXI writes whose handshake completed in cycle t-1, which
   take effect in t and change the active configuration from t+1 (spec §9)
   — the model never sees the test's intentions, only what crossed the
   DUT's ports;
3. account for requests: an accepted valid request must be granted exactly
   once, with its tenant and bytes.

AXI reads are checked too (spec §9): the data of a read must equal the
model's value of that register in the cycle after the address handshake, and
arrive no earlier than three cycles after it (RVALID rises exactly then; the
Amaranth tests pin that, tests/support/axil_manager.py).

The first mismatch raises :class:`Mismatch` naming the cycle, channel,
field, expected and actual values and the seed.
"""

from __future__ import annotations

import logging

from kvfabric.model.channel import Request
from kvfabric.model.fabric import FabricModel

from kvfabric import spec

from kvfabric.model.regfile import RegisterFile
from .monitor import Sample

__all__ = ["Mismatch", "Scoreboard"]

#: The spec's kinds (every 2-bit value is one since kind 3 = urgent).
KIND_NAMES = spec.KIND_NAMES


class Mismatch(AssertionError):
    pass


class Scoreboard:
    def __init__(self, params, seed, *, channels=None, check_internal: bool = True,
                 log: logging.Logger | None = None):
        self.params = params
        self.seed = seed
        self.ports = channels  # list[ChannelPorts], for internal state
        self.check_internal = check_internal and channels is not None and channels[0].internal
        self.log = log or logging.getLogger("kvfabric.scoreboard")
        self.id_mask = (1 << params.id_width) - 1
        self.compared = 0  # field comparisons made
        self.reset()
        # Accounting survives resets: what a reset flushed is recorded, not forgotten.
        self.accepted = 0
        self.granted = 0
        self.dropped = 0
        self.flushed: list = []
        self.grant_log: list = []  # (cycle, channel, tenant, bytes, id, kind)

    def reset(self) -> None:
        """The DUT was reset: the model restarts from the reset state."""
        self.model = FabricModel(self.params)
        self.mirror = RegisterFile(self.params)
        self.cycle = 0
        self.outstanding: list[dict] = [dict() for _ in range(self.params.channels)]
        self._aw = None
        self._w = None
        self._write_in_decode = None  # handshake completed last cycle (spec §9)
        self._reads: list[list] = []  # [addr, AR cycle, expected value or None]

    def flush(self) -> list:
        """Requests lost to a reset (accepted but not yet granted)."""
        lost = [r for ch in self.outstanding for r in ch.values()]
        self.flushed.extend(lost)
        return lost

    # ---- reporting ------------------------------------------------------------------
    def fail(self, field: str, expected, actual, channel=None) -> None:
        where = f"channel {channel} " if channel is not None else ""
        msg = (f"MISMATCH cycle {self.cycle} {where}field {field}: expected {expected} "
               f"actual {actual} (seed {self.seed})")
        self.log.error(msg)
        if channel is not None:
            self.log.error("model state of channel %d at cycle %d: %s", channel, self.cycle,
                           self.describe(channel))
        raise Mismatch(msg)

    def describe(self, c: int) -> str:
        """The golden model's registers of channel ``c`` (for a mismatch report)."""
        ch = self.model.channels[c]
        heads = {i: (q[0].bytes, q[0].cost, q[0].ts, len(q)) for i, q in enumerate(ch.fifo) if q}
        return (f"V={ch.vt} served={ch.served} vmin={ch.vmin}/{ch.vmin_valid} tags={ch.tag} "
                f"levels={ch.level} peaks={ch.peak} inflight={ch.inflight} heads(bytes,cost,ts,len)={heads} "
                f"grant={ch.grant} config={self.model.config}")

    def _eq(self, field, expected, actual, channel=None):
        self.compared += 1
        if expected != actual:
            self.fail(field, expected, actual, channel)

    # ---- register reads --------------------------------------------------------------
    def expected_read(self, addr: int) -> int:
        """What a read of ``addr`` returns now (spec §9): the mirror's configuration, the
        model's telemetry snapshots, 0 for unmapped addresses."""
        return self.mirror.read(addr, self.model.telemetry)

    # ---- one cycle -----------------------------------------------------------------------
    def step(self, s: Sample) -> list:
        """Compare cycle ``self.cycle`` and step the model; returns the cycle's transfers
        as ``(channel, bytes)`` for the memory model."""
        m = self.model
        p = self.params
        n = p.tenants
        t = self.cycle
        if s.now is not None:
            self._eq("now", m.now, s.now)
        reqs = []
        readies = []
        returns = []
        transfers = []
        for c, ch in enumerate(m.channels):
            full = ch.queue_full()
            g = ch.grant
            exp = [sum(1 << i for i in range(n) if full[i]), int(g is not None)]
            act = [s.queue_full[c], s.grant_valid[c]]
            if g is not None:
                exp += [g.tenant, g.bytes, g.id, g.kind]
                act += s.grant[c]
            req = None
            if s.req_valid[c]:
                tenant, nbytes, rid = s.req[c]
                req = Request(tenant, nbytes, rid)
                exp.append(int(ch.req_ready(tenant, nbytes)))
                act.append(s.req_ready[c])
            self.compared += len(exp)
            if exp != act:
                names = ["queue_full", "grant.valid"]
                if g is not None:
                    names += ["grant.tenant", "grant.bytes", "grant.id", "grant.kind"]
                names.append("req.ready")
                k = next(k for k in range(len(exp)) if exp[k] != act[k])
                e, a = exp[k], act[k]
                if names[k] == "grant.kind":
                    e, a = KIND_NAMES[e], KIND_NAMES[a]
                self.fail(names[k], e, a, c)
            reqs.append(req)
            readies.append(bool(s.grant_ready[c]))
            bits = s.credit_return[c] if s.credit_return else 0
            returns.append((bits & 1, bits >> 1 & 1, bits >> 2 & 1))
            if self.check_internal:
                self._check_state(c, ch, req)
        # Reads (spec §9): the data is the register's value in the cycle after the AR
        # handshake, returned three cycles after it.
        for rd in self._reads:
            if rd[2] is None and t == rd[1] + 1:
                rd[2] = self.expected_read(rd[0])
        if s.r is not None:
            if not self._reads:
                self.fail("axil.rvalid", "no read outstanding", f"read data {s.r:#x}")
            addr, ar_cycle, expected = self._reads.pop(0)
            self.compared += 1
            if t < ar_cycle + 3:
                self.fail(f"axil read @{addr:#06x} latency", f">= 3 cycles after AR (cycle {ar_cycle})",
                          f"data handshake in cycle {t}")
            if s.r != expected:
                self.fail(f"axil read @{addr:#06x}", f"{expected:#x}", f"{s.r:#x}")
        if s.ar is not None:
            self._reads.append([s.ar, t, None])
        # Register writes: the write happens in the cycle of the later of the AW
        # and W handshakes (AXI lets them come in either order).
        if s.aw is not None:
            self._aw = s.aw
        if s.w is not None:
            self._w = s.w
        # It takes effect in the next cycle (spec §9: the register file's
        # decode stage).
        write = self._write_in_decode
        self._write_in_decode = None
        if self._aw is not None and self._w is not None:
            self._write_in_decode = (self._aw[0], self._w[0], self._w[1])
            self._aw = self._w = None
        snap = False
        if write is not None:
            snap = self.mirror.write(*write)
        results = m.step(reqs, readies, returns, snapshot_request=snap)
        if self.check_internal:
            # The rates each channel used in this cycle: the model applies a
            # coordinator result at the start of the cycle's step.
            for c, ch in enumerate(m.channels):
                self._check_rates(c, ch)

        for c, res in enumerate(results):
            if res.accepted:
                tenant, nbytes, rid = s.req[c]
                if res.dropped:
                    self.dropped += 1
                else:
                    if rid in self.outstanding[c]:
                        self.fail("req.id", "an id not in flight", f"id {rid} already in flight", c)
                    self.outstanding[c][rid] = (t, c, tenant, nbytes, rid)
                    self.accepted += 1
            g = res.transferred
            if g is not None:
                req = self.outstanding[c].pop(g.id, None)
                if req is None:
                    self.fail("grant", "a grant of an accepted request",
                              f"id {g.id} granted but not in flight (granted twice?)", c)
                if (req[2], req[3]) != (g.tenant, g.bytes):
                    self.fail("grant", f"tenant {req[2]} bytes {req[3]} (request id {g.id})",
                              f"tenant {g.tenant} bytes {g.bytes}", c)
                self.granted += 1
                self.grant_log.append((t, c, g.tenant, g.bytes, g.id, g.kind))
                transfers.append((c, g.bytes))
        if write is not None and (self.mirror.changed or self.mirror.committed):
            # A COMMIT that rewrote the same values still discards the
            # coordinator's pending result for its tenant (spec §13).
            m.set_config(self.mirror.config, committed=self.mirror.committed)
        self.cycle += 1
        return transfers

    def _check_state(self, c, ch, req) -> None:
        # One list comparison per channel; names only on a mismatch (this runs
        # every cycle for every channel, so it must be cheap).
        pt = self.ports[c]
        actual = [r() for r in pt.r_state]
        exp_drop = int(req is not None and ch.is_invalid(req.tenant, req.bytes))
        expected = [*ch.level, *ch.peak, *ch.tag, *ch.occupancy(),
                    ch.vt, ch.served, ch.vmin, ch.vmin_valid, exp_drop, *ch.inflight]
        self.compared += len(expected)
        if actual != expected:
            k = next(k for k in range(len(expected)) if actual[k] != expected[k])
            self.fail(pt.state_names[k], expected[k], actual[k], c)

    def _check_rates(self, c, ch) -> None:
        """The coordinator's rate and peak rate registers of channel ``c`` (spec §13)."""
        pt = self.ports[c]
        actual = [r() for r in pt.r_rates]
        expected = [*(t.rate for t in ch.config.tenants), *(t.peak_rate for t in ch.config.tenants)]
        self.compared += len(expected)
        if actual != expected:
            k = next(k for k in range(len(expected)) if actual[k] != expected[k])
            self.fail(pt.rate_names[k], expected[k], actual[k], c)

    # ---- end of test ------------------------------------------------------------------------
    def in_flight(self) -> int:
        return sum(len(o) for o in self.outstanding)

    def check_drained(self) -> None:
        """Every accepted request granted exactly once; every queue of the model empty."""
        left = [r for ch in self.outstanding for r in ch.values()]
        if left:
            self.fail("drain", "every accepted request granted",
                      f"{len(left)} never granted, e.g. {left[:4]} (cycle, channel, tenant, bytes, id)")
        for c, ch in enumerate(self.model.channels):
            if not ch.quiescent():
                self.fail("drain", "model channel quiescent", "requests still queued", c)
        if self._reads:
            self.fail("drain", "no AXI read outstanding", f"{len(self._reads)} outstanding")

    def expected_counters(self):
        return self.model.telemetry.live
