"""Bad input, property-based: whatever a user types or points the CLI at, no traceback.

Each property drives the real CLI in-process (``ltx_pipeline.cli.main``) with generated input: bucket
strings, run names, metadata files, cost surfaces and nvidia-smi outputs. The outcome is always a
documented one: exit 2 with exactly one ``error:`` line on stderr, or (when the generated input
happens to be valid) the approval gate (exit 3), or the documented minimum-VRAM gate (exit 1) when a
valid input describes a GPU below 32 GB. Nothing is ever written outside the workspace: the dataset
folder and HOME are snapshotted around every call. Mutated trainer configs go through the config
mirror's public functions (``validate_trainer_config`` / ``load_trainer_config_file``), which must
answer with findings or a one-line ``BadConfig``, never another exception.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ltx_pipeline.cli import main
from ltx_pipeline.errors import BadConfig
from ltx_pipeline.ltx.trainer_config import (
    ConfigFinding,
    load_trainer_config_file,
    parse_trainer_config,
    validate_trainer_config,
)
from ltx_pipeline.workspace import validate_run_name
from tests.conftest import mp4_bytes

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "ltx_pipeline" / "backends" / "reference_configs" / "t2v_lora.yaml"
SURFACE = REPO / "benchmarks" / "surfaces" / "h100_80gb.yaml"
H100 = "NVIDIA H100 80GB HBM3,81559"
SMI_LINE = "0, GPU-11111111-2222-3333-4444-555555555555, NVIDIA H100 80GB HBM3, 81559, 570.86.15"

# Function-scoped fixtures (capsys, fake_smi, isolated_env's HOME) are shared by the examples on
# purpose: every example snapshots and checks them itself.
# Derandomized and without an example database: the same examples on every machine, nothing written
# into the repository.
PROPERTY = settings(max_examples=30, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
JSON_SCALAR = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT
JSON_VALUE = st.recursive(JSON_SCALAR, lambda inner: st.lists(inner, max_size=4)
                          | st.dictionaries(TEXT, inner, max_size=4), max_leaves=12)


def snapshot(root: Path, skip: Path | None = None) -> dict[str, bytes | None]:
    """Every file (bytes) and folder (None) under ``root``, except those under ``skip``."""
    found: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        if skip is not None and (path == skip or skip in path.parents):
            continue
        found[str(path.relative_to(root))] = path.read_bytes() if path.is_file() else None
    return found


@contextmanager
def scratch() -> Iterator[Path]:
    """A fresh folder per example (function-scoped tmp_path is shared by every example)."""
    root = Path(tempfile.mkdtemp(prefix="ltx-bad-input-"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def clips(root: Path) -> Path:
    (root / "videos").mkdir(parents=True, exist_ok=True)
    rows = [{"caption": f"a fox {i}", "video": f"videos/c{i}.mp4"} for i in range(2)]
    for i in range(2):
        (root / "videos" / f"c{i}.mp4").write_bytes(mp4_bytes())
    (root / "dataset.json").write_text(json.dumps(rows))
    return root / "dataset.json"


def drive(capsys: pytest.CaptureFixture[str], root: Path, args: list[str]) -> tuple[int, str]:
    """Run the CLI with a workspace under ``root``; check nothing outside it changed."""
    workspace = root / "ws"
    home = Path(os.environ["HOME"])
    before_root, before_home = snapshot(root, skip=workspace), snapshot(home)
    capsys.readouterr()
    code = main(["run", "--workspace", str(workspace), *args])
    err = capsys.readouterr().err
    assert snapshot(root, skip=workspace) == before_root, "a file outside the workspace changed"
    assert snapshot(home) == before_home, "a file under HOME changed"
    return code, err


def assert_documented(code: int, err: str, valid: bool | None = None) -> None:
    """Exit 2 with one error line; or, for valid input, the approval gate (3) or the VRAM gate (1)."""
    assert "Traceback" not in err and "Unexpected error" not in err, err
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), err
        assert valid is not True, f"valid input refused: {err}"
        return
    assert code in (1, 3), (code, err)
    assert valid is not False, f"invalid input accepted (exit {code})"
    if code == 1:
        assert "GB per GPU" in err and "--accept-risk" in err, err


# --- bucket strings -----------------------------------------------------------------------------------

BUCKET_PART = st.one_of(
    st.builds(lambda w, h, f: f"{w}x{h}x{f}", st.integers(-64, 4096), st.integers(-64, 4096), st.integers(-9, 300)),
    st.text(st.sampled_from("0123456789xX;, -.e"), max_size=16),
    TEXT,
)


@PROPERTY
@given(parts=st.lists(BUCKET_PART, min_size=1, max_size=3), sep=st.sampled_from([";", ",", "; ", ";;"]))
def test_any_bucket_string_is_refused_in_one_line_or_planned(capsys, parts, sep) -> None:
    with scratch() as root:
        code, err = drive(capsys, root, ["--run", "r", f"--dataset={clips(root / 'data')}", "--assume-gpu", H100,
                                         f"--buckets={sep.join(parts)}"])
        assert_documented(code, err)


# --- run names ------------------------------------------------------------------------------------------

RUN_NAME = st.one_of(
    TEXT,
    st.sampled_from(["..", ".", "../x", "/abs", "a/../../b", "~", "~/x", ".hidden", "a/b", "x" * 101, "a\0b",
                     "-x", "con", " r", "r\n"]),
    st.builds(lambda a, b: f"{a}/{b}", TEXT, TEXT),
)


@PROPERTY
@given(name=RUN_NAME)
def test_any_run_name_is_refused_in_one_line_or_kept_inside_the_workspace(capsys, name) -> None:
    with scratch() as root:
        code, err = drive(capsys, root, [f"--run={name}", f"--dataset={clips(root / 'data')}",
                                         "--assume-gpu", H100])
        assert_documented(code, err)
        if code != 2 and name:  # accepted: the run's folder is a direct child of the workspace
            assert validate_run_name(name) == name and (root / "ws" / name / "run.yaml").is_file()
        elif code == 2 and (root / "ws").exists():  # refused: no run folder was made anywhere
            assert not [p for p in (root / "ws").iterdir() if p.is_dir() and p.name != "logs"], err


# --- metadata files -------------------------------------------------------------------------------------

ROW = st.fixed_dictionaries({}, optional={"caption": JSON_VALUE, "video": JSON_VALUE | st.just("videos/c0.mp4"),
                                          "media_path": JSON_VALUE, "image": JSON_VALUE, "extra": JSON_VALUE})


def as_csv(rows: list[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    keys = sorted({str(k) for row in rows for k in row})
    writer = csv.writer(buffer)
    writer.writerow(keys)
    for row in rows:
        # Cells stay short: a media path longer than NAME_MAX is the known bug tested on its own below.
        writer.writerow([(row[k] if isinstance(row.get(k), str) else json.dumps(row.get(k)))[:60] for k in keys])
    return buffer.getvalue()


METADATA = st.one_of(
    st.tuples(st.just(".json"), JSON_VALUE.map(json.dumps)),
    st.tuples(st.just(".json"), st.lists(ROW, max_size=4).map(json.dumps)),
    st.tuples(st.just(".jsonl"), st.lists(ROW, max_size=4).map(lambda rows: "\n".join(map(json.dumps, rows)))),
    st.tuples(st.just(".csv"), st.lists(ROW, max_size=4).map(as_csv)),
    st.tuples(st.sampled_from([".json", ".jsonl", ".csv"]), TEXT),
    st.tuples(st.sampled_from([".json", ".csv"]), st.binary(max_size=64)),
)


@PROPERTY
@given(metadata=METADATA)
def test_any_metadata_file_is_refused_in_one_line_or_planned(capsys, metadata) -> None:
    suffix, content = metadata
    with scratch() as root:
        data = root / "data"
        clips(data)
        path = data / f"meta{suffix}"
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        code, err = drive(capsys, root, ["--run", "r", "--dataset", str(path), "--assume-gpu", H100])
        assert_documented(code, err)


@pytest.mark.parametrize("suffix", [".json", ".csv"])
def test_metadata_media_path_longer_than_a_file_name_is_reported_not_crashed(capsys, suffix) -> None:
    with scratch() as root:
        data = root / "data"
        clips(data)
        rows = [{"caption": "a fox", "video": "v" * 300 + ".mp4"}]
        path = data / f"meta{suffix}"
        path.write_text(json.dumps(rows) if suffix == ".json" else as_csv(rows).replace(rows[0]["video"][:60],
                                                                                          rows[0]["video"]))
        code, err = drive(capsys, root, ["--run", "r", "--dataset", str(path), "--assume-gpu", H100])
        assert code in (2, 3) and "OSError" not in err and "Traceback" not in err, err  # shown as missing media


# --- mutated trainer configs ----------------------------------------------------------------------------

def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    if isinstance(node, dict):
        return [prefix + (k,) for k in node] + [p for k, v in node.items() for p in _paths(v, prefix + (k,))]
    return []


def mutate(data: dict, choice: Callable[[list], Any], value: Any, kind: str, new_key: str) -> dict:
    """Drop, rename (to an unknown ``x_`` key) or retype one key anywhere in a copy of ``data``."""
    copy = json.loads(json.dumps(data))
    path = choice(_paths(copy))
    parent = copy
    for key in path[:-1]:
        parent = parent[key]
    if kind == "drop":
        del parent[path[-1]]
    elif kind == "rename":
        parent[new_key] = parent.pop(path[-1])
    else:
        parent[path[-1]] = value
    return copy


TEMPLATE_DATA = yaml.safe_load(TEMPLATE.read_text())


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(data=st.data(), mutations=st.lists(st.tuples(st.sampled_from(["drop", "rename", "retype"]), JSON_VALUE,
                                                    st.from_regex(r"x_[a-z]{1,8}", fullmatch=True)),
                                          min_size=1, max_size=3))
def test_mutated_trainer_config_gives_findings_or_one_bad_config(tmp_path_factory, data, mutations) -> None:
    config = TEMPLATE_DATA
    renamed = False
    for kind, value, new_key in mutations:
        config = mutate(config, lambda options: data.draw(st.sampled_from(options)), value, kind, new_key)
        renamed = renamed or kind == "rename"
    findings = validate_trainer_config(config, relaxed_paths=True)
    assert all(isinstance(f, ConfigFinding) and "\n" not in f.line() for f in findings)
    if renamed:  # an unknown key is always an error: every section forbids extra keys
        assert findings
    if findings:
        with pytest.raises(BadConfig) as raised:
            parse_trainer_config(config, relaxed_paths=True)
        assert "\n" not in raised.value.line() and raised.value.errors
    # The same mapping through a file, with its text optionally cut short or corrupted.
    text = yaml.safe_dump(config)
    cut = data.draw(st.integers(0, len(text)))
    text = data.draw(st.sampled_from([text, text[:cut], text[:cut] + data.draw(TEXT) + text[cut:]]))
    path = tmp_path_factory.mktemp("cfg") / "config.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        loaded = load_trainer_config_file(path)
    except BadConfig as exc:
        assert "\n" not in exc.line() and str(path) in exc.line()
        return
    assert isinstance(loaded, dict)
    assert all(isinstance(f, ConfigFinding) for f in validate_trainer_config(loaded, relaxed_paths=True))


# --- mutated cost surfaces ------------------------------------------------------------------------------

SURFACE_DATA = yaml.safe_load(SURFACE.read_text())


@PROPERTY
@given(data=st.data(), mutations=st.lists(st.tuples(st.sampled_from(["drop", "rename", "retype"]), JSON_VALUE,
                                                    st.from_regex(r"x_[a-z]{1,8}", fullmatch=True)),
                                          min_size=0, max_size=3), corrupt=st.booleans())
def test_mutated_cost_surface_is_refused_in_one_line_or_planned(capsys, data, mutations, corrupt) -> None:
    surface = SURFACE_DATA
    for kind, value, new_key in mutations:
        surface = mutate(surface, lambda options: data.draw(st.sampled_from(options)), value, kind, new_key)
    text = yaml.safe_dump(surface)
    if corrupt:
        cut = data.draw(st.integers(0, len(text)))
        text = text[:cut] + data.draw(TEXT) + text[cut + 1:]
    with scratch() as root:
        path = root / "surfaces" / "mutated.yaml"
        path.parent.mkdir()
        path.write_text(text, encoding="utf-8")
        code, err = drive(capsys, root, ["--run", "r", "--dataset", str(clips(root / "data")), "--backend",
                                         "simulated", "--surface", str(path)])
        assert_documented(code, err, valid=True if not mutations and not corrupt else None)


# --- nvidia-smi outputs ---------------------------------------------------------------------------------

def _mutated_line(fields: list[str]) -> str:
    return ", ".join(fields)


SMI_OUTPUT = st.one_of(
    TEXT,
    st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=20), min_size=1, max_size=6)
    .map(_mutated_line),
    st.builds(lambda i, v: _mutated_line([*SMI_LINE.split(", ")[:i], v, *SMI_LINE.split(", ")[i + 1:]]),
              st.integers(0, 4), st.text(max_size=12) | st.integers(-5, 10**7).map(str)),
    st.lists(st.sampled_from([SMI_LINE, "", "No devices were found", "NVIDIA-SMI has failed", SMI_LINE[:30]]),
             max_size=3).map("\n".join),
)


@pytest.mark.long  # 10.4 s per run on a 2-core box (2026-12-07): the default suite stays under 6 min
@PROPERTY
@given(stdout=SMI_OUTPUT, exit_code=st.sampled_from([0, 0, 0, 1, 6, 9, 255]), stderr=TEXT)
def test_any_nvidia_smi_output_is_refused_in_one_line_or_planned(capsys, fake_smi, stdout, exit_code,
                                                                   stderr) -> None:
    smi = fake_smi(stdout, exit_code=exit_code, stderr=stderr)
    with scratch() as root:
        code, err = drive(capsys, root, ["--run", "r", "--dataset", str(clips(root / "data")),
                                         "--nvidia-smi", smi])
        assert_documented(code, err, valid=False if exit_code != 0 else None)


# --- whole requests: several fields wrong at once -------------------------------------------------------

# (value, valid) choices per field; a request is valid exactly when every field is.
RUN_NAMES = st.sampled_from([("r1", True), ("clip.v2", True), ("", False), ("CON", False), ("a/b", False)])
BUCKETS = st.sampled_from([(None, True), ("64x64x17", True), ("", False), ("64x64x16", False), ("abc", False)])
RANKS = st.sampled_from([(None, True), (8, True), (1, False), (2000, False)])
HEADROOMS = st.sampled_from([(None, True), (0.1, True), (0.7, False), (-0.1, False)])
ROWS = st.sampled_from([([{"caption": "a fox", "video": "videos/c0.mp4"}], True),
                        ([{"video": "videos/c0.mp4"}], False), ({"caption": "a fox"}, False)])


@PROPERTY
@given(name=RUN_NAMES, buckets=BUCKETS, rank=RANKS, headroom=HEADROOMS, rows=ROWS)
def test_a_whole_request_is_planned_only_when_every_field_is_valid(capsys, fake_smi, name, buckets, rank,
                                                                   headroom, rows) -> None:
    """Exit 3 (the approval gate) only for a valid request; otherwise exit 2 naming every problem,
    one line each, and no run written."""
    fields = {"--run": name, "--buckets": buckets, "--rank": rank, "--headroom": headroom}
    problems = sum(1 for _, ok in (*fields.values(), rows) if not ok)
    with scratch() as root:
        (root / "videos").mkdir()
        (root / "videos" / "c0.mp4").write_bytes(mp4_bytes())
        (root / "dataset.json").write_text(json.dumps(rows[0]))
        args = ["--dataset", str(root / "dataset.json"), "--nvidia-smi", fake_smi(SMI_LINE)]
        for option, (value, _) in fields.items():
            if value is not None:
                args += [option, str(value)]
        code, err = drive(capsys, root, args)
        assert "Traceback" not in err and "Unexpected error" not in err, err
        if problems == 0:
            assert code == 3, err
            return
        lines = err.strip().splitlines()
        assert code == 2, (code, err)
        if problems == 1:
            assert len(lines) == 1 and lines[0].startswith("error: ") and "Fix:" in lines[0], err
        else:
            assert lines[0] == f"error: {problems} problems in the request:", err
            assert len(lines) == problems + 1 and all(line.startswith("- ") for line in lines[1:]), err
        workspace = root / "ws"
        assert not workspace.exists() or not [p for p in workspace.iterdir() if p.is_dir()], "a run was written"
