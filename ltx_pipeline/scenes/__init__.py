"""Scenes: a user's video split into one training clip per scene.

``detect`` finds the cuts (plan time: cheap, 256-px frames); ``scan`` caches them per file and finds them on
every core (``parallel``; a long video in ``segments``); ``cut`` writes each long-enough scene as its own clip
(prepare time, after approval: a re-encode); ``footage`` writes labelled test footage for the benchmark and the
tests. This door re-exports what the phases use.
"""

from ltx_pipeline.scenes.cut import SplitClip, SplitResult, cut_scenes
from ltx_pipeline.scenes.detect import DETECTOR, Scene, detect_scenes
from ltx_pipeline.scenes.scan import find_cuts, scan_videos

__all__ = ["DETECTOR", "Scene", "SplitClip", "SplitResult", "cut_scenes", "detect_scenes", "find_cuts",
           "scan_videos"]
