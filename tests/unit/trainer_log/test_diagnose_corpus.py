"""The failure classifier on real-format logs (issue 34): every kind, launcher prefixes, phase lines.

The fixtures under ``tests/fixtures/trainer_logs/diagnose/<kind>/`` are written from what the trainer,
accelerate/torchrun, torch and the kernel print; ``SOURCES.md`` there names the source of each format.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ltx_pipeline.trainer_log import FAILURE_KINDS, canonical_kind, classify_failure, failure_tail

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "trainer_logs" / "diagnose"
OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
       "79.19 GiB of which 1.02 GiB is free.")


def _rich(msg: str, level: str = "INFO", where: str = "trainer.py:191") -> str:
    return f"{level:<8} {msg}" + " " * 30 + where


def _classify(name: str, exit_code: int | None = 1, signal: int | None = None, config: dict | None = None):
    return classify_failure(exit_code, signal, failure_tail(CORPUS / name), config=config)


# (fixture, exit code, signal, kind, phase, rank, a piece of the evidence)
CASES = [
    ("oom_validation/precompute_embeddings_2gpu.log", 1, None, "oom_validation", "embedding_precomputation", 1,
     "CUDA out of memory"),
    ("oom_validation/periodic_sampling_2gpu.log", 1, None, "oom_validation", "validation_sampling", 0,
     "CUDA out of memory"),
    ("oom_validation/offloaded_optimizer.log", 1, None, "oom_validation", "validation_sampling", None,
     "CUDA out of memory"),
    ("oom_training/backward_rank1.log", 1, None, "oom_training", "training", 1, "CUDA out of memory"),
    ("oom_training/first_step.log", 1, None, "oom_training", "training", None, "CUDA out of memory"),
    ("oom_training/quantizing_model.log", 1, None, "oom_training", "model_loading", None, "256.00 MiB"),
    ("host_oom/dmesg_oom_killer.log", 137, None, "host_oom", "training", None, "Killed process 48290"),
    ("host_oom/journal_oom_killer.log", 137, None, "host_oom", "embedding_precomputation", None,
     "Out of memory: Killed process 7713"),
    ("host_oom/dataloader_worker_rank1.log", 1, None, "host_oom", "training", 1, "is killed by signal: Killed"),
    ("killed/sigkill_no_evidence.log", 137, None, "killed", "training", None, "killed (SIGKILL)"),
    ("killed/torchrun_signal9.log", 137, None, "killed", "training", None, "killed (SIGKILL)"),
    ("killed/slurm_cancelled.log", None, 9, "killed", "training", None, "killed (SIGKILL)"),
    ("shm_bus_error/unexpected_bus_error_rank0.log", 1, None, "shm_bus_error", None, 0, "Bus error"),
    ("shm_bus_error/sigbus_exit.log", 135, None, "shm_bus_error", "training", None, "SIGBUS"),
    ("shm_bus_error/shm_too_small.log", 135, None, "shm_bus_error", None, None, "Bus error"),
    ("nan_loss/plain_print_loss_nan.log", 1, None, "nan_loss", None, None, "loss: nan"),
    ("nan_loss/tqdm_loss_eq_nan.log", 1, None, "nan_loss", None, None, "loss=nan"),
    ("nan_loss/loss_is_nan_rank0.log", 1, None, "nan_loss", None, 0, "Loss is NaN"),
    ("config_error/unknown_fields.log", 1, None, "config_error", None, None, "3 validation errors"),
    ("config_error/model_level_rank0.log", 1, None, "config_error", None, 0, "1 validation error"),
    ("config_error/wrong_type.log", 1, None, "config_error", None, None, "1 validation error"),
    ("missing_files/data_root.log", 1, None, "missing_files", None, None, "Data root directory does not exist"),
    ("missing_files/checkpoint_not_found.log", 1, None, "missing_files", "model_loading", None, "Checkpoint not found"),
    ("missing_files/latents_dir_rank0.log", 1, None, "missing_files", None, 0, "Required latents directory"),
    ("dependency_error/module_not_found.log", 1, None, "dependency_error", None, None, "No module named 'ltx_trainer'"),
    ("dependency_error/libcudart_rank0.log", 1, None, "dependency_error", None, 0, "libcudart.so.12"),
    ("dependency_error/driver_too_old.log", 1, None, "dependency_error", "model_loading", None,
     "Found no NVIDIA driver"),
    ("dependency_error/transformers_too_old.log", 1, None, "dependency_error", "embedding_precomputation", None,
     "does not recognize this architecture"),
    ("dependency_error/state_dict_mismatch_rank0.log", 1, None, "dependency_error", "model_loading", 0,
     "size mismatch for patchify_proj.weight"),
    ("dataset_error/bucket_longer_than_clip.log", 1, None, "dataset_error", None, None, "<= 57 frames"),
    ("dataset_error/image_dataset_video_buckets.log", 1, None, "dataset_error", None, None, "<= 1 frames"),
    ("dataset_error/audio_latents_missing_rank1.log", 1, None, "dataset_error", None, 1, "'audio_latents': 0"),
    ("dataset_error/no_valid_samples_audio.log", 1, None, "dataset_error", None, None, "No valid samples found"),
    ("stale_embeddings/ltx_video_conditions.log", 1, None, "stale_embeddings", "training", None,
     "KeyError: 'video_prompt_embeds'"),
    ("stale_embeddings/mat1_mat2_rank0.log", 1, None, "stale_embeddings", "training", 0, "mat1 and mat2"),
    ("stale_embeddings/tensor_size_first_step.log", 1, None, "stale_embeddings", "training", None,
     "size of tensor a (1024)"),
    ("crash/stack_equal_size.log", 1, None, "crash", None, None, "stack expects each tensor"),
    ("crash/segfault.log", 1, None, "crash", "training", None, "Segmentation fault"),
    ("crash/nccl_timeout_rank1.log", 1, None, "crash", "training", 1, "Watchdog caught collective operation"),
]


@pytest.mark.parametrize(("name", "exit_code", "signal", "kind", "phase", "rank", "evidence"), CASES,
                         ids=[case[0] for case in CASES])
def test_corpus(name: str, exit_code: int | None, signal: int | None, kind: str, phase: str | None,
                rank: int | None, evidence: str) -> None:
    failure = _classify(name, exit_code, signal)
    assert (failure.kind, failure.phase, failure.rank) == (kind, phase, rank), failure
    assert evidence in failure.evidence
    assert failure.fix, "every failure proposes at least one step"


def test_every_kind_has_three_real_format_cases_and_every_fixture_is_tested() -> None:
    on_disk = {str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*.log")}
    assert on_disk == {case[0] for case in CASES}
    for kind in FAILURE_KINDS:
        assert sum(case[3] == kind for case in CASES) >= 3, kind
    assert sum(case[5] is not None for case in CASES) >= 10  # multi-process variants


# -- one named test per pattern of issue 34 ---------------------------------------------------------------

def test_validation_oom_after_the_precompute_line_is_a_validation_oom() -> None:
    # No frame at all: only the trainer's own phase line says the text encoder was caching validation prompts.
    lines = [_rich("Pre-computing embeddings for 2 validation prompts...", where="validation_runner.py:346"), OOM]
    failure = classify_failure(1, None, lines)
    assert (failure.kind, failure.phase) == ("oom_validation", "embedding_precomputation")
    assert failure.fix[0].path == "acceleration.load_text_encoder_in_8bit"
    # The prompts are cached in the trainer's constructor, before the transformer and the optimizer exist, one
    # at a time: sampling settings and the optimizer offload cannot help, so they are not offered.
    paths = {step.path for step in failure.fix}
    assert not paths & {"optimization.batch_size", "validation.video_dims", "validation.inference_steps",
                        "acceleration.offload_optimizer_during_validation"}, paths


def test_a_validation_oom_with_the_offload_already_on_does_not_offer_it_again() -> None:
    # The trainer logs "Offloading optimizer state to CPU" only when the offload is on.
    lines = [_rich("Offloading optimizer state to CPU (3.1 GB)", where="trainer.py:848"), OOM]
    failure = classify_failure(1, None, lines)
    assert failure.kind == "oom_validation"
    assert "acceleration.offload_optimizer_during_validation" not in {step.path for step in failure.fix}
    without = classify_failure(1, None, [_rich("Loading video VAE decoder for validation", where="trainer.py:870"),
                                         OOM])
    assert without.kind == "oom_validation"
    assert "acceleration.offload_optimizer_during_validation" in {step.path for step in without.fix}


def test_rank_prefixed_lines_are_read_and_the_failing_rank_reported() -> None:
    failure = _classify("oom_validation/periodic_sampling_2gpu.log")
    assert (failure.kind, failure.rank) == ("oom_validation", 0)
    assert not failure.evidence.startswith("[rank")
    prefixed = ["[rank1]: Traceback (most recent call last):",
                '[rank1]:   File "/x/ltx_trainer/trainer.py", line 225, in train',
                "[rank1]:     output = self._training_step(batch)", f"[rank1]: {OOM}"]
    failure = classify_failure(1, None, prefixed)
    assert (failure.kind, failure.rank) == ("oom_training", 1)


@pytest.mark.parametrize("name", ["dependency_error/module_not_found.log", "dependency_error/libcudart_rank0.log",
                                  "dependency_error/driver_too_old.log", "dependency_error/transformers_too_old.log",
                                  "dependency_error/state_dict_mismatch_rank0.log"])
def test_environment_failures_are_dependency_errors(name: str) -> None:
    failure = _classify(name)
    assert failure.kind == "dependency_error"
    assert "Unclassified" not in failure.fix[0].reason


def test_import_error_and_old_kind_name() -> None:
    line = ("ImportError: cannot import name 'Gemma3ForConditionalGeneration' from 'transformers' "
            "(/venv/lib/python3.11/site-packages/transformers/__init__.py)")
    failure = classify_failure(1, None, [line])
    assert failure.kind == "dependency_error"
    assert canonical_kind("environment") == "dependency_error"  # stored by earlier versions
    assert canonical_kind("oom_training") == "oom_training" and canonical_kind(None) is None


def test_bucket_longer_than_the_clips() -> None:
    failure = _classify("dataset_error/bucket_longer_than_clip.log")
    assert failure.kind == "dataset_error"
    assert '"960x544x57"' in failure.fix[0].reason  # (frames, height, width) printed, WxHxF asked for


def test_image_dataset_given_video_buckets() -> None:
    failure = _classify("dataset_error/image_dataset_video_buckets.log")
    assert failure.kind == "dataset_error" and "768x768x1" in failure.fix[0].reason


def test_audio_latents_missing() -> None:
    config = {"training_strategy": {"name": "text_to_video", "with_audio": True}}
    failure = _classify("dataset_error/audio_latents_missing_rank1.log", config=config)
    assert failure.kind == "dataset_error" and "--with-audio" in failure.fix[0].reason
    assert [(s.path, s.value) for s in failure.config_changes] == [("training_strategy.with_audio", False)]


def test_cached_embeddings_from_another_model_are_stale() -> None:
    config = {"data": {"preprocessed_data_root": "/data/pre"}, "model": {"model_path": "/m/ltx2.safetensors",
                                                                        "text_encoder_path": "/m/gemma"}}
    failure = _classify("stale_embeddings/mat1_mat2_rank0.log", config=config)
    assert failure.kind == "stale_embeddings" and failure.rank == 0
    assert "/data/pre/conditions" in failure.fix[0].reason and "--text-encoder-path /m/gemma" in failure.fix[0].reason
    # The same shape error after steps were logged is no stale cache: it is left unclassified.
    step = "Step 20/100 - Loss: 0.2000, LR: 1.00e-04, Time/Step: 1.00s, Total Time: 0h 2m"
    later = [_rich(step, where="trainer.py:307"),
             *failure_tail(CORPUS / "stale_embeddings/mat1_mat2_rank0.log")[3:]]
    assert classify_failure(1, None, later).kind == "crash"


def test_kernel_oom_killer_is_host_oom_not_cuda() -> None:
    failure = _classify("host_oom/dmesg_oom_killer.log", 137)
    assert failure.kind == "host_oom"
    assert "host ran out of RAM" in failure.fix[0].reason
    bare = classify_failure(1, None, ["[12345.678901] Out of memory: Killed process 4242 (python) total-vm:1kB"])
    assert bare.kind == "host_oom"


@pytest.mark.parametrize("line", ["epoch 3 loss: nan", "100%|██| 10/10 [00:10<00:00, loss=nan]",
                                  "ValueError: Loss is NaN", "step 7 train_loss=inf"])
def test_nan_in_other_formats(line: str) -> None:
    assert classify_failure(1, None, [line]).kind == "nan_loss"


def test_a_weak_phase_line_is_refined_by_frames_a_strong_one_is_not() -> None:
    # "Starting training..." with the step-0 validation expected says validation; the frames say the step.
    started = [_rich("🚀 Starting training..."), "Traceback (most recent call last):",
               '  File "/x/trainer.py", line 225, in train', "    output = self._training_step(batch)", OOM]
    assert classify_failure(1, None, started).phase == "training"
    offloaded = [_rich("Offloading optimizer state to CPU (2.0 GB)", where="trainer.py:848"), *started[1:]]
    assert classify_failure(1, None, offloaded).phase == "validation_sampling"


def test_oom_while_loading_puts_smaller_weights_first() -> None:
    failure = _classify("oom_training/quantizing_model.log", config={"model": {"training_mode": "lora"}})
    assert failure.config_changes[0].path == "acceleration.quantization"
