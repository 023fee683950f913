"""The ``.precomputed/`` rules: is this preprocessed data what the planned run will train on?

Owns ``inspect_precomputed``: the subfolders a mode needs, ``.pt`` counts, the sample matching the
trainer's dataset does (facts §6.4: descend into ``.precomputed``, ``latents`` as the primary
source, the legacy ``latent_X``/``condition_X`` names), tensor shapes of one sample per source
against the planned buckets (facts §6.2), reconciliation with the metadata that names every
dropped clip, and the audio gate. It never writes. Tensors are read through a loader the caller
passes (the data-check phase gives ``torch.load(path, weights_only=True)``), because the layer
contract keeps torch out of every module the CLI imports at start-up, function-level imports
included.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from ltx_pipeline.ltx.buckets import SPATIAL_FACTOR, TEMPORAL_FACTOR, Bucket, format_buckets
from ltx_pipeline.ltx.data_check import Check, has_errors, name_some
from ltx_pipeline.ltx.metadata import sample_name
from ltx_pipeline.ltx.modes import Mode

__all__ = ["LATENT_CHANNELS", "PrecomputedReport", "SampleLoader", "inspect_precomputed"]

LATENT_CHANNELS = 128
AUDIO_CHANNELS = 8
AUDIO_BINS = 16
#: Reads one ``.pt`` file; whatever it holds is checked to be a dict of tensors before it is used.
SampleLoader = Callable[[Path], object]
_VIDEO_LATENTS = ("latents", "reference_latents")
_AUDIO_LATENTS = ("audio_latents", "reference_audio_latents")


@dataclass(frozen=True)
class PrecomputedReport:
    """What ``inspect_precomputed`` found.

    Attributes:
        root: the folder inspected (``<root>/.precomputed`` when that exists).
        counts: required subfolder -> ``.pt`` files in it (recursive); absent folders are left out.
        usable_samples: primary files with a match in every other source (what the trainer loads).
        dropped: subfolder -> metadata clips with no file there.
        stored_bucket: the bucket the sampled latents were made at, when it could be read.
        checks: the findings.
    """

    root: str
    counts: dict[str, int]
    usable_samples: int
    dropped: dict[str, tuple[str, ...]] = field(default_factory=dict)
    stored_bucket: str | None = None
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not has_errors(self.checks)


def _pt_files(folder: Path) -> tuple[list[str], int]:
    """Relative POSIX names of ``*.pt`` under ``folder`` (sorted), and unfinished ``.pt.tmp*`` files."""
    names = sorted(str(PurePosixPath(*p.relative_to(folder).parts)) for p in folder.rglob("*.pt") if p.is_file())
    leftovers = sum(1 for p in folder.rglob("*.pt.tmp*") if p.is_file())
    return names, leftovers


def _match_name(source: str, primary_name: str) -> str:
    """The file a source must hold for a primary sample (legacy ``latent_X`` -> ``condition_X``)."""
    path = PurePosixPath(primary_name)
    if source == "conditions" and path.name.startswith("latent_"):
        return str(path.with_name("condition_" + path.name[len("latent_"):]))
    return primary_name


def inspect_precomputed(root: Path, mode: Mode, buckets: Iterable[Bucket], *, load: SampleLoader,
                        metadata_media: list[str] | None = None,
                        metadata_dir: Path | None = None) -> PrecomputedReport:
    """Check preprocessed data against a mode, its planned buckets and its metadata.

    Args:
        root: ``data.preprocessed_data_root`` or the folder holding ``.precomputed``.
        mode: the training mode (``precomputed_dirs`` are required).
        buckets: the planned buckets (empty for audio-only modes: no latent shape to compare).
        load: reads one ``.pt`` file into its dict, e.g. ``torch.load(p, weights_only=True)``.
        metadata_media: the clips as written in the metadata (its primary media column).
        metadata_dir: the folder of the metadata file; default the parent of the inspected folder.

    Returns:
        The report; error codes ``missing-precomputed``, ``missing-subfolder``, ``empty-subfolder``,
        ``audio-gate``, ``no-samples``, ``unreadable-sample``, ``shape-mismatch``, ``bad-sample``;
        warnings ``unmatched-sample``, ``dropped-clip``, ``extra-samples``, ``unfinished-preprocess``.
    """
    root = Path(root).expanduser().absolute()
    planned = list(buckets)
    if not root.is_dir():
        return PrecomputedReport(str(root), {}, 0, checks=[Check(
            "error", "missing-precomputed", f"Preprocessed data folder {root} does not exist", str(root),
            "preprocess the dataset, or point data.preprocessed_data_root at its .precomputed folder")])
    if (root / ".precomputed").is_dir():
        root = root / ".precomputed"  # as the trainer's dataset silently does
    files: dict[str, list[str]] = {}
    checks: list[Check] = []
    leftovers = 0
    for source in mode.precomputed_dirs:
        folder = root / source
        if folder.is_dir():
            files[source], tmp = _pt_files(folder)
            leftovers += tmp
        if source == "audio_latents" and not files.get(source):
            checks.append(Check("error", "audio-gate",
                                f"Mode {mode.name} trains on audio but {folder} holds no audio latents", str(folder),
                                "check that the clips have an audio track and that audio decoding works, then "
                                "preprocess again into a new folder; do not train an audio run without them"))
        elif not folder.is_dir():
            checks.append(Check("error", "missing-subfolder", f"Mode {mode.name} needs {folder}, which is missing",
                                str(folder), "preprocess the dataset for this mode (its metadata columns decide "
                                "which subfolders are written)"))
        elif not files[source]:
            checks.append(Check("error", "empty-subfolder", f"{folder} holds no .pt files", str(folder),
                                "preprocess the dataset again into a new folder"))
    if leftovers:
        checks.append(Check("warning", "unfinished-preprocess",
                            f"{leftovers} unfinished .pt.tmp file(s) under {root}: preprocessing was interrupted",
                            str(root), "re-run the same preprocessing (finished files are skipped)"))
    present = {source: names for source, names in files.items() if names}
    usable = _match_sources(root, mode, present, checks)
    stored = None
    for source, names in present.items():
        stored = _check_sample(root, source, names[0], planned, load, checks) or stored
    dropped: dict[str, tuple[str, ...]] = {}
    if metadata_media is not None:
        base = Path(metadata_dir).expanduser().resolve() if metadata_dir else root.parent
        dropped = _reconcile(root, mode, present, metadata_media, base, checks)
    return PrecomputedReport(str(root), {s: len(n) for s, n in files.items()}, usable, dropped, stored, checks)


def _match_sources(root: Path, mode: Mode, present: dict[str, list[str]], checks: list[Check]) -> int:
    if len(present) < len(mode.precomputed_dirs):
        return 0  # a missing or empty source was reported already; the trainer would refuse to start
    primary = "latents" if "latents" in present else mode.precomputed_dirs[0]
    usable = set(present[primary])
    for source, names in present.items():
        if source == primary:
            continue
        have = set(names)
        lacking = [name for name in present[primary] if _match_name(source, name) not in have]
        usable -= set(lacking)
        if lacking:
            checks.append(Check("warning", "unmatched-sample",
                                f"{len(lacking)} of {len(present[primary])} sample(s) in {primary}/ have no "
                                f"{source}/ file and the trainer will skip them: {name_some(lacking)}",
                                str(root / source), "re-run preprocessing to complete them (existing files are "
                                "skipped), or accept the loss"))
    if not usable:
        checks.append(Check("error", "no-samples",
                            f"No sample of {root} has a file in every source ({', '.join(present)}): "
                            "the trainer would find no valid samples", str(root),
                            "preprocess the dataset again into a new folder"))
    return len(usable)


def _shape(value: Any) -> tuple[int, ...] | None:
    shape = getattr(value, "shape", None)
    return tuple(int(d) for d in shape) if shape is not None else None


def _as_bucket(frames: int, height: int, width: int) -> Bucket:
    return Bucket(width * SPATIAL_FACTOR, height * SPATIAL_FACTOR, (frames - 1) * TEMPORAL_FACTOR + 1)


def _fits(source: str, dims: tuple[int, int, int], planned: list[Bucket]) -> bool:
    frames, height, width = dims
    for bucket in planned:
        if source == "latents" or source == "video_masks":
            if (frames, height, width) == (bucket.latent_frames, bucket.latent_height, bucket.latent_width):
                return True
        elif height and width and bucket.latent_height % height == 0 and bucket.latent_width % width == 0 \
                and bucket.latent_height // height == bucket.latent_width // width and frames <= bucket.latent_frames:
            return True  # references may be downscaled by one integer factor and subsampled in time
    return False


def _check_sample(root: Path, source: str, name: str, planned: list[Bucket], load: SampleLoader,
                  checks: list[Check]) -> str | None:
    """Check one sample's tensors; returns the bucket stored latents were made at, if readable."""
    path = root / source / name
    try:
        data = load(path)
    except Exception as exc:  # any load failure means the trainer cannot read it either
        checks.append(Check("error", "unreadable-sample", f"Cannot load {path}: {type(exc).__name__}: {exc}",
                            str(path), "preprocess the dataset again into a new folder"))
        return None
    if not isinstance(data, Mapping):
        checks.append(_bad_sample(path, f"holds a {type(data).__name__}, not a dict of tensors"))
        return None
    if source in _VIDEO_LATENTS or source == "video_masks":
        return _check_video(root, path, source, data, planned, checks)
    if source in _AUDIO_LATENTS:
        shape = _shape(data.get("latents"))
        if shape is None or len(shape) != 3 or shape[0] != AUDIO_CHANNELS or shape[2] != AUDIO_BINS:
            checks.append(_bad_sample(path, f"`latents` has shape {shape}, expected "
                                            f"[{AUDIO_CHANNELS}, T, {AUDIO_BINS}]"))
    elif source == "conditions":
        embeds = _shape(data.get("video_prompt_embeds", data.get("prompt_embeds")))
        mask = _shape(data.get("prompt_attention_mask"))
        if embeds is None or mask is None or len(embeds) != 2 or len(mask) != 1 or embeds[0] != mask[0]:
            checks.append(_bad_sample(path, f"expected `video_prompt_embeds` [tokens, D] and "
                                            f"`prompt_attention_mask` [tokens], found keys {sorted(data)}"))
    elif source == "audio_masks":
        shape = _shape(data.get("mask"))
        if shape is None or len(shape) != 1:
            checks.append(_bad_sample(path, f"`mask` has shape {shape}, expected [T]"))
    return None


def _bad_sample(path: Path, what: str) -> Check:
    return Check("error", "bad-sample", f"{path} {what}", str(path),
                 "preprocess the dataset again into a new folder with the current trainer")


def _check_video(root: Path, path: Path, source: str, data: Mapping[str, Any], planned: list[Bucket],
                 checks: list[Check]) -> str | None:
    key = "mask" if source == "video_masks" else "latents"
    shape = _shape(data.get(key))
    dims: tuple[int, int, int] | None = None
    if source == "video_masks" and shape is not None and len(shape) == 3:
        dims = (shape[0], shape[1], shape[2])
    elif key == "latents" and shape is not None and len(shape) == 4 and shape[0] == LATENT_CHANNELS:
        dims = (shape[1], shape[2], shape[3])
    elif key == "latents" and shape is not None and len(shape) == 2 and shape[1] == LATENT_CHANNELS:
        # Legacy [seq, C] latents: the trainer unpatchifies them with the stored grid size.
        grid = [data.get(name) for name in ("num_frames", "height", "width")]
        sizes = [int(n) for n in grid if isinstance(n, int) and n > 0]
        if len(sizes) == 3 and sizes[0] * sizes[1] * sizes[2] == shape[0]:
            dims = (sizes[0], sizes[1], sizes[2])
    if dims is None:
        expected = "[F', H', W']" if key == "mask" else f"[{LATENT_CHANNELS}, F', H', W'] (or legacy [seq, 128])"
        checks.append(_bad_sample(path, f"`{key}` has shape {shape}, expected {expected}"))
        return None
    stored = _as_bucket(*dims)
    if planned and not _fits(source, dims, planned):
        checks.append(Check(
            "error", "shape-mismatch",
            f"{source}/ was preprocessed at {stored} (sample {path}: {key} {list(shape or ())}), "
            f"not at the planned bucket(s) {format_buckets(planned)}", str(root / source),
            f"choose one: (1) reuse it at its resolution: plan bucket {stored}; (2) preprocess into a new "
            f"folder (e.g. {root.parent / '.precomputed-v2'}) for {format_buckets(planned)}; (3) abort"))
    return str(stored) if source == "latents" else None


def _reconcile(root: Path, mode: Mode, present: dict[str, list[str]], media: list[str], base: Path,
               checks: list[Check]) -> dict[str, tuple[str, ...]]:
    expected = {sample_name(base, value): value for value in media}
    dropped: dict[str, tuple[str, ...]] = {}
    for source in mode.precomputed_dirs:
        have = set(present.get(source, ()))
        if not have:
            continue  # an absent or empty source is an error reported already
        missing = tuple(value for name, value in expected.items() if _match_name(source, name) not in have)
        if missing:
            dropped[source] = missing
            checks.append(Check("warning", "dropped-clip",
                                f"{len(missing)} of {len(expected)} clip(s) in the metadata have no {source}/ file "
                                f"and will not be trained on: {name_some(missing)}", str(root / source),
                                _DROPPED_FIX.get(source, _DROPPED_FIX["*"])))
    primary = "latents" if "latents" in present else next(iter(present), None)
    if primary is not None:
        wanted = {_match_name(primary, name) for name in expected}
        extra = [name for name in present[primary] if name not in wanted]
        if extra:
            checks.append(Check("warning", "extra-samples",
                                f"{len(extra)} sample(s) in {primary}/ match no metadata row (left from an earlier "
                                f"dataset?) and will be trained on: {name_some(extra)}", str(root / primary),
                                "preprocess into a new folder from the current metadata, or accept them"))
    return dropped


_DROPPED_FIX = {
    "latents": "usually shorter than the smallest bucket or unreadable (see logs/preprocess.log); choose one: "
               "(1) a smaller bucket, (2) an extra shorter bucket (several buckets force "
               "optimization.batch_size: 1), (3) accept the loss",
    "audio_latents": "clips without an audio track get no audio latents and are dropped by an audio run; add "
                     "audio to them, remove them, or accept the loss",
    "*": "re-run the same preprocessing (finished files are skipped), or accept the loss",
}
