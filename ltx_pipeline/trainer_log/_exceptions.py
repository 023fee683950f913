"""The exception a log ends with, read from Python's traceback layout, and the failure kind its type implies.

Phrase lists learn one trainer's wording at a time; what every Python program shares is the traceback's shape
(``Traceback (most recent call last):``, ``File ...`` frames, then ``module.Type: message``) and the exception
types of the standard library, torch, huggingface_hub, PIL, safetensors and the schema libraries. So the root
exception is found structurally (the last traceback's exception; a chained traceback's causes kept; a launcher's
re-raise such as ``CalledProcessError``, or a traceback cut before its exception line, gives way to the one
before) and its TYPE, with the standard message shapes of those libraries, maps to a kind. Exception lines
pasted alone (in prose, without a traceback) count too; front ends that drop the type ("Error running job:
<message>") leave the message, which the shapes still read; a paste cut right after the last frame's
``raise Type("message")`` source line gives that type and message (Python prints no more than that). Input
lines have their launcher prefixes stripped already. Pure standard library.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ltx_pipeline.trainer_log._detect import Finding
from ltx_pipeline.trainer_log._kinds import FixStep

__all__ = ["RaisedException", "exception_failure", "root_exception"]


class RaisedException(NamedTuple):
    type: str  # dotted as printed ("torch.OutOfMemoryError", "KeyError", "" when a front end dropped it)
    message: str
    line: str  # the exception line as printed


# "module.sub.TypeName: message" or a bare "TypeName": a capitalised name ending as exception classes do, or
# a module's lower-case ``error`` class (cv2.error, socket.error).
_EXCEPTION_RE = re.compile(
    r"^(?P<type>(?:[A-Za-z_]\w*\.)*(?:(?:[A-Z]\w*)?(?:Error|Exception)|[A-Z]\w*(?:Invalid|Exit|Interrupt|Warning)|"
    r"StopIteration)"
    r"|(?:[A-Za-z_]\w*\.)+error)(?::\s?(?P<message>.*))?$")
# An HTTP error's own wording (requests' HTTPError, the Hub's errors) printed without its type by a front end.
_HTTP_ERROR_RE = re.compile(r"^(?P<message>[45]\d\d (?:Client|Server) Error\b.*)$")
# A front end's own line around an exception's message, with the type gone.
_FRONT_END_RE = re.compile(r"^(?:Error running job|Training failed|Exception|Error|Fatal error):\s(?P<message>\S.*)$")
_CHAIN_MARKERS = ("During handling of the above exception", "The above exception was the direct cause")
# Raised by launchers and wrappers about a child that failed: the child's own exception is the cause.
_WRAPPERS = {"CalledProcessError", "ChildFailedError", "SystemExit", "ProcessRaisedException", "ProcessExitedException"}
# A frame's source line that raises with a literal message: `raise ValueError("...")`, `raise X(f'...')`.
_RAISE_RE = re.compile(r"^raise (?P<type>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)\(\s*f?(?P<q>['\"])(?P<message>.*?)(?P=q)")


def root_exception(lines: list[str]) -> RaisedException | None:
    """The exception that ended the program: the last traceback's, unless that one only reports a child."""
    candidates = _exceptions(lines)
    for found in reversed(candidates):
        if found.type.rsplit(".", 1)[-1] not in _WRAPPERS:
            return found
    return None


def _exceptions(lines: list[str]) -> list[RaisedException]:
    """Each exception line in order: those ending a traceback, and those printed on their own."""
    found: list[RaisedException] = []
    in_traceback = False
    last_source = ""  # the newest frame's source line, for a traceback the paste cut before its exception line
    for raw in lines:
        line = raw.rstrip()
        if line.startswith("Traceback (most recent call last)"):
            in_traceback, last_source = True, ""
            continue
        if not line.strip() or line.startswith((" ", "\t")) or line.lstrip().startswith(('File "', "^", "~")):
            if in_traceback and line.strip() and not line.lstrip().startswith(('File "', "^", "~")):
                last_source = line.strip()
            continue  # frames, source lines, carets: inside a traceback or an indented quote
        if line.startswith(_CHAIN_MARKERS):
            continue
        if match := _EXCEPTION_RE.match(line):
            found.append(RaisedException(match.group("type"), (match.group("message") or "").strip(), line))
            in_traceback = False
        elif (match := _FRONT_END_RE.match(line) or _HTTP_ERROR_RE.match(line)) and not in_traceback:
            found.append(RaisedException("", match.group("message").strip(), line))
    if in_traceback and (match := _RAISE_RE.match(last_source)):  # cut after the raising frame: it names the error
        found.append(RaisedException(match.group("type"), match.group("message"), last_source))
    return found


_SMOKE = "then `ltx-pipeline smoke` checks the whole environment"
_DEPENDENCY_ADVICE = ("The installed packages do not match what the trainer's code was written for ({evidence}): "
                      "install the versions the trainer pins, in its own environment (`<trainer python> -m pip "
                      "install -r requirements.txt`, or `uv sync` in the checkout), " + _SMOKE + ".")
_MISSING_ADVICE = ("A file or folder the trainer reads is not there ({evidence}): check the model, dataset and "
                   "output paths in the config; a Hugging Face repo id needs the network, and a gated repo its "
                   "licence accepted and a token (`huggingface-cli login`, or HF_TOKEN).")
_CORRUPT_ADVICE = ("A model or cache file is there but not whole ({evidence}): an interrupted download or copy; "
                   "delete it and download it again (compare its size with the source's), then launch again.")
_CONFIG_ADVICE = ("The trainer's config or command line was refused ({evidence}): fix the option, key or value it "
                  "names, then launch again.")
_DATASET_ADVICE = ("The dataset gave the trainer nothing to train on ({evidence}): check that the dataset path points "
                   "where the files are, in the layout and with the extensions the trainer reads, and that buckets "
                   "and batch size leave samples.")
_HOST_ADVICE = ("The host (CPU) ran out of memory, not the GPU ({evidence}): free RAM, add swap (on Windows a larger "
                "page file), lower the data loader's workers, or load a smaller (quantized) checkpoint.")
_NOTHING_TRAINABLE_ADVICE = ("Nothing in the model is trainable ({evidence}): the adapter config (LoRA/LyCORIS "
                             "target modules, preset or network type) matched no module of this model; use targets "
                             "written for this model's module names (the trainer's example for it), and if the same "
                             "config worked before, check whether an update renamed the model's modules.")
_STALE_ADVICE = ("A batch lacks a cached tensor the training step reads ({evidence}): the cache was made by another "
                 "model, trainer version or with other options (for example without the image/clip conditioning "
                 "this mode needs); cache latents and text-encoder outputs again with this run's settings.")

# Exception types (the last dotted part) that name the kind on their own.
_TYPES: dict[str, tuple[str, str]] = {
    **dict.fromkeys(("ModuleNotFoundError", "ImportError"), ("dependency_error", _DEPENDENCY_ADVICE)),
    **dict.fromkeys(("FileNotFoundError", "IsADirectoryError", "NotADirectoryError", "RepositoryNotFoundError",
                     "EntryNotFoundError", "LocalEntryNotFoundError", "RevisionNotFoundError", "GatedRepoError"),
                    ("missing_files", _MISSING_ADVICE)),
    **dict.fromkeys(("SafetensorError", "UnpicklingError"), ("missing_files", _CORRUPT_ADVICE)),
    **dict.fromkeys(("TomlDecodeError", "TOMLDecodeError", "ScannerError", "ParserError", "ComposerError",
                     "MultipleInvalid", "ConfigAttributeError", "ConfigKeyError", "MissingMandatoryValue",
                     "InterpolationResolutionError", "ArgumentError"), ("config_error", _CONFIG_ADVICE)),
    "MemoryError": ("host_oom", _HOST_ADVICE),
}
# Message shapes of the standard library's, torch's and the Hugging Face libraries' errors, whatever the type.
# A module without the attribute the code asks for is a library of another version; the interpreter quotes the
# module's name, the Hugging Face libraries' lazy modules (transformers, diffusers) do not.
_SHAPES: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (re.compile(r"DefaultCPUAllocator|paging file is too small|\[WinError 1455\]|std::bad_alloc|"
                r"Cannot allocate memory"), "host_oom", _HOST_ADVICE),
    (re.compile(r"^module '?[\w.]+'? has no attribute|partially initialized module|got an unexpected keyword "
                r"argument|requires the [\w\s-]+ librar(?:y|ies) but (?:it was|they were) not found|"
                r"(?i:please install|pip install|is not installed|requires? [\w.-]+\s*[<>=]=?\s*\d|compiled without|"
                r"not compiled with|DLL load failed|error loading \S+\.dll|\[WinError 12[67]\]|"
                r"Could not run '[\w:.]+' with arguments from the '\w+' backend|No CUDA GPUs are available)"),
     "dependency_error", _DEPENDENCY_ADVICE),
    (re.compile(r"Error while deserializing header|PytorchStreamReader failed|failed finding central directory|"
                r"invalid load key|(?i:file is (?:truncated|corrupt))"), "missing_files", _CORRUPT_ADVICE),
    (re.compile(r"No such file or directory|does not appear to have a file named|no file named \S+ found in "
                r"directory|is not a local folder and is not a valid model identifier|Can't load [\w ]+ for '|"
                r"We couldn't connect to '[^']+' to load|Cannot access gated repo|(?:401|403) Client Error"),
     "missing_files", _MISSING_ADVICE),
    (re.compile(r"\b\d+ validation errors? for \w+|Invalid (?:user )?config|extra keys not allowed|"
                r"required (?:key|property|option|argument)"), "config_error", _CONFIG_ADVICE),
    # torch.optim's refusal of an empty parameter list: the adapter selected no weight to train.
    (re.compile(r"optimizer got an empty parameter list"), "config_error", _NOTHING_TRAINABLE_ADVICE),
    # An empty dataset: "no <items> found/discovered/loaded/...", "0 images found", "dataset ... is empty". A media
    # file that exists and does not decode is left to the crash it raises (tests/unit/trainer_log/test_missing_media).
    (re.compile(r"(?i)\bno (?:valid |training |usable )?(?:images?|videos?|samples?|files?|data|items?|captions?|"
                r"media)\b(?: \w+){0,2} (?:were |was |could be )?(?:found|discovered|detected|loaded|available)|"
                r"\b(?:found|loaded) 0 (?:images|videos|samples|files|items)\b|\bdata ?set\b.{0,40}\bis empty\b"),
     "dataset_error", _DATASET_ADVICE),
)
# A KeyError on a cached tensor's key (latents, embeddings, text-encoder outputs): the cache lacks it.
_CACHED_KEY_RE = re.compile(
    r"(?i)^['\"][\w.]*(?:latent|embed|text_encoder|encoder_hidden|cache|\bte_|_te\b)[\w.]*['\"]$")


def exception_failure(lines: list[str]) -> Finding | None:
    """The kind the root exception's type or message shape implies, with its advice; None when neither maps."""
    found = root_exception(lines)
    if found is None:
        return None
    short = found.type.rsplit(".", 1)[-1]
    evidence = found.line.strip()
    mapped = next(((kind, advice) for pattern, kind, advice in _SHAPES if pattern.search(found.message)), None)
    if mapped is None and short in _TYPES:
        mapped = _TYPES[short]
    if mapped is None and short == "KeyError" and _CACHED_KEY_RE.match(found.message):
        mapped = ("stale_embeddings", _STALE_ADVICE)
    if mapped is None and short in ("ValidationError",) and found.type != short:
        mapped = ("config_error", _CONFIG_ADVICE)  # pydantic's, jsonschema's, omegaconf's: a schema refused data
    if mapped is None:
        return None
    kind, advice = mapped
    return Finding(kind, evidence, [FixStep(None, None, advice.format(evidence=evidence))])
