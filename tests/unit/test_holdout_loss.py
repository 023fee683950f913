"""The engine's side of the holdout loss (#45): which rows are measured, when nothing is and why, what status,
run-summary.md and the plot say of the figures. No model here: the measuring scripts have their own tests."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ltx_pipeline.holdout.measure import measure_holdout_loss
from ltx_pipeline.holdout.plot import plot_holdout_loss
from ltx_pipeline.holdout.protocol import SIGMAS, Job, JobCheckpoint, pick, stratified_sigmas, tree_identity
from ltx_pipeline.holdout.rows import holdout_rows
from ltx_pipeline.holdout.summary import holdout_section
from ltx_pipeline.outputs.data_check import DataCheckOutputs
from ltx_pipeline.outputs.holdout_loss import HoldoutLoss
from ltx_pipeline.outputs.prepare import PrepareOutputs
from ltx_pipeline.outputs.train import TrainedStage
from ltx_pipeline.status.holdout_loss import holdout_loss


class _Ctx:
    """What the holdout room reads of a phase context, no more."""

    def __init__(self, tmp: Path, *, holdout_file: Path | None, training: Path, backend: Any = None,
                 holdout_loss: str = "on") -> None:
        self.request = SimpleNamespace(holdout_loss=holdout_loss, holdout_file=None)
        self.backend = backend or SimpleNamespace(name="simulated")
        self._outputs = {
            PrepareOutputs: PrepareOutputs(prepared=True, reason="", holdout_file=str(holdout_file) if holdout_file
                                           else None),
            DataCheckOutputs: SimpleNamespace(metadata_file=str(training))}
        self.said: list[str] = []
        self.warned: list[str] = []

    def has_output(self, phase: str) -> bool:
        return phase == "prepare"

    def output(self, kind: type) -> Any:
        return self._outputs[kind]

    def narrate(self, text: str) -> None:
        self.said.append(text)

    def warn(self, text: str) -> None:
        self.warned.append(text)


def _rows(path: Path, clips: list[str]) -> Path:
    path.write_text("".join(json.dumps({"caption": f"clip {c}", "video": c}) + "\n" for c in clips))
    return path


def _config(tmp: Path, mode: str = "lora") -> Path:
    path = tmp / "config.yaml"
    path.write_text(f"model:\n  training_mode: {mode}\n")
    return path


def _stage(tmp: Path, mode: str = "lora") -> TrainedStage:
    return TrainedStage(stage=1, config=str(_config(tmp, mode)), output_dir=str(tmp / "out"), log="", pid=None,
                        launch="", final_checkpoint=None, final_step=4)


def test_a_held_out_clip_that_is_also_a_training_row_is_left_out_and_said(tmp_path: Path) -> None:
    training = _rows(tmp_path / "dataset.jsonl", ["media/a.mp4", "media/b.mp4"])
    held = _rows(tmp_path / "holdout.jsonl", ["media/c.mp4", "media/b.mp4"])
    found = holdout_rows(_Ctx(tmp_path, holdout_file=held, training=training))  # type: ignore[arg-type]
    assert found.indices == (0,) and found.why_none is None
    assert found.overlap == (str((tmp_path / "media" / "b.mp4").resolve()),)
    only_trained = _rows(tmp_path / "h2.jsonl", ["media/a.mp4"])
    none = holdout_rows(_Ctx(tmp_path, holdout_file=only_trained, training=training))  # type: ignore[arg-type]
    assert none.indices == () and "also a training row" in str(none.why_none)


@pytest.mark.parametrize(("holdout", "option", "backend", "mode", "reason"), [
    (True, "off", "reference", "lora", "--holdout-loss off"),
    (True, "on", "simulated", "lora", "the simulated backend trains nothing, so there is no loss to measure"),
    (True, "on", "reference", "full", "measured for LoRA runs only"),
    (False, "on", "reference", "lora", "nothing was held out (`--holdout N` reserves N samples at the plan)"),
])
def test_nothing_measured_says_why(tmp_path: Path, holdout: bool, option: str, backend: str, mode: str,
                                   reason: str) -> None:
    from ltx_pipeline.backends.reference import ReferenceBackend

    held = _rows(tmp_path / "holdout.jsonl", ["media/c.mp4"]) if holdout else None
    chosen = ReferenceBackend() if backend == "reference" else SimpleNamespace(name="simulated")
    ctx = _Ctx(tmp_path, holdout_file=held, training=_rows(tmp_path / "d.jsonl", ["media/a.mp4"]), backend=chosen,
               holdout_loss=option)
    record = measure_holdout_loss(ctx, _stage(tmp_path, mode))  # type: ignore[arg-type]
    assert not record.measured and reason in str(record.reason)
    assert ctx.said == [f"Holdout loss: not measured: {record.reason}."]
    assert holdout_section(record) == f"Not measured: {record.reason}.\n"


def _figures(totals: list[float]) -> list[dict[str, Any]]:
    return [{"step": 2 * i, "checkpoint": None if i == 0 else f"/w/lora_{i}.safetensors",
             "holdout": {"video": t / 2, "audio": t / 2, "total": t, "samples": 1},
             "train": {"video": t, "audio": None, "total": t, "samples": 3}, "seconds": 0.5}
            for i, t in enumerate(totals)]


def test_status_and_the_summary_name_the_lowest_holdout_step_as_measured(tmp_path: Path) -> None:
    assert holdout_loss(tmp_path) is None  # nothing measured yet: nothing to say
    rows = _figures([3.0, 2.0, 2.5])
    (tmp_path / "holdout-loss.json").write_text(json.dumps(rows))
    found = holdout_loss(tmp_path)
    assert found is not None and found["lowest"] == {"step": 2, "total": 2.0} and found["checkpoints"] == rows
    record = HoldoutLoss(measured=True, file=str(tmp_path / "holdout-loss.json"), plot="holdout_loss.png",
                         checkpoints=3, lowest_step=2, lowest_total=2.0, holdout_samples=1, train_samples=3,
                         seconds=1.5)
    text = holdout_section(record)
    assert text.startswith("The lowest holdout loss was measured at step 2 (2).")
    assert "| 4 | 2.5 | 1.25 | 1.25 | 2.5 | 2.5 | - |" in text  # no audio figure is a dash, never a zero
    assert "not a quality score" in text and "1.5 s of forward passes over 3 checkpoint(s)" in text


def test_the_plot_draws_every_measured_point_and_says_what_it_is(tmp_path: Path, saved_figures: list[Any]) -> None:
    plot_holdout_loss(_figures([3.0, 2.0, 2.5]), tmp_path / "holdout_loss.png", workspace=tmp_path)
    [fig] = saved_figures
    ax = fig.axes[0]
    lines = {line.get_label(): [float(y) for y in line.get_ydata()] for line in ax.lines}
    assert lines["held-out rows, total"] == [3.0, 2.0, 2.5]
    assert lines["held-out rows, video part"] == [1.5, 1.0, 1.25]  # audio in the total: video drawn apart
    assert "fixed noise" in ax.get_ylabel() and "not a quality score" in ax.get_title()
    assert ax.get_ylim()[0] == 0  # never cropped to the points
    assert any("lowest holdout: 2 at step 2" in t.get_text() for t in ax.texts)


def test_the_protocol_is_fixed_strata_and_an_even_spread_of_rows() -> None:
    assert SIGMAS == stratified_sigmas(4) == (0.125, 0.375, 0.625, 0.875)
    assert pick(10, 4) == [0, 2, 5, 7] and pick(3, 4) == [0, 1, 2] and pick(5, None) == [0, 1, 2, 3, 4]


def test_every_reader_reads_what_the_measurement_writes(tmp_path) -> None:
    """holdout.measure writes the figures file; status, compare, export and the grid read it through one reader."""
    import json

    from ltx_pipeline.holdout.measure import FIGURES_FILE, figures
    from ltx_pipeline.outputs.holdout_figures import LossParts, lowest, read_figures

    part = {"video": 0.5, "audio": None, "total": 0.5, "samples": 1}
    entries = [{"step": 0, "checkpoint": None, "holdout": part, "train": part, "seconds": 0.1},
               {"step": 2, "checkpoint": "/c/lora_weights_step_00002.safetensors",
                "holdout": {**part, "total": 0.25, "video": 0.25}, "train": part, "seconds": 0.1}]
    path = tmp_path / FIGURES_FILE
    path.write_text(json.dumps(figures(entries)))
    rows = read_figures(path)
    assert rows is not None and [r.step for r in rows] == [0, 2] and rows[0].checkpoint is None
    assert rows[1].holdout == LossParts(0.25, None, 0.25)
    least = lowest(rows)
    assert least is not None and least.step == 2


def test_training_rows_encoded_again_make_earlier_figures_another_protocols(tmp_path: Path) -> None:
    """The base's and every checkpoint's training-row figures depend on those rows: re-encoded rows (new files, or the
    same names written again) must not be read back as already measured."""
    import os

    config, train = tmp_path / "config.yaml", tmp_path / "train" / ".precomputed"
    config.write_text("model: {}\n")
    (train / "latents").mkdir(parents=True)
    row = train / "latents" / "a.pt"
    row.write_bytes(b"one")

    def protocol() -> str:
        return Job(config=config, holdout_root=tmp_path / "held", train_root=train,
                   checkpoints=(JobCheckpoint(0, None, "base"),), results=tmp_path / "results.json",
                   data_identity="d", train_identity=tree_identity(train)).protocol

    first = protocol()
    assert protocol() == first  # nothing changed: the figures are kept
    os.utime(row, ns=(row.stat().st_atime_ns, row.stat().st_mtime_ns + 1_000_000))
    assert protocol() != first  # the same row written again
    second = protocol()
    (train / "latents" / "b.pt").write_bytes(b"two")
    assert protocol() != second  # another row
