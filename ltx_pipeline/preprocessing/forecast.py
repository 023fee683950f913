"""What a run's preprocessing will take from the latent cache, what it will encode, and why: from keys alone.

Owns the forecast plan.md shows (#44). The run's preprocessing steps are taken in the order they run (the
autotune sanity set, then each stage's full set); each is keyed exactly as preprocessing keys it
(``cache_plan.plan_stage``: no model is loaded, and media digests are remembered by path, size and mtime),
checked against the cache's entries and against what the run's earlier steps will have added, and each miss
is explained by ``cache.explain_miss`` (new clip, caption changed, other bucket, other model, other trainer
version). Invariant: files are counted as ``from_cache.fill_from_cache`` counts them (its narrated "X of Y
file(s) came from the latent cache"), so while no other run changes the cache the forecast is what
preprocessing then does. A folder of the run's own that already holds the stage is reused as it is, and a
stage the cache cannot key is preprocessed whole: both are said, with the reason.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ltx_pipeline.cache import CacheKey, EntryStore, Miss, Modality, explain_miss
from ltx_pipeline.cache.hits import stage_label
from ltx_pipeline.env_names import LATENT_CACHE_ENV
from ltx_pipeline.ltx.audio_choice import preprocess_flags
from ltx_pipeline.ltx.autotune import search_space
from ltx_pipeline.ltx.buckets import Bucket, format_buckets
from ltx_pipeline.ltx.modes import Mode
from ltx_pipeline.ltx.recipe import Recipe
from ltx_pipeline.preprocessing.cache_plan import CachePlan, RowPlan, cache_store, plan_stage, unkeyed_reason
from ltx_pipeline.preprocessing.run import model_files, read_identity, stage_identity
from ltx_pipeline.workspace import RunPaths

__all__ = ["FOLDER_ORDER", "FolderForecast", "Forecast", "Sanity", "Step", "StepForecast", "forecast", "run_steps",
           "sanity_rows", "stage_folder"]

#: The subfolders in the order plan.md lists them (latents, audio latents, conditions), others after.
FOLDER_ORDER = ("latents", "audio_latents", "conditions")
_CONTENT_PARTS = ("media", "caption")  # as ``cache.misses`` ranks the nearest key: same content first
_UNREAD = "a clip cannot be read, or two rows name one file"


@dataclass(frozen=True)
class Step:
    """One preprocessing of the run: the sanity set (``stage`` 0, the rows at ``indices``) or a stage's full set."""

    stage: int
    metadata_file: Path
    buckets: tuple[Bucket, ...]
    output_dir: Path
    extra_flags: tuple[str, ...] = ()
    indices: tuple[int, ...] | None = None
    holder: int | None = None  # the sanity set: the stage whose entries it is linked from

    @property
    def label(self) -> str:
        """As preprocessing names it in its narration."""
        return stage_label(self.stage).capitalize()


@dataclass(frozen=True)
class FolderForecast:
    """One subfolder of a step: files linked from the cache, files to encode, and the misses' reasons with counts."""

    folder: str
    cached: int
    encode: int
    reasons: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class StepForecast:
    """One step: per subfolder counts; or why it does not use the cache (``reused``: the run's folder holds it;
    ``whole``: it cannot be keyed and is preprocessed whole)."""

    step: Step
    folders: tuple[FolderForecast, ...] = ()
    made_before: int = 0  # of the cached files, those an earlier step of this run encodes
    reused: bool = False
    whole: str | None = None

    @property
    def cached(self) -> int:
        return sum(f.cached for f in self.folders)

    @property
    def encode(self) -> int:
        return sum(f.encode for f in self.folders)

    @property
    def files(self) -> int:
        return self.cached + self.encode


@dataclass(frozen=True)
class Forecast:
    """The run's steps against the cache at ``root`` (``entries`` complete entries then); ``off`` says why none."""

    root: Path | None
    entries: int
    steps: tuple[StepForecast, ...]
    off: str | None = None


def stage_folder(dataset_dir: Path, index: int) -> Path:
    """The run's own folder a stage is preprocessed into (stage 1: ``.precomputed``; later: one each)."""
    return dataset_dir / (".precomputed" if index == 1 else f".precomputed-stage-{index}")


def sanity_rows(recipe: Recipe, tier_base: str, processes: int, samples: int) -> int:
    """How many rows autotune's sanity set holds: the largest batch its search space tries, at most the samples.

    Mirrors ``autotune.sweep.Sweep`` (the batch every process can be fed) and the autotune phase's subset.
    """
    knobs = recipe.knobs
    per_gpu = int(knobs["batch_size"]) * int(knobs.get("gradient_accumulation_steps") or 1)
    multi = any(len(stage.buckets) > 1 for stage in recipe.stages)
    limit = max(1, samples // max(1, processes)) if samples else None
    largest = max(int(k["batch_size"]) for k in search_space(tier_base, per_gpu, multi, knobs, max_batch=limit))
    return max(1, min(largest, samples or largest))


@dataclass(frozen=True)
class Sanity:
    """Autotune's sanity set: ``count`` rows at the plan's largest ``bucket``, into ``output_dir``."""

    bucket: Bucket
    count: int
    output_dir: Path
    extra_flags: tuple[str, ...]
    metadata_file: Path  # the rows it is taken from (stage 1 may be your own folder, and not a step)


def run_steps(paths: RunPaths, metadata_file: Path, stages: Sequence[tuple[Bucket, ...]], mode: Mode,
              sanity: int | None, *, reuse_first: bool = False) -> tuple[tuple[Step, ...], Sanity | None]:
    """The run's stages to preprocess (``stages`` numbered from 1 as the data check numbers them; ``reuse_first``:
    stage 1 is your own verified folder) and autotune's sanity set (``sanity`` rows at the largest bucket, the
    sound skipped for a video-only run; None: no trial runs)."""
    flags = tuple(preprocess_flags(mode))  # a video-only run encodes no sound, in its stages as in its sanity set
    steps = tuple(Step(index, metadata_file, buckets, stage_folder(paths.dataset, index), flags)
                  for index, buckets in enumerate(stages, start=1) if not (index == 1 and reuse_first))
    if sanity is None or not stages:
        return steps, None
    largest = max((b for buckets in stages for b in buckets), key=lambda b: b.tokens)
    return steps, Sanity(largest, sanity, paths.overfit / ".precomputed", flags, metadata_file)


def forecast(ctx: Any, stages: Sequence[Step], sanity: Sanity | None, *, mode: Mode, model_path: str,
             text_encoder_path: str) -> Forecast:
    """Each preprocessing's files from the cache and to encode, with reasons, in the order the run makes them; no
    model is loaded, nothing is written but the workspace's record of media digests and model identities.

    ``ctx`` is what ``plan_stage`` reads (workspace, paths, request's trigger, backend).
    """
    store = cache_store(ctx.workspace)
    if store is None:
        return Forecast(None, 0, (), off=f"{LATENT_CACHE_ENV}=off")
    known = _Known(_entry_keys(store))
    entries = len(known.names)
    files = model_files(ctx.workspace, model_path, text_encoder_path)
    plans: dict[Step, CachePlan | None] = {}

    def plan_of(step: Step) -> CachePlan | None:
        if step not in plans:
            plans[step] = plan_stage(ctx, mode=mode, metadata_file=step.metadata_file, buckets=step.buckets,
                                     files=files, extra_flags=list(step.extra_flags))
        return plans[step]

    done = []
    for step in _order(stages, sanity, plan_of):
        if _reused(ctx, step, model_path, text_encoder_path):
            done.append(StepForecast(step, reused=True))
            continue
        plan = plan_of(step)
        if plan is None:
            why = unkeyed_reason(step.metadata_file, step.buckets, step.extra_flags) or _UNREAD
            done.append(StepForecast(step, whole=why))
            continue
        rows = plan.rows if step.indices is None else [plan.rows[i] for i in step.indices if i < len(plan.rows)]
        done.append(_count(step, [(output.folder, want.key) for row in rows for output, want in row.outputs], known))
    return Forecast(store.root, entries, tuple(done))


def _order(stages: Sequence[Step], sanity: Sanity | None,
           plan_of: Callable[[Step], CachePlan | None]) -> list[Step]:
    """The order the run preprocesses in (``preprocessing.sanity_set``): the first stage holding the sanity
    bucket, then the sanity set linked from the rows of it whose clips land in that bucket, then the other
    stages; else, when that stage cannot be keyed or too few of its clips land there, the sanity set's first
    rows on their own, then every stage."""
    if sanity is None:
        return list(stages)
    holder = next((s for s in stages if sanity.bucket in s.buckets), None)
    plan = plan_of(holder) if holder is not None else None
    if holder is not None and plan is not None:
        landing = [row.index for row in plan.rows if _landing(row) == str(sanity.bucket)][:sanity.count]
        if len(landing) == sanity.count:
            linked = Step(0, holder.metadata_file, (sanity.bucket,), sanity.output_dir, sanity.extra_flags,
                          tuple(landing), holder=holder.stage)
            return [holder, linked, *(s for s in stages if s is not holder)]
    first = Step(0, sanity.metadata_file, (sanity.bucket,), sanity.output_dir,
                 sanity.extra_flags, tuple(range(sanity.count)))
    return [first, *stages]


def _landing(row: RowPlan) -> str | None:
    """The bucket a row's clip lands in, as its latents are keyed (None: too short for every bucket)."""
    return next((want.key.parts["bucket"].value for _, want in row.outputs if "bucket" in want.key.parts), None)


def _count(step: Step, wanted: list[tuple[str, CacheKey]], known: _Known) -> StepForecast:
    """Count one step's files against ``known``, then add its keys (made by it, for the steps after it)."""
    cached: Counter[str] = Counter()
    reasons: dict[str, Counter[str]] = defaultdict(Counter)
    made_before = 0
    for folder, key in wanted:
        if key.name in known.names:
            cached[folder] += 1
            made_before += key.name in known.made
        else:
            reasons[folder][" + ".join(known.explain(key).reasons)] += 1
    for _, key in wanted:  # after counting: two rows sharing a missing key are both missing, as assembly counts
        known.add(key, made=True)
    folders = sorted({folder for folder, _ in wanted},
                     key=lambda f: (FOLDER_ORDER.index(f) if f in FOLDER_ORDER else len(FOLDER_ORDER), f))
    return StepForecast(step, tuple(
        FolderForecast(f, cached[f], sum(reasons[f].values()),
                       tuple(sorted(reasons[f].items(), key=lambda item: (-item[1], item[0])))) for f in folders),
        made_before=made_before)


def _reused(ctx: Any, step: Step, model_path: str, text_encoder_path: str) -> bool:
    """The run's folder already holds this step's data with its identity (preprocessing verifies and reuses it)."""
    folder = step.output_dir
    if not folder.is_dir() or not any(folder.iterdir()):
        return False
    recorded = read_identity(folder)
    if recorded is None or recorded.get("legacy"):
        return False
    identity = stage_identity(ctx, model_path=model_path, text_encoder_path=text_encoder_path,
                              buckets=format_buckets(step.buckets), extra_flags=step.extra_flags)
    return bool(recorded.get("digest") == identity["digest"])


def _entry_keys(store: EntryStore) -> Iterable[CacheKey]:
    for folder in store.entries():
        entry = store.read(folder)
        if entry is not None:
            yield entry.key


class _Known:
    """The keys in the cache and those this run's earlier steps make, indexed so that a miss is explained
    against the few keys ``explain_miss`` would pick from (same content, else same row), not every entry."""

    def __init__(self, keys: Iterable[CacheKey]) -> None:
        self.names: set[str] = set()
        self.made: set[str] = set()
        self._by_content: dict[tuple[Modality, str], list[CacheKey]] = defaultdict(list)
        self._by_subject: dict[tuple[Modality, str], list[CacheKey]] = defaultdict(list)
        self._any: dict[Modality, CacheKey] = {}
        for key in keys:
            self.add(key)

    def add(self, key: CacheKey, *, made: bool = False) -> None:
        if key.name in self.names:
            return
        self.names.add(key.name)
        if made:
            self.made.add(key.name)
        self._by_content[(key.modality, _content(key))].append(key)
        if key.subject:
            self._by_subject[(key.modality, key.subject)].append(key)
        self._any.setdefault(key.modality, key)

    def explain(self, key: CacheKey) -> Miss:
        """``explain_miss`` over the earlier keys it would rank nearest: those of the same content, else of the
        same row; else any one key of the modality (an unrelated neighbour only ever makes the key new)."""
        pool = self._by_content.get((key.modality, _content(key))) \
            or (self._by_subject.get((key.modality, key.subject)) if key.subject else None) \
            or [k for k in (self._any.get(key.modality),) if k is not None]
        return explain_miss(key, pool)


def _content(key: CacheKey) -> str:
    part = next((key.parts[name] for name in _CONTENT_PARTS if name in key.parts), None)
    return part.value if part is not None else ""
