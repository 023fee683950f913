"""The engine's own memory sampler: GPU memory through nvidia-smi per label, host RSS of a process tree."""

from __future__ import annotations

import os
import time

from ltx_pipeline.autotune.vram_sampler import ResourceSampler, nvidia_smi_reader, process_tree_rss


def test_nvidia_smi_reader_keeps_the_trials_gpus_and_skips_odd_lines(fake_smi) -> None:
    smi = fake_smi("0, 1024\n1, 30000\n2, [N/A]\n")
    assert nvidia_smi_reader(smi, [0])() == {0: 1024.0}
    assert nvidia_smi_reader(smi, [0, 1, 2])() == {0: 1024.0, 1: 30000.0}
    assert nvidia_smi_reader(fake_smi("", exit_code=9))() == {}


def test_peaks_are_split_by_label_in_trainer_gb(monkeypatch) -> None:
    readings = iter([{0: 2048.0}, {0: 4096.0}, {0: 3072.0}, {0: 1024.0}])
    sampler = ResourceSampler(lambda: next(readings), pid=os.getpid())
    sampler.sample()
    sampler.sample()  # the validation pass peaks at 4 GB
    sampler.set_label("training")
    sampler.sample()
    sampler.sample()
    assert sampler.peak_gb("validation") == 4.0 and sampler.peak_gb("training") == 3.0
    assert sampler.host_peak_bytes > 10 * 1024**2  # this test process's own resident memory


def test_the_thread_samples_at_least_twice_a_second(fake_smi, monkeypatch) -> None:
    monkeypatch.setenv("LTX_PIPELINE_NVIDIA_SMI", fake_smi("0, 512\n"))
    with ResourceSampler(nvidia_smi_reader(None, [0]), interval_s=0.25) as sampler:
        time.sleep(1.2)
    assert sampler.samples >= 3 and sampler.peak_gb("validation") == 0.5
    assert sampler.peak_gb("training") is None


def test_host_rss_of_a_missing_process_is_zero() -> None:
    assert process_tree_rss(2**22 + 12345) == 0
    assert process_tree_rss(os.getpid()) > 0
