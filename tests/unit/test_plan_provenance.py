"""plan.md says which version wrote it and, re-written by another, which lines differ and why (#49)."""

from __future__ import annotations

from ltx_pipeline.code_identity import code_identity
from ltx_pipeline.engine.fingerprint import digest
from ltx_pipeline.ltx.plan_provenance import with_provenance, written_by

PLAN = "# Training plan: r1\n\n## Goal\n\nTrain a LoRA.\n\n## Config\n\n| steps | 2000 |\n"


def test_a_plan_names_its_writer_and_the_digest_approved_outside_the_approved_text() -> None:
    subject = digest(PLAN)
    text = with_provenance(PLAN, subject, "ltx-pipeline 0.1.0 (source aaaaaaaaaaaa)", None)
    assert written_by(text) == ("ltx-pipeline 0.1.0 (source aaaaaaaaaaaa)", subject[:19] + "…")
    assert text.splitlines()[0] == "# Training plan: r1" and "## Since the last plan" not in text
    assert [ln for ln in text.splitlines() if not ln.startswith("_Written by")] == ["# Training plan: r1", "",
                                                                                   *PLAN.splitlines()[1:]]


def test_re_written_by_another_version_it_lists_the_lines_that_differ() -> None:
    old = with_provenance(PLAN, digest(PLAN), "ltx-pipeline 0.1.0 (source aaaaaaaaaaaa)", None)
    new_plan = PLAN.replace("Train a LoRA.", "Train a LoRA for text-to-video (generates: video).")
    text = with_provenance(new_plan, digest(new_plan), "ltx-pipeline 0.1.0 (source bbbbbbbbbbbb)", old)
    section = text.split("## Since the last plan", 1)[1].split("\n## ", 1)[0]
    assert "written by ltx-pipeline 0.1.0 (source aaaaaaaaaaaa), this one by ltx-pipeline 0.1.0 (source bbbb" in section
    assert "    -Train a LoRA." in section and "    +Train a LoRA for text-to-video (generates: video)." in section
    assert "needs your approval again" in section
    assert "| steps | 2000 |" not in section  # unchanged lines are not listed
    # Once more by the same version: no section (status says why a plan ran), and no stale one carried over.
    again = with_provenance(new_plan, digest(new_plan), "ltx-pipeline 0.1.0 (source bbbbbbbbbbbb)", text)
    assert "## Since the last plan" not in again


def test_a_plan_written_before_provenance_is_compared_too() -> None:
    new_plan = PLAN.replace("2000", "3000")
    text = with_provenance(new_plan, digest(new_plan), code_identity(), PLAN)
    assert "an earlier ltx-pipeline (it did not name itself)" in text and "    +| steps | 3000 |" in text
    assert with_provenance(PLAN, digest(PLAN), code_identity(), PLAN).count("##") == PLAN.count("##")  # same lines


def test_the_code_identity_names_the_version_and_a_source_digest() -> None:
    identity = code_identity()
    assert identity.startswith("ltx-pipeline ") and "(source " in identity and len(identity.split("source ")[1]) == 13
