"""One training stage as the train phase drives it: what it is, where its files are, how to say who runs it.

Owns ``TrainingStage``, the record every step of a stage's launch-or-re-attach, follow and judgement reads
(``training.launch``, ``training.relaunch``, ``training.recheck``, ``training.judge``, driven by
``training.supervise``), and ``stage_log``, the name of each launch's own log. The stage's config is read
from its file each time it is asked for, because the train phase patches it between steps (autotune's
winner, ``--apply-fix``, a resume's ``load_checkpoint``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ltx_pipeline.engine.journal import ProcessHandle
from ltx_pipeline.ltx.recipe import Stage as RecipeStage
from ltx_pipeline.ltx.trainer_config.view import TrainerConfigView, read_config_view
from ltx_pipeline.outputs.config_patch import StageConfig
from ltx_pipeline.outputs.data_check import DataStage
from ltx_pipeline.outputs.validate import ValidatedStage
from ltx_pipeline.phase_context import LtxContext
from ltx_pipeline.training.follow import TrainingFollower
from ltx_pipeline.yaml_io import load_yaml

__all__ = ["TrainingStage", "stage_log", "who"]


def stage_log(logs: Path, stage: int, stages: int, attempt: int = 1) -> Path:
    """``logs/train.log`` (chained: ``train.stage-K.log``) for a stage's first launch; a later attempt
    gets its own ``train.attempt-N.log`` (``train.stage-K.attempt-N.log``), so no log is ever rewritten.
    ``stages`` counts the planned stages: one past them continues a finished training (``train.continue-N``)."""
    if stage > stages:
        name = f"train.continue-{stage - stages}"
    else:
        name = "train" if stages == 1 else f"train.stage-{stage}"
    return logs / (f"{name}.log" if attempt <= 1 else f"{name}.attempt-{attempt}.log")


def who(handle: ProcessHandle) -> str:
    """``SLURM job N`` or ``pid N``: how the narration names a launch."""
    return f"SLURM job {handle.slurm_job}" if handle.slurm_job is not None else f"pid {handle.pid}"


@dataclass
class TrainingStage:
    """A stage of the run: its validated config, its data, its place among the stages, and its newest log.

    Attributes:
        total: the stages trained in this run; ``planned`` the stages the plan made (one past them
            continues a finished training).
        start_step: the run's step the trainer's step 0 stands for (a continuation; ``ltx.recipe``).
        restart: ``--restart-training`` applies to this stage; ``restarted`` once it did.
        log: the log of the newest launch (the one to follow or judge); a new launch sets the next name.
    """

    ctx: LtxContext
    entry: ValidatedStage
    config_entry: StageConfig
    data_stage: DataStage
    total: int
    planned: int
    start_step: int = 0
    restart: bool = False
    restarted: bool = False
    log: Path = field(default=Path())

    @classmethod
    def of(cls, ctx: LtxContext, entry: ValidatedStage, config_entry: StageConfig, data_stage: DataStage,
           total: int, *, restart: bool = False, recipe_stage: RecipeStage | None = None,
           planned: int | None = None) -> TrainingStage:
        stage = cls(ctx, entry, config_entry, data_stage, total, planned or total,
                    start_step=recipe_stage.start_step if recipe_stage else 0, restart=restart)
        launches = ctx.journal.processes("train", stage.index)
        stage.log = Path(launches[-1].log_path) if launches else stage_log(ctx.paths.logs, stage.index, stage.planned)
        return stage

    @property
    def index(self) -> int:
        return self.entry.stage

    @property
    def config(self) -> Path:
        return Path(self.entry.config)

    @property
    def output_dir(self) -> Path:
        return Path(str(self.config_entry.output_dir))  # (recorded by every config_patch that can train)

    @property
    def checkpoints(self) -> Path:
        return self.output_dir / "checkpoints"

    def values(self) -> dict[str, Any]:
        """The config file's mapping as it is now (what a patch or the classifier reads by dotted path)."""
        return load_yaml(self.config.read_text(encoding="utf-8")) or {}

    def view(self) -> TrainerConfigView:
        """The config file as it is now, typed (``ltx.trainer_config.view``)."""
        return read_config_view(self.values(), where=str(self.config))

    def launches(self) -> list[ProcessHandle]:
        return self.ctx.journal.processes("train", self.index)

    def resume_command(self) -> str:
        return f"ltx-pipeline resume --workspace {self.ctx.workspace} --run {self.ctx.run_name}"

    def catch_up(self, launches: list[ProcessHandle]) -> None:
        """Record what earlier launches logged after their last follower stopped reading.

        A trainer nobody followed (launched by `resume --detach`, or followed by an engine that was
        killed) still wrote its steps; they are read from the stored offset before the next launch
        or the finished stage's result, so no step of any attempt is missing from the metrics.
        """
        for old in launches:
            if old.alive():
                continue
            TrainingFollower(self.ctx.journal, old, stage=self.index, stages=self.total,
                             output_dir=self.output_dir).poll()
