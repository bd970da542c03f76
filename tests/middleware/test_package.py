"""`faultlens.middleware`'s public names: each listed once, each resolving, none loaded before it is asked for."""

import subprocess
import sys

import faultlens.middleware as M


def test_every_public_name_is_listed_once_and_resolves():
    assert sorted(M.__all__) == sorted(M._EXPORTS)
    for name in M.__all__:
        assert getattr(M, name) is not None


def test_importing_the_tracer_loads_neither_the_store_nor_detect_secrets():
    code = ("import sys; from faultlens.middleware import Tracer; "
            "print(sorted(m for m in ('sqlite_utils', 'detect_secrets', 'litellm', 'fastapi', 'sklearn') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.strip()
    assert out == "[]"


def test_an_unknown_name_is_an_attribute_error():
    try:
        M.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("expected AttributeError")
