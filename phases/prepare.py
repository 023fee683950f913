"""Prepare phase: from a folder of clips, one long video, or metadata with captions missing, to a
captioned, split, audited ``<run>/dataset/dataset.json``, then a second approval gate on the captions.

It carries out what the plan stated (``ltx/preparation.py``): media are staged under the run's
``dataset/media/`` (symlinks; copies across file systems) because the trainer resolves media against the
metadata file, and the user's files are never moved or edited; each video in which the plan found more
than one scene is cut at the plan's cuts (``scenes/detect.py``) into ``dataset/scenes/``, scenes shorter
than the smallest bucket dropped and listed (a plan made before cuts were found at plan time has them found
here, with the same detector); only clips without a caption are
captioned (``captioning``), with progress kept in ``dataset/captions.json`` after each clip, so a
killed engine captions nothing twice; a holdout is reserved into ``dataset/holdout.jsonl``. Three
captions are shown in full and the run stops at a gate bound to the hash of ``dataset.json`` and
``holdout.jsonl``: editing either by hand and resuming keeps the edits, re-hashes and asks again.
Skipped, with its reason, when the metadata already has a caption in every row.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from ltx_pipeline.captioning import CaptionBook, Captioner, make_captioner
from ltx_pipeline.engine import PhaseResult
from ltx_pipeline.engine.fingerprint import digest, file_digest
from ltx_pipeline.errors import BadDataset, LtxPipelineError
from ltx_pipeline.ltx.metadata import read_metadata_rows, resolve_media
from ltx_pipeline.ltx.preparation import PreparationPlan, choose_holdout, holdout_count, smallest_bucket_frames
from ltx_pipeline.outputs.plan import PlanOutputs
from ltx_pipeline.outputs.prepare import CaptionCounts, PreparedDataset, PrepareOutputs
from ltx_pipeline.outputs.probe import ClipFrames, ProbeOutputs
from ltx_pipeline.phase_context import LtxContext
from ltx_pipeline.probing import DatasetInfo, media_rows, read_clips, to_plain
from ltx_pipeline.scenes import DETECTOR, Scene, cut_scenes, detect_scenes
from ltx_pipeline.workspace import atomic_write, ensure_inside

__all__ = ["PHASE"]

# split_over_s and min_scene_s are no longer read (deprecated): kept here so that an existing run's prepare phase
# is not re-run by their absence.
_REQUEST_INPUTS = ("dataset", "captioner", "vllm_url", "holdout", "holdout_file", "split_over_s", "min_scene_s",
                   "trigger", "trainer_root")


class PreparePhase:
    name = "prepare"
    heavy = True  # captioning and scene splitting run only after the plan is approved
    outputs_type = PrepareOutputs

    def __init__(self) -> None:
        self._built: tuple[LtxContext, Captioner] | None = None  # the captioner of the context it was built for

    def fingerprint(self, ctx: LtxContext) -> dict[str, Any]:
        preparation = _preparation(ctx)
        asked = ctx.request.model_dump(mode="json")  # as asked: a resolved default stays None, as it always was
        return {"run request": {key: asked[key] for key in _REQUEST_INPUTS},
                "plan": digest(preparation.to_dict()),
                "input": digest(to_plain(ctx.output(ProbeOutputs).dataset)),
                "captioner": self._captioner_settings(ctx, preparation.captioner) if preparation.needed else None,
                # The user's hand edits of dataset.json / holdout.jsonl re-run this phase, which keeps them and asks
                # again; what this phase wrote itself is no change.
                "captions edited": _Files(ctx.paths.dataset).edits()}

    def run(self, ctx: LtxContext) -> PhaseResult[PrepareOutputs]:
        plan = _preparation(ctx)
        if not plan.needed:
            ctx.narrate(f"Nothing to prepare: {plan.reason}.")
            return PhaseResult(PrepareOutputs(prepared=False, reason=plan.reason))
        ctx.narrate(f"Preparing the dataset under {ctx.paths.dataset}: {plan.summary()}. Your files are linked "
                    "or copied, never moved or edited.")
        files = _Files(ctx.paths.dataset)
        edits = files.edits()  # this run's fingerprint part, recorded with what it writes
        min_frames = smallest_bucket_frames(ctx.output(PlanOutputs).recipe)
        clips, kept, dropped = self._stage(ctx, plan, ctx.output(ProbeOutputs).dataset, files, min_frames)
        captions, written = self._caption(ctx, plan, clips, kept, files)
        rows = [{"caption": captions[rel], "video": rel} for rel in clips]
        held = self._write_rows(ctx, rows, files)
        metadata_text = files.metadata.read_text(encoding="utf-8")
        holdout_text = files.holdout.read_text(encoding="utf-8") if files.holdout.exists() else ""
        files.remember(edits, ctx.workspace)
        report = read_clips(media_rows(files.metadata), cache=ctx.journal)
        audit = _audit(report.facts, files, len(rows) - len(held), written, len(kept), held, dropped)
        ctx.narrate(audit)
        self._spot_check(ctx, files)
        outputs = PrepareOutputs(
            prepared=True, reason=plan.reason, metadata_file=str(files.metadata),
            holdout_file=str(files.holdout) if holdout_text else None, holdout_ids=tuple(held),
            samples=len(rows) - len(held), captioner=plan.captioner,
            captions=CaptionCounts(written=written, kept=len(kept)), dropped_scenes=tuple(dropped), audit=audit,
            dataset=PreparedDataset(kind="metadata", path=str(files.metadata)),
            clip_frames=ClipFrames.model_validate(report.to_dict()))
        return PhaseResult(outputs, approval_subject=digest(metadata_text + "\n--holdout--\n" + holdout_text))

    def summary(self, outputs: PrepareOutputs) -> str:
        if not outputs.prepared:
            return f"skipped: {outputs.reason}"
        return outputs.audit

    # --- the captioner ------------------------------------------------------------------------------

    def _captioner(self, ctx: LtxContext, name: str) -> Captioner:
        """The plan's captioner, built once for this context: the fingerprint reads its settings, the run uses it.

        Raises:
            LtxPipelineError: it cannot be built here (a trainer captioner without a checkout).
        """
        if self._built is not None and self._built[0] is ctx and self._built[1].name == name:
            return self._built[1]
        request = ctx.request
        captioner = make_captioner(name, trigger=request.trigger,
                                   trainer_root=Path(request.trainer_root) if request.trainer_root else None,
                                   vllm_url=request.vllm_url, python=request.trainer_python,
                                   sound=not ctx.output(PlanOutputs).video_only)
        self._built = (ctx, captioner)
        return captioner

    def _captioner_settings(self, ctx: LtxContext, name: str) -> dict[str, Any]:
        """What identifies the captioner's output (its wording version, the checkout's commit), never a secret."""
        try:
            return self._captioner(ctx, name).settings()
        except LtxPipelineError:
            return {"captioner": name, "available": False}  # the plan already blocks approval with the fix

    # --- staging -----------------------------------------------------------------------------------

    def _stage(self, ctx: LtxContext, plan: PreparationPlan, dataset: DatasetInfo, files: _Files,
               min_frames: int) -> tuple[list[str], dict[str, str], list[str]]:
        """Stage every clip under dataset/; returns their paths relative to dataset.json, the captions the
        user's metadata already had, and the scenes dropped as too short."""
        source = Path(dataset.path)
        kept: dict[str, str] = {}
        column = (dataset.metadata.caption_column if dataset.metadata is not None else None) or "caption"
        if plan.source_kind == "metadata":
            media = [(resolve_media(source.parent, str(row.get("video") or row.get("media_path") or "")), row)
                     for row in read_metadata_rows(source)]
            base = source.parent
        else:
            media = [(path, {}) for _, path in media_rows(source)]
            base = source if source.is_dir() else source.parent
        split_videos = set(plan.split_videos)
        clips: list[str] = []
        dropped: list[str] = []
        for path, row in media:
            if str(path) in split_videos:
                made, lost = self._split(ctx, path, files, min_frames, plan)
                clips += made
                dropped += lost
                continue
            rel = _link(ctx, path, files.media / _relative(path, base), files.root)
            clips.append(rel)
            caption = str(row.get(column) or "").strip()
            if caption:
                kept[rel] = caption
        if not clips:
            raise BadDataset(f"No clip of {source} is long enough to train on: every scene is shorter than "
                             f"{min_frames} frames (the smallest bucket)", where=str(source),
                             fix="use a bucket with fewer frames (--buckets), or longer clips")
        return clips, kept, dropped

    def _split(self, ctx: LtxContext, video: Path, files: _Files, min_frames: int,
               plan: PreparationPlan) -> tuple[list[str], list[str]]:
        found = next((entry for entry in plan.scenes or () if entry["video"] == str(video)), None)
        if found is None:  # a plan made before cuts were found at plan time
            ctx.narrate(f"Looking for scene cuts in {video.name} ({DETECTOR.label})...")
            scenes = detect_scenes(video)
        else:
            spans = sorted([(a, b) for a, b in found["scenes"]] + [(a, b) for a, b, _ in found["dropped"]])
            scenes = [Scene(i, a, b, float(found["fps"])) for i, (a, b) in enumerate(spans, 1)]
        ctx.narrate(f"Cutting {video.name} into {len(scenes)} scene(s) at the cuts the plan listed...")
        result = cut_scenes(video, scenes, files.scenes, min_frames=min_frames)
        lost = [f"{video.name} scene {scene.index} ({scene.start_s:.2f}-{scene.end_s:.2f} s): {why}"
                for scene, why in result.dropped]
        ctx.narrate(f"{video.name}: {len(scenes)} scene(s), {len(result.clips)} written to {files.scenes}"
                    + (f", {len(lost)} dropped: " + "; ".join(lost) if lost else ""))
        return [clip.path.relative_to(files.root).as_posix() for clip in result.clips], lost

    # --- captions and holdout ----------------------------------------------------------------------

    def _caption(self, ctx: LtxContext, plan: PreparationPlan, clips: list[str], kept: dict[str, str],
                 files: _Files) -> tuple[dict[str, str], int]:
        """Every clip's caption: the user's own and hand-edited ones kept, the rest captioned once."""
        edited = {**_captions_in(files.metadata), **_captions_in(files.holdout)}
        book = CaptionBook.load(files.captions)
        known = {rel: book.get(files.root / rel) for rel in clips} | kept | edited
        missing = [rel for rel in clips if not known.get(rel)]
        # The captioner skips what its file holds: the user's own and hand-edited captions go in first.
        changed = [rel for rel in clips if known.get(rel) and book.get(files.root / rel) != known[rel]]
        for rel in changed:
            book.set(files.root / rel, str(known[rel]), rel)
        if changed:
            book.save(ctx.workspace)
        if not missing:
            ctx.narrate(f"Every one of the {len(clips)} clips has a caption: nothing to caption.")
            return {rel: str(known[rel]) for rel in clips}, 0
        captioner = self._captioner(ctx, plan.captioner)
        ctx.narrate(f"Captioning {len(missing)} clip(s) with {plan.captioner} ({len(clips) - len(missing)} already "
                    "captioned)...")
        def progress_cb(done: int, total: int) -> None:
            ctx.reporter.on_count("captioning", done, total)

        done = captioner.caption([files.root / rel for rel in clips], files.captions, workspace=ctx.workspace,
                                 on_progress=progress_cb)
        captions = {rel: known.get(rel) or done.get(rel, "") for rel in clips}
        empty = [rel for rel, caption in captions.items() if not caption.strip()]
        if empty:
            raise BadDataset(f"The captioner gave no caption for {len(empty)} clip(s): {', '.join(empty[:5])}",
                             where=str(files.captions), fix="write them in dataset.json by hand, then resume")
        return captions, len(missing)

    def _write_rows(self, ctx: LtxContext, rows: list[dict[str, str]], files: _Files) -> list[str]:
        """dataset.json (training rows) and holdout.jsonl; an existing split is kept as it is."""
        request = ctx.request
        if files.holdout.exists():
            held = list(_captions_in(files.holdout))
        elif request.holdout_file:
            user = read_metadata_rows(Path(request.holdout_file))
            base = Path(request.holdout_file).parent
            targets = {str(resolve_media(base, str(r.get("video") or r.get("media_path") or ""))) for r in user}
            held = [row["video"] for row in rows if str((files.root / row["video"]).resolve()) in targets]
            for r in user:  # the user's rows as they are, with media made absolute for this folder
                r["video"] = str(resolve_media(base, str(r.get("video") or r.get("media_path") or "")))
            atomic_write(files.holdout, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in user),
                         root=ctx.workspace)
        else:
            count = holdout_count(len(rows), request.holdout)
            held = choose_holdout([row["video"] for row in rows], count)
            if held:
                chosen = [row for row in rows if row["video"] in held]
                atomic_write(files.holdout, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in chosen),
                             root=ctx.workspace)
                ctx.narrate(f"Held out {len(held)} sample(s) (seed 42) into {files.holdout}: {', '.join(held)}")
        # Compared as resolved files: holdout.jsonl names a --holdout-file's clips by absolute path and the
        # rows by their media/ names, so a name comparison let those clips back into training on a re-run.
        held_files = {str((files.root / name).resolve()) for name in held}
        held = [row["video"] for row in rows if str((files.root / row["video"]).resolve()) in held_files]
        training = [row for row in rows if row["video"] not in set(held)]
        wanted = {row["video"]: row["caption"] for row in training}
        if _captions_in(files.metadata) != wanted:  # the same rows as the user left them: not rewritten
            atomic_write(files.metadata, json.dumps(training, indent=2, ensure_ascii=False) + "\n",
                         root=ctx.workspace)
        return held

    def _spot_check(self, ctx: LtxContext, files: _Files) -> None:
        rows = read_metadata_rows(files.metadata)
        picks = sorted({0, len(rows) // 2, len(rows) - 1})[:3] if rows else []
        ctx.narrate(f"Spot-check: {len(picks)} caption(s) in full, from {files.metadata}:")
        for index in picks:
            ctx.narrate(f"  [{rows[index].get('video')}] {rows[index].get('caption')}")
        ctx.narrate("Read them (and dataset.json if you like; edit it by hand to change any caption, then resume): "
                    "the run stops here until you approve these captions.")


class _Files:
    """Where the prepared dataset lives inside the run."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.media = root / "media"
        self.scenes = root / "scenes"
        self.metadata = root / "dataset.json"
        self.holdout = root / "holdout.jsonl"
        self.captions = root / "captions.json"
        self.record = root / ".prepared.json"  # what this phase last wrote, to tell the user's edits from its own

    def _written(self) -> str | None:
        if not self.metadata.exists():
            return None
        return digest([file_digest(self.metadata), file_digest(self.holdout) if self.holdout.exists() else None])

    def edits(self) -> str | None:
        """None while dataset.json and holdout.jsonl are as this phase wrote them (or absent), else their digest;
        after a run that took the user's edits in, the same digest as long as they stay as they are."""
        now = self._written()
        try:
            record = json.loads(self.record.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            record = {}
        if now is None or record.get("written") == now:
            edits = record.get("edits")
            return edits if isinstance(edits, str) else None
        return now

    def remember(self, edits: str | None, workspace: Path) -> None:
        atomic_write(self.record, json.dumps({"written": self._written(), "edits": edits}), root=workspace)


def _preparation(ctx: LtxContext) -> PreparationPlan:
    """The plan's preparation (a plan from before the prepare phase has none: nothing to prepare)."""
    preparation = ctx.output(PlanOutputs).preparation
    if preparation is None:
        return PreparationPlan(needed=False, reason="the plan was made before data preparation existed",
                               source_kind="metadata")
    return preparation


def _relative(path: Path, base: Path) -> Path:
    """The clip's path under dataset/media/: its place under the input folder, else its name."""
    try:
        return path.resolve().relative_to(base.resolve())
    except ValueError:
        return Path(path.name)


def _link(ctx: LtxContext, source: Path, target: Path, root: Path) -> str:
    """Stage ``source`` at ``target`` (a symlink, else a copy), atomically; returns its path relative to root."""
    ensure_inside(ctx.workspace, target.parent)  # the link itself resolves to the user's file, outside
    target.parent.mkdir(parents=True, exist_ok=True)
    real = source.resolve()
    if target.is_symlink() and target.resolve() == real:
        return target.relative_to(root).as_posix()
    if target.exists() and not target.is_symlink() and target.stat().st_size == real.stat().st_size:
        return target.relative_to(root).as_posix()  # an earlier copy across file systems
    temp = target.with_name(f".{target.name}.staging")
    temp.unlink(missing_ok=True)
    try:
        os.symlink(real, temp)
    except OSError:
        shutil.copy2(real, temp)
    os.replace(temp, target)
    return target.relative_to(root).as_posix()


def _captions_in(path: Path) -> dict[str, str]:
    """media path -> caption of a JSON list or JSONL file of rows ({} when it does not exist)."""
    if not path.exists():
        return {}
    rows = read_metadata_rows(path)
    return {str(r.get("video") or r.get("media_path")): str(r.get("caption") or "") for r in rows}


def _audit(facts: dict[str, dict[str, Any]], files: _Files, samples: int, written: int, kept: int,
           held: list[str], dropped: list[str]) -> str:
    seconds = {path: float(f.get("duration_s") or 0.0) for path, f in facts.items()}
    shortest = min(seconds, key=lambda p: seconds[p]) if seconds else None
    short = f", shortest {seconds[shortest]:.1f} s ({Path(shortest).name})" if shortest else ""
    return (f"{samples} training sample(s) in {files.metadata.name} (columns caption, video), "
            f"{sum(seconds.values()):.1f} s of video in all{short}; captions: {written} written, {kept} kept; "
            f"held out {len(held)}" + (f"; {len(dropped)} scene(s) dropped as too short" if dropped else ""))


PHASE = PreparePhase()
