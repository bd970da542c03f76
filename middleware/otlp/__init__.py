"""OTLP JSON in and out (`convert`) and the schema an OTLP/HTTP export must satisfy (`schema`)."""
