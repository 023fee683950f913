"""``ltx-pipeline smoke``: the user's own trainer checkout and environment, end to end, in about a minute.

Owns the smoke test: in a scratch folder it checks the trainer's environment (every module its scripts
import, torchcodec's FFmpeg), builds a tiny randomly initialised LTX-2 checkpoint and Gemma 3 folder with
the *installed* ltx-core (``trainer_side/build_tiny_model.py``), writes a two-row dataset of every
column the mode reads (``data``: clips with a tone, WAVs, references, masks), runs the checkout's own
``process_dataset.py``, checks what it wrote as the data check would, makes a two-step config from the
mode's shipped template (its strategy, conditions and audio; its first validation sample filled from
the rows as a run's are, ``samples``), validates it with the trainer's ``LtxTrainerConfig``, and trains
it with ``train.py``: checkpoint and a decoded validation sample (an mp4, or a WAV for the audio-only
modes) included. Every one of the 15 modes runs. It stops at the first failing step with the trainer's
own words and the fix.

Nothing it runs trains anything of value: the model is random. What a pass proves is the plumbing: the
same scripts, files and log lines a real run goes through. Results are cached by checkout + environment
(``cache``) so the probe can offer or report them without running anything.
"""

from ltx_pipeline.smoke.cache import SmokeRecord, load_record, save_record, smoke_key
from ltx_pipeline.smoke.run import (
    SMOKE_MODES,
    SmokeFailed,
    SmokeResult,
    SmokeStep,
    prepare_smoke,
    run_mode,
    run_smoke,
)

__all__ = ["SMOKE_MODES", "SmokeFailed", "SmokeRecord", "SmokeResult", "SmokeStep", "load_record", "prepare_smoke",
           "run_mode", "run_smoke", "save_record", "smoke_key"]
