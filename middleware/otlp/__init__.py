"""OTLP in and out: JSON (`convert`), protobuf read straight into span records (`protobuf`), and the schema an OTLP/HTTP export must satisfy (`schema`)."""
