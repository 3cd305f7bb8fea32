"""Payloads passed between the front end's modules (spec §14).

A sub-burst lives in a tenant's read or write *entry* from its address
handshake until the tenant has its data or response; the channels refer to it
by its entry index, which travels as the arbiter request's ``id`` (with the
read/write bit above it) and as the low bits of the manager-side AXI ID.
"""

from amaranth.lib import data

from kvfabric.axi import AxiParams

__all__ = ["request_layout", "descriptor_layout", "beat_layout", "fill_layout", "done_layout"]


def request_layout(axi: AxiParams, channels: int):
    """A tenant's read or write side asking a channel's arbiter for one entry."""
    return data.StructLayout({
        "channel": max(1, (channels - 1).bit_length()),
        "bytes": axi.max_sub_bytes.bit_length(),
        "entry": axi.entry_bits,
    })


def descriptor_layout(axi: AxiParams):
    """What a channel needs of a granted entry to issue its burst."""
    return data.StructLayout({"addr": axi.addr_width, "len": 8, "size": 3})


def beat_layout(axi: AxiParams):
    """One write beat as the write buffer holds it."""
    return data.StructLayout({"data": axi.data_width, "strb": axi.data_bytes})


def fill_layout(axi: AxiParams):
    """One read beat from a channel into a tenant's reorder buffer."""
    return data.StructLayout({"entry": axi.entry_bits, "data": axi.data_width, "resp": 2})


def done_layout(axi: AxiParams):
    """One write response from a channel for a tenant's entry (always accepted)."""
    return data.StructLayout({"valid": 1, "entry": axi.entry_bits, "resp": 2})
