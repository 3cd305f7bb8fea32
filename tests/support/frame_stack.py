"""Run a call on a thread whose Python frame stack never has to grow.

CPython 3.11 keeps a thread's interpreter frames in "data stack chunks" of
16 KiB (``Python/pystate.c``, ``push_chunk``): a call whose frame does not fit
in the rest of the current chunk maps a new chunk, and returning from it
unmaps that chunk again. A loop whose calls straddle a chunk's end therefore
pays an ``mmap``/``munmap`` pair and fresh page faults on every call. The
Amaranth simulator's generated code does exactly that when the boundary
falls at its depth, which depends on everything below it on the stack
(pytest, xdist's worker, the test's fixtures): measured on
``test_hw_channel.py::test_channel_matches_model[starvation]``, 4.5 s run
directly and 34 s in an xdist worker, with 3.2 million ``mmap`` and as many
``munmap`` calls (``strace -c``) and 24 s of system time.

The first frame of a new thread is placed in the thread's root chunk, which
is sized to fit it and never unmapped. :func:`call_with_room` starts a thread
whose first frame (``_entry``'s, its code given a large value stack) takes
half of a 1 MiB root chunk, so every frame the call pushes lands in the other
half: no chunk is mapped or unmapped, wherever the caller stands."""

import _thread
import sys

#: Value-stack slots of ``_entry``'s frame: 8 bytes each, just over 512 KiB,
#: so that the root chunk is rounded up to 1 MiB and about 512 KiB stay free
#: above it for the call's own frames.
ENTRY_SLOTS = (512 * 1024) // 8 + 64


def _entry(call, box, done):
    try:
        box.append((True, call()))
    except BaseException as exc:      # re-raised in the caller's thread
        box.append((False, exc))
    finally:
        done.release()


_entry.__code__ = _entry.__code__.replace(co_stacksize=ENTRY_SLOTS)


def call_with_room(call):
    """``call()`` on a new thread with a roomy root frame chunk (see the
    module's docstring); returns its result or raises its exception."""
    if sys.implementation.name != "cpython":
        return call()
    box, done = [], _thread.allocate_lock()
    done.acquire()
    _thread.start_new_thread(_entry, (call, box, done))
    done.acquire()
    ok, value = box[0]
    if ok:
        return value
    raise value
