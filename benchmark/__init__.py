"""faultlens benchmark: datasets, exact metrics, the evaluation runner, reports and plots."""

from .datasets import Dataset, load_dataset
from .metrics import compute_metrics, full_report
from .runner import RunSummary, run_benchmark

__all__ = ["Dataset", "RunSummary", "compute_metrics", "full_report", "load_dataset", "run_benchmark"]
