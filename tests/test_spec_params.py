"""FabricParams: derived constants and one test per rejected parameter."""

import dataclasses

import pytest

from kvfabric.spec import FabricParams


def test_defaults_derived():
    p = FabricParams()
    assert (p.tenants, p.channels, p.queue_depth) == (8, 8, 4)
    assert (p.max_request_bytes, p.id_width, p.tag_bits) == (4096, 16, 20)
    assert p.frac == 3
    assert p.level_bits == 28
    assert p.peak_bits == 16
    assert p.pcap == 32768
    assert p.tag_shift == 5 and p.tag_unit == 32
    assert p.wfrac == 8
    assert p.ts_bits == 24
    assert p.lag_window == 131072
    assert p.bytes_bits == 13
    assert p.dyn_bits == 64


def test_derived_small():
    p = FabricParams(tenants=3, queue_depth=2, max_request_bytes=256, tag_bits=16)
    assert p.bytes_bits == 9
    assert p.peak_bits == 12
    assert p.pcap == 256 << 3
    assert p.lag_window == 1 << 13


def test_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        FabricParams().tenants = 4


@pytest.mark.parametrize("value", [0, 17, "8", 2.0, True])
def test_init_wrong_tenants(value):
    with pytest.raises(ValueError, match=rf"^tenants must be an integer in 1\.\.16, not {value!r}$"):
        FabricParams(tenants=value)


@pytest.mark.parametrize("value", [0, 17, None])
def test_init_wrong_channels(value):
    with pytest.raises(ValueError, match=rf"^channels must be an integer in 1\.\.16, not {value!r}$"):
        FabricParams(channels=value)


@pytest.mark.parametrize("value", [0, 3, 128, 6])
def test_init_wrong_queue_depth(value):
    with pytest.raises(ValueError,
                       match=rf"^queue_depth must be a power of two in 1\.\.64, not {value!r}$"):
        FabricParams(queue_depth=value)


@pytest.mark.parametrize("value", [16, 8192, 100])
def test_init_wrong_max_request_bytes(value):
    with pytest.raises(ValueError,
                       match=rf"^max_request_bytes must be a power of two in 32\.\.4096, not {value!r}$"):
        FabricParams(max_request_bytes=value)


@pytest.mark.parametrize("value", [0, 33])
def test_init_wrong_id_width(value):
    with pytest.raises(ValueError, match=rf"^id_width must be an integer in 1\.\.32, not {value!r}$"):
        FabricParams(id_width=value)


@pytest.mark.parametrize("value", [11, 33])
def test_init_wrong_tag_bits(value):
    with pytest.raises(ValueError, match=rf"^tag_bits must be an integer in 12\.\.32, not {value!r}$"):
        FabricParams(tag_bits=value)
