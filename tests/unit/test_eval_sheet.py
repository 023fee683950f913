"""The evaluation contact sheet is drawn from real mp4s, leaves out what does not decode, and writes nothing
when nothing decodes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("av")
pytest.importorskip("matplotlib")

from PIL import Image  # noqa: E402

from ltx_pipeline.evaluation.sheet import LABEL_MAX_LINES, SheetEntry, label_lines, write_eval_sheet  # noqa: E402
from ltx_pipeline.ltx.media import write_video  # noqa: E402

RED, GREEN, BLUE = (255, 0, 0), (0, 255, 0), (0, 0, 255)
LONG_PROMPT = ("A slow dolly shot through a rain-soaked neon alley at night, reflections shimmering on the wet "
               "cobblestones while a lone figure in a yellow raincoat walks away from the camera, steam rising "
               "from grates, distant traffic hum, flickering signs in three languages, shallow depth of field, "
               "35mm film grain, cinematic colour grading with teal shadows and warm highlights, ") * 2


def _solid(path: Path, colour: tuple[int, int, int], frames: int = 17, size: int = 64) -> Path:
    pixels = np.empty((frames, size, size, 3), np.uint8)
    pixels[:] = colour
    write_video(path, pixels, 24)
    return path


def _gradient(path: Path, frames: int = 17, size: int = 64) -> Path:
    ramp = np.linspace(0, 255, size, dtype=np.uint8)
    pixels = np.zeros((frames, size, size, 3), np.uint8)
    for index in range(frames):
        pixels[index, :, :, 0] = ramp[None, :]
        pixels[index, :, :, 1] = ramp[:, None]
        pixels[index, :, :, 2] = (index * 15) % 256
    write_video(path, pixels, 24)
    return path


def _renders(tmp_path: Path) -> list[SheetEntry]:
    renders = tmp_path / "outputs" / "eval" / "renders"
    renders.mkdir(parents=True)
    return [
        SheetEntry("in_distribution", _solid(renders / "01.mp4", RED), LONG_PROMPT),
        SheetEntry("out_of_distribution", _solid(renders / "02.mp4", BLUE), "a blue square"),
        SheetEntry("style", _gradient(renders / "03.mp4"), "a gradient"),
    ]


def _near(pixels: np.ndarray, colour: tuple[int, int, int], tolerance: int = 12) -> bool:
    return bool((np.abs(pixels.astype(int) - np.array(colour)).max(axis=-1) <= tolerance).any())


def test_three_renders_make_a_sheet_that_shows_their_frames(tmp_path: Path) -> None:
    entries = _renders(tmp_path)
    sheet = tmp_path / "outputs" / "eval" / "contact-sheet.png"
    written, unreadable = write_eval_sheet(entries, sheet, workspace=tmp_path)
    assert (written, unreadable) == (sheet, [])
    with Image.open(sheet) as image:
        width, height = image.size
        pixels = np.asarray(image.convert("RGB"))
    assert width > 300
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 50  # not blank: frames and text
    assert _near(pixels, RED) and _near(pixels, BLUE)
    assert sheet.stat().st_size < 2_000_000

    one, _ = write_eval_sheet(entries[:1], tmp_path / "one.png", workspace=tmp_path)
    assert one is not None
    with Image.open(one) as image:
        assert image.size[0] == width and image.size[1] < height
        assert not _near(np.asarray(image.convert("RGB")), BLUE)


def test_a_corrupt_render_is_left_out_and_named(tmp_path: Path) -> None:
    entries = _renders(tmp_path)
    broken = tmp_path / "outputs" / "eval" / "renders" / "04.mp4"
    broken.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    entries.insert(1, SheetEntry("in_distribution", broken, "never decodes"))
    sheet = tmp_path / "outputs" / "eval" / "contact-sheet.png"
    written, unreadable = write_eval_sheet(entries, sheet, workspace=tmp_path)
    assert (written, unreadable) == (sheet, ["04.mp4"])
    with Image.open(sheet) as image:
        assert _near(np.asarray(image.convert("RGB")), RED)


def test_audio_is_skipped_and_an_image_is_shown_once(tmp_path: Path) -> None:
    (tmp_path / "speech.wav").write_bytes(b"RIFF not really a wav")
    still = tmp_path / "still.png"
    Image.new("RGB", (48, 32), GREEN).save(still)
    sheet = tmp_path / "sheet.png"
    entries = [SheetEntry("audio", tmp_path / "speech.wav", "a voice"), SheetEntry("image", still, "green")]
    written, unreadable = write_eval_sheet(entries, sheet, workspace=tmp_path)
    assert (written, unreadable) == (sheet, [])
    with Image.open(sheet) as image:
        assert _near(np.asarray(image.convert("RGB")), GREEN)


def test_nothing_decodable_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"\x00not an mp4" * 50)
    sheet = tmp_path / "outputs" / "eval" / "contact-sheet.png"
    entries = [SheetEntry("in_distribution", bad, "x"), SheetEntry("style", tmp_path / "missing.mp4", "y")]
    assert write_eval_sheet(entries, sheet, workspace=tmp_path) == (None, ["bad.mp4", "missing.mp4"])
    assert write_eval_sheet([], sheet, workspace=tmp_path) == (None, [])
    assert not sheet.exists() and not sheet.parent.exists()


def test_a_very_long_prompt_is_cut_to_four_lines() -> None:
    lines = label_lines("in distribution 01.mp4: " + LONG_PROMPT)
    assert 1 < len(lines) <= LABEL_MAX_LINES == 4
    assert lines[-1].endswith("…")
    assert label_lines("short prompt") == ["short prompt"]
    assert label_lines("$x_1$ and {braces} stay plain text", width=12)[0] == "$x_1$ and"
