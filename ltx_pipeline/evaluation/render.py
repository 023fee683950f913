"""Render the final weights for the evaluation prompts, through the trainer's own validation.

Owns the eval render: the eval config (the run's final config through the patch mechanism, the
skill's list in ``ltx.evaluation.eval_patches``), its validation, a detached launch like any
training, following it, harvesting ``samples/step_000000_k.*`` into ``outputs/eval/<category>/NN.*``
and cleaning up the trainer's cruft (the scratch folder with its forced checkpoint and serialized
config).

Nothing rendered is ever rendered twice: ``outputs/eval/.renders.json`` records, for each file,
the identity of what it shows (prompt, conditions, weights, validation settings, dims). A launch
renders only the prompts whose file is missing or shows something else, and after an engine or
trainer killed mid-render the complete files of the scratch folder are kept (the manifest written
before the launch says which prompt each index is), so ``resume`` re-renders only what is missing.
An out-of-memory render is retried once at smaller dims, recorded so a resume does not try the
planned dims again.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ltx_pipeline.engine.fingerprint import digest
from ltx_pipeline.errors import RunFailed
from ltx_pipeline.ltx.buckets import cheaper_dims
from ltx_pipeline.ltx.config_patch import apply_patches
from ltx_pipeline.ltx.evaluation import EvalPrompt, eval_patches, render_order
from ltx_pipeline.ltx.media import BadMedia, read_frames, read_media_info
from ltx_pipeline.trainer_log import LogFollower, classify_failure, failure_tail, read_tail
from ltx_pipeline.training.validation import LaunchTarget, validate_stage
from ltx_pipeline.workspace import atomic_write
from ltx_pipeline.yaml_io import load_yaml

if TYPE_CHECKING:
    from ltx_pipeline.backends.base import TrainerBackend
    from ltx_pipeline.engine.journal import ProcessHandle, RunJournal

__all__ = ["EvalJob", "EvalRenderer", "RENDER_SUFFIXES", "rendered_file"]

RENDER_SUFFIXES = (".mp4", ".png", ".wav")  # the trainer writes .png for 1 frame, .wav for audio only
_SAVED = "Validation samples for step 0 saved"
_OOM_KINDS = ("oom_validation", "oom_training")


@dataclass(frozen=True)
class EvalJob:
    """One evaluation: what to render with which weights, and where things go.

    Attributes:
        final_config: the last stage's config as trained (read, never written).
        weights: the final weights file.
        prompts: the prompts in render order.
        eval_root: ``<run>/outputs/eval``.
        config_file: where the eval config is written (``<run>/config.eval.yaml``).
        logs: the run's log folder.
        target: the launch the eval config is validated for (one process).
    """

    final_config: Path
    weights: Path
    prompts: list[EvalPrompt]
    eval_root: Path
    config_file: Path
    logs: Path
    target: LaunchTarget

    @property
    def work(self) -> Path:
        return self.eval_root / ".work"

    # Read once per evaluation: the final config and the weights do not change while it renders.
    @cached_property
    def config_text(self) -> str:
        return self.final_config.read_text(encoding="utf-8")

    @cached_property
    def config_values(self) -> dict[str, Any]:
        return load_yaml(self.config_text) or {}

    @cached_property
    def weights_id(self) -> dict[str, Any]:
        stat = self.weights.stat()
        return {"path": str(self.weights), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}

    @cached_property
    def render_settings(self) -> dict[str, Any]:
        """The validation settings a render depends on (not the prompts, nor when it runs)."""
        return {k: v for k, v in (self.config_values.get("validation") or {}).items()
                if k not in ("samples", "prompts", "interval", "skip_initial_validation", "images",
                             "reference_videos")}

    @property
    def planned_dims(self) -> list[int]:
        return list((self.config_values.get("validation") or {}).get("video_dims") or [960, 544, 89])


def rendered_file(eval_root: Path, category: str, number: int) -> Path | None:
    """The render of ``<category>/NN`` whatever its suffix, or None."""
    return next((p for s in RENDER_SUFFIXES if (p := eval_root / category / f"{number:02d}{s}").is_file()), None)


class EvalRenderer:
    """Renders an ``EvalJob``; the phase gives it the backend, the journal and the narration channels."""

    def __init__(self, *, backend: TrainerBackend, journal: RunJournal, workspace: Path, narrate: Callable[[str], None],
                 poll_s: float = 0.2) -> None:
        self.backend, self.journal, self.workspace = backend, journal, workspace
        self.narrate, self.poll_s = narrate, poll_s
        self.renders_samples = backend.capabilities.uses_real_files

    def render(self, job: EvalJob) -> dict[str, Any]:
        """Render what is missing; returns {"renders": [...], "retried_dims": dims or None}.

        A backend whose validation writes no files (not ``capabilities.uses_real_files``: simulated) is
        launched once, for its cost and failures; its renders are listed with ``file: None``.

        Raises:
            RunFailed: the trainer failed (after the one out-of-memory retry), naming the log.
        """
        state = self._state(job)
        live = self.journal.live("evaluate")
        if live is not None:
            self.narrate(f"Re-attaching to the evaluation render that is still running (pid {live.pid}).")
            self._follow(live)
            self.journal.settle(live)
        self._harvest(job, state)
        while missing := self._missing(job, state):
            dims = state.get("retry_dims")
            handle, log = self._launch(job, missing, dims)
            self._follow(handle)
            handle = self.journal.settle(handle)
            self._harvest(job, state)
            record = handle.exit()
            if (record or {}).get("exit_code") == 0:
                if not self.renders_samples:
                    self.narrate(f"The {self.backend.name} backend's validation writes no files: nothing to collect.")
                    break
                if still := self._missing(job, state):
                    raise RunFailed(f"The evaluation render exited 0 but {len(still)} render(s) are missing",
                                    where=str(log), fix="read the log's end; `ltx-pipeline resume` renders "
                                                        "what is missing")
                break
            self._failed(job, state, handle, log)
        shutil.rmtree(job.work, ignore_errors=True)  # the forced checkpoint, training_config.yaml, samples
        renders = []
        for prompt, (category, number) in zip(job.prompts, render_order(job.prompts), strict=True):
            path = rendered_file(job.eval_root, category, number)
            record = state["renders"].get(f"{category}/{path.name}") if path else None
            renders.append({"file": str(path) if path else None, "category": category, "number": number,
                            **prompt.to_dict(), "video_dims": record["video_dims"] if record else None})
        self._forget_others(job, state, {Path(r["file"]).relative_to(job.eval_root).as_posix()
                                         for r in renders if r["file"]})
        return {"renders": renders, "retried_dims": state.get("retry_dims")}

    # -- what is there ------------------------------------------------------------------------------

    def _state_file(self, job: EvalJob) -> Path:
        return job.eval_root / ".renders.json"

    def _state(self, job: EvalJob) -> dict[str, Any]:
        try:
            state = json.loads(self._state_file(job).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            state = {}
        if not isinstance(state, dict):
            state = {}  # not a state this module wrote: nothing is known to be rendered
        state.setdefault("renders", {})
        if state.get("weights") != job.weights_id:
            state = {"renders": {}, "weights": job.weights_id}  # new weights: nothing rendered yet
        return state

    def _save(self, job: EvalJob, state: dict[str, Any]) -> None:
        atomic_write(self._state_file(job), json.dumps(state, indent=2), root=self.workspace)

    @staticmethod
    def _identity(job: EvalJob, prompt: EvalPrompt, dims: list[int] | None) -> str:
        """What a render shows: its sample, the validation settings, the dims and the weights."""
        return digest({"sample": prompt.sample(), "settings": job.render_settings, "dims": dims,
                       "weights": job.weights_id})

    def _missing(self, job: EvalJob, state: dict[str, Any]) -> list[tuple[EvalPrompt, str, int]]:
        missing = []
        for prompt, (category, number) in zip(job.prompts, render_order(job.prompts), strict=True):
            path = rendered_file(job.eval_root, category, number)
            record = state["renders"].get(f"{category}/{path.name}") if path else None
            wanted = {self._identity(job, prompt, None), self._identity(job, prompt, state.get("retry_dims"))}
            if path is None or record is None or record.get("identity") not in wanted:
                missing.append((prompt, category, number))
        return missing

    def _harvest(self, job: EvalJob, state: dict[str, Any]) -> None:
        """Move the complete renders of the last launch to their category folders and record them."""
        manifest_file = job.work / "manifest.json"
        if not manifest_file.is_file():
            return
        manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
        samples = job.work / "samples"
        saved = any(_SAVED in line for line in read_tail(Path(manifest["log"]), 400))
        found = {}
        for index in range(1, len(manifest["items"]) + 1):
            path = next((p for s in RENDER_SUFFIXES if (p := samples / f"step_000000_{index}{s}").is_file()), None)
            if path is not None:
                found[index] = path
        last = max(found, default=0)
        for index, path in found.items():
            item = manifest["items"][index - 1]
            # Samples are written one after the other: all but the newest are complete. The newest
            # is, once the trainer said so or when it decodes to every frame it should have.
            if not (saved or index < last or _complete(path, int(manifest["video_dims"][2]))):
                continue
            target = job.eval_root / item["category"] / f"{int(item['number']):02d}{path.suffix}"
            target.parent.mkdir(parents=True, exist_ok=True)
            for other in RENDER_SUFFIXES:  # a stale render of another kind for the same slot
                target.with_suffix(other).unlink(missing_ok=True)
            os.replace(path, target)
            state["renders"][f"{item['category']}/{target.name}"] = {"identity": item["identity"],
                                                                      "video_dims": manifest["video_dims"]}
        self._save(job, state)

    def _forget_others(self, job: EvalJob, state: dict[str, Any], keep: set[str]) -> None:
        """Renders of prompts no longer in the sets (the user changed them) are removed with their record."""
        for key in list(state["renders"]):
            if key not in keep:
                (job.eval_root / key).unlink(missing_ok=True)
                del state["renders"][key]
        self._save(job, state)

    # -- a launch -----------------------------------------------------------------------------------

    def _launch(self, job: EvalJob, missing: list[tuple[EvalPrompt, str, int]],
                dims: list[int] | None) -> tuple[Any, Path]:
        planned = job.planned_dims
        shutil.rmtree(job.work, ignore_errors=True)  # what a finished or killed launch left: harvested already
        job.work.mkdir(parents=True, exist_ok=True)
        patches = eval_patches(job.config_values, weights=str(job.weights),
                               samples=[p.sample() for p, _, _ in missing], output_dir=str(job.work), video_dims=dims)
        text, records = apply_patches(job.config_text, patches)
        atomic_write(job.config_file, text, root=self.workspace)
        result = validate_stage(self.backend, job.config_file, job.target, strict=True)
        validated = result.raise_if_failed("The evaluation config")
        attempt = len(self.journal.processes("evaluate")) + 1
        log = job.logs / ("evaluate.log" if attempt == 1 else f"evaluate.attempt-{attempt}.log")
        log.parent.mkdir(parents=True, exist_ok=True)
        items = [{"category": c, "number": n, "identity": self._identity(job, p, dims)} for p, c, n in missing]
        atomic_write(job.work / "manifest.json",
                     json.dumps({"log": str(log), "video_dims": dims or planned, "items": items}, indent=2),
                     root=self.workspace)
        spec = self.backend.train_command(job.config_file)
        handle = self.journal.launch("evaluate", attempt, spec, log, validated)
        size = "x".join(str(d) for d in dims or planned)
        self.narrate(f"Rendering {len(missing)} evaluation sample(s) at {size} with {job.weights.name} "
                     f"(pid {handle.pid}), log {log}; {len(records)} recorded patch(es) in {job.config_file.name}.")
        return handle, log

    def _follow(self, handle: ProcessHandle) -> None:
        """Wait for the render, telling each saved batch of samples; the trainer goes on if we are stopped."""
        follower = LogFollower(Path(handle.log_path))
        while True:
            alive = handle.alive()
            text, _ = follower.read_text(final=not alive)
            if _SAVED in text:
                self.narrate("The evaluation samples are rendered; the trainer runs its one step and exits.")
            if not alive:
                return
            handle.pause(self.poll_s)

    def _failed(self, job: EvalJob, state: dict[str, Any], handle: ProcessHandle, log: Path) -> None:
        record = handle.exit() or {}
        code, signal = record.get("exit_code", 137), record.get("signal", 9 if not record else None)
        values = load_yaml(job.config_file.read_text(encoding="utf-8")) or {}
        failure = classify_failure(code, signal, failure_tail(log), config=values, initial_validation=True)
        smaller = cheaper_dims(job.planned_dims)  # None: already the smallest render the trainer takes
        if failure.kind in _OOM_KINDS and state.get("retry_dims") is None and smaller is not None:
            planned = job.planned_dims  # the first failure is always at the planned dims
            state["retry_dims"] = smaller
            self._save(job, state)
            self.narrate(f"The evaluation render ran out of GPU memory at {'x'.join(map(str, planned))} "
                         f"({failure.evidence}); retrying once at {'x'.join(map(str, state['retry_dims']))}.")
            return
        retried = f" (already retried at {'x'.join(map(str, state['retry_dims']))})" if state.get("retry_dims") else ""
        raise RunFailed(f"The evaluation render failed ({failure.kind}, exit {code}){retried}: {failure.evidence}",
                        where=str(log), fix="free the GPU or lower validation.video_dims / inference_steps in the "
                                            "run's config, then `ltx-pipeline resume`; or `ltx-pipeline resume "
                                            "--skip-eval`")


def _complete(path: Path, frames: int) -> bool:
    """Whether a render decodes whole: every frame of a video, an image, or an audio stream."""
    try:
        if path.suffix == ".mp4":
            return len(read_frames(path)) >= frames
        return read_media_info(path) is not None
    except BadMedia:
        return False
