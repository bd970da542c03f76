"""Instrumentations that turn other libraries' activity into faultlens spans (litellm, LangGraph)."""
