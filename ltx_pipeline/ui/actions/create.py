"""New run: the page's choices checked as ``ltx-pipeline run`` checks them, then that command started detached.

The body's keys are the request fields of ``run``'s options (``--steps`` as ``steps``); an unknown key, a
value of the wrong JSON type, a dataset outside the data roots or a taken run name is refused before
anything is written. The whole request is checked in-process by the request's own code
(``request.check_request``, every problem at once, the CLI's one-line errors), and so is its GPU probe; then
``ltx-pipeline run --workspace W --run R <options>`` plans the run and stops at the plan for approval.
Options that start programs (``--trainer-python``, ``--trainer-root``, ``--nvidia-smi``, SLURM) are not
taken from a browser: they stay the terminal's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ltx_pipeline.driving import find_workspace
from ltx_pipeline.errors import BadRequest
from ltx_pipeline.probing.gpus import check_gpu_probe
from ltx_pipeline.request import check_request, default_run_name
from ltx_pipeline.ui.actions.detached import shown
from ltx_pipeline.ui.actions.roots import inside_roots
from ltx_pipeline.ui.actions.studio import Attempt, Done, Studio

__all__ = ["FIELDS", "create_run", "flag"]

# JSON key -> the JSON type it must have. Lists repeat their option (``eval_prompts`` as ``--eval-prompt``).
FIELDS: dict[str, type] = {
    "dataset": str, "mode": str, "training_mode": str, "strategy": str, "buckets": str, "rank": int, "steps": int,
    "learning_rate": float, "effective_batch": int, "trigger": str, "model_path": str, "text_encoder_path": str,
    "backend": str, "assume_gpu": str, "accept_risk": bool, "fresh_preprocess": bool, "headroom": float,
    "autotune": str, "autotune_parallel": str, "audio": str, "validation_media": str, "processes": int,
    "checkpoint_interval": int, "validation_interval": int, "captioner": str, "vllm_url": str, "holdout": int,
    "eval_prompts": list, "skip_eval": bool, "holdout_loss": str, "eval_checkpoints": str, "surface": str,
    "preprocess_processes": int, "config_set": list,
}
_OPTION = {"eval_prompts": "--eval-prompt", "config_set": "--set"}  # where the option's name is not the field's
_LOCAL_PATHS = ("model_path", "text_encoder_path")  # made absolute, as the CLI stores them


def create_run(studio: Studio, attempt: Attempt, body: dict[str, Any]) -> Done:
    """Check the new run's choices, then start ``ltx-pipeline run`` for it detached.

    Raises:
        BadRequest / BadInputs: an unknown key, a wrong type, an invalid request (the CLI's own lines).
        OutsideRoots: the dataset is outside every data root.
    """
    name = body.get("run") or None
    if name is not None and not isinstance(name, str):
        raise BadRequest("The run name must be text", where="run", fix="give a name such as my-lora")
    attempt.run = name
    queue = flag(body, "queue")
    options = _options(studio, {k: v for k, v in body.items() if k not in ("run", "queue")})
    request = check_request(name, _request_fields(options))  # every problem at once, before anything is written
    check_gpu_probe(request.backend, request.assume_gpu, request.nvidia_smi)
    name = name or default_run_name(request)
    attempt.run = name
    args = ["run", "--workspace", studio.root, "--run", name, *_arguments(options), *(["--queue"] if queue else [])]
    attempt.command = command = shown(args)
    _refuse_taken(studio, name)
    studio.launcher.launch(args, studio.workspace.run(name).logs / "studio.log")
    return Done(name, command, f"Run {name} is being planned; it stops at its plan for your approval.")


def flag(body: dict[str, Any], key: str) -> bool:
    """A boolean choice that is no request field (``--queue``: wait for free GPUs instead of failing)."""
    value = body.get(key, False)
    if not isinstance(value, bool):
        raise BadRequest(f"{key} must be true or false", where=key, fix="send a JSON boolean")
    return value


def _options(studio: Studio, given: dict[str, Any]) -> dict[str, Any]:
    """The request fields given (empty and false ones left out, as the CLI leaves out options not given)."""
    unknown = sorted(set(given) - set(FIELDS))
    if unknown:
        raise BadRequest(f"Unknown field(s): {', '.join(unknown)}", where="the new-run form",
                         fix=f"send only: run, queue, {', '.join(FIELDS)}")
    options: dict[str, Any] = {}
    for key, value in given.items():
        if value is None or value == "" or value is False or value == []:
            continue
        options[key] = _typed(key, value)
    options["dataset"] = str(inside_roots(studio.data_roots, options.get("dataset"), "dataset"))
    for key in _LOCAL_PATHS:
        if key in options and "://" not in options[key]:
            options[key] = str(Path(options[key]).expanduser().resolve())
    if "surface" in options:  # a cost surface (the simulated backend's), read as the CLI reads it
        surface = Path(options["surface"]).expanduser().resolve()
        if not surface.is_file():
            raise BadRequest(f"{options['surface']} does not exist", where="--surface",
                             fix="give the path of a cost surface YAML file (format in the README)")
        options["surface"] = str(surface)
    return options


def _request_fields(options: dict[str, Any]) -> dict[str, Any]:
    """The options as request fields: ``config_set``'s KEY=VALUE lines read as ``--set`` reads them."""
    if "config_set" not in options:
        return options
    from ltx_pipeline.ltx.user_settings import parse_assignments

    return {**options, "config_set": parse_assignments(options["config_set"])}


def _typed(key: str, value: Any) -> Any:
    kind = FIELDS[key]
    ok = (isinstance(value, kind) and not (kind is int and isinstance(value, bool))) or (
        kind is float and isinstance(value, int) and not isinstance(value, bool))
    if kind is list:
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
    if not ok:
        raise BadRequest(f"{key} must be {'a list of text' if kind is list else kind.__name__}, not {value!r}",
                         where=key, fix="correct the field and submit again")
    return float(value) if kind is float else value


def _arguments(options: dict[str, Any]) -> list[str]:
    """The ``run`` options that give exactly ``options`` (flags for true booleans, repeats for lists)."""
    args: list[str] = []
    for key, value in options.items():
        option = _OPTION.get(key, "--" + key.replace("_", "-"))
        if value is True:
            args.append(option)
        elif isinstance(value, list):
            for item in value:
                args += [option, item]
        else:
            args += [option, str(value)]
    return args


def _refuse_taken(studio: Studio, name: str) -> None:
    _, store = find_workspace(studio.workspace.root)  # creates nothing: `run` makes the store
    if store is not None and store.get_run(name) is not None:
        raise BadRequest(f"Run {name} already exists", where="run", fix="choose another name, or open its page")
