"""The training run: set-up, the step loop, validation and checkpoint cadence, final statistics.

Owns the order of events of ltx-trainer's ``LtxvTrainer`` (facts §3.5, §4): load (and quantize)
the frozen base on the host, add LoRA, resolve and load ``model.load_checkpoint``, move to the
device (metering starts), optimizer and scheduler, restore the state, data, write
``training_config.yaml``, the step-0 validation, then optimizer steps with the trainer's
``Step N/M`` lines, validation every ``validation.interval``, a checkpoint every
``checkpoints.interval`` and always at the end, and the ``📊 Training Statistics`` block.
Multi-process runs go through ``accelerate`` (DDP; gloo on CPU); only the main process writes.
"""

from __future__ import annotations

import json
import logging
import os
import time
from itertools import count
from pathlib import Path

import torch
import yaml

from ltx_pipeline.env_names import REFERENCE_DEVICE_ENV
from ltx_pipeline.reference_trainer import checkpoints as ckpt
from ltx_pipeline.reference_trainer.data import PrecomputedSamples, caption_salt
from ltx_pipeline.reference_trainer.flow import modalities_of
from ltx_pipeline.reference_trainer.logs import get_logger, is_main_process, is_writer
from ltx_pipeline.reference_trainer.loop import StepLoop
from ltx_pipeline.reference_trainer.lora import add_lora
from ltx_pipeline.reference_trainer.memory import GIB, DeviceMemory, capacity_from_env, memory_scale_from_env
from ltx_pipeline.reference_trainer.model import load_base, read_architecture
from ltx_pipeline.reference_trainer.optim import build_optimizer, build_scheduler
from ltx_pipeline.reference_trainer.quantize import quantize_frozen
from ltx_pipeline.workspace import atomic_write

# bitsandbytes (imported for adamw8bit only) tries to fetch a Hub kernel for 4-bit CPU matmuls on
# AVX512-BF16 CPUs and logs "Failed to load CPU gemm_4bit_forward" when it cannot. This trainer never runs
# 4-bit layers, so that line would only be a false alarm in train.log.
logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(logging.ERROR)

__all__ = ["train"]

DISCLAIMER = "ltx-pipeline reference trainer: a toy-scale stand-in that honours ltx-trainer's contract. NOT LTX-2."
_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def _device() -> torch.device:
    forced = os.environ.get(REFERENCE_DEVICE_ENV, "").strip()
    if forced:
        return torch.device(forced)
    if torch.cuda.is_available():
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return torch.device("cpu")


def _print_config(config, arch) -> None:  # noqa: ANN001
    print(f"⚙️  Training Configuration  ({DISCLAIMER})")
    print(f"  🎬 Model: {config.model.model_path} (toy: {arch.layers} blocks, dim {arch.dim}), "
          f"mode {config.model.training_mode}")
    o = config.optimization
    print(f"  ⚡ Optimization: {o.optimizer_type}, lr {o.learning_rate}, steps {o.steps}, batch {o.batch_size}, "
          f"accumulation {o.gradient_accumulation_steps}, scheduler {o.scheduler_type}, "
          f"gradient checkpointing {o.enable_gradient_checkpointing}")
    a = config.acceleration
    print(f"  🚀 Acceleration: mixed precision {a.mixed_precision_mode}, quantization {a.quantization}")
    print(f"  🎥 Validation: {len(config.validation.samples)} samples, interval {config.validation.interval}, "
          f"dims {tuple(config.validation.video_dims)}", flush=True)


def _build_model(config, logger):  # noqa: ANN001, ANN202
    mode = config.model.training_mode
    mixed = config.acceleration.mixed_precision_mode
    dtype = torch.float32 if mode == "full" else _DTYPES.get(mixed or "no", torch.float32)
    model = load_base(Path(config.model.model_path), dtype)
    model.requires_grad_(mode == "full")
    if config.acceleration.quantization:
        if mode == "full":
            raise ValueError("Quantization is not supported in full training mode.")
        logger.info(f'Quantizing model with "{config.acceleration.quantization}". This may take a while...')
        quantize_frozen(model, config.acceleration.quantization)
    if mode == "lora":
        lora = config.lora
        add_lora(model, lora.rank, lora.alpha, lora.dropout, lora.target_modules)
    return model


def _base(model: torch.nn.Module) -> torch.nn.Module:
    return getattr(model, "module", model)  # DDP


def _loader(dataset, config, num_processes: int, rank: int):  # noqa: ANN001, ANN202
    sampler = None
    if num_processes > 1:
        sampler = torch.utils.data.DistributedSampler(dataset, num_processes, rank, shuffle=True,
                                                      seed=config.seed, drop_last=True)
    workers = config.data.num_dataloader_workers
    return torch.utils.data.DataLoader(dataset, batch_size=config.optimization.batch_size, shuffle=sampler is None,
                                       sampler=sampler, drop_last=True, num_workers=workers,
                                       persistent_workers=workers > 0)


def _batches(loader):  # noqa: ANN001, ANN202
    for epoch in count():
        if hasattr(loader.sampler, "set_epoch"):
            loader.sampler.set_epoch(epoch)
        empty = True
        for batch in loader:
            empty = False
            yield batch
        if empty:
            raise StopIteration("The dataset holds fewer samples than batch_size x processes")


def train(config, disable_progress_bars: bool) -> None:  # noqa: ANN001 - mirrors the trainer's flow
    """Run the whole training described by a validated ``LtxTrainerConfig``."""
    from accelerate import Accelerator
    from accelerate.utils import DistributedDataParallelKwargs

    logger = get_logger()
    arch = read_architecture(Path(config.model.model_path))
    _announce(config, arch, logger)
    modalities = modalities_of(config.training_strategy)
    salt = caption_salt(arch)
    # The LoRA's starting weights come from the config's seed too (ltx-trainer draws them unseeded): the same
    # config then trains the same run, and a demo's figures do not hang on a random start.
    torch.manual_seed(config.seed)
    model = _build_model(config, logger)
    device = _device()
    if device.type == "cpu" and "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)  # the toy's ops are far too small to gain from intra-op threads
    accelerator = Accelerator(cpu=device.type == "cpu",
                              kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)])
    nproc, rank = accelerator.num_processes, accelerator.process_index
    if nproc > 1:
        batch = config.optimization.batch_size
        logger.info(f"{accelerator.distributed_type.value} distributed training enabled with {nproc} processes")
        logger.info(f"Local batch size: {batch}, global batch size: {batch * nproc}")
    state = _load_checkpoint(model, config)
    _base(model).gradient_checkpointing = config.optimization.enable_gradient_checkpointing
    memory = DeviceMemory(device, capacity_from_env(), memory_scale_from_env())
    output_dir = Path(config.output_dir)
    started = time.time()
    status = "failed"
    try:
        with memory.metering():
            model, optimizer, scheduler, initial_step = _prepare(model, memory, config, state, accelerator, logger)
            batches = _data(config, modalities, nproc, rank, logger)
            _before_first_step(config, output_dir, initial_step, disable_progress_bars, logger)
            loop = StepLoop(config, model, optimizer, scheduler, memory, accelerator, modalities, device, arch,
                            salt, output_dir, initial_step, started, disable_progress_bars)
            if config.validation.interval and not config.validation.skip_initial_validation:
                loop.validate(initial_step)
            loop.run(batches)
            loop.save_checkpoint(final=True)
        loop.report()
        status = "completed"
    except torch.OutOfMemoryError:
        status = f"out of memory during {memory.oom_phase or memory.phase}"
        raise
    finally:
        if is_writer() and output_dir.is_dir():
            report = {"status": status, "device": device.type, "scale": memory.scale,
                      "capacity_bytes": memory.capacity, "peak_bytes": memory.peaks}
            atomic_write(output_dir / "reference_memory.json", json.dumps(report, indent=2))


def _announce(config, arch, logger) -> None:  # noqa: ANN001
    """The configuration block (main process only), the disclaimer, and the validation prompts' embedding."""
    if is_main_process():
        _print_config(config, arch)
    logger.info(DISCLAIMER)
    if config.validation.samples:
        logger.info(f"Pre-computing embeddings for {len(config.validation.samples)} validation prompts...")


def _load_checkpoint(model, config):  # noqa: ANN001, ANN202
    """Load ``model.load_checkpoint``'s weights into ``model``; return its training state to restore (or None)."""
    weights = ckpt.resolve_checkpoint(config.model.load_checkpoint)
    if weights is None:
        return None
    ckpt.load_weights(model, weights, config.model.training_mode)
    return ckpt.load_state(weights, ckpt.fingerprint(config), config.checkpoints.no_resume)


def _prepare(model, memory, config, state, accelerator, logger):  # noqa: ANN001, ANN202
    """The model on the device (metered), the optimizer and scheduler, the restored step; DDP-wrapped if several."""
    from accelerate.utils import set_seed

    o = config.optimization
    model.to(memory.device)
    memory.track_module(model)
    trainable = [p for p in model.parameters() if p.requires_grad]
    logger.debug(f"Trainable params count: {sum(p.numel() for p in trainable):,}")
    logger.debug(f"GPU memory usage after models preparation: {memory.in_use() / GIB:.2f} GB")
    set_seed(config.seed)
    logger.debug(f"Process {accelerator.process_index} using seed: {config.seed}")
    optimizer = build_optimizer(o.optimizer_type, trainable, o.learning_rate)
    scheduler = build_scheduler(o.scheduler_type, o.scheduler_params, optimizer, o.steps)
    initial_step = 0
    if state is not None and ckpt.restore_state(state, optimizer, scheduler, accelerator.num_processes):
        initial_step = state["global_step"]
    if accelerator.num_processes > 1:
        model = accelerator.prepare_model(model)
    return model, optimizer, scheduler, initial_step


def _data(config, modalities, nproc: int, rank: int, logger):  # noqa: ANN001, ANN202
    """The endless batches of the preprocessed samples this process trains on."""
    from ltx_pipeline.ltx.trainer_config import data_sources

    sources = data_sources(config)
    dataset = PrecomputedSamples(config.data.preprocessed_data_root, sources)
    logger.debug(f"Loaded dataset with {len(dataset):,} samples from sources: {list(sources)}")
    audio = any(m.kind == "audio" for m in modalities)
    flag = "enabled 🔈" if audio else "disabled 🔇"
    logger.debug(f"🎯 Using FlexibleStrategy training strategy (audio {flag})")
    return _batches(_loader(dataset, config, nproc, rank))


def _before_first_step(config, output_dir: Path, initial_step: int, disable_progress_bars: bool,  # noqa: ANN001
                       logger) -> None:  # noqa: ANN001
    """Save ``training_config.yaml`` (the writer only) and say where training starts; refuse nothing left to do."""
    steps = config.optimization.steps
    if is_writer():
        output_dir.mkdir(parents=True, exist_ok=True)
        dump = yaml.dump(config.model_dump(), default_flow_style=False, indent=2)
        atomic_write(output_dir / "training_config.yaml", dump)
        logger.info("💾 Training configuration saved to: training_config.yaml")
    if disable_progress_bars:
        logger.warning("Progress bars disabled. Intermediate status messages will be logged instead.")
    if steps - initial_step <= 0:
        raise ValueError(f"No remaining training steps: initial_step={initial_step} >= "
                         f"target_steps={steps}. Nothing to train.")
    if initial_step:
        logger.info(f"🚀 Resuming training from step {initial_step} → {steps}")
    else:
        logger.info("🚀 Starting training...")
