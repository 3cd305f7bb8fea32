"""Verilog of the kvfabric top level (top module ``kvfabric``).

The output depends only on the parameters: ``emit_src=False`` leaves out the
``src`` attributes (absolute paths of the Python sources), so two runs, or two
checkouts, produce byte-identical files. ``kvfabric verilog`` is the command
line for it.
"""

import os

from amaranth.back import verilog

from kvfabric.spec import FabricParams

from .top import KvFabric

__all__ = ["TOP_NAME", "AXI_TOP_NAME", "generate", "generate_axi", "write_verilog"]

#: Name of the top module in the generated Verilog.
TOP_NAME = "kvfabric"
#: Name of the AXI4 top (spec §14).
AXI_TOP_NAME = "kvfabric_axi"

def generate(params: FabricParams, fpga=False) -> str:
    """Verilog text of :class:`kvfabric.hw.top.KvFabric` for ``params``, top module ``kvfabric``
    (``fpga``: the channels' FPGA form, :class:`kvfabric.hw.top.KvFabric`'s option)."""
    text = verilog.convert(KvFabric(params, fpga=fpga), name=TOP_NAME, emit_src=False)
    return text.decode() if isinstance(text, (bytes, bytearray)) else text


def generate_axi(params: FabricParams, axi) -> str:
    """Verilog of :class:`kvfabric.hw.axi.top.KvFabricAxi` (spec §14), top module ``kvfabric_axi``."""
    from .axi.top import KvFabricAxi
    text = verilog.convert(KvFabricAxi(params, axi), name=AXI_TOP_NAME, emit_src=False)
    return text.decode() if isinstance(text, (bytes, bytearray)) else text


def write_verilog(params: FabricParams, path, axi=None, fpga=False) -> str:
    """Write the Verilog of ``params`` (with ``axi``: the AXI4 top; ``fpga``:
    the bare top's channels in their FPGA form) to ``path`` atomically and
    return the path.

    Written through a temporary file so that a failed run never leaves half a
    netlist where a synthesis flow would pick it up.
    """
    path = os.fspath(path)
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", newline="\n") as f:
        f.write(generate(params, fpga=fpga) if axi is None else generate_axi(params, axi))
    os.replace(tmp, path)
    return path
