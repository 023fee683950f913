"""The autotune sweep: the planner, the Optuna study and the trial loop, on one host or several.

``Sweep`` picks each config with ``ltx.autotune.SweepPlanner`` (memory is monotone along every knob), runs it with
``TrialRunner``, records every trial and pruned config in the run's Optuna study, from which an interrupted sweep
resumes without re-running finished trials, and an earlier run's finished sweep may settle it (``prior``). A shared
store's ``SharedSweep`` and this host's ``ParallelTrials`` drive the same ``Sweep`` through its public methods. The
autotune phase runs it and stores what ``run`` returns (``AutotuneOutputs``); nothing here reaches into the phase.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ltx_pipeline.autotune import study as studies
from ltx_pipeline.autotune._report import noise_tie, trial_line, winner_sentence, write_reports
from ltx_pipeline.autotune.hosts import shared_store
from ltx_pipeline.autotune.parallel_sweep import ParallelTrials
from ltx_pipeline.autotune.prior import prior_disagreement, prior_key, same_knobs
from ltx_pipeline.autotune.shared_sweep import SharedSweep
from ltx_pipeline.autotune.slots import GPUS_PER_TRIAL, assign_slots, slot_count
from ltx_pipeline.autotune.trial_runner import TrialRunner
from ltx_pipeline.engine.processes import host_id
from ltx_pipeline.errors import RunFailed
from ltx_pipeline.ltx.autotune import MEMORY_FAILURES, SweepPlanner, deltas, format_knobs, search_space
from ltx_pipeline.ltx.buckets import parse_buckets
from ltx_pipeline.ltx.config_patch import KNOB_PATHS, Patch, apply_patches
from ltx_pipeline.ltx.launch_checks import launch_checks
from ltx_pipeline.ltx.recipe import Recipe
from ltx_pipeline.outputs.autotune import AutotuneOutputs, SideBySide
from ltx_pipeline.outputs.config_patch import ConfigPatchOutputs
from ltx_pipeline.outputs.data_check import DataCheckOutputs
from ltx_pipeline.outputs.probe import ProbeOutputs
from ltx_pipeline.outputs.validate import ValidateOutputs
from ltx_pipeline.phase_context import LtxContext
from ltx_pipeline.store.location import redact
from ltx_pipeline.trainer_log import canonical_kind
from ltx_pipeline.workspace import atomic_write
from ltx_pipeline.yaml_io import load_yaml

__all__ = ["Sweep"]


class Sweep:
    """One sweep: the planner, the study and the trial loop.

    The public face the shared sweep (``autotune.shared_sweep``) drives too: ``resume`` (orphans, fixes, finished
    trials read back), ``apply_prior``, ``record`` and ``fold`` (a result into the planner and the records), and
    the attributes ``planner``, ``trials``, ``trial_runner``, ``space``, ``per_gpu_batch``, ``max_batch``, ``capacity``.
    """

    def __init__(self, ctx: LtxContext, recipe: Recipe, probe: ProbeOutputs) -> None:
        self.ctx = ctx
        knobs = recipe.knobs
        # One process's samples per optimizer step, kept while batch size is traded against accumulation.
        self.per_gpu_batch = int(knobs["batch_size"]) * int(knobs.get("gradient_accumulation_steps") or 1)
        multi = any(len(s.buckets) > 1 for s in recipe.stages)
        self.processes = ctx.output(ValidateOutputs).num_processes
        samples = ctx.output(DataCheckOutputs).samples
        max_batch = max(1, samples // self.processes) if samples else None  # drop_last: no zero-batch epoch
        space = search_space(probe.tier.base, self.per_gpu_batch, multi, knobs, max_batch=max_batch)
        if recipe.training_mode == "full":  # the trainer refuses quantization in full mode
            space = [space[0], *(k for k in space[1:] if k["quantization"] is None)]
        self.space = _launchable(ctx, space, self.processes)
        self.baseline = space[0]
        self.max_batch = max(int(k["batch_size"]) for k in space)
        gpus = probe.gpus.gpus
        self.capacity = min(g.memory_mib for g in gpus) / 1024
        self.gpu_indices = list(ctx.journal.pinned or [g.index for g in gpus])  # held for this phase, else all
        self.planner = SweepPlanner(space, self.baseline, capacity_gb=self.capacity, headroom=ctx.request.headroom,
                                    per_gpu_batch=self.per_gpu_batch)
        self.runner: TrialRunner | None = None
        self.trials: list[dict[str, Any]] = []
        self.failure: dict[str, Any] | None = None
        self.superseded: list[dict[str, Any]] = []  # trials --apply-fix made obsolete, run again
        self.prior: dict[str, Any] | None = None  # what an earlier run's study told this sweep, and why
        self.side_by_side: SideBySide | None = None  # how trials shared the GPUs, when several ran at once

    @property
    def effective_batch(self) -> int:
        """Samples per optimizer step over every process, as ``--effective-batch`` means it."""
        return self.per_gpu_batch * self.processes

    def keep_trial_gpus(self, needed: int) -> None:
        """Give back the GPUs held for the sanity set's preprocessing that the trials will not use."""
        if (pinned := self.ctx.journal.pinned) is not None and needed < len(pinned):
            self.ctx.journal.narrow(needed)
            self.gpu_indices[:] = list(self.ctx.journal.pinned or pinned[:needed])  # the trial runner's list too

    def run(self, sanity_root: str, sweep_key: str) -> AutotuneOutputs:
        """The sweep, resumed from its study (``sweep_key``: what its measurements depend on), to its winner."""
        ctx = self.ctx
        self.runner = TrialRunner(ctx, sanity_root=sanity_root, max_batch=self.max_batch,
                                  gpu_indices=self.gpu_indices, capacity_gb=self.capacity)
        storage = studies.storage_for(ctx.workspace)
        study, name = studies.open_study(storage, ctx.run_name, sweep_key)
        launched = len(ctx.journal.processes("trial"))
        key = prior_key(ctx, self.space)
        studies.mark_prior_key(study, key)
        prior = studies.find_prior(storage, key, exclude=name)
        dists = studies.distributions(self.space)
        if shared_store(ctx.workspace):
            # Several GPU hosts may share this sweep (`ltx-pipeline autotune-worker`): see autotune.shared_sweep.
            SharedSweep(self, storage, name, sanity_root).run(prior)
        else:
            self.resume(study)
            self.apply_prior(prior)
            count = slot_count(ctx.request.autotune_parallel, len(self.gpu_indices),
                               width=len(self.planner.remaining()))
            self.keep_trial_gpus(count * GPUS_PER_TRIAL)
            if count > 1:  # several trials at once, each on its own GPUs (autotune.parallel_sweep)
                slots = assign_slots(self.gpu_indices, count)
                self.side_by_side = ParallelTrials(self, study, dists, prior, slots).run()
            else:
                self._local_trials(study, dists, prior)
        studies.record_pruned(study, self.planner.pruned, dists)
        if self.trials and len(ctx.journal.processes("trial")) == launched:
            ctx.narrate(f"No trial ran: study {name} was measured with the same inputs (knobs, data, headroom, the "
                        "trial's config apart from its step count, learning rate, cadence and outputs), so its "
                        "results stand.")
        outputs = self._finish(name, storage)
        studies.mark_finished(study, outputs.winner)
        return outputs

    def _local_trials(self, study: Any, dists: dict[str, Any], prior: Any) -> None:
        """The sweep on this host alone: the planner's next config until there is none."""
        ctx = self.ctx
        while (knobs := self.planner.next_trial()) is not None:
            number = 1 + max((h.stage for h in ctx.journal.processes("trial")), default=0)
            trial = studies.ask_trial(study, knobs, dists)
            trial.set_user_attr("trial_number", number)
            done, extra = self.trial_runner.run(knobs, number, self.trials)
            self.fold(study, trial, done.result, extra)
            self.apply_prior(prior)
            studies.record_pruned(study, self.planner.pruned, dists)

    def fold(self, study: Any, trial: Any, result: Any, extra: dict[str, Any]) -> dict[str, Any]:
        """Record a trial's result with the planner, tell it to the study and narrate it."""
        self.planner.record(result)
        fits = self.planner.fits(result)
        state = studies.tell_result(study, trial, result, fits=fits, objective=self.planner.objective(result),
                                    extra=extra)
        record = self.record(extra["trial_number"], result, fits, state, extra)
        self.ctx.narrate(trial_line(record))
        return record

    def apply_prior(self, prior: tuple[str, list[tuple[Any, Any]]] | None) -> None:
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
        if why is not None or theirs is None:  # (no baseline of theirs is always a disagreement)
            self.prior = {"study": name, "used": False, "why": why or "it has no result for this baseline"}
            self.ctx.narrate(f"Prior study {name} ignored: {why}; the sweep runs in full.")
            return
        used = 0
        for frozen, result in results:
            if not any(same_knobs(result.knobs, k) for k in self.planner.remaining()):
                continue
            number = frozen.user_attrs.get("trial_number")
            result.reason = "; ".join(p for p in (result.reason, f"from the prior study {name}, trial {number}") if p)
            self.planner.record(result)
            self.record(f"prior {name}#{number}", result, self.planner.fits(result), "prior",
                         {"from_prior": f"{name} trial {number}", "log": None})
            used += 1
        self.prior = {"study": name, "used": True, "results": used,
                      "why": f"its baseline agrees with this one (step time {theirs.step_time_s:.2f}s vs "
                             f"{ours['step_time_s']:.2f}s, peak {theirs.peak_gb:.1f} GiB vs "
                             f"{max(v for v in (ours['peak_vram_gb'], ours['validation_peak_vram_gb']) if v):.1f} GiB)"}
        self.ctx.narrate(f"Prior study {name}: {self.prior['why']}; its {used} other result(s) settle this sweep "
                         "instead of new trials.")

    def resume(self, study: Any, *, shared: bool = False) -> None:
        """Stop orphaned trial processes, fail their Optuna trials, replay what finished before.

        ``shared``: several hosts work on the study; only this host's processes are its own, and a trial
        left running is reclaimed once its heartbeat is stale (``autotune.hosts``), not here.
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
        if ctx.options.apply_fix:
            self._apply_trial_fixes(study)
        self._retry_where_changed(study)
        self.superseded = [{"number": n, "reason": why} for n, why in sorted(studies.superseded(study).items())]
        for frozen, result in studies.finished_results(study):
            if result.knobs not in self.planner.remaining():
                continue  # already recorded (or no longer in this space)
            self.planner.record(result)
            attrs = frozen.user_attrs
            extra = {k: attrs.get(k) for k in ("trial_number", "host_ram_gb", "log", "failure_kind", "fixes",
                                               "step_spread", "gpus")}
            state = "complete" if frozen.state.name == "COMPLETE" else "fail"
            self.record(attrs.get("trial_number"), result, self.planner.fits(result), state, extra)
        if self.trials:
            ctx.narrate(f"Resuming the sweep: {len(self.trials)} finished trial(s) read back from the study, "
                        "not run again.")

    def _retry_where_changed(self, study: Any) -> None:
        """Supersede each failed trial (not a memory measurement) whose environment changed since it
        ran, so it runs again; say so when nothing changed and the failure is read back as it was."""
        ctx, now = self.ctx, self.trial_runner.environment()
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
        for entry in ctx.output(ConfigPatchOutputs).configs:
            config = Path(entry.config)
            text, done = apply_patches(config.read_text(encoding="utf-8"),
                                       [Patch(path, value, why) for path, (value, why) in patches.items()])
            if done:
                atomic_write(config, text, root=ctx.workspace)
            for record in done:
                ctx.warn(f"{config.name}: patched {record.path} {record.old} -> {record.new} ({record.reason})")
        studies.supersede(study, obsolete)
        ctx.narrate(f"--apply-fix: {len(obsolete)} failed trial(s) superseded in the study; they run again with "
                    "the fix.")

    def record(self, number: Any, result: Any, fits: bool, state: str, extra: dict[str, Any]) -> dict[str, Any]:
        """Keep one trial's record (run here, told by another host, read back or from a prior)."""
        record = {"number": number, "knobs": dict(result.knobs), "outcome": result.outcome, "state": state,
                  "fits": fits, "step_time_s": result.step_time_s, "peak_vram_gb": result.peak_vram_gb,
                  "validation_peak_vram_gb": result.validation_peak_vram_gb, "seconds": result.seconds,
                  "reason": result.reason, "host_ram_gb": extra.get("host_ram_gb"), "log": extra.get("log"),
                  "objective": self.planner.objective(result) if fits else None,
                  "step_spread": extra.get("step_spread"),
                  **{k: getattr(result, k, None) for k in ("peak_source", "validation_peak_source", "assumed_fit",
                                                          "step_margin")},
                  **({"from_prior": extra["from_prior"]} if extra.get("from_prior") else {}),
                  **({"host": extra["host"]} if extra.get("host") else {}),
                  **({"gpus": extra["gpus"]} if extra.get("gpus") else {})}
        self.trials.append(record)
        if number is not None and result.knobs == self.baseline and not fits:
            self.failure = {**record, "failure_kind": extra.get("failure_kind"), "fixes": extra.get("fixes") or []}
        return record

    @property
    def trial_runner(self) -> TrialRunner:
        if self.runner is None:
            raise RuntimeError("the sweep has not started (Sweep.run makes its trial runner)")
        return self.runner

    def _finish(self, study_name: str, storage: str) -> AutotuneOutputs:
        ctx = self.ctx
        ranking = self.planner.ranking()
        best = ranking.winner if ranking else None
        winner = dict(best.knobs) if best else None
        change = deltas(winner, self.baseline) if winner else {}
        outputs: dict[str, Any] = {
            # The optuna.db path, or the server's URL with its password replaced: never a secret in outputs.
            "study": study_name, "storage": storage.removeprefix("sqlite:///") if storage.startswith("sqlite:///")
            else redact(storage), "capacity_gb": self.capacity, "headroom": ctx.request.headroom,
            "limit_gb": self.planner.limit_gb, "effective_batch": self.effective_batch, "trials": self.trials,
            "per_gpu_batch": self.per_gpu_batch, "processes": self.processes, "baseline": self.baseline,
            "pruned": [{"knobs": p.knobs, "reason": p.reason} for p in self.planner.pruned],
            "winner": winner, "deltas": change, "objective": self.planner.objective(best) if best else None,
            "patches": [], "superseded": self.superseded, "prior": self.prior, "side_by_side": self.side_by_side,
            "noise_tie": noise_tie(ranking),
            # What the memory model expects the training to peak at: verified by monitor against the trainer.
            # None when trials were judged on step time alone: their memory figures order configs, not GB.
            "predicted_peak_gb": (self.planner.predicted_peak(winner)
                                  if winner and not any(t.get("assumed_fit") for t in self.trials) else None),
        }
        if self.planner.baseline_failed or best is None or winner is None:
            text, line = _failure_text(self.failure, self.planner)
            reports = write_reports(ctx.paths.root, ctx.workspace, outputs, failure=text)
            fixable = any(f.get("path") for f in (self.failure or {}).get("fixes") or [])
            then = ("then `ltx-pipeline resume`, or let `ltx-pipeline resume --apply-fix` patch the first config "
                    "fix and run the trial again") if fixable else "then `ltx-pipeline resume`"
            raise RunFailed(f"Autotune: {line}", where=reports["markdown"], fix=_fix_line(self.failure) + "; " + then)
        outputs["patches"] = _patch_stages(ctx, change)
        outputs["reports"] = write_reports(ctx.paths.root, ctx.workspace, outputs)
        ctx.narrate(winner_sentence(outputs))
        return AutotuneOutputs.model_validate(outputs)


def _trial_words(frozen: Any) -> str:
    """An Optuna trial's knobs as the reports spell them (its params are the knobs)."""
    params = dict(frozen.params)
    try:
        return format_knobs(params)
    except KeyError:
        return str(params)


def _launchable(ctx: LtxContext, space: list[dict[str, Any]], processes: int) -> list[dict[str, Any]]:
    """The configs whose training launch validation would accept; the rest are never trials.

    Each candidate's knobs are patched (in memory) into every stage config and judged by the same
    runtime rules the train phase applies to its launch (processes, dataset size, buckets).
    """
    probe, data = ctx.output(ProbeOutputs), ctx.output(DataCheckOutputs)
    stages = [(Path(c.config), s) for c, s in zip(ctx.output(ConfigPatchOutputs).configs, data.stages, strict=True)]
    kept = [space[0]]  # the baseline passed validate already
    for knobs in space[1:]:
        problems = []
        for config, stage in stages:
            text, _ = apply_patches(config.read_text(encoding="utf-8"),
                                    [Patch(KNOB_PATHS[k], knobs[k], "autotune candidate") for k in KNOB_PATHS
                                     if k in knobs])
            checks = launch_checks(load_yaml(text) or {}, num_processes=processes,
                                   dataset_samples=data.samples or None,
                                   buckets=list(parse_buckets(stage.buckets)),
                                   shm_bytes=probe.host.shm_total_bytes, cwd=config.parent)
            problems += [c.line() for c in checks if c.severity == "error" and c.path != "model.load_checkpoint"]
        if problems:
            ctx.narrate(f"Not a trial: {format_knobs(knobs)}, its launch would not validate ({problems[0]}).")
        else:
            kept.append(knobs)
    return kept


def _patch_stages(ctx: LtxContext, change: dict[str, Any]) -> list[dict[str, Any]]:
    records = []
    for entry in ctx.output(ConfigPatchOutputs).configs:
        config = Path(entry.config)
        text, done = apply_patches(config.read_text(encoding="utf-8"),
                                   [Patch(KNOB_PATHS[k], v, "autotune") for k, v in change.items()])
        if done:
            atomic_write(config, text, root=ctx.workspace)
        records += [{"stage": entry.stage, "config": str(config), **r.to_dict()} for r in done]
    return records


def _failure_text(failure: dict[str, Any] | None, planner: SweepPlanner) -> tuple[str, str]:
    """(the fuller Markdown text, the one-line summary) of a failed sweep."""
    if failure is None:
        return "No config fitted.", "no config fitted"
    line = (f"the baseline {format_knobs(failure['knobs'])} failed: {failure['outcome']}"
            + (f" ({failure['reason']})" if failure["reason"] else ""))
    fixes = failure.get("fixes") or []
    if not fixes and failure["outcome"] in ("fit", "over_headroom"):
        fixes = [{"path": None, "value": None, "reason": f"peak over the {planner.limit_gb:.1f} GiB limit: lower "
                  "--headroom, or train fewer frames / a lower resolution"}]
    steps = "\n".join(f"{i}. " + (f"`{f['path']}: {f['value']}` " if f["path"] else "") + f["reason"]
                      for i, f in enumerate(fixes, start=1))
    return f"{line}\n\nProposed fixes, in order:\n\n{steps or '(none proposed)'}\n\nLog: {failure.get('log')}", line


def _fix_line(failure: dict[str, Any] | None) -> str:
    fixes = (failure or {}).get("fixes") or []
    parts = [(f"{f['path']}: {f['value']} ({f['reason']})" if f["path"] else f["reason"]) for f in fixes[:4]]
    return "; ".join(parts) if parts else "lower --headroom or train fewer frames / a lower resolution"
