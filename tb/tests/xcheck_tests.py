"""cocotb side of ``tests/test_monitor_x.py``: an X or Z bit on a compared signal
is a mismatch on a 4-state simulator, not a 0 (issue #16).

The top level's request inputs are undriven until the testbench assigns them,
so Icarus holds them at Z/X: the monitor's reader of a 1-bit and of a 31-bit
or narrower signal must both raise ``XValue`` then, and read the driven value
afterwards.
"""

from __future__ import annotations

import cocotb
from cocotb.triggers import Timer

from kvfabric.tb.monitor import XValue, reader, two_state_simulator


@cocotb.test()
async def undriven_inputs_are_mismatches(dut):
    assert not two_state_simulator(), "run this on a 4-state simulator"
    valid = dut.req__0__valid
    ready = dut.grant__0__ready
    await Timer(1, "ns")
    for handle in (valid, ready):
        read = reader(handle)
        try:
            value = read()
        except XValue as e:
            dut._log.info("X/Z detected as it must be: %s", e)
        else:
            raise AssertionError(f"{handle._path} undriven read as {value}, not as X/Z")
    valid.value = 1
    ready.value = 0
    await Timer(1, "ns")
    assert reader(valid)() == 1 and reader(ready)() == 0
