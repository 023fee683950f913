"""The autotune sanity set, taken from the full set's entries in the latent cache so no clip is encoded twice.

Owns making the sanity set: a few rows preprocessed at the plan's largest bucket into the run's
``overfit/.precomputed``. When the training stage whose buckets hold that bucket is preprocessed by the
pipeline through the latent cache, that stage is preprocessed first, with exactly the arguments its launch
uses (``training.launch``), so train later finds its folder verified and starts no process for it. The sanity
rows are then the first rows whose clip lands in the sanity bucket in that stage (``cache_plan.landing_bucket``).
Their files are the stage's entries, linked into the sanity folder with no process of their own.

Otherwise the first rows are preprocessed at the sanity bucket on their own, as before the cache, and the
narration says why: a stage the cache cannot key (references, masks, an ``audio`` column, the cache off),
a stage that reuses the user's own ``.precomputed``, or too few rows landing in the sanity bucket. The
simulated backend reads no data, and a verified ``.precomputed`` given as the dataset already holds every
bucket: neither is preprocessed. The sanity folder's identity (the sanity bucket, and ``--skip-audio`` for a
video-only run) is what it was before, so a resumed run reuses what it made.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ltx_pipeline.cache import Modality
from ltx_pipeline.ltx.audio_choice import preprocess_flags, trained_mode
from ltx_pipeline.ltx.buckets import Bucket, parse_buckets
from ltx_pipeline.ltx.modes import Mode, get_mode
from ltx_pipeline.outputs.config_patch import ConfigPatchOutputs
from ltx_pipeline.outputs.data_check import DataCheckOutputs, DataStage
from ltx_pipeline.outputs.plan import PlanOutputs
from ltx_pipeline.preprocessing.cache_plan import CachePlan, RowPlan, cache_store, plan_stage
from ltx_pipeline.preprocessing.run import model_files, preprocess, write_subset_metadata

if TYPE_CHECKING:
    from ltx_pipeline.phase_context import LtxContext

__all__ = ["StagePreprocess", "prepare_sanity_set", "sanity_rows_from_stage"]


@dataclass(frozen=True)
class StagePreprocess:
    """A stage's full-set preprocessing, with the arguments its launch gives ``preprocess`` (the mode's flags
    alone, ``--skip-audio`` for a video-only run: the folder's identity is the one train verifies)."""

    mode: Mode
    metadata_file: Path
    buckets: tuple[Bucket, ...]
    output_dir: Path
    stage: int
    model_path: str
    text_encoder_path: str
    pairing: dict[str, Any] | None = None

    @classmethod
    def of(cls, ctx: LtxContext, data_stage: DataStage) -> StagePreprocess:
        """As ``training.launch`` preprocesses ``data_stage`` (source ``preprocess``: its metadata is set)."""
        patch, data = ctx.output(ConfigPatchOutputs), ctx.output(DataCheckOutputs)
        return cls(mode=_mode(ctx), metadata_file=Path(str(data_stage.metadata_file)),
                   buckets=parse_buckets(data_stage.buckets), output_dir=Path(data_stage.preprocessed_root),
                   stage=data_stage.index, model_path=patch.model_path, text_encoder_path=patch.text_encoder_path,
                   pairing=data.conditions_pairing.model_dump(mode="json") if data.conditions_pairing else None)

    def run(self, ctx: Any) -> dict[str, Any]:
        return preprocess(ctx, mode=self.mode, metadata_file=self.metadata_file, buckets=self.buckets,
                          output_dir=self.output_dir, stage=self.stage, model_path=self.model_path,
                          text_encoder_path=self.text_encoder_path, pairing=self.pairing,
                          extra_flags=preprocess_flags(self.mode))

    def plan(self, ctx: Any) -> CachePlan | None:
        """The stage's cache plan as ``preprocess`` makes it (None: preprocessed whole, by one script)."""
        if not _inside(self.output_dir, ctx.paths.root):
            return None
        return plan_stage(ctx, mode=self.mode, metadata_file=self.metadata_file, buckets=self.buckets,
                          extra_flags=preprocess_flags(self.mode),
                          files=model_files(ctx.workspace, self.model_path, self.text_encoder_path))


def prepare_sanity_set(ctx: LtxContext, max_batch: int) -> str:
    """Make the sanity data (as many rows as the largest batch tried, at the largest bucket); its folder."""
    data = ctx.output(DataCheckOutputs)
    sanity = data.sanity
    if not data.metadata_file:  # a verified .precomputed dataset: its latents already hold every bucket
        return data.stages[0].preprocessed_root
    count = max(1, min(max_batch, data.samples or max_batch))
    target = ctx.paths.overfit / "sanity.json"
    if not ctx.backend.capabilities.uses_real_files:
        _, written = write_subset_metadata(ctx, Path(data.metadata_file), count, target)
        ctx.narrate(f"Sanity set: {written} sample(s) at {sanity.bucket} (the simulated trainer reads no data).")
        return sanity.preprocessed_root
    buckets = parse_buckets(sanity.bucket)
    stage = _stage_holding(data, buckets[0])
    indices = sanity_rows_from_stage(ctx, StagePreprocess.of(ctx, stage), buckets[0], count) \
        if stage is not None else _as_before(ctx, f"the latents at {sanity.bucket} come from the dataset's own "
                                                  ".precomputed")
    # The stage's metadata is the checked one (data_check), so the indices are rows of this file.
    subset, _ = write_subset_metadata(ctx, Path(data.metadata_file), count, target, indices=indices)
    patch, mode = ctx.output(ConfigPatchOutputs), _mode(ctx)
    preprocess(ctx, mode=mode, metadata_file=subset, buckets=buckets, output_dir=Path(sanity.preprocessed_root),
               stage=0, model_path=patch.model_path, text_encoder_path=patch.text_encoder_path,
               pairing=data.conditions_pairing.model_dump(mode="json") if data.conditions_pairing else None,
               extra_flags=preprocess_flags(mode))
    return sanity.preprocessed_root


def sanity_rows_from_stage(ctx: Any, stage: StagePreprocess, bucket: Bucket, count: int) -> list[int] | None:
    """Preprocess ``stage`` first and return the indices of the first ``count`` rows it put in ``bucket``, each
    with every file in the cache; None (narrated) when the sanity set must be preprocessed on its own.

    Nothing is preprocessed when the stage cannot be keyed or too few of its clips land in ``bucket``.
    """
    plan = stage.plan(ctx)
    if plan is None:
        off = cache_store(ctx.workspace) is None
        return _as_before(ctx, "the latent cache is off" if off else
                          f"stage {stage.stage}'s rows cannot be keyed in the latent cache (references, masks, "
                          "an audio column, a flag it does not know, an unreadable clip or two rows naming one file)")
    landing = _landing_rows(plan, bucket, count)
    if len(landing) < count:
        return _as_before(ctx, f"{len(landing)} of stage {stage.stage}'s clip(s) land in {bucket}, "
                          f"fewer than the {count} it needs")
    stage.run(ctx)
    missing = [row.index for row in landing if any(plan.store.get(want.key) is None for _, want in row.outputs)]
    if missing:
        return _as_before(ctx, f"{len(missing)} of its rows have no file in the latent cache after stage "
                          f"{stage.stage}'s preprocessing")
    ctx.narrate(f"Sanity set: {count} row(s) whose clips land in {bucket} in stage {stage.stage}, linked from "
                "the latent cache entries that stage's preprocessing made (no encoding of their own).")
    return [row.index for row in landing]


def _landing_rows(plan: CachePlan, bucket: Bucket, count: int) -> list[RowPlan]:
    """The first ``count`` rows (metadata order) whose clip lands in ``bucket`` among the stage's buckets: the
    bucket their video latents are keyed under (``cache_plan.landing_bucket``, from the clip's header)."""
    wanted = str(bucket)
    found = [row for row in plan.rows
             if any(want.key.modality is Modality.VIDEO and want.key.parts["bucket"].value == wanted
                    for _, want in row.outputs)]  # a clip too short for every bucket has no wants
    return found[:count]


def _as_before(ctx: Any, why: str) -> list[int] | None:
    """Narrate why the sanity set is made as before the cache; None: its rows are the metadata's first."""
    ctx.narrate(f"Sanity set: taken from the first rows and preprocessed at its bucket on its own, as before the "
                f"latent cache: {why}.")
    return None


def _stage_holding(data: DataCheckOutputs, bucket: Bucket) -> DataStage | None:
    """The first stage the pipeline preprocesses whose buckets hold ``bucket`` (a continuation shares its
    folder with the stage it continues: the first index is the one preprocessed)."""
    for stage in sorted(data.stages, key=lambda s: s.index):
        if stage.source == "preprocess" and stage.metadata_file and bucket in parse_buckets(stage.buckets):
            return stage
    return None


def _mode(ctx: LtxContext) -> Mode:
    return trained_mode(get_mode(ctx.request.mode), ctx.output(PlanOutputs).audio)  # video only: no audio gate


def _inside(path: Path, root: Path) -> bool:
    resolved, base = path.resolve(), root.resolve()
    return resolved != base and base in resolved.parents
