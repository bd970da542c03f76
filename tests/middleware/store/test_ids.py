from faultlens.middleware.store.ids import optional_id, stored_id, stored_ids
from faultlens.middleware.store.redact import ID_PREFIX

SECRET_ID = "run AKIAIOSFODNN7EXAMPLE"


def test_a_clean_id_is_stored_as_it_is():
    assert stored_id("4bf92f3577b34da6a3ce929d0e0e4736") == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert stored_id("planner") == "planner"


def test_an_id_holding_a_secret_is_stored_as_its_hash_and_maps_to_itself():
    stored = stored_id(SECRET_ID)
    assert stored.startswith(ID_PREFIX) and "AKIA" not in stored
    assert stored_id(SECRET_ID) == stored  # the same raw id, the same stored id: look-ups find it
    assert stored_id(stored) == stored  # read back and passed again
    assert stored_id("run AKIAIOSFODNN7EXAMPLF") != stored


def test_lists_and_missing_ids():
    assert stored_ids(["a", SECRET_ID]) == ["a", stored_id(SECRET_ID)]
    assert optional_id(None) is None and optional_id(SECRET_ID) == stored_id(SECRET_ID)
