"""Record and replay: the recording session, the OpenAI-compatible endpoint, and re-running a failed
run with one step changed."""
