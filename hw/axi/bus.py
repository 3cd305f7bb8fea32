"""The AXI4 signature of kvfabric's tenant (subordinate) and memory (manager) ports.

Members are named as in the AMBA AXI4 specification, in lower case, so that
the generated Verilog's ports read ``s_axi__<t>__awaddr`` and
``m_axi__<c>__rdata`` and a cocotbext-axi ``AxiBus.from_prefix(dut,
"s_axi__0_")`` finds them. The signature is the manager's view: ``Out`` is
driven by the manager. AxLOCK, AxCACHE and AxPROT are carried for the tenant
ports' sake (spec §14.6 says what is done with them); AxREGION and the USER
signals are not part of it, except AxUSER on the shared tenant port.
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
    user_width : int
        Width of ``awuser`` and ``aruser``; 0 (the default) leaves them out.
        The shared tenant port carries the tenant id there (spec §14.9).
    """

    def __init__(self, *, addr_width, data_width, id_width, user_width=0):
        for name, value in (("Address width", addr_width), ("Data width", data_width), ("ID width", id_width)):
            if not isinstance(value, int) or value <= 0:
                raise TypeError(f"{name} must be a positive integer, not {value!r}")
        if not isinstance(user_width, int) or user_width < 0:
            raise TypeError(f"User width must be a non-negative integer, not {user_width!r}")
        self._addr_width, self._data_width, self._id_width = addr_width, data_width, id_width
        self._user_width = user_width
        address = {
            "valid": Out(1), "ready": In(1), "id": Out(id_width), "addr": Out(addr_width),
            "len": Out(8), "size": Out(3), "burst": Out(2), "lock": Out(1), "cache": Out(4),
            "prot": Out(3), "qos": Out(4), **({"user": Out(user_width)} if user_width else {}),
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

    @property
    def user_width(self):
        return self._user_width

    def _key(self):
        return (self._addr_width, self._data_width, self._id_width, self._user_width)

    def __eq__(self, other):
        return isinstance(other, AXI4Signature) and self._key() == other._key()

    def __hash__(self):
        return hash((type(self), *self._key()))

    def __repr__(self):
        return (f"AXI4Signature(addr_width={self._addr_width}, data_width={self._data_width}, "
                f"id_width={self._id_width}, user_width={self._user_width})")
