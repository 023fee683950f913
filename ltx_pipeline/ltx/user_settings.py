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

#: Keys (or whole sections, ending in ".") the run sets itself, and where a user changes them instead.
OWNED: dict[str, str] = {
    "model.": "the run's model and mode (--model-path, --text-encoder-path, --training-mode; resume and stages "
              "set load_checkpoint)",
    "data.preprocessed_data_root": "the run's own preprocessed data (--dataset)",
    "output_dir": "the run's folder",
    "optimization.steps": "--steps",
    "optimization.learning_rate": "--learning-rate",
    "optimization.batch_size": "--effective-batch (autotune picks the per-GPU batch)",
    "optimization.gradient_accumulation_steps": "--effective-batch (autotune picks the accumulation)",
    "optimization.optimizer_type": "autotune (or the plan's tier with --autotune off)",
    "optimization.enable_gradient_checkpointing": "autotune (or the plan's tier with --autotune off)",
    "acceleration.quantization": "autotune (or the plan's tier with --autotune off)",
    "lora.rank": "--rank",
    "lora.alpha": "--rank (alpha = rank)",
    "checkpoints.interval": "--checkpoint-interval",
    "checkpoints.keep_last_n": "the plan (it keeps the final weights)",
    "checkpoints.no_resume": "resume and chained stages",
    "checkpoints.save_training_state": "the plan (a resume keeps the optimizer and schedule)",
    "validation.interval": "--validation-interval (or --validation-media none)",
    "validation.samples": "the plan's validation samples from your data (--validation-media)",
    "validation.prompts": "the plan's validation samples from your data (--validation-media)",
    "hub.": "--push-to-hub",
    "wandb.": "the probe (W&B credentials in the environment)",
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
            raise BadInput(f"{key} is set by the run itself", where="--set", fix=f"change it with {owner}")
        try:
            check_setting(key, value)
        except SettingProblem as problem:
            raise BadInput(problem.what, where="--set", fix=problem.fix) from None
    return dict(settings)


def setting_patches(settings: Mapping[str, Any]) -> list[Patch]:
    """The patches of the user's own values, in the order given (applied after the plan's)."""
    return [Patch(key, value, REASON) for key, value in settings.items()]
