"""``ltx-pipeline export``: a finished reference-backend run exported as a folder, its model card against the
run's records, ``--step`` (a number, last, best from ``holdout-loss.json``), ``--force``, and the refusals.

The run is real (the toy trainer's LoRA, in the trainer's key layout); the exports are the CLI in process.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ltx_pipeline.cli import main
from ltx_pipeline.outputs.data_check import DataCheckOutputs
from ltx_pipeline.outputs.monitor import MonitorOutputs
from ltx_pipeline.outputs.train import TrainOutputs
from tests.conftest import H100_SMI
from tests.phases.train_helpers import mp4_clips, reference_args, store_of, training_registered  # noqa: F401


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _export(workspace: Path, *args: str) -> int:
    return main(["export", "r1", "--workspace", str(workspace), *args])


def _err(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().err.strip()


def test_export_refuses_in_one_line_before_it_looks_at_anything(workspace, tmp_path, capsys) -> None:
    assert _export(workspace, "--to", str(tmp_path / "out")) == 2
    assert _err(capsys) == (f"error: No run named 'r1' in {workspace} (RUN). Fix: check --workspace (or "
                            "$LTX_PIPELINE_WORKSPACE).")
    assert _export(workspace, "--to", str(tmp_path / "out"), "--step", "latest") == 2
    assert _err(capsys) == ("error: --step 'latest' is neither a step number, last nor best (--step). Fix: pass a "
                            "checkpoint's step (see `ltx-pipeline status`), last or best.")
    assert not (tmp_path / "out").exists() and not workspace.exists()


@pytest.mark.long  # a reference run (about 15 s on 2 cores), then six exports of it
@pytest.mark.usefixtures("training_registered")
def test_a_finished_reference_run_exports_each_checkpoint_with_a_card_of_its_records(
        workspace, tmp_path, fake_smi, capsys, monkeypatch) -> None:
    monkeypatch.setenv("LTX_REFERENCE_DEVICE", "cpu")
    args = reference_args(workspace, mp4_clips(tmp_path / "data", n=3), fake_smi(H100_SMI), "--steps", "2",
                          "--rank", "4", "--trigger", "fxclp", "--checkpoint-interval", "1")
    assert main(args) == 0, capsys.readouterr().err
    store, run = store_of(workspace)
    rows = store.latest_phase_runs(run.id)
    train = TrainOutputs.from_stored(rows["train"].outputs, rows["train"].outputs_version).trained[-1]
    monitor = MonitorOutputs.from_stored(rows["monitor"].outputs, rows["monitor"].outputs_version).stages[-1]
    data_check = DataCheckOutputs.from_stored(rows["data_check"].outputs, rows["data_check"].outputs_version)
    checkpoints = workspace / "r1" / "outputs" / "checkpoints"
    exports = tmp_path / "exports"
    out = exports / "r1-lora"
    capsys.readouterr()

    assert _export(workspace, "--to", str(out)) == 0
    assert capsys.readouterr().out.startswith("Exported lora_weights_step_00002.safetensors (step 2, last) of run r1")
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "contact-sheet.png",
                                                     "lora_weights_step_00002.safetensors", "training_config.yaml"]
    final = Path(train.final_checkpoint or "")
    assert final == checkpoints / "lora_weights_step_00002.safetensors"
    assert (out / final.name).read_bytes() == final.read_bytes()  # the trainer's file, not a re-save
    assert (out / "training_config.yaml").read_bytes() == (workspace / "r1/outputs/training_config.yaml").read_bytes()
    assert (out / "contact-sheet.png").read_bytes() == Path(
        MonitorOutputs.from_stored(rows["monitor"].outputs, 1).contact_sheet or "").read_bytes()
    card = (out / "README.md").read_text().splitlines()
    model = data_check.model_files.model  # type: ignore[union-attr]
    for line in (f"- Weights: `{final.name}`, {final.stat().st_size} bytes, sha256 `{_sha(final)}`, copied byte for "
                 "byte from the trainer's checkpoint",
                 # the toy base is under 1 MiB: the card gives its size in bytes
                 f"- Base model: `{model.path}` (safetensors, {model.size} bytes, content digest `{model.content}`)",
                 "- Trigger word: `fxclp`", "- Mode: t2v (lora)",
                 f"- Dataset: {monitor.samples_used.used} of {data_check.samples} sample(s) trained on",  # type: ignore[union-attr]
                 f"- Trainer's overall speed: {train.steps_per_second:.2f} steps/s",
                 "- Run: `r1`; checkpoint at step 2 of 2 (chosen by last)", "- Holdout loss at step 2: not measured"):
        assert line in card, line
    assert any(line.startswith("- LoRA rank 4, alpha 4; target modules: ") for line in card), card

    # The folder exists: refused, untouched; --force replaces it with step 1's weights.
    assert _export(workspace, "--to", str(out), "--step", "1") == 2
    assert _err(capsys) == (f"error: {out} already exists (--to). Fix: choose a new folder, or pass --force to "
                            "replace it.")
    assert (out / final.name).is_file()
    assert _export(workspace, "--to", str(out), "--step", "1", "--force") == 0
    assert [p.name for p in out.glob("*.safetensors")] == ["lora_weights_step_00001.safetensors"]
    assert (out / "lora_weights_step_00001.safetensors").read_bytes() == (
        checkpoints / "lora_weights_step_00001.safetensors").read_bytes()
    assert "- Run: `r1`; checkpoint at step 1 of 2 (chosen by --step 1)" in (out / "README.md").read_text()

    # best: refused without measured figures; with them, the lowest total, its figures on the card.
    figures = workspace / "r1" / "outputs" / "holdout-loss.json"
    assert _export(workspace, "--to", str(exports / "best"), "--step", "best") == 2
    assert _err(capsys) == (f"error: --step best needs the holdout loss per checkpoint, and {figures} does not exist "
                            "(--step best). Fix: measure it (a run with a holdout measures it in its evaluate phase), "
                            "or pass --step last or a step number.")
    rows_json = [{"step": s, "checkpoint": str(checkpoints / f"lora_weights_step_{s:05d}.safetensors"),
                  "holdout": {"video": v, "audio": a, "total": v + a}, "train": {"video": 1.0, "audio": 1.0,
                                                                              "total": 2.0}}
                 for s, v, a in ((0, 0.9, 0.9), (1, 0.25, 0.5), (2, 0.5, 0.5))]
    figures.write_text(json.dumps(rows_json))
    assert _export(workspace, "--to", str(exports / "best"), "--step", "best", "--json") == 0
    assert json.loads(capsys.readouterr().out)["step"] == 1
    card_best = (exports / "best" / "README.md").read_text()
    assert ("- Holdout loss at step 1 (fixed-noise flow-matching loss on held-out rows, not a quality score): "
            "total 0.75, video 0.25, audio 0.5") in card_best
    assert "- Lowest holdout loss of the run: 0.75 at step 1" in card_best
    assert sorted(p.name for p in exports.iterdir()) == ["best", "r1-lora"]  # nothing else written beside them
