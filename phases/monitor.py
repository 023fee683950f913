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

from ltx_pipeline.engine import PhaseResult, RunContext
from ltx_pipeline.engine.fingerprint import digest
from ltx_pipeline.ltx.modes import get_mode
from ltx_pipeline.steps.contact_sheet import write_contact_sheet
from ltx_pipeline.steps.samples_used import check_samples_used, samples_used
from ltx_pipeline.steps.summary import plot_loss, plot_step_time, render_summary, steady_step_time
from ltx_pipeline.workspace import atomic_write
from ltx_pipeline.yaml_io import load_yaml

__all__ = ["PHASE"]


class MonitorPhase:
    name = "monitor"
    heavy = True

    def fingerprint(self, ctx: RunContext) -> dict[str, Any]:
        return {"train": digest(ctx.output("train"))}

    def run(self, ctx: RunContext) -> PhaseResult:
        ctx.narrate("Writing run-summary.md, loss.png and step_time.png from what the trainer measured.")
        train, probe = ctx.output("train"), ctx.output("probe")
        metrics = ctx.journal.metrics()
        checkpoints = ctx.journal.checkpoints()
        stages = [self._stage(ctx, entry, metrics) for entry in train["stages"]]
        roots = {d["index"]: d.get("preprocessed_root") for d in ctx.output("data_check")["stages"]}
        for stage in stages:  # what the trainer trained on, from its own log (or the latent files)
            stage["samples_used"] = samples_used(stage.get("log") or "", roots.get(stage["stage"]))
        first = load_yaml(Path(stages[0]["config"]).read_text(encoding="utf-8")) or {}
        patch = ctx.output("config_patch")
        facts = {
            "run": ctx.run_name, "run_root": str(ctx.paths.root), "request": ctx.request.model_dump(mode="json"),
            "gpus": _gpus(probe), "mode_title": get_mode(ctx.request.mode).title,
            "samples": ctx.output("data_check")["samples"], "data_stages": ctx.output("data_check")["stages"],
            "stages": stages, "seed": first.get("seed"), "model_path": patch["model_path"],
            "text_encoder_path": patch["text_encoder_path"],
            "trainer_commit": (probe.get("trainer") or {}).get("git_commit"),
            "autotune": _autotune(ctx),
            "prepared": ctx.output("prepare") if (ctx.upstream.get("prepare") or {}).get("prepared") else None,
            "memory_model": _verify_memory_model(ctx, stages),
        }
        outputs_dir = ctx.paths.outputs
        summary = atomic_write(outputs_dir / "run-summary.md", render_summary(facts), root=ctx.workspace)
        # A continuation's trainer counts its steps from 1; the plots place them after the steps it continues.
        start = {entry["stage"]: int(entry.get("start_step") or 0) for entry in train["stages"]}
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
                                                workspace=ctx.workspace)
        if unreadable:
            ctx.narrate(f"Left out of the contact sheet, not decodable: {', '.join(unreadable)}")
        # After the summary: it says so loudly, then the run fails (unless the plan announced those skips).
        check_samples_used(stages, facts["samples"], agreed=ctx.output("data_check").get("agreed_skips", 0))
        return PhaseResult({"summary": str(summary), "loss_plot": str(loss), "step_time_plot": str(step_time),
                            "contact_sheet": str(sheet) if sheet else None, "memory_model": facts["memory_model"],
                            "stages": [{k: s[k] for k in ("stage", "final_checkpoint", "final_step", "step_time_s",
                                                          "peak_gpu_memory_gb", "samples_used")} for s in stages]})

    def summary(self, outputs: dict[str, Any]) -> str:
        last = outputs["stages"][-1]
        step_time = f"{last['step_time_s']:.2f} s/step" if last["step_time_s"] is not None else "step time not measured"
        used = (last.get("samples_used") or {}).get("used")
        trained = f"trained on {used} sample(s); " if used is not None else ""  # the trainer's own count
        return f"run-summary.md written; {trained}final checkpoint step {last['final_step']}, {step_time}"

    @staticmethod
    def _stage(ctx: RunContext, entry: dict[str, Any], metrics: list[dict[str, Any]]) -> dict[str, Any]:
        rows = [m for m in metrics if m["stage"] == entry["stage"]]
        values = load_yaml(Path(entry["config"]).read_text(encoding="utf-8")) or {}
        interval = (values.get("validation") or {}).get("interval")
        steps = int((values.get("optimization") or {}).get("steps", 0))
        return {**entry, "step_time_s": steady_step_time(rows), "logged_steps": len(rows),
                "validation_steps": list(range(0, steps + 1, int(interval))) if interval else []}


def _gpus(probe: dict[str, Any]) -> str:
    gpus = (probe.get("gpus") or {}).get("gpus") or []
    names = ", ".join(f"{g.get('name')} ({g.get('memory_mib')} MiB)" for g in gpus) or "unknown"
    return names + (" (assumed)" if (probe.get("gpus") or {}).get("assumed") else "")


def _verify_memory_model(ctx: RunContext, stages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Compare autotune's predicted peak for the chosen config with the trainer's own peak statistic.

    A difference beyond ``MISS_TOLERANCE`` is a miss of the memory model: said, and recorded in the
    sweep's Optuna study (``memory_model_misses``) so it counts against the model. None when autotune
    did not run or was off, or either figure is missing.
    """
    if "autotune" not in ctx.upstream:
        return None
    sweep = ctx.output("autotune")
    if sweep.get("off"):  # no sweep, no memory model: nothing predicted, nothing to miss
        return None
    predicted = sweep.get("predicted_peak_gb")
    measured = max((s["peak_gpu_memory_gb"] for s in stages if s.get("peak_gpu_memory_gb") is not None), default=None)
    if predicted is None or measured is None:
        return None
    from ltx_pipeline.ltx.autotune import MISS_TOLERANCE, prediction_miss

    error = prediction_miss(predicted, measured)
    verdict = {"predicted_gb": round(predicted, 2), "measured_gb": round(measured, 2), "miss": error is not None,
               "error": round(error, 3) if error is not None else None, "tolerance": MISS_TOLERANCE,
               "study": sweep.get("study")}
    if error is not None:
        from ltx_pipeline.steps.autotune import study as studies

        studies.record_memory_miss(studies.storage_for(ctx.workspace), sweep["study"], {"run": ctx.run_name, **verdict,
                                                                      "knobs": sweep.get("winner")})
        ctx.warn(f"Memory model miss: autotune predicted {predicted:.1f} GB for {sweep.get('winner')}; the trainer "
                 f"reported a {measured:.1f} GB peak ({error:+.0%}, beyond ±{MISS_TOLERANCE:.0%}); recorded in the "
                 f"study {sweep.get('study')}.")
    return verdict


def _autotune(ctx: RunContext) -> str | None:
    """Autotune's own one-line measurement summary, when it ran (its sampler figures are measured), or
    that it was off."""
    if "autotune" not in ctx.upstream:
        return None
    outputs = ctx.output("autotune")
    if outputs.get("off"):
        return f"off {outputs['off']}; no trial ran, the plan's baseline config was trained as is"
    change = ", ".join(f"{k}={v}" for k, v in (outputs.get("deltas") or {}).items()) or "the baseline kept"
    objective = outputs.get("objective")
    measured = f", {objective:.2f} s per optimizer step measured in its trials" if objective is not None else ""
    return f"{len(outputs.get('trials') or [])} trial(s); winner {change}{measured}"


PHASE = MonitorPhase()
