"""Fixtures the unit tests share."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def saved_figures(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every matplotlib figure saved while the test runs, in order (the figure object, as drawn)."""
    from matplotlib.figure import Figure

    seen: list[Any] = []
    real = Figure.savefig

    def spy(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(self)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", spy)
    return seen
