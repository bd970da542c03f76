"""Spans to steps: OpenTelemetry GenAI, OpenInference and OpenLLMetry spans read into the trace model."""
