"""The exception vocabulary of the libraries a LoRA/video trainer runs on: type and message shape -> kind, advice.

Each entry is written from the library's own source (the class it raises, the format string of its message), not
from one user's log, so that it reads every log that library can print. ``TYPES`` maps an exception class (the last
dotted part, as a traceback prints it) to a kind; ``SHAPES`` maps a message shape, whatever the type (a front end may
print the message alone), and is read first: a message says more than a type (``SafetensorError`` is a file that is
not whole when it reads, a full disk when it writes). Order inside ``SHAPES`` is precedence: the first match wins.
Crashes whose mechanism is known but whose kind stays ``crash`` are ``_crash_causes``' vocabulary. Pure data.
"""

from __future__ import annotations

import re

__all__ = ["CONFIG_ADVICE", "SHAPES", "STALE_ADVICE", "TYPES"]

_SMOKE = "then `ltx-pipeline smoke` checks the whole environment"
_DEPENDENCY_ADVICE = ("The installed packages do not match what the trainer's code was written for ({evidence}): "
                      "install the versions the trainer pins, in its own environment (`<trainer python> -m pip "
                      "install -r requirements.txt`, or `uv sync` in the checkout), " + _SMOKE + ".")
_MISSING_ADVICE = ("A file or folder the trainer reads is not there ({evidence}): check the model, dataset and "
                   "output paths in the config; a Hugging Face repo id needs the network, and a gated repo its "
                   "licence accepted and a token (`huggingface-cli login`, or HF_TOKEN).")
_CORRUPT_ADVICE = ("A model or cache file is there but not whole ({evidence}): an interrupted download or copy; "
                   "delete it and download it again (compare its size with the source's), then launch again.")
CONFIG_ADVICE = ("The trainer's config or command line was refused ({evidence}): fix the option, key or value it "
                 "names, then launch again.")
_CHOICE_ADVICE = ("The config or command line gives a value the trainer does not accept ({evidence}): use one of the "
                  "values the message lists (mind the spelling: underscores, hyphens, case; an example or document "
                  "written for another version may show an old name), then launch again.")
_CONFIG_LACKS_ADVICE = ("The config lacks an entry the trainer needs ({evidence}): add it as the trainer's "
                        "documentation or example config for this model shows, then launch again.")
_DATASET_ADVICE = ("The dataset gave the trainer nothing to train on ({evidence}): check that the dataset path points "
                   "where the files are, in the layout and with the extensions the trainer reads, and that buckets "
                   "and batch size leave samples.")
_LAYOUT_ADVICE = ("The trainer refused how the dataset's folders are laid out or named ({evidence}): put the samples "
                  "where its documented folder structure expects them (kohya's scripts and GUI: the folder given is "
                  "the parent of `<repeats>_<name>` folders, which hold the images and captions).")
_HOST_ADVICE = ("The host (CPU) ran out of memory, not the GPU ({evidence}): free RAM, add swap (on Windows a larger "
                "page file), lower the data loader's workers, or load a smaller (quantized) checkpoint.")
_NOTHING_TRAINABLE_ADVICE = ("Nothing in the model is trainable ({evidence}): the adapter config (LoRA/LyCORIS "
                             "target modules, preset or network type) matched no module of this model; use targets "
                             "written for this model's module names (the trainer's example for it), and if the same "
                             "config worked before, check whether an update renamed the model's modules.")
STALE_ADVICE = ("A batch lacks a cached tensor the training step reads ({evidence}): the cache was made by another "
                "model, trainer version or with other options (for example without the image/clip conditioning "
                "this mode needs); cache latents and text-encoder outputs again with this run's settings.")
# huggingface_hub validate_repo_id(): a path that is not an existing folder is taken for a repo id.
_NOT_A_FOLDER_ADVICE = ("A model path is not an existing folder, so the Hugging Face libraries read it as a Hub repo "
                        "id and refused it ({evidence}): check the path for a typo, a relative path resolved from "
                        "another working directory, or a Windows path used under WSL/Linux, then launch again.")
_NETWORK_ADVICE = ("The Hugging Face Hub could not be reached or refused the download ({evidence}): check the network "
                   "(a proxy: HTTPS_PROXY; a mirror: HF_ENDPOINT), log in (`huggingface-cli login`, or HF_TOKEN) to "
                   "lift anonymous rate limits, or download the model once and point the config at the local "
                   "folder.")
# requests' raise_for_status ("404 Client Error: Not Found for url: ...") and huggingface_hub's hf_raise_for_status
# ("Repository Not Found for url", "Entry Not Found for url"): the server has nothing at that address.
_NOT_THERE_ADVICE = ("The server has no repo or file at the address the trainer asked for ({evidence}): the repo id, "
                     "file name or revision is wrong, or the repo was renamed or removed by its owner (a private or "
                     "gated one answers so without a token that has access: `huggingface-cli login`, or HF_TOKEN); "
                     "look the address up on huggingface.co, point the config at the current repo (or a copy of "
                     "it), or download the files and point the config at the local folder.")
_OFFLINE_ADVICE = ("The files are not in the local Hugging Face cache and downloads are turned off ({evidence}): "
                   "unset HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE (or local_files_only) once to fetch them, or point "
                   "the config at a folder that holds them.")
_PERMISSION_ADVICE = ("A file or folder the trainer reads or writes is there but not accessible to its user "
                      "({evidence}): fix its owner or mode (`ls -ld <path>`; `chown`/`chmod`), or point the output "
                      "and cache paths somewhere this user may write (a container often runs as another user).")
_PORT_ADVICE = ("The launcher's rendezvous port is taken ({evidence}): another job, or a process left from an earlier "
                "run (`ss -ltnp | grep 29500`), holds it; end that process, or give this run another port "
                "(accelerate launch's main_process_port, torchrun's master_port, or the MASTER_PORT variable).")
_LAUNCH_ADVICE = ("The script expects to be started by a distributed launcher ({evidence}): run it through "
                  "`accelerate launch` or `torchrun`, which set RANK, WORLD_SIZE and MASTER_ADDR, or set them for a "
                  "single process.")
_DEVICE_ORDINAL_ADVICE = ("The run asked for a GPU index this machine does not show ({evidence}): the GPU ids or "
                          "number of processes in the launch config exceed the GPUs visible (`nvidia-smi -L`, "
                          "CUDA_VISIBLE_DEVICES counts from 0); lower them to the GPUs there are.")
_PARSE_ADVICE = ("A config or metadata file does not parse ({evidence}): the line and column in the message point at "
                 "the error (a missing or trailing comma, an unquoted value, a tab in YAML, a Python object tag); "
                 "fix it there, then launch again.")
_NO_GPU_ADVICE = ("torch sees no usable CUDA GPU ({evidence}): a CPU-only torch build, an empty or wrong "
                  "CUDA_VISIBLE_DEVICES, or a driver that does not load; `<trainer python> -c \"import torch; "
                  "print(torch.__version__, torch.cuda.is_available())\"` tells which; install the CUDA build of "
                  "torch the trainer pins, " + _SMOKE + ".")
# accelerate raises its bf16 refusal only where CUDA is there and torch.cuda.is_bf16_supported() is False (a CPU-only
# torch passes the check), and torch's autocast refuses bfloat16 on such a GPU: the GPU has no bf16, the config asks it.
_NO_BF16_ADVICE = ("The config asks for bfloat16 and this GPU has no bf16 support ({evidence}): GPUs before Ampere "
                   "(T4, V100, GTX 10xx, RTX 20xx) have none; set mixed (and save) precision to fp16, or fp32, or "
                   "train on an Ampere or newer GPU.")
_GPU_BUSY_ADVICE = ("The GPU refused a new CUDA context ({evidence}): it is in exclusive-process compute mode and "
                    "another process holds it, or it is in a failed state; `nvidia-smi` shows its compute mode and "
                    "processes; end the other process, or `nvidia-smi -q` / `dmesg | grep -i xid` for a GPU fault.")
_ATTENTION_KERNEL_ADVICE = ("The attention kernel package has no kernel for this GPU, dtype or torch build "
                            "({evidence}): train with torch's own SDPA attention instead (turn xformers/flash-attn "
                            "off in the trainer's config), or install the wheel built for this torch, CUDA and GPU "
                            "generation (flash-attn needs an Ampere or newer GPU).")
_NUMPY_ABI_ADVICE = ("A compiled package was built against NumPy 1.x and NumPy 2 is installed ({evidence}): install "
                     "`numpy<2` in the trainer's environment, or versions of that package built for NumPy 2, "
                     + _SMOKE + ".")
_CUDA_TOOLKIT_ADVICE = ("A package compiles CUDA code at run time and the CUDA toolkit it needs is missing or another "
                        "version than torch's ({evidence}): install the toolkit matching `torch.version.cuda` and set "
                        "CUDA_HOME to it, or install the package's prebuilt wheel; for DeepSpeed, pre-build its ops "
                        "(DS_BUILD_OPS=1) or use an optimizer that needs no compiled op.")
_TRITON_ADVICE = ("torch.compile needs Triton and there is none that works here ({evidence}): install the triton "
                  "version torch pins (on Windows, triton-windows), or train without torch.compile; a GPU older "
                  "than compute capability 7.0 cannot run Triton at all.")
_AUDIO_BACKEND_ADVICE = ("torchaudio has no backend that can read or write this audio ({evidence}): install one in "
                         "the trainer's environment (`<trainer python> -m pip install soundfile`, or FFmpeg's shared "
                         "libraries), or train video only.")
_BNB_ADVICE = ("bitsandbytes did not find a CUDA library it can use ({evidence}): `<trainer python> -m bitsandbytes` "
               "says which; install a bitsandbytes release built for the installed torch/CUDA, or turn 8-bit "
               "optimizers and quantization off, " + _SMOKE + ".")
# pip's resolver (pip/_internal/index/package_finder.py, resolution/resolvelib/factory.py): no build of a pinned
# package exists for this interpreter, platform or index, or the pins conflict.
_PIP_ADVICE = ("pip could not install a package the trainer pins ({evidence}): no release of it is built for this "
               "Python version or platform on the index searched (torch wheels exist for a few Python versions "
               "only, and CUDA builds such as +cu121 only on download.pytorch.org), or the pins conflict; use the "
               "Python version the trainer's README names (a fresh venv), the index URL it gives, then install again.")
_BIG_IMAGE_ADVICE = ("An image is larger than PIL opens by default ({evidence}): downscale it (training resolutions "
                     "are far smaller) or remove it from the dataset.")

_DEBRIS_RE = re.compile(r"[/\\](?:\.ipynb_checkpoints|__MACOSX|\.DS_Store|Thumbs\.db|desktop\.ini|\._[^/\\'\"]+)"
                        r"(?:[/\\'\"]|$)")
_DEBRIS_ADVICE = ("The data folder holds an entry that is not a sample ({evidence}): a folder or file an OS or a tool "
                  "left there (Jupyter's .ipynb_checkpoints, macOS's ._ files and __MACOSX, Windows' Thumbs.db); "
                  "remove it (`ls -a` shows hidden entries) or keep the dataset in a folder of its own.")

# Exception types (the last dotted part) that name the kind on their own.
TYPES: dict[str, tuple[str, str]] = {
    **dict.fromkeys(("ModuleNotFoundError", "ImportError"), ("dependency_error", _DEPENDENCY_ADVICE)),
    # huggingface_hub.errors; deepspeed op_builder's MissingCUDAException; torch._inductor.exc.TritonMissing.
    **dict.fromkeys(("FileNotFoundError", "IsADirectoryError", "NotADirectoryError", "RepositoryNotFoundError",
                     "EntryNotFoundError", "LocalEntryNotFoundError", "RevisionNotFoundError", "GatedRepoError"),
                    ("missing_files", _MISSING_ADVICE)),
    "HFValidationError": ("missing_files", _NOT_A_FOLDER_ADVICE),
    "OfflineModeIsEnabled": ("missing_files", _OFFLINE_ADVICE),
    "PermissionError": ("missing_files", _PERMISSION_ADVICE),
    "MissingCUDAException": ("dependency_error", _CUDA_TOOLKIT_ADVICE),
    "TritonMissing": ("dependency_error", _TRITON_ADVICE),
    **dict.fromkeys(("SafetensorError", "UnpicklingError"), ("missing_files", _CORRUPT_ADVICE)),
    # tomllib/toml, PyYAML (scanner, parser, composer, constructor), json, voluptuous, omegaconf, argparse.
    **dict.fromkeys(("TomlDecodeError", "TOMLDecodeError", "ScannerError", "ParserError", "ComposerError",
                     "ConstructorError", "JSONDecodeError"), ("config_error", _PARSE_ADVICE)),
    **dict.fromkeys(("MultipleInvalid", "ConfigAttributeError", "ConfigKeyError", "ConfigTypeError",
                     "ConfigValueError", "MissingMandatoryValue", "InterpolationResolutionError", "GrammarParseError",
                     "ArgumentError"), ("config_error", CONFIG_ADVICE)),
    "DecompressionBombError": ("dataset_error", _BIG_IMAGE_ADVICE),
    # numpy's MemoryError subclass ("Unable to allocate 12.0 GiB for an array with shape ...").
    **dict.fromkeys(("MemoryError", "_ArrayMemoryError"), ("host_oom", _HOST_ADVICE)),
}
# Message shapes of the standard library's, torch's and the Hugging Face libraries' errors, whatever the type.
# A module without the attribute the code asks for is a library of another version; the interpreter quotes the
# module's name, the Hugging Face libraries' lazy modules (transformers, diffusers) do not.
SHAPES: tuple[tuple[re.Pattern[str], str, str], ...] = (
    # A path ending in what an OS or a tool leaves in folders (Jupyter's checkpoints, macOS's AppleDouble files and
    # zip folders, Windows' thumbnails): the data folder holds an entry that is not a sample.
    (_DEBRIS_RE, "dataset_error", _DEBRIS_ADVICE),
    (re.compile(r"DefaultCPUAllocator|paging file is too small|\[WinError 1455\]|std::bad_alloc|"
                r"Cannot allocate memory|Unable to allocate [\d.]+ \w?i?B for an array with shape"),
     "host_oom", _HOST_ADVICE),
    # torch.distributed's TCPStore (EADDRINUSE), its env:// rendezvous, and the CUDA runtime's cudaErrorInvalidDevice.
    (re.compile(r"failed to listen on any local network address|(?i:address already in use)|EADDRINUSE"),
     "config_error", _PORT_ADVICE),
    (re.compile(r"environment variable (?:RANK|WORLD_SIZE|MASTER_ADDR|MASTER_PORT|LOCAL_RANK) expected, but not set"),
     "config_error", _LAUNCH_ADVICE),
    (re.compile(r"invalid device ordinal"), "config_error", _DEVICE_ORDINAL_ADVICE),
    # huggingface_hub: the repo-id validator, offline mode, HTTP and connection failures to the Hub.
    (re.compile(r"Repo id must (?:be in the form|use alphanumeric chars)"), "missing_files", _NOT_A_FOLDER_ADVICE),
    (re.compile(r"outgoing traffic has been disabled|offline mode is enabled"), "missing_files", _OFFLINE_ADVICE),
    (re.compile(r"HTTPSConnectionPool\(host='(?:huggingface\.co|hf\.co|cdn-lfs[\w.-]*)'|Failed to resolve "
                r"'(?:huggingface\.co|hf\.co)'|429 Client Error"), "missing_files", _NETWORK_ADVICE),
    (re.compile(r"\b(?:404|410) Client Error\b|\b(?:Repository|Entry|Revision) Not Found for url\b"), "missing_files",
     _NOT_THERE_ADVICE),
    # Compiled kernels and toolchains: xformers' dispatcher, flash-attn's arch check, NumPy's ABI break, bitsandbytes'
    # CUDA setup, DeepSpeed's op builder, torchaudio's backend dispatcher, the CUDA runtime's busy device, and pip's
    # resolver refusing an install.
    (re.compile(r"No operator found for `\w+`|FlashAttention only supports? (?:Ampere|Turing)"),
     "dependency_error", _ATTENTION_KERNEL_ADVICE),
    (re.compile(r"compiled using NumPy 1\.x cannot be run in|_ARRAY_API not found|numpy\.dtype size changed, may "
                r"indicate binary incompatibility|numpy\.core\.multiarray failed to import"),
     "dependency_error", _NUMPY_ABI_ADVICE),
    (re.compile(r"CUDA Setup failed despite GPU being available|Configured CUDA binary not found at"),
     "dependency_error", _BNB_ADVICE),
    (re.compile(r"CUDA_HOME does not exist|Installed CUDA version [\d.]+ does not match the version torch was "
                r"compiled with"), "dependency_error", _CUDA_TOOLKIT_ADVICE),
    (re.compile(r"Couldn't find appropriate backend to handle uri"), "dependency_error", _AUDIO_BACKEND_ADVICE),
    (re.compile(r"Could not find a version that satisfies the requirement|No matching distribution found for|"
                r"ResolutionImpossible|because these package versions have conflicting dependencies"),
     "dependency_error", _PIP_ADVICE),
    (re.compile(r"(?i:CUDA-capable devices? (?:is|are|is/are) busy or unavailable)"), "dependency_error",
     _GPU_BUSY_ADVICE),
    # A GPU without bfloat16 asked for it: accelerate's bf16 refusal, torch.amp.autocast's (autocast_mode.py).
    (re.compile(r"bf16 mixed precision requires PyTorch >= [\d.]+ and a supported device|"
                r"Current CUDA Device does not support bfloat16"), "config_error", _NO_BF16_ADVICE),
    # accelerate's refusal of fp16 without a GPU; torch's own checks.
    (re.compile(r"fp16 mixed precision requires a GPU|"
                r"(?i:Torch not compiled with CUDA enabled|No CUDA GPUs are available)"),
     "dependency_error", _NO_GPU_ADVICE),
    (re.compile(r"^module '?[\w.]+'? has no attribute|partially initialized module|got an unexpected keyword "
                r"argument|requires the [\w\s-]+ librar(?:y|ies) but (?:it was|they were) not found|"
                r"Failed to import [\w.]+ because of the following error|"
                r"(?i:please install|pip install|is not installed|requires? [\w.-]+\s*[<>=]=?\s*\d|compiled without|"
                r"not compiled with|DLL load failed|error loading \S+\.dll|\[WinError 12[67]\]|"
                r"Could not run '[\w:.]+' with arguments from the '\w+' backend)"),
     "dependency_error", _DEPENDENCY_ADVICE),
    (re.compile(r"Error while deserializing header|PytorchStreamReader failed|failed finding central directory|"
                r"invalid load key|(?i:file is (?:truncated|corrupt))"), "missing_files", _CORRUPT_ADVICE),
    (re.compile(r"No such file or directory|does not appear to have a file named|no file named \S+ found in "
                r"directory|is not a local folder and is not a valid model identifier|Can't load [\w ]+ for '|"
                r"We couldn't connect to '[^']+' to load|Cannot access gated repo|trying to access a gated repo|"
                r"(?:401|403) Client Error"), "missing_files", _MISSING_ADVICE),
    (re.compile(r"Permission denied"), "missing_files", _PERMISSION_ADVICE),
    (re.compile(r"\b\d+ validation errors? for \w+|Invalid (?:user )?config|extra keys not allowed|"
                r"required (?:key|property|option|argument)"), "config_error", CONFIG_ADVICE),
    # A value outside the set the program accepts, with the set named: "Unsupported <what>: <value>. Supported: ...",
    # "Unknown <what> '<value>', available: ...", "must be one of ...", argparse's "(choose from ...)", enum's
    # "'<value>' is not a valid <Enum>".
    (re.compile(r"(?i)\b(?:unsupported|unknown|invalid|unrecogni[sz]ed)\b[\w -]{0,40}?[:=]?\s*['\"]?[\w./-]+['\"]?"
                r"[.,;]?\s*\(?(?:supported|valid|allowed|available|accepted|known)(?: \w+){0,2}?\s*(?:are|is)?\s*[:=(]|"
                r"\b(?:must|should|needs? to|has to) be one of\b|\bis not one of\b|\bexpected one of\b|"
                r"\(choose from\b|^['\"][^'\"]*['\"] is not a valid [A-Z]\w*$"), "config_error", _CHOICE_ADVICE),
    # A trainer's own check that its config holds an entry it needs: "your dataloader config must contain ...".
    (re.compile(r"(?i)\b(?:your|dataloader|data ?set|data ?backend|training|train|trainer|toml|yaml|json) "
                r"config(?:uration)?(?: file)? (?:must|should|needs? to|has to) (?:contain|include|have|define|"
                r"specify|list)\b"), "config_error", _CONFIG_LACKS_ADVICE),
    # torch.optim's refusal of an empty parameter list: the adapter selected no weight to train.
    (re.compile(r"optimizer got an empty parameter list"), "config_error", _NOTHING_TRAINABLE_ADVICE),
    # A refusal of the dataset's folder layout or naming, as trainers and their front ends word it: "<image|dataset|
    # train data> folder(s)/director(y|ies) ... name pattern/naming/structure/layout", "folder structure".
    (re.compile(r"(?i)\b(?:images?|data ?sets?|train(?:ing)?(?:[ _]data)?|instance|class|videos?|reg(?:ularization)?)"
                r"[ _]?(?:folders?|director(?:y|ies)|dirs?)\b.{0,80}?\b(?:name patterns?|naming|structure|layout)\b|"
                r"\bfolder (?:structure|layout|naming)\b"), "dataset_error", _LAYOUT_ADVICE),
    # An empty dataset: "no <items> found/discovered/loaded/...", "0 images found", "dataset ... is empty". A media
    # file that exists and does not decode is left to the crash it raises (tests/unit/trainer_log/test_missing_media).
    (re.compile(r"(?i)\bno (?:valid |training |usable )?(?:images?|videos?|samples?|files?|data|items?|captions?|"
                r"media)\b(?: \w+){0,2} (?:were |was |could be )?(?:found|discovered|detected|loaded|available)|"
                r"\b(?:found|loaded) 0 (?:images|videos|samples|files|items)\b|\bdata ?set\b.{0,40}\bis empty\b"),
     "dataset_error", _DATASET_ADVICE),
)
