"""``ltx-pipeline export RUN [--step N|last|best] --to DIR``: one checkpoint of a run as a folder ready to use.

Parses the options, calls ``driving.export.export_run`` and says what was written (or prints it as JSON).
Exit codes: 0 written; 2 bad input or a refusal (one line: what, where, the fix), nothing written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ltx_pipeline.cli import Ending
from ltx_pipeline.cli.options import WorkspaceOpt

__all__ = ["export"]


def export(run: Annotated[str, typer.Argument(metavar="RUN", help="The run to export from (see `ltx-pipeline "
                                              "status`).", show_default=False)],
           to: Annotated[Path, typer.Option("--to", metavar="DIR", help="The folder to create (it must not exist, "
                                            "unless --force).", show_default=False)],
           step: Annotated[str, typer.Option("--step", metavar="N|last|best", help="Which checkpoint: a step "
                                             "number, the last one, or the one with the lowest holdout loss "
                                             "(outputs/holdout-loss.json).")] = "last",
           workspace: WorkspaceOpt = None,
           force: Annotated[bool, typer.Option("--force", help="Replace DIR when it exists.")] = False,
           as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> Ending:
    """Export a checkpoint: the weights as the trainer wrote them, a model card, the contact sheet and
    training_config.yaml, in a new folder.

    The weights are copied byte for byte (the trainer's ComfyUI key layout and its safetensors metadata,
    IC-LoRA's included, are kept); the model card README.md states only the run's records and measurements.
    The folder appears complete or not at all; nothing outside it is written.
    """
    from ltx_pipeline.cli.console import out
    from ltx_pipeline.driving.export import export_run

    done = export_run(workspace, run, step=step, to=to, force=force)
    if as_json:
        out.print_json(json.dumps({"folder": str(done.folder), "files": list(done.files), "step": done.chosen.step,
                                   "chosen_by": done.chosen.chosen_by, "weights": str(done.chosen.weights),
                                   "sha256": done.facts.weights_sha256}))
        return Ending.DONE
    out.print(f"Exported {done.chosen.weights.name} (step {done.chosen.step}, {done.chosen.chosen_by}) of run {run} "
              f"to {done.folder}: {', '.join(done.files)}.", markup=False)
    return Ending.DONE
