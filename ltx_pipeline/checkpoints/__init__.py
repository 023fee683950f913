"""The trainer's checkpoints, one room: their file names (``files``) and finding them on disk (``discovery``:
every pair, the newest complete one, what a ``load_checkpoint`` folder loads), for the engine, resume, the
launch checks and ``status`` alike. No other module builds a checkpoint file name."""
