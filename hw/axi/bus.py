"""The AXI4 signature of kvfabric's tenant (subordinate) and memory (manager) ports.

Members are named as in the AMBA AXI4 specification, in lower case, so that
the generated Verilog's ports read ``s_axi__<t>__awaddr`` and
``m_axi__<c>__rdata`` and a cocotbext-axi ``AxiBus.from_prefix(dut,
"s_axi__0_")`` finds them. The signature is the manager's view: ``Out`` is
driven by the manager. AxLOCK, AxCACHE and AxPROT are carried for the tenant
ports' sake (spec §14.6 says what is done with them); AxREGION and the USER
signals are not part of it.
"""

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AXI4Signature"]


class AXI4Signature(wiring.Signature):
    """AXI4 (AW, W, B, AR, R) with the given widths, manager view.

    Parameters
    ----------
    addr_width : int
        Byte address width.
    data_width : int
        Data width in bits (``wstrb`` has ``data_width / 8`` bits).
    id_width : int
        Width of ``awid``, ``bid``, ``arid`` and ``rid``.
    """

    def __init__(self, *, addr_width, data_width, id_width):
        for name, value in (("Address width", addr_width), ("Data width", data_width), ("ID width", id_width)):
            if not isinstance(value, int) or value <= 0:
                raise TypeError(f"{name} must be a positive integer, not {value!r}")
        self._addr_width, self._data_width, self._id_width = addr_width, data_width, id_width
        address = {
            "valid": Out(1), "ready": In(1), "id": Out(id_width), "addr": Out(addr_width),
            "len": Out(8), "size": Out(3), "burst": Out(2), "lock": Out(1), "cache": Out(4),
            "prot": Out(3), "qos": Out(4),
        }
        members = {f"aw{k}": v for k, v in address.items()}
        members.update({
            "wvalid": Out(1), "wready": In(1), "wdata": Out(data_width), "wstrb": Out(data_width // 8),
            "wlast": Out(1),
            "bvalid": In(1), "bready": Out(1), "bid": In(id_width), "bresp": In(2),
        })
        members.update({f"ar{k}": v for k, v in address.items()})
        members.update({
            "rvalid": In(1), "rready": Out(1), "rid": In(id_width), "rdata": In(data_width),
            "rresp": In(2), "rlast": In(1),
        })
        super().__init__(members)

    @property
    def addr_width(self):
        return self._addr_width

    @property
    def data_width(self):
        return self._data_width

    @property
    def id_width(self):
        return self._id_width

    def __eq__(self, other):
        return (isinstance(other, AXI4Signature) and self._addr_width == other._addr_width
                and self._data_width == other._data_width and self._id_width == other._id_width)

    def __hash__(self):
        return hash((type(self), self._addr_width, self._data_width, self._id_width))

    def __repr__(self):
        return (f"AXI4Signature(addr_width={self._addr_width}, data_width={self._data_width}, "
                f"id_width={self._id_width})")
