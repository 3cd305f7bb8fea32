"""Generate the Verilog of the kvfabric top level (top module ``kvfabric``).

    python -m scripts.gen_verilog --out build/kvfabric.v [--tenants N --channels C ...]

The output depends only on the parameters: ``emit_src=False`` leaves out the
``src`` attributes (absolute paths of the Python sources), so two runs, or two
checkouts, produce byte-identical files.
"""

import argparse
import os
import sys

from amaranth.back import verilog

from hw.params import FabricParams
from hw.top import KvFabric


__all__ = ["TOP_NAME", "generate", "main"]

#: Name of the top module in the generated Verilog.
TOP_NAME = "kvfabric"

# argparse option -> FabricParams field; defaults come from FabricParams itself.
_OPTIONS = {
    "--tenants":           "tenants",
    "--channels":          "channels",
    "--queue-depth":       "queue_depth",
    "--max-request-bytes": "max_request_bytes",
    "--id-width":          "id_width",
    "--tag-bits":          "tag_bits",
}


def generate(params):
    """Verilog text of :class:`hw.top.KvFabric` for ``params``, top module ``kvfabric``."""
    return verilog.convert(KvFabric(params), name=TOP_NAME, emit_src=False)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m scripts.gen_verilog", description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="Verilog file to write")
    defaults = FabricParams()
    for option, field in _OPTIONS.items():
        parser.add_argument(option, type=int, default=getattr(defaults, field),
                            help=f"FabricParams.{field} (default %(default)s)")
    args = parser.parse_args(argv)
    try:
        params = FabricParams(**{field: getattr(args, field) for field in _OPTIONS.values()})
    except ValueError as error:
        parser.error(str(error))
    text = generate(params)
    directory = os.path.dirname(args.out)
    if directory:
        os.makedirs(directory, exist_ok=True)
    # Write through a temporary file so that a failed run never leaves half a netlist.
    tmp = args.out + ".tmp"
    with open(tmp, "w", newline="\n") as f:
        f.write(text)
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
