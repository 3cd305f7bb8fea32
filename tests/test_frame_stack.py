"""tests/support/frame_stack.py: the call runs on a thread of its own and
its result or exception reaches the caller unchanged."""

import threading

import pytest

from support.frame_stack import ENTRY_SLOTS, call_with_room


def test_result_comes_back_from_another_thread():
    caller = threading.get_ident()
    assert call_with_room(lambda: (threading.get_ident() != caller, 6 * 7)) == (True, 42)


def test_exception_is_raised_in_the_caller_with_its_traceback():
    def fail():
        raise KeyError("inner")
    with pytest.raises(KeyError, match="inner") as info:
        call_with_room(fail)
    assert info.traceback[-1].name == "fail"


def test_entry_frame_takes_just_over_half_a_mebibyte():
    # Rounded up by CPython to a 1 MiB root chunk, about 512 KiB left for the call.
    assert 512 * 1024 < ENTRY_SLOTS * 8 < 1024 * 1024 - 256 * 1024
