"""One whole reference run (#45) for two of plan.md's promises: the holdout loss's counts, stated before approval and
rewritten by autotune with a bound in seconds, are what the measurement then does; and ``--push-to-hub`` with a
(fake) token in the environment patches the trainer's own hub settings while the token reaches no file of the run.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ltx_pipeline.cli import main
from tests.conftest import H100_SMI
from tests.phases.test_prepare import clip_folder
from tests.phases.train_helpers import store_of

TOKEN = "hf_holdoutPlanFakeToken987654321"  # noqa: S105 - a fake: the test greps the run for it


def _section(plan: Path) -> list[str]:
    lines = plan.read_text().splitlines()
    start = lines.index("## Holdout loss")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("## "))
    return lines[start:end]


def _line(section: list[str], head: str) -> str:
    return next(line for line in section if line.startswith(head))


@pytest.mark.long  # preprocessing, an autotune sweep, toy training and the measurement: about 70 s on 2 cores
@pytest.mark.timeout(500)
def test_the_counts_stated_before_approval_are_what_the_measurement_does_and_the_token_stays_out(
        workspace: Path, tmp_path: Path, fake_smi, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    folder = clip_folder(tmp_path / "clips", 4)
    args = ["run", "--workspace", str(workspace), "--run", "r1", "--dataset", str(folder), "--backend", "reference",
            "--nvidia-smi", fake_smi(H100_SMI), "--buckets", "64x64x17", "--skip-eval", "--steps", "5", "--rank", "4",
            "--checkpoint-interval", "2", "--holdout", "1", "--push-to-hub", "me/holdout-lora"]
    assert main(args) == 3, capsys.readouterr().err  # at the approval gate
    run = workspace / "r1"
    before = _section(run / "plan.md")
    assert "written with the plan" in before[2]
    assert _line(before, "- Checkpoints: ") == ("- Checkpoints: 4 = step 0 + 3 kept (steps 2, 4, 5: a save every 2 "
                                                "steps and the final save at step 5, all kept)")
    assert _line(before, "- Rows: ").startswith("- Rows: 4 = 1 held-out + 3 training")
    assert _line(before, "- Forward passes: ") == "- Forward passes: 64 = 4 checkpoints x 4 rows x 4 noise levels, " \
                                                  "one sample each"
    assert _line(before, "- Time: ").startswith("- Time: not known yet: autotune measures a training step")
    store, row = store_of(workspace)
    subject = store.latest_phase_runs(row.id)["plan"].outputs["plan_hash"]

    assert main([*args, "--approve"]) == 0, capsys.readouterr().err
    after = _section(run / "plan.md")
    assert "written by autotune" in after[2]
    store, row = store_of(workspace)
    assert store.latest_phase_runs(row.id)["plan"].outputs["plan_hash"] == subject  # the approval stands
    job = json.loads((run / "holdout" / "job.json").read_text())
    steps = [c["step"] for c in job["checkpoints"]]
    entries = json.loads((run / "holdout" / "results.json").read_text())["checkpoints"]
    rows = {(e["holdout"]["samples"], e["train"]["samples"]) for e in entries}
    passes = len(entries) * sum(next(iter(rows))) * len(job["sigmas"])
    assert steps == [0, 2, 4, 5] and sorted(e["step"] for e in entries) == steps and rows == {(1, 3)}
    assert _line(after, "- Checkpoints: ") == _line(before, "- Checkpoints: ")
    assert _line(after, "- Forward passes: ").startswith(f"- Forward passes: {passes} = ")
    bound = re.match(r"- Time: at most ([\d.,]+) s of forward passes, an upper bound", _line(after, "- Time: "))
    assert bound is not None
    measured = sum(float(e["seconds"]) for e in entries)  # forward passes and each checkpoint's weights
    assert measured <= float(bound.group(1).replace(",", ""))

    assert "hub:\n  push_to_hub: true\n  hub_model_id: me/holdout-lora" in (run / "config.yaml").read_text()
    trials = sorted((run / "overfit").glob("trial-*/config.yaml"))
    assert trials and all("push_to_hub: false" in t.read_text() for t in trials)  # a trial uploads nothing
    leaked = [str(p) for p in workspace.rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()]
    assert leaked == []  # run.yaml, plan.md, configs, logs, the store's database, the measurement's files
