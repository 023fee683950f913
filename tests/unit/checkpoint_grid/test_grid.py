"""``outputs/eval/grid.png``: one row per checkpoint, labelled by step and holdout figure, prompts under the
columns, bounded in size whatever the renders' resolution and the number of checkpoints and prompts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("av")
pytest.importorskip("matplotlib")

from PIL import Image  # noqa: E402

from ltx_pipeline.evaluation.grid import GridRow, write_grid  # noqa: E402
from ltx_pipeline.ltx.media import write_video  # noqa: E402
from ltx_pipeline.reports.drawing import MAX_BYTES, MAX_SIDE  # noqa: E402

PROMPT = "fxclp a slow dolly shot through a rain-soaked neon alley at night, reflections on the wet cobblestones"


def _still(path: Path, colour: tuple[int, int, int], size: tuple[int, int] = (96, 64)) -> Path:
    Image.new("RGB", size, colour).save(path)
    return path


def _colours(image: Image.Image) -> set[tuple[int, ...]]:
    return {tuple(int(v) for v in c) for c in np.unique(np.asarray(image.convert("RGB")).reshape(-1, 3), axis=0)}


def test_each_checkpoint_is_a_row_labelled_by_step_and_holdout_with_every_render_shown(tmp_path: Path) -> None:
    colours = {(s, k): (40 * s % 256, 60 * k, 200) for s in (1, 2, 3) for k in (1, 2)}
    rows = [GridRow(step * 10, 0.125 * step if step != 2 else None,
                    [_still(tmp_path / f"{step}_{k}.png", colours[(step, k)]) for k in (1, 2)]) for step in (1, 2, 3)]
    video = np.zeros((9, 64, 96, 3), np.uint8)
    video[:] = (250, 250, 0)
    write_video(tmp_path / "v.mp4", video, 24)
    rows[2] = GridRow(30, 0.375, [rows[2].files[0], tmp_path / "v.mp4"])
    path, unreadable = write_grid(rows, [PROMPT, "fxclp a lighthouse"], tmp_path / "grid.png", workspace=tmp_path)
    assert path == tmp_path / "grid.png" and unreadable == []
    image = Image.open(path)
    assert image.text["Rows"].splitlines() == ["step 10 holdout 0.125", "step 20", "step 30 holdout 0.375"]
    assert image.text["Prompts"].splitlines() == [PROMPT, "fxclp a lighthouse"]
    shown = _colours(image)
    assert all(colour in shown for key, colour in colours.items() if key != (3, 2))
    assert any(abs(r - 250) < 12 and abs(g - 250) < 12 and b < 40 for r, g, b in shown)  # the mp4's middle frame
    # prompts under the columns: the rows of pictures end above the last text line
    pixels = np.asarray(image.convert("RGB"))
    last_picture_row = max(np.nonzero((pixels == colours[(3, 1)]).all(axis=2))[0])
    assert last_picture_row < image.height - 30


def test_the_grid_stays_bounded_and_says_what_it_leaves_off(tmp_path: Path) -> None:
    big = [_still(tmp_path / f"{k}.png", (10 * k, 100, 50), size=(1280, 720)) for k in range(20)]
    rows = [GridRow(step, 1.0 / step, list(big)) for step in range(50, 2550, 50)]  # 50 checkpoints x 20 prompts
    path, _ = write_grid(rows, [f"{PROMPT} {k}" for k in range(20)], tmp_path / "grid.png", workspace=tmp_path)
    assert path is not None
    image = Image.open(path)
    assert max(image.size) <= MAX_SIDE and path.stat().st_size <= MAX_BYTES
    shown = image.text["Rows"].splitlines()
    assert 1 < len(shown) < 50 and shown[0].startswith("step 50 ") and shown[-1].startswith("step 2500 ")
    assert f"{len(shown)} of 50 checkpoints are shown" in image.text["Description"]
    assert "of 20 prompts are shown" in image.text["Description"]
    assert min(image.size) >= 600  # legible: not shrunk to a stamp


def test_nothing_decodable_writes_no_grid_and_names_the_files(tmp_path: Path) -> None:
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"not a video")
    path, unreadable = write_grid([GridRow(10, None, [broken, None])], ["a", "b"], tmp_path / "grid.png",
                                  workspace=tmp_path)
    assert path is None and unreadable == ["broken.mp4"] and not (tmp_path / "grid.png").exists()
