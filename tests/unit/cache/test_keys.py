"""Cache keys: a key changes exactly when one of its parts does, and a miss is explained by the part."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ltx_pipeline.cache import CacheKey, Identity, LatentFlags, Modality, caption_as_seen, condition_key, latent_key
from ltx_pipeline.cache.misses import (
    CAPTION_CHANGED,
    CLIP_CHANGED,
    NEW_CAPTION,
    NEW_CLIP,
    OTHER_BUCKET,
    OTHER_FLAGS,
    OTHER_MODEL,
    OTHER_TRAINER,
    explain_miss,
)

_text = st.text(min_size=1, max_size=12)
_identity = st.builds(Identity, value=_text, label=_text)
_flags = st.builds(LatentFlags, frame_selection=st.sampled_from(["first", "spread"]),
                   reshape_mode=st.sampled_from(["center", "random"]), vae_tiling=st.booleans(),
                   reference_downscale=st.integers(1, 4), reference_temporal_scale=st.integers(1, 4))
_latent_parts = st.fixed_dictionaries({"media": _identity, "bucket": _text, "vae": _identity, "trainer": _identity,
                                       "flags": _flags})
_condition_parts = st.fixed_dictionaries({"prompt": _text, "text_encoder": _identity, "checkpoint": _identity,
                                          "trainer": _identity, "load_in_8bit": st.booleans()})


def _latent(modality: Modality, parts: dict[str, Any], subject: str = "a.mp4") -> CacheKey:
    return latent_key(modality, media=parts["media"], bucket=parts["bucket"], vae=parts["vae"],
                      trainer=parts["trainer"], flags=parts["flags"], subject=subject)


@settings(max_examples=60, deadline=None)
@given(modality=st.sampled_from([Modality.VIDEO, Modality.AUDIO, Modality.REFERENCE]), a=_latent_parts,
       b=_latent_parts)
def test_latent_key_changes_exactly_when_a_keyed_part_changes(modality: Modality, a: dict[str, Any],
                                                              b: dict[str, Any]) -> None:
    keyed = {"media": a["media"].value == b["media"].value, "bucket": a["bucket"] == b["bucket"],
             "vae": a["vae"].value == b["vae"].value, "trainer": a["trainer"].value == b["trainer"].value,
             "flags": a["flags"].parts(modality) == b["flags"].parts(modality)}
    key_a, key_b = _latent(modality, a), _latent(modality, b, subject="other name.mp4")
    assert (key_a.digest == key_b.digest) == all(keyed.values())  # labels and subjects never count


@settings(max_examples=60, deadline=None)
@given(a=_condition_parts, b=_condition_parts)
def test_condition_key_changes_exactly_when_a_keyed_part_changes(a: dict[str, Any], b: dict[str, Any]) -> None:
    same = (a["prompt"] == b["prompt"] and a["text_encoder"].value == b["text_encoder"].value
            and a["checkpoint"].value == b["checkpoint"].value and a["trainer"].value == b["trainer"].value
            and a["load_in_8bit"] == b["load_in_8bit"])
    assert (condition_key(**a).digest == condition_key(**b).digest) == same


@settings(max_examples=60, deadline=None)
@given(modality=st.sampled_from([Modality.VIDEO, Modality.AUDIO, Modality.REFERENCE]), base=_latent_parts,
       part=st.sampled_from(["bucket", "vae", "trainer", "media"]), new=_text)
def test_a_changed_part_is_named_in_the_explanation(modality: Modality, base: dict[str, Any], part: str,
                                                    new: str) -> None:
    changed = dict(base)
    changed[part] = new if part == "bucket" else Identity(new, new)
    key, earlier = _latent(modality, changed), _latent(modality, base)
    miss = explain_miss(key, [earlier])
    if key.digest == earlier.digest:
        assert miss.reasons == ()
        return
    expected = {"bucket": OTHER_BUCKET, "vae": OTHER_MODEL, "trainer": OTHER_TRAINER, "media": CLIP_CHANGED}[part]
    assert miss.reasons == (expected,)
    assert miss.nearest == earlier


def _video(media: str, bucket: str = "512x288x49", vae: str = "v1", subject: str = "a.mp4",
           flags: LatentFlags = LatentFlags()) -> CacheKey:
    return latent_key(Modality.VIDEO, media=Identity(media, subject), bucket=bucket, vae=Identity(vae, vae),
                      trainer=Identity("t1", "ltx-trainer 1.2.0"), flags=flags, subject=subject)


def test_the_nearest_earlier_key_is_the_same_clip_and_unrelated_neighbours_are_not_reasons() -> None:
    earlier = [_video("m-a", subject="a.mp4"), _video("m-b", bucket="960x544x49", subject="b.mp4")]
    assert explain_miss(_video("m-c", vae="v2", subject="c.mp4"), earlier).reasons == (NEW_CLIP,)
    assert explain_miss(_video("m-a", bucket="960x544x49"), earlier).reasons == (OTHER_BUCKET,)
    flagged = explain_miss(_video("m-a", flags=LatentFlags(vae_tiling=True)), earlier)
    assert flagged.reasons == (OTHER_FLAGS,)
    assert str(flagged) == "other flags (flag:vae_tiling: vae_tiling=False -> vae_tiling=True)"
    both = explain_miss(_video("m-a2", vae="v2"), earlier)  # a.mp4 re-encoded, and another VAE
    assert both.reasons == (CLIP_CHANGED, OTHER_MODEL)
    assert explain_miss(_video("m-a"), earlier).reason == "cached"
    assert explain_miss(_video("m-a"), []).reasons == (NEW_CLIP,)


def _condition(prompt: str, encoder: str = "gemma-a", subject: str = "a.mp4") -> CacheKey:
    return condition_key(prompt=prompt, text_encoder=Identity(encoder, encoder), checkpoint=Identity("c", "c"),
                         trainer=Identity("t", "t"), load_in_8bit=False, subject=subject)


def test_a_caption_edit_and_a_new_text_encoder_are_told_apart() -> None:
    earlier = [_condition("tok a cat"), _condition("tok a dog", subject="b.mp4")]
    assert explain_miss(_condition("tok a black cat"), earlier).reasons == (CAPTION_CHANGED,)
    assert explain_miss(_condition("tok a cat", encoder="gemma-b"), earlier).reasons == (OTHER_MODEL,)
    assert explain_miss(_condition("tok a bird", subject="c.mp4"), earlier).reasons == (NEW_CAPTION,)
    assert explain_miss(_condition("x"), [_video("m")]).reasons == (NEW_CAPTION,)  # other modalities ignored


def test_flags_key_only_the_modality_they_change() -> None:
    plain, scaled = LatentFlags(), LatentFlags(reference_downscale=2)
    parts = {"media": Identity("m", "m"), "bucket": "512x288x49", "vae": Identity("v", "v"),
             "trainer": Identity("t", "t")}
    assert latent_key(Modality.VIDEO, **parts, flags=plain) == latent_key(Modality.VIDEO, **parts, flags=scaled)
    assert (latent_key(Modality.REFERENCE, **parts, flags=plain).digest
            != latent_key(Modality.REFERENCE, **parts, flags=scaled).digest)
    assert (latent_key(Modality.VIDEO, **parts).digest != latent_key(Modality.AUDIO, **parts).digest)
    with pytest.raises(ValueError, match="condition_key"):
        latent_key(Modality.CONDITION, **parts)


@pytest.mark.parametrize(("caption", "trigger", "remove", "seen"), [
    ("  The video shows a cat.  ", None, False, "  The video shows a cat.  "),  # as written: not even stripped
    ("  The video shows a cat.  ", None, True, "a cat."),
    ("In this video, a cat", "  tok ", True, "tok a cat"),
    ("In this video clip, a cat", "tok", True, "tok a cat"),
    ("Caption: The clip shows x", None, True, "The clip shows x"),  # one phrase removed, once
    ("The cat", "", True, "The cat"),  # an empty trigger adds nothing
    ("This picture presents: art", "t", False, "t This picture presents: art"),
])
def test_the_caption_is_keyed_as_the_trainer_encodes_it(caption: str, trigger: str | None, remove: bool,
                                                         seen: str) -> None:
    assert caption_as_seen(caption, trigger=trigger, remove_llm_prefixes=remove) == seen


def test_the_trainers_phrase_list_is_mirrored_in_its_order() -> None:
    from ltx_pipeline.cache.keys import LLM_START_PHRASES

    assert len(LLM_START_PHRASES) == 5 + 9 * 7
    assert LLM_START_PHRASES[:6] == ("In the video,", "In this video,", "In this video clip,", "In the clip,",
                                     "Caption:", "This video shows")


def test_a_key_reads_back_from_its_record_and_a_tampered_record_is_refused() -> None:
    key = _video("m-a")
    assert CacheKey.from_record(key.to_record()) == key
    record = key.to_record()
    record["parts"]["bucket"]["value"] = "960x544x49"
    with pytest.raises(ValueError, match="not its recorded"):
        CacheKey.from_record(record)
    assert key.name.startswith("video-") and len(key.name) == len("video-") + 64
    assert dataclasses.replace(key, subject="other").digest == key.digest


def test_the_same_model_at_another_path_gives_the_same_key(tmp_path: Path) -> None:
    from ltx_pipeline.ltx.data_identity import model_identity

    first, moved = tmp_path / "a" / "vae.bin", tmp_path / "b" / "renamed.bin"
    for path in (first, moved):
        path.parent.mkdir()
        path.write_bytes(b"weights" * 100)
    a, b = Identity.of_model(model_identity(str(first))), Identity.of_model(model_identity(str(moved)))
    assert a.value == b.value and a.label != b.label and a.label.startswith("vae.bin (")
    key_a, key_b = (latent_key(Modality.VIDEO, media=Identity("m", "m"), bucket="b", vae=vae,
                               trainer=Identity("t", "t")) for vae in (a, b))
    assert key_a.digest == key_b.digest
    assert explain_miss(key_a, []).reasons == (NEW_CLIP,)
