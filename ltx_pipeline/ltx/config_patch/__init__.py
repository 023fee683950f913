"""Comment-preserving patches of trainer configs: the room's one door.

Every phase that changes a config (config patch, autotune's winner, resume's ``load_checkpoint``,
failure fixes) goes through ``apply_patches``; ``patches_for_stage`` says which patches a plan stage
needs, ``render_diff`` shows a change and ``check_patched`` runs the schema mirror on the result.
Inside: ``_apply`` (the patch API), ``_stage`` (plan stage -> patches), ``_records`` (patch and
prompt-rewrite records), ``_round_trip`` (ruamel.yaml round trip) and ``_yaml_nodes`` (styling of
new nodes). Nothing outside this package imports those modules.
"""

from ltx_pipeline.ltx.config_patch._apply import apply_patches, check_patched, render_diff
from ltx_pipeline.ltx.config_patch._records import AUDIO_SENTENCE, MISSING, Patch, PatchRecord, PromptRewrite
from ltx_pipeline.ltx.config_patch._round_trip import float_text
from ltx_pipeline.ltx.config_patch._stage import KNOB_PATHS, StagePaths, patches_for_stage

__all__ = [
    "AUDIO_SENTENCE",
    "KNOB_PATHS",
    "MISSING",
    "Patch",
    "PatchRecord",
    "PromptRewrite",
    "StagePaths",
    "apply_patches",
    "check_patched",
    "float_text",
    "patches_for_stage",
    "render_diff",
]
