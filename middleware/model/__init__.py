"""The trace model: traces, steps, attributions and lessons (`trace`), the failure taxonomy, step
roles, labels and the answer key."""
