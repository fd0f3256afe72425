from __future__ import annotations

import pytest

from tests.unit.plugins.fakes import FakeHandle


@pytest.fixture
def handle() -> FakeHandle:
    return FakeHandle()
