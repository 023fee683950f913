"""The pages' data: the runs list and one run, built from the store through the same report as ``status --json``.

One reader, two views: every run's header (state, phase, step/total, ETA, losses, approval gate, next
command) is ``status.report.status_report``'s entry, unchanged; the run page adds what only it shows,
read from the stored phase outputs (typed, ``ltx_pipeline.outputs``) and the files in the run's folder.
Nothing here writes: the store comes from ``StoreSource`` (read-only) and files are only read.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ltx_pipeline.engine.outputs import PhaseOutputs
from ltx_pipeline.errors import BadInput, split_line
from ltx_pipeline.outputs.autotune import AutotuneOutputs
from ltx_pipeline.outputs.config_patch import ConfigPatchOutputs
from ltx_pipeline.outputs.data_check import DataCheckOutputs
from ltx_pipeline.outputs.evaluate import EvaluateOutputs
from ltx_pipeline.outputs.train import TrainOutputs
from ltx_pipeline.status.report import status_report
from ltx_pipeline.store.rows import saved_id
from ltx_pipeline.training import readers as trainer_readers
from ltx_pipeline.ui.configs import stage_configs
from ltx_pipeline.ui.documents import run_documents
from ltx_pipeline.ui.grid import checkpoint_grid
from ltx_pipeline.ui.media import eval_renders, sample_grid
from ltx_pipeline.ui.series import training_series
from ltx_pipeline.ui.studio_view import studio_view
from ltx_pipeline.ui.trials import autotune_view

if TYPE_CHECKING:
    from ltx_pipeline.store import PhaseRun, Store
    from ltx_pipeline.store.reader import Record, StoreReader
    from ltx_pipeline.ui.source import StoreSource

__all__ = ["live_view", "run_view", "runs_view"]

_Outputs = TypeVar("_Outputs", bound=PhaseOutputs)


def runs_view(source: StoreSource) -> dict[str, Any]:
    """Every run's status entry (``status --json``'s dict), and the store it came from, redacted."""
    with source.open() as store:
        report = _report(store, source, None)
    return {**report, "store": source.shown}


def live_view(source: StoreSource, name: str, data_roots: Sequence[Path] = ()) -> dict[str, Any] | None:
    """What the run page polls: the run's status entry, its training curves and its samples so far, and the
    studio's part (``studio_view``: its open gate, the actions possible now, its audit)."""
    with source.open() as store:
        if store is None or (run := store.get_run(name)) is None:
            return None
        entry = _report(store, source, name)["runs"][0]
        config_patch = _typed(store.latest_phase_runs(saved_id(run)).get("config_patch"), ConfigPatchOutputs, [])
        series = training_series(store, run)
        studio = studio_view(store, source.workspace, run, entry, data_roots)
    return {"run": entry, "series": series, "samples": sample_grid(source.workspace.root, _stages(config_patch)),
            **studio}


def run_view(source: StoreSource, name: str, data_roots: Sequence[Path] = ()) -> dict[str, Any] | None:
    """Everything the run page shows (the studio's part too); None when the workspace has no run of that name."""
    with source.open() as store:
        if store is None or (run := store.get_run(name)) is None:
            return None
        runs = _report(store, source, None)["runs"]  # all of them: the related runs are found among them
        entry = next(r for r in runs if r["name"] == name)
        run_id = saved_id(run)
        latest = store.latest_phase_runs(run_id)
        checkpoints = [{"stage": c.stage, "step": c.step, "file": Path(c.weights_path).name}
                       for c in store.checkpoints(run_id)]
        series = training_series(store, run)
        studio = studio_view(store, source.workspace, run, entry, data_roots)
    root, paths = source.workspace.root, source.workspace.run(name)
    notes: list[str] = []
    config_patch = _typed(latest.get("config_patch"), ConfigPatchOutputs, notes)
    autotune = _typed(latest.get("autotune"), AutotuneOutputs, notes)
    stages = _stages(config_patch)
    evaluate = _typed(latest.get("evaluate"), EvaluateOutputs, notes)
    prior = autotune.prior.study if autotune is not None and autotune.prior is not None else None
    return {
        "run": entry, "workspace": str(root), "store": source.shown, "series": series, "checkpoints": checkpoints,
        "documents": run_documents(root, paths.root, [folder for _, folder, _ in stages]),
        "data_check": _data_check(_typed(latest.get("data_check"), DataCheckOutputs, notes)),
        "configs": stage_configs(root, config_patch, autotune),
        "autotune": autotune_view(autotune), "samples": sample_grid(root, stages),
        "evaluation": eval_renders(root, evaluate), "grid": checkpoint_grid(root, evaluate),
        "train": _train(_typed(latest.get("train"), TrainOutputs, notes)),
        "failure": _failure(entry), "related": _related(runs, entry, prior), "notes": notes, **studio,
    }


def _report(store: StoreReader | Store | None, source: StoreSource, name: str | None) -> dict[str, Any]:
    return status_report(store, source.workspace, name, log_summary=trainer_readers.log_summary,
                         weights_files=trainer_readers.weights_files, gpus=trainer_readers.gpus_now)


def _typed(row: PhaseRun | Record | None, kind: type[_Outputs], notes: list[str]) -> _Outputs | None:
    """A phase's stored outputs as their model; None when it has none, with a note when they cannot be read."""
    if row is None or row.status not in ("succeeded", "detached") or not isinstance(row.outputs, dict):
        return None
    try:
        return kind.from_stored(row.outputs, row.outputs_version)
    except BadInput as exc:
        notes.append(exc.line())
        return None


def _stages(config_patch: ConfigPatchOutputs | None) -> list[tuple[int, Path, Path | None]]:
    """(stage, output folder, config file) of each configured stage."""
    if config_patch is None:
        return []
    return [(c.stage, Path(c.output_dir), Path(c.config)) for c in config_patch.configs if c.output_dir]


def _data_check(outputs: DataCheckOutputs | None) -> dict[str, Any] | None:
    if outputs is None:
        return None
    return {"samples": outputs.samples, "metadata_file": outputs.metadata_file,
            "checks": [{"severity": c.severity, "code": c.code, "message": c.message, "path": c.path, "fix": c.fix}
                       for c in outputs.checks],
            "stages": [{"index": s.index, "buckets": s.buckets, "source": s.source} for s in outputs.stages],
            "left_out_silent": list(outputs.left_out_silent)}


def _train(outputs: TrainOutputs | None) -> list[dict[str, Any]]:
    if outputs is None:
        return []
    return [s.model_dump() for s in outputs.stages]


def _failure(entry: dict[str, Any]) -> dict[str, Any] | None:
    """The failed phase's recorded error, split into what happened and the proposed fix, with the trainer's last
    log line as evidence when training ended badly."""
    failed = next((p for p in entry["phases"] if p["status"] == "failed" and p["error"]), None)
    training = entry.get("training") or {}
    evidence = training.get("last_log_line")
    if failed is None and evidence is None:
        return None
    what, fix = split_line(failed["error"]) if failed else ("", None)  # shown as sentences, each with its full stop
    return {"phase": failed["phase"] if failed else "train",
            "what": f"{what}." if what else f"training {training.get('state')}", "fix": f"{fix}." if fix else None,
            "evidence": evidence, "next_command": entry.get("next_command")}


def _related(runs: list[dict[str, Any]], entry: dict[str, Any], prior: str | None) -> list[dict[str, str]]:
    """Runs linked to this one through Optuna: the run whose study this sweep started from (``prior``), and runs
    whose sweep is recorded in the same study."""
    study = (entry.get("autotune") or {}).get("study")
    out = []
    for other in runs:
        other_study = (other.get("autotune") or {}).get("study")
        if other["name"] == entry["name"] or not other_study:
            continue
        if other_study == prior:
            out.append({"name": other["name"], "why": f"this sweep started from its study {prior}"})
        elif other_study == study:
            out.append({"name": other["name"], "why": f"shares the autotune study {study}"})
    return out
