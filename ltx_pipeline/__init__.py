"""ltx-pipeline: a resumable, phased workflow engine for training LTX-2 LoRAs with ltx-trainer."""

__version__ = "0.1.0"
