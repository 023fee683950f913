"""A request's problems as the user reads them: each pydantic error as one line naming the option (or
``run.yaml`` field) and its fix, and the metadata file's shape refused before a run exists.

``ltx_pipeline.request.build_request`` and ``check_request`` collect these; nothing here raises a
pydantic error or reads anything but the metadata file named by ``dataset``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ltx_pipeline.errors import BadDataset, BadRequest
from ltx_pipeline.ltx.modes import MODES, get_mode
from ltx_pipeline.request.model import BACKENDS

__all__ = ["fix_hint", "refuse_unusable_metadata", "request_problem"]


#: Request fields whose CLI option is not the field's name in kebab case.
_OPTION_NAMES = {"config_set": "--set"}


def request_problem(err: Any, where: str, fields: Iterable[str]) -> BadRequest:
    """One pydantic error as a ``BadRequest``: the option (or ``where: field``), what is wrong and the fix."""
    field = ".".join(str(p) for p in err["loc"]) or "request"
    message = str(err["msg"]).removeprefix("Value error, ")
    option = _OPTION_NAMES.get(field, "--" + field.replace("_", "-")) if where == "options" else f"{where}: {field}"
    if err["type"] == "extra_forbidden":
        return BadRequest(f"Unknown request field {field!r}", where=where,
                          fix="remove it; valid fields are " + ", ".join(fields))
    fix = (err.get("ctx") or {}).get("fix") or fix_hint(field)  # a validator's own fix, else the field's
    return BadRequest(message, where=option if field != "request" else where, fix=fix)


def refuse_unusable_metadata(dataset: str, mode: str) -> None:
    """Refuse a metadata file the mode's preprocessing cannot use: not a list of rows, required
    columns missing, or a caption or media path that is not text (a JSON number, list...), all named
    together. The rows' other contents are the data check's job.

    Raises:
        BadDataset: with every missing column and every wrongly typed cell of the file, or why it
            cannot be read as rows.
    """
    from ltx_pipeline.ltx.data_check import check_metadata

    path = Path(dataset).expanduser()
    if not path.is_file() or path.suffix.lower() not in {".csv", ".json", ".jsonl"}:
        return  # folders, .precomputed and missing paths are classified (and refused) by the probe
    report = check_metadata(path, get_mode(mode))  # BadDataset when it is not rows
    missing = [check for check in report.checks if check.code in ("missing-column", "wrong-type")]
    if missing:
        raise BadDataset("; ".join(check.message for check in missing), where=str(path.absolute()),
                         fix="; ".join(dict.fromkeys(check.fix for check in missing if check.fix)))


def fix_hint(field: str) -> str:
    """How to fix a bad value of ``field``, for errors whose validator names no fix of its own."""
    hints = {
        "mode": "choose one of " + ", ".join(MODES),
        "buckets": 'write "WxHxF" buckets joined by ";" (W, H multiples of 32; F = 8k+1)',
        "model_path": "download the file and give its local path",
        "text_encoder_path": "download the text encoder and give its local folder",
        "backend": "choose one of " + ", ".join(BACKENDS),
        "rank": "give a LoRA rank from 2 to 1024",
        "headroom": "give a fraction of the GPU's memory to keep free, from 0 up to (not including) 0.5; "
                    "default 0.05",
        "steps": "give 1 or more optimizer steps",
        "learning_rate": "give a learning rate above 0 and at most 1",
        "captioner": "choose offline, qwen_omni or gemini_flash",
        "holdout": "give how many samples to hold out (0 for none)",
        "split_over_s": "give the length in seconds over which a video is split into scenes",
        "min_scene_s": "give the shortest scene, in seconds",
        "eval_prompts": "give each evaluation prompt as non-empty text (at most 20)",
        "nodes": "give how many machines train together (1 or more)",
        "main_port": "give a free TCP port on the rank-0 machine (default 29500)",
        "slurm_args": "give each #SBATCH option as --name=value, e.g. --slurm-arg=--partition=gpu",
        "autotune": "choose on (sweep for the fastest config that fits) or off (the plan's baseline config)",
        "audio": "choose auto (from the clips' sound), on (audio and video; silent clips left out) or off (video only)",
        "validation_media": "choose auto (conditions from your rows), without (prompts alone) or none",
        "trainer_python": "give the python of an environment with ltx-trainer installed, e.g. /path/venv/bin/python",
    }
    return hints.get(field, "correct the value and try again")
