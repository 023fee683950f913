"""Peak GPU and host memory of a running trial, sampled by the engine itself.

Owns ``ResourceSampler``: a background thread that, at least twice a second, reads the memory in
use on the trial's GPUs (NVML through ``pynvml`` when it imports, else ``nvidia-smi
--query-gpu=index,memory.used``) and the resident memory of the trial's process tree (psutil).
The trainer's own figure is an nvidia-smi snapshot every 200 steps (facts 4.4) and misses peaks,
so autotune takes the higher of the two. Peaks are kept per label: the phase switches the label
from ``"validation"`` (load and the step-0 validation, which run before the first step) to
``"training"`` when the trainer reports the validation finished.

A reading at or below ``IDLE_MIB`` is an idle card, not a measurement: no process that trains on
a card reads that low (a CUDA context alone takes a few hundred MiB), while an idle card, or a fake
one, reads 0-a few MiB. Such samples are counted (``idle_samples``) but never become a peak, so a
label with only idle readings has no peak (``None``: "not measured"), never 0.0 GB.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable, Sequence

import psutil

from ltx_pipeline.env_names import NVIDIA_SMI_ENV
from ltx_pipeline.probing.nvidia_smi import nvidia_smi_command

__all__ = ["IDLE_MIB", "NVIDIA_SMI_ENV", "ResourceSampler", "gpu_reader", "nvidia_smi_reader", "nvml_reader",
           "process_tree_rss"]

IDLE_MIB = 32.0  # readings at or below this are an idle (or fake) card, not a trial's memory
MemoryReader = Callable[[], dict[int, float]]  # GPU index -> MiB in use


def nvidia_smi_reader(executable: str | None = None, indices: Sequence[int] = (), timeout_s: float = 5.0
                      ) -> MemoryReader:
    """A reader that runs nvidia-smi once per call (``--nvidia-smi`` or ``$LTX_PIPELINE_NVIDIA_SMI``)."""
    smi = nvidia_smi_command(executable)
    wanted = set(indices)

    def read() -> dict[int, float]:
        done = subprocess.run([smi, "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"],  # noqa: S603
                              capture_output=True, text=True, timeout=timeout_s, check=False)
        if done.returncode != 0:
            return {}
        used: dict[int, float] = {}
        for line in done.stdout.splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) < 2:
                continue
            try:
                index, mib = int(parts[0]), float(parts[1].split()[0])
            except (ValueError, IndexError):
                continue  # "[N/A]" or an odd line: skip this sample, not the sweep
            if not wanted or index in wanted:
                used[index] = mib
        return used

    return read


def nvml_reader(indices: Sequence[int]) -> MemoryReader | None:
    """A reader through NVML, or None when ``pynvml`` is not importable or NVML does not start."""
    try:
        import pynvml  # optional: nvidia-smi is the fallback
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        handles = {i: pynvml.nvmlDeviceGetHandleByIndex(i) for i in indices}
    except Exception:  # noqa: BLE001 - any NVML failure means "use nvidia-smi instead"
        return None

    def read() -> dict[int, float]:
        return {i: pynvml.nvmlDeviceGetMemoryInfo(h).used / 1024**2 for i, h in handles.items()}

    return read


def gpu_reader(indices: Sequence[int], nvidia_smi: str | None = None) -> tuple[MemoryReader, str]:
    """The best reader for these GPUs and its name: NVML when ``pynvml`` starts, else nvidia-smi."""
    nvml = nvml_reader(indices)
    if nvml is not None:
        return nvml, "nvml"
    return nvidia_smi_reader(nvidia_smi, indices), "nvidia-smi"


def process_tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and all its descendants (0 when it is gone)."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return 0
    total = 0
    for proc in procs:
        try:
            total += proc.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return total


class ResourceSampler:
    """Samples GPU memory (when a reader is given) and host RSS of a process tree in a thread.

    Args:
        gpu_reader: returns MiB in use per GPU index; None samples no GPU (reference/simulated).
        pid: the process tree to measure host memory of (set later with ``watch``).
        interval_s: seconds between samples (0.25 s: four samples a second).
        reader_name: how ``gpu_reader`` reads ("nvml" or "nvidia-smi"), for ``source``.
    """

    def __init__(self, gpu_reader: MemoryReader | None = None, pid: int | None = None,
                 interval_s: float = 0.25, reader_name: str | None = None) -> None:
        self.gpu_reader = gpu_reader
        self.pid = pid
        self.interval_s = interval_s
        self.reader_name = reader_name
        self.label = "validation"
        self.gpu_peaks_mib: dict[str, float] = {}
        self.host_peak_bytes = 0
        self.samples = 0
        self.idle_samples: dict[str, int] = {}  # per label: GPU readings at or below IDLE_MIB (not measurements)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def watch(self, pid: int) -> None:
        """Measure host memory of this process tree from now on."""
        self.pid = pid

    def set_label(self, label: str) -> None:
        """Attribute the following samples to ``label`` ("validation" or "training")."""
        with self._lock:
            self.label = label

    def sample(self) -> None:
        """Take one sample now (the thread calls this; tests may too)."""
        used: dict[int, float] = {}
        if self.gpu_reader is not None:
            try:
                used = self.gpu_reader()
            except (OSError, subprocess.SubprocessError):
                used = {}
        rss = process_tree_rss(self.pid) if self.pid else 0
        with self._lock:
            self.samples += 1
            peak = max(used.values()) if used else None
            if peak is not None and peak <= IDLE_MIB:
                self.idle_samples[self.label] = self.idle_samples.get(self.label, 0) + 1
            elif peak is not None:
                self.gpu_peaks_mib[self.label] = max(self.gpu_peaks_mib.get(self.label, 0.0), peak)
            self.host_peak_bytes = max(self.host_peak_bytes, rss)

    @property
    def source(self) -> str:
        """Where this sampler's GPU figures come from, as the reports name it."""
        return f"vram sampler ({self.reader_name})" if self.reader_name else "vram sampler"

    def peak_gb(self, label: str) -> float | None:
        """Peak GPU memory seen under ``label``, in the trainer's GB (MiB / 1024).

        None when no reading above ``IDLE_MIB`` was taken under it: not measured (never 0.0).
        """
        with self._lock:
            mib = self.gpu_peaks_mib.get(label)
        return None if mib is None else mib / 1024

    def missing(self, label: str) -> str:
        """Why ``label`` has no peak, in words (for a trial's reason)."""
        if self.gpu_reader is None:
            return "no GPU memory reader"
        with self._lock:
            idle = self.idle_samples.get(label, 0)
        if idle:
            return f"the {self.source} read only an idle card (at most {IDLE_MIB:g} MiB, {idle} sample(s))"
        return f"the {self.source} got no reading"

    def start(self) -> ResourceSampler:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="resource-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> ResourceSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)
