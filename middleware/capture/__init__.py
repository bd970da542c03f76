"""Capture of live runs: the tracer, the run in progress and the instrumentations (litellm, LangGraph)."""
