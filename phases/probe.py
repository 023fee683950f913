"""Probe phase: what this machine, this dataset and these prerequisites are, before any plan.

Read-only: it runs ``nvidia-smi`` (or takes ``--assume-gpu``), classifies the dataset path, looks
for the LTX checkpoint, the Gemma text encoder and the trainer checkout, and reads the host's
disk, /dev/shm, RAM and W&B state. It chooses the VRAM tier and applies the minimum-VRAM gate.
Every finding is stored; nothing is written.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ltx_pipeline.backends.ltx import LtxBackend
from ltx_pipeline.engine import PhaseResult
from ltx_pipeline.engine.fingerprint import digest, file_digest
from ltx_pipeline.env_names import LTX2_ROOT_ENV, MODELS_DIR_ENV, NVIDIA_SMI_ENV
from ltx_pipeline.errors import BadDataset, BadInput, GateStopped
from ltx_pipeline.ltx.modes import get_mode
from ltx_pipeline.ltx.preparation import needs_captions
from ltx_pipeline.ltx.tiers import MINIMUM_GB, classify_tier
from ltx_pipeline.outputs.probe import ClipFrames, ModelFiles, ProbedModels, ProbeOutputs, TierChoice, TrainerRecord
from ltx_pipeline.phase_context import LtxContext
from ltx_pipeline.probing import Finding, to_plain
from ltx_pipeline.probing.dataset import classify_dataset, media_rows, read_clips
from ltx_pipeline.probing.gpus import GpuProbe, assumed_probe, describe_gpus, planned_gpu, probe_gpus
from ltx_pipeline.probing.host import probe_host
from ltx_pipeline.probing.models import check_model_path, default_model_dirs, find_model_files
from ltx_pipeline.probing.trainer_checkout import check_trainer_root
from ltx_pipeline.probing.trainer_python import check_trainer_python
from ltx_pipeline.request import RunRequest
from ltx_pipeline.smoke.finding import smoke_finding, smoke_record_file

__all__ = ["PHASE"]

# Environment that changes what the probe finds (never secrets; W&B is reduced to a boolean).
_ENV_INPUTS = ("CUDA_VISIBLE_DEVICES", NVIDIA_SMI_ENV, LTX2_ROOT_ENV, MODELS_DIR_ENV)
_REQUEST_INPUTS = ("dataset", "mode", "backend", "surface", "assume_gpu", "nvidia_smi", "accept_risk",
                   "trainer_root", "trainer_python", "model_path", "text_encoder_path", "captioner", "vllm_url")


class ProbePhase:
    name = "probe"
    heavy = False
    outputs_type = ProbeOutputs

    def fingerprint(self, ctx: LtxContext) -> dict[str, Any]:
        request = ctx.request
        asked = request.model_dump(mode="json")  # as asked: a resolved default stays None, as it always was
        real_trainer = ctx.backend.capabilities.runs_real_trainer  # only it needs model files and a smoke test
        return {
            "run request": {key: asked[key] for key in _REQUEST_INPUTS},
            "environment": {key: os.environ.get(key) for key in _ENV_INPUTS},
            "dataset": _dataset_digest(Path(request.dataset)),
            # A clip replaced or fixed in place re-reads the clips (size and mtime: stat only, no decode).
            "clips": _clips_digest(Path(request.dataset)) if get_mode(request.mode).video_media else None,
            # The hardware itself: a swapped or re-partitioned GPU must re-plan (cheap: one nvidia-smi call).
            # No nvidia-smi on a reference run: the default GPU's digest, so one appearing on PATH re-plans.
            "gpus": None if _gpus_not_probed(ctx) else digest(to_plain(_gpu_probe(ctx).gpus)),
            **({"model files": _model_files_digest(request)} if real_trainer else {}),
            **({"smoke test": _smoke_digest(ctx)} if real_trainer else {}),
        }

    def run(self, ctx: LtxContext) -> PhaseResult[ProbeOutputs]:
        request = ctx.request
        ctx.narrate("Probing the GPUs, the dataset, the model files and the trainer checkout, so the plan "
                    "fits this machine. Nothing is changed or written.")
        gpu_probe = _gpu_probe(ctx)
        if not gpu_probe.gpus:  # nvidia-smi answered but CUDA_VISIBLE_DEVICES hides every GPU
            raise BadInput("No GPU is visible to training", where="CUDA_VISIBLE_DEVICES",
                           fix='unset CUDA_VISIBLE_DEVICES, or plan for other hardware with --assume-gpu '
                               '"NAME,MEMORY_MIB[,COUNT]"')
        for warning in gpu_probe.warnings:
            ctx.warn(warning)
        tier, nominal = classify_tier([g.memory_mib for g in gpu_probe.gpus])
        gpus_text = describe_gpus(gpu_probe.gpus) + _assumed_note(gpu_probe)
        if tier.below_minimum:
            _minimum_gate(ctx, gpus_text, nominal, request.accept_risk)

        dataset = classify_dataset(Path(request.dataset))
        host = probe_host(ctx.workspace)
        real_trainer = ctx.backend.capabilities.runs_real_trainer
        uses_uv = real_trainer and not request.trainer_python
        findings = [gpu_probe.to_finding(), *host.to_findings(uses_uv=uses_uv), dataset.to_finding()]
        if needs_captions(to_plain(dataset)):
            findings.append(_captioner_finding(request))
        media = media_rows(Path(request.dataset)) if get_mode(request.mode).video_media else []
        frames = _read_clips(ctx, media, request.dataset)
        models, trainer = None, None
        if real_trainer:  # the toy and simulated backends need no model files or checkout
            models = _models(request, findings)
            trainer_check = check_trainer_root(Path(request.trainer_root) if request.trainer_root else None)
            findings.append(trainer_check.to_finding(needs_sync=not request.trainer_python))
            trainer_found = to_plain(trainer_check)
            if request.trainer_python:
                python_check = check_trainer_python(Path(request.trainer_python), trainer_check)
                findings.append(python_check.to_finding())
                trainer_found["python"] = python_check
            trainer = TrainerRecord.model_validate(trainer_found)
            smoke = smoke_finding(ctx.backend, ctx.workspace, request.mode) \
                if isinstance(ctx.backend, LtxBackend) else None
            if smoke is not None:
                findings.append(smoke)
        return PhaseResult(ProbeOutputs(
            gpus=gpu_probe, gpu_count=len(gpu_probe.gpus), gpu_summary=gpus_text, assumed_gpu=gpu_probe.assumed,
            tier=TierChoice.model_validate({"key": tier.key, "name": tier.name, "base": tier.base,  # base: checked
                                            "nominal_gb": nominal, "accepted_risk": tier.below_minimum}),
            host=host, dataset=dataset, clip_frames=frames, models=models, trainer=trainer, findings=tuple(findings)))

    def summary(self, outputs: ProbeOutputs) -> str:
        missing = sum(1 for f in outputs.findings if f.status == "missing")
        return (f"{outputs.gpu_summary} -> {outputs.tier.name}; dataset: {outputs.dataset.kind}; "
                f"{missing} prerequisite(s) missing")


def _smoke_digest(ctx: LtxContext) -> str | None:
    """The smoke record of this checkout + environment (a smoke test run since re-probes and lifts its blocker)."""
    if not isinstance(ctx.backend, LtxBackend):
        return None
    record = smoke_record_file(ctx.backend, ctx.workspace, ctx.request.mode)
    return file_digest(record) if record is not None and record.is_file() else None


def _gpus_not_probed(ctx: LtxContext) -> bool:
    return bool(ctx.request.assume_gpu) or ctx.backend.capabilities.simulated_gpu is not None


def _gpu_probe(ctx: LtxContext) -> GpuProbe:
    """nvidia-smi, or the assumed GPU, or the simulated backend's surface GPU (shown as assumed), or, for
    the reference backend on a machine with no nvidia-smi, the default GPU (shown as assumed, saying why)."""
    request = ctx.request
    if request.assume_gpu:
        return assumed_probe(request.assume_gpu)
    if (simulated := ctx.backend.capabilities.simulated_gpu) is not None:
        return assumed_probe(simulated)
    spec, default = planned_gpu(request.backend, None, request.nvidia_smi)
    if spec is not None:
        return assumed_probe(spec, default=default)
    return probe_gpus(request.nvidia_smi)


def _assumed_note(gpu_probe: GpuProbe) -> str:
    """How the GPU summary (plan.md's Hardware section, ``status``) says the GPUs were not probed."""
    if not gpu_probe.assumed:
        return ""
    if gpu_probe.default:
        return " (assumed: this machine has no nvidia-smi; choose another with --assume-gpu)"
    return " (assumed)"


def _minimum_gate(ctx: LtxContext, gpus_text: str, nominal: int, accept_risk: bool) -> None:
    message = (f"{gpus_text} has {nominal} GB per GPU. The LTX-2 trainer documents 80 GB recommended and "
               f"the official workflow a {MINIMUM_GB} GB minimum; no tested config exists below it")
    if not accept_risk:
        raise GateStopped(message, where="probe",
                          fix="(a) abort (default), or (b) re-run with --accept-risk to try the low-VRAM "
                              "config at your own risk")
    ctx.warn(message + ". Continuing on the low-VRAM config because --accept-risk was given.")


def _captioner_finding(request: RunRequest) -> Finding:
    """Whether the captioner the run will use (the request's, its default resolved there) can run here, with the
    exact command that makes it so."""
    from ltx_pipeline.captioning import captioner_availability

    found = captioner_availability(request.captioner,
                                   trainer_root=Path(request.trainer_root) if request.trainer_root else None,
                                   vllm_url=request.vllm_url, env=os.environ, trainer_python=request.trainer_python)
    return Finding("Captioner", "ok" if found.ok else "missing", found.detail, found.fix)


def _read_clips(ctx: LtxContext, media: list[tuple[int | None, Path]], dataset: str) -> ClipFrames:
    """Every clip's facts (PyAV), for the plan's bucket check and the data check's spreads.

    A clip that is missing or cannot be read is bad input: the run stops here, before the plan,
    naming each file with its row (the first 10, then how many more).
    """
    if not media:
        return ClipFrames()  # stored as {}, as it always was
    many = len(media) > 50
    if many:
        ctx.narrate(f"Reading {len(media)} clips (frames, fps, size, audio)...")
    watched = ctx.reporter.shows_progress  # the CLI's progress bar; narrated every tenth without one
    step = max(50, len(media) // 10)

    def progress(done: int, total: int) -> None:
        if not many:
            return
        if watched:
            ctx.reporter.on_count("reading clips", done, total)
        elif done % step == 0 or done == total:
            ctx.narrate(f"  {done}/{total} clips read")

    report = read_clips(media, on_progress=progress, cache=ctx.journal)
    if report.from_cache:
        ctx.narrate(f"{report.from_cache} of {len(media)} clip(s) unchanged since they were last read (same size "
                    "and modification time): their facts came from the workspace's store.")
    if report.unreadable:
        items = sorted(report.unreadable.items(), key=lambda item: (item[1]["row"] or 0, item[0]))
        lines = [f"row {v['row']}: {path}: {v['reason']}" if v["row"] else f"{path}: {v['reason']}"
                 for path, v in items[:10]]
        if len(items) > 10:
            lines.append(f"... and {len(items) - 10} more")
        raise BadDataset(f"{len(items)} of {len(media)} media file(s) cannot be used:\n  " + "\n  ".join(lines),
                         where=dataset, fix="replace or remove those files (or their rows), then run again")
    return ClipFrames.model_validate(report.to_dict())


def _models(request: RunRequest, findings: list[Finding]) -> ProbedModels:
    """The model search, the check of each model path, and ``files``: the files chosen to train with.

    ``files`` is ``{"checkpoint": abs path | None, "text_encoder": abs path | None, "searched":
    [folders as labelled in messages]}``; a path is None unless it passed the content checks.
    ``checkpoint_path``/``text_encoder_path`` stay the values later phases use (given or found).
    """
    search = find_model_files(default_model_dirs(os.environ, Path.home()), os.environ)
    checks = {"checkpoint": check_model_path(request.model_path, "checkpoint", search),
              "text_encoder": check_model_path(request.text_encoder_path, "text_encoder", search)}
    findings.extend(c.to_finding() for c in checks.values())
    files = ModelFiles(**{kind: check.path if check.usable else None for kind, check in checks.items()},
                       searched=tuple(search.labels))
    return ProbedModels(search=search, checkpoint=checks["checkpoint"], text_encoder=checks["text_encoder"],
                        checkpoint_path=checks["checkpoint"].value, text_encoder_path=checks["text_encoder"].value,
                        files=files)


def _model_files_digest(request: RunRequest) -> str:
    """Sizes and mtimes of the given model paths and of the model folders two levels deep (stat only).

    A fixed ``config.json`` or a finished download changes it, so the probe runs again on resume.
    """
    listing: list[tuple[str, int | None, int | None]] = []

    def add(path: Path) -> None:
        try:
            stat = path.stat()
            listing.append((str(path), stat.st_size, stat.st_mtime_ns))
        except OSError:
            listing.append((str(path), None, None))

    for given in (request.model_path, request.text_encoder_path):
        if given:
            add(Path(given).expanduser())
            add(Path(given).expanduser() / "config.json")
    level = default_model_dirs(os.environ, Path.home())
    for depth in range(3):  # the folders themselves, then two levels of entries (as the search goes)
        next_level: list[Path] = []
        for path in level:
            add(path)
            if path.is_dir():
                add(path / "config.json")
                if depth < 2:
                    try:
                        next_level += sorted(path.iterdir())
                    except OSError:
                        pass
        level = next_level
    return digest(listing)


def _clips_digest(path: Path) -> str:
    listing: list[tuple[str, int | None, int | None]] = []
    try:
        rows = media_rows(path)
    except (OSError, ValueError, BadInput):  # the dataset check reports it
        return "unreadable"
    for _, clip in rows:
        try:
            stat = clip.stat()
            listing.append((str(clip), stat.st_size, stat.st_mtime_ns))
        except OSError:
            listing.append((str(clip), None, None))
    return digest(listing)


def _dataset_digest(path: Path) -> str:
    """A metadata file's content, or a folder's listing (names, sizes, mtimes), as a digest."""
    if path.is_file():
        return file_digest(path)
    if not path.is_dir():
        return "missing"
    listing = []
    for entry in sorted(path.rglob("*"))[:20000]:
        if entry.is_file():
            stat = entry.stat()
            listing.append((str(entry.relative_to(path)), stat.st_size, int(stat.st_mtime)))
    return digest(listing)


PHASE = ProbePhase()
