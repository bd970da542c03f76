"""Ingest: spans written into a store as they arrive, planned outside the store's transaction (`plan`), written inside it (`write`)."""
