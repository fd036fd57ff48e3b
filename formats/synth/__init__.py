"""Synthetic profiler: writes real-format profile streams and records the ground truth.

Entry points: :func:`synthesize` (bulk), :class:`LiveSynth` (live), :class:`SynthConfig`,
:class:`GroundTruth`. See docs/synth-and-inspect.md.
"""

from formats.synth.config import SynthConfig, SynthConfigError
from formats.synth.generator import LiveSynth, stream_euid, synthesize
from formats.synth.truth import GroundTruth, TruthExecution, TruthSpan, TruthValue, read_truth_jsonl

__all__ = [
    "GroundTruth",
    "LiveSynth",
    "SynthConfig",
    "SynthConfigError",
    "TruthExecution",
    "TruthSpan",
    "TruthValue",
    "read_truth_jsonl",
    "stream_euid",
    "synthesize",
]
