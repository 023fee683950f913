"""Contact sheets that survive real footage (#43, point 6): small, bounded, readable, with their prompts.

On four real clips (960x544x49, 2000 steps) ``samples/contact-sheet.png`` was 5764x11802 px and 90 MB, with
10-pixel step labels and no prompts. Every sheet must now be under 5 MB and at most 2000 px on its long side
whatever the run's size and length, show a bounded, evenly spaced set of steps (first and last included) and
say which, and carry its prompts (drawn, and in the PNG's text chunks, which these tests read).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("av")

from PIL import Image  # noqa: E402

from ltx_pipeline.evaluation import sheet as eval_sheet
from ltx_pipeline.evaluation.sheet import SheetEntry, write_eval_sheet  # noqa: E402
from ltx_pipeline.ltx.media import write_video  # noqa: E402
from ltx_pipeline.reports import contact_sheet  # noqa: E402
from ltx_pipeline.reports.contact_sheet import MAX_ROWS, choose_steps, write_contact_sheet  # noqa: E402
from ltx_pipeline.reports.drawing import encode_sheet  # noqa: E402

FIVE_MB = 5_000_000
PROMPTS = [
    "A slow dolly shot through a rain-soaked neon alley at night, reflections shimmering on the wet cobblestones "
    "while a lone figure in a yellow raincoat walks away from the camera, steam rising from grates",
    "A golden retriever runs along a beach at sunset, waves breaking behind it",
    "Close-up of hands kneading dough on a floured wooden table, morning light from a window on the left",
    "Aerial view over a pine forest in fog, the camera drifting forward slowly",
]
TINTS = [(220, 40, 40), (40, 200, 60), (40, 60, 220), (230, 200, 30)]


def _frames(width: int, height: int, tint: tuple[int, int, int], count: int = 3, noise: float = 4.0,
            seed: int = 0) -> np.ndarray:
    """Footage-like frames: a tinted gradient with moving stripes and sensor noise."""
    rng = np.random.default_rng(seed)
    shade = (0.55 + 0.45 * np.arange(height, dtype=np.float32) / height)[:, None, None]
    base = np.asarray(tint, np.float32) * shade  # (height, 1, 3)
    out = np.empty((count, height, width, 3), np.uint8)
    for index in range(count):
        stripes = (30 * np.sin((np.arange(width, dtype=np.float32) + index * 25) / 23.0))[None, :, None]
        grain = rng.standard_normal((height, width, 3), dtype=np.float32) * noise
        out[index] = np.clip(base + stripes + grain, 0, 255)
    return out


def _sheet_facts(path: Path) -> tuple[tuple[int, int], int, dict[str, str], np.ndarray]:
    with Image.open(path) as image:
        return image.size, path.stat().st_size, dict(image.text), np.asarray(image.convert("RGB"))


def _near(pixels: np.ndarray, colour: tuple[int, int, int], tolerance: int = 40) -> bool:
    """Whether a visible share of the sheet (0.2 %) is within ``tolerance`` of ``colour``."""
    close = np.ones(pixels.shape[:2], bool)
    for channel, value in enumerate(colour):
        close &= np.abs(pixels[..., channel].astype(np.int16) - value) <= tolerance
    return bool(close.mean() > 0.002)


# -- which steps a sheet shows ---------------------------------------------------------------------------------


@given(st.lists(st.integers(0, 100_000), min_size=1, max_size=400, unique=True), st.integers(2, 30))
def test_chosen_steps_are_evenly_spaced_and_keep_the_first_and_last(steps, rows) -> None:
    chosen = choose_steps(steps, rows)
    ordered = sorted(steps)
    assert chosen == sorted(set(chosen)) and set(chosen) <= set(steps)
    assert len(chosen) == min(rows, len(steps))
    assert chosen[0] == ordered[0] and chosen[-1] == ordered[-1]
    positions = [ordered.index(step) for step in chosen]
    gaps = [b - a for a, b in zip(positions, positions[1:], strict=False)]
    assert not gaps or max(gaps) - min(gaps) <= 1


# -- the samples' sheet on real-size footage ---------------------------------------------------------------------


def _samples(folder: Path, *, steps: int, interval: int, width: int = 960, height: int = 544) -> Path:
    """The trainer's samples of a run: one real mp4 per prompt, copied to every validation step's name."""
    folder.mkdir(parents=True)
    for k, tint in enumerate(TINTS, start=1):
        write_video(folder / f"clip_{k}.mp4", _frames(width, height, tint, noise=2.0, seed=k), 24)
    for step in range(0, steps + 1, interval):
        for k in range(1, len(TINTS) + 1):
            shutil.copyfile(folder / f"clip_{k}.mp4", folder / f"step_{step:06d}_{k}.mp4")
    for k in range(1, len(TINTS) + 1):
        (folder / f"clip_{k}.mp4").unlink()
    return folder


def test_a_2000_step_run_of_960x544_samples_makes_a_small_readable_sheet_with_its_prompts(tmp_path) -> None:
    samples = _samples(tmp_path / "outputs" / "samples", steps=2000, interval=50)  # 41 validation steps
    sheet = samples / "contact-sheet.png"
    written, unreadable = write_contact_sheet(samples, sheet, workspace=tmp_path, prompts=PROMPTS)
    assert (written, unreadable) == (sheet, [])
    (width, height), size, text, pixels = _sheet_facts(sheet)
    assert size < FIVE_MB and max(width, height) <= 2000
    assert width >= 1500  # thumbnails, not postage stamps: the sheet uses its width
    shown = [int(s) for s in text["Steps"].split(", ")]
    assert len(shown) == MAX_ROWS and shown[0] == 0 and shown[-1] == 2000
    assert f"{MAX_ROWS} of 41 validation steps" in text["Description"]
    assert "step_<step>_<k>.mp4" in text["Description"]  # where the full set is
    for k, prompt in enumerate(PROMPTS, start=1):
        assert f"sample {k}: {prompt}" in text["Prompts"]
    assert all(_near(pixels, tint) for tint in TINTS)  # every sample's frames are on it


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(width=st.integers(64, 1920), height=st.integers(64, 1088), prompts=st.integers(1, 9),
       steps=st.integers(1, 160), noise=st.sampled_from([4.0, 80.0]),
       words=st.lists(st.text(alphabet="abcdefghij ", min_size=1, max_size=30), min_size=9, max_size=9))
def test_any_footage_size_and_run_length_stays_within_2000_px_and_5_mb(
        tmp_path_factory, monkeypatch, width, height, prompts, steps, noise, words) -> None:
    """Property: whatever the frame size, prompt count and step count (decoding replaced by frames of that size,
    noise-heavy ones included), the sheet fits the bounds and names every prompt and its first and last step."""
    root = tmp_path_factory.mktemp("run")
    folder = root / "samples"
    folder.mkdir()
    for step in range(steps):
        for k in range(1, prompts + 1):
            (folder / f"step_{step * 100:06d}_{k}.mp4").touch()
    frames = _frames(width, height, TINTS[0], noise=noise)
    monkeypatch.setattr(contact_sheet, "read_frames", lambda _path: frames)
    texts = [f"prompt {k} {w}" for k, w in enumerate(words[:prompts], start=1)]
    written, _ = write_contact_sheet(folder, folder / "contact-sheet.png", workspace=root, prompts=texts)
    assert written is not None
    (w, h), size, text, _ = _sheet_facts(written)
    assert max(w, h) <= 2000 and size < FIVE_MB
    shown = [int(s) for s in text["Steps"].split(", ")]
    assert shown[0] == 0 and shown[-1] == (steps - 1) * 100 and len(shown) <= MAX_ROWS
    assert all(" ".join(t.split()) in text["Prompts"] for t in texts)


def test_noise_as_a_sheet_still_encodes_under_the_bound() -> None:
    """The worst case for PNG (incompressible pixels) falls back to a palette, then a smaller scale."""
    noise = np.random.default_rng(1).integers(0, 256, (2000, 2000, 3), dtype=np.uint8)
    data = encode_sheet(Image.fromarray(noise), {"Prompts": "sample 1: a prompt"})
    import io

    with Image.open(io.BytesIO(data)) as image:
        assert max(image.size) <= 2000 and image.text["Prompts"] == "sample 1: a prompt"
    assert len(data) < FIVE_MB


# -- the evaluation sheet ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("renders", [11, 40])
def test_the_eval_sheet_of_many_960x544_renders_is_bounded_and_names_every_prompt(
        tmp_path, monkeypatch, renders) -> None:
    takes = [_frames(960, 544, tint, seed=n) for n, tint in enumerate(TINTS)]
    monkeypatch.setattr(eval_sheet, "read_frames", lambda path: takes[int(Path(path).stem) % 4])
    entries = [SheetEntry("in_distribution", tmp_path / f"{n:02d}.mp4", f"{PROMPTS[n % 4]} (take {n})")
               for n in range(renders)]
    sheet = tmp_path / "outputs" / "eval" / "contact-sheet.png"
    written, unreadable = write_eval_sheet(entries, sheet, workspace=tmp_path)
    assert (written, unreadable) == (sheet, [])
    (width, height), size, text, pixels = _sheet_facts(sheet)
    assert size < FIVE_MB and max(width, height) <= 2000
    assert all(f"{PROMPTS[n % 4]} (take {n})" in text["Prompts"] for n in range(renders))
    assert all(_near(pixels, tint) for tint in TINTS)
    if renders > 20:  # more than fit: the sheet says how many it shows and where the rest are
        assert f"of {renders} renders are shown" in text["Description"] and "prompts.json" in text["Description"]
    else:
        assert "shown" not in text["Description"]
