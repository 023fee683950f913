"""Issue 44: plan.md's "Latent cache" section, written by the plan when the rows and models are known before
approval, then again by the data check, outside the approved text (the approval stands).

The reference backend with ``--model-path`` (its model is known at plan time), up to validate; the autotune sanity
set is forecast as linked from stage 1's entries, as ``preprocessing.sanity_set`` makes it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ltx_pipeline.cli import main
from ltx_pipeline.ltx.plan_provenance import written_by
from tests.conftest import H100_SMI
from tests.phases.train_helpers import mp4_clips, store_of


def section(plan: Path) -> list[str]:
    lines = plan.read_text().splitlines()
    start = lines.index("## Latent cache")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("## "))
    return lines[start:end]


@pytest.mark.usefixtures("until_validate")
def test_the_plan_forecasts_before_approval_and_the_data_check_rewrites_it_without_voiding_it(
        workspace: Path, tmp_path: Path, fake_smi: Callable[..., str],
        capsys: pytest.CaptureFixture[str]) -> None:
    from ltx_pipeline.reference_trainer import make_base

    base = tmp_path / "base.safetensors"
    assert make_base.main([str(base)]) == 0
    dataset = mp4_clips(tmp_path / "data", n=2)
    args = ["run", "--workspace", str(workspace), "--run", "r1", "--dataset", str(dataset), "--backend", "reference",
            "--nvidia-smi", fake_smi(H100_SMI), "--buckets", "64x64x17", "--model-path", str(base), "--skip-eval"]
    assert main(args) == 3, capsys.readouterr().err  # at the approval gate
    plan = workspace / "r1" / "plan.md"
    before = section(plan)
    assert before[2].startswith("_A forecast, not part of what you approve") and "written with the plan" in before[2]
    assert "- Stage 1 (64x64x17): 0 of 6 file(s) from the cache, 6 to encode" in before
    assert "  - latents: 0 from the cache, 2 to encode (2 new clip)" in before
    store, run = store_of(workspace)
    subject = store.latest_phase_runs(run.id)["plan"].outputs["plan_hash"]

    assert main([*args, "--approve"]) == 0, capsys.readouterr().err
    after = section(plan)
    assert "written by the data check" in after[2]
    assert after[after.index("- Stage 1 (64x64x17): 0 of 6 file(s) from the cache, 6 to encode"):][:4] == [
        "- Stage 1 (64x64x17): 0 of 6 file(s) from the cache, 6 to encode",
        "  - latents: 0 from the cache, 2 to encode (2 new clip)",
        "  - audio latents: 0 from the cache, 2 to encode (2 new clip)",
        "  - conditions: 0 from the cache, 2 to encode (2 new caption)"]
    sanity = next(line for line in after if line.startswith("- Sanity set"))
    assert "whose clips land in 64x64x17 in stage 1, linked from its entries" in sanity
    assert sanity.endswith("from the cache (3 encoded by an earlier step of this run), 0 to encode")
    assert after.index(sanity) > after.index("- Stage 1 (64x64x17): 0 of 6 file(s) from the cache, 6 to encode")
    store, run = store_of(workspace)
    assert store.latest_phase_runs(run.id)["plan"].outputs["plan_hash"] == subject  # the approval stands
    provenance = written_by(plan.read_text())
    assert provenance is not None and subject.startswith(provenance[1].rstrip("…"))
