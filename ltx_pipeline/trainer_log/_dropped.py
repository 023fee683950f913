"""Items a trainer's dataset dropped with a warning, when the log shows nothing else that went wrong.

Trainers skip what they cannot use and go on: a media file that does not open ("Media file X could not be opened.
Skipping.", "Skipping X: failed to load"), a sample whose cached outputs are not in the cache directory
("Text encoder output cache file not found: X"). A run that then fails with no traceback of its own failed for
want of those items. An unreadable file is a dataset problem; a cache the training config cannot find is the
dataset config (caching run with another config, datasets sharing one cache directory). Only a log with no
traceback after the last such warning is read this way: an exception, when there is one, names its own cause.
Input lines have their launcher prefixes stripped already. Pure standard library.
"""

from __future__ import annotations

import re

from ltx_pipeline.trainer_log._detect import Finding
from ltx_pipeline.trainer_log._kinds import FixStep

__all__ = ["dropped_items_failure"]

_FAILED = r"(?:could not|couldn't|cannot|can't|failed to|unable to)\s+(?:be\s+)?(?:open|read|load|decod)\w*"
_UNREADABLE_RE = re.compile(rf"(?i)\b(?:media|image|video|audio|file)\b.*\b{_FAILED}\b.*\bskipp(?:ing|ed)\b|"
                            rf"\bskipp(?:ing|ed)\b.*\b(?:media|image|video|audio|file)\b.*\b{_FAILED}\b")
# A cache file the dataset expected and did not find; "not found, caching it now" is the cache being built.
_CACHE_MISSING_RE = re.compile(r"(?i)\bcache(?:d)?\b[\w ]{0,30}\bfiles?\b[\w ]{0,10}\b(?:not found|does not exist|"
                               r"is missing)\b(?!.*\b(?:creat|comput|generat|caching|will)\w*)")


def dropped_items_failure(lines: list[str]) -> Finding | None:
    """The dataset dropped files it could not read, or samples whose cache is missing, and nothing else failed."""
    text = [ln.strip() for ln in lines if ln.strip()]
    unreadable = [i for i, ln in enumerate(text) if _UNREADABLE_RE.search(ln)]
    uncached = [i for i, ln in enumerate(text) if _CACHE_MISSING_RE.search(ln)]
    last = max(unreadable + uncached, default=None)
    if last is None or any(ln.startswith("Traceback (most recent call last)") for ln in text[last:]):
        return None
    if uncached and uncached[-1] == last:
        return Finding("config_error", text[last], [
            FixStep(None, None, f"The training run found no cached outputs for {len(uncached)} sample(s) ("
                    f"{text[last]}): run the caching scripts (latents, then text encoder outputs) with the same "
                    "dataset config the training reads, and give each dataset its own cache_directory (two datasets "
                    "sharing a directory or cache directory mix up their caches)."),
        ])
    return Finding("dataset_error", text[last], [
        FixStep(None, None, f"The trainer skipped {len(unreadable)} file(s) it could not open ({text[last]}): "
                "re-encode or remove them; a file whose extension the trainer does not recognise (an upper-case "
                ".MP4, say) is opened as the wrong kind of media. With every file skipped nothing is left to train."),
    ])
