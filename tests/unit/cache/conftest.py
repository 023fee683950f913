"""Keys and entries the cache tests share: no model, small files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ltx_pipeline.cache import CacheKey, EntryStore, Identity, Modality, latent_key
from ltx_pipeline.cache.entries import RECORD_FILE
from ltx_pipeline.cache.uses import USES_DIR

DAY = 86400.0


def video_key(media: str = "m-a", subject: str = "a.mp4", bucket: str = "512x288x49") -> CacheKey:
    """A video latents key of made-up identities."""
    return latent_key(Modality.VIDEO, media=Identity(media, subject), bucket=bucket, vae=Identity("vae", "vae"),
                      trainer=Identity("trainer", "trainer"), subject=subject)


@pytest.fixture
def store(tmp_path: Path) -> EntryStore:
    return EntryStore.for_workspace(tmp_path / "ws")


def put(store: EntryStore, key: CacheKey, payload: bytes = b"latents" * 100) -> Path:
    """Make ``key``'s entry from ``payload`` the way a filler does: claim, write, put."""
    source = store.root.parent / f"{key.name}.src"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_bytes(payload)
    with store.claim(key) as claim:
        assert claim.must_make
        return claim.put(source, move=True)


def age_entry(store: EntryStore, name: str, days: float) -> None:
    """Make an entry's creation ``days`` old (its data is untouched)."""
    record_file = store.folder_of(name) / RECORD_FILE
    record = json.loads(record_file.read_text())
    record["created_at"] -= days * DAY
    record_file.write_text(json.dumps(record))


def age_uses(store: EntryStore, days: float) -> None:
    for path in (store.root / USES_DIR).glob("*.json"):
        record = json.loads(path.read_text())
        record["updated_at"] -= days * DAY
        path.write_text(json.dumps(record))
