"""Scene cuts through the real CLI: a short video of 5 shots is looked at, planned as 5 scenes and cut into 5
clips; the deprecated --split-over says it is ignored and gates nothing."""

from __future__ import annotations

import pytest

from ltx_pipeline.cli import main
from ltx_pipeline.ltx.media import read_media_info
from ltx_pipeline.scenes.footage import Shot, write_footage
from tests.conftest import H100_SMI
from tests.phases.train_helpers import reference_args, store_of, training_registered  # noqa: F401

pytest.importorskip("scenedetect")


@pytest.fixture
def up_to_prepare(monkeypatch):
    """Only probe, plan and prepare: what these tests look at, without a training."""
    import phases

    monkeypatch.setattr(phases, "PHASES", tuple(p for p in phases.PHASES if p.name in ("probe", "plan", "prepare")))


@pytest.mark.usefixtures("training_registered", "up_to_prepare")
def test_a_9_second_video_of_5_shots_is_planned_and_cut_as_5_scenes(workspace, tmp_path, fake_smi, capsys) -> None:
    shots = [Shot(length, 31 + n, pan=(2.0 - n, 0.5), palette=31) for n, length in enumerate((50, 40, 48, 36, 42))]
    video = write_footage(tmp_path / "five.mp4", shots, fps=24)  # 216 frames: 9 s, under the old 30 s gate

    # --split-over 60 would have left it whole; it is ignored now, and says so.
    assert main(reference_args(workspace, video, fake_smi(H100_SMI), "--steps", "2", "--split-over", "60")) == 0

    err = capsys.readouterr().err
    assert "--split-over is deprecated and ignored" in err
    plan = (workspace / "r1" / "plan.md").read_text()
    assert "looked at 1 video(s)" in plan and "`five.mp4`: 5 scenes, 5 kept" in plan, plan
    store, run = store_of(workspace)
    assert store.latest_phase_runs(run.id)["plan"].outputs["preparation"]["split_videos"] == [str(video)]
    clips = sorted((workspace / "r1" / "dataset" / "scenes").glob("*.mp4"))
    assert [clip.name for clip in clips] == [f"five-scene-00{n}.mp4" for n in range(1, 6)]
    assert [read_media_info(clip).frames for clip in clips] == [50, 40, 48, 36, 42]
