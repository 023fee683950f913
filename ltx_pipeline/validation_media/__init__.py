"""Validation conditions from the user's own data: the rows that give them, and the media written into the run.

The rules (which row, which column, what is derived) are ``ltx.validation_sources``; this room reads the
dataset's rows into candidates (``candidates``) and writes the derived media under ``<run>/validation/``
(``materialize``: a clip's first frame as PNG, its sound track as WAV), never beside the user's files.
"""

from ltx_pipeline.validation_media.candidates import candidates_from_folder, candidates_from_rows, template_samples
from ltx_pipeline.validation_media.materialize import MaterializedSamples, materialize_samples

__all__ = ["MaterializedSamples", "candidates_from_folder", "candidates_from_rows", "materialize_samples",
           "template_samples"]
