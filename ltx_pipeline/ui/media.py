"""The videos a person watches: validation samples by step (the LoRA learning) and evaluation renders by category.

Samples are the trainer's files in each stage's ``samples`` folder, named ``step_<step>_<k>.<ext>`` (the
trainer's naming), sample k rendered from the stage config's k-th validation prompt. Renders are what the
evaluate phase recorded (``EvaluateOutputs``), each with its prompt. Only files the file route would
serve get a URL; a render outside the workspace is listed with its prompt and no player.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ltx_pipeline.outputs.evaluate import EvaluateOutputs
from ltx_pipeline.ui.configs import validation_prompts
from ltx_pipeline.ui.files import file_url

__all__ = ["eval_renders", "sample_grid"]

_SAMPLE = re.compile(r"^step_(?P<step>\d+)_(?P<k>\d+)\.(?P<ext>mp4|webm|gif|png|wav)$")
_KINDS = {"mp4": "video", "webm": "video", "gif": "image", "png": "image", "wav": "audio"}


def sample_grid(root: Path, stages: list[tuple[int, Path, Path | None]]) -> list[dict[str, Any]]:
    """Per stage: ``{"stage", "prompts", "steps": [{"step", "items": [{"k", "url", "kind", "prompt"}]}]}``.

    Args:
        stages: (stage, output folder, config file) of each configured stage.
    """
    out = []
    for stage, output_dir, config in stages:
        prompts = validation_prompts(root, config) if config is not None else []
        by_step: dict[int, list[dict[str, Any]]] = {}
        folder = output_dir / "samples"
        names = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        for name in names:
            match = _SAMPLE.match(name)
            url = file_url(root, folder / name) if match else None
            if match is None or url is None:
                continue
            k = int(match["k"])
            by_step.setdefault(int(match["step"]), []).append(
                {"k": k, "url": url, "kind": _KINDS[match["ext"]], "name": name,
                 "prompt": prompts[k - 1] if 0 < k <= len(prompts) else None})
        steps = [{"step": step, "items": sorted(by_step[step], key=lambda i: i["k"])} for step in sorted(by_step)]
        out.append({"stage": stage, "prompts": prompts, "steps": steps,
                    "contact_sheet": file_url(root, folder / "contact-sheet.png")})
    return out


def eval_renders(root: Path, outputs: EvaluateOutputs | None) -> dict[str, Any] | None:
    """The evaluation: skipped (why), pending, or its renders grouped by category, each with its prompt."""
    if outputs is None:
        return None
    if outputs.skipped:
        return {"state": "skipped", "reason": outputs.reason, "categories": [], "notes": {}}
    if outputs.pending:
        return {"state": "pending", "reason": None, "categories": [], "notes": {}}
    categories: dict[str, list[dict[str, Any]]] = {}
    for render in outputs.renders:
        categories.setdefault(render.category, []).append(
            {"url": file_url(root, render.file), "kind": "video", "prompt": render.prompt,
             "file": Path(render.file).name if render.file else None,
             "source": _source(render.source)})
    return {"state": "rendered", "reason": None, "weights": Path(outputs.weights).name if outputs.weights else None,
            "categories": [{"category": c, "label": c.replace("_", " "), "items": items}
                           for c, items in categories.items()],
            "notes": {k.replace("_", " "): v for k, v in outputs.notes.items()},
            "contact_sheet": file_url(root, outputs.contact_sheet)}


def _source(source: str) -> str | None:
    """Where a render's prompt came from: a training clip's file name, or the prompt set's name (``generic``)."""
    if not source:
        return None
    return f"from {Path(source).name}" if "/" in source else f"{source} prompt"
