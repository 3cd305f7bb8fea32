"""Every mutant of ``make mutants`` (scripts/mutants.py, both targets) still
applies to the source it names: each edit's text occurs exactly once, so a
change to the model or the system model that renames a line fails here, in
``make test``, rather than as an error of the next mutation run (53d02db
renamed the coordinator's ``backlog=self.backlog``; ``coord_backlog_ignored``
went unapplied until it was found by hand)."""

import pytest

from kvfabric.scripts.mutants import MUTANTS, ROOT, SIM_MUTANTS, apply


@pytest.mark.parametrize("mutant", MUTANTS + SIM_MUTANTS, ids=lambda m: m.name)
def test_mutant_applies_once_and_changes_the_source(mutant):
    source = (ROOT / mutant.file).read_text()
    mutated = apply(source, mutant)
    assert mutated != source
