"""`attributors.build`: the one way every caller makes an attributor from method, model and options."""

from __future__ import annotations

import pytest

from faultlens import attributors
from faultlens.middleware.errors import FaultlensError, NotFound


def test_build_offline_method_with_options():
    heuristic = attributors.build("heuristic", with_reference=True, budget_usd=None)
    assert heuristic.name == "heuristic" and heuristic.with_reference is True


def test_build_gives_the_model_to_llm_methods_only():
    llm = attributors.build("all_at_once", "openai/gpt-4o-mini", max_calls=1)
    assert llm.client.model == "openai/gpt-4o-mini"
    assert attributors.uses_model("all_at_once") and not attributors.uses_model("learned")
    with pytest.raises(FaultlensError, match="calls no model"):
        attributors.build("learned", "openai/gpt-4o-mini")


def test_unknown_method_is_a_faultlens_key_and_value_error():
    with pytest.raises(attributors.UnknownMethod, match="unknown attribution method 'crystal_ball'") as caught:
        attributors.build("crystal_ball")
    assert isinstance(caught.value, NotFound) and isinstance(caught.value, KeyError) and isinstance(caught.value, ValueError)
    assert str(caught.value).startswith("unknown attribution method")  # a sentence, not a quoted KeyError
