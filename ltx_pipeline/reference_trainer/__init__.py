"""The reference trainer: a toy-scale trainer with the same contract as ltx-trainer's ``scripts/train.py``.

It is NOT LTX-2 and never claims to be (its start-up output says so). It exists so the engine, the
demo and the tests can run the whole workflow on a laptop or CI box with no GPU and no weights,
against something that really trains: a tiny audio-video transformer whose module names match
LTX-2's LoRA targets, PEFT LoRA, a flow-matching loss on the trainer's ``.pt`` latent formats,
the trainer's log lines, checkpoint names, resume rules and exit codes.

Entry points:
    ``python -m ltx_pipeline.reference_trainer CONFIG [--disable-progress-bars]``  train (exit 0/1)
    ``python -m ltx_pipeline.reference_trainer.preprocess DATASET --resolution-buckets ... ``
    ``python -m ltx_pipeline.reference_trainer.make_base OUT.safetensors [--seed N] [--dim ...]``

Environment variables (knobs the engine passes without touching the trainer's config schema):
    ``LTX_REFERENCE_DEVICE_CAPACITY_MIB``  device capacity in MiB of measured memory (after
        ``LTX_REFERENCE_MEMORY_SCALE``). Going over it raises ``torch.OutOfMemoryError`` ("CUDA out
        of memory. Tried to allocate ...") where it happened: a training step or validation.
        Unset: no limit (CPU) or the real device (CUDA).
    ``LTX_REFERENCE_MEMORY_SCALE``  factor applied to every measured byte count (reports and the
        capacity check), so toy-sized bytes can read as GPU-sized figures. Default 1.
    ``LTX_REFERENCE_LOG_EVERY``  optimizer-step cadence of the ``Step N/M`` lines. Default 20, as
        the trainer.
    ``LTX_REFERENCE_DEVICE``  force ``cpu`` or ``cuda``. Default: CUDA when available, else CPU.
    ``LOCAL_RANK``  as in the trainer: ``[rank N]`` log prefix; only rank 0 logs INFO and writes files.

Memory: on CUDA the allocator's peak (``max_memory_allocated``); on CPU the peak of live tensor
storage bytes counted by a ``TorchDispatchMode`` (``memory.py``), which sees every allocation of
every op. The frozen base is built (and quantized) on the host first, as the trainer does, and
counted from the moment it is "moved to the device". Peaks are also written, in bytes and split
into training and validation, to ``<output_dir>/reference_memory.json``.

Multi-process: ``accelerate launch --multi_gpu --num_processes 2 -m ltx_pipeline.reference_trainer CONFIG
--disable-progress-bars`` runs real DDP; with no CUDA device each rank trains on the CPU over gloo.
(accelerate 1.16's ``--cpu`` flag always picks its single-process launcher, so it starts ONE process.)
On CPU the trainer sets one intra-op thread unless ``OMP_NUM_THREADS`` is set: the toy's ops are tiny.

Media: preprocessing reads the user's clips with PyAV (``ltx.media``: no system ffmpeg), resizes
and centre-crops them to the bucket and encodes them with a toy VAE (``vae.py``: a fixed linear
projection of 4x4-pooled 32x32 patches onto 128 channels, not LTX-2's VAE). Validation decodes the
generated latents with its transpose and writes H.264 samples (``samples/step_NNNNNN_K.mp4``) at
the validation size and frame count. What the LoRA learns therefore comes from the user's frames:
trained on red clips, its samples turn red.
"""
