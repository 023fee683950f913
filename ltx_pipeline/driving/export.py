"""``export``: one checkpoint of a run as a folder ready to use, from the run's records alone.

Gathers what ``ltx_pipeline.export`` needs from the store and the run's folder: the last trained stage's
weights files (the candidates), ``outputs/holdout-loss.json`` (``--step best``), the stage's
``training_config.yaml`` (the config the trainer saved when it started), the model identities the data
check recorded, the monitor's and the trainer's measured figures and the pictures the run rendered. Refuses
(``BadRequest``, exit 2) with one line: no such run, nothing trained yet, no such step, ``best`` without
figures, weights not in the trainer's ComfyUI layout, a folder already there. Writes nothing but ``--to``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ltx_pipeline.checkpoints.discovery import weights_files
from ltx_pipeline.driving.runs import find_workspace
from ltx_pipeline.engine.outputs import PhaseOutputs
from ltx_pipeline.errors import BadRequest
from ltx_pipeline.export import (
    Candidate,
    CardFacts,
    Chosen,
    Identity,
    Measured,
    WeightsFacts,
    choose,
    inspect_weights,
    model_card,
    parse_step,
    read_holdout,
    read_trainer_config,
    sha256_of,
    write_folder,
)
from ltx_pipeline.ltx.config_values import config_value
from ltx_pipeline.outputs.autotune import AutotuneOutputs
from ltx_pipeline.outputs.data_check import DataCheckOutputs, ModelIdentity
from ltx_pipeline.outputs.evaluate import EvaluateOutputs
from ltx_pipeline.outputs.holdout_figures import FIGURES_FILE, CheckpointLoss, lowest
from ltx_pipeline.outputs.monitor import MonitoredStage, MonitorOutputs
from ltx_pipeline.outputs.plan import PlanOutputs
from ltx_pipeline.outputs.train import TrainedStage, TrainOutputs
from ltx_pipeline.store import PhaseRun, Run, Store

__all__ = ["Exported", "export_run"]


TRAINING_CONFIG = "training_config.yaml"  # the trainer saves it in its output_dir when it starts
_Out = TypeVar("_Out", bound=PhaseOutputs)


@dataclass(frozen=True)
class Exported:
    """What ``export_run`` wrote: the folder, its files, the checkpoint and the card's facts."""

    folder: Path
    files: tuple[str, ...]
    chosen: Chosen
    facts: CardFacts


@dataclass(frozen=True)
class _Records:
    """The run's stored outputs ``export`` reads (None: the phase has no result)."""

    plan: PlanOutputs | None
    data_check: DataCheckOutputs | None
    autotune: AutotuneOutputs | None
    train: TrainOutputs | None
    monitor: MonitorOutputs | None
    evaluate: EvaluateOutputs | None


def export_run(workspace: Path | None, name: str, *, step: str, to: Path, force: bool = False) -> Exported:
    """Export checkpoint ``step`` (a number, ``last`` or ``best``) of run ``name`` into the new folder ``to``.

    Raises:
        BadRequest: as the module says; BadInput: a record or file cannot be read, or a write failed.
    """
    spec = parse_step(step)
    store, run = _run(workspace, name)
    records = _records(store, run)
    stage = _last_stage(records.train, name)
    outputs = Path(stage.output_dir)
    candidates = [Candidate(s, Path(p)) for s, p in weights_files(outputs / "checkpoints")]
    if not candidates:
        raise BadRequest(f"Run {name} has no weights file in {outputs / 'checkpoints'}", where="RUN",
                         fix=f"let the trainer save one (`ltx-pipeline resume --run {name}`), then export again")
    figures_file = outputs / FIGURES_FILE
    figures = read_holdout(figures_file)
    chosen = choose(candidates, spec, figures, figures_file)
    weights = inspect_weights(chosen.weights)
    if weights.problem is not None:
        raise BadRequest(f"{chosen.weights} is not a LoRA in the trainer's ComfyUI layout: {weights.problem}",
                         where=str(chosen.weights), fix="export a run whose trainer saved LoRA weights "
                         "(model.training_mode: lora)")
    config_file = outputs / TRAINING_CONFIG
    if not config_file.is_file():
        raise BadRequest(f"Run {name} has no {TRAINING_CONFIG} in {outputs}", where=str(config_file),
                         fix="export a run whose trainer started (it saves the config it trains with there)")
    pictures, copies = _pictures(records, outputs)
    facts = _facts(run, records, stage, chosen, weights, read_trainer_config(config_file),
                   figures, pictures)
    copies = {chosen.weights.name: chosen.weights, TRAINING_CONFIG: config_file, **copies}
    folder = write_folder(to, copies, {"README.md": model_card(facts)}, force=force)
    return Exported(folder, tuple(sorted([*copies, "README.md"])), chosen, facts)


def _run(workspace: Path | None, name: str) -> tuple[Store, Run]:
    ws, store = find_workspace(workspace)
    run = store.get_run(name) if store is not None else None
    if store is None or run is None:
        runs = ", ".join(r.name for r in store.list_runs()) if store is not None else ""
        raise BadRequest(f"No run named {name!r} in {ws.root}", where="RUN",
                         fix=f"name one of its runs: {runs}" if runs else "check --workspace (or "
                             "$LTX_PIPELINE_WORKSPACE)")
    return store, run


def _typed(rows: dict[str, PhaseRun], kind: type[_Out]) -> _Out | None:
    row = rows.get(kind.PHASE)
    if row is None or row.status not in ("succeeded", "detached") or not isinstance(row.outputs, dict):
        return None
    return kind.from_stored(row.outputs, row.outputs_version)


def _records(store: Store, run: Run) -> _Records:
    assert run.id is not None
    rows = store.latest_phase_runs(run.id)
    return _Records(_typed(rows, PlanOutputs), _typed(rows, DataCheckOutputs), _typed(rows, AutotuneOutputs),
                    _typed(rows, TrainOutputs), _typed(rows, MonitorOutputs), _typed(rows, EvaluateOutputs))


def _last_stage(train: TrainOutputs | None, name: str) -> TrainedStage:
    """The last stage the trainer finished: the weights the run ends with, and the ones before them."""
    stages = train.trained if train is not None else []
    if not stages:
        raise BadRequest(f"Run {name} has not finished training: there is no trained stage to export",
                         where="RUN", fix=f"finish it first (`ltx-pipeline resume --run {name}`; "
                                          "`ltx-pipeline status` shows where it is)")
    return stages[-1]


def _pictures(records: _Records, outputs: Path) -> tuple[dict[str, str], dict[str, Path]]:
    """The run's pictures to ship (folder name -> what it shows) and their files."""
    shown: dict[str, str] = {}
    files: dict[str, Path] = {}
    evaluate, monitor = records.evaluate, records.monitor
    if evaluate is not None and evaluate.contact_sheet and Path(evaluate.contact_sheet).is_file():
        files["contact-sheet.png"] = Path(evaluate.contact_sheet)
        shown["contact-sheet.png"] = (f"the evaluation renders of `{Path(evaluate.weights or '').name}` "
                                      "(the evaluate phase's prompts and seeds)")
    elif monitor is not None and monitor.contact_sheet and Path(monitor.contact_sheet).is_file():
        files["contact-sheet.png"] = Path(monitor.contact_sheet)
        shown["contact-sheet.png"] = "the trainer's validation samples during training, by step"
    grid = outputs / "eval" / "grid.png"
    if grid.is_file():
        files["grid.png"] = grid
        shown["grid.png"] = "the checkpoints x prompts grid: the same prompts and seeds at each chosen checkpoint"
    return shown, files


def _identity(ident: ModelIdentity | None) -> Identity | None:
    return None if ident is None else Identity(ident.path, ident.kind, ident.size, ident.content)


def _monitored(records: _Records, stage: int) -> MonitoredStage | None:
    stages = records.monitor.stages if records.monitor is not None else []
    return next((s for s in stages if s.stage == stage), None)


def _measured(records: _Records, stage: TrainedStage) -> Measured:
    monitored = _monitored(records, stage.stage)
    peak = stage.peak_gpu_memory_gb
    if not stage.on_gpu or not peak:
        peak, note = None, "the trainer trained on no GPU or reported no peak"
    else:
        note = "the trainer's own peak GPU memory statistic"
    autotune = records.autotune
    swept = None
    if autotune is not None and autotune.off is None and autotune.objective is not None:
        swept = (f"{len(autotune.trials)} trial(s); the winner measured {autotune.objective:.3f} s per optimizer "
                 "step")
    return Measured(monitored.step_time_s if monitored is not None else None, stage.steps_per_second, peak, note,
                    swept)


def _facts(run: Run, records: _Records, stage: TrainedStage, chosen: Chosen, weights: WeightsFacts,
           config: dict[str, Any], figures: list[CheckpointLoss] | None, pictures: dict[str, str]) -> CardFacts:
    request = run.request or {}
    model_files = records.data_check.model_files if records.data_check is not None else None
    monitored = _monitored(records, stage.stage)
    used = monitored.samples_used if monitored is not None else None
    plan = records.plan
    backend = str(request.get("backend") or "ltx")
    rank, alpha = config_value(config, "lora.rank"), config_value(config, "lora.alpha")
    return CardFacts(
        run=run.name, weights_file=chosen.weights.name, weights_sha256=sha256_of(chosen.weights),
        weights_size=weights.size, step=chosen.step, chosen_by=chosen.chosen_by, stage_final_step=stage.final_step,
        backend=backend, backend_is_ltx=backend == "ltx",
        base_model=_identity(model_files.model if model_files else None),
        text_encoder=_identity(model_files.text_encoder if model_files else None),
        trigger=request.get("trigger") or None,
        mode=plan.recipe.mode if plan is not None else "not recorded",
        training_mode=str(config_value(config, "model.training_mode", "lora")),
        rank=rank if isinstance(rank, int) else None, alpha=alpha if isinstance(alpha, int) else None,
        target_modules=tuple(str(m) for m in config_value(config, "lora.target_modules", None) or ()),
        adapted_modules=len(weights.modules), dtypes=weights.dtypes,
        samples_trained=used.used if used is not None else None,
        samples_total=records.data_check.samples if records.data_check is not None else None,
        measured=_measured(records, stage), holdout=chosen.figure,
        lowest_holdout=lowest(figures or []),
        metadata=weights.metadata, pictures=pictures)
