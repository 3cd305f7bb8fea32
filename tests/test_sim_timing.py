"""Exact timing of the HBM3 channel model (issue #30).

``tests/test_sim_dram.py``'s rule checker proves that no command comes too
early.  Here every JEDEC constraint the channel models gets a scenario in
which it alone binds, and the command must issue exactly at its earliest
legal cycle: a channel that spaces anything more conservatively than the
standard (or applies one constraint where another belongs) fails.

Expected cycles are worked out in each test from the constraint's
definition and literal figures written below, never read from
``sim/hbm3.py``.  Every scenario runs twice: with the public HBM3 6400
figures (``HBM3``, which is also what the preset must equal,
``test_preset_equals_the_literal_hbm3_figures`` below) and with a made-up set in which every figure differs
from every other (``DISTINCT``), so a model that uses one figure in place of
another (tCCD_S for the burst, tRCD_RD for writes, ...) cannot pass by
coincidence.
"""

import pytest

from kvfabric.sim.controller import QosScheduler, ReservedEntries
from kvfabric.sim.dram import NEVER, Channel, Request
from kvfabric.sim.hbm3 import HBM3_GEOMETRY, Timing

G = HBM3_GEOMETRY

#: HBM3 6400 MT/s in clocks of tCK = 0.625 ns (docs/system-model.md lists each figure with its public source).
HBM3 = dict(tck_ps=625, burst=2, CL=20, CWL=10, tRCD_RD=31, tRCD_WR=15, tRP=26, tRAS=45, tRC=72,
            tWR=33, tRTP=9, tCCD_S=2, tCCD_L=4, tCCD_R=3, tRRD_S=4, tRRD_L=5, tFAW=24, tWTR_S=7,
            tWTR_L=10, tRTW=20, tPPD=2, tREFI=6240, tREFIpb=195, tRFCpb=320)
#: Every figure distinct (and the relations each scenario needs kept), to catch swapped figures.
DISTINCT = dict(tck_ps=625, burst=3, CL=21, CWL=11, tRCD_RD=33, tRCD_WR=17, tRP=27, tRAS=47, tRC=80,
                tWR=37, tRTP=13, tCCD_S=4, tCCD_L=7, tCCD_R=6, tRRD_S=8, tRRD_L=10, tFAW=43, tWTR_S=9,
                tWTR_L=14, tRTW=23, tPPD=5, tREFI=6528, tREFIpb=204, tRFCpb=350)

SETS = {"HBM3": HBM3, "distinct": DISTINCT}


@pytest.fixture(params=sorted(SETS))
def L(request):
    """The literal figures of this run."""
    return SETS[request.param]


def _channel(L, **kw):
    kw.setdefault("refresh", False)
    return Channel(timing=Timing(**L), n_tenants=1, log_commands=True, **kw)


def _bank(pc=0, sid=0, bg=0, bank=0):
    return G.bank_id(pc, sid, bg, bank)


class Script:
    """Requests enqueued at given cycles; the channel driven as the system loop drives it."""

    def __init__(self, ch):
        self.ch = ch
        self.events = []   # (cycle, request)
        self.seq = 0

    def add(self, cycle, bank, row, write=False):
        self.seq += 1
        r = Request(0, write, bank, row, cycle)
        r.seq = r.rank = self.seq
        self.events.append((cycle, r))
        return r

    def run(self, until=None):
        ch = self.ch
        events = sorted(self.events, key=lambda e: (e[0], e[1].seq))
        reqs = [r for _, r in events]
        t, i = 0, 0
        while True:
            while i < len(events) and events[i][0] <= t:
                ch.enqueue(events[i][1], t)
                i += 1
            if until is None and i == len(events) and all(r.done >= 0 for r in reqs):
                return ch.log
            if until is not None and t >= until:
                return ch.log
            horizon = events[i][0] if i < len(events) else (until if until is not None else NEVER)
            t = min(ch.tick(t, horizon), horizon)
            assert t < 1_000_000, "scenario never finished"


def _cycles(log, cmd, bank=None):
    return [c for c, k, b, *_ in log if k == cmd and (bank is None or b == bank)]


# -- activate to column ---------------------------------------------------------------
@pytest.mark.parametrize("write", [False, True], ids=["tRCD_RD", "tRCD_WR"])
def test_trcd_column_command_exactly_trcd_after_its_activate(L, write):
    """A read waits tRCD_RD after the ACT, a write tRCD_WR; data ends CL (CWL) + burst later."""
    s = Script(_channel(L))
    r = s.add(0, _bank(1, 1, 2, 3) if write else _bank(), 5, write=write)
    log = s.run()
    assert _cycles(log, "ACT") == [0]
    trcd, latency = (L["tRCD_WR"], L["CWL"]) if write else (L["tRCD_RD"], L["CL"])
    assert (r.issued, r.done) == (trcd, trcd + latency + L["burst"])


# -- bank: precharge and activate ---------------------------------------------------------
def test_trp_activate_exactly_trp_after_the_precharge(L):
    """The row was opened long ago (tRAS, tRC, tRTP all met): only tRP binds."""
    s = Script(_channel(L))
    s.add(0, _bank(), 1)
    s.add(1000, _bank(), 2)
    log = s.run()
    assert _cycles(log, "PRE") == [1000]
    assert _cycles(log, "ACT") == [0, 1000 + L["tRP"]]


def test_tras_precharge_exactly_tras_after_the_activate(L):
    """A conflict queued right behind the first read: its precharge waits for tRAS
    (the read's tRTP ends earlier)."""
    assert L["tRCD_RD"] + L["tRTP"] < L["tRAS"]
    s = Script(_channel(L))
    s.add(0, _bank(), 1)
    s.add(1, _bank(), 2)
    log = s.run()
    assert _cycles(log, "PRE") == [L["tRAS"]]


def test_trc_second_activate_of_a_bank_exactly_trc_after_the_first(L):
    """tRAS + tRP is one or more clocks short of tRC: the second ACT waits for tRC."""
    assert L["tRAS"] + L["tRP"] < L["tRC"]
    s = Script(_channel(L))
    s.add(0, _bank(), 1)
    s.add(1, _bank(), 2)
    log = s.run()
    assert _cycles(log, "ACT") == [0, L["tRC"]]


def test_trtp_precharge_exactly_trtp_after_a_read(L):
    s = Script(_channel(L))
    s.add(0, _bank(), 1)
    hit = s.add(1000, _bank(), 1)
    s.add(1001, _bank(), 2)
    log = s.run()
    assert hit.issued == 1000
    assert _cycles(log, "PRE") == [1000 + L["tRTP"]]


def test_twr_precharge_exactly_write_recovery_after_a_write(L):
    """Write recovery counts from the end of the write's data: CWL + burst + tWR."""
    s = Script(_channel(L))
    s.add(0, _bank(), 1)
    w = s.add(1000, _bank(), 1, write=True)
    s.add(1001, _bank(), 2)
    log = s.run()
    assert w.issued == 1000
    assert _cycles(log, "PRE") == [1000 + L["CWL"] + L["burst"] + L["tWR"]]


def test_tppd_second_precharge_of_a_pseudo_channel_exactly_tppd_later(L):
    a, b = _bank(0, 0, 0, 0), _bank(0, 0, 1, 0)
    s = Script(_channel(L))
    s.add(0, a, 1)
    s.add(0, b, 1)
    s.add(1000, a, 2)
    s.add(1000, b, 2)
    log = s.run()
    assert _cycles(log, "PRE") == [1000, 1000 + L["tPPD"]]


# -- activate spacing ---------------------------------------------------------------------
@pytest.mark.parametrize("same_group", [False, True], ids=["tRRD_S", "tRRD_L"])
def test_trrd_second_activate_exactly_trrd_after_the_first(L, same_group):
    """Two bank groups: tRRD_S apart; one bank group: tRRD_L (the longer)."""
    assert L["tRRD_L"] > L["tRRD_S"]
    s = Script(_channel(L))
    s.add(0, _bank(0, 0, 2, 0), 1)
    s.add(0, _bank(0, 0, 2, 3) if same_group else _bank(0, 0, 1, 0), 1)
    log = s.run()
    assert _cycles(log, "ACT") == [0, L["tRRD_L"] if same_group else L["tRRD_S"]]


def test_tfaw_fifth_activate_exactly_tfaw_after_the_first(L):
    """Five banks in five bank groups of one pseudo-channel: four ACTs tRRD_S
    apart, the fifth at tFAW after the first (tFAW > 4 tRRD_S)."""
    assert L["tFAW"] > 4 * L["tRRD_S"]
    banks = [_bank(0, sid, bg, 0) for sid in range(2) for bg in range(4)][:5]
    s = Script(_channel(L))
    for b in banks:
        s.add(0, b, 1)
    log = s.run()
    step = L["tRRD_S"]
    assert _cycles(log, "ACT") == [0, step, 2 * step, 3 * step, L["tFAW"]]


def test_activates_of_two_pseudo_channels_share_the_row_bus_for_one_and_a_half_clocks(L):
    """No activate spacing across pseudo-channels; the row bus alone spaces them:
    an ACT holds it for three half clocks, so the next starts in the second half
    of clock 1 and counts its timing from edge 2."""
    s = Script(_channel(L))
    a = s.add(0, _bank(0, 0, 0, 0), 1)
    b = s.add(0, _bank(1, 0, 0, 0), 1)
    log = s.run()
    assert [(c, k, half) for c, k, _, _, half in log if k == "ACT"] == [(0, "ACT", 0), (2, "ACT", 3)]
    assert (a.issued, b.issued) == (L["tRCD_RD"], 2 + L["tRCD_RD"])


# -- column to column ---------------------------------------------------------------------
def _open_then(L, first, second, first_write=False, second_write=False):
    """Open row 1 of banks ``first`` and ``second``, then at cycle 1000 queue an
    access to ``first`` and at 1001 one to ``second``; their issue cycles."""
    s = Script(_channel(L))
    s.add(0, first, 1)
    s.add(0, second, 1)
    x = s.add(1000, first, 1, write=first_write)
    y = s.add(1001, second, 1, write=second_write)
    s.run()
    assert x.issued == 1000
    return y.issued - x.issued


def test_tccd_s_reads_in_two_bank_groups_exactly_tccd_s_apart(L):
    assert L["tCCD_S"] >= 1
    assert _open_then(L, _bank(0, 0, 0, 0), _bank(0, 0, 1, 0)) == L["tCCD_S"]


def test_tccd_l_reads_in_one_bank_group_exactly_tccd_l_apart(L):
    assert _open_then(L, _bank(0, 0, 3, 0), _bank(0, 0, 3, 2)) == L["tCCD_L"]


def test_tccd_r_reads_in_two_stack_ids_exactly_tccd_r_apart(L):
    assert L["tCCD_R"] > L["tCCD_S"]
    assert _open_then(L, _bank(0, 0, 0, 0), _bank(0, 1, 1, 0)) == L["tCCD_R"]


def test_writes_follow_the_same_column_spacing(L):
    assert _open_then(L, _bank(1, 0, 0, 0), _bank(1, 0, 1, 0), True, True) == L["tCCD_S"]
    assert _open_then(L, _bank(1, 0, 0, 0), _bank(1, 0, 0, 1), True, True) == L["tCCD_L"]


def test_column_commands_of_two_pseudo_channels_one_clock_apart(L):
    """Both pseudo-channels share the column command bus: one command per clock."""
    assert _open_then(L, _bank(0, 0, 0, 0), _bank(1, 0, 0, 0)) == 1


# -- turnarounds --------------------------------------------------------------------------
def test_twtr_s_read_exactly_twtr_s_after_the_write_data_in_another_bank_group(L):
    gap = _open_then(L, _bank(0, 0, 0, 0), _bank(0, 0, 1, 0), first_write=True)
    assert gap == L["CWL"] + L["burst"] + L["tWTR_S"]


def test_twtr_l_read_exactly_twtr_l_after_the_write_data_in_its_bank_group(L):
    assert L["tWTR_L"] > L["tWTR_S"]
    gap = _open_then(L, _bank(0, 0, 2, 0), _bank(0, 0, 2, 1), first_write=True)
    assert gap == L["CWL"] + L["burst"] + L["tWTR_L"]


def test_trtw_write_exactly_trtw_after_a_read(L):
    assert _open_then(L, _bank(0, 0, 0, 0), _bank(0, 0, 1, 0), second_write=True) == L["tRTW"]
    assert _open_then(L, _bank(0, 0, 0, 0), _bank(0, 0, 0, 1), second_write=True) == L["tRTW"]


def test_turnarounds_do_not_cross_pseudo_channels(L):
    """tWTR and tRTW are per pseudo-channel (each has its own data bus)."""
    assert _open_then(L, _bank(0, 0, 0, 0), _bank(1, 0, 0, 0), first_write=True) == 1
    assert _open_then(L, _bank(0, 0, 0, 0), _bank(1, 0, 0, 0), second_write=True) == 1


# -- refresh ------------------------------------------------------------------------------
def test_trfcpb_activate_exactly_trfcpb_after_the_bank_refresh(L):
    """The first slot of pseudo-channel 0 is at tREFIpb; an idle channel refreshes
    its idle, closed bank 0 then, and a read to it activates tRFCpb later."""
    s = Script(_channel(L, refresh=True))
    s.add(L["tREFIpb"] + 1, _bank(0, 0, 0, 0), 4)
    log = s.run()
    assert _cycles(log, "REF", 0) == [L["tREFIpb"]]
    assert _cycles(log, "ACT") == [L["tREFIpb"] + L["tRFCpb"]]


def test_trefi_every_bank_refreshed_once_per_trefi_at_exact_slots(L):
    """An idle channel: REFpb at every tREFIpb slot of each pseudo-channel
    (pseudo-channel 1 staggered by half a slot, rounded down), 32 slots = one
    tREFI, each of a pseudo-channel's 32 banks exactly once per tREFI."""
    slot, refi = L["tREFIpb"], L["tREFI"]
    assert refi == G.banks_per_pc * slot
    horizon = 3 * refi + slot // 2 + 1
    log = Script(_channel(L, refresh=True)).run(until=horizon)
    refs = [(c, b) for c, k, b, *_ in log if k == "REF"]
    for pc, first in ((0, slot), (1, slot + slot // 2)):
        mine = [(c, b) for c, b in refs if G.split_bank_id(b)[0] == pc]
        assert [c for c, _ in mine] == list(range(first, horizon, slot))
        for r in range(3):
            window = [b for c, b in mine if first + r * refi <= c < first + (r + 1) * refi]
            assert sorted(window) == list(range(pc * 32, pc * 32 + 32)), f"round {r} of pc {pc}"


class _RefreshBank0First:
    """Refresh policy of these scenarios: bank 0 whenever it is left in the round."""

    def pick(self, ch, pc, todo):
        return 0 if 0 in todo else min(todo)

    def postpone(self, ch, pc, todo, now):
        return None


@pytest.mark.parametrize("opened", ["long before", "just before"])
def test_refresh_of_an_open_bank_precharges_then_refreshes_exactly_when_timing_allows(L, opened):
    """A refresh falls to bank 0 with a row open: its PRE comes at the slot, or
    tRAS after the ACT if that is later, and the REF tRP after the PRE, or tRC
    after the ACT if that is later."""
    slot = L["tREFIpb"]
    act = 0 if opened == "long before" else slot - 10
    s = Script(_channel(L, refresh=True, refresh_policy=_RefreshBank0First()))
    s.add(act, _bank(0, 0, 0, 0), 3)
    log = s.run(until=slot + 400)
    assert _cycles(log, "ACT")[0] == act
    pre = max(slot, act + L["tRAS"])
    assert _cycles(log, "PRE", 0) == [pre]
    assert _cycles(log, "REF", 0) == [max(pre + L["tRP"], act + L["tRC"])]


# -- the preset pinned --------------------------------------------------------------------
def test_preset_equals_the_literal_hbm3_figures():
    """Every field of sim/hbm3.py's preset against the literal figures above (a
    new field must be pinned here too), and the organisation."""
    from dataclasses import asdict, fields

    from kvfabric.sim.hbm3 import HBM3_6400

    pinned = dict(HBM3, act_bus_half=3, pre_bus_half=1, ref_bus_half=1)
    assert {f.name for f in fields(HBM3_6400)} == set(pinned)
    assert asdict(HBM3_6400) == pinned
    assert (G.pseudo_channels, G.stack_ids, G.bank_groups, G.banks_per_group) == (2, 2, 4, 4)
    assert (G.rows, G.row_bytes, G.access_bytes) == (8192, 1024, 32)


def test_refresh_figures_are_the_datasheet_times_rounded_up():
    """tREFI 3.9 us, tREFIpb = tREFI / 32 banks, tRFCpb 200 ns, at tCK = 0.625 ns."""
    assert 3900 * 1000 / 625 == HBM3["tREFI"]
    assert 3900 * 1000 / 32 / 625 <= HBM3["tREFIpb"] < 3900 * 1000 / 32 / 625 + 1
    assert 200 * 1000 / 625 == HBM3["tRFCpb"]


def _doc_preset_table():
    """``| figure | clocks | ...`` rows of docs/system-model.md's preset table."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "system-model.md").read_text()
    section = text.split("### The preset, figure by figure", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| (\d+) \|(.*)\|$", section, re.M)
    return {name: (int(value), rest) for name, value, rest in rows}


def test_docs_list_every_preset_figure_with_its_value_and_a_source():
    table = _doc_preset_table()
    pinned = dict(HBM3, act_bus_half=3, pre_bus_half=1, ref_bus_half=1)
    assert {k: v for k, (v, _) in table.items()} == pinned
    assert all(rest.strip().strip("|").strip() for _, rest in table.values()), "a figure without a source"
