"""GPU probing: run ``nvidia-smi``, parse its CSV robustly, keep only the GPUs training will see.

Owns the ``nvidia-smi`` query, its parser, the ``CUDA_VISIBLE_DEVICES`` filter and the
``--assume-gpu`` spec, and what a run plans for without probing: the assumed GPU, or, for the toy
backend on a machine with no nvidia-smi, a stated default GPU shown as assumed. Every failure the
user can fix (no driver, garbage output, unknown device ids, a bad spec) is a one-line
``BadInput``, and ``check_gpu_probe`` raises the ones a probe could not even start with before a
run exists. Tier and VRAM-gate decisions are not made here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ltx_pipeline.env_names import NVIDIA_SMI_ENV
from ltx_pipeline.errors import BadInput
from ltx_pipeline.probing import Finding, plain_record
from ltx_pipeline.probing.nvidia_smi import nvidia_smi_named, nvidia_smi_on_path

__all__ = [
    "DEFAULT_ASSUMED_GPU",
    "check_gpu_probe",
    "cuda_present",
    "NVIDIA_SMI_ENV",
    "NVIDIA_SMI_QUERY",
    "Gpu",
    "GpuProbe",
    "assumed_probe",
    "describe_gpus",
    "filter_visible",
    "parse_assumed_gpu",
    "parse_nvidia_smi",
    "planned_gpu",
    "probe_gpus",
    "query_gpus",
]

NVIDIA_SMI_QUERY = [
    "--query-gpu=index,uuid,name,memory.total,driver_version",
    "--format=csv,noheader,nounits",
]
ASSUME_FORMAT = '--assume-gpu "NAME,MEMORY_MIB[,COUNT]", e.g. "NVIDIA H100 80GB HBM3,81559,2"'
# What the toy backend plans for on a machine with no nvidia-smi (a laptop): the demo's 32 GB card,
# the smallest the LTX-2 workflow documents a config for. Shown as assumed, like --assume-gpu.
DEFAULT_ASSUMED_GPU = "NVIDIA GeForce RTX 5090,32607"
_DEFAULT_SOURCE = "default (no nvidia-smi)"
_DEFAULTED_BACKENDS = ("reference",)  # ``simulated`` assumes its surface's GPU; ``ltx`` needs the real one

_FIX_SMI = (
    "check that the NVIDIA driver works (`nvidia-smi` lists your GPUs), point --nvidia-smi or "
    f"{NVIDIA_SMI_ENV} at a working nvidia-smi, or plan for hardware you do not have with {ASSUME_FORMAT}"
)
# nvidia-smi prints MiB; tolerate the unit even under nounits, and "MB" from odd wrappers.
_MEMORY = re.compile(r"^(\d+)\s*(?:mib|mb)?$", re.IGNORECASE)
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


@dataclass(frozen=True)
class GpuProbe:
    """What the GPU probe found.

    Attributes:
        source: the nvidia-smi executable that was run, "--assume-gpu", or "default (no nvidia-smi)"
            for the toy backend's default GPU on a machine without nvidia-smi.
        assumed: True when planning for assumed hardware.
        all_gpus: every GPU nvidia-smi listed.
        gpus: the GPUs training will see (after ``CUDA_VISIBLE_DEVICES``).
        cuda_visible_devices: the value honoured, None when unset.
        warnings: things the user should know (e.g. an ambiguous device order).
    """

    source: str
    assumed: bool
    all_gpus: tuple[Gpu, ...]
    gpus: tuple[Gpu, ...]
    cuda_visible_devices: str | None = None
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data."""
        return plain_record(self)

    @property
    def default(self) -> bool:
        """True for the toy backend's default GPU, assumed because this machine has no nvidia-smi."""
        return self.assumed and self.source == _DEFAULT_SOURCE

    def to_finding(self) -> Finding:
        """The "GPUs" row of the findings table."""
        if not self.gpus:
            return Finding(
                "GPUs", "missing",
                f"nvidia-smi lists {len(self.all_gpus)} GPU(s) but CUDA_VISIBLE_DEVICES="
                f"{self.cuda_visible_devices!r} hides all of them",
                "unset CUDA_VISIBLE_DEVICES or list the GPUs to train on, "
                f"or plan for other hardware with {ASSUME_FORMAT}",
            )
        detail = describe_gpus(self.gpus)
        if self.default:
            return Finding(
                "GPUs", "warning",
                f"assumed, not probed: {detail}, the default GPU, because this machine has no nvidia-smi",
                f"plan for another GPU with {ASSUME_FORMAT}, or run on a machine whose nvidia-smi finds its GPUs",
            )
        if self.assumed:
            return Finding(
                "GPUs", "warning", f"assumed, not probed: {detail}",
                "run the plan again on the training machine so its real GPUs are probed",
            )
        if self.warnings:
            return Finding("GPUs", "warning", f"{detail}; {' '.join(self.warnings)}",
                           "set CUDA_DEVICE_ORDER=PCI_BUS_ID or list GPU UUIDs in CUDA_VISIBLE_DEVICES")
        drivers = sorted({gpu.driver for gpu in self.gpus})
        return Finding("GPUs", "ok", f"{detail}; driver {', '.join(drivers)}")


def cuda_present(env: Mapping[str, str] | None = None) -> bool:
    """Whether this machine can run CUDA work: an NVIDIA driver is loaded and CUDA_VISIBLE_DEVICES hides
    not every GPU. File checks only (no torch, no nvidia-smi): it decides ``--device cpu`` for scripts
    that default to cuda, and holds whatever GPU a plan merely assumed (``--assume-gpu``).
    """
    env = os.environ if env is None else env
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    return Path("/proc/driver/nvidia/version").is_file() or Path("/dev/nvidiactl").exists()


def describe_gpus(gpus: tuple[Gpu, ...] | list[Gpu]) -> str:
    """Group GPUs by model: "2 × NVIDIA H100 80GB HBM3 (81559 MiB)"."""
    groups: dict[tuple[str, int], int] = {}
    for gpu in gpus:
        groups[(gpu.name, gpu.memory_mib)] = groups.get((gpu.name, gpu.memory_mib), 0) + 1
    return " + ".join(f"{count} × {name} ({mib} MiB)" for (name, mib), count in groups.items())


def _resolve_executable(executable: str | None, env: Mapping[str, str]) -> str:
    candidate = nvidia_smi_named(executable, env)
    if candidate is None:
        found = nvidia_smi_on_path(env)
        if found is None:
            raise BadInput("No GPU probe: nvidia-smi is not on PATH", where="PATH", fix=_FIX_SMI)
        return found
    candidate = os.path.expanduser(candidate)
    if os.sep not in candidate:
        found = shutil.which(candidate, path=env.get("PATH"))
        if found is None:
            raise BadInput(f"nvidia-smi executable {candidate!r} is not on PATH", where=candidate,
                           fix=_FIX_SMI)
        return found
    if not os.path.isfile(candidate):
        raise BadInput("nvidia-smi executable does not exist", where=candidate, fix=_FIX_SMI)
    if not os.access(candidate, os.X_OK):
        raise BadInput("nvidia-smi executable is not executable", where=candidate,
                       fix=f"run `chmod +x {candidate}` or {_FIX_SMI}")
    return candidate


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
        raise BadInput(f"{failure}: {_first_line(text)}", where=source, fix=_FIX_SMI)
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
        raise BadInput("nvidia-smi printed no GPU rows", where=source, fix=_FIX_SMI)
    return gpus


def _parse_row(fields: list[str], number: int, line: str, source: str) -> Gpu:
    def bad(why: str) -> BadInput:
        return BadInput(f"nvidia-smi output line {number} is not a GPU record ({why}): {_clip(line)!r}",
                        where=source, fix=_FIX_SMI)

    if len(fields) != 5:
        raise bad(f"expected 5 comma-separated fields, got {len(fields)}")
    index_text, uuid, name, memory_text, driver = fields
    if not index_text.isdigit():
        raise bad(f"index {index_text!r} is not a number")
    if not name or name.lower() in _NOT_AVAILABLE:
        raise bad("no GPU name")
    memory = _MEMORY.match(memory_text)
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


def probe_gpus(executable: str | None = None, env: Mapping[str, str] | None = None,
               timeout: float = 15) -> GpuProbe:
    """Run nvidia-smi and return every GPU it lists plus the ones training will see.

    Args:
        executable: nvidia-smi to run; else ``$LTX_PIPELINE_NVIDIA_SMI``; else ``nvidia-smi`` on PATH.
        env: environment to read (``CUDA_VISIBLE_DEVICES``, ``PATH``...); defaults to ``os.environ``.
        timeout: seconds before nvidia-smi counts as hung.

    Raises:
        BadInput: nvidia-smi is missing, fails, hangs, prints garbage, or CUDA_VISIBLE_DEVICES is wrong.
    """
    env = os.environ if env is None else env
    exe = _resolve_executable(executable, env)
    try:
        # argv list, no shell: the path comes from the user but is never interpreted by a shell.
        done = subprocess.run(  # noqa: S603
            [exe, *NVIDIA_SMI_QUERY], capture_output=True, text=True, errors="replace",
            timeout=timeout, check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise BadInput(f"nvidia-smi did not answer within {timeout:g} s", where=exe, fix=_FIX_SMI) from exc
    except OSError as exc:
        raise BadInput(f"nvidia-smi could not be started: {exc.strerror or exc}", where=exe,
                       fix=_FIX_SMI) from exc
    if done.returncode != 0:
        output = done.stderr + "\n" + done.stdout
        meaning = _known_failure(output) or f"nvidia-smi exited with status {done.returncode}"
        raise BadInput(f"{meaning}: {_first_line(done.stderr, done.stdout)}", where=exe, fix=_FIX_SMI)
    all_gpus = parse_nvidia_smi(done.stdout, source=exe)
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    visible, warnings = filter_visible(all_gpus, cvd, env.get("CUDA_DEVICE_ORDER"))
    return GpuProbe(source=exe, assumed=False, all_gpus=tuple(all_gpus), gpus=tuple(visible),
                    cuda_visible_devices=cvd, warnings=tuple(warnings))


def query_gpus(executable: str | None = None, env: Mapping[str, str] | None = None,
               timeout: float = 15) -> list[Gpu]:
    """The GPUs training will see: ``probe_gpus(...).gpus`` as a list. Raises as ``probe_gpus``."""
    return list(probe_gpus(executable, env, timeout).gpus)


def parse_assumed_gpu(spec: str) -> list[Gpu]:
    """Parse ``--assume-gpu "NAME,MEMORY_MIB[,COUNT]"`` into COUNT assumed GPUs.

    Raises:
        BadInput: the spec does not follow the format, or a number is not a positive integer.
    """
    parts = [part.strip() for part in spec.split(",")]

    def bad(why: str) -> BadInput:
        return BadInput(f"--assume-gpu {spec!r} is not valid: {why}", where="--assume-gpu",
                        fix=f"use {ASSUME_FORMAT}")

    if len(parts) not in (2, 3):
        raise bad(f"expected 2 or 3 comma-separated fields, got {len(parts)}")
    name, memory_text = parts[0], parts[1]
    if not name:
        raise bad("the GPU name is empty")
    memory = _MEMORY.match(memory_text)
    if memory is None or int(memory.group(1)) <= 0:
        raise bad(f"memory {memory_text!r} is not a positive number of MiB (80 GB cards report about 81559)")
    count_text = parts[2] if len(parts) == 3 else "1"
    if not count_text.isdigit() or not 1 <= int(count_text) <= 64:
        raise bad(f"count {count_text!r} is not a whole number from 1 to 64")
    return [Gpu(index=i, uuid=f"ASSUMED-{i}", name=name, memory_mib=int(memory.group(1)),
                driver="assumed", assumed=True) for i in range(int(count_text))]


def assumed_probe(spec: str, *, default: bool = False) -> GpuProbe:
    """A ``GpuProbe`` for ``--assume-gpu`` (or, with ``default``, for ``DEFAULT_ASSUMED_GPU`` on a machine
    with no nvidia-smi): recorded and shown as assumed everywhere."""
    gpus = tuple(parse_assumed_gpu(spec))
    return GpuProbe(source=_DEFAULT_SOURCE if default else "--assume-gpu", assumed=True, all_gpus=gpus, gpus=gpus)


def _nvidia_smi_absent(executable: str | None, env: Mapping[str, str]) -> bool:
    """Nothing names an nvidia-smi (no ``--nvidia-smi``, no ``$LTX_PIPELINE_NVIDIA_SMI``) and none is on PATH.

    An nvidia-smi that is named but broken is not absent: its own error says what is wrong with it.
    """
    return nvidia_smi_named(executable, env) is None and nvidia_smi_on_path(env) is None


def planned_gpu(backend: str, assume_gpu: str | None, nvidia_smi: str | None,
                env: Mapping[str, str] | None = None) -> tuple[str | None, bool]:
    """The GPU a run plans for without probing, as an ``--assume-gpu`` spec, and whether it is the default.

    ``--assume-gpu`` first; else, for the reference backend on a machine with no nvidia-smi,
    ``DEFAULT_ASSUMED_GPU``; else None: the GPUs are probed (or, for ``simulated``, its surface's).

    Args:
        backend: the run's backend name.
        assume_gpu: the request's ``assume_gpu``.
        nvidia_smi: the request's ``nvidia_smi``.
        env: environment to read (``PATH``, ``$LTX_PIPELINE_NVIDIA_SMI``); defaults to ``os.environ``.

    Returns:
        ``(spec or None, True when the spec is the default)``.
    """
    if assume_gpu:
        return assume_gpu, False
    env = os.environ if env is None else env
    if backend in _DEFAULTED_BACKENDS and _nvidia_smi_absent(nvidia_smi, env):
        return DEFAULT_ASSUMED_GPU, True
    return None, False


def check_gpu_probe(backend: str, assume_gpu: str | None, nvidia_smi: str | None,
                    env: Mapping[str, str] | None = None) -> None:
    """Refuse, before a run exists, a request whose GPU probe could not even start.

    A malformed ``--assume-gpu``, or an nvidia-smi that cannot be found or run (nothing is run here:
    only found). With no nvidia-smi at all the reference backend plans for ``DEFAULT_ASSUMED_GPU``;
    the ``ltx`` backend, which trains on the machine's real GPUs, is refused with what to do.

    Raises:
        BadInput: one line: what, where, and the fix (``--assume-gpu``, or the training machine).
    """
    env = os.environ if env is None else env
    spec, _ = planned_gpu(backend, assume_gpu, nvidia_smi, env)
    if spec is not None:
        parse_assumed_gpu(spec)
        return
    if backend == "simulated":
        return  # the surface's GPU is assumed (the probe reads it from the surface file)
    if _nvidia_smi_absent(nvidia_smi, env):
        raise BadInput(f"No GPU to plan for: nvidia-smi is not on PATH, and the {backend} backend plans for "
                       "the training machine's GPUs", where="PATH",
                       fix='pass --assume-gpu "NAME,MEMORY_MIB" (e.g. "NVIDIA H100 80GB HBM3,81559") to plan '
                           "for the GPU you will train on, or run on the training machine")
    _resolve_executable(nvidia_smi, env)
