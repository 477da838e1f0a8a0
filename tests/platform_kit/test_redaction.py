"""The redaction rules themselves (platform_kit/redaction.py): what is replaced, what is kept, and that the pass
never raises and is idempotent. Where each write path applies them: the tests beside each app."""

import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from platform_kit import redaction
from platform_kit.redaction import REDACTED, holds_secret, is_secret_key, mentions_secret, redact, redact_text

OPENAI_KEY = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
ANTHROPIC_KEY = "sk-ant-api03-Zx9yW8vU7tS6rQ5pO4nM3lK2jI1hG0fE"
AWS_ID, AWS_SECRET = "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2
PEM = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nQyNTUxOQAAACD\n-----END OPENSSH PRIVATE KEY-----"


@pytest.mark.parametrize(
    "key",
    [
        "api_key",
        "apiKey",
        "X-API-Key",
        "Authorization",
        "proxy-authorization",
        "token",
        "access_token",
        "refreshToken",
        "password",
        "db_pass",
        "DB_PASSWORD",
        "dbPassword",
        "passwd",
        "passphrase",
        "aws_secret_access_key",
        "AWS_SECRET_ACCESS_KEY",
        "client_secret",
        "credentials",
        "creds",
        "private_key",
        "privateKey",
        "Cookie",
        "set-cookie",
        "github_token",
        "x-auth-token",
        "signature",
        "session_key",
        "accesskey",
    ],
)
def test_secret_keys_by_the_words_of_their_name(key):
    assert is_secret_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "max_tokens",
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "total_tokens",
        "token_count",
        "promptTokenCount",
        "tokenizer",
        "auth_type",
        "password_min_length",
        "secret_name",
        "passenger",
        "compass",
        "bypass",
        "author",
        "keyword",
        "key",
        "sessionId",
        "session_id",
        "user",
        "path",
    ],
)
def test_ordinary_keys_are_kept(key):
    assert not is_secret_key(key)


def test_values_under_secret_keys_go_at_any_depth_and_counts_stay():
    value = {
        "aws_secret_access_key": AWS_SECRET,
        "db": {"db_pass": "hunter2", "passphrase": "correct horse", "host": "db"},
        "credentials": {"user": "app", "pin": 1234, "rotated": True},
        "usage": {"input_tokens": 12, "max_tokens": 64},
        "empty_token": "",
        "passenger": "Ada",
    }
    assert redact(value) == {
        "aws_secret_access_key": REDACTED,
        "db": {"db_pass": REDACTED, "passphrase": REDACTED, "host": "db"},
        "credentials": {"user": REDACTED, "pin": REDACTED, "rotated": True},
        "usage": {"input_tokens": 12, "max_tokens": 64},
        "empty_token": "",
        "passenger": "Ada",
    }
    assert value["db"]["db_pass"] == "hunter2"  # the input is not changed


def test_header_lists_and_name_value_pairs():
    headers = [{"name": "Authorization", "value": "Bearer abc"}, {"name": "Accept", "value": "application/json"}]
    assert redact(headers) == [{"name": "Authorization", "value": REDACTED}, headers[1]]
    assert redact([["Cookie", "sid=1"], ["Accept", "*/*"]]) == [["Cookie", REDACTED], ["Accept", "*/*"]]
    assert redact({"key": "DB_PASSWORD", "value": "x"}) == {"key": "DB_PASSWORD", "value": REDACTED}
    assert redact({"name": "region", "value": "eu"}) == {"name": "region", "value": "eu"}


def test_json_in_strings_double_encoded_and_after_leading_spaces():
    once = json.dumps({"password": "hunter2", "q": "杭州"}, ensure_ascii=False)
    assert json.loads(redact(once)) == {"password": REDACTED, "q": "杭州"}
    assert json.loads(redact("  \n" + once)) == {"password": REDACTED, "q": "杭州"}
    twice = json.dumps(json.dumps({"headers": {"X-Api-Key": "k-123"}}))
    assert json.loads(json.loads(redact(twice))) == {"headers": {"X-Api-Key": REDACTED}}
    assert redact("{not json, password=hunter2}") == "{not json, password=[REDACTED]}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"my key is {OPENAI_KEY} ok", f"my key is {REDACTED} ok"),
        (f"ANTHROPIC_API_KEY={ANTHROPIC_KEY}", f"ANTHROPIC_API_KEY={REDACTED}"),
        (f"aws_access_key_id = {AWS_ID}", f"aws_access_key_id = {REDACTED}"),
        (f"export AWS_SECRET_ACCESS_KEY={AWS_SECRET}", f"export AWS_SECRET_ACCESS_KEY={REDACTED}"),
        (f"aws secret {AWS_SECRET}", f"aws secret {REDACTED}"),
        (f"git clone https://{GITHUB}@github.com/o/r", f"git clone https://{REDACTED}@github.com/o/r"),
        ("glpat-Ab12Cd34Ef56Gh78Ij90 for CI", f"{REDACTED} for CI"),
        ("slack xoxb-1234567890-abcdefghij", f"slack {REDACTED}"),
        ("key=AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", f"key={REDACTED}"),
        ("stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc", f"stripe {REDACTED}"),
        (f"token: {JWT}", f"token: {REDACTED}"),
        ("curl -H 'Authorization: Bearer abc123def456'", f"curl -H 'Authorization: Bearer {REDACTED}'"),
        ("Authorization: Basic dXNlcjpwYXNzd29yZA==", f"Authorization: Basic {REDACTED}"),
        ("Cookie: sid=31d4d96e407aad42; lang=en", f"Cookie: {REDACTED}"),
        ("postgres://app:s3cr3t@db:5432/app", f"postgres://app:{REDACTED}@db:5432/app"),
        ("mongodb+srv://u:p%40ss@cluster0.example.net/x", f"mongodb+srv://u:{REDACTED}@cluster0.example.net/x"),
        ("Server=db;User Id=sa;Password=Pa55w0rd;", f"Server=db;User Id=sa;Password={REDACTED};"),
        ('{"password": "hunter2"} as text', f'{{"password": "{REDACTED}"}} as text'),
        ('escaped {\\"api_key\\": \\"k-1\\"}', f'escaped {{\\"api_key\\": \\"{REDACTED}\\"}}'),
        ("mysql -u root --password hunter2 db", f"mysql -u root --password {REDACTED} db"),
        ("my password is hunter2, thanks", f"my password is {REDACTED}, thanks"),
        ("我的密码是abc123，记住", f"我的密码是{REDACTED}，记住"),
        (PEM, f"-----BEGIN OPENSSH PRIVATE KEY-----\n{REDACTED}\n-----END OPENSSH PRIVATE KEY-----"),
    ],
)
def test_credentials_in_text_lose_only_their_secret_part(text, expected):
    assert redact_text(text) == expected
    assert redact(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "The input_tokens were 500, max_tokens: 4096 and token counts matter.",
        "A token is a piece of a word; the tokenizer splits text into tokens.",
        "The passenger used a compass. Authentication uses Basic auth over TLS.",
        "commit 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a3f, id 123e4567-e89b-12d3-a456-426614174000",
        "/home/dev/.ssh/config and ~/.aws/credentials are files; see https://example.com:8443/path@v2",
        "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
        "The password is incorrect. Forgot password: click the link. The router password is on the fridge.",
        "Fix the password reset flow; the API key field is required.",
        "task-list-of-the-things-to-do-today and sk-learn-compatible-estimator-wrapper",
        "İstanbul'da hava güzel.",
    ],
)
def test_ordinary_text_is_kept(text):
    assert redact_text(text) == text


def test_configured_extras(settings):
    try:
        redaction.configure(extra_keys=["^acme_"], extra_patterns=[r"ACME-(?P<secret>[0-9a-f]{8})"])
        assert redact({"acme_thing": "x", "thing": "ACME-deadbeef"}) == {
            "acme_thing": REDACTED,
            "thing": "ACME-" + REDACTED,
        }
        with pytest.raises(ValueError, match="not a valid regular expression"):
            redaction.configure(extra_patterns=["(unclosed"])
    finally:
        redaction.configure()
    assert redact({"acme_thing": "x"}) == {"acme_thing": "x"}


def test_a_short_text_seen_before_follows_rules_configured_since():
    """Short texts' answers are remembered (a log repeats them on every line) until the rules change."""
    assert redact_text("ticket ACME-deadbeef") == "ticket ACME-deadbeef"
    try:
        redaction.configure(extra_patterns=[r"ACME-(?P<secret>[0-9a-f]{8})"])
        assert redact_text("ticket ACME-deadbeef") == "ticket ACME-" + REDACTED
    finally:
        redaction.configure()
    assert redact_text("ticket ACME-deadbeef") == "ticket ACME-deadbeef"


def test_secrets_in_sentences():
    assert holds_secret("remember that my OpenAI API key is " + OPENAI_KEY)
    assert holds_secret("my password is hunter2")
    assert holds_secret("my vpn password x7Hq9z")
    assert not holds_secret("Fix the password reset flow")
    assert not holds_secret("the token limit is 4096")
    assert mentions_secret("I keep my passwords in a manager") and mentions_secret("密码")
    assert not mentions_secret("I prefer window seats") and not mentions_secret("the token limit is 4096")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)
secretish = st.sampled_from(
    [
        OPENAI_KEY,
        AWS_ID,
        JWT,
        PEM,
        "Bearer abc123def456",
        "password=x",
        "my password is hunter2.",
        "我的密码是abc123，",
        "密码：",
        "postgres://a:b@h/d",
        '{"token": "t"}',
        "--token",
        REDACTED,
    ]
)


@settings(max_examples=500, deadline=None)
@given(json_values, st.lists(secretish | st.text(max_size=20), max_size=6))
def test_redaction_never_raises_and_is_idempotent(value, pieces):
    for candidate in (value, " ".join(pieces), {"text": " ".join(pieces), "nested": json.dumps({"v": value})}):
        once = redact(candidate)
        assert redact(once) == once


def _settings_process(tmp_path, **env_vars) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "CELERY_BROKER_URL", "DATABASE_URL")}
    env.update(ACE_DATA_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="aceproject.settings", **env_vars)
    code = "import django; django.setup()\nfrom platform_kit.redaction import redact\n"
    code += "print(redact({'acme_id': 'a', 'note': 'ACME-0123abcd', 'id': 'x'}))"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


def test_extra_patterns_from_the_environment_apply_and_a_bad_one_stops_the_start(tmp_path):
    done = _settings_process(
        tmp_path, ACE_REDACT_EXTRA_KEYS="^acme_", ACE_REDACT_EXTRA_PATTERNS='["ACME-(?P<secret>[0-9a-f]{8})"]'
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "{'acme_id': '[REDACTED]', 'note': 'ACME-[REDACTED]', 'id': 'x'}"
    bad = _settings_process(tmp_path, ACE_REDACT_EXTRA_PATTERNS='["ACME-(unclosed"]')
    assert bad.returncode != 0 and "ACME-(unclosed" in bad.stderr and "ImproperlyConfigured" in bad.stderr
    not_a_list = _settings_process(tmp_path, ACE_REDACT_EXTRA_PATTERNS="ACME-.*")
    assert not_a_list.returncode != 0 and "JSON array" in not_a_list.stderr
