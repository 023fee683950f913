"""The prior check between two sweeps' baselines when peak memory was not measured (reference backend without
--reference-memory-scale): it used to crash on ``max()`` of nothing, ending every second sweep in the workspace."""

from __future__ import annotations

from types import SimpleNamespace

from ltx_pipeline.autotune.prior import prior_disagreement


class _FitsAll:
    def fits(self, result: object) -> bool:
        return True


def _ours(peak: float | None) -> dict[str, object]:
    return {"fits": True, "outcome": "ok", "step_time_s": 1.0, "peak_vram_gb": peak, "validation_peak_vram_gb": None}


def test_neither_sweep_measured_memory_so_only_step_time_is_compared() -> None:
    theirs = SimpleNamespace(outcome="ok", step_time_s=1.05, peak_gb=None)
    assert prior_disagreement(_ours(None), theirs, _FitsAll()) is None  # type: ignore[arg-type]


def test_memory_measured_in_one_sweep_only_is_a_disagreement() -> None:
    theirs = SimpleNamespace(outcome="ok", step_time_s=1.0, peak_gb=None)
    reason = prior_disagreement(_ours(20.0), theirs, _FitsAll())  # type: ignore[arg-type]
    assert reason is not None and "one sweep only" in reason
    assert prior_disagreement(_ours(20.0), SimpleNamespace(outcome="ok", step_time_s=1.0, peak_gb=20.5),
                              _FitsAll()) is None  # type: ignore[arg-type]
