"""hw/axi/tenant_demux.py (spec §14.9) in Amaranth's simulator, its rules one by one:
routing by AxUSER, same ID held to one tenant at a time, W routed in AW order,
a merged R burst never interleaved nor changed while it waits, and the error
responder for a tenant id with no tenant. The tenant ports are driven by hand,
so each expected value comes from the rule, not from the design."""

from amaranth.sim import Simulator

from kvfabric.axi import AxiParams, RESP_SLVERR
from kvfabric.hw.axi.tenant_demux import TenantDemux

AXI = AxiParams(addr_width=16, data_width=32, id_width=4, interleave_bytes=64, frag_beats=4,
                read_entries=4, write_entries=4, shared_port=True)
TENANTS = 3


def run(testbench):
    dut = TenantDemux(AXI, TENANTS)
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def bench(ctx):
        await testbench(ctx, dut)
    sim.add_testbench(bench)
    sim.run()


def test_ar_goes_to_the_tenant_in_aruser_and_same_id_waits_for_the_other_tenant():
    async def tb(ctx, dut):
        s, t = dut.shared, dut.tenant
        for p in t:
            ctx.set(p.arready, 1)
        # ID 3 to tenant 1: only tenant 1 sees it.
        ctx.set(s.arvalid, 1)
        ctx.set(s.arid, 3)
        ctx.set(s.aruser, 1)
        ctx.set(s.araddr, 0x40)
        assert [ctx.get(p.arvalid) for p in t] == [0, 1, 0]
        assert ctx.get(t[1].araddr) == 0x40 and ctx.get(s.arready) == 1
        await ctx.tick()
        # ID 3 again, now to tenant 2, while tenant 1's read is unanswered: waits.
        ctx.set(s.aruser, 2)
        assert [ctx.get(p.arvalid) for p in t] == [0, 0, 0] and ctx.get(s.arready) == 0
        # Another ID to tenant 2 goes at once.
        ctx.set(s.arid, 4)
        assert ctx.get(t[2].arvalid) == 1 and ctx.get(s.arready) == 1
        await ctx.tick()
        # Tenant 1 answers ID 3 (one beat, RLAST): then ID 3 may go to tenant 2.
        ctx.set(s.arid, 3)
        assert ctx.get(s.arready) == 0
        ctx.set(s.rready, 1)
        ctx.set(t[1].rvalid, 1)
        ctx.set(t[1].rid, 3)
        ctx.set(t[1].rlast, 1)
        assert ctx.get(s.rvalid) == 1 and ctx.get(s.rid) == 3 and ctx.get(t[1].rready) == 1
        await ctx.tick()
        ctx.set(t[1].rvalid, 0)
        assert ctx.get(t[2].arvalid) == 1 and ctx.get(s.arready) == 1
        # Same ID to the same tenant never waits.
        await ctx.tick()
        assert ctx.get(t[2].arvalid) == 1 and ctx.get(s.arready) == 1
    run(tb)


def test_r_burst_is_not_interleaved_and_held_while_rready_is_low():
    async def tb(ctx, dut):
        s, t = dut.shared, dut.tenant
        # Tenant 2 offers one beat while RREADY is low ...
        ctx.set(s.rready, 0)
        ctx.set(t[2].rvalid, 1)
        ctx.set(t[2].rid, 2)
        ctx.set(t[2].rlast, 1)
        assert ctx.get(s.rvalid) == 1 and ctx.get(s.rid) == 2
        await ctx.tick()
        # ... then tenant 0, first in round-robin order from reset, offers a
        # two-beat burst: the waiting beat must not change (AXI handshake rule).
        ctx.set(t[0].rvalid, 1)
        ctx.set(t[0].rid, 1)
        ctx.set(t[0].rlast, 0)
        for _ in range(3):
            assert ctx.get(s.rvalid) == 1 and ctx.get(s.rid) == 2 and ctx.get(t[0].rready) == 0
            await ctx.tick()
        ctx.set(s.rready, 1)
        assert ctx.get(t[2].rready) == 1
        await ctx.tick()             # tenant 2's beat taken; it offers another burst at once
        assert ctx.get(s.rid) == 1   # tenant 0's turn
        await ctx.tick()             # tenant 0's first beat taken (not last)
        assert ctx.get(s.rid) == 1 and ctx.get(t[2].rready) == 0, \
            "tenant 2's beat came inside tenant 0's burst"
        ctx.set(t[0].rlast, 1)
        await ctx.tick()             # tenant 0's last beat taken
        ctx.set(t[0].rvalid, 0)
        assert ctx.get(s.rid) == 2 and ctx.get(t[2].rready) == 1
    run(tb)


def test_w_beats_follow_their_aw_in_order_by_awlen():
    async def tb(ctx, dut):
        s, t = dut.shared, dut.tenant
        for p in t:
            ctx.set(p.awready, 1)
            ctx.set(p.wready, 1)
        # W before any AW: not taken.
        ctx.set(s.wvalid, 1)
        assert ctx.get(s.wready) == 0 and not any(ctx.get(p.wvalid) for p in t)
        # AW of 2 beats to tenant 2, then AW of 1 beat to tenant 0, then the W beats.
        ctx.set(s.wvalid, 0)
        ctx.set(s.awvalid, 1)
        ctx.set(s.awuser, 2)
        ctx.set(s.awlen, 1)
        ctx.set(s.awid, 5)
        await ctx.tick()
        ctx.set(s.awuser, 0)
        ctx.set(s.awlen, 0)
        ctx.set(s.awid, 6)
        await ctx.tick()
        ctx.set(s.awvalid, 0)
        ctx.set(s.wvalid, 1)
        seen = []
        for _ in range(3):
            assert ctx.get(s.wready) == 1
            seen.append([ctx.get(p.wvalid) for p in t].index(1))
            await ctx.tick()
        assert seen == [2, 2, 0]
        assert ctx.get(s.wready) == 0
    run(tb)


def test_no_such_tenant_is_answered_slverr_and_counted():
    async def tb(ctx, dut):
        s, t = dut.shared, dut.tenant
        ctx.set(s.rready, 1)
        ctx.set(s.bready, 1)
        ctx.set(s.arvalid, 1)
        ctx.set(s.arid, 7)
        ctx.set(s.arlen, 2)            # three beats
        ctx.set(s.aruser, TENANTS)     # no such tenant
        assert not any(ctx.get(p.arvalid) for p in t)
        assert ctx.get(s.arready) == 1 and ctx.get(dut.bad_tenant) == 1
        await ctx.tick()
        ctx.set(s.arvalid, 0)
        beats = []
        for _ in range(6):
            if ctx.get(s.rvalid):
                beats.append((ctx.get(s.rid), ctx.get(s.rresp), ctx.get(s.rdata), ctx.get(s.rlast)))
            await ctx.tick()
        assert beats == [(7, RESP_SLVERR, 0, 0), (7, RESP_SLVERR, 0, 0), (7, RESP_SLVERR, 0, 1)]
        # A write to tenant id 15: its one W beat taken, one SLVERR B.
        ctx.set(s.awvalid, 1)
        ctx.set(s.awid, 9)
        ctx.set(s.awlen, 0)
        ctx.set(s.awuser, 15)
        assert ctx.get(s.awready) == 1 and ctx.get(dut.bad_tenant) == 1
        await ctx.tick()
        ctx.set(s.awvalid, 0)
        ctx.set(s.wvalid, 1)
        ctx.set(s.wlast, 1)
        assert ctx.get(s.wready) == 1 and not any(ctx.get(p.wvalid) for p in t)
        await ctx.tick()
        ctx.set(s.wvalid, 0)
        got = None
        for _ in range(4):
            if ctx.get(s.bvalid):
                got = (ctx.get(s.bid), ctx.get(s.bresp))
                break
            await ctx.tick()
        assert got == (9, RESP_SLVERR)
    run(tb)
