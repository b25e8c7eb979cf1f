"""The examples in plugrt.plugin's docstrings run."""

from __future__ import annotations

import doctest
import importlib

import pytest
from qdp_helpers import defined

MODULES = ["plugrt.plugin", "plugrt.plugin._expr", "plugrt.plugin._autotune"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    with defined("doc::add_one"):
        result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
