"""``diagnose`` on real users' failure logs from public issue threads (issue 43, point 10).

``tests/fixtures/trainer_logs/corpus/corpus.json`` names each log's thread, the cause the thread found, the
failure kind that cause is, its split and its batch: a third of the logs (by a hash of their path, fixed before
the classifier was first run on them) were held out while the classifier was generalised. Batch 2 was gathered
after batch 1's work, batch 3 after batch 2's, batch 4 after batch 3's, batch 5 after the classifier learnt to read
the root exception's type and logging headers generally (issue 43, point 10), batch 6 after batch 5's, batch 7
(from other image/video trainers and the libraries under them) after batch 6's, batch 8 (SimpleTuner, ai-toolkit;
all three in the build split) after batch 7's, batch 9 (one facechain log, gathered beside batch 8) after batch 8's,
batch 10 (issue threads and other pages; one holdout log) after batch 9's and the libraries' vocabulary, batch 11
(kohya_ss, OneTrainer, LoRA_Easy_Training_Scripts, ComfyUI trainer nodes, fast-stable-diffusion, VeOmni) after
batch 10's, batch 12 (SimpleTuner, ai-toolkit, sd-scripts, kohya_ss, diffusers; mostly threads a fix PR closed)
after batch 11's, batch 13 (musubi-tuner and its LTX-2 fork, diffusion-pipe, SimpleTuner, ai-toolkit, OneTrainer)
after batch 12's, batch 14 (SimpleTuner and musubi-tuner holdout logs, two install/environment logs: a front
end's pip refusal, a container image's auto-update) after batch 13's, batch 15 (training runs from trackers no
earlier batch used: DreamBooth, LLM, diffusion and video-recognition trainers, a fastai container, cogvideox-factory)
after batch 14's, batch 16 (training runs built on torch/transformers/peft/trl/DeepSpeed from trackers no earlier
batch used: LLM fine-tuning scripts, detection/segmentation/re-id trainers, an autoregressive image model) after batch
15's; each was first measured with the classifier frozen (its "unseen" figure, in corpus.json). Every
build log must get its thread's cause, except the few listed in BUILD_MISSES (no general mechanism reads them; a
strict xfail, so one that starts passing is noticed); each batch's holdout must keep at least the figure measured
once at the end. A log is read as ``diagnose LOG`` reads it: its failure tail, with no exit status given.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ltx_pipeline.trainer_log import FAILURE_KINDS, classify_failure, failure_tail

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "trainer_logs" / "corpus"
LOGS: list[dict[str, Any]] = json.loads((CORPUS / "corpus.json").read_text(encoding="utf-8"))["logs"]
BUILD = [log for log in LOGS if log["split"] == "build"]
HOLDOUT = [log for log in LOGS if log["split"] == "holdout"]
# Per batch, measured once after that batch's build split passed: batch 1 8 of 8, batch 2 2 of 3, batch 3 3 of 6,
# batch 4 3 of 3; batch 5 1 of 1, batch 6 3 of 4 and batch 7 2 of 4 (each measured unseen, before any change for it);
# batches 8 and 9 have no holdout log (the hash rule put their four logs in the build split); batch 10 has one;
# batch 11 2 of 3 (2 of 3 unseen too); batch 12 2 of 4 (2 of 4 unseen too); batch 13 2 of 4 (2 of 4 unseen too);
# batch 14 2 of 2 (2 of 2 unseen too); batch 15 2 of 3 (2 of 3 unseen too); batch 16 4 of 4 (4 of 4 unseen too).
HOLDOUT_MEASURED = {"1": 8, "2": 2, "3": 3, "4": 3, "5": 1, "6": 3, "7": 2, "8": 0, "9": 0, "10": 1, "11": 2,
                    "12": 2, "13": 2, "14": 2, "15": 2, "16": 4}
# Build logs whose thread's cause no general mechanism reads (fitting their phrases would not generalise).
BUILD_MISSES = {
    "config_error/diffusion-pipe-75-missing-enable-wandb-key.log": "a KeyError on a config key, named only in a title",
    "config_error/onetrainer-30-sdxl-embedding-unsupported.log": "an unsupported model/method pair, read as a None",
    "dependency_error/ai-toolkit-215-diffusers-device-mismatch.log": "a device mismatch; in ai-toolkit #1026 a bug",
    "config_error/kohya_ss-164-gtx10-8bit-adam-no-kernel.log": "no kernel image, fixed by another optimizer",
    "config_error/kohya_ss-2737-lora-given-as-base-model.log": "a state_dict mismatch from a LoRA given as model",
    "oom_training/simpletuner-859-vae-oom-while-caching.log": "cache files missing; the VAE OOM is only in the title",
    "dependency_error/facechain-469-datasets-drops-caption-column.log": "a missing dataset column; the cause a library",
    "dataset_error/sd-scripts-1532-not-directory-unpack.log": "a not-a-folder refusal raised as an unpacking bug",
    "crash/onetrainer-61-normalize-masked-loss-without-mask.log": "a batch key the loss reads; else a stale cache",
    "crash/simpletuner-1097-sd15-lora-save-transformer-kwarg.log": "an unexpected keyword: a bug here, else a version",
    "config_error/kohya-trainer-246-bf16-on-t4.log": "a library's message retyped alone in prose: no type",
    "dataset_error/mmaction2-1001-kinetics-video-without-stream.log": "an undecodable video: a crash by design",
    "dataset_error/replicate-dreambooth-43-preview-converted-png-unreadable.log": "an undecodable image: a crash",
    "dependency_error/fast-stable-diffusion-705-old-pillow-unidentified-jpg.log": "the same PIL refusal: old Pillow",
}
TRACKERS = ("Lightricks/", "ostris/ai-toolkit", "tdrussell/diffusion-pipe", "bghira/SimpleTuner", "kohya-ss/",
            "bmaltais/kohya_ss", "bmaltais/musubi-tuner-gui", "huggingface/finetrainers", "Nerogar/OneTrainer",
            "huggingface/diffusers", "hollowstrawberry/kohya-colab", "Linaqruf/kohya-trainer", "Akegarasu/lora-scripts",
            "derrian-distro/LoRA_Easy_Training_Scripts", "sdbds/musubi-tuner-scripts",
            "zylo117/Yet-Another-EfficientDet-Pytorch", "modelscope/facechain",
            "XavierXiao/Dreambooth-Stable-Diffusion", "kijai/ComfyUI-FluxTrainer",
            "LarryJane491/Lora-Training-in-Comfy", "TheLastBen/fast-stable-diffusion", "ByteDance-Seed/VeOmni",
            "AkaneTendo25/musubi-tuner", "ai-dock/onetrainer", "replicate/dreambooth", "databrickslabs/dolly",
            "hiyouga/LlamaFactory", "open-mmlab/mmaction2", "karpathy/nanoGPT", "openai/guided-diffusion",
            "fastai/docker-containers", "gensyn-ai/rl-swarm", "hezhangsprinter/DCPDN", "Lightning-AI/litgpt",
            "eosphoros-ai/DB-GPT-Hub", "instructlab/instructlab", "shibing624/MedicalGPT",
            "facebookresearch/detectron2", "CSAILVision/semantic-segmentation-pytorch", "LTH14/mar", "urchade/GLiNER",
            "XiangLi1999/PrefixTuning", "layumi/Person_reID_baseline_pytorch", "deepspeedai/DeepSpeed")
# Pages other than issue threads (batch 10 searched Q&A and vendor pages too): a user's log with the fix that worked.
PAGES = ("https://www.gongjiyun.com/docs/",)


def _kind(log: dict[str, Any]) -> str:
    return classify_failure(None, None, failure_tail(CORPUS / log["file"])).kind


def test_the_corpus_is_complete_sourced_and_split() -> None:
    assert {log["file"] for log in LOGS} == {str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*.log")}
    for log in LOGS:
        assert log["kind"] in FAILURE_KINDS and log["file"].startswith(log["kind"] + "/"), log
        assert (log["url"].startswith("https://github.com/") and any(t in log["url"] for t in TRACKERS)) or \
            log["url"].startswith(PAGES), log
        assert log["cause"] and log["split"] in ("build", "holdout"), log
        assert log["batch"] in HOLDOUT_MEASURED, log
    assert len(HOLDOUT) * 4 >= len(LOGS) and len({log["kind"] for log in LOGS}) >= 8


def _expected_to_pass(log: dict[str, Any]) -> Any:
    reason = BUILD_MISSES.get(log["file"])
    return pytest.param(log, marks=pytest.mark.xfail(strict=True, reason=reason)) if reason else log


@pytest.mark.parametrize("log", [_expected_to_pass(log) for log in BUILD], ids=[log["file"] for log in BUILD])
def test_every_build_log_gets_its_thread_s_cause(log: dict[str, Any]) -> None:
    assert _kind(log) == log["kind"], log["cause"]


def test_each_batch_s_holdout_keeps_its_measured_figure() -> None:
    for batch, measured in sorted(HOLDOUT_MEASURED.items()):
        figures = {}
        for split in ("build", "holdout"):
            logs = [log for log in LOGS if log["batch"] == batch and log["split"] == split]
            figures[split] = (sum(_kind(log) == log["kind"] for log in logs), len(logs))
        print(f"real corpus, batch {batch}: build {figures['build'][0]}/{figures['build'][1]}, "
              f"holdout {figures['holdout'][0]}/{figures['holdout'][1]}")
        assert figures["holdout"][0] >= measured, batch


OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
STEP = ["Traceback (most recent call last):", '  File "/x/ltx_trainer/trainer.py", line 225, in train',
        "    output = self._training_step(batch)", OOM]


def test_slurm_srun_labels_are_stripped_and_name_the_rank() -> None:
    # `srun --label` puts each task's number before its lines; the frames under it name the phase.
    failure = classify_failure(1, None, [f"1: {line}" for line in STEP])
    assert (failure.kind, failure.phase, failure.rank) == ("oom_training", "training", 1)
    assert failure.evidence == OOM
    nested = classify_failure(1, None, [f"0: [rank3]: {line}" for line in STEP])
    assert (nested.phase, nested.rank, nested.evidence) == ("training", 0, OOM)


@pytest.mark.parametrize("prefix", ["[sd-scripts] ", "Training STDERR: ", "[08:03:35] [STDERR] ",
                                    "[MusubiTuner WanLoRATrainer] TRAINER: "])
def test_front_ends_tags_are_stripped(prefix: str) -> None:
    failure = classify_failure(1, None, [prefix + line for line in STEP])
    assert (failure.kind, failure.phase, failure.evidence) == ("oom_training", "training", OOM)


@pytest.mark.parametrize(("line", "kind"), [
    ("[2025-01-14 20:00:34,203] [ERROR] [launch.py:325:sigkill_handler] ['python', 'train.py'] exits with return "
     "code = -9", "killed"),
    ("subprocess.CalledProcessError: Command '['python', 'train.py']' died with <Signals.SIGKILL: 9>.", "killed"),
    ("train.py: error: unrecognized arguments: --lr=1e-4", "config_error"),
    ("Error running job: No module named 'lycoris.kohya'", "dependency_error"),
    ("Error running job: cannot import name 'WanTransformer3DModel' from 'diffusers'", "dependency_error"),
    ("AssertionError: ConcatenatedBatchedDataset is empty.", "dataset_error"),
    # Schema libraries' refusals of a config (voluptuous in kohya's and musubi's scripts, pydantic, jsonschema).
    ("voluptuous.error.MultipleInvalid: extra keys not allowed @ data['datasets'][0]['subsets']", "config_error"),
    ("pydantic_core._pydantic_core.ValidationError: 2 validation errors for TrainerConfig", "config_error"),
    ("jsonschema.exceptions.ValidationError: 'resolution' is a required property", "config_error"),
    # torch's sampler refusing a dataset with no sample.
    ("ValueError: num_samples should be a positive integer value, but got num_samples=0", "dataset_error"),
    # torch.compile's toolchain: a compiler failure, or a truncated cached kernel.
    ("torch._inductor.exc.InductorError: CppCompileError: C++ compile error", "dependency_error"),
    ("triton.compiler.errors.CompilationError: at 12:4:", "dependency_error"),
    ("terminate called after throwing an instance of 'std::runtime_error'  what():  expected ident but found "
     "'eof' here:", "dependency_error"),
])
def test_other_trainers_and_launchers_words(line: str, kind: str) -> None:
    assert classify_failure(None, None, [line]).kind == kind


LOADING = "Loading checkpoint shards:  20%|##        | 1/5 [00:00<00:00,  4.55it/s]"


def test_a_silent_death_mid_way_through_loading_weights_is_host_memory() -> None:
    # No traceback, no error: the log stops inside an unfinished loading bar, as the OOM killer leaves it.
    failure = classify_failure(None, None, ["Loading text encoder", LOADING])
    assert (failure.kind, failure.evidence) == ("host_oom", LOADING)
    assert "OOM killer" in failure.fix[0].reason


@pytest.mark.parametrize("lines", [
    ["Loading text encoder", "Loading checkpoint shards: 100%|##########| 5/5 [00:03<00:00,  1.52it/s]"],  # finished
    ["Traceback (most recent call last):", LOADING],  # Python reported something: not a silent death
    [LOADING, "RuntimeError: CUDA error: an illegal memory access was encountered"],
])
def test_a_finished_bar_or_a_printed_error_is_not_a_silent_death(lines: list[str]) -> None:
    assert classify_failure(None, None, lines).kind != "host_oom"


def test_an_unfinished_bar_with_an_exit_status_is_left_to_the_status() -> None:
    assert classify_failure(None, 9, ["Loading text encoder", LOADING]).kind == "killed"


# Batch 4's patterns. Each case: lines a real log of that kind shows, the kind, and a near miss that must not read so.
@pytest.mark.parametrize(("lines", "kind", "near_miss"), [
    # A trainer's own NaN check on a tensor: the overflow caught before it reaches the loss.
    (["inf values detected in model output at step 3"], "nan_loss", ["Checking latents for NaN values"]),
    # transformers/diffusers/huggingface_hub: a model folder or (gated) Hub repo without the file the loader reads.
    (["OSError: /models/wan does not appear to have a file named model_index.json."], "missing_files",
     ["Loading the file named model_index.json from /models/wan"]),
    # The model code's own check that an optional compiled package imported.
    (["Traceback (most recent call last):", '  File "/w/attention.py", line 9, in attend', "    assert HAS_XFORMERS",
      "           ^^^^^^^^^^^^", "AssertionError"], "dependency_error",
     ["Traceback (most recent call last):", '  File "/w/model.py", line 9, in forward',
      "    assert x.shape == y.shape", "AssertionError"]),
    # Files the dataset skipped as unreadable, then a failure with no exception of its own.
    (["WARNING: Skipping image /data/a.webp: failed to load it", "[ERROR] [launch.py:325:sigkill_handler] "
      "['python', 'train.py'] exits with return code = 1"], "dataset_error",
     ["WARNING: Skipping image /data/a.webp: failed to load it", "Traceback (most recent call last):",
      '  File "/w/train.py", line 9, in <module>', "RuntimeError: CUDA error: an illegal memory access"]),
    # Samples whose cached outputs the training config cannot find.
    (["WARNING: latent cache file not found: /cache/clip_0001_wan.safetensors"], "config_error",
     ["INFO: latent cache file not found, caching it now: /cache/clip_0001_wan.safetensors"]),
])
def test_batch_4_patterns_and_their_near_misses(lines: list[str], kind: str, near_miss: list[str]) -> None:
    assert classify_failure(None, None, lines).kind == kind
    assert classify_failure(None, None, near_miss).kind != kind


def test_nan_in_latents_points_at_the_vae_and_a_hub_file_at_the_token() -> None:
    nan = classify_failure(None, None, ["NaN detected in latents: /data/clip_0001.mp4"])
    assert nan.kind == "nan_loss" and "VAE" in nan.fix[0].reason
    hub = classify_failure(None, None, ["OSError: org/model does not appear to have a file named config.json."])
    assert "gated repo" in hub.fix[0].reason and "org/model has no config.json" in hub.fix[0].reason


# Generalised by mechanism, not by phrase: a logging setup's header in front of a record (a traceback is one
# record: its first line and its exception line carry the header, its frames do not), whatever the header's order.
@pytest.mark.parametrize("header", [
    "2024-08-21 21:15:08,041 [ERROR] (__main__) ",  # date, bracketed level, logger name
    "[2025-03-02 23:36:28,234] [ERROR] [launch.py:325:sigkill_handler] ",  # DeepSpeed's
    "ERROR:musubi_tuner.dataset.config_utils:",  # Python logging's default format
    "2024-01-01 10:00:00.123 | ERROR    | trainer:main:12 - ",  # loguru
])
def test_logging_headers_are_stripped_generally(header: str) -> None:
    lines = [line if line.startswith(" ") else header + line for line in STEP]
    failure = classify_failure(None, None, lines)
    assert (failure.kind, failure.phase, failure.evidence) == ("oom_training", "training", OOM)


# Prefixes on every physical line: a container's, a rank tag that lost its bracket in the paste, colour, a quote.
@pytest.mark.parametrize("prefix", ["trainer-1  | ", "rank0]: ", "\x1b[31m", "> "])
def test_line_prefixes_are_stripped_generally(prefix: str) -> None:
    failure = classify_failure(None, None, [prefix + line for line in STEP])
    assert (failure.kind, failure.phase, failure.evidence) == ("oom_training", "training", OOM)


def test_markdown_around_a_pasted_log_is_not_read_as_the_log() -> None:
    lines = ["I got this:", "```python", *STEP, "```", "and then **Error: Missing option '--resolution-buckets'.**"]
    assert classify_failure(None, None, lines[:-1]).evidence == OOM
    assert classify_failure(None, None, ["and got this error: **Error: Missing option '--steps'.**"]).kind == (
        "config_error")


def _traceback(*exception: str) -> list[str]:
    return ["Traceback (most recent call last):", '  File "/w/train.py", line 9, in main', "    run()", *exception]


# The root exception's TYPE and the standard message shapes of the libraries it comes from; each with a near miss
# (same log shape, another type) that must not read so.
@pytest.mark.parametrize(("exception", "kind", "near_miss"), [
    ("huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request ID: x)", "missing_files",
     "requests.exceptions.ConnectionError: ('Connection aborted.', RemoteDisconnected())"),
    ("safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge", "missing_files",
     "RuntimeError: Error while loading the optimizer"),
    ("AttributeError: module 'torch.library' has no attribute 'register_fake'", "dependency_error",
     "AttributeError: 'NoneType' object has no attribute 'shape'"),
    ("TypeError: FluxTransformer2DModel.forward() got an unexpected keyword argument 'txt_ids'", "dependency_error",
     "TypeError: forward() missing 1 required positional argument: 'x'"),
    ("OSError: [WinError 126] The specified module could not be found. Error loading \"c10.dll\"", "dependency_error",
     "OSError: [Errno 28] No space left on device"),
    ("RuntimeError: [enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: not enough memory: you tried to "
     "allocate 1073741824 bytes.", "host_oom", "RuntimeError: shape '[2, 3]' is invalid for input of size 7"),
    ("KeyError: 'latents_image'", "stale_embeddings", "KeyError: 'caption'"),
    ("Exception: No images were discovered by the bucket manager in the dataset: x.", "dataset_error",
     "Exception: The image was discovered to be too small: x."),
    ("omegaconf.errors.ConfigAttributeError: Key 'lr' is not in struct", "config_error",
     "ValueError: too many values to unpack (expected 2)"),
])
def test_the_root_exception_s_type_names_the_kind(exception: str, kind: str, near_miss: str) -> None:
    assert classify_failure(None, None, _traceback(exception)).kind == kind
    assert classify_failure(None, None, _traceback(near_miss)).kind == "crash"


def test_a_launcher_s_re_raise_and_a_cut_traceback_give_way_to_the_child_s_exception() -> None:
    child = _traceback("KeyError: 'latents_image'")
    launcher = ["Traceback (most recent call last):", '  File "/venv/bin/accelerate", line 8, in <module>',
                "    sys.exit(main())"]
    assert classify_failure(None, None, child + ["steps:   0%|  | 0/64"] + launcher).kind == "stale_embeddings"
    wrapped = child + _traceback("subprocess.CalledProcessError: Command '['python', 'train.py']' returned non-zero "
                                 "exit status 1.")
    failure = classify_failure(None, None, wrapped)
    assert (failure.kind, failure.evidence) == ("stale_embeddings", "KeyError: 'latents_image'")



def test_a_traceback_cut_after_its_raise_line_is_read_from_that_line() -> None:
    # Python prints the raising frame's source, then the exception line; a paste cut between them still names both.
    cut = ["Traceback (most recent call last):", '  File "/venv/torch/optim/optimizer.py", line 403, in __init__']
    failure = classify_failure(None, None, [*cut, '    raise ImportError("flash_attn is required for this model")'])
    assert (failure.kind, failure.evidence) == ("dependency_error",
                                                'raise ImportError("flash_attn is required for this model")')
    for near_miss in ("    raise e", "    raise RuntimeError(", '    print("raise ImportError(x)")'):
        assert classify_failure(None, None, [*cut, near_miss]).kind == "crash", near_miss
    # A complete traceback is read from its exception line, not from the raise statement above it.
    whole = [*cut, '    raise ImportError("x")', "ValueError: too many values to unpack (expected 2)"]
    assert classify_failure(None, None, whole).kind == "crash"


def test_an_optimizer_with_nothing_to_train_is_the_adapter_config() -> None:
    # torch.optim refuses an empty parameter list: the LoRA/LyCORIS targets matched no module of the model.
    failure = classify_failure(None, None, _traceback("ValueError: optimizer got an empty parameter list"))
    assert failure.kind == "config_error" and "matched no module" in failure.fix[0].reason
    assert classify_failure(None, None, _traceback("ValueError: optimizer got an empty batch")).kind == "crash"


def test_an_unclassified_crash_names_its_exception_not_the_prose_after_the_paste() -> None:
    lines = [*_traceback("AttributeError: 'NoneType' object has no attribute 'load'"), "",
             "Just picked the SDXL preset and tried to start training."]
    failure = classify_failure(None, None, lines)
    assert (failure.kind, failure.evidence) == ("crash", "AttributeError: 'NoneType' object has no attribute 'load'")


@pytest.mark.parametrize("line", [
    'Currently you get a "RuntimeError: No kernel image is available for execution on the device".',
    "RuntimeError: CUDA error: no kernel image is available for execution on the device",
    "CUDA driver version is insufficient for CUDA runtime version",
    "cuda driver version is insufficient for cuda runtime version",
])
def test_a_driver_or_kernel_image_message_is_read_whatever_its_case(line: str) -> None:
    # Batch 7: a user retyping or quoting the CUDA message in prose starts it with a capital.
    failure = classify_failure(None, None, ["Trying to train a LoRA.", line, "Thanks"])
    assert failure.kind == "dependency_error" and "GPU driver" in failure.fix[0].reason, line
    # Near miss: another "kernel image" sentence is not CUDA's.
    assert classify_failure(None, None, ["RuntimeError: No kernel image found in the archive"]).kind == "crash"


@pytest.mark.parametrize(("line", "package"), [
    # Pasted without its type (batch 7, sd-scripts #362), and torch's own wording for torchvision's ops.
    ("No such operator xformers::efficient_attention_forward_cutlass - did you forget to build xformers with "
     "`python setup.py develop`", "xformers"),
    ("RuntimeError: No such operator torchvision::nms", "torchvision"),
])
def test_an_operator_torch_does_not_know_is_an_extension_built_for_another_torch(line: str, package: str) -> None:
    failure = classify_failure(None, None, ["```", line, "```"])
    assert failure.kind == "dependency_error" and f"extension {package} registers no operators" in failure.fix[0].reason
    # Near miss: an application's own "No such operator" (no namespace::op) is not torch's dispatcher.
    assert classify_failure(None, None, ["ValueError: No such operator: choose add or sub"]).kind == "crash"


@pytest.mark.parametrize("line", [
    # The interpreter quotes the module's name; the Hugging Face lazy modules (diffusers, transformers) do not
    # (batch 8, ai-toolkit #266: diffusers older than the Wan classes the trainer imports).
    "AttributeError: module diffusers has no attribute AutoencoderKLWan. Did you mean: 'AutoencoderKL'?",
    "AttributeError: module transformers has no attribute Gemma3ForConditionalGeneration",
    "AttributeError: module 'torch.library' has no attribute 'register_fake'",
])
def test_a_module_without_the_attribute_asked_for_is_a_library_of_another_version(line: str) -> None:
    failure = classify_failure(None, None, ["when running the training script:", "", line])
    assert (failure.kind, failure.evidence) == ("dependency_error", line)
    # Near misses: an object (not a module) without an attribute is the code's own bug.
    for near_miss in ("AttributeError: 'NoneType' object has no attribute 'modules'",
                      "AttributeError: Namespace object has no attribute cache_file_suffix"):
        assert classify_failure(None, None, _traceback(near_miss)).kind == "crash", near_miss
