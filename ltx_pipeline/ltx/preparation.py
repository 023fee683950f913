"""What the prepare phase will do with the user's input, decided from the probe's facts alone.

The plan states it before anything heavy runs ("split 2 long videos, caption 41 clips with offline,
hold out 4"), and the prepare phase carries out exactly this. Pure functions: the facts come in,
nothing is read or written here.

Rules (the official workflow's Phase 5): media are staged under the run's ``dataset/``; every video of a
folder or a single video file is looked at for scene cuts (``scenes/detect.py``, at plan time: the plan
states the scenes found), and a video with more than one scene is split into one clip per scene, whatever
its length; scenes shorter than the smallest bucket's frames are dropped and listed (the trainer cannot
fill a bucket from them); a video of one scene is staged as it is. Only clips without a caption are
captioned; a user's holdout file is used as it is, else about 10 % of the samples (at least 1, at most
20) are held out with seed 42, and none below 8 samples unless asked for (``--holdout N``). Rows of a
user's metadata file are never split: their captions describe the clip as it is.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

from ltx_pipeline.errors import BadDataset
from ltx_pipeline.ltx.modes import Mode
from ltx_pipeline.ltx.recipe import Recipe

__all__ = ["DEFAULT_VLLM_URL", "HOLDOUT_SEED", "CaptionerName", "PreparationPlan", "choose_holdout",
           "default_captioner", "holdout_count", "needs_captions", "plan_preparation", "samples_to_train",
           "smallest_bucket_frames", "videos_to_scan"]

HOLDOUT_SEED = 42
CaptionerName = Literal["offline", "qwen_omni", "gemini_flash"]
#: ``--vllm-url``'s default, qwen_omni's server (the trainer's docs/dataset-preparation.md).
DEFAULT_VLLM_URL = "http://127.0.0.1:8001/v1"
_MIN_FOR_DEFAULT_HOLDOUT = 8
_PREPARABLE_COLUMNS = {"caption", "video"}  # a folder can give clips and captions, not references or masks


@dataclass(frozen=True)
class PreparationPlan:
    """The prepare phase's work, or why there is none."""

    needed: bool
    reason: str
    source_kind: str
    clips: int = 0  # media staged as they are
    split_videos: tuple[str, ...] = ()  # videos of more than one scene, split into one clip per scene
    to_caption: int = 0  # of the staged clips (every scene of a split video is captioned too)
    captions_kept: int = 0
    captioner: str = ""
    holdout: str = ""
    scanned: int = 0  # videos looked at for cuts
    detector: str = ""  # the detector and its settings
    min_scene_frames: int = 0  # the smallest bucket's frames: shorter scenes are dropped
    # Per video looked at: {"video", "fps", "frames", "scenes": [[start, end), ...] kept, "dropped": [[start, end,
    # why], ...], "error"}; None for a plan made before scenes were found at plan time (prepare finds them then).
    scenes: tuple[dict[str, Any], ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PreparationPlan:
        """From ``to_dict``'s output, also an older run's (which split its ``long_videos`` by length)."""
        known = {key: value for key, value in data.items() if key in cls.__dataclass_fields__}
        if "long_videos" in data and "split_videos" not in data:
            known["split_videos"] = tuple(data["long_videos"])
        for key in ("split_videos",):
            known[key] = tuple(known.get(key) or ())
        if known.get("scenes") is not None:
            known["scenes"] = tuple(known["scenes"])
        return cls(**known)

    @property
    def scene_clips(self) -> int:
        """Clips the split videos give (scenes kept), when known."""
        return sum(len(entry["scenes"]) for entry in self.scenes or () if entry["video"] in self.split_videos)

    def summary(self) -> str:
        """One line: what will be done."""
        if not self.needed:
            return f"nothing to prepare: {self.reason}"
        parts = [f"stage {self.clips} clip(s)"] if self.clips else []
        if self.split_videos:
            scenes = f" ({self.scene_clips} clip(s))" if self.scenes is not None else ""
            parts.append(f"split {len(self.split_videos)} video(s) into scenes{scenes}")
        caption = f"caption {self.to_caption} clip(s)" if self.to_caption else "caption no clip"
        if self.split_videos:
            caption += " and every scene"
        parts.append(f"{caption} with {self.captioner}")
        if self.captions_kept:
            parts.append(f"keep {self.captions_kept} caption(s)")
        parts.append(f"hold out {self.holdout}")
        return ", ".join(parts)


    def scene_lines(self) -> list[str]:
        """plan.md's account of the scene cuts: which videos were looked at and what was found in each."""
        if not self.needed or self.source_kind == "metadata":
            return []
        if self.scenes is None:  # a plan made before cuts were found at plan time
            return [f"- Scene split: {len(self.split_videos)} video(s), cuts found by the prepare phase"]
        lines = [f"- Scene cuts: looked at {self.scanned} video(s), every one whatever its length, with "
                 f"{self.detector}; a video of more than one scene is split into one clip per scene; scenes "
                 f"shorter than {self.min_scene_frames} frames (the smallest bucket) are dropped"]
        single = [entry for entry in self.scenes if not entry.get("error") and entry["video"] not in self.split_videos]
        for entry in self.scenes:
            name = Path(entry["video"]).name
            if entry.get("error"):
                lines.append(f"  - `{name}`: not looked at ({entry['error']}); staged as it is")
            elif entry["video"] in self.split_videos:
                fps = float(entry["fps"])
                kept = ", ".join(f"{a / fps:.1f}-{b / fps:.1f} s" for a, b in entry["scenes"]) or "none"
                lost = "; ".join(f"{a / fps:.1f}-{b / fps:.1f} s ({why})" for a, b, why in entry["dropped"])
                lines.append(f"  - `{name}`: {len(entry['scenes']) + len(entry['dropped'])} scenes, "
                             f"{len(entry['scenes'])} kept ({kept})" + (f"; dropped: {lost}" if lost else ""))
        if single:
            names = ", ".join(f"`{Path(entry['video']).name}`" for entry in single[:8])
            more = f" and {len(single) - 8} more" if len(single) > 8 else ""
            lines.append(f"  - one scene each, staged as they are: {names}{more}")
        return lines


def default_captioner(requested: CaptionerName | None, backend: str) -> CaptionerName:
    """The captioner a run uses: the request's, else the trainer's default (qwen_omni) on the ltx backend and
    the offline describer on the toy backends (which have no trainer checkout to run a model from)."""
    return requested or ("qwen_omni" if backend == "ltx" else "offline")


def needs_captions(dataset: dict[str, Any]) -> bool:
    """A folder, one video, or metadata with rows lacking a caption: the prepare phase will caption."""
    if dataset["kind"] in ("videos_folder", "video_file"):
        return True
    return dataset["kind"] == "metadata" and bool((dataset.get("metadata") or {}).get("empty_captions"))


def videos_to_scan(dataset: dict[str, Any], facts: dict[str, dict[str, Any]]) -> list[str]:
    """The videos to look at for scene cuts: every readable video of a folder or a single video file."""
    if dataset["kind"] not in ("videos_folder", "video_file"):
        return []
    return sorted(path for path, fact in facts.items() if fact.get("kind") == "video")


def smallest_bucket_frames(recipe: Recipe) -> int:
    """The fewest frames of any bucket of any stage of ``recipe``."""
    return min(int(bucket.split("x")[2]) for stage in recipe.stages for bucket in stage.buckets)


def plan_preparation(*, dataset: dict[str, Any], facts: dict[str, dict[str, Any]], mode: Mode, captioner: str,
                     holdout: int | None, holdout_file: str | None, scans: dict[str, dict[str, Any]],
                     min_frames: int, detector: str) -> PreparationPlan:
    """Decide the prepare phase's work from the probe's dataset record and clip facts, and the scene cuts
    ``scans`` found in ``videos_to_scan`` (path -> ``scenes.scan.scan_videos``'s record).

    Raises:
        BadDataset: the input needs preparing but the mode needs columns a folder cannot give.
    """
    kind = dataset["kind"]
    common: dict[str, Any] = {"source_kind": kind, "captioner": captioner}
    if not needs_captions(dataset):
        reason = ("the metadata has every column the mode needs and a caption in each row" if kind == "metadata"
                  else f"a {kind.replace('_', ' ')} is trained on as it is")
        return PreparationPlan(False, reason, **common)
    if kind == "metadata":
        meta = dataset.get("metadata") or {}
        empty = int(meta.get("empty_captions") or 0)
        rows = int(meta.get("rows") or 0)
        _refuse_unpreparable(mode, dataset["path"])
        return PreparationPlan(True, f"{empty} of {rows} rows have no caption", clips=rows, to_caption=empty,
                               captions_kept=rows - empty,
                               holdout=_holdout_words(rows, holdout, holdout_file), **common)
    _refuse_unpreparable(mode, dataset["path"])
    scenes = tuple(_scenes_of(path, scan, min_frames) for path, scan in sorted(scans.items()))
    split = tuple(entry["video"] for entry in scenes if len(entry["scenes"]) + len(entry["dropped"]) > 1)
    clips = len(facts) - len(split)
    reason = "a folder of media without captions" if kind == "videos_folder" else "one video without captions"
    plan = PreparationPlan(True, reason, clips=clips, split_videos=split, to_caption=clips, scanned=len(scans),
                           detector=detector, min_scene_frames=min_frames, scenes=scenes, **common)
    if scenes and not clips + plan.scene_clips:
        raise BadDataset(f"No clip of {dataset['path']} is long enough to train on: every scene is shorter than "
                         f"{min_frames} frames (the smallest bucket)", where=str(dataset["path"]),
                         fix="use a bucket with fewer frames (--buckets), or longer clips")
    return replace(plan, holdout=_holdout_words(clips + plan.scene_clips, holdout, holdout_file))


def samples_to_train(dataset: dict[str, Any], preparation: PreparationPlan, *, holdout: int | None,
                     holdout_file: str | None) -> int | None:
    """The samples the plan can count before preparing: the rows (or prepared clips and scenes, or the
    precomputed latents) less the held-out ones; None where it cannot count them. The data check still counts
    what preprocessing kept (a clip can be dropped there), and validate refuses a launch with too few."""
    if preparation.needed:
        samples = preparation.clips + preparation.scene_clips
    elif dataset["kind"] == "metadata":
        samples = int((dataset.get("metadata") or {}).get("rows") or 0)
    elif dataset["kind"] == "precomputed":
        samples = int(((dataset.get("precomputed") or {}).get("subfolders") or {}).get("latents") or 0)
    else:
        return None
    if samples <= 0:
        return None
    if holdout_file or (holdout is not None and holdout >= samples):
        return samples  # held out in a file of its own / refused with its own message
    return samples - holdout_count(samples, holdout)


def holdout_count(samples: int, requested: int | None) -> int:
    """How many samples to hold out: the request's number, else ~10 % (1..20) from 8 samples up.

    Raises:
        BadDataset: the request holds out every sample (nothing would be left to train on).
    """
    if requested is not None:
        if requested >= samples:
            raise BadDataset(f"--holdout {requested} leaves nothing to train on: the dataset has {samples} "
                             "sample(s)", where="--holdout", fix=f"hold out fewer than {samples} (0 for none)")
        return requested
    if samples < _MIN_FOR_DEFAULT_HOLDOUT:
        return 0
    return max(1, min(20, round(samples * 0.1)))


def choose_holdout(ids: list[str], count: int) -> list[str]:
    """``count`` of ``ids`` chosen with seed 42, in their original order (same ids, same choice)."""
    chosen = set(random.Random(HOLDOUT_SEED).sample(sorted(ids), count)) if count else set()
    return [i for i in ids if i in chosen]


def _holdout_words(samples: int | None, requested: int | None, holdout_file: str | None) -> str:
    if holdout_file:
        return f"the rows of {holdout_file} (your file, used as it is)"
    if requested is not None:
        if samples is not None:
            holdout_count(samples, requested)  # refused here, before approval, when it leaves nothing to train on
        return f"{requested} sample(s) (--holdout, seed {HOLDOUT_SEED})"
    if samples is None:
        return f"~10 % of the clips after splitting (1 to 20, seed {HOLDOUT_SEED}; none below 8)"
    count = holdout_count(samples, None)
    if not count:
        return f"none ({samples} samples, fewer than 8; --holdout N reserves some)"
    return f"{count} of {samples} sample(s) (seed {HOLDOUT_SEED})"


def _scenes_of(path: str, scan: dict[str, Any], min_frames: int) -> dict[str, Any]:
    """One video's scenes from its cuts: those of at least ``min_frames`` kept, the others dropped with why."""
    entry: dict[str, Any] = {"video": path, "fps": scan.get("fps"), "frames": scan.get("frames"), "scenes": [],
                             "dropped": [], "error": scan.get("error")}
    if scan.get("error"):
        return entry  # staged as it is; the plan says it could not be looked at
    bounds = [0, *scan["cuts"], int(scan["frames"])]
    for start, end in zip(bounds, bounds[1:], strict=False):
        if end - start >= min_frames:
            entry["scenes"].append([start, end])
        else:
            entry["dropped"].append([start, end, f"{end - start} frames < {min_frames} (the smallest bucket)"])
    return entry


def _refuse_unpreparable(mode: Mode, path: str) -> None:
    extra = [c for c in mode.columns if c not in _PREPARABLE_COLUMNS]
    if extra:
        raise BadDataset(f"Mode {mode.name} needs {', '.join(extra)} for every clip, which a folder of clips cannot "
                         "give: the prepare phase only stages, splits and captions", where=path,
                         fix=f"write the metadata file with the {', '.join(mode.columns)} columns and pass it")
