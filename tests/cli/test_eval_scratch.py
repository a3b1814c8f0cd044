"""``ailower eval --scratch BYTES[:ALIGN]``: Triton's global scratch for a candidate that needs it
(an expert entry building TMA descriptors on the device)."""

from __future__ import annotations

import pytest

from ailower._common import CliFailure
from ailower.cmd_eval import parse_scratch


def test_scratch_values():
    assert parse_scratch(None) is None
    assert parse_scratch("512") == (512, 1)
    assert parse_scratch("512:128") == (512, 128)


@pytest.mark.parametrize("bad", ["x", "512:abc", "-1", "512:3", "512:0"])
def test_bad_scratch_is_named(bad):
    with pytest.raises(CliFailure, match=r"--scratch"):
        parse_scratch(bad)
