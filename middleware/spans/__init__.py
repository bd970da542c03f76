"""Spans to steps: attribute names (`conventions`), messages, the span -> step mapping, the span tree, whole traces, one adapter per framework (`adapters/`)."""
