"""The runs' config differences: every recorded patch with its reason, each run's value, and the request's choices.

Patches are those the phases recorded (``ConfigPatchOutputs`` per stage, then the autotune winner's, which go
into every stage unless they name one), keyed by stage and dotted path. A run that did not patch a field some
other run patched shows the value its own stage config holds (read from the file, marked not patched), so a
learning rate one run set and another left at the template's value is still one row with both values.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ltx_pipeline.compare.records import ConfigDifference, PatchValue, PromptRenders, RequestChoice
from ltx_pipeline.outputs.autotune import AutotuneOutputs
from ltx_pipeline.outputs.config_patch import ConfigPatchOutputs, StageConfig
from ltx_pipeline.outputs.evaluate import EvaluateOutputs
from ltx_pipeline.yaml_io import load_yaml

if TYPE_CHECKING:
    from ltx_pipeline.compare.run_records import RunRecords

__all__ = ["REQUEST_CHOICES", "config_differences", "config_value", "prompt_renders", "request_choices"]

# The request fields that shape what is trained and how (paths to the trainer or the GPUs' tools do not).
REQUEST_CHOICES = ("mode", "training_mode", "strategy", "buckets", "rank", "steps", "learning_rate",
                   "effective_batch", "processes", "nodes", "checkpoint_interval", "validation_interval", "trigger",
                   "autotune", "audio", "validation_media", "holdout", "holdout_file", "dataset", "model_path",
                   "continued_from", "headroom", "eval_prompts", "skip_eval", "backend")

_Patches = dict[tuple[int, str], PatchValue]


def config_differences(runs: list[RunRecords]) -> tuple[ConfigDifference, ...]:
    """Every (stage, field) some run patched, each run's value, stage by stage in the first run's patch order."""
    recorded = {r.run.name: _recorded(r) for r in runs}
    keys: list[tuple[int, str]] = []
    for patches in recorded.values():
        keys += [key for key in patches if key not in keys]
    configs = {r.run.name: _loaded_configs(r) for r in runs}
    out = []
    for stage, path in sorted(keys, key=lambda key: (key[0], keys.index(key))):
        values = {r.run.name: recorded[r.run.name].get((stage, path)) or _unpatched(configs[r.run.name], stage, path)
                  for r in runs}
        shown = {_comparable(values[r.run.name], r) for r in runs}
        out.append(ConfigDifference(stage, path, values, differs=len(shown) > 1))
    return tuple(out)


def request_choices(runs: list[RunRecords]) -> tuple[RequestChoice, ...]:
    """Each of ``REQUEST_CHOICES`` as each run's request stored it (None: left to the default)."""
    requests = {r.run.name: r.run.request if isinstance(r.run.request, dict) else {} for r in runs}
    out = []
    for name in REQUEST_CHOICES:
        values = {run: request.get(name) for run, request in requests.items()}
        shown = {json.dumps(value, sort_keys=True) for value in values.values()}
        out.append(RequestChoice(name, values, differs=len(shown) > 1))
    return tuple(out)


def prompt_renders(runs: list[RunRecords]) -> tuple[PromptRenders, ...]:
    """Each evaluation prompt any run rendered, with every run's render of it (the first run's order first)."""
    by_prompt: dict[str, tuple[str, dict[str, str | None]]] = {}
    for records in runs:
        evaluate = records.typed("evaluate", EvaluateOutputs)
        for render in evaluate.renders if evaluate is not None else []:
            category, files = by_prompt.setdefault(render.prompt, (render.category, {}))
            files.setdefault(records.run.name, render.file)
    return tuple(PromptRenders(prompt, category, {r.run.name: files.get(r.run.name) for r in runs})
                 for prompt, (category, files) in by_prompt.items())


def config_value(data: Any, dotted: str) -> tuple[bool, Any]:
    """(found, value) of ``dotted`` (``optimization.steps``, ``validation.samples.0.prompt``) in a loaded config."""
    node = data
    for part in dotted.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False, None
    return True, node


def _recorded(records: RunRecords) -> _Patches:
    """The run's recorded patches by (stage, path); autotune's winner after config_patch's, as they were applied."""
    config_patch = records.typed("config_patch", ConfigPatchOutputs)
    autotune = records.typed("autotune", AutotuneOutputs)
    out: _Patches = {}
    stages = config_patch.configs if config_patch is not None else ()
    for stage in stages:
        for patch in stage.patches:
            out[(stage.stage, patch.path)] = PatchValue(patch.new, True, patch.reason, "config_patch", patch.old)
    winners = autotune.patches if autotune is not None and autotune.off is None else []
    for stage in stages:
        for winner in winners:
            if winner.stage in (None, stage.stage):
                out[(stage.stage, winner.path)] = PatchValue(winner.new, True, winner.reason, "autotune", winner.old)
    return out


def _loaded_configs(records: RunRecords) -> dict[int, Any]:
    """Each stage's config file as loaded now (None: not readable)."""
    config_patch = records.typed("config_patch", ConfigPatchOutputs)
    return {stage.stage: _load(stage) for stage in (config_patch.configs if config_patch is not None else ())}


def _load(stage: StageConfig) -> Any:
    try:
        with open(stage.config, encoding="utf-8") as handle:
            return load_yaml(handle)
    except (OSError, ValueError):
        return None


def _unpatched(configs: dict[int, Any], stage: int, path: str) -> PatchValue:
    """A field the run did not patch: its value in the run's stage config, or absent (no stage, no field)."""
    if stage not in configs:
        return PatchValue(None, False, f"no stage {stage}", None, present=False)
    if configs[stage] is None:
        return PatchValue(None, False, "its stage config cannot be read", None, present=False)
    found, value = config_value(configs[stage], path)
    if not found:
        return PatchValue(None, False, "not in its config", None, present=False)
    return PatchValue(value, False, None, None)


def _comparable(value: PatchValue, records: RunRecords) -> str:
    """The value as compared: the run's own folder written ``<run>`` (paths inside run folders differ by name only)."""
    text = json.dumps(value.value, sort_keys=True) if value.present else "(absent)"
    return text.replace(json.dumps(str(records.root))[1:-1], "<run>")
