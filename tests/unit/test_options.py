import pytest

from reginamq.common.errors import BadRequest
from reginamq.engine import options


def test_defaults_cover_every_documented_option():
    assert options.DEFAULTS["leaseTime"] == 300
    assert options.DEFAULTS["retryLimit"] == 3
    assert options.DEFAULTS["dedupWindowSeconds"] == 3600
    assert options.DEFAULTS["ttl"] == options.PUSH_CREATED_DEFAULTS["ttl"] == 0  # no expiry unless configured
    assert options.PUSH_CREATED_DEFAULTS["leaseTime"] == 60
    assert len(options.DEFAULTS) == 17


def test_merge_keeps_absent_keys_and_null_restores_default():
    current = {**options.DEFAULTS, "leaseTime": 10, "retryLimit": 7}
    merged = options.merge(current, {"retryLimit": None, "windowBuffer": 5}, "merge")
    assert merged["leaseTime"] == 10
    assert merged["retryLimit"] == 3
    assert merged["windowBuffer"] == 5


def test_replace_resets_absent_keys():
    current = {**options.DEFAULTS, "leaseTime": 10}
    merged = options.merge(current, {"retryLimit": 1}, "replace")
    assert merged["leaseTime"] == 300
    assert merged["retryLimit"] == 1


@pytest.mark.parametrize(
    ("given", "fragment"),
    [
        ({"leaseTimee": 3}, "unknown queue option"),
        ({"leaseTime": "300"}, "must be an integer"),
        ({"leaseTime": True}, "must be an integer"),
        ({"retryLimit": -1}, "between"),
        ({"leaseTime": 0}, "between"),
        ({"deadLetterQueue": 1}, "true or false"),
        ({"delayedProcessing": 1.5}, "must be an integer"),
    ],
)
def test_invalid_options_are_refused_with_a_reason(given, fragment):
    with pytest.raises(BadRequest) as caught:
        options.validate(given)
    assert fragment in str(caught.value)


def test_integral_floats_are_accepted_as_integers():
    assert options.validate({"leaseTime": 30.0}) == {"leaseTime": 30}


def test_options_must_be_an_object():
    with pytest.raises(BadRequest):
        options.validate([1, 2])
