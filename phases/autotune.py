"""Autotune phase: a short sanity trial at full resolution, then an Optuna-recorded sweep for the fastest fit.

Heavy (past the approval gate). Scratch lives under ``<run>/overfit/``: the sanity set (the plan's
most expensive bucket, as many samples as the largest batch size tried), one folder per trial
(config, outputs, log). ``SweepPlanner`` picks each config and settles what each result implies
(memory is monotone along every knob); ``ltx_pipeline.steps.autotune`` runs and measures one
trial; every trial and pruned config is recorded in the run's Optuna study, from which an
interrupted sweep resumes without re-running finished trials (a trial left running by a dead
engine is stopped and run again once). The study is keyed by what the trials measure (``_sweep_key``),
not by the step count, learning rate or cadence: continuing a finished run reads its sweep back and
runs no trial. A failing baseline stops the run with its classified
failure and fixes. The winner's deltas are patched into every stage config with the reason
"autotune"; ``autotune.log``/``.md``/``.png`` sit in the run folder.

With ``autotune: off`` (``--autotune off``) no trial runs and nothing is patched: the outputs say so in
one field (``off``, the reason) beside the plan's ``baseline`` knobs, with no objective and no predicted
peak, and autotune.md names the baseline trained as is. Whether autotune can run on this machine at
all is the plan's to say (``ltx.autotune.availability``): an approval blocker, never a failed sweep.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ltx_pipeline.engine import PhaseResult, RunContext
from ltx_pipeline.engine.fingerprint import digest, file_digest
from ltx_pipeline.engine.processes import host_id
from ltx_pipeline.errors import RunFailed
from ltx_pipeline.ltx.audio_choice import trained_mode
from ltx_pipeline.ltx.autotune import (
    MEMORY_FAILURES,
    SPACE_KEYS,
    SweepPlanner,
    deltas,
    format_knobs,
    search_space,
)
from ltx_pipeline.ltx.autotune.availability import OFF_REASON
from ltx_pipeline.ltx.buckets import parse_buckets
from ltx_pipeline.ltx.config_patch import KNOB_PATHS, Patch, apply_patches
from ltx_pipeline.ltx.launch_checks import launch_checks
from ltx_pipeline.ltx.modes import get_mode
from ltx_pipeline.steps.autotune import study as studies
from ltx_pipeline.steps.autotune import trial_line, write_off_reports, write_reports
from ltx_pipeline.steps.autotune.hosts import shared_store
from ltx_pipeline.steps.autotune.prior import prior_disagreement, prior_key, same_knobs
from ltx_pipeline.steps.autotune.trial_runner import TrialRunner, largest_stage_config
from ltx_pipeline.steps.preprocess import preprocess, write_subset_metadata
from ltx_pipeline.store.location import redact
from ltx_pipeline.trainer_log import canonical_kind
from ltx_pipeline.workspace import atomic_write
from ltx_pipeline.yaml_io import load_yaml

__all__ = ["PHASE"]


class AutotunePhase:
    name = "autotune"
    heavy = True

    def fingerprint(self, ctx: RunContext) -> dict[str, Any]:
        parts = {"validate": digest(ctx.output("validate")), **_inputs(ctx)}
        if ctx.request.autotune == "off":  # absent when on: every earlier run's fingerprint stays as it was
            parts["autotune"] = "off"
        return parts

    def run(self, ctx: RunContext) -> PhaseResult:
        if ctx.request.autotune == "off":
            return PhaseResult(_off(ctx))
        ctx.narrate("Autotune: a short trial at full resolution with the planned config (the baseline), then "
                    "variants of quantization, optimizer, batch size or checkpointing, to find the fastest config "
                    "whose peak VRAM, training or validation, stays under the headroom. Each trial stops once its "
                    "step time and memory are measured; configs a result already settles are not run. Loss is not "
                    "a criterion.")
        recipe, probe = ctx.output("plan")["recipe"], ctx.output("probe")
        sweep = _Sweep(ctx, recipe, probe)
        sanity_root = _sanity_set(ctx, sweep.max_batch)
        outputs = sweep.run(sanity_root)
        return PhaseResult(outputs)

    def summary(self, outputs: dict[str, Any]) -> str:
        if outputs.get("off"):
            return f"off {outputs['off']}; no trial ran, the plan's baseline config is trained as is"
        ran = len(outputs["trials"])
        change = ", ".join(f"{k}={v}" for k, v in outputs["deltas"].items()) or "the baseline kept"
        return (f"{ran} trial(s), {len(outputs['pruned'])} pruned; winner {change} "
                f"({outputs['objective']:.2f}s per optimizer step); study {outputs['study']}")


def _off(ctx: RunContext) -> dict[str, Any]:
    """Autotune off by the user's choice: no trial, no patch; autotune.md says which baseline trains as is.

    The outputs carry no objective and no predicted peak: nothing was measured, so monitor has no
    memory model to check.
    """
    baseline = {k: ctx.output("plan")["recipe"]["knobs"][k] for k in SPACE_KEYS}
    ctx.narrate(f"Autotune is off {OFF_REASON}. No trial runs and nothing is patched; training uses the plan's "
                f"baseline config as is, {format_knobs(baseline)}.")
    turn_on = f"ltx-pipeline run --workspace {ctx.workspace} --run {ctx.run_name} --autotune on"
    reports = write_off_reports(ctx.paths.root, ctx.workspace, baseline, reason=OFF_REASON, turn_on=turn_on)
    return {"off": OFF_REASON, "baseline": baseline, "deltas": {}, "patches": [], "reports": reports}


def _inputs(ctx: RunContext) -> dict[str, Any]:
    """What decides the sweep's results: a study is resumed only when these are unchanged."""
    recipe = ctx.output("plan")["recipe"]
    parts: dict[str, Any] = {"config_patch": digest(ctx.output("config_patch")), "knobs": recipe["knobs"],
                             "headroom": ctx.request.headroom, "backend": ctx.request.backend,
                             "sanity": ctx.output("data_check")["sanity"]}
    if ctx.request.backend == "simulated":
        parts["surface"] = {"path": ctx.request.surface, "digest": file_digest(Path(ctx.request.surface))}
    return parts


# What a trial overrides or never measures: the step count, the learning rate and its schedule, checkpoint and
# validation cadence, where data and outputs are, the warm start (a trial starts from the base), W&B, the seed;
# and the swept knobs, keyed as the plan's. Everything else in the config can change memory or speed.
_UNMEASURED = ("optimization.steps", "optimization.learning_rate", "optimization.scheduler_type",
               "optimization.scheduler_params", "checkpoints", "validation.interval", "model.load_checkpoint",
               "output_dir", "data.preprocessed_data_root", "wandb", "seed", *KNOB_PATHS.values())


def _sweep_key(ctx: RunContext) -> dict[str, Any]:
    """The study's identity: what the trials' measurements depend on, so a sweep is read back, never run
    again, when only the rest changed (raising --steps continues a finished run with no trial).

    The trials' stage config as config_patch made it (the template and its patches, not the live file: a
    hand edit since a trial failed supersedes that trial in the same study), less what a trial overrides
    or never measures.
    """
    stage = str(largest_stage_config(ctx))
    entry = next(c for c in ctx.output("config_patch")["configs"] if c["config"] == stage)
    patches = [(r["path"], r["new"]) for r in entry["patches"]
               if not any(r["path"] == p or r["path"].startswith(p + ".") for p in _UNMEASURED)]
    parts = {k: v for k, v in _inputs(ctx).items() if k != "config_patch"}
    return {**parts, "trial config": {"template": file_digest(Path(entry["template"])), "patches": patches}}


def _sanity_set(ctx: RunContext, max_batch: int) -> str:
    """The sanity data at the largest bucket: preprocessed once (not on the simulated backend)."""
    data = ctx.output("data_check")
    sanity = data["sanity"]
    if not data["metadata_file"]:  # a verified .precomputed dataset: its latents already hold every bucket
        return data["stages"][0]["preprocessed_root"]
    rows = max(1, min(max_batch, data["samples"] or max_batch))
    subset, count = write_subset_metadata(ctx, Path(data["metadata_file"]), rows, ctx.paths.overfit / "sanity.json")
    if ctx.request.backend == "simulated":
        ctx.narrate(f"Sanity set: {count} sample(s) at {sanity['bucket']} (the simulated trainer reads no data).")
        return sanity["preprocessed_root"]
    patch = ctx.output("config_patch")
    mode = trained_mode(get_mode(ctx.request.mode), ctx.output("plan").get("audio"))  # video only: no audio gate
    preprocess(ctx, mode=mode, metadata_file=subset, buckets=parse_buckets(sanity["bucket"]),
               output_dir=Path(sanity["preprocessed_root"]), stage=0, model_path=patch["model_path"],
               text_encoder_path=patch["text_encoder_path"], pairing=data["conditions_pairing"],
               extra_flags=[] if mode.audio_run else ["--skip-audio"])
    return sanity["preprocessed_root"]


class _Sweep:
    """One sweep: the planner, the study and the trial loop."""

    def __init__(self, ctx: RunContext, recipe: dict[str, Any], probe: dict[str, Any]) -> None:
        self.ctx = ctx
        knobs = recipe["knobs"]
        self.effective = int(knobs["batch_size"]) * int(knobs.get("gradient_accumulation_steps") or 1)
        multi = any(len(s["buckets"]) > 1 for s in recipe["stages"])
        self.processes = int(ctx.output("validate")["num_processes"])
        samples = ctx.output("data_check")["samples"]
        # The largest batch the dataset can feed every training process (drop_last: no zero-batch epochs).
        max_batch = max(1, samples // self.processes) if samples else None
        space = search_space(probe["tier"]["base"], self.effective, multi, knobs, max_batch=max_batch)
        if recipe["training_mode"] == "full":  # the trainer refuses quantization in full mode
            space = [space[0], *(k for k in space[1:] if k["quantization"] is None)]
        self.space = _launchable(ctx, space, self.processes)
        self.baseline = space[0]
        self.max_batch = max(int(k["batch_size"]) for k in space)
        gpus = probe["gpus"]["gpus"]
        self.capacity = min(g["memory_mib"] for g in gpus) / 1024
        self.gpu_indices = [int(g["index"]) for g in gpus]
        self.planner = SweepPlanner(space, self.baseline, capacity_gb=self.capacity, headroom=ctx.request.headroom,
                                    effective_batch=self.effective)
        self.trials: list[dict[str, Any]] = []
        self.failure: dict[str, Any] | None = None
        self.superseded: list[dict[str, Any]] = []  # trials --apply-fix made obsolete, run again
        self.prior: dict[str, Any] | None = None  # what an earlier run's study told this sweep, and why

    def run(self, sanity_root: str) -> dict[str, Any]:
        ctx = self.ctx
        self.runner = TrialRunner(ctx, sanity_root=sanity_root, max_batch=self.max_batch,
                                  gpu_indices=self.gpu_indices, capacity_gb=self.capacity)
        storage = studies.storage_for(ctx.workspace)
        study, name = studies.open_study(storage, ctx.run_name, digest(_sweep_key(ctx)))
        launched = len(ctx.journal.processes("trial"))
        key = prior_key(ctx, self.space)
        studies.mark_prior_key(study, key)
        prior = studies.find_prior(storage, key, exclude=name)
        dists = studies.distributions(self.space)
        if shared_store(ctx.workspace):
            # Several GPU hosts may share this sweep (`ltx-pipeline autotune-worker`): see steps.autotune.shared_sweep.
            from ltx_pipeline.steps.autotune.shared_sweep import SharedSweep

            SharedSweep(self, storage, name, sanity_root).run(prior)
        else:
            self._resume(study)
            self._apply_prior(prior)
            self._local_trials(study, dists, prior)
        studies.record_pruned(study, self.planner.pruned, dists)
        if self.trials and len(ctx.journal.processes("trial")) == launched:
            ctx.narrate(f"No trial ran: study {name} was measured with the same inputs (knobs, data, headroom, the "
                        "trial's config apart from its step count, learning rate, cadence and outputs), so its "
                        "results stand.")
        outputs = self._finish(name, storage)
        studies.mark_finished(study, outputs["winner"])
        return outputs

    def _local_trials(self, study: Any, dists: dict[str, Any], prior: Any) -> None:
        """The sweep on this host alone: the planner's next config until there is none."""
        ctx = self.ctx
        while (knobs := self.planner.next_trial()) is not None:
            number = 1 + max((h.stage for h in ctx.journal.processes("trial")), default=0)
            trial = studies.ask_trial(study, knobs, dists)
            trial.set_user_attr("trial_number", number)
            done, extra = self.runner.run(knobs, number, self.trials)
            self.fold(study, trial, done.result, extra)
            self._apply_prior(prior)
            studies.record_pruned(study, self.planner.pruned, dists)

    def fold(self, study: Any, trial: Any, result: Any, extra: dict[str, Any]) -> dict[str, Any]:
        """Record a trial's result with the planner, tell it to the study and narrate it."""
        self.planner.record(result)
        fits = self.planner.fits(result)
        state = studies.tell_result(study, trial, result, fits=fits, objective=self.planner.objective(result),
                                    extra=extra)
        record = self._record(extra["trial_number"], result, fits, state, extra)
        self.ctx.narrate(trial_line(record))
        return record

    def _apply_prior(self, prior: tuple[str, list[tuple[Any, Any]]] | None) -> None:
        """Use an earlier run's finished sweep (same GPU model, bucket, mode, model, space) as a prior.

        The baseline is always measured first; the prior is used only when its own baseline agrees with
        this one (both fit, step time within ``PRIOR_STEP_TIME_MARGIN`` and peak memory within
        ``PRIOR_MEMORY_MARGIN``). Then its other results settle this sweep as if they had run here,
        each marked with where it came from; otherwise the prior is ignored, saying why, and the sweep
        runs in full.
        """
        if prior is None or self.prior is not None:
            return
        ours = next((t for t in self.trials if t["knobs"] == self.baseline and not t.get("from_prior")), None)
        if ours is None:
            return  # the baseline is measured first, whatever the prior says
        name, results = prior
        theirs = next((r for _, r in results if same_knobs(r.knobs, self.baseline)), None)
        why = prior_disagreement(ours, theirs, self.planner)
        if why is not None:
            self.prior = {"study": name, "used": False, "why": why}
            self.ctx.narrate(f"Prior study {name} ignored: {why}; the sweep runs in full.")
            return
        used = 0
        for frozen, result in results:
            if not any(same_knobs(result.knobs, k) for k in self.planner.remaining()):
                continue
            number = frozen.user_attrs.get("trial_number")
            result.reason = "; ".join(p for p in (result.reason, f"from the prior study {name}, trial {number}") if p)
            self.planner.record(result)
            self._record(f"prior {name}#{number}", result, self.planner.fits(result), "prior",
                         {"from_prior": f"{name} trial {number}", "log": None})
            used += 1
        self.prior = {"study": name, "used": True, "results": used,
                      "why": f"its baseline agrees with this one (step time {theirs.step_time_s:.2f}s vs "
                             f"{ours['step_time_s']:.2f}s, peak {theirs.peak_gb:.1f} GB vs "
                             f"{max(v for v in (ours['peak_vram_gb'], ours['validation_peak_vram_gb']) if v):.1f} GB)"}
        self.ctx.narrate(f"Prior study {name}: {self.prior['why']}; its {used} other result(s) settle this sweep "
                         "instead of new trials.")

    def _resume(self, study: Any, *, shared: bool = False) -> None:
        """Stop orphaned trial processes, fail their Optuna trials, replay what finished before.

        ``shared``: several hosts work on the study; only this host's processes are its own, and a trial
        left running is reclaimed once its heartbeat is stale (``steps.autotune.hosts``), not here.
        """
        ctx = self.ctx
        for handle in ctx.journal.processes("trial"):
            if handle.status != "running" or (shared and handle.host != host_id()):
                continue
            if handle.alive():
                # A trial is measured from its first step: one whose follower died cannot be trusted
                # to have a clean step time, so it is stopped (its whole process group) and run again.
                how = ctx.journal.stop(handle, interrupt_timeout=10, terminate_timeout=5)
                ctx.warn(f"Trial {handle.stage} was left running by an engine that stopped; its process group "
                         f"(pid {handle.pid}) was stopped ({how}) and recorded as interrupted.")
            else:
                settled = ctx.journal.settle(handle)
                ctx.warn(f"Trial {handle.stage} ended while no engine followed it (recorded {settled.status}).")
        for frozen in [] if shared else studies.orphans(study):
            studies.fail_orphan(study, frozen)
            ctx.warn(f"Optuna trial {frozen.number} ({_trial_words(frozen)}) was left running: "
                     "marked failed (interrupted) in the study; its config runs again as a new trial.")
        if ctx.options.get("apply_fix"):
            self._apply_trial_fixes(study)
        self._retry_where_changed(study)
        self.superseded = [{"number": n, "reason": why} for n, why in sorted(studies.superseded(study).items())]
        for frozen, result in studies.finished_results(study):
            if result.knobs not in self.planner.remaining():
                continue  # already recorded (or no longer in this space)
            self.planner.record(result)
            attrs = frozen.user_attrs
            extra = {k: attrs.get(k) for k in ("trial_number", "host_ram_gb", "log", "failure_kind", "fixes",
                                               "step_spread")}
            state = "complete" if frozen.state.name == "COMPLETE" else "fail"
            self._record(attrs.get("trial_number"), result, self.planner.fits(result), state, extra)
        if self.trials:
            ctx.narrate(f"Resuming the sweep: {len(self.trials)} finished trial(s) read back from the study, "
                        "not run again.")

    def _retry_where_changed(self, study: Any) -> None:
        """Supersede each failed trial (not a memory measurement) whose environment changed since it
        ran, so it runs again; say so when nothing changed and the failure is read back as it was."""
        ctx, now = self.ctx, self.runner.environment()
        obsolete: dict[int, str] = {}
        for frozen, result in studies.finished_results(study):
            if frozen.state.name != "FAIL" or result.outcome in MEMORY_FAILURES:
                continue
            then = frozen.user_attrs.get("environment") or {}
            changed = [name.replace("_", " ") for name in now if name in then and then[name] != now[name]]
            if changed:
                kind = canonical_kind(frozen.user_attrs.get("failure_kind")) or result.outcome
                obsolete[frozen.number] = f"{kind}; rerun because {', '.join(changed)} changed since it ran"
            else:
                ctx.narrate(f"Trial {frozen.user_attrs.get('trial_number')} ({format_knobs(result.knobs)}) failed "
                            "before and nothing it depends on changed (stage config, /dev/shm, GPU memory): its "
                            "failure is read back, not run again.")
        if obsolete:
            studies.supersede(study, obsolete)
            for number, why in sorted(obsolete.items()):
                ctx.narrate(f"Optuna trial {number} superseded: {why}.")

    def _apply_trial_fixes(self, study: Any) -> None:
        """``resume --apply-fix``: patch the proposed config fix of each failed trial whose cause the
        config can change (not memory: a knob's OOM is a measurement) into every stage config, and
        supersede those trials so they run again with it."""
        ctx = self.ctx
        patches: dict[str, tuple[Any, str]] = {}
        obsolete: dict[int, str] = {}
        for frozen, result in studies.finished_results(study):
            attrs = frozen.user_attrs
            fix = next((f for f in attrs.get("fixes") or [] if f.get("path")), None)
            if frozen.state.name != "FAIL" or result.outcome in MEMORY_FAILURES or fix is None:
                continue
            kind = canonical_kind(attrs.get("failure_kind")) or result.outcome  # old stored names read as today's
            patches.setdefault(fix["path"], (fix["value"], f"fix: {kind}"))
            obsolete[frozen.number] = f"{kind}; rerun after --apply-fix set {fix['path']}: {fix['value']}"
        if not obsolete:
            ctx.narrate("--apply-fix: no failed trial has a proposed config fix; resuming the sweep as it is.")
            return
        for entry in ctx.output("config_patch")["configs"]:
            config = Path(entry["config"])
            text, done = apply_patches(config.read_text(encoding="utf-8"),
                                       [Patch(path, value, why) for path, (value, why) in patches.items()])
            if done:
                atomic_write(config, text, root=ctx.workspace)
            for record in done:
                ctx.warn(f"{config.name}: patched {record.path} {record.old} -> {record.new} ({record.reason})")
        studies.supersede(study, obsolete)
        ctx.narrate(f"--apply-fix: {len(obsolete)} failed trial(s) superseded in the study; they run again with "
                    "the fix.")

    def _record(self, number: Any, result: Any, fits: bool, state: str, extra: dict[str, Any]) -> dict[str, Any]:
        record = {"number": number, "knobs": dict(result.knobs), "outcome": result.outcome, "state": state,
                  "fits": fits, "step_time_s": result.step_time_s, "peak_vram_gb": result.peak_vram_gb,
                  "validation_peak_vram_gb": result.validation_peak_vram_gb, "seconds": result.seconds,
                  "reason": result.reason, "host_ram_gb": extra.get("host_ram_gb"), "log": extra.get("log"),
                  "objective": self.planner.objective(result) if fits else None,
                  "step_spread": extra.get("step_spread"),
                  **{k: getattr(result, k, None) for k in ("peak_source", "validation_peak_source", "assumed_fit")},
                  **({"from_prior": extra["from_prior"]} if extra.get("from_prior") else {}),
                  **({"host": extra["host"]} if extra.get("host") else {})}
        self.trials.append(record)
        if number is not None and result.knobs == self.baseline and not fits:
            self.failure = {**record, "failure_kind": extra.get("failure_kind"), "fixes": extra.get("fixes") or []}
        return record

    def _finish(self, study_name: str, storage: str) -> dict[str, Any]:
        ctx = self.ctx
        best = self.planner.best()
        winner = self.planner.winner() if best else None
        change = deltas(winner, self.baseline) if winner else {}
        outputs: dict[str, Any] = {
            # The optuna.db path, or the server's URL with its password replaced: never a secret in outputs.
            "study": study_name, "storage": storage.removeprefix("sqlite:///") if storage.startswith("sqlite:///")
            else redact(storage), "capacity_gb": self.capacity,
            "headroom": ctx.request.headroom, "limit_gb": self.planner.limit_gb, "effective_batch": self.effective,
            "baseline": self.baseline, "trials": self.trials,
            "pruned": [{"knobs": p.knobs, "reason": p.reason} for p in self.planner.pruned],
            "winner": winner, "deltas": change, "objective": self.planner.objective(best) if best else None,
            "patches": [], "superseded": self.superseded, "prior": self.prior,
            # What the memory model expects the training to peak at: verified by monitor against the trainer.
            # None when trials were judged on step time alone: their memory figures order configs, not GB.
            "predicted_peak_gb": (self.planner.predicted_peak(winner)
                                  if winner and not any(t.get("assumed_fit") for t in self.trials) else None),
        }
        if self.planner.baseline_failed or best is None:
            text, line = _failure_text(self.failure, self.planner)
            reports = write_reports(ctx.paths.root, ctx.workspace, outputs, failure=text)
            fixable = any(f.get("path") for f in (self.failure or {}).get("fixes") or [])
            then = ("then `ltx-pipeline resume`, or let `ltx-pipeline resume --apply-fix` patch the first config "
                    "fix and run the trial again") if fixable else "then `ltx-pipeline resume`"
            raise RunFailed(f"Autotune: {line}", where=reports["markdown"], fix=_fix_line(self.failure) + "; " + then)
        outputs["patches"] = _patch_stages(ctx, change)
        outputs["reports"] = write_reports(ctx.paths.root, ctx.workspace, outputs)
        ctx.narrate(f"Winner: {format_knobs(winner)}; "
                    + (f"patched {change} into every stage config." if change else "the baseline is fastest."))
        return outputs


def _trial_words(frozen: Any) -> str:
    """An Optuna trial's knobs as the reports spell them (its params are the knobs)."""
    params = dict(frozen.params)
    try:
        return format_knobs(params)
    except KeyError:
        return str(params)


def _launchable(ctx: RunContext, space: list[dict[str, Any]], processes: int) -> list[dict[str, Any]]:
    """The configs whose training launch validation would accept; the rest are never trials.

    Each candidate's knobs are patched (in memory) into every stage config and judged by the same
    runtime rules the train phase applies to its launch (processes, dataset size, buckets).
    """
    probe, data = ctx.output("probe"), ctx.output("data_check")
    stages = [(Path(c["config"]), s) for c, s in zip(ctx.output("config_patch")["configs"], data["stages"],
                                                     strict=True)]
    kept = [space[0]]  # the baseline passed validate already
    for knobs in space[1:]:
        problems = []
        for config, stage in stages:
            text, _ = apply_patches(config.read_text(encoding="utf-8"),
                                    [Patch(KNOB_PATHS[k], knobs[k], "autotune candidate") for k in KNOB_PATHS
                                     if k in knobs])
            checks = launch_checks(load_yaml(text) or {}, num_processes=processes,
                                   dataset_samples=data["samples"] or None,
                                   buckets=list(parse_buckets(stage["buckets"])),
                                   shm_bytes=probe["host"].get("shm_total_bytes"), cwd=config.parent)
            problems += [c.line() for c in checks if c.severity == "error" and c.path != "model.load_checkpoint"]
        if problems:
            ctx.narrate(f"Not a trial: {format_knobs(knobs)}, its launch would not validate ({problems[0]}).")
        else:
            kept.append(knobs)
    return kept


def _patch_stages(ctx: RunContext, change: dict[str, Any]) -> list[dict[str, Any]]:
    records = []
    for entry in ctx.output("config_patch")["configs"]:
        config = Path(entry["config"])
        text, done = apply_patches(config.read_text(encoding="utf-8"),
                                   [Patch(KNOB_PATHS[k], v, "autotune") for k, v in change.items()])
        if done:
            atomic_write(config, text, root=ctx.workspace)
        records += [{"stage": entry["stage"], "config": str(config), **r.to_dict()} for r in done]
    return records


def _failure_text(failure: dict[str, Any] | None, planner: SweepPlanner) -> tuple[str, str]:
    """(the fuller Markdown text, the one-line summary) of a failed sweep."""
    if failure is None:
        return "No config fitted.", "no config fitted"
    line = (f"the baseline {format_knobs(failure['knobs'])} failed: {failure['outcome']}"
            + (f" ({failure['reason']})" if failure["reason"] else ""))
    fixes = failure.get("fixes") or []
    if not fixes and failure["outcome"] in ("fit", "over_headroom"):
        fixes = [{"path": None, "value": None, "reason": f"peak over the {planner.limit_gb:.1f} GB limit: lower "
                  "--headroom, or train fewer frames / a lower resolution"}]
    steps = "\n".join(f"{i}. " + (f"`{f['path']}: {f['value']}` " if f["path"] else "") + f["reason"]
                      for i, f in enumerate(fixes, start=1))
    return f"{line}\n\nProposed fixes, in order:\n\n{steps or '(none proposed)'}\n\nLog: {failure.get('log')}", line


def _fix_line(failure: dict[str, Any] | None) -> str:
    fixes = (failure or {}).get("fixes") or []
    parts = [(f"{f['path']}: {f['value']} ({f['reason']})" if f["path"] else f["reason"]) for f in fixes[:4]]
    return "; ".join(parts) if parts else "lower --headroom or train fewer frames / a lower resolution"


PHASE = AutotunePhase()
