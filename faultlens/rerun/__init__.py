"""Re-running any program under faultlens: the re-run contract, one trial, the rerunner, `faultlens verify`."""
