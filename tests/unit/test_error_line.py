"""``errors.split_line`` reads back what ``LtxPipelineError.line`` wrote: the status, the dashboard and the runner's
"previous attempt ... failed: <what>" all split a stored error this one way."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ltx_pipeline.errors import LtxPipelineError, split_line

_TEXT = st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=40).filter(
    lambda t: t.strip(" .") and "Fix:" not in t)


@given(_TEXT, st.one_of(st.none(), _TEXT), st.one_of(st.none(), _TEXT))
def test_a_line_splits_back_into_what_and_where_and_its_fix(what: str, where: str | None, fix: str | None) -> None:
    line = LtxPipelineError(what, where=where, fix=fix).line()
    told, proposed = split_line(line)
    assert " Fix: " not in told and told == line.partition(" Fix: ")[0].rstrip(".")
    assert " ".join(what.rstrip(".").split()) in told
    if fix is None:
        assert proposed is None
    else:
        assert proposed == " ".join(fix.rstrip(".").split()).rstrip(".")


def test_a_stop_reads_as_what_ended_it() -> None:
    line = LtxPipelineError("Training stage 1 was stopped by the user (exit 130)", where="logs/train.log",
                            fix="`ltx-pipeline resume` continues from the newest checkpoint pair").line()
    assert split_line(line) == ("Training stage 1 was stopped by the user (exit 130) (logs/train.log)",
                                "`ltx-pipeline resume` continues from the newest checkpoint pair")
