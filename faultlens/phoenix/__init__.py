"""faultlens beside a running Arize Phoenix: read a project's spans, attribute its failed runs, write verdicts back as annotations.

    faultlens phoenix sync http://127.0.0.1:6006 --project agents --failed-if correctness=incorrect
    faultlens traces import phoenix:http://127.0.0.1:6006?project=agents

Modules: `client` (the REST API through `arize-phoenix-client`, the `phoenix`
extra), `records` (Phoenix spans as `SpanRecord`s), `source` (the
`phoenix:URL` trace source), `failed` (which runs failed), `annotations`
(a verdict as span annotations), `state` and `sync` (the resumable loop),
`cli` (`faultlens phoenix`). See docs/phoenix.md.
"""
