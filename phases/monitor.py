"""Monitor phase: once every stage has trained, write the run's landing page and plots from measurements.

Train follows the trainer live (progress, metrics, checkpoints, failures); monitor comes after it
and turns what was recorded into ``<run>/outputs/run-summary.md``, ``loss.png`` and
``step_time.png``: final checkpoint and step per stage, the config as trained, the measured
steady-state step time and the trainer's peak VRAM, exact launch commands, seed, trainer commit
and model paths. Nothing here is predicted; nothing is launched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ltx_pipeline.engine import PhaseResult
from ltx_pipeline.ltx.modes import generated_media, get_mode
from ltx_pipeline.ltx.trainer_config.view import load_config_view
from ltx_pipeline.outputs.autotune import AutotuneOutputs
from ltx_pipeline.outputs.config_patch import ConfigPatchOutputs
from ltx_pipeline.outputs.data_check import DataCheckOutputs
from ltx_pipeline.outputs.monitor import MemoryModelCheck, MonitoredStage, MonitorOutputs
from ltx_pipeline.outputs.plan import PlanOutputs
from ltx_pipeline.outputs.prepare import PrepareOutputs
from ltx_pipeline.outputs.probe import ProbeOutputs
from ltx_pipeline.outputs.train import TrainOutputs
from ltx_pipeline.phase_context import LtxContext
from ltx_pipeline.reports.contact_sheet import validation_prompts, write_contact_sheet
from ltx_pipeline.reports.summary import plot_loss, plot_step_time, render_summary, steady_step_time
from ltx_pipeline.training.samples_used import check_samples_used, samples_used
from ltx_pipeline.workspace import atomic_write
from ltx_pipeline.yaml_io import load_yaml

__all__ = ["PHASE"]


class MonitorPhase:
    name = "monitor"
    heavy = True
    outputs_type = MonitorOutputs

    def fingerprint(self, ctx: LtxContext) -> dict[str, Any]:
        return {"train": ctx.output_digest("train")}

    def run(self, ctx: LtxContext) -> PhaseResult[MonitorOutputs]:
        ctx.narrate("Writing run-summary.md, loss.png and step_time.png from what the trainer measured.")
        probe, data = ctx.output(ProbeOutputs), ctx.output(DataCheckOutputs)
        # The trained stages as the train phase recorded them: the summary's rows, with what monitor measures.
        trained = ctx.output(TrainOutputs).to_stored()["stages"]
        metrics = ctx.journal.metrics()
        checkpoints = ctx.journal.checkpoints()
        stages = [self._stage(entry, metrics) for entry in trained]
        roots = {d.index: d.preprocessed_root for d in data.stages}
        for stage in stages:  # what the trainer trained on, from its own log (or the latent files)
            stage["samples_used"] = samples_used(stage.get("log") or "", roots.get(stage["stage"]))
        first_config = Path(stages[0]["config"])
        first = load_yaml(first_config.read_text(encoding="utf-8")) or {}  # the validation prompts, as written
        patch = ctx.output(ConfigPatchOutputs)
        prepared = ctx.output(PrepareOutputs) if ctx.has_output("prepare") else None
        memory_model = _verify_memory_model(ctx, stages)
        # What run-summary.md is rendered from (``reports.summary.render_summary``): measured facts only.
        facts = {
            "run": ctx.run_name, "run_root": str(ctx.paths.root), "request": ctx.request.model_dump(mode="json"),
            "gpus": _gpus(probe), "mode_title": get_mode(ctx.request.mode).title, "generates": _generates(ctx),
            "samples": data.samples, "data_stages": [s.model_dump(mode="json") for s in data.stages],
            "stages": stages, "seed": load_config_view(first_config).seed, "model_path": patch.model_path,
            "text_encoder_path": patch.text_encoder_path,
            "trainer_commit": probe.trainer.git_commit if probe.trainer else None,
            "autotune": _autotune(ctx),
            "prepared": prepared.to_stored() if prepared and prepared.prepared else None,
            "memory_model": memory_model.model_dump(mode="json") if memory_model else None,
        }
        outputs_dir = ctx.paths.outputs
        summary = atomic_write(outputs_dir / "run-summary.md", render_summary(facts), root=ctx.workspace)
        # A continuation's trainer counts its steps from 1; the plots place them after the steps it continues.
        start = {entry["stage"]: int(entry.get("start_step") or 0) for entry in trained}
        run_metrics = [{**m, "step": m["step"] + start.get(m["stage"], 0)} for m in metrics]
        validation_steps = sorted({step + start.get(s["stage"], 0) for s in stages for step in s["validation_steps"]})
        resumes = [(s["stage"], s["resumed_from"] + start.get(s["stage"], 0))
                   for s in stages if s.get("resumed_from") is not None]
        loss = plot_loss(run_metrics, outputs_dir / "loss.png", workspace=ctx.workspace,
                         checkpoint_steps=sorted({c["step"] + start.get(c["stage"], 0) for c in checkpoints}),
                         validation_steps=validation_steps, resumes=resumes)
        step_time = plot_step_time(run_metrics, outputs_dir / "step_time.png", workspace=ctx.workspace,
                                   resumes=resumes)
        sheet, unreadable = write_contact_sheet(outputs_dir / "samples", outputs_dir / "samples" / "contact-sheet.png",
                                                workspace=ctx.workspace, prompts=validation_prompts(first))
        if unreadable:
            ctx.narrate(f"Left out of the contact sheet, not decodable: {', '.join(unreadable)}")
        # After the summary: it says so loudly, then the run fails (unless the plan announced those skips).
        check_samples_used(stages, data.samples, agreed=data.agreed_skips)
        return PhaseResult(MonitorOutputs(
            summary=str(summary), loss_plot=str(loss), step_time_plot=str(step_time),
            contact_sheet=str(sheet) if sheet else None, memory_model=memory_model,
            stages=[MonitoredStage.model_validate({k: s[k] for k in (
                "stage", "final_checkpoint", "final_step", "step_time_s", "peak_gpu_memory_gb", "samples_used")})
                for s in stages]))

    def summary(self, outputs: MonitorOutputs) -> str:
        last = outputs.stages[-1]
        step_time = f"{last.step_time_s:.2f} s/step" if last.step_time_s is not None else "step time not measured"
        used = last.samples_used.used if last.samples_used else None
        trained = f"trained on {used} sample(s); " if used is not None else ""  # the trainer's own count
        return f"run-summary.md written; {trained}final checkpoint step {last.final_step}, {step_time}"

    @staticmethod
    def _stage(entry: dict[str, Any], metrics: list[dict[str, Any]]) -> dict[str, Any]:
        rows = [m for m in metrics if m["stage"] == entry["stage"]]
        config = load_config_view(Path(entry["config"]))
        interval, steps = config.validation.interval, config.optimization.steps
        return {**entry, "step_time_s": steady_step_time(rows), "logged_steps": len(rows),
                "validation_steps": list(range(0, steps + 1, interval)) if interval else []}


def _generates(ctx: LtxContext) -> str:
    """What the run generates, as plan.md said it (the plan's audio choice applied to the mode)."""
    audio = ctx.output(PlanOutputs).audio if ctx.has_output("plan") else None
    return generated_media(get_mode(ctx.request.mode), audio.to_dict() if audio is not None else None)


def _gpus(probe: ProbeOutputs) -> str:
    names = ", ".join(f"{g.name} ({g.memory_mib} MiB)" for g in probe.gpus.gpus) or "unknown"
    return names + (" (assumed)" if probe.gpus.assumed else "")


def _verify_memory_model(ctx: LtxContext, stages: list[dict[str, Any]]) -> MemoryModelCheck | None:
    """Compare autotune's predicted peak for the chosen config with the trainer's own peak statistic.

    A difference beyond ``MISS_TOLERANCE`` is a miss of the memory model: said, and recorded in the
    sweep's Optuna study (``memory_model_misses``) so it counts against the model. None when autotune
    did not run or was off, or either figure is missing.
    """
    if not ctx.has_output("autotune"):
        return None
    sweep = ctx.output(AutotuneOutputs)
    if sweep.off:  # no sweep, no memory model: nothing predicted, nothing to miss
        return None
    predicted = sweep.predicted_peak_gb
    measured = max((s["peak_gpu_memory_gb"] for s in stages if s.get("peak_gpu_memory_gb") is not None), default=None)
    if predicted is None or measured is None:
        return None
    from ltx_pipeline.ltx.autotune import MISS_TOLERANCE, prediction_miss

    error = prediction_miss(predicted, measured)
    verdict = MemoryModelCheck(predicted_gb=round(predicted, 2), measured_gb=round(measured, 2),
                               miss=error is not None, error=round(error, 3) if error is not None else None,
                               tolerance=MISS_TOLERANCE, study=sweep.study)
    if error is not None:
        from ltx_pipeline.autotune import study as studies

        studies.record_memory_miss(studies.storage_for(ctx.workspace), str(sweep.study), {
            "run": ctx.run_name, **verdict.model_dump(mode="json"), "knobs": sweep.winner})
        ctx.warn(f"Memory model miss: autotune predicted {predicted:.1f} GiB for {sweep.winner}; the trainer "
                 f"reported a {measured:.1f} GiB peak ({error:+.0%}, beyond ±{MISS_TOLERANCE:.0%}); recorded in the "
                 f"study {sweep.study}.")
    return verdict


def _autotune(ctx: LtxContext) -> str | None:
    """Autotune's own one-line measurement summary, when it ran (its sampler figures are measured), or
    that it was off."""
    if not ctx.has_output("autotune"):
        return None
    outputs = ctx.output(AutotuneOutputs)
    if outputs.off:
        return f"off {outputs.off}; no trial ran, the plan's baseline config was trained as is"
    change = ", ".join(f"{k}={v}" for k, v in outputs.deltas.items()) or "the baseline kept"
    objective = outputs.objective
    measured = f", {objective:.2f} s per optimizer step measured in its trials" if objective is not None else ""
    return f"{len(outputs.trials)} trial(s); winner {change}{measured}"


PHASE = MonitorPhase()
