import pytest

from sessions_app.redaction import REDACTED, is_secret_key, redact_secrets


@pytest.mark.parametrize(
    "key",
    [
        "api_key",
        "apiKey",
        "X-API-Key",
        "Authorization",
        "token",
        "access_token",
        "refreshToken",
        "password",
        "db_password",
        "client_secret",
        "secret",
        "private_key",
        "Cookie",
        "github_token",
    ],
)
def test_secret_keys(key):
    assert is_secret_key(key)


@pytest.mark.parametrize("key", ["max_tokens", "input_tokens", "tokenizer", "user", "keyword", "author", "path"])
def test_ordinary_keys(key):
    assert not is_secret_key(key)


def test_nested_values_and_json_strings_are_redacted():
    value = {
        "headers": {"Authorization": "Bearer abc", "Accept": "json"},
        "items": [{"password": "hunter2", "name": "db"}],
        "body": '{"api_key": "k-1", "q": "杭州"}',
        "max_tokens": 64,
        "empty_token": "",
    }
    redacted = redact_secrets(value)
    assert redacted["headers"] == {"Authorization": REDACTED, "Accept": "json"}
    assert redacted["items"] == [{"password": REDACTED, "name": "db"}]
    assert redacted["body"] == '{"api_key": "[REDACTED]", "q": "杭州"}'
    assert redacted["max_tokens"] == 64
    assert redacted["empty_token"] == ""
    assert value["headers"]["Authorization"] == "Bearer abc"  # the input is not changed


def test_plain_strings_and_non_json_pass_through():
    assert redact_secrets("{not json") == "{not json"
    assert redact_secrets("hello") == "hello"
    assert redact_secrets(None) is None
