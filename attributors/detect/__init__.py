"""The failure detector: which finished runs failed though nothing said so, as a calibrated `p_failed`.

Offline and keyless: features of the run's own evidence (`features.py`: errors
the run moved past, task parts the answer leaves out, values no step gave,
loops, give-ups, handoffs that never returned, the requested format unmet) and
a calibrated gradient-boosting model (`model.py`, `model.joblib` shipped next
to it, trained by `scripts/detect_train.py`). It never reads a reference
answer, a gold label, an answer key, the outcome or the run's source.
"""

from .features import BASELINES, FEATURE_NAMES, detector_view, features
from .model import DEFAULT_MODEL_PATH, Detection, Detector, DetectorMissingError, fit, load, predict, save

__all__ = ["BASELINES", "DEFAULT_MODEL_PATH", "Detection", "Detector", "DetectorMissingError", "FEATURE_NAMES", "detector_view",
           "features", "fit", "load", "predict", "save"]
