"""Formal proofs of the channel's safety properties (spec §4-§6) by k-induction.

Every property of :mod:`kvfabric.hw.checks` and the queue's FIFO order is
proved by ``make formal``; the same proofs run here, each well under a
minute. One test drops an assumption the top level guarantees and expects
the proof to fail, so a harness that proves nothing would not pass.
"""

from pathlib import Path

import pytest

from kvfabric.hw.checks import PROPERTIES
from kvfabric.scripts.formal import EXTRA_PROOFS, prove


@pytest.mark.parametrize("prop", PROPERTIES + EXTRA_PROOFS)
def test_property_is_proved(prop, tmp_path):
    row = prove(prop, workdir=_local(tmp_path, prop))
    assert row["status"] == "proved", f"{prop}: {row['status']} (log {row['log']})"


def test_a_violated_assumption_makes_the_proof_fail(tmp_path):
    # Without burst_level = min(rate, capacity) a burst grant can leave the
    # committed level above the capacity: the proof must find it.
    # Reaching a burst grant from reset takes a few cycles: a deeper base case.
    row = prove("bucket_caps", workdir=_local(tmp_path, "broken"), assume_top=False, depth=6)
    assert row["status"] == "failed", row


def _local(tmp_path, name):
    """A work directory under the project's build/ (YoWASP tools see only the
    working directory), private to this test node."""
    path = Path("build") / "pytest-formal" / f"{tmp_path.name}-{name}"
    path.mkdir(parents=True, exist_ok=True)
    return path
