"""nvidia-smi's GPU list: the ``Gpu`` record, the query run and its CSV parsed robustly, and the
``CUDA_VISIBLE_DEVICES`` filter that keeps the GPUs training will see.

``probing/gpus.py`` builds the probe a run records from this list (or from an assumed GPU instead). Every
failure the user can fix here (no driver, garbage output, unknown device ids) is a one-line ``BadInput``
whose fix names ``--nvidia-smi``, ``$LTX_PIPELINE_NVIDIA_SMI`` and ``--assume-gpu``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ltx_pipeline.env_names import NVIDIA_SMI_ENV
from ltx_pipeline.errors import BadInput
from ltx_pipeline.probing import plain_record
from ltx_pipeline.probing.nvidia_smi import nvidia_smi_named, nvidia_smi_on_path

__all__ = ["ASSUME_FORMAT", "FIX_SMI", "MIB", "NVIDIA_SMI_QUERY", "Gpu", "describe_gpus", "filter_visible",
           "parse_nvidia_smi", "resolve_nvidia_smi", "run_nvidia_smi"]

NVIDIA_SMI_QUERY = [
    "--query-gpu=index,uuid,name,memory.total,driver_version",
    "--format=csv,noheader,nounits",
]
ASSUME_FORMAT = '--assume-gpu "NAME,MEMORY_MIB[,COUNT]", e.g. "NVIDIA H100 80GB HBM3,81559,2"'
FIX_SMI = (
    "check that the NVIDIA driver works (`nvidia-smi` lists your GPUs), point --nvidia-smi or "
    f"{NVIDIA_SMI_ENV} at a working nvidia-smi, or plan for hardware you do not have with {ASSUME_FORMAT}"
)
# nvidia-smi prints MiB; tolerate the unit even under nounits, and "MB" from odd wrappers.
MIB = re.compile(r"^(\d+)\s*(?:mib|mb)?$", re.IGNORECASE)
_NOT_AVAILABLE = {"[n/a]", "n/a", "[not supported]", "[unknown error]", ""}
_KNOWN_FAILURES = (
    ("couldn't communicate with the nvidia driver", "the NVIDIA driver is not answering"),
    ("no devices were found", "nvidia-smi found no NVIDIA GPU"),
    ("driver/library version mismatch", "the NVIDIA driver and its library versions do not match"),
)


@dataclass(frozen=True)
class Gpu:
    """One GPU as nvidia-smi reports it (or as ``--assume-gpu`` describes it).

    Attributes:
        index: nvidia-smi's index (PCI bus order).
        uuid: the GPU's UUID, ``GPU-...``; ``ASSUMED-<n>`` for assumed GPUs.
        name: the product name, e.g. "NVIDIA H100 80GB HBM3".
        memory_mib: total memory in MiB as reported (a little below the card's nominal size).
        driver: driver version, "unknown" when nvidia-smi reports ``[N/A]``, "assumed" when assumed.
        assumed: True when the GPU comes from ``--assume-gpu`` rather than a probe.
    """

    index: int
    uuid: str
    name: str
    memory_mib: int
    driver: str
    assumed: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data."""
        return plain_record(self)


def describe_gpus(gpus: tuple[Gpu, ...] | list[Gpu]) -> str:
    """Group GPUs by model: "2 × NVIDIA H100 80GB HBM3 (81559 MiB)"."""
    groups: dict[tuple[str, int], int] = {}
    for gpu in gpus:
        groups[(gpu.name, gpu.memory_mib)] = groups.get((gpu.name, gpu.memory_mib), 0) + 1
    return " + ".join(f"{count} × {name} ({mib} MiB)" for (name, mib), count in groups.items())


def resolve_nvidia_smi(executable: str | None, env: Mapping[str, str]) -> str:
    """The nvidia-smi to run, found (never run); ``BadInput`` naming the fix when there is none that runs."""
    candidate = nvidia_smi_named(executable, env)
    if candidate is None:
        found = nvidia_smi_on_path(env)
        if found is None:
            raise BadInput("No GPU probe: nvidia-smi is not on PATH", where="PATH", fix=FIX_SMI)
        return found
    candidate = os.path.expanduser(candidate)
    if os.sep not in candidate:
        found = shutil.which(candidate, path=env.get("PATH"))
        if found is None:
            raise BadInput(f"nvidia-smi executable {candidate!r} is not on PATH", where=candidate,
                           fix=FIX_SMI)
        return found
    if not os.path.isfile(candidate):
        raise BadInput("nvidia-smi executable does not exist", where=candidate, fix=FIX_SMI)
    if not os.access(candidate, os.X_OK):
        raise BadInput("nvidia-smi executable is not executable", where=candidate,
                       fix=f"run `chmod +x {candidate}` or {FIX_SMI}")
    return candidate


def run_nvidia_smi(executable: str | None, env: Mapping[str, str], timeout: float) -> tuple[str, list[Gpu]]:
    """Run the nvidia-smi query: the executable run and every GPU it lists, in its order.

    Raises:
        BadInput: nvidia-smi is missing, fails, hangs or prints garbage.
    """
    exe = resolve_nvidia_smi(executable, env)
    try:
        # argv list, no shell: the path comes from the user but is never interpreted by a shell.
        done = subprocess.run(  # noqa: S603
            [exe, *NVIDIA_SMI_QUERY], capture_output=True, text=True, errors="replace",
            timeout=timeout, check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise BadInput(f"nvidia-smi did not answer within {timeout:g} s", where=exe, fix=FIX_SMI) from exc
    except OSError as exc:
        raise BadInput(f"nvidia-smi could not be started: {exc.strerror or exc}", where=exe,
                       fix=FIX_SMI) from exc
    if done.returncode != 0:
        output = done.stderr + "\n" + done.stdout
        meaning = _known_failure(output) or f"nvidia-smi exited with status {done.returncode}"
        raise BadInput(f"{meaning}: {_first_line(done.stderr, done.stdout)}", where=exe, fix=FIX_SMI)
    return exe, parse_nvidia_smi(done.stdout, source=exe)


def _first_line(*texts: str) -> str:
    for text in texts:
        for line in text.splitlines():
            if line.strip():
                return _clip(line.strip())
    return "no output"


def _clip(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _known_failure(text: str) -> str | None:
    lowered = text.lower()
    for needle, meaning in _KNOWN_FAILURES:
        if needle in lowered:
            return meaning
    return None


def parse_nvidia_smi(text: str, source: str = "nvidia-smi") -> list[Gpu]:
    """Parse ``index, uuid, name, memory.total, driver_version`` CSV rows.

    Tolerates extra spaces, a ``MiB`` unit, blank lines, CRLF line endings, a BOM, a header row
    and an ``[N/A]`` driver.

    Args:
        text: nvidia-smi's standard output.
        source: the executable, named in error messages.

    Returns:
        The GPUs in the order listed.

    Raises:
        BadInput: a driver failure message, no GPU rows, or any row that is not a GPU record.
    """
    failure = _known_failure(text)
    if failure:
        raise BadInput(f"{failure}: {_first_line(text)}", where=source, fix=FIX_SMI)
    gpus: list[Gpu] = []
    for number, raw in enumerate(text.lstrip("\ufeff").splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        fields = [field.strip() for field in line.split(",")]
        if fields[0].lower() == "index":  # a header row: the caller dropped "noheader"
            continue
        gpus.append(_parse_row(fields, number, line, source))
    if not gpus:
        raise BadInput("nvidia-smi printed no GPU rows", where=source, fix=FIX_SMI)
    return gpus


def _parse_row(fields: list[str], number: int, line: str, source: str) -> Gpu:
    def bad(why: str) -> BadInput:
        return BadInput(f"nvidia-smi output line {number} is not a GPU record ({why}): {_clip(line)!r}",
                        where=source, fix=FIX_SMI)

    if len(fields) != 5:
        raise bad(f"expected 5 comma-separated fields, got {len(fields)}")
    index_text, uuid, name, memory_text, driver = fields
    if not index_text.isdigit():
        raise bad(f"index {index_text!r} is not a number")
    if not name or name.lower() in _NOT_AVAILABLE:
        raise bad("no GPU name")
    memory = MIB.match(memory_text)
    if memory is None or int(memory.group(1)) <= 0:
        raise bad(f"memory.total {memory_text!r} is not a size in MiB")
    if driver.lower() in _NOT_AVAILABLE:
        driver = "unknown"
    return Gpu(index=int(index_text), uuid=uuid, name=name, memory_mib=int(memory.group(1)), driver=driver)


def filter_visible(gpus: list[Gpu], cuda_visible_devices: str | None,
                   device_order: str | None = None) -> tuple[list[Gpu], list[str]]:
    """Keep the GPUs that ``CUDA_VISIBLE_DEVICES`` exposes, in the order it lists them.

    Entries are nvidia-smi indices, full UUIDs or unique ``GPU-`` UUID prefixes. Unset means all;
    an empty value or ``-1`` means none.

    Args:
        gpus: every GPU nvidia-smi listed.
        cuda_visible_devices: the variable's value, None when unset.
        device_order: ``CUDA_DEVICE_ORDER``; indices match nvidia-smi's only with ``PCI_BUS_ID``.

    Returns:
        The visible GPUs and a list of warnings.

    Raises:
        BadInput: an entry matches no GPU, or a UUID prefix matches several.
    """
    if cuda_visible_devices is None:
        return list(gpus), []
    entries = [entry.strip() for entry in cuda_visible_devices.split(",") if entry.strip()]
    visible: list[Gpu] = []
    unknown: list[str] = []
    used_index = False
    for entry in entries:
        if entry.lstrip("-").isdigit() and int(entry) < 0:
            break  # CUDA stops at a negative index: "-1" hides every device
        if entry.isdigit():
            used_index = True
            matches = [gpu for gpu in gpus if gpu.index == int(entry)]
        elif entry.upper().startswith("GPU-"):
            matches = [gpu for gpu in gpus if gpu.uuid.upper().startswith(entry.upper())]
        else:
            matches = []
        if len(matches) > 1:
            raise BadInput(f"CUDA_VISIBLE_DEVICES entry {entry!r} matches {len(matches)} GPUs",
                           where="CUDA_VISIBLE_DEVICES", fix="give a longer UUID prefix or an index")
        if not matches:
            unknown.append(entry)
        elif matches[0] not in visible:
            visible.append(matches[0])
    if unknown:
        known = ", ".join(f"{gpu.index} ({gpu.uuid})" for gpu in gpus)
        raise BadInput(f"CUDA_VISIBLE_DEVICES names GPUs that nvidia-smi does not list: {', '.join(unknown)}",
                       where="CUDA_VISIBLE_DEVICES",
                       fix=f"use indices or GPU- UUIDs from nvidia-smi ({known}), or unset it")
    warnings: list[str] = []
    mixed = len({(gpu.name, gpu.memory_mib) for gpu in gpus}) > 1
    if used_index and mixed and (device_order or "").upper() != "PCI_BUS_ID":
        warnings.append(
            "CUDA numbers mixed GPUs fastest-first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, so the indices in "
            "CUDA_VISIBLE_DEVICES may not be nvidia-smi's."
        )
    return visible, warnings
