"""Your own trainer-config values (``run --set KEY=VALUE``, run.yaml ``config_set``): parsed, checked, patched last.

The plan writes many keys of the trainer config; a user often wants one more of their own (fewer validation
denoising steps, another ``max_grad_norm``, a seed). ``--set`` takes any key of the trainer's schema
(``trainer_config.settable_keys``) with a value its field accepts, and the config-patch phase applies it after
every planned patch, recorded with the reason "your --set". Keys the run decides itself are refused, each
with the option or phase that sets it (``OWNED``): setting them by hand would contradict the plan, the
autotune sweep, the data or resume (e.g. ``optimization.steps`` is ``--steps``; a batch size is swept).
Values are YAML scalars or flow collections as written after ``=`` (``4``, ``true``, ``null``, ``[1, 2]``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ltx_pipeline.errors import BadInput
from ltx_pipeline.ltx.config_patch import Patch

__all__ = ["OWNED", "REASON", "checked_settings", "parse_assignments", "setting_patches"]

REASON = "your --set"

#: Keys (or whole sections, ending in ".") the run sets itself, and the fix that says how a user changes them.
_AUTOTUNE = "autotune picks it from measured trials; with --autotune off the plan's tier sets it"
OWNED: dict[str, str] = {
    "model.": "give --model-path, --text-encoder-path or --training-mode (resume and stages set load_checkpoint)",
    "data.preprocessed_data_root": "give --dataset: the run preprocesses it into its own folder",
    "output_dir": "leave it: outputs go into the run's folder",
    "optimization.steps": "use --steps",
    "optimization.learning_rate": "use --learning-rate",
    "optimization.batch_size": "use --effective-batch (autotune picks the per-GPU batch)",
    "optimization.gradient_accumulation_steps": "use --effective-batch (autotune picks the accumulation)",
    "optimization.optimizer_type": _AUTOTUNE,
    "optimization.enable_gradient_checkpointing": _AUTOTUNE,
    "acceleration.quantization": _AUTOTUNE,
    "lora.rank": "use --rank",
    "lora.alpha": "use --rank (alpha = rank)",
    "checkpoints.interval": "use --checkpoint-interval",
    "checkpoints.keep_last_n": "leave it: the plan keeps the final weights",
    "checkpoints.no_resume": "leave it: resume and chained stages set it",
    "checkpoints.save_training_state": "leave it: the plan keeps the optimizer and schedule for a resume",
    "validation.interval": "use --validation-interval (or --validation-media none)",
    "validation.samples": "use --validation-media: the plan takes the samples from your data",
    "validation.prompts": "use --validation-media: the plan takes the samples from your data",
    "hub.": "use --push-to-hub",
    "wandb.": "set W&B credentials in the environment: the probe turns it on",
}


def _owner(key: str) -> str | None:
    return next((where for owned, where in OWNED.items()
                 if key == owned or (owned.endswith(".") and key.startswith(owned))), None)


def parse_assignments(items: Iterable[str]) -> dict[str, Any]:
    """``KEY=VALUE`` strings into a mapping, the value read as YAML; a later key wins.

    Raises:
        BadInput: an item with no ``=``, an empty key, or a value that is not YAML.
    """
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    reader = YAML(typ="safe", pure=True)
    settings: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise BadInput(f"--set {item!r} is not KEY=VALUE", where="--set",
                           fix="write it as --set validation.inference_steps=8")
        try:
            value = reader.load(text) if text.strip() else None
        except YAMLError as exc:
            raise BadInput(f"--set {key}: {text!r} is not a YAML value ({str(exc).splitlines()[0]})",
                           where="--set", fix="quote strings with spaces, write lists as [a, b]") from None
        settings[key] = value
    return settings


def checked_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` when every key exists in the trainer's schema, is not the run's own, and its value is valid.

    Raises:
        BadInput: the first problem, in one line with its fix.
    """
    from ltx_pipeline.ltx.trainer_config import SettingProblem, check_setting

    for key, value in settings.items():
        owner = _owner(key)
        if owner is not None:
            raise BadInput(f"{key} is set by the run itself", where="--set", fix=owner)
        try:
            check_setting(key, value)
        except SettingProblem as problem:
            raise BadInput(problem.what, where="--set", fix=problem.fix) from None
    return dict(settings)


def setting_patches(settings: Mapping[str, Any]) -> list[Patch]:
    """The patches of the user's own values, in the order given (applied after the plan's)."""
    return [Patch(key, value, REASON) for key, value in settings.items()]
