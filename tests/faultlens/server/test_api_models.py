"""Every JSON API route declares its response model, and the OpenAPI schema describes each answer's fields."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from faultlens.middleware.store import open_store
from faultlens.server import create_app
from faultlens.server.api_models import OutcomeOut


def test_each_api_answer_is_a_declared_model_with_its_fields():
    spec = create_app(open_store(":memory:")).openapi()
    schemas = spec["components"]["schemas"]
    answers = {(path, method): op["responses"]["200"]["content"]["application/json"]["schema"]
               for path, ops in spec["paths"].items() if path.startswith("/api/") for method, op in ops.items()}
    assert len(answers) == 13, sorted(answers)
    for where, answer in answers.items():
        # A route without a response model answers `{"type": "object", "additionalProperties": true}` (its dict annotation).
        ref = answer.get("items", answer).get("$ref")
        assert ref is not None, (where, answer)
        assert schemas[ref.rsplit("/", 1)[-1]]["properties"], where
    assert answers[("/api/runs", "get")]["type"] == "array" and answers[("/api/runs/{trace_id}", "get")]["$ref"].endswith("/Trace")
    assert {"index", "agent", "kind", "content"} <= set(schemas["Step"]["properties"])  # not emptied by Step's serializer


def test_a_key_a_model_does_not_declare_is_refused_not_dropped():
    with pytest.raises(ValidationError):
        OutcomeOut.model_validate({"trace_id": "t", "success": True, "queued": False, "surprise": 1})
