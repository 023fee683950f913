"""``--push-to-hub REPO``: the trainer's own upload to the Hugging Face Hub, never a second uploader (#45).

The trainer uploads at the end of training when its config says ``hub.push_to_hub: true`` with a
``hub.hub_model_id`` (``ltx_trainer.trainer``: after the final save, on the main process, ``push_to_hub`` creates
the repo if it does not exist and uploads the final weights and a model card). So a run asks for it with two
recorded patches in its LAST training stage's config (``hub_patches``); earlier stages, autotune's trials, the smoke
test and the evaluation's renders upload nothing. The token is the trainer's to read from its environment, which
it inherits (``HF_TOKEN``, else ``HUGGING_FACE_HUB_TOKEN``, as ``huggingface_hub`` reads them): the run checks
only that one is set (``token_variable``), names the variable and never its value, and writes it nowhere. Pure:
the environment comes in as an argument.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ltx_pipeline.errors import BadInput
from ltx_pipeline.ltx.config_patch import Patch

__all__ = ["TOKEN_VARIABLES", "hub_patches", "repo_id_problem", "require_token", "token_variable"]

#: Where ``huggingface_hub`` looks for a token in the environment, in its order.
TOKEN_VARIABLES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
# One part of a repo id (``huggingface_hub.utils.validate_repo_id``): 1 to 96 of letters, digits, '-', '_', '.',
# neither starting nor ending with '-' or '.'.
_PART = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?", re.ASCII)


def repo_id_problem(repo: str) -> str | None:
    """What makes ``repo`` no ``owner/name`` repo id by the Hub's rules, or None when it is one."""
    parts = repo.split("/")
    if len(parts) != 2 or not all(parts):
        return f"{repo!r} is not a Hub repo id of the form owner/name"
    if not all(_PART.fullmatch(part) for part in parts):
        return (f"{repo!r} is not a Hub repo id: owner and name are 1 to 96 letters, digits, '-', '_' or '.', "
                "neither starting nor ending with '-' or '.'")
    if "--" in repo or ".." in repo:
        return f"{repo!r} is not a Hub repo id: '--' and '..' are not allowed"
    if repo.endswith(".git"):
        return f"{repo!r} is not a Hub repo id: it cannot end in '.git'"
    return None


def hub_patches(repo: str) -> list[Patch]:
    """The last stage's patches that make the trainer upload its final weights to ``repo``."""
    reason = f"--push-to-hub {repo}: the trainer uploads the final weights at the end of training"
    return [Patch("hub.push_to_hub", True, reason), Patch("hub.hub_model_id", repo, reason)]


def token_variable(environ: Mapping[str, str]) -> str | None:
    """The name of the environment variable that holds a Hub token (never its value), or None."""
    return next((name for name in TOKEN_VARIABLES if (environ.get(name) or "").strip()), None)


def require_token(repo: str, environ: Mapping[str, str]) -> str:
    """The variable holding the token the trainer will upload to ``repo`` with.

    Raises:
        BadInput: no token is set: the upload would fail after the whole training.
    """
    name = token_variable(environ)
    if name is None:
        raise BadInput(f"--push-to-hub {repo} needs a Hugging Face token, and none is set in the environment",
                       where=" or ".join(TOKEN_VARIABLES),
                       fix="export HF_TOKEN=<a token with write access to the repo> in this shell (it is read from "
                           "the environment only, never written down), then run again; or drop --push-to-hub "
                           "(push_to_hub in run.yaml)")
    return name
