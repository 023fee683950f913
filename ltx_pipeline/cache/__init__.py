"""The latent cache: preprocessed samples paid for once, shared by every run of a workspace (or a team).

Keys (``keys``: pure, content-addressed per sample and modality, with named parts; ``misses``: why a
key missed, in words), the identities read from files (``digests``: media content, encoder code), the
store of entries (``entries``: complete or absent, one maker per key), checking and quarantine
(``verify``), a run's ``.precomputed`` assembled from entries (``assemble``) with its use record
(``uses``), and pruning what no live or resumable run needs (``prune``). Below preprocessing and training,
which fill and use it; it knows nothing of runs' states (callers say which runs are live).
"""

from ltx_pipeline.cache.assemble import Assembly, Linked, LinkKind, Want, assemble, link_entry
from ltx_pipeline.cache.digests import MediaDigests, encoder_identity, trainer_identity
from ltx_pipeline.cache.entries import DEFAULT_ROOT, Claim, ClaimState, Entry, EntryStore
from ltx_pipeline.cache.keys import (
    SUBFOLDERS,
    CacheKey,
    Identity,
    LatentFlags,
    Modality,
    Part,
    caption_as_seen,
    condition_key,
    latent_key,
)
from ltx_pipeline.cache.misses import Miss, explain_miss
from ltx_pipeline.cache.prune import Pruned, RemovedEntry, prune
from ltx_pipeline.cache.uses import UseRecord, forget_run, read_uses, record_uses
from ltx_pipeline.cache.verify import Verdict, clean_leftovers, quarantine, verify_entries, verify_entry

__all__ = ["DEFAULT_ROOT", "SUBFOLDERS", "Assembly", "CacheKey", "Claim", "ClaimState", "Entry", "EntryStore",
           "Identity", "LatentFlags", "LinkKind", "Linked", "MediaDigests", "Miss", "Modality", "Part", "Pruned",
           "RemovedEntry", "UseRecord", "Verdict", "Want", "assemble", "caption_as_seen", "clean_leftovers",
           "condition_key", "encoder_identity", "explain_miss", "forget_run", "latent_key", "link_entry", "prune",
           "quarantine", "read_uses", "record_uses", "trainer_identity", "verify_entries", "verify_entry"]
