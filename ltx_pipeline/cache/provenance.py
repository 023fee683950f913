"""What a preprocessed folder was made from beyond its data identity: the metadata file and the encoding code.

The data identity (``ltx.data_identity``) records the checkpoint, text encoder, buckets and flags. Keying the
folder's files for the latent cache (``ltx-pipeline cache import``) also needs the rows they were made from
and the code that encoded them (ltx-trainer's checkout, or ltx-pipeline's own toy programs), which the cache's
keys include. Preprocessing records both beside the identity (``made_from``); ``read_made_from`` reads them
back, and ``encoder_matches`` says whether that code is still what encodes now.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ltx_pipeline.cache.digests import encoder_identity
from ltx_pipeline.cache.keys import Identity

__all__ = ["MadeFrom", "made_from", "read_made_from"]


@dataclass(frozen=True)
class MadeFrom:
    """The metadata a folder was preprocessed from and the identity of the code that encoded it."""

    metadata: Path
    encoder: Identity
    checkout: Path | None  # the LTX-2 checkout whose scripts encoded; None: ltx-pipeline's own toy programs

    def encoder_now(self) -> Identity:
        """The identity that code has now (the checkout's source digest, or this ltx-pipeline's)."""
        return encoder_identity(self.checkout)


def made_from(metadata_file: Path, backend: Any) -> dict[str, Any]:
    """The ``made_from`` record preprocessing writes beside the data identity, for a stage of ``backend``.

    The checkout counts only on a backend that runs the real trainer, as ``cache_plan`` keys it.
    """
    checkout = backend.checkout_root if backend.capabilities.runs_real_trainer else None
    encoder = encoder_identity(checkout)
    return {"metadata": str(Path(metadata_file).expanduser().resolve()),
            "encoder": {"value": encoder.value, "label": encoder.label,
                        "checkout": str(checkout) if checkout is not None else None}}


def read_made_from(identity: Mapping[str, Any]) -> MadeFrom | None:
    """The ``made_from`` part of a recorded identity; None when it has none (an older engine's) or it is malformed."""
    record = identity.get("made_from")
    if not isinstance(record, Mapping) or not isinstance(record.get("encoder"), Mapping):
        return None
    encoder, metadata = record["encoder"], record.get("metadata")
    if not isinstance(metadata, str) or not isinstance(encoder.get("value"), str):
        return None
    checkout = encoder.get("checkout")
    return MadeFrom(Path(metadata), Identity(str(encoder["value"]), str(encoder.get("label") or encoder["value"])),
                    Path(checkout) if isinstance(checkout, str) and checkout else None)
