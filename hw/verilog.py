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

__all__ = ["TOP_NAME", "generate", "write_verilog"]

#: Name of the top module in the generated Verilog.
TOP_NAME = "kvfabric"

def generate(params: FabricParams) -> str:
    """Verilog text of :class:`kvfabric.hw.top.KvFabric` for ``params``, top module ``kvfabric``."""
    text = verilog.convert(KvFabric(params), name=TOP_NAME, emit_src=False)
    return text.decode() if isinstance(text, (bytes, bytearray)) else text


def write_verilog(params: FabricParams, path) -> str:
    """Write the Verilog of ``params`` to ``path`` atomically and return the path.

    Written through a temporary file so that a failed run never leaves half a
    netlist where a synthesis flow would pick it up.
    """
    path = os.fspath(path)
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", newline="\n") as f:
        f.write(generate(params))
    os.replace(tmp, path)
    return path
