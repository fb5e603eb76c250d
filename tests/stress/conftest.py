"""Latency bounds, memory bounds and thread stress: slow, so the quick run leaves them out
(``pytest -m "not stress"``); CI runs them."""

from pathlib import Path

import pytest

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.stress)
