"""How the trainer-config mirror looks at the filesystem: the path policy carried in the context.

The real trainer checks paths while it validates (model_path exists, VAE paths are files, the data
root is a directory, ...) and resolves relative paths against the process working directory. The
mirror does the same checks, but reads two knobs from the pydantic validation context instead of
the process state: ``cwd`` (where relative paths resolve) and ``relaxed`` (skip every existence
check, so a config holding placeholder paths can be checked for everything else). Validation
never writes anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationInfo

__all__ = ["CONTEXT_KEY", "PathPolicy", "locate", "path_policy", "resolved"]

CONTEXT_KEY = "ltx_trainer_paths"


@dataclass(frozen=True)
class PathPolicy:
    """Where relative paths resolve and whether existence checks run.

    Attributes:
        relaxed: when true, no path has to exist (placeholder paths pass); resolution still happens.
        cwd: directory relative paths resolve against; None means the process working directory,
            exactly like the trainer.
    """

    relaxed: bool = False
    cwd: Path | None = None

    def context(self) -> dict[str, PathPolicy]:
        """The pydantic validation context that carries this policy."""
        return {CONTEXT_KEY: self}


_STRICT = PathPolicy()


def path_policy(info: ValidationInfo | None) -> PathPolicy:
    """The policy in a validator's context; strict and process-CWD-relative when none was given."""
    context = info.context if info is not None else None
    if isinstance(context, dict):
        policy = context.get(CONTEXT_KEY)
        if isinstance(policy, PathPolicy):
            return policy
    return _STRICT


def locate(value: str | Path, policy: PathPolicy) -> Path:
    """The path the trainer would touch for ``value``, without expanding ``~`` (as the trainer does not)."""
    path = Path(value)
    if policy.cwd is not None and not path.is_absolute():
        return policy.cwd / path
    return path


def resolved(value: str | Path, policy: PathPolicy) -> Path:
    """``Path(value).expanduser().resolve()`` as the trainer computes it, but against ``policy.cwd``."""
    return locate(Path(value).expanduser(), policy).resolve()
