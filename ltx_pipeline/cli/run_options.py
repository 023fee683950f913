"""The options of ``run``, one alias each: ``run``'s signature names them, typer reads them to build ``--help``.

Each says which help panel it belongs to (``run_help.PANELS``) and shows a new run's default; the
request fields they fill are named as the options are (``--effective-batch`` as ``effective_batch``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ltx_pipeline.cli.run_help import (
    AUDIO,
    AUTOTUNE,
    BACKENDS,
    CAPTIONERS,
    HOLDOUT_LOSS,
    MODE_NAMES,
    PANELS,
    STRATEGIES,
    TRAINING_MODES,
    VALIDATION_MEDIA,
    choices,
    default,
)

_DATA, _TRAINING, _TRAINER = PANELS["data"], PANELS["training"], PANELS["trainer"]
_AUTOTUNE, _EVALUATION = PANELS["autotune"], PANELS["evaluation"]

__all__ = ["AcceptRiskOpt", "ApproveOpt", "AssumeGpuOpt", "AudioOpt", "AutotuneOpt",
           "AutotuneParallelOpt", "BackendOpt", "BucketsOpt",
           "CaptionerOpt", "CheckpointIntervalOpt", "ConfigSetOpt", "DatasetOpt", "DetachOpt", "EffectiveBatchOpt",
           "EvalCheckpointsOpt", "EvalPromptOpt", "FreshPreprocessOpt", "HeadroomOpt", "HoldoutFileOpt",
           "PreprocessProcessesOpt",
           "HoldoutLossOpt", "HoldoutOpt",
           "LearningRateOpt", "MainIpOpt", "MainPortOpt", "MinSceneOpt", "ModeOpt", "ModelPathOpt",
           "NodesOpt", "NvidiaSmiOpt", "ProcessesOpt", "PushToHubOpt", "RankOpt", "SkipEvalOpt", "SlurmArgOpt",
           "SlurmOpt",
           "SplitOverOpt", "StepsOpt", "StrategyOpt", "SurfaceOpt", "TextEncoderPathOpt",
           "TrainerPythonOpt", "TrainerRootOpt", "TrainingModeOpt", "TriggerOpt", "ValidationIntervalOpt",
           "ValidationMediaOpt", "VllmUrlOpt"]

DatasetOpt = Annotated[Path | None, typer.Option(help="Metadata file, clips folder or .precomputed folder.",
                                                 rich_help_panel=_DATA)]
ModeOpt = Annotated[str | None, typer.Option(metavar="<mode>", help="Training mode, one of "
                                             + ", ".join(MODE_NAMES) + "." + default("mode"),
                                             rich_help_panel=_TRAINING)]
TrainingModeOpt = Annotated[str | None, typer.Option(metavar=choices(TRAINING_MODES), help="A LoRA, or a full "
                                                     "fine-tune." + default("training_mode"),
                                                     rich_help_panel=_TRAINING)]
StrategyOpt = Annotated[str | None, typer.Option(metavar=choices(STRATEGIES), help="One bucket, several mixed in "
                                                 "one training, or one stage per bucket." + default("strategy"),
                                                 rich_help_panel=_TRAINING)]
BucketsOpt = Annotated[str | None, typer.Option(help='Resolution buckets "WxHxF;WxHxF".' + default("buckets"),
                                                rich_help_panel=_TRAINING)]
RankOpt = Annotated[int | None, typer.Option(help="LoRA rank (alpha = rank)." + default("rank"),
                                             rich_help_panel=_TRAINING)]
StepsOpt = Annotated[int | None, typer.Option(help="Optimizer steps per stage." + default("steps"),
                                              rich_help_panel=_TRAINING)]
LearningRateOpt = Annotated[float | None, typer.Option(help="Learning rate (first stage)."
                                                       + default("learning_rate"), rich_help_panel=_TRAINING)]
EffectiveBatchOpt = Annotated[int | None, typer.Option(help="Samples per optimizer step, all GPUs."
                                                       + default("effective_batch"),
                                                       rich_help_panel=_TRAINING)]
TriggerOpt = Annotated[str | None, typer.Option(help="Trigger word (default: none).", rich_help_panel=_TRAINING)]
TrainerRootOpt = Annotated[Path | None, typer.Option(help="LTX-2 checkout." + default("trainer_root"),
                                                     rich_help_panel=_TRAINER)]
TrainerPythonOpt = Annotated[Path | None, typer.Option(help="Python of an environment where ltx-trainer is "
                                                       "installed (venv or conda): runs the trainer's scripts "
                                                       "instead of `uv run`.", rich_help_panel=_TRAINER)]
ModelPathOpt = Annotated[str | None, typer.Option(help="Local LTX checkpoint .safetensors.",
                                                  rich_help_panel=_TRAINER)]
TextEncoderPathOpt = Annotated[str | None, typer.Option(help="Local Gemma text-encoder folder.",
                                                        rich_help_panel=_TRAINER)]
BackendOpt = Annotated[str | None, typer.Option(metavar=choices(BACKENDS), help="Trainer backend: the LTX-2 "
                                                "trainer, the toy reference trainer, or a simulated one."
                                                + default("backend"), rich_help_panel=_TRAINER)]
SurfaceOpt = Annotated[Path | None, typer.Option(help="Cost surface YAML for --backend simulated.",
                                                 rich_help_panel=_TRAINER)]
AssumeGpuOpt = Annotated[str | None, typer.Option(help='Plan for "NAME,MEMORY_MIB[,COUNT]" instead of the GPUs '
                                                  "found.", rich_help_panel=_TRAINER)]
NvidiaSmiOpt = Annotated[str | None, typer.Option(help="nvidia-smi executable to use.", rich_help_panel=_TRAINER)]
AcceptRiskOpt = Annotated[bool | None, typer.Option("--accept-risk", help="Continue below 32 GB.",
                                                    rich_help_panel=_TRAINER)]
FreshPreprocessOpt = Annotated[bool | None, typer.Option(
    "--fresh-preprocess", help="Ignore an existing .precomputed; preprocess into the run's folder.",
    rich_help_panel=_DATA)]
HeadroomOpt = Annotated[float | None, typer.Option(help="Autotune VRAM headroom: peak VRAM stays under capacity x "
                                                   "(1 - headroom)." + default("headroom"),
                                                   rich_help_panel=_AUTOTUNE)]
AutotuneOpt = Annotated[str | None, typer.Option(metavar=choices(AUTOTUNE), help="on: sweep for the fastest config "
                                                 "that fits; off: train with the plan's baseline config as is."
                                                 + default("autotune"), rich_help_panel=_AUTOTUNE)]
AutotuneParallelOpt = Annotated[str | None, typer.Option(
    metavar="auto|N", help="Autotune trials at once, each on its own GPU(s), never shared: auto gives one per usable "
    "GPU; the winner is the one-at-a-time sweep's." + default("autotune_parallel"), rich_help_panel=_AUTOTUNE)]
AudioOpt = Annotated[str | None, typer.Option(metavar=choices(AUDIO), help="auto: train audio when every clip has "
                                              "sound, video only when none has; on: audio and video, silent clips "
                                              "left out; off: video only on every clip (t2v, i2v, video-extend, "
                                              "video-suffix)." + default("audio"), rich_help_panel=_DATA)]
ValidationMediaOpt = Annotated[str | None, typer.Option(
    metavar=choices(VALIDATION_MEDIA),
    help="Where validation conditions (first frame, audio, reference, mask) come from when no row of your "
            "data can give them: auto: from your rows, else the plan stops and asks; without: the prompts alone; "
            "none: no validation during training." + default("validation_media"),
    rich_help_panel=_TRAINING)]
ProcessesOpt = Annotated[int | None, typer.Option(help="Training processes per node." + default("processes"),
                                                  rich_help_panel=_TRAINER)]
PreprocessProcessesOpt = Annotated[int | None, typer.Option(
    help="Preprocessing ranks under accelerate launch, one per GPU (capped at the free GPUs and the rows)."
    + default("preprocess_processes"), rich_help_panel=_DATA)]
NodesOpt = Annotated[int | None, typer.Option(help="Machines training together; this one is rank 0, the others "
                                              "run `ltx-pipeline node-launch`." + default("nodes"),
                                              rich_help_panel=_TRAINER)]
MainIpOpt = Annotated[str | None, typer.Option(help="This (rank-0) machine's address, reachable from the other "
                                               "nodes (needed with --nodes 2 or more).",
                                               rich_help_panel=_TRAINER)]
MainPortOpt = Annotated[int | None, typer.Option(help="Rendezvous port on this machine." + default("main_port"),
                                                 rich_help_panel=_TRAINER)]
CheckpointIntervalOpt = Annotated[int | None, typer.Option(help="Steps between checkpoints."
                                                           + default("checkpoint_interval"),
                                                           rich_help_panel=_TRAINING)]
ValidationIntervalOpt = Annotated[int | None, typer.Option(help="Steps between validations."
                                                           + default("validation_interval"),
                                                           rich_help_panel=_TRAINING)]
CaptionerOpt = Annotated[str | None, typer.Option(metavar=choices(CAPTIONERS), help="Captions for clips without "
                                                  "one: offline (measured facts), qwen_omni (a local Qwen-Omni "
                                                  "through vLLM) or gemini_flash." + default("captioner"),
                                                  rich_help_panel=_DATA)]
VllmUrlOpt = Annotated[str | None, typer.Option(help="qwen_omni's vLLM server (the trainer script's default)."
                                                + default("vllm_url"), rich_help_panel=_DATA)]
HoldoutOpt = Annotated[int | None, typer.Option(help="Samples to hold out (0: none)." + default("holdout"),
                                                rich_help_panel=_DATA)]
HoldoutFileOpt = Annotated[Path | None, typer.Option(help="Your own holdout rows (.json/.jsonl), used as "
                                                     "they are.", rich_help_panel=_DATA)]
SplitOverOpt = Annotated[float | None, typer.Option(help="Deprecated, ignored: every video is looked at for "
                                                    "scene cuts, whatever its length.", rich_help_panel=_DATA)]
MinSceneOpt = Annotated[float | None, typer.Option(help="Deprecated, ignored: scenes shorter than the smallest "
                                                   "bucket are dropped and listed.", rich_help_panel=_DATA)]
EvalPromptOpt = Annotated[list[str] | None, typer.Option(
    "--eval-prompt", help="An out-of-distribution prompt for the evaluation renders (repeat for more; "
    "default: 3 generic prompts with the trigger word).", rich_help_panel=_EVALUATION)]
HoldoutLossOpt = Annotated[str | None, typer.Option(
    metavar=choices(HOLDOUT_LOSS), help="on: measure the trainer's loss on the held-out rows at every kept checkpoint "
    "(fixed noise; outputs/holdout-loss.json), before the renders; off: skip it." + default("holdout_loss"),
    rich_help_panel=_EVALUATION)]
EvalCheckpointsOpt = Annotated[str | None, typer.Option(
    metavar="last|best|all|N", help="Which checkpoints the evaluation renders with the same prompts and seeds "
    "(outputs/eval/grid.png, one row each): last; best (lowest holdout loss); all; N evenly spaced, the last "
    "included." + default("eval_checkpoints"), rich_help_panel=_EVALUATION)]
PushToHubOpt = Annotated[str | None, typer.Option(
    metavar="OWNER/NAME", help="Upload the final weights to this Hugging Face Hub repo at the end of training, "
    "through the trainer's own hub settings (patched into the last stage's config). The token is read from "
    "HF_TOKEN (or HUGGING_FACE_HUB_TOKEN) in the environment, never stored.", rich_help_panel=_TRAINING)]
SkipEvalOpt = Annotated[bool | None, typer.Option("--skip-eval", help="Finish without the evaluation "
                                                  "renders (recorded as skipped).",
                                                  rich_help_panel=_EVALUATION)]
SlurmOpt = Annotated[bool | None, typer.Option("--slurm", help="Submit each training stage to SLURM (sbatch of "
                                               "<run>/slurm/train*.sbatch) instead of launching it here.",
                                               rich_help_panel=_TRAINER)]
SlurmArgOpt = Annotated[list[str] | None, typer.Option(
    "--slurm-arg", help="An #SBATCH option for the job script, verbatim (repeat for more), e.g. "
    "--slurm-arg=--partition=gpu --slurm-arg=--time=24:00:00.", rich_help_panel=_TRAINER)]
ConfigSetOpt = Annotated[list[str] | None, typer.Option(
    "--set", metavar="KEY=VALUE", help="Your own value for a key of the trainer config, applied after the plan's "
    "(repeat for more; a YAML value), e.g. --set validation.inference_steps=8. Keys the run sets itself "
    "(steps, learning rate, batch, paths...) are refused with the option that sets them.", rich_help_panel=_TRAINER)]
ApproveOpt = Annotated[bool, typer.Option("--approve", help="Approve every gate (the plan, then the captions) "
                                          "as soon as it is reached.")]
DetachOpt = Annotated[bool, typer.Option("--detach", help="Return once training is launched.")]
