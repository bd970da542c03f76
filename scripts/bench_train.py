"""Time of retraining `learned` on the bundled data and a user's labelled runs, and where it goes.

    LITELLM_LOCAL_MODEL_COST_MAP=True python scripts/bench_train.py [--labelled 20]

Stands in for a user's loop (label some failed runs, retrain): copies of the
first `--labelled` `dev` runs under new ids, saved to a JSONL file, play the
user's labelled runs and are trained on beside `bundled:dev`. Prints the wall seconds of the whole `train_learned`, and of its parts measured
in the same run: the features, the fit, and the training accuracy, batched
(`LearnedAttributor.blamed_steps`) against one `attribute` call per trace (the
way it was computed before), with their ratio. Peak memory (max RSS) at the
end. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from faultlens.attributors.learned import LearnedAttributor, fit, trace_features  # noqa: E402
from faultlens.benchmark import load_dataset  # noqa: E402
from faultlens.benchmark.train import train_learned  # noqa: E402
from faultlens.middleware.jsonl import write_jsonl  # noqa: E402


def seconds(fn):
    started = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--labelled", type=int, default=20, help="labelled runs of 'your system' trained on beside bundled:dev")
    args = parser.parse_args()
    dev = load_dataset("bundled:dev").traces()
    with tempfile.TemporaryDirectory() as tmp:
        mine = Path(tmp) / "mine.jsonl"
        write_jsonl([t.model_copy(update={"id": f"{t.id}-mine"}) for t in dev[: args.labelled]], mine)
        result, total = seconds(lambda: train_learned(["bundled:dev", f"jsonl:{mine}"], out=Path(tmp) / "m.joblib"))
    features, t_features = seconds(lambda: {t.id: trace_features(t) for t in dev})
    model, t_fit = seconds(lambda: fit(dev, features=features))
    learned = LearnedAttributor(model=model)
    batched, t_batched = seconds(lambda: learned.blamed_steps(dev, features))
    one_by_one, t_each = seconds(lambda: [learned.attribute(t, features=features[t.id]).step for t in dev])
    assert batched == one_by_one, "the batched steps must be the steps attribute blames"
    print(f"train_learned on bundled:dev + {args.labelled} labelled runs: {total:.1f} s "
          f"({result.traces} traces; training step accuracy {result.train_step_accuracy:.3f})")
    print(f"  features of {len(dev)} traces {t_features:.1f} s, fit {t_fit:.1f} s")
    print(f"  training accuracy: batched {t_batched:.2f} s, one attribute call per trace {t_each:.2f} s "
          f"(ratio {t_each / t_batched:.1f}x)")
    print(f"  peak memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB; "
          f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
