"""``diagnose`` knows the libraries' own exception vocabulary, not one thread's phrases (issue 43, point 10).

Each line is written from the message format in the library's source (named beside it), not from a user's log:
torch (MapAllocator, TCPStore, ProcessGroupNCCL, the CUDA runtime's error strings, torch._inductor), numpy,
huggingface_hub and transformers, xformers, flash-attn, bitsandbytes, DeepSpeed's op builder, torchaudio, PIL, PyAV,
the schema and parser libraries, the C library's errno strings and SLURM's slurmstepd/srun. A log is read as
``diagnose LOG`` reads it: no exit status, the exception at the end of a traceback.
"""

from __future__ import annotations

import pytest

from ltx_pipeline.trainer_log import classify_failure

_TRACEBACK = ["Traceback (most recent call last):", '  File "/app/train.py", line 412, in <module>', "    main()"]


def _read(*lines: str, exit_code: int | None = None, signal: int | None = None):
    return classify_failure(exit_code, signal, _TRACEBACK + list(lines))


# (id, the exception line, its kind, a piece of the advice that mechanism implies)
KINDS = [
    # What an OS or a tool leaves in a data folder, read as a sample: Jupyter's checkpoints folder (IsADirectoryError,
    # strerror EISDIR), a macOS AppleDouble file (PIL's UnidentifiedImageError "cannot identify image file %r").
    ("debris-ipynb-checkpoints", "IsADirectoryError: [Errno 21] Is a directory: '/data/reg/.ipynb_checkpoints'",
     "dataset_error", "not a sample"),
    ("debris-appledouble", "PIL.UnidentifiedImageError: cannot identify image file '/data/train/._0001.png'",
     "dataset_error", "macOS's ._ files"),
    # numpy/core/_exceptions.py: _ArrayMemoryError, "Unable to allocate {size} for an array with shape {shape} ...".
    ("numpy-array-memory", "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 12.0 GiB for an array with "
     "shape (49, 3, 1080, 1920) and data type float32", "host_oom", "The host (CPU) ran out of memory"),
    # torch/csrc/distributed/c10d/TCPStore / socket.cpp: the rendezvous port is taken (EADDRINUSE).
    ("torch-port-in-use", "RuntimeError: The server socket has failed to listen on any local network address. The "
     "server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).", "config_error",
     "rendezvous port is taken"),
    ("torch-dist-network-error", "torch.distributed.DistNetworkError: The server socket has failed to listen on any "
     "local network address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in "
     "use", "config_error", "main_process_port"),
    # torch/distributed/rendezvous.py: _env_rendezvous_handler's _env_error.
    ("torch-env-rendezvous", "ValueError: Error initializing torch.distributed using env:// rendezvous: environment "
     "variable RANK expected, but not set", "config_error", "`accelerate launch` or `torchrun`"),
    # The CUDA runtime's cudaErrorInvalidDevice text, as c10's CUDA check raises it.
    ("cuda-invalid-device-ordinal", "RuntimeError: CUDA error: invalid device ordinal", "config_error",
     "GPU index this machine does not show"),
    # huggingface_hub/utils/_validators.py validate_repo_id: a path that is no folder is read as a repo id.
    ("hub-repo-id-validation", "huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' "
     "or 'namespace/repo_name': '/workspace/models/LTX-2'. Use `repo_type` argument if needed.", "missing_files",
     "not an existing folder"),
    # transformers/utils/hub.py cached_files: a gated repo without access.
    ("transformers-gated-repo", "OSError: You are trying to access a gated repo.", "missing_files", "gated repo"),
    # huggingface_hub file_download.py: LocalEntryNotFoundError when offline and not cached.
    ("hub-offline-not-cached", "huggingface_hub.errors.LocalEntryNotFoundError: Cannot find an appropriate cached "
     "snapshot folder for the specified revision on the local disk and outgoing traffic has been disabled. To enable "
     "repo look-ups and downloads online, pass 'local_files_only=False' as input.", "missing_files",
     "downloads are turned off"),
    # requests/urllib3: the Hub's host not reachable.
    ("hub-unreachable", "requests.exceptions.ConnectionError: (MaxRetryError(\"HTTPSConnectionPool("
     "host='huggingface.co', port=443): Max retries exceeded with url: /Lightricks/LTX-2/resolve/main/"
     "model_index.json (Caused by "
     "NameResolutionError(\\\"Failed to resolve 'huggingface.co' ([Errno -3] Temporary failure in name resolution)"
     "\\\"))\"), '(Request ID: 1b2c)')", "missing_files", "Hub could not be reached"),
    # transformers/utils/import_utils.py _LazyModule._get_module.
    ("transformers-lazy-import", "RuntimeError: Failed to import transformers.models.gemma3.modeling_gemma3 because "
     "of the following error (look up to see its traceback):", "dependency_error", "install the versions the trainer"),
    # xformers/ops/fmha/dispatch.py: no operator for these inputs (GPU generation, dtype, build).
    ("xformers-no-operator", "NotImplementedError: No operator found for `memory_efficient_attention_forward` with "
     "inputs:", "dependency_error", "torch's own SDPA attention"),
    # flash-attn csrc/flash_attn/flash_api.cpp: TORCH_CHECK(is_sm8x, ...).
    ("flash-attn-arch", "RuntimeError: FlashAttention only supports Ampere GPUs or newer.", "dependency_error",
     "Ampere or newer"),
    # numpy 2's import of a module compiled for numpy 1 (the C-API table it looks for).
    ("numpy-abi-array-api", "AttributeError: _ARRAY_API not found", "dependency_error", "numpy<2"),
    ("numpy-abi-dtype-size", "ValueError: numpy.dtype size changed, may indicate binary incompatibility. Expected 96 "
     "from C header, got 88 from PyObject", "dependency_error", "numpy<2"),
    # deepspeed op_builder/builder.py installed_cuda_version.
    ("deepspeed-cuda-home", "op_builder.builder.MissingCUDAException: CUDA_HOME does not exist, unable to compile "
     "CUDA op(s)", "dependency_error", "CUDA_HOME"),
    # torchaudio's dispatcher (_backend/utils.py get_load_func / get_save_func).
    ("torchaudio-no-backend", "RuntimeError: Couldn't find appropriate backend to handle uri /data/audio/clip_001.wav "
     "and format None.", "dependency_error", "pip install soundfile"),
    # The CUDA runtime's cudaErrorDevicesUnavailable text.
    ("cuda-devices-busy", "RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable",
     "dependency_error", "exclusive-process compute mode"),
    # accelerate/state.py: fp16 without a CUDA device.
    ("accelerate-fp16-no-gpu", "ValueError: fp16 mixed precision requires a GPU (not 'mps').", "dependency_error",
     "torch sees no usable CUDA GPU"),
    # bitsandbytes cuda_setup (0.41-0.42): the CUDA library it loads is not found.
    ("bitsandbytes-cuda-setup", "RuntimeError: CUDA Setup failed despite GPU being available. Please run the "
     "following command to get more information:", "dependency_error", "-m bitsandbytes"),
    # PIL/Image.py _decompression_bomb_check: DecompressionBombError above twice MAX_IMAGE_PIXELS.
    ("pil-decompression-bomb", "PIL.Image.DecompressionBombError: Image size (400000000 pixels) exceeds limit of "
     "178956970 pixels, could be decompression bomb DOS attack.", "dataset_error", "downscale it"),
    # The C library's EACCES, as Python's OSError subclass prints it.
    ("errno-13-permission", "PermissionError: [Errno 13] Permission denied: '/workspace/outputs/checkpoints'",
     "missing_files", "not accessible to its user"),
    # json.decoder, PyYAML's constructor, omegaconf's errors.
    ("json-decode", "json.decoder.JSONDecodeError: Expecting ',' delimiter: line 12 column 5 (char 287)",
     "config_error", "line and column"),
    ("yaml-constructor", "yaml.constructor.ConstructorError: could not determine a constructor for the tag "
     "'tag:yaml.org,2002:python/tuple'", "config_error", "does not parse"),
    ("omegaconf-type", "omegaconf.errors.ConfigTypeError: Cannot merge DictConfig with ListConfig", "config_error",
     "config or command line was refused"),
]


@pytest.mark.parametrize(("line", "kind", "advice"), [case[1:] for case in KINDS], ids=[case[0] for case in KINDS])
def test_a_library_exception_gets_its_kind_and_the_advice_its_mechanism_implies(line: str, kind: str,
                                                                                  advice: str) -> None:
    failure = _read(line)
    assert failure.kind == kind, failure
    assert failure.evidence == line
    assert advice in failure.fix[0].reason


# (id, the exception line, a piece of the advice): known mechanisms whose cause may lie in the code, the data or the
# machine, so the kind stays crash (tests/unit/trainer_log/test_missing_media keeps undecodable media a crash).
CRASHES = [
    # CUDA runtime error strings (cudaErrorAssert, cudaErrorIllegalAddress, cudaErrorMisalignedAddress).
    ("cuda-device-assert", "RuntimeError: CUDA error: device-side assert triggered", "index out of range"),
    ("cuda-illegal-memory", "RuntimeError: CUDA error: an illegal memory access was encountered",
     "CUDA_LAUNCH_BLOCKING=1"),
    ("cuda-misaligned", "RuntimeError: CUDA error: misaligned address", "A GPU kernel faulted"),
    # ProcessGroupNCCL.cpp's watchdog: "[Rank N] Watchdog caught collective operation timeout: ... ran for ...".
    ("nccl-watchdog", "RuntimeError: [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1207, "
     "OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600045 milliseconds before timing out.", "every rank's log"),
    # ENOSPC, from Python's OSError and from safetensors' Rust io::Error when writing a checkpoint.
    ("errno-28-disk-full", "OSError: [Errno 28] No space left on device", "`df -h`"),
    ("safetensors-write-disk-full", "safetensors_rust.SafetensorError: Error while serializing: IoError(Os { code: 28, "
     "kind: StorageFull, message: \"No space left on device\" })", "disk the trainer writes to is full"),
    # EMFILE, and torch's DataLoader wording of it.
    ("errno-24-open-files", "OSError: [Errno 24] Too many open files: '/data/clips/0001.mp4'", "ulimit -n"),
    ("torch-dataloader-open-files", "RuntimeError: Too many open files. Communication with the workers is no longer "
     "possible. Please increase the limit using `ulimit -n` in the shell or change the sharing strategy by calling "
     "`torch.multiprocessing.set_sharing_strategy('file_system')` at the beginning of your code", "file descriptors"),
    # PIL's UnidentifiedImageError, PyAV's InvalidDataError (FFmpeg's AVERROR_INVALIDDATA).
    ("pil-unidentified", "PIL.UnidentifiedImageError: cannot identify image file '/data/images/0001.png'",
     "does not decode"),
    ("pyav-invalid-data", "av.error.InvalidDataError: [Errno 1094995529] Invalid data found when processing input: "
     "'/data/clips/0001.mp4'", "ffprobe"),
    # peft/tuners/tuners_utils.py inject_adapter: no target module matched.
    ("peft-no-target", "ValueError: Target modules {'attn1.to_q', 'attn1.to_k'} not found in the base model. Please "
     "check the target modules and try again.", "target modules match no module"),
]


@pytest.mark.parametrize(("line", "advice"), [case[1:] for case in CRASHES], ids=[case[0] for case in CRASHES])
def test_a_known_crash_mechanism_stays_a_crash_with_its_own_advice(line: str, advice: str) -> None:
    failure = _read(line)
    assert failure.kind == "crash"
    assert failure.evidence == line
    [step] = failure.fix
    assert not step.reason.startswith("Unclassified")
    assert advice in step.reason


def test_safetensors_reading_a_cut_file_is_still_a_file_that_is_not_whole() -> None:
    # The same exception type on a full disk (above) is a crash: the message, not the type, decides.
    failure = _read("safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer")
    assert failure.kind == "missing_files"
    assert "not whole" in failure.fix[0].reason
    disk = _read("safetensors_rust.SafetensorError: Error while serializing: IoError(Os { code: 28, kind: "
                 "StorageFull, message: \"No space left on device\" })")
    assert disk.kind == "crash"


def test_torch_shared_memory_full_is_a_shared_memory_failure() -> None:
    # aten/src/ATen/MapAllocator.cpp: "unable to write to file <%s>: %s (%d)" for the /torch_<pid>_... shm file.
    failure = _read("RuntimeError: unable to write to file </torch_4312_2983595444_0>: No space left on device (28)")
    assert failure.kind == "shm_bus_error"
    assert failure.fix[0].path == "data.num_dataloader_workers"


def test_triton_missing_asks_for_triton_not_a_cache_deletion() -> None:
    # torch/_inductor/exc.py TritonMissing; a corrupt cache is another failure with another fix.
    failure = _read("torch._inductor.exc.TritonMissing: Cannot find a working triton installation. Either the package "
                    "is not installed or it is too old.")
    assert failure.kind == "dependency_error"
    assert "install the triton version torch pins" in failure.fix[0].reason
    assert "delete the caches" not in failure.fix[0].reason


@pytest.mark.parametrize("line", [
    # slurmstepd (task/cgroup): 21.08+ and before.
    "slurmstepd: error: Detected 1 oom_kill event in StepId=4197661.batch. Some of the step tasks have been OOM "
    "Killed.",
    "slurmstepd: error: Detected 1 oom-kill event(s) in step 50574351.batch cgroup. Some of your processes may have "
    "been killed by the cgroup out-of-memory handler.",
    # srun's report of the task; "Out Of Memory" is the job's RAM here, not the GPU's.
    "srun: error: gpu-node-07: task 0: Out Of Memory",
    "slurmstepd: error: StepId=7.batch exceeded memory limit (734003200 > 52428800), being killed",
])
def test_slurm_cgroup_oom_is_host_memory_with_the_job_memory_fix(line: str) -> None:
    failure = classify_failure(None, None, ["INFO     Step 40/1000 - Loss: 0.2207, LR: 1.00e-04, Time/Step: 3.11s, "
                                            "Total Time: 0h 52m", line])
    assert failure.kind == "host_oom"
    assert failure.evidence == line
    assert "#SBATCH --mem=" in failure.fix[0].reason


def test_slurm_time_limit_is_killed_by_the_scheduler_with_the_resume_fix() -> None:
    line = "slurmstepd: error: *** JOB 10711368 ON gpu-node-07 CANCELLED AT 2026-09-30T16:00:24 DUE TO TIME LIMIT ***"
    failure = classify_failure(None, None, ["INFO     Step 900/3000 - Loss: 0.1812", line])
    assert failure.kind == "killed"
    assert failure.evidence == line  # the stars are SLURM's, not markdown bold
    assert "time limit" in failure.fix[0].reason and "#SBATCH --time=" in failure.fix[0].reason
    with_signal = classify_failure(None, 9, ["INFO     Step 900/3000 - Loss: 0.1812", line])
    assert with_signal.kind == "killed"
    assert with_signal.evidence == f"killed (SIGKILL) by SLURM: {line}"
    cancelled = classify_failure(None, None, ["slurmstepd: error: *** STEP 48377.0 ON gpu-node-2 CANCELLED AT "
                                              "2026-11-29T14:02:11 ***"])
    assert cancelled.kind == "killed" and "scancel" in cancelled.fix[0].reason


def test_the_child_exception_beats_the_launcher_re_raise() -> None:
    # accelerate launch re-raises the child's failure as CalledProcessError: the child's own exception names the kind.
    failure = classify_failure(None, None, _TRACEBACK + [
        "huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': "
        "'/models/ltx 2'. Use `repo_type` argument if needed.",
        *_TRACEBACK,
        "subprocess.CalledProcessError: Command '['/usr/bin/python', 'train.py']' returned non-zero exit status 1."])
    assert failure.kind == "missing_files"
    assert failure.evidence.startswith("huggingface_hub.errors.HFValidationError")


def test_a_collective_timeout_alone_gets_its_advice_but_the_gpu_oom_that_caused_it_wins() -> None:
    timeout = ("[rank0]: RuntimeError: [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=88, "
               "OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600031 milliseconds before timing out.")
    alone = classify_failure(None, None, [timeout])
    assert (alone.kind, alone.rank) == ("crash", 0)
    assert "the first error is the cause" in alone.fix[0].reason
    # Rank 1 ran out of GPU memory; rank 0 then timed out waiting for it at the next all-reduce.
    failure = classify_failure(None, None, [
        "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity "
        "of 79.19 GiB of which 1.02 GiB is free.", timeout])
    assert (failure.kind, failure.rank) == ("oom_training", 1)


# Batch 11 (issue 43, point 10). requests/models.py Response.raise_for_status: "%s Client Error: %s for url: %s";
# huggingface_hub/utils/_http.py hf_raise_for_status: "404 Client Error. (Request ID: ...)" and "Entry/Repository/
# Revision Not Found for url: ...". A 404 or 410 is an address the server has nothing at: a repo or file that is not
# there (renamed, removed, mistyped), whatever the exception class that carries it.
@pytest.mark.parametrize("line", [
    "requests.exceptions.HTTPError: 404 Client Error: Not Found for url: https://huggingface.co/api/models/org/model",
    "requests.exceptions.HTTPError: 410 Client Error: Gone for url: https://example.org/weights/model.safetensors",
    "huggingface_hub.errors.HfHubHTTPError: 404 Client Error. (Request ID: Root=1-6700) Entry Not Found for url: "
    "https://huggingface.co/org/model/resolve/main/vae/config.json.",
])
def test_an_address_the_server_has_nothing_at_is_a_missing_repo_or_file(line: str) -> None:
    failure = _read(line)
    assert (failure.kind, failure.evidence) == ("missing_files", line)
    assert "no repo or file at the address" in failure.fix[0].reason and "HF_TOKEN" in failure.fix[0].reason
    # Near misses: the server failing, and another number that merely contains 404.
    for near_miss in ("requests.exceptions.HTTPError: 500 Server Error: Internal Server Error for url: "
                      "https://huggingface.co/api/models/org/model",
                      "requests.exceptions.HTTPError: 4040 Client Errors counted in the proxy log"):
        assert _read(near_miss).kind == "crash", near_miss


# A program that catches a library's exception and raises the bare base class ``raise Exception(f"could not load
# model: {name}")`` adds a sentence but no type: the exception it handled (Python's chain markers, or a paste that
# keeps the two exception lines together) names the kind. A typed re-raise, or an earlier exception that is not
# the one handled, is not read through.
_CAUSE = ("OSError: org/model is not a local folder and is not a valid model identifier listed on "
          "'https://huggingface.co/models'")
_WRAPPER = "Exception: could not load model: org/model"


@pytest.mark.parametrize("lines", [
    _TRACEBACK + [_CAUSE, "", "The above exception was the direct cause of the following exception:", "",
                  *_TRACEBACK, _WRAPPER],
    _TRACEBACK + [_CAUSE, "", "During handling of the above exception, another exception occurred:", "",
                  *_TRACEBACK, _WRAPPER],
    ["```", _CAUSE, _WRAPPER, "```"],
])
def test_a_re_raise_as_the_bare_exception_class_gives_way_to_the_exception_it_handled(lines: list[str]) -> None:
    failure = classify_failure(None, None, lines)
    assert (failure.kind, failure.evidence) == ("missing_files", _CAUSE)


@pytest.mark.parametrize("lines", [
    # A typed re-raise is read as itself.
    _TRACEBACK + [_CAUSE, "", "The above exception was the direct cause of the following exception:", "",
                  *_TRACEBACK, "RuntimeError: could not load model: org/model"],
    # An earlier exception the program went on from, then a later failure of its own.
    _TRACEBACK + [_CAUSE, "Falling back to the bundled model.", *_TRACEBACK, _WRAPPER],
])
def test_a_typed_re_raise_or_an_unrelated_earlier_exception_is_not_read_through(lines: list[str]) -> None:
    assert classify_failure(None, None, lines).kind == "crash"



# Batch 12. A trainer or its front end refusing the dataset's folder layout or naming, in the shapes they print it:
# a record in Rich's level column (sd-scripts' and musubi-tuner's "<date> <time> ERROR    <message>   <file.py:N>",
# kohya_ss GUI's "HH:MM:SS-ffffff ERROR    <message>") with no traceback after it, or a raised exception.
@pytest.mark.parametrize("line", [
    "09:14:02-118270 ERROR    The training data directory layout is not supported: /data/img",
    "2024-09-21 11:00:40 ERROR    Dataset folders do not follow the naming <repeats>_<name>: /data/img/girl"
    "        config_util.py:412",
    "ValueError: image directory /data/img has an unexpected structure; expected one subfolder per concept",
])
def test_a_refusal_of_the_dataset_s_folder_layout_is_a_dataset_error(line: str) -> None:
    failure = classify_failure(None, None, ["Loading settings...", line])
    assert failure.kind == "dataset_error" and "folder structure" in failure.fix[0].reason, line


@pytest.mark.parametrize("lines", [
    # A front end announcing the layout it built, then a failure of another kind: the layout is not the cause.
    ["09:14:02-118270 INFO     Done creating kohya_ss training folder structure at /data/run...",
     *_TRACEBACK, "RuntimeError: CUDA error: an illegal memory access was encountered"],
    # A folder named in an error about something else.
    ["09:14:02-118270 ERROR    Output directory /data/out is not writable: check the disk"],
    # The same refusal only as a warning, then a failure of its own.
    ["2024-09-21 11:00:40 WARNING  image folder /data/img/x has no <repeats>_ prefix in its naming; skipped",
     *_TRACEBACK, "RuntimeError: CUDA error: an illegal memory access was encountered"],
])
def test_a_folder_named_in_another_message_is_not_a_layout_refusal(lines: list[str]) -> None:
    assert classify_failure(None, None, lines).kind != "dataset_error"


# A log that ends in an ERROR record in Rich's level column and shows no exception: the record's text is read by the
# same message shapes as an exception's (here huggingface_hub's HTTP 404 wording, a "pip install" hint); an
# exception in the log still decides over the record.
@pytest.mark.parametrize(("record", "kind"), [
    ("404 Client Error: Not Found for url: https://huggingface.co/api/models/org/gone", "missing_files"),
    ("bitsandbytes is not installed; run pip install bitsandbytes", "dependency_error"),
])
def test_an_error_record_with_no_exception_is_read_by_the_message_shapes(record: str, kind: str) -> None:
    lines = ["09:14:01-002154 INFO     Loading settings...", f"09:14:02-118270 ERROR    {record}"]
    failure = classify_failure(None, None, [*lines, "Training has ended."])
    assert (failure.kind, failure.evidence) == (kind, record)
    with_exception = [*lines, *_TRACEBACK, "RuntimeError: CUDA error: unspecified launch failure"]
    assert classify_failure(None, None, with_exception).kind == "crash"


# Batch 13. A value outside the set a program accepts, refused with the set named: the shapes trainers and libraries
# print it in ("Unsupported <what>: <value>. Supported: ...", "Unknown <what> '<value>'. Available ...: ...",
# "<what> must be one of [...]", enum.py's "%r is not a valid %s"), and a trainer's own check that its config holds
# an entry it needs ("your <dataset> config must contain ...").
@pytest.mark.parametrize(("line", "advice"), [
    ("ValueError: Unknown optimizer 'adamw9bit'. Available optimizers: adamw, adamw8bit, prodigy", "values the "
     "message lists"),
    ("ValueError: lr_scheduler must be one of ['constant', 'cosine'], got 'cosinee'", "values the message lists"),
    ("ValueError: 'bf32' is not a valid DataType", "values the message lists"),
    ("ValueError: Invalid model_type: flux2. Valid options are: sdxl, flux", "values the message lists"),
    ("ValueError: Your dataset config must contain at least one video dataset.", "lacks an entry"),
    ("AssertionError: training config must include a [model] section", "lacks an entry"),
])
def test_a_value_outside_the_accepted_set_or_a_config_missing_an_entry_is_a_config_error(line: str,
                                                                                           advice: str) -> None:
    failure = _read(line)
    assert (failure.kind, failure.evidence) == ("config_error", line)
    assert advice in failure.fix[0].reason


@pytest.mark.parametrize("line", [
    "ValueError: Unsupported image format: RGBA",  # a refusal that names no accepted set
    "RuntimeError: Unknown error: see the log above",
    "ValueError: The model config must have hidden_size divisible by num_heads",  # a model's config, not the run's
])
def test_a_refusal_naming_no_accepted_set_or_a_model_s_config_is_not_a_config_error(line: str) -> None:
    assert _read(line).kind == "crash", line


# A program's logging records at an error level (Python logging's "[ERROR]" and "ERROR:name:" headers, loguru's
# "| ERROR |"), in a log with no exception: read by the same message shapes as an exception's, as Rich's ERROR
# column is; a record at another level is not an error, and an exception in the log still decides.
@pytest.mark.parametrize("record", [
    "2024-08-29 15:28:24,677 [ERROR] (__main__) Unsupported resolution_type: square. Supported values: pixel, area",
    "ERROR:trainer.config:Unsupported resolution_type: square. Supported values: pixel, area",
    "2024-01-01 10:00:00.123 | ERROR    | trainer:main:12 - Unsupported resolution_type: square. Supported values: "
    "pixel, area",
])
def test_an_error_level_logging_record_is_read_by_the_message_shapes(record: str) -> None:
    failure = classify_failure(None, None, ["Loading settings...", record, "Exiting."])
    assert (failure.kind, failure.evidence) == (
        "config_error", "Unsupported resolution_type: square. Supported values: pixel, area")
    as_info = record.replace("ERROR", "INFO")
    assert classify_failure(None, None, ["Loading settings...", as_info, "Exiting."]).kind == "crash"
    with_exception = ["Loading settings...", record, *_TRACEBACK,
                      "RuntimeError: CUDA error: unspecified launch failure"]
    assert classify_failure(None, None, with_exception).kind == "crash"


# subprocess.Popen's _execute_child (POSIX: the child's exec, re-raised as child_exception_type; Windows:
# _winapi.CreateProcess) raises FileNotFoundError when the program to start is not there: a program is missing
# (dependency_error), not a file the trainer reads.
_POPEN = ['  File "/app/trainer.py", line 80, in __init__', "    self.board = subprocess.Popen(args)"]


@pytest.mark.parametrize("frames", [
    ['  File "/usr/lib/python3.10/subprocess.py", line 1863, in _execute_child',
     "    raise child_exception_type(errno_num, err_msg, err_filename)",
     "FileNotFoundError: [Errno 2] No such file or directory: 'tensorboard'"],
    ['  File "C:\\Python310\\lib\\subprocess.py", line 1456, in _execute_child',
     "    hp, ht, pid, tid = _winapi.CreateProcess(executable, args,",
     "FileNotFoundError: [WinError 2] The system cannot find the file specified"],
])
def test_a_program_a_launch_cannot_find_is_a_dependency_error(frames: list[str]) -> None:
    failure = _read(*_POPEN, *frames)
    assert (failure.kind, failure.evidence) == ("dependency_error", frames[-1])
    assert "not installed or not on PATH" in failure.fix[0].reason


def test_a_file_the_trainer_opens_is_still_a_missing_file() -> None:
    failure = _read('  File "/app/dataset.py", line 40, in load', "    with open(path) as f:",
                    "FileNotFoundError: [Errno 2] No such file or directory: '/data/captions/0001.txt'")
    assert failure.kind == "missing_files"


# pip's resolver (pip/_internal/index/package_finder.py: "Could not find a version that satisfies the requirement
# %s (from versions: %s)", "No matching distribution found for %s"; resolution/resolvelib/factory.py:
# "Cannot install %s because these package versions have conflicting dependencies.", ResolutionImpossible): an
# install step found no build of a pinned package for this Python/platform/index, or conflicting pins.
@pytest.mark.parametrize("lines", [
    ["ERROR: Could not find a version that satisfies the requirement torch==2.1.2+cu121 (from versions: 2.5.0, "
     "2.5.1)", "ERROR: No matching distribution found for torch==2.1.2+cu121"],
    ["ERROR: Cannot install diffusers==0.30.0 and transformers==4.44.0 because these package versions have "
     "conflicting dependencies.", "ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/latest/"
     "topics/dependency-resolution/#dealing-with-dependency-conflicts"],
])
def test_pip_refusing_an_install_is_a_dependency_error(lines: list[str]) -> None:
    failure = classify_failure(1, None, ["Installing requirements...", *lines])
    assert failure.kind == "dependency_error" and "Python version" in failure.fix[0].reason
    # Near miss: pip naming a version it did find is no refusal.
    found = classify_failure(1, None, ["Collecting torch==2.1.2", "Using cached torch-2.1.2-cp310-none.whl",
                                       "RuntimeError: CUDA error: an illegal memory access was encountered"])
    assert found.kind != "dependency_error"


# Batch 15. A GPU without bfloat16 asked for it (config_error): accelerate/accelerator.py raises
# err.format(mode="bf16", requirement="PyTorch >= 1.10 and a supported device.") only where CUDA is there and
# torch.cuda.is_bf16_supported() is False; torch/amp/autocast_mode.py raises "Current CUDA Device does not support
# bfloat16. Please switch dtype to float16.". fp16 without a GPU stays torch seeing no GPU (dependency_error).
@pytest.mark.parametrize("line", [
    "ValueError: bf16 mixed precision requires PyTorch >= 1.10 and a supported device.",
    "RuntimeError: Current CUDA Device does not support bfloat16. Please switch dtype to float16.",
])
def test_bfloat16_asked_of_a_gpu_without_it_is_the_precision_setting(line: str) -> None:
    failure = _read(line)
    assert (failure.kind, failure.evidence) == ("config_error", line)
    assert "fp16" in failure.fix[0].reason and "Ampere" in failure.fix[0].reason
    assert _read("ValueError: fp16 mixed precision requires a GPU (not 'mps').").kind == "dependency_error"


# The loss's value in the layouts training loops log it (config-free): the OpenAI/baselines logger's dumpkvs table,
# transformers' Trainer's dict, a JSON line; each beside a near miss whose NaN is not the loss's.
@pytest.mark.parametrize(("line", "near_miss"), [
    ("| loss          | nan       |", "| grad_norm     | nan       |"),
    ("{'loss': nan, 'grad_norm': 1.2, 'learning_rate': 1e-05, 'epoch': 0.4}",
     "{'loss': 0.12, 'grad_norm': nan, 'learning_rate': 1e-05, 'epoch': 0.4}"),
    ('{"step": 12, "loss": NaN, "lr": 0.0001}', '{"step": 12, "loss": 0.61, "grad_norm": NaN}'),
])
def test_a_nan_loss_is_read_in_a_table_a_dict_or_key_value_pairs(line: str, near_miss: str) -> None:
    assert classify_failure(None, None, ["training...", line]).kind == "nan_loss"
    assert classify_failure(None, None, ["training...", near_miss]).kind != "nan_loss"


# torch/utils/data/_utils/signal_handling.py: "DataLoader worker (pid {}) is killed by signal: {}." with strsignal's
# text, then for SIGBUS "It is possible that dataloader's workers are out of shared memory. Please try to raise your
# shared memory limit.". A terminal or a paste that hard-wraps it leaves "Bus" at a line's end.
@pytest.mark.parametrize("lines", [
    ["RuntimeError: DataLoader worker (pid 47) is killed by signal: Bus", "error. It is possible that dataloader's "
     "workers are out of", "shared memory. Please try to raise your shared memory limit."],
    ["ERROR: worker crashed", "memory. Please try to raise your shared memory limit."],
])
def test_torch_s_shared_memory_message_is_read_when_hard_wrapped(lines: list[str]) -> None:
    assert classify_failure(None, None, lines).kind == "shm_bus_error"
    # Near miss: a worker killed by SIGKILL is host memory, not shared memory.
    assert classify_failure(None, None, ["RuntimeError: DataLoader worker (pid 47) is killed by signal: "
                                         "Killed."]).kind == "host_oom"


# A shell reports a child killed by SIGKILL with strsignal's text: "Killed" (glibc), "Killed: 9" (macOS/BSD), alone
# or in bash's job report "<script>: line N: <pid> Killed: 9 <command>": the kernel's OOM killer, as a bare Killed is.
@pytest.mark.parametrize("line", [
    "./run.sh: line 142: 33551 Killed: 9               python -m trainer.train --config cfg.yaml",
    "./run.sh: line 7: 1126 Killed                  python train.py",
    "Killed: 9",
])
def test_a_shell_s_killed_report_is_host_memory(line: str) -> None:
    failure = classify_failure(None, None, ["75%|#######   | 15/20 [1:58:20<48:37, 583.49s/it]", line,
                                            "Running on a 16 GB machine"])
    assert (failure.kind, failure.evidence) == ("host_oom", line)
    # Near miss: prose that uses the word is no shell report.
    assert classify_failure(None, None, ["Killed the job myself: 9 of 10 runs done"]).kind != "host_oom"


# Batch 16. torch/utils/data/dataloader.py (_MultiProcessingDataLoaderIter._try_get_data) raises
# f"DataLoader worker (pid(s) {pids_str}) exited unexpectedly" when a worker died without a Python exception (one
# raised inside a worker comes back as "Caught X in DataLoader worker process N") and without a signal the handler
# names; torch/csrc/DataLoader.cpp's _error_if_any_worker_fails: "DataLoader worker (pid X) exited unexpectedly
# with exit code N. Details are lost due to multiprocessing. Rerunning with num_workers=0 may give better error
# trace.". In a container that is the shared memory the batches travel through (PyTorch's README: --shm-size).
@pytest.mark.parametrize("line", [
    "RuntimeError: DataLoader worker (pid(s) 4121, 4122) exited unexpectedly",
    "RuntimeError: DataLoader worker (pid 901) exited unexpectedly with exit code 1. Details are lost due to "
    "multiprocessing. Rerunning with num_workers=0 may give better error trace.",
])
def test_a_dataloader_worker_that_vanished_is_shared_memory(line: str) -> None:
    failure = _read(line)
    assert (failure.kind, failure.evidence) == ("shm_bus_error", line)
    assert failure.fix[0].value == 0 and "/dev/shm" in failure.fix[1].reason
    # Near misses: a worker killed by SIGKILL is host memory; an exception caught inside a worker is its own.
    assert _read("RuntimeError: DataLoader worker (pid 901) is killed by signal: Killed.").kind == "host_oom"
    assert _read("ValueError: Caught ValueError in DataLoader worker process 0.").kind == "crash"


# CPython's refusals to bind a call (Python/ceval.c): "{f}() takes {n} positional arguments but {m} were given",
# "{f}() missing {n} required positional argument(s): ...", "{f}() got multiple values for argument '{a}'". Raised
# at the call, so the innermost frame is the caller's: when that is an installed package calling with arguments of
# its own (transformers' Trainer calling an overridden training_step), the package and the code it calls are of
# two versions. A frame that forwards *args/**kwargs (torch's Module.__call__) passes on its caller's mistake.
def _package_frame(source: str) -> list[str]:
    return ["Traceback (most recent call last):", '  File "/app/finetune.py", line 84, in <module>',
            "    trainer.train()",
            '  File "/venv/lib/python3.11/site-packages/transformers/trainer.py", line 2474, in _inner_training_loop',
            f"    {source}"]


@pytest.mark.parametrize("message", [
    "TypeError: CustomTrainer.training_step() takes 3 positional arguments but 4 were given",
    "TypeError: on_step_end() missing 1 required positional argument: 'control'",
    "TypeError: compute_loss() got multiple values for argument 'return_outputs'",
])
def test_a_package_calling_code_of_another_version_is_a_dependency(message: str) -> None:
    failure = classify_failure(None, None, _package_frame(
        "tr_loss_step = self.training_step(model, inputs, num_items_in_batch)") + [message])
    assert (failure.kind, failure.evidence) == ("dependency_error", message)
    assert "version" in failure.fix[0].reason
    # Near misses: the same refusal at the user's own call, or at a frame forwarding *args/**kwargs.
    assert classify_failure(None, None, _TRACEBACK + [message]).kind == "crash"
    assert classify_failure(None, None, _package_frame("return forward_call(*args, **kwargs)") + [message]).kind == (
        "crash")


# A C++/CUDA extension built at run time (torch.utils.cpp_extension's _run_ninja_build raises "Error building
# extension '{name}'"; DeepSpeed's op builder JIT-loads through it): GCC/nvcc's "fatal error: {header}: No such file
# or directory" / "compilation terminated." and ninja's "ninja: build stopped: subcommand failed.".
@pytest.mark.parametrize("lines", [
    ["/venv/deepspeed/ops/csrc/includes/custom_cuda_layers.h:12:10: fatal error: curand_kernel.h: No such file or "
     "directory", "   12 | #include <curand_kernel.h>", "compilation terminated.",
     "ninja: build stopped: subcommand failed."],
    _TRACEBACK + ["RuntimeError: Error building extension 'fused_adam'"],
])
def test_an_extension_build_that_fails_is_the_toolchain(lines: list[str]) -> None:
    failure = classify_failure(None, None, lines)
    assert failure.kind == "dependency_error" and "CUDA toolkit" in failure.fix[0].reason
    # Near miss: a data file that is not there stays a missing file.
    assert _read("FileNotFoundError: [Errno 2] No such file or directory: '/data/captions.txt'").kind == (
        "missing_files")
