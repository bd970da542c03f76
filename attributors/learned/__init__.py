"""`learned`: offline attribution by a small scikit-learn model.

Trained on the bundled benchmark's `dev` split and the `train` halves of TRAIL
(real smolagents runs) and AgentRx (tau-bench retail conversations), so that
the model has seen real frameworks' traces; every system (a dataset's runs of
one framework) weighs the same in training (`model.SOURCE_BALANCE` = 1, see
`model.source_weights` for why). Importing this package registers the
`learned` attributor and `blend` (learned with the heuristic's signals, the
default method; `blend.py`). The model file (`model.joblib`) ships next to this module;
`faultlens train --dataset bundled:dev --dataset trail:../shared/realdev/trail:train
--dataset taubench:../shared/realdev/agentrx:train --out PATH` rebuilds it
(see `benchmark.train`).
"""

from ..registry import register
from .attributor import LearnedAttributor
from .blend import Blend
from .features import dense_feature_names, feature_names, trace_features
from .model import DEFAULT_MODEL_PATH, LearnedModel, ModelMissingError, fit, load, save

register("learned", LearnedAttributor)
register("blend", Blend)

__all__ = ["Blend", "DEFAULT_MODEL_PATH", "LearnedAttributor", "LearnedModel", "ModelMissingError", "dense_feature_names",
           "feature_names", "fit", "load", "save", "trace_features"]
