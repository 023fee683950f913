"""The arguments of one preprocessing script: ``process_dataset.py`` or one of its halves.

A caller asks for a script (``PreprocessScript``) with the flags it would give ``process_dataset.py``, so one
set of flags describes a stage however it is split. For ``process_videos.py`` and ``process_captions.py`` those
flags are translated to the options each half really has (their typer options, ltx-trainer 1.2.0:
process_videos.py:1400-1458, process_captions.py:398-450): the output folders become ``<root>/latents`` (and
``--audio-output-dir <root>/audio_latents``) or ``<root>/conditions``; the columns ``process_dataset.py`` would
detect are named explicitly, since the halves default to ``media_path``; the video's sound is encoded
(``--with-audio``) exactly when ``process_dataset.py`` would extract it (no ``--skip-audio``, no ``audio``
column, process_dataset.py:141). A flag neither half can honour (references, masks, ``--decode``) is refused,
never dropped: those outputs need ``process_dataset.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from ltx_pipeline.backends.launch import preprocess_args, refuse_overwrite
from ltx_pipeline.errors import BadInput
from ltx_pipeline.ltx.metadata import read_metadata_rows
from ltx_pipeline.ltx.precomputed_layout import PreprocessScript, dataset_roles, naming_column

__all__ = ["SCRIPT_FILES", "script_args", "split_script_args"]

#: The trainer's file for each script, under ``packages/ltx-trainer/scripts/``.
SCRIPT_FILES: dict[PreprocessScript, str] = {"dataset": "process_dataset.py", "videos": "process_videos.py",
                                             "captions": "process_captions.py"}
# A process_dataset.py option -> its name in (process_videos.py, process_captions.py); None: that half has no
# such option, and the option does not change what that half writes.
_SPLIT: dict[str, tuple[str | None, str | None]] = {
    "--batch-size": ("--batch-size", "--batch-size"), "--device": ("--device", "--device"),
    "--video-vae-path": ("--video-vae-path", None), "--audio-vae-path": ("--audio-vae-path", None),
    "--vae-tiling": ("--vae-tiling", None), "--lora-trigger": (None, "--lora-trigger"),
    "--remove-llm-prefixes": (None, "--remove-llm-prefixes"),
    "--load-text-encoder-in-8bit": (None, "--load-text-encoder-in-8bit"),
    "--with-audio": (None, None),  # deprecated, a no-op in process_dataset.py (:419-423)
}
_WITH_VALUE = {"--batch-size", "--device", "--video-vae-path", "--audio-vae-path", "--lora-trigger", "--video-column",
               "--caption-column"}
_HALF = {"videos": 0, "captions": 1}


def script_args(script: PreprocessScript, dataset: Path, buckets: str, output_dir: Path, *, model_path: str,
                text_encoder_path: str, trigger: str | None, extra_flags: Sequence[str]) -> list[str]:
    """The arguments (after the script's path) that make ``script`` preprocess ``dataset`` into ``output_dir``.

    ``output_dir`` is the ``.precomputed`` root whichever the script. For a split script the metadata's
    first row is read for its columns, as the trainer detects them.

    Raises:
        BadInput: ``--overwrite``; a flag the split script cannot honour; no column that script needs.
    """
    if script == "dataset":
        return preprocess_args(dataset, buckets, output_dir, model_path=model_path,
                               text_encoder_path=text_encoder_path, trigger=trigger, extra_flags=extra_flags)
    columns = list(read_metadata_rows(dataset)[0])
    return split_script_args(script, dataset, buckets, output_dir, model_path=model_path,
                             text_encoder_path=text_encoder_path, trigger=trigger, extra_flags=extra_flags,
                             columns=columns)


def split_script_args(script: PreprocessScript, dataset: Path, buckets: str, output_dir: Path, *, model_path: str,
                      text_encoder_path: str, trigger: str | None, extra_flags: Sequence[str],
                      columns: Iterable[str]) -> list[str]:
    """``script_args`` for ``videos`` or ``captions``, with the metadata's ``columns`` given (pure).

    Raises:
        BadInput: as ``script_args``.
    """
    refuse_overwrite(extra_flags)
    pairs = _pairs(extra_flags, script)
    given = dict(pairs)
    roles = dataset_roles(columns, video_column=given.get("--video-column"),
                          caption_column=given.get("--caption-column"))
    out = output_dir.resolve()
    if script == "videos":
        if "video" not in roles:
            raise BadInput(f"{dataset} has no video column, so process_videos.py has nothing to encode",
                           where="preprocess", fix="preprocess it with process_dataset.py (audio-only data)")
        args = [str(dataset.resolve()), "--resolution-buckets", buckets, "--output-dir", str(out / "latents"),
                "--model-path", model_path, "--video-column", roles["video"]]
        if "--skip-audio" not in given and "audio" not in roles:
            args += ["--with-audio", "--audio-output-dir", str(out / "audio_latents")]
    else:
        if "caption" not in roles or not {"video", "audio"} & set(roles):
            raise BadInput(f"{dataset} lacks a caption or a media column", where="preprocess",
                           fix="name the columns `caption` and `video` (or `audio`)")
        args = [str(dataset.resolve()), "--output-dir", str(out / "conditions"), "--model-path", model_path,
                "--text-encoder-path", text_encoder_path, "--caption-column", roles["caption"],
                "--media-column", naming_column("caption", roles)]
        if trigger:
            args += ["--lora-trigger", trigger]
    for flag, value in pairs:
        name = _SPLIT.get(flag, (None, None))[_HALF[script]]
        if name is not None:
            args += [name] if value is None else [name, value]
    return args


def _pairs(extra_flags: Sequence[str], script: PreprocessScript) -> list[tuple[str, str | None]]:
    """The flags as (option, value or None), ``--name=value`` split; one no split script knows is refused."""
    pairs: list[tuple[str, str | None]] = []
    tokens = [part for token in extra_flags for part in (token.split("=", 1) if token.startswith("--") else [token])]
    index = 0
    while index < len(tokens):
        flag = tokens[index]
        if flag not in _SPLIT and flag not in _WITH_VALUE and flag != "--skip-audio":
            raise BadInput(f"The preprocessing flag {flag!r} has no counterpart in the trainer's "
                           f"{SCRIPT_FILES[script]}", where="preprocess",
                           fix="preprocess those rows with process_dataset.py instead")
        if flag in _WITH_VALUE:
            if index + 1 >= len(tokens):
                raise BadInput(f"The preprocessing flag {flag} has no value", where="preprocess",
                               fix=f"give {flag} VALUE")
            pairs.append((flag, tokens[index + 1]))
            index += 2
        else:
            pairs.append((flag, None))
            index += 1
    return pairs
