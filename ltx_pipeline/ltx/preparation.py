"""What the prepare phase will do with the user's input, decided from the probe's facts alone.

The plan states it before anything heavy runs ("split 2 long videos, caption 41 clips with offline,
hold out 4"), and the prepare phase carries out exactly this. Pure functions: the facts come in,
nothing is read or written here.

Rules (the official workflow's Phase 5): media are staged under the run's ``dataset/``; videos
longer than ``split_over_s`` are split into scenes; only clips without a caption are captioned; a
user's holdout file is used as it is, else about 10 % of the samples (at least 1, at most 20) are
held out with seed 42, and none below 8 samples unless asked for (``--holdout N``).
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import Any

from ltx_pipeline.errors import BadDataset
from ltx_pipeline.ltx.modes import Mode

__all__ = ["HOLDOUT_SEED", "PreparationPlan", "choose_holdout", "default_captioner", "holdout_count",
           "needs_captions", "plan_preparation"]

HOLDOUT_SEED = 42
_MIN_FOR_DEFAULT_HOLDOUT = 8
_PREPARABLE_COLUMNS = {"caption", "video"}  # a folder can give clips and captions, not references or masks


@dataclass(frozen=True)
class PreparationPlan:
    """The prepare phase's work, or why there is none."""

    needed: bool
    reason: str
    source_kind: str
    clips: int = 0  # media staged as they are
    long_videos: tuple[str, ...] = ()  # split into scenes (how many scenes is known only after detection)
    to_caption: int = 0  # of the staged clips (every scene of a split video is captioned too)
    captions_kept: int = 0
    captioner: str = ""
    holdout: str = ""
    split_over_s: float = 30.0
    min_scene_s: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        """One line: what will be done."""
        if not self.needed:
            return f"nothing to prepare: {self.reason}"
        parts = [f"stage {self.clips} clip(s)"] if self.clips else []
        if self.long_videos:
            parts.append(f"split {len(self.long_videos)} long video(s) into scenes")
        caption = f"caption {self.to_caption} clip(s)" if self.to_caption else "caption no clip"
        if self.long_videos:
            caption += " and every scene"
        parts.append(f"{caption} with {self.captioner}")
        if self.captions_kept:
            parts.append(f"keep {self.captions_kept} caption(s)")
        parts.append(f"hold out {self.holdout}")
        return ", ".join(parts)


def default_captioner(requested: str | None, backend: str) -> str:
    """The captioner a run uses: the request's, else the trainer's default (qwen_omni) on the ltx backend and
    the offline describer on the toy backends (which have no trainer checkout to run a model from)."""
    return requested or ("qwen_omni" if backend == "ltx" else "offline")


def needs_captions(dataset: dict[str, Any]) -> bool:
    """A folder, one video, or metadata with rows lacking a caption: the prepare phase will caption."""
    if dataset["kind"] in ("videos_folder", "video_file"):
        return True
    return dataset["kind"] == "metadata" and bool((dataset.get("metadata") or {}).get("empty_captions"))


def plan_preparation(*, dataset: dict[str, Any], facts: dict[str, dict[str, Any]], mode: Mode, captioner: str,
                     holdout: int | None, holdout_file: str | None, split_over_s: float,
                     min_scene_s: float) -> PreparationPlan:
    """Decide the prepare phase's work from the probe's dataset record and clip facts.

    Raises:
        BadDataset: the input needs preparing but the mode needs columns a folder cannot give.
    """
    kind = dataset["kind"]
    common = {"source_kind": kind, "captioner": captioner, "split_over_s": split_over_s, "min_scene_s": min_scene_s}
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
    long_videos = tuple(sorted(path for path, fact in facts.items() if _seconds(fact) > split_over_s))
    clips = len(facts) - len(long_videos)
    reason = "a folder of media without captions" if kind == "videos_folder" else "one video without captions"
    return PreparationPlan(True, reason, clips=clips, long_videos=long_videos, to_caption=clips,
                           holdout=_holdout_words(None if long_videos else clips, holdout, holdout_file), **common)


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


def _seconds(fact: dict[str, Any]) -> float:
    frames, fps = fact.get("frames"), fact.get("fps")
    if fact.get("duration_s") is not None:
        return float(fact["duration_s"])
    return float(frames) / float(fps) if frames and fps else 0.0


def _refuse_unpreparable(mode: Mode, path: str) -> None:
    extra = [c for c in mode.columns if c not in _PREPARABLE_COLUMNS]
    if extra:
        raise BadDataset(f"Mode {mode.name} needs {', '.join(extra)} for every clip, which a folder of clips cannot "
                         "give: the prepare phase only stages, splits and captions", where=path,
                         fix=f"write the metadata file with the {', '.join(mode.columns)} columns and pass it")
