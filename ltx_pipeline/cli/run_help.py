"""What ``run --help`` shows beside each request option: its choices, its default, its help panel.

Kept light for ``--help`` (under 0.2 s, ``benchmarks/bench_status.py``): the modes come from their one
source, ``ltx.modes`` (standard library only); the other lists and defaults live in modules that load
pydantic or the planner (``request/``, ``ltx.recipe``, ``ltx.preparation``), so they are spelled here
and ``tests/cli/test_run_help.py`` pins each one to its source, failing the day they differ. Choices are
shown as click shows a ``Choice`` (``[a|b|c]``) while the values are still checked by the request, which
reports every problem of a request at once (run.yaml included). Options left out keep run.yaml's value for
an existing run; the defaults shown are a new run's.
"""

from __future__ import annotations

from ltx_pipeline.env_names import LTX2_ROOT_ENV
from ltx_pipeline.ltx.modes import MODES

__all__ = ["AUDIO", "AUTOTUNE", "BACKENDS", "CAPTIONERS", "DEFAULTS", "MODE_NAMES", "PANELS", "STRATEGIES",
           "TRAINING_MODES", "VALIDATION_MEDIA", "choices", "default"]

MODE_NAMES = tuple(MODES)
TRAINING_MODES = ("lora", "full")  # RunRequest.training_mode
STRATEGIES = ("single", "mixed", "chain")  # RunRequest.strategy
BACKENDS = ("ltx", "reference", "simulated")  # request.BACKENDS
AUTOTUNE = ("on", "off")  # RunRequest.autotune
AUDIO = ("auto", "on", "off")  # RunRequest.audio
HOLDOUT_LOSS = ("on", "off")  # RunRequest.holdout_loss
VALIDATION_MEDIA = ("auto", "without", "none")  # ltx.validation_sources.CHOICES
CAPTIONERS = ("offline", "qwen_omni", "gemini_flash")  # ltx.preparation.CaptionerName


def _by_value(attribute: str, words: str) -> str:
    """Each value the modes' templates give ``attribute``, with the modes that have it."""
    groups: dict[object, list[str]] = {}
    for mode in MODES.values():
        groups.setdefault(getattr(mode, attribute), []).append(mode.name)
    return "; ".join(f"{value:g} for {', '.join(names)}" if isinstance(value, float) else
                     f"{value} for {', '.join(names)}" for value, names in groups.items()) + words


#: The default of each option whose request field has none of its own: a fixed value (pinned to the
#: request's or the planner's by the test), or what the plan decides (then it says how, and from what).
DEFAULTS = {
    "mode": "t2v",
    "training_mode": "lora",
    "strategy": "single",
    "buckets": "from the strategy: 960x544x49 for single; 960x544x121;1280x704x81 for mixed; "
               "512x288x321, 960x544x121, 1920x1088x33 (one per stage) for chain",
    "rank": "from the plan: 32 on a standard tier, 16 on a low-VRAM one",
    "steps": "from the plan: the mode's template: " + _by_value("steps", ""),
    "learning_rate": "from the plan: the mode's template: " + _by_value("learning_rate", "")
                     + " (a chained plan lowers it per stage)",
    "effective_batch": "1",
    "backend": "ltx",
    "trainer_root": f"${LTX2_ROOT_ENV}",
    "headroom": "0.05",
    "autotune": "on",
    "autotune_parallel": "1 (one trial at a time)",
    "audio": "auto",
    "validation_media": "auto",
    "processes": "one per GPU",
    "preprocess_processes": "one per free GPU",
    "nodes": "1",
    "main_port": "29500",
    "checkpoint_interval": "250",
    "validation_interval": "100",
    "captioner": "qwen_omni on the ltx backend, offline on reference and simulated",
    "vllm_url": "http://127.0.0.1:8001/v1",
    "holdout": "~10 % of the samples (1 to 20) from 8 samples up, none below",
    "holdout_loss": "on",
    "eval_checkpoints": "the last checkpoint and the one with the lowest holdout loss, when they differ",
}

#: The help panel of each request option of ``run`` (``cli.help_panels.PanelCommand`` groups them).
PANELS = {
    "data": "Data and captions",
    "training": "Training",
    "trainer": "Trainer, GPUs and launch",
    "autotune": "Autotune",
    "evaluation": "Evaluation",
}


def choices(values: tuple[str, ...]) -> str:
    """The metavar click gives a ``Choice``: ``[a|b|c]``."""
    return "[" + "|".join(values) + "]"


def default(field: str) -> str:
    """The help suffix naming ``field``'s default, as click writes one: ``  [default: ...]``."""
    return f"  [default: {DEFAULTS[field]}]"
