"""One run's measured figures, each read from where it was recorded, never computed from other figures.

- steps: the train phase's last trained stage, ``TrainedStage.run_final_step`` (a continuation counts on);
- seconds per step: the monitor's steady-state step time of that stage (``MonitoredStage.step_time_s``);
- peak memory: the trainer's own peak statistic the monitor recorded (``MonitoredStage.peak_gpu_memory_gb``);
- final train loss: the store's last loss of that stage (``metrics``), with its step;
- lowest holdout loss: ``outputs/holdout-loss.json`` (``compare.holdout``);
- samples trained on: what the trainer said it loaded (``MonitoredStage.samples_used``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ltx_pipeline.compare.holdout import holdout_curve, lowest_holdout
from ltx_pipeline.compare.records import Figure, RunFigures
from ltx_pipeline.outputs.monitor import MonitoredStage, MonitorOutputs
from ltx_pipeline.outputs.train import TrainedStage, TrainOutputs
from ltx_pipeline.store.rows import saved_id

if TYPE_CHECKING:
    from ltx_pipeline.compare.run_records import RunRecords

__all__ = ["run_figures"]


def run_figures(found: RunRecords, outputs_dir: Path) -> RunFigures:
    """The figures of one run whose stored rows ``found`` holds; ``outputs_dir`` is its ``outputs`` folder."""
    train = found.typed("train", TrainOutputs)
    monitor = found.typed("monitor", MonitorOutputs)
    trained = train.trained[-1] if train is not None and train.trained else None
    stage = trained.stage if trained is not None else None
    monitored = next((s for s in monitor.stages if s.stage == stage), None) if monitor is not None else None
    losses = [(m.step, m.loss) for m in found.store.metrics(saved_id(found.run), stage)] if stage is not None else []
    curve, _ = holdout_curve(outputs_dir)
    return RunFigures(
        run=found.run.name, state=found.run.state, stage=stage,
        steps=_steps(trained, found.why("train")),
        seconds_per_step=_step_time(monitored, found.why("monitor")),
        peak_memory_gb=_peak(monitored, found.why("monitor")),
        final_train_loss=_final_loss(losses, stage, found.why("train")),
        lowest_holdout_loss=lowest_holdout(outputs_dir),
        samples_trained_on=_samples(monitored, found.why("monitor")),
        loss_curve=tuple(losses), holdout_curve=curve, notes=tuple(found.notes))


def _steps(trained: TrainedStage | None, why: str) -> Figure:
    source = "train phase: the last trained stage's final step"
    if trained is None:
        return Figure.missing(source, why)
    return Figure(trained.run_final_step, source, step=trained.run_final_step,
                  detail={"stage": trained.stage, "final_checkpoint": trained.final_checkpoint})


def _step_time(monitored: MonitoredStage | None, why: str) -> Figure:
    source = "monitor phase: the steady-state step time (steps without validation or checkpoint saves)"
    if monitored is None:
        return Figure.missing(source, why)
    if monitored.step_time_s is None:
        return Figure.missing(source, "not measured: the monitor found fewer than two steps free of validation "
                                      "and checkpoint saves to measure a steady step time from")
    return Figure(monitored.step_time_s, source)


def _peak(monitored: MonitoredStage | None, why: str) -> Figure:
    source = "monitor phase: the trainer's own peak GPU memory statistic (GiB)"
    if monitored is None:
        return Figure.missing(source, why)
    if monitored.peak_gpu_memory_gb is None or monitored.peak_gpu_memory_gb <= 0:
        return Figure.missing(source, f"not measured: the trainer reported {monitored.peak_gpu_memory_gb} (no GPU "
                                      "memory was allocated, e.g. a run on the CPU)")
    return Figure(monitored.peak_gpu_memory_gb, source)


def _final_loss(losses: list[tuple[int, float | None]], stage: int | None, why: str) -> Figure:
    source = f"the store's training metrics (stage {stage}): the last logged loss" if stage else "training metrics"
    logged = [(step, loss) for step, loss in losses if loss is not None]
    if stage is None:
        return Figure.missing(source, why)
    if not logged:
        return Figure.missing(source, "not logged: the store holds no loss for this stage (the trainer printed no "
                                      "step line with a loss)")
    step, loss = logged[-1]
    return Figure(loss, source, step=step)


def _samples(monitored: MonitoredStage | None, why: str) -> Figure:
    source = "monitor phase: the samples the trainer said it loaded"
    if monitored is None:
        return Figure.missing(source, why)
    used = monitored.samples_used
    if used is None or used.used is None:
        return Figure.missing(source, "not recorded: the monitor found no count of samples in the trainer's log")
    return Figure(used.used, f"{source} ({used.source})",
                  detail={"total": used.total, "skipped": used.skipped, "log": used.log})
