"""The smoke test's data: a small dataset of every column the mode reads, and the a2a reference-latent names.

``ltx.sample_datasets.write_mode_dataset`` writes the files (clips with a tone, WAVs, references, masks);
``write_data`` describes them as read back, so the step's line says what is there, not what was meant.
``align_reference_audio`` does after preprocessing what the pipeline's preprocessing does for an
audio-only dataset with reference audio (see its docstring).
"""

from __future__ import annotations

from pathlib import Path

from ltx_pipeline.ltx.metadata import read_metadata_rows
from ltx_pipeline.ltx.modes import Mode
from ltx_pipeline.preprocessing.run import link_reference_audio
from ltx_pipeline.smoke.failure import SmokeFailed

__all__ = ["align_reference_audio", "write_data"]


def write_data(mode: Mode, metadata: Path, *, rows: int, frames: int, size: int) -> str:
    """The dataset every mode's smoke trains on, described from the files as written (not as intended)."""
    from ltx_pipeline.ltx.media import BadMedia, read_media_info
    from ltx_pipeline.ltx.sample_datasets import write_mode_dataset

    write_mode_dataset(metadata.parent, mode.name, count=rows, frames=frames, size=size)
    written = read_metadata_rows(metadata)
    described = []
    for column in (c for c in mode.columns if c != "caption"):
        files = [metadata.parent / str(row[column]) for row in written if row.get(column)]
        try:
            info = read_media_info(files[0])
        except (BadMedia, IndexError) as exc:
            raise SmokeFailed("data", f"the {column} media the smoke wrote is unusable: {exc}",
                              "report it: the smoke's sample writer is broken", None) from None
        kind = files[0].suffix.lstrip(".")
        if info.kind == "video":
            what = (f"{info.width}x{info.height}, {info.frames} frames at {info.fps:g} fps"
                    f"{', with sound' if info.has_audio else ''}")
        else:
            what = f"{info.duration_s:.1f} s at {info.audio_sample_rate} Hz"
        described.append(f"{column}: {len(files)} {kind} ({what})")
    return f"{metadata.name}, {len(written)} rows for {mode.name}; " + "; ".join(described)


def align_reference_audio(mode: Mode, metadata: Path, output: Path) -> int:
    """For an audio-only dataset (a2a), each reference-audio latent linked under its target's name.

    The trainer's ``process_dataset.py`` names them after the reference file there, while its dataset
    looks them up under the primary audio's name: without this every sample is skipped (the pipeline's
    preprocessing does the same). Linked, or copied across file systems; what was written stays.
    """
    return link_reference_audio(mode, metadata, output)
