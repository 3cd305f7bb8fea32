"""Backlogged tenants on the golden model's fabric (spec §13's oracles)."""

from kvfabric.model.channel import Request
from kvfabric.model.fabric import FabricModel
from kvfabric.model.replay import MemorySide


def backlogged(params, config, channels_of, cycles, *, size=256, bytes_per_cycle=64):
    """Every tenant keeps its queues full on the channels ``channels_of(t)[i]``
    says (a dict tenant -> channels; the request port offered round robin to
    those with room), against a memory side of ``bytes_per_cycle`` per
    channel (spec §8); returns the bytes transferred per cycle and tenant,
    and the fabric."""
    fab = FabricModel(params, config)
    mem = MemorySide(params.channels, bytes_per_cycle)
    turn = [0] * params.channels
    served = []
    for t in range(cycles):
        placement = channels_of(t)
        reqs = []
        for c, ch in enumerate(fab.channels):
            full = ch.queue_full()
            mine = [i for i in range(params.tenants) if c in placement.get(i, ())]
            pick = None
            for k in range(len(mine)):
                i = mine[(turn[c] + k) % len(mine)]
                if not full[i]:
                    pick, turn[c] = i, (turn[c] + k + 1) % len(mine)
                    break
            reqs.append(Request(pick, size, t & 0xFFFF) if pick is not None else None)
        row = [0] * params.tenants
        for c, r in enumerate(fab.step(reqs, mem.ready(t))):
            if r.transferred is not None:
                mem.transfer(c, t, r.transferred.bytes)
                row[r.transferred.tenant] += r.transferred.bytes
        served.append(row)
    return served, fab
