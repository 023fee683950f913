"""Model files recognised by content: safetensors headers, Gemma configs, the search and its messages."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from types import SimpleNamespace

import pytest

from ltx_pipeline.errors import BadInput
from ltx_pipeline.probing.model_files import gemma_model_type, safetensors_header
from ltx_pipeline.probing.models import check_model_path, default_model_dirs, find_model_files
from tests.conftest import GEMMA_CONFIG, write_safetensors

LLAMA_MESSAGE = "config.json says model_type 'llama'; LTX-2 needs a Gemma text encoder (model_type gemma3)"


def config_folder(path: Path, config: dict | str) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    return path


def raw_file(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def header_file(path: Path, header: object, data: bytes = b"", length: int | None = None) -> Path:
    raw = json.dumps(header).encode()
    return raw_file(path, struct.pack("<Q", len(raw) if length is None else length) + raw + data)


# ---- content rules -------------------------------------------------------------------------------

def test_a_real_safetensors_file_is_read_without_loading_it(tmp_path):
    numpy = pytest.importorskip("numpy")
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    path = tmp_path / "ltx-2.3-22b-dev.safetensors"
    safetensors_numpy.save_file({"a": numpy.zeros((3, 4), dtype="float32"), "b": numpy.ones(5, dtype="int64")},
                                str(path), metadata={"config": json.dumps({"transformer": {"num_layers": 1}})})
    header, why = safetensors_header(path)
    assert why is None and header is not None
    assert set(header) == {"a", "b", "__metadata__"} and header["a"]["shape"] == [3, 4]
    check = check_model_path(str(path), "checkpoint")
    assert (check.status, check.path, check.source) == ("ok", str(path), "option")
    search = find_model_files([tmp_path], env={})
    assert search.checkpoints == (str(path),) and search.rejected_checkpoints == ()


def test_the_conftest_helper_writes_a_file_safetensors_itself_reads(tmp_path):
    safe_open = pytest.importorskip("safetensors").safe_open
    path = write_safetensors(tmp_path / "x.safetensors")
    with safe_open(str(path), framework="numpy") as handle:
        assert list(handle.keys()) == ["weight"] and "transformer" in json.loads(handle.metadata()["config"])
    assert safetensors_header(path)[1] is None


@pytest.mark.parametrize(("data", "reason"), [
    (b"", "it is 0 bytes, too short"),
    (b"\x00" * 16, "it is 16 bytes and its first 8 bytes give a header length of 0"),
    (struct.pack("<Q", 500) + b"{}", "header length of 500"),
    (struct.pack("<Q", 4) + b"\xff\xfe{}", "header is not JSON"),
    (struct.pack("<Q", 7) + b"[1, 2] ", "not a JSON object"),
    (struct.pack("<Q", 2) + b"{}", "lists no tensors"),
], ids=["empty", "16-zero-bytes", "length-past-end", "not-utf8", "array", "no-tensors"])
def test_broken_headers_say_why(tmp_path, data, reason):
    header, why = safetensors_header(raw_file(tmp_path / "m.safetensors", data))
    assert header is None and why is not None and reason in why


def test_header_bound_is_100_mb_even_inside_a_larger_file(tmp_path):
    path = tmp_path / "big.safetensors"
    with path.open("wb") as handle:  # sparse: 200 MB on paper, a few bytes on disk
        handle.write(struct.pack("<Q", 150 * 2**20))
        handle.truncate(200 * 2**20)
    assert "header length of 157286400" in safetensors_header(path)[1]


@pytest.mark.parametrize(("header", "data", "reason"), [
    ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\x00" * 4, "describes 8 bytes of tensor data"),
    ({"w": {"dtype": "F32", "shape": [2]}}, b"", "without a valid dtype, shape and data_offsets"),
    ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}}, b"\x00" * 8, "without a valid"),
    ({"w": {"shape": [2], "data_offsets": [0, 8]}}, b"\x00" * 8, "without a valid"),
    ({"w": "nonsense"}, b"", "without a valid"),
    ({"__metadata__": "x", "w": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}}, b"\x00" * 4,
     "__metadata__ is not a JSON object"),
], ids=["truncated", "no-offsets", "reversed-offsets", "no-dtype", "not-an-object", "bad-metadata"])
def test_malformed_or_truncated_tensors_are_refused(tmp_path, header, data, reason):
    assert reason in safetensors_header(header_file(tmp_path / "m.safetensors", header, data))[1]


@pytest.mark.parametrize(("config", "model_type"), [
    ({"model_type": "gemma3", "text_config": {"model_type": "gemma3_text"}}, "gemma3"),
    ({"model_type": "gemma3_text"}, "gemma3_text"),
    ({"model_type": "gemma2"}, "gemma2"),
    ({"model_type": "Gemma4"}, "Gemma4"),
    ({"model_type": "llava", "text_config": {"model_type": "gemma2"}}, "gemma2"),
])
def test_gemma_configs_are_accepted(tmp_path, config, model_type):
    assert gemma_model_type(config_folder(tmp_path / "anything", config)) == (model_type, None)


@pytest.mark.parametrize(("config", "reason"), [
    ({"model_type": "llama"}, LLAMA_MESSAGE),
    ({"model_type": "llama", "text_config": {"model_type": "mistral"}}, LLAMA_MESSAGE),
    ({}, "config.json has no model_type; LTX-2 needs a Gemma"),
    ("{not json", "config.json is not valid JSON"),
    ("[1]", "config.json is not a JSON object"),
])
def test_other_configs_are_refused_naming_what_was_found(tmp_path, config, reason):
    folder = config_folder(tmp_path / "gemma-3-12b-it", config)
    model_type, why = gemma_model_type(folder)
    assert model_type is None and why is not None and why.startswith(str(folder)) and reason in why


def test_a_folder_without_config_is_not_gemma(tmp_path):
    (tmp_path / "gemma").mkdir()
    assert "has no config.json" in gemma_model_type(tmp_path / "gemma")[1]


# ---- the cases ---------------------------------------------------------------------------

def test_a_llama_folder_named_like_gemma_is_refused_with_what_it_is(tmp_path):
    folder = config_folder(tmp_path / "models" / "gemma-3-12b-it", {"model_type": "llama"})
    given = check_model_path(str(folder), "text_encoder")
    assert given.status == "missing" and given.detail == f"{folder}/{LLAMA_MESSAGE}"
    assert "--text-encoder-path" in given.next_step and "gemma-3" in given.next_step
    search = find_model_files([tmp_path / "models"], env={})
    assert search.text_encoders == () and search.rejected_text_encoders == (f"{folder}/{LLAMA_MESSAGE}",)
    found = check_model_path(None, "text_encoder", search)
    assert found.status == "missing" and f"{folder}/{LLAMA_MESSAGE}" in found.detail
    assert found.to_finding().item == "Gemma text encoder"


def test_a_zero_file_named_like_the_checkpoint_is_not_a_checkpoint(tmp_path):
    path = raw_file(tmp_path / "models" / "ltx-2.3-22b-dev.safetensors", b"\x00" * 16)
    given = check_model_path(str(path), "checkpoint")
    assert given.status == "missing" and not given.usable
    assert given.detail.startswith(f"{path} is not a valid safetensors file: it is 16 bytes")
    assert "download it again" in given.next_step and "--model-path" in given.next_step
    search = find_model_files([tmp_path / "models"], env={})
    assert search.checkpoints == () and len(search.rejected_checkpoints) == 1
    found = check_model_path(None, "checkpoint", search)
    assert found.status == "missing" and "refused: " + search.rejected_checkpoints[0] in found.detail


def test_nothing_found_lists_every_folder_searched(tmp_path):
    home, env_dir = tmp_path / "home", tmp_path / "x"
    env = {"LTX_MODELS_DIR": str(env_dir)}
    search = find_model_files(default_model_dirs(env, home), env=env)
    assert search.labels == ("/models", str(home / "models"), f"$LTX_MODELS_DIR={env_dir}")
    where = f"/models, {home / 'models'}, $LTX_MODELS_DIR={env_dir}"
    if not Path("/models").exists():
        checkpoint = check_model_path(None, "checkpoint", search)
        assert checkpoint.detail == (f"no LTX checkpoint (.safetensors with a valid header) in {where}; "
                                     "--model-path not given")
        assert checkpoint.status == "missing" and "huggingface-cli download" in checkpoint.next_step
        encoder = check_model_path(None, "text_encoder", search)
        assert encoder.detail == (f"no Gemma text encoder (a folder whose config.json has model_type gemma*) in "
                                  f"{where}; --text-encoder-path not given")
    rows = [f.to_dict() for f in find_model_files([tmp_path / "a", tmp_path / "b"], env={}).to_findings()]
    assert [r["status"] for r in rows] == ["missing", "missing"]
    assert all(f"in {tmp_path / 'a'}, {tmp_path / 'b'};" in r["detail"] for r in rows)
    assert check_model_path(None, "checkpoint").detail == "--model-path not given"  # no search: as before


def test_an_explicit_bad_model_path_is_reported(tmp_path):
    bogus = header_file(tmp_path / "ltx.safetensors", {"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})
    check = check_model_path(str(bogus), "checkpoint")
    assert check.status == "missing" and "describes 16 bytes of tensor data but only 0 follow" in check.detail
    assert check.to_finding().to_dict()["status"] == "missing"
    for wrong in ("model.ckpt", "folder/"):  # a path of the wrong type is still a BadInput
        (tmp_path / wrong).mkdir() if wrong.endswith("/") else (tmp_path / wrong).write_text("x")
        with pytest.raises(BadInput, match="must be a .safetensors file"):
            check_model_path(str(tmp_path / wrong), "checkpoint")
    missing = check_model_path(str(tmp_path / "gone.safetensors"), "checkpoint")
    assert missing.status == "missing" and "does not exist" in missing.detail


# ---- the search ----------------------------------------------------------------------------------

def test_find_model_files_by_content_and_depth(tmp_path):
    models = tmp_path / "models"
    write_safetensors(models / "ltx-2-19b-dev.safetensors", {})  # no metadata: the name decides
    write_safetensors(models / "sub" / "LTX-2.3-distilled.safetensors")
    write_safetensors(models / "sub" / "model.safetensors")  # LTX metadata: the content decides
    write_safetensors(models / "sub" / "deeper" / "ltx-too-deep.safetensors")
    write_safetensors(models / "random-model.safetensors", {})
    write_safetensors(models / "ltx-2.5-video-vae.safetensors", {"config": json.dumps({"vae": {}})})
    write_safetensors(models / "ltx-2.5-text-encoder-gemma.safetensors", {})
    raw_file(models / "ltx-broken.safetensors", b"\x00" * 16)
    raw_file(models / "not-a-model.safetensors", b"\x00" * 16)  # not named like a model: silently skipped
    (models / "ltx-notes.txt").write_text("x")
    config_folder(models / "gemma-3-12b-it", GEMMA_CONFIG)
    config_folder(models / "hub" / "text-encoder", {"model_type": "gemma3"})  # any name
    config_folder(models / "hub" / "gemma-llama", {"model_type": "llama"})
    qwen = config_folder(models / "qwen", {"model_type": "qwen2"})  # another model: not reported, not entered
    write_safetensors(qwen / "ltx-inside-a-model.safetensors")
    (models / "gemma-empty").mkdir()
    search = find_model_files([models, tmp_path / "absent"], env={})
    assert search.searched == search.labels == (str(models), str(tmp_path / "absent"))
    assert sorted(Path(p).name for p in search.checkpoints) == [
        "LTX-2.3-distilled.safetensors", "ltx-2-19b-dev.safetensors", "model.safetensors"]
    assert sorted(Path(p).name for p in search.text_encoders) == [
        "gemma-3-12b-it", "ltx-2.5-text-encoder-gemma.safetensors", "text-encoder"]
    assert [Path(r.split(" ")[0]).name for r in search.rejected_checkpoints] == ["ltx-broken.safetensors"]
    rejected = search.rejected_text_encoders
    assert len(rejected) == 2 and any(LLAMA_MESSAGE in r for r in rejected)
    assert any("gemma-empty has no config.json" in r for r in rejected)
    checkpoint, encoder = search.to_findings()
    assert checkpoint.status == "missing" and checkpoint.detail.startswith(f"3 candidates in {models}, ")
    assert "--model-path not given" in checkpoint.detail and "--model-path" in checkpoint.next_step
    json.dumps(search.to_dict())


def test_the_only_candidate_is_checked_and_named(tmp_path):
    checkpoint = write_safetensors(tmp_path / "ltx-2-19b-dev.safetensors")
    encoder = config_folder(tmp_path / "gemma", GEMMA_CONFIG)
    search = find_model_files([tmp_path], env={})
    found = check_model_path(None, "checkpoint", search)
    assert (found.status, found.source, found.value, found.path) == ("ok", "search", str(checkpoint), str(checkpoint))
    assert found.detail == f"{checkpoint}, found in {tmp_path}"
    text = check_model_path("", "text_encoder", search)
    assert text.status == "ok" and text.detail == f"{encoder} (model_type gemma3), found in {tmp_path}"
    given = check_model_path(str(checkpoint), "checkpoint", search)  # a given path wins over the search
    assert given.source == "option" and given.detail == str(checkpoint)


# ---- explicit paths ------------------------------------------------------------------------------

@pytest.mark.parametrize("url", [
    "https://huggingface.co/Lightricks/LTX-2/resolve/main/ltx-2-19b-dev.safetensors",
    "http://example.com/a.safetensors", "hf://Lightricks/LTX-2", "s3://bucket/a.safetensors",
    "gs://bucket/gemma", "HTTPS://EXAMPLE.COM/x",
])
@pytest.mark.parametrize("kind", ["checkpoint", "text_encoder"])
def test_model_urls_are_refused(url, kind):
    with pytest.raises(BadInput) as info:
        check_model_path(url, kind)
    text = str(info.value)
    assert "Model paths must be local" in text and "\n" not in text


def test_checkpoint_paths(tmp_path):
    good = write_safetensors(tmp_path / "ltx.safetensors")
    assert check_model_path(str(good), "checkpoint").status == "ok"
    unset = check_model_path(None, "checkpoint")
    assert unset.status == "missing" and "--model-path" in unset.next_step and unset.source is None
    vae = write_safetensors(tmp_path / "vae.safetensors", {"config": json.dumps({"vae": {}})})
    warned = check_model_path(str(vae), "checkpoint")
    assert warned.status == "warning" and warned.usable and "no transformer" in warned.detail


def test_checkpoint_path_expands_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    write_safetensors(tmp_path / "models" / "ltx.safetensors")
    check = check_model_path("~/models/ltx.safetensors", "checkpoint")
    assert check.status == "ok" and check.path == str(tmp_path / "models" / "ltx.safetensors")


def test_text_encoder_paths(tmp_path):
    gemma = config_folder(tmp_path / "gemma", GEMMA_CONFIG)
    assert check_model_path(str(gemma), "text_encoder").status == "ok"
    assert check_model_path(str(write_safetensors(tmp_path / "packed.safetensors", {})), "text_encoder").status == "ok"
    broken = check_model_path(str(raw_file(tmp_path / "broken.safetensors", b"\x00" * 16)), "text_encoder")
    assert broken.status == "missing" and "not a valid safetensors file" in broken.detail
    (tmp_path / "bare").mkdir()
    bare = check_model_path(str(tmp_path / "bare"), "text_encoder")
    assert bare.status == "missing" and "config.json" in bare.detail
    parent = check_model_path(str(tmp_path), "text_encoder")  # the folder above the Gemma folder
    assert parent.status == "missing" and parent.next_step.startswith(f"pass --text-encoder-path {gemma} ")
    assert check_model_path(str(tmp_path / "nope"), "text_encoder").status == "missing"
    (tmp_path / "weights.bin").write_text("x")
    with pytest.raises(BadInput, match="Gemma folder"):
        check_model_path(str(tmp_path / "weights.bin"), "text_encoder")


# ---- what the probe stores -----------------------------------------------------------------------

def test_probe_stores_the_chosen_files_and_notices_fixed_configs(tmp_path, monkeypatch):
    from phases.probe import _model_files_digest, _models

    home_models = tmp_path / "home" / "models"  # HOME is tmp_path/home (conftest)
    checkpoint = write_safetensors(home_models / "ltx-2.3-22b-dev.safetensors")
    folder = config_folder(tmp_path / "gemma-3-12b-it", {"model_type": "llama"})
    request = SimpleNamespace(model_path=None, text_encoder_path=str(folder), backend="ltx")
    findings: list = []
    models = _models(request, findings)
    files = models.files
    assert files.checkpoint == str(checkpoint) and files.text_encoder is None
    assert files.searched[-1] == str(home_models)
    assert models.checkpoint_path == str(checkpoint) and models.text_encoder_path == str(folder)
    assert [f.status for f in findings] == ["ok", "missing"] and LLAMA_MESSAGE in findings[1].detail
    json.dumps(models.model_dump(mode="json"))
    before = _model_files_digest(request)
    assert _model_files_digest(request) == before
    (folder / "config.json").write_text(GEMMA_CONFIG + "\n")
    assert _model_files_digest(request) != before
    assert _models(request, []).files.text_encoder == str(folder)
