"""``ltx-pipeline demo``: the whole workflow on an embedded default, for anyone with Python and no GPU.

It writes a small dataset of real mp4 clips (PyAV) into the workspace, then runs all eight phases on the
``reference`` backend (a toy trainer, not LTX-2) against an assumed GPU of the chosen tier. The
toy's measured memory is mapped onto that GPU with a fixed factor (``DEMO_MEMORY_SCALE``), chosen so
that the tiers tell the same story as for the 22B model: on the 32GB tier the low-VRAM baseline
fits and turning quantization off runs out of memory. The demo approves its own plan, and says so.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer

from ltx_pipeline.cli import Ending
from ltx_pipeline.env_names import REFERENCE_LOG_EVERY_ENV

__all__ = ["DEMO_GPUS", "DEMO_LEARNING_RATE", "DEMO_MEMORY_SCALE", "demo", "learning_lines"]

DEMO_GPUS = {
    "rtx5090": "NVIDIA GeForce RTX 5090,32607",
    "a6000": "NVIDIA RTX A6000,49140",
    "h100": "NVIDIA H100 80GB HBM3,81559",
    "h200": "NVIDIA H200,143771",
}
# Measured toy bytes x this factor read as GPU bytes. Calibrated once on the demo's model and data: the
# low-VRAM baseline then needs about 29-30 of a 32 GB card's 31.8 usable GB (LTX-2's low-VRAM config is
# reported at 26-31 GB on an RTX 5090), and without quantization the base no longer fits.
DEMO_MEMORY_SCALE = 30600.0
# The toy learns six clips in 60 steps at this rate (LTX-2's templates use 1e-4 for hours of steps):
# measured on the demo's data, its step-60 samples are about a third nearer the nearest training clip than
# its step-0 ones (5e-3: about a quarter; 2e-2: 12-40% from run to run), and renders differ by caption.
DEMO_LEARNING_RATE = 1e-2
# (square colour, background colour) per clip: a few colours, each clip described by its caption.
_CLIPS = (("red", "blue"), ("yellow", "purple"), ("white", "black"), ("red", "green"), ("orange", "blue"),
          ("green", "white"))
_HELD_OUT = ("purple", "yellow")  # a pair no training clip has


def write_demo_dataset(folder: Path, clips: int = 6, captions: bool = True) -> Path:
    """Real H.264 clips (96x64, 25 frames at 24 fps, a tone as AAC: the demo trains audio too) and their metadata.

    Each clip is a coloured square sliding across a plain background; its caption says which colours.
    """
    from ltx_pipeline.ltx.sample_clips import write_clip
    from ltx_pipeline.workspace import atomic_write

    rows = []
    for index in range(clips):
        colour, background = _CLIPS[index % len(_CLIPS)]
        name = f"videos/{colour}-square-on-{background}-{index}.mp4"
        write_clip(folder / name, 25, 64, 96, colour=colour, background=background, fps=24.0, audio=True,
                   phase=index / clips)
        rows.append({"caption": f"a {colour} square slides from left to right across a plain {background} background",
                     "video": name})
    if not captions:  # --from-folder: the clips alone, as most users start; the prepare phase captions them
        return folder / "videos"
    return atomic_write(folder / "dataset.json", json.dumps(rows, indent=2), root=folder)


def write_demo_holdout(folder: Path) -> Path:
    """One more clip of the same kind, in colours no training clip has, as ``holdout.json``: the rows the
    evaluate phase measures the holdout loss on (``--holdout-file``) and renders as held-out prompts."""
    from ltx_pipeline.ltx.sample_clips import write_clip
    from ltx_pipeline.workspace import atomic_write

    colour, background = _HELD_OUT
    name = f"held-out/{colour}-square-on-{background}.mp4"
    write_clip(folder / name, 25, 64, 96, colour=colour, background=background, fps=24.0, audio=True, phase=0.5)
    row = {"caption": f"a {colour} square slides from left to right across a plain {background} background",
           "video": name}
    return atomic_write(folder / "holdout.json", json.dumps([row], indent=2), root=folder)


def learning_lines(outputs: Path, clips: Path) -> list[str]:
    """What the demo's files show about learning, measured on the mp4s: samples vs the training clips, renders."""
    from ltx_pipeline.evaluation.distance import pairwise_difference, sample_progress, sample_progress_line
    from ltx_pipeline.ltx.media import BadMedia

    lines: list[str] = []
    try:
        progress = sample_progress(outputs / "samples", sorted(clips.glob("*.mp4")))
        if progress is not None:
            lines.append("\n" + sample_progress_line(progress))
        renders = sorted((outputs / "eval").glob("*/*.mp4"))
        if len(renders) > 1:
            smallest, mean = pairwise_difference(renders)
            lines.append(f"eval renders of different prompts differ by {mean:.1f} on average (mean absolute "
                         f"pixel difference, 0-255; the closest pair {smallest:.1f}), {len(renders)} renders")
    except BadMedia as error:  # the figure is a by-product: say why it is missing, never a traceback
        lines.append(f"\nNo learning figure: {error}")
    return lines


def demo(workspace: Annotated[Path | None, typer.Option("--workspace", "-w", help="Workspace folder.")] = None,
         gpu: Annotated[str, typer.Option(help="Assumed GPU: rtx5090, a6000, h100 or h200.")] = "rtx5090",
         processes: Annotated[int, typer.Option(help="Training processes (2 = DDP over gloo on the CPU).")] = 1,
         from_folder: Annotated[bool, typer.Option("--from-folder", help="Start from the clips alone (no "
                                                   "captions): shows the prepare phase (staging, offline "
                                                   "captions, holdout, the captions gate).")] = False,
         ) -> Ending:
    """Run the whole workflow on a toy model and generated mp4 clips (no GPU needed): probe to run summary."""
    from ltx_pipeline.checkpoints.discovery import weights_files
    from ltx_pipeline.cli.console import out
    from ltx_pipeline.cli.render import render_status
    from ltx_pipeline.cli.watch import watch_drive
    from ltx_pipeline.driving import open_workspace, prepare_run
    from ltx_pipeline.errors import BadRequest
    from ltx_pipeline.probing.nvidia_smi import gpu_now
    from ltx_pipeline.status.report import status_report
    from ltx_pipeline.training.follow import log_summary

    if gpu not in DEMO_GPUS:
        raise BadRequest(f"Unknown demo GPU {gpu!r}", where="--gpu", fix="choose " + ", ".join(DEMO_GPUS))
    # The toy's `Step N/M` lines every 2 steps (the trainer's default is 20): the demo's 60-step loss curve
    # then has 30 points. Inherited by the detached trainer; a value the user set wins.
    os.environ.setdefault(REFERENCE_LOG_EVERY_ENV, "2")
    ws, store = open_workspace(workspace)
    name = f"demo-{gpu}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    dataset = write_demo_dataset(ws.root / "demo-data" / name, captions=not from_folder)
    # Captioned data has no holdout unless one is named: the demo names one clip, so its evaluate phase measures
    # the holdout loss per checkpoint (--from-folder reserves one at the plan instead).
    holdout = None if from_folder else str(write_demo_holdout(dataset.parent))
    out.print(f"Demo run {name}: the reference toy trainer (not LTX-2) on generated mp4 clips, planned for an assumed "
              f"{DEMO_GPUS[gpu].split(',')[0]}. The demo approves its own plan; a real run stops at the approval "
              "gate for you to read plan.md"
              + (", and at the captions gate for you to read the captions" if from_folder else "") + ".",
              markup=False)
    options = {"dataset": str(dataset), "mode": "t2v", "backend": "reference", "assume_gpu": DEMO_GPUS[gpu],
               "buckets": "96x64x25", "steps": 60, "checkpoint_interval": 30, "validation_interval": 30,
               "trigger": "fxclp", "rank": 8, "learning_rate": DEMO_LEARNING_RATE,
               "reference_memory_scale": DEMO_MEMORY_SCALE,
               "processes": processes if processes > 1 else None, "holdout_file": holdout}
    store, run, request = prepare_run(ws, store, name, {k: v for k, v in options.items() if v is not None})
    ending = watch_drive(ws, store, run, request, approve=True)
    paths = ws.run(name)
    produced = [paths.plan_file, *([paths.dataset / "dataset.json", paths.dataset / "holdout.jsonl"] if from_folder
                                   else []), paths.config_file, paths.root / "autotune.md", paths.root / "autotune.png",
                paths.outputs / "checkpoints", paths.outputs / "samples", paths.outputs / "run-summary.md",
                paths.outputs / "loss.png", paths.outputs / "step_time.png", paths.outputs / "eval" / "prompts.json",
                paths.outputs / "eval" / "contact-sheet.png", paths.outputs / "holdout-loss.json",
                paths.outputs / "holdout_loss.png", paths.outputs / "eval" / "grid.png"]
    if ending is Ending.DONE:  # a failed run has no figure to give; its status below says why
        for line in learning_lines(paths.outputs, dataset.parent / "videos"):
            out.print(line, markup=False)
    out.print("\nProduced:", markup=False)
    for path in produced:
        if path.exists():
            out.print(f"  {path}", markup=False)
    render_status(out, status_report(store, ws, name, log_summary=log_summary, weights_files=weights_files,
                                     gpus=gpu_now))
    return ending
