"""Crashes whose mechanism a library names, though no failure kind fits it: the advice that mechanism implies.

A CUDA kernel fault, a collective that timed out, a full disk, a file-descriptor limit, a media file that does not
decode, an adapter whose target modules match nothing: each has one well-known message (the CUDA runtime's
``cudaGetErrorString`` texts, ProcessGroupNCCL's watchdog, the C library's ``strerror``, FFmpeg's AVERROR_INVALIDDATA,
PIL's ``UnidentifiedImageError``, PEFT's target check), but its cause lies in the code, the data or the machine
alike, so the kind stays ``crash`` (an undecodable media file is a crash: tests/unit/trainer_log/test_missing_media)
and only the advice says what to look at. ``_exceptions`` leaves these to the crash (a ``SafetensorError`` on a
full disk is not a corrupt file). Pure standard library.
"""

from __future__ import annotations

import re

__all__ = ["crash_advice"]

_KERNEL_FAULT = ("A GPU kernel faulted ({evidence}); CUDA reports errors late, so the line that raised may not be the "
                 "one at fault: run again with CUDA_LAUNCH_BLOCKING=1 to stop at the failing kernel. The usual "
                 "causes are a compiled extension built for another torch/CUDA/GPU (flash-attn, xformers, "
                 "bitsandbytes, torch.compile's Triton kernels: train without them to check) or a GPU fault "
                 "(`dmesg | grep -i xid`, `nvidia-smi -q`); update the driver if it is old.")
_DEVICE_ASSERT = ("A check inside a GPU kernel failed ({evidence}): almost always an index out of range (a token id "
                  "past the vocabulary, a class or bucket index, a gather/scatter index). CUDA reports it late: run "
                  "again with CUDA_LAUNCH_BLOCKING=1 (or one step on the CPU) for the real line and message.")
_COLLECTIVE_TIMEOUT = ("The processes stopped meeting at a collective operation ({evidence}): one rank died or fell "
                       "far behind (data loading, validation or checkpoint saving done by one rank only, an exception "
                       "on another rank: read every rank's log, the first error is the cause). NCCL_DEBUG=INFO shows "
                       "the transport; on consumer GPUs without peer-to-peer, NCCL_P2P_DISABLE=1 avoids hangs.")
_DISK_FULL = ("A disk the trainer writes to is full ({evidence}): `df -h` on the output, cache and temp folders "
              "(TMPDIR, ~/.cache/huggingface, the checkpoint folder); free space or point them at a larger disk "
              "(fewer kept checkpoints: checkpoints.keep_last_n), then resume from the newest checkpoint pair.")
_FD_LIMIT = ("The process ran out of file descriptors ({evidence}): raise the limit (`ulimit -n 65536` before "
             "launching; in a container, its nofile ulimit), or lower the DataLoader workers; torch's "
             "DataLoader can also share tensors through files (torch.multiprocessing.set_sharing_strategy"
             "('file_system')).")
_UNDECODABLE = ("A media file is there but does not decode as the reader expects ({evidence}): open the file it "
                "names (`ffprobe <file>`, or PIL for an image); re-encode it (`ffmpeg -i in -c:v libx264 -pix_fmt "
                "yuv420p out.mp4`) or drop it from the dataset. A file whose extension does not match its content "
                "(an upper-case .MP4 read as an image, a cache file read as an image) goes to the wrong decoder: "
                "that is the trainer's listing, not the file.")
_NO_TARGETS = ("The adapter's target modules match no module of the model ({evidence}): the names come from the "
               "trainer's config or its code for this model; use the targets the trainer documents for this model, "
               "and if it worked before, the model or the trainer was updated without the other (install the "
               "versions the trainer pins).")

_CAUSES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"device-side assert(?:ion)? triggered"), _DEVICE_ASSERT),
    (re.compile(r"(?i:an illegal memory access was encountered|misaligned address|unspecified launch failure|"
                r"an illegal instruction was encountered|CUDA error: (?:an )?illegal address)"), _KERNEL_FAULT),
    (re.compile(r"Watchdog caught collective operation timeout|(?i:NCCL (?:communicator was aborted|timeout))"),
     _COLLECTIVE_TIMEOUT),
    (re.compile(r"No space left on device|\[Errno 28\]|StorageFull|Disk quota exceeded|\[Errno 122\]"), _DISK_FULL),
    (re.compile(r"Too many open files|\[Errno 24\]"), _FD_LIMIT),
    (re.compile(r"Invalid data found when processing input|cannot identify image file|Format not recognised|"
                r"moov atom not found|could not find codec parameters"), _UNDECODABLE),
    (re.compile(r"Target modules .{0,400} not found in the base model"), _NO_TARGETS),
)


def crash_advice(message: str) -> str | None:
    """The advice for a crash whose message names its mechanism, else None."""
    for pattern, advice in _CAUSES:
        if pattern.search(message):
            return advice.format(evidence=message.strip())
    return None
