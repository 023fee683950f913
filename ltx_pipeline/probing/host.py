"""Host probing: free disk at the workspace, /dev/shm, RAM, OS, tools on PATH, W&B credentials.

Owns ``HostInfo`` and the W&B credential check. The check answers only *whether* credentials
resolve; the key itself is never returned, stored, logged or put in an exception.
"""

from __future__ import annotations

import netrc
import os
import platform
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import psutil

from ltx_pipeline.probing import Finding, plain_record

__all__ = ["HostInfo", "nearest_existing", "probe_host", "wandb_credentials_resolve"]

GIB = 1024**3
# Docker's default /dev/shm is 64 MiB; PyTorch data-loader workers pass tensors through it.
_SHM_WARN_BYTES = 1 * GIB
_NO_WORKERS = "set data.num_dataloader_workers to 0 in the trainer config"
_UV_INSTALL = "install uv with `curl -LsSf https://astral.sh/uv/install.sh | sh`, then restart your shell"


@dataclass(frozen=True)
class HostInfo:
    """What the host offers. Sizes are bytes; paths are strings; nothing here is secret.

    Attributes:
        disk_path: the existing folder whose file system was measured (the workspace or its parent).
        disk_free_bytes / disk_total_bytes: space on that file system.
        shm_total_bytes / shm_free_bytes: /dev/shm, None when it does not exist.
        ram_total_bytes / ram_available_bytes: host memory.
        os_name: ``platform.system()``; os_release: ``platform.release()``; is_wsl: running under WSL.
        uv_path: where uv is on PATH, None when absent. (Media is read with PyAV: no ffprobe.)
        wandb_credentials: whether W&B credentials resolve (never the key).
    """

    disk_path: str
    disk_free_bytes: int
    disk_total_bytes: int
    shm_total_bytes: int | None
    shm_free_bytes: int | None
    ram_total_bytes: int
    ram_available_bytes: int
    os_name: str
    os_release: str
    is_wsl: bool
    uv_path: str | None
    wandb_credentials: bool

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data."""
        return plain_record(self)

    def to_findings(self, *, uses_uv: bool = True) -> list[Finding]:
        """Rows for the findings table: OS, disk, /dev/shm, RAM, uv (only where the trainer runs through it), W&B."""
        disk = f"{_gib(self.disk_free_bytes)} free of {_gib(self.disk_total_bytes)} at {self.disk_path}"
        rows = [self._os_finding(), Finding("Disk", "ok", disk)]
        if self.shm_total_bytes is None:
            rows.append(Finding("/dev/shm", "warning", "no /dev/shm on this host",
                                f"{_NO_WORKERS} if the data loader fails"))
        elif self.shm_total_bytes < _SHM_WARN_BYTES:
            rows.append(Finding(
                "/dev/shm", "warning", f"only {_gib(self.shm_total_bytes)} (data-loader workers may crash)",
                f"in Docker, restart the container with --shm-size=16g (or {_NO_WORKERS})",
            ))
        else:
            rows.append(Finding("/dev/shm", "ok",
                                f"{_gib(self.shm_free_bytes or 0)} free of {_gib(self.shm_total_bytes)}"))
        rows.append(Finding("Host RAM", "ok",
                            f"{_gib(self.ram_available_bytes)} available of {_gib(self.ram_total_bytes)}"))
        if uses_uv:
            rows.append(Finding("uv", "ok", f"found at {self.uv_path}") if self.uv_path
                        else Finding("uv", "missing", "uv is not on PATH", _UV_INSTALL))
        rows.append(Finding("W&B", "ok", "credentials resolve") if self.wandb_credentials
                    else Finding("W&B", "warning", "not logged in; training will not log to W&B",
                                 "run `wandb login` (optional)"))
        return rows

    def _os_finding(self) -> Finding:
        label = f"{self.os_name} {self.os_release}".strip() + (" (WSL)" if self.is_wsl else "")
        if self.os_name != "Linux":
            return Finding("Operating system", "missing", f"{label}: the trainer needs Linux (Triton)",
                           "run training on a Linux machine (or WSL2)")
        return Finding("Operating system", "ok", label)


def _gib(size: int) -> str:
    return f"{size / GIB:.1f} GiB"


def nearest_existing(path: Path) -> Path:
    """``path`` itself if it exists, else its closest existing parent (the root at worst)."""
    candidate = path.expanduser().absolute()
    while not candidate.exists() and candidate != candidate.parent:
        candidate = candidate.parent
    return candidate


def _is_wsl(proc_version: Path) -> bool:
    try:
        return "microsoft" in proc_version.read_text(errors="replace").lower()
    except OSError:
        return False


def wandb_credentials_resolve(env: Mapping[str, str] | None = None, home: Path | None = None) -> bool:
    """Whether a W&B API key resolves, the way wandb looks for one. Never returns the key.

    ``WANDB_API_KEY`` set and non-empty, or a netrc entry (``$NETRC``, else ``~/.netrc``) for the
    W&B host (``api.wandb.ai``, or the host of ``$WANDB_BASE_URL``) with a password.
    A missing, unreadable or malformed netrc counts as no credentials.
    """
    env = os.environ if env is None else env
    if env.get("WANDB_API_KEY", "").strip():
        return True
    host = urlparse(env.get("WANDB_BASE_URL") or "https://api.wandb.ai").hostname or "api.wandb.ai"
    netrc_path = Path(env["NETRC"]).expanduser() if env.get("NETRC") else (home or Path.home()) / ".netrc"
    try:
        # An explicit path skips netrc's own permission check, which raises instead of answering.
        entry = netrc.netrc(str(netrc_path)).authenticators(host)
    except (OSError, netrc.NetrcParseError, UnicodeDecodeError):
        return False
    return bool(entry and entry[2])


def probe_host(workspace: Path, env: Mapping[str, str] | None = None, home: Path | None = None,
               shm: Path = Path("/dev/shm"), proc_version: Path = Path("/proc/version")) -> HostInfo:
    """Measure the host for the findings table.

    Args:
        workspace: the workspace root; free disk is measured at it or its nearest existing parent.
        env: environment for PATH and W&B lookups; defaults to ``os.environ``.
        home: home folder for ``~/.netrc``; defaults to ``Path.home()``.
        shm: the shared-memory mount to measure.
        proc_version: read to detect WSL.
    """
    env = os.environ if env is None else env
    disk_path = nearest_existing(workspace)
    disk = shutil.disk_usage(disk_path)
    shm_total = shm_free = None
    if shm.is_dir():
        shm_usage = shutil.disk_usage(shm)
        shm_total, shm_free = shm_usage.total, shm_usage.free
    memory = psutil.virtual_memory()
    search_path = env.get("PATH")
    return HostInfo(
        disk_path=str(disk_path),
        disk_free_bytes=disk.free,
        disk_total_bytes=disk.total,
        shm_total_bytes=shm_total,
        shm_free_bytes=shm_free,
        ram_total_bytes=memory.total,
        ram_available_bytes=memory.available,
        os_name=platform.system(),
        os_release=platform.release(),
        is_wsl=_is_wsl(proc_version),
        uv_path=shutil.which("uv", path=search_path),
        wandb_credentials=wandb_credentials_resolve(env, home),
    )
