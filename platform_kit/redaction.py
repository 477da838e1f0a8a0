"""Secrets never reach the database or a prompt: one redaction pass, applied by every service that stores text a
client sent (messages, turns, imports, session metadata, state, records, strategy output).

Three rules, in one walk over any JSON-like value (``redact``):

- **Secret keys.** A value under a key whose name says it holds a secret is replaced whole: the key is split
  into words (``dbPass`` → ``db pass``, ``X-API-Key`` → ``x api key``) and a word such as password, passwd, pwd,
  pass, passphrase, secret, token, credential(s), cookie, signature, authorization, auth, or a pair such as
  api key, access key, private key, session key, marks it (``is_secret_key``). Counts are not secrets:
  ``input_tokens``, ``max_tokens``, ``token_count``, ``auth_type`` are kept.
- **Name–value pairs.** ``{"name": "Authorization", "value": "Bearer …"}``, ``{"key": "password", "value": …}``
  and ``[["Cookie", "a=b"], …]`` (header lists) have their value redacted when the name is a secret key.
- **Secret-looking text.** In every string, at any depth, the credential formats of ``VALUE_RULES`` (provider
  keys, JWTs, ``Bearer``/``Basic`` credentials, PEM private keys, passwords in URLs and connection strings,
  ``password=…`` and ``"api_key": "…"`` inside text, "my password is …") lose their secret part only:
  ``Bearer [REDACTED]``, ``postgres://app:[REDACTED]@db/app``.

A string holding JSON (``'{"password": …}'``, also after leading spaces, also encoded twice) is parsed,
redacted and written back as JSON when something in it changed. The walk is bounded (``MAX_DEPTH`` levels,
strings of up to ``MAX_JSON_STRING`` characters parsed), and the text rules still cover what it does not
parse. Redacting twice gives the same value as redacting once.

Extend it with ``configure(extra_keys=…, extra_patterns=…)`` — the settings do so from ``ACE_REDACT_EXTRA_KEYS``
and ``ACE_REDACT_EXTRA_PATTERNS`` at start-up (docs/security.md).

``mentions_secret`` tells whether a sentence talks about a credential at all ("my password is hunter2" has no
recognisable format); the strategy extractors use it to never make a memory of one.

Pure Python: no Django import, so the extractors and benchmarks can use it as they are.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable

REDACTED = "[REDACTED]"
MAX_DEPTH = 300  # more than the JSON fields' own nesting limit (250): nothing stored is deeper
MAX_JSON_STRING = 1_000_000  # a longer string is scanned as text, not parsed as JSON

# -- secret keys ---------------------------------------------------------------------------------------------
# A word that marks a secret wherever it stands in the key ("db_pass", "aws_secret_access_key", "X-Auth-Token").
_SECRET_WORDS = frozenset(
    {
        "password",
        "passwords",
        "passwd",
        "pwd",
        "pass",
        "passphrase",
        "passcode",
        "secret",
        "secrets",
        "token",
        "credential",
        "credentials",
        "creds",
        "cookie",
        "cookies",
        "signature",
        "authorization",
        "auth",
        "apikey",
        "privatekey",
        "otp",
        "totp",
        "pin",
        "csrftoken",
        "xsrftoken",
        "bearer",
        "jwt",
    }
)
# "key" after one of these is a secret ("api_key", "accessKey", "session_key"). A session id is not: agent logs
# name their sessions by it everywhere.
_SECRET_PAIRS = {
    "key": frozenset(
        {
            "api",
            "access",
            "secret",
            "private",
            "signing",
            "encryption",
            "master",
            "client",
            "session",
            "ssh",
            "gpg",
            "pgp",
            "license",
            "app",
            "service",
            "account",
            "deploy",
            "webhook",
            "auth",
            "subscription",
        }
    ),
    "keys": frozenset({"api", "access", "secret", "private", "ssh", "signing", "encryption"}),
}
# Words that make a key about a secret rather than the secret itself: "token_count", "auth_type",
# "password_min_length", "secret_name".
_DESCRIPTIVE_WORDS = frozenset(
    {
        "count",
        "counts",
        "max",
        "min",
        "limit",
        "limits",
        "num",
        "number",
        "total",
        "usage",
        "used",
        "budget",
        "estimate",
        "remaining",
        "length",
        "len",
        "type",
        "types",
        "kind",
        "method",
        "scheme",
        "mode",
        "url",
        "uri",
        "endpoint",
        "path",
        "file",
        "name",
        "expires",
        "expiry",
        "expiration",
        "ttl",
        "at",
        "in",
        "required",
        "enabled",
        "present",
        "provided",
        "policy",
        "rate",
        "strength",
        "hint",
        "label",
        "field",
        "env",
        "var",
        "source",
        "error",
        "status",
    }
)
# Joined words without separators ("dbpassword", "xapikey", "accesstoken"): these are unambiguous as parts.
_SECRET_INFIXES = ("password", "passwd", "passphrase", "secret", "apikey", "credential", "privatekey", "authtoken")
_SECRET_SUFFIXES = ("token", "cookie", "accesskey")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_NON_WORD = re.compile(r"[^a-z0-9]+")
_key_cache: dict[str, bool] = {}


# Characters that show nothing: a secret split by one ("pass\u200bword", "sk-\u00adproj-…") is matched as if it were
# not there. Only for matching: the text keeps them wherever nothing is redacted (an emoji's joiner, a Persian
# non-joiner).
_INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200d\u2060-\u2064\ufeff]")


def _key_words(key: str) -> list[str]:
    key = _INVISIBLE.sub("", key)
    return [word for word in _NON_WORD.split(_CAMEL.sub(" ", key).lower()) if word]


def is_secret_key(key) -> bool:
    """Whether a value under `key` is a secret, by the words of its name (see the module docstring)."""
    if not isinstance(key, str) or not key or len(key) > 200:
        return False
    known = _key_cache.get(key)
    if known is not None:
        return known
    words = _key_words(key)
    secret = False
    if words and not any(word in _DESCRIPTIVE_WORDS for word in words):
        secret = any(word in _SECRET_WORDS for word in words) or any(
            word in _SECRET_PAIRS and before in _SECRET_PAIRS[word]
            for before, word in zip(words, words[1:], strict=False)
        )
        if not secret:
            compact = "".join(words)
            secret = any(part in compact for part in _SECRET_INFIXES) or compact.endswith(_SECRET_SUFFIXES)
    if not secret and _extra_keys is not None:
        secret = bool(_extra_keys.search("_".join(words)))
    if len(_key_cache) < 10_000:
        _key_cache[key] = secret
    return secret


# -- secret-looking text -------------------------------------------------------------------------------------
# Each rule: a regex whose group "secret" (or the whole match) is replaced, and an optional check of the match
# that keeps prose from being redacted. Rules are written after gitleaks' config/gitleaks.toml, loosened where a
# format has versions (OpenAI, Anthropic) and anchored on their literal prefixes so each scan is cheap.
_TOKEN_CHARS = r"A-Za-z0-9_\-"
_STOPWORDS = frozenset(
    (
        "a an the not no none too very so is are was be being been required incorrect correct wrong invalid "
        "valid empty missing set unset expired stored saved changed reset in on at for to of by with from still "
        "now here there this that it its my your our their his her same different long short weak strong secure "
        "insecure safe unsafe hidden private public optional needed necessary case sensitive protected encrypted "
        "hashed known unknown shown visible blank null nil undefined true false yes ok okay and or but if when "
        "what which who how where why also just only ever never always"
    ).split()
)


def _has_digit_and_letter(text: str) -> bool:
    return any(c.isdigit() for c in text) and any(c.isalpha() for c in text)


def _credential_like(text: str) -> bool:
    """Not a plain word: mixed case, a digit or a symbol ("authentication" is prose; "dXNlcjpwYXNz" is not)."""
    return (
        any(c.isdigit() for c in text)
        or (any(c.isupper() for c in text) and any(c.islower() for c in text))
        or any(c in "+/=_.-~" for c in text)
    )


def _said_value(value: str) -> bool:
    return value.strip(".,!?;:\"'“”‘’()").lower() not in _STOPWORDS


def _trie_pattern(words) -> str:
    """An alternation of literal words written as a trie ("pass|passw|pwd" → "p(?:ass(?:w)?|wd)"): Python's `re`
    tries the branches of an alternation one by one at each position, so shared prefixes make it several times
    faster. At a position the longest word wins."""
    trie: dict = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def pattern(node: dict) -> str:
        branches = [re.escape(char) + pattern(child) for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 and "" not in node else "(?:" + "|".join(branches) + ")"
        return body + "?" if "" in node else body

    return pattern(trie)


class ValueRule:
    """One credential format in text. `pattern` finds it; its group "secret" (else the whole match) is replaced.

    One search of the lower-cased text finds every rule's `anchors` and `markers` at once (`redact_text`): a rule
    with anchors (lower-case words, "a|b") is tried only where one of them starts, from there; a rule with
    markers (substrings of any case) runs over the text only when one is there; a rule with neither (the
    configured extras) always runs. Searching for each rule's case-insensitive alternation instead would take
    Python's `re` several times longer. `check` vetoes a match (prose, counts)."""

    def __init__(
        self,
        name: str,
        pattern: str,
        *,
        markers: str = "",
        anchors: str = "",
        check: Callable[[re.Match], bool] | None = None,
        replacement: str = REDACTED,
    ):
        self.name = name
        self.regex = re.compile(pattern)
        self.group = "secret" if "secret" in self.regex.groupindex else 0
        self.markers = frozenset(marker.lower() for marker in markers.split("|") if marker)
        self.anchors = frozenset(anchor for anchor in anchors.split("|") if anchor)
        self.words = self.markers | self.anchors
        self.check = check
        self.replacement = replacement

    def _matches(self, text: str, positions: list[int] | None):
        if positions is None:
            yield from self.regex.finditer(text)
            return
        match_at, end = self.regex.match, 0
        for position in positions:
            if position >= end:
                match = match_at(text, position)
                if match is not None and (self.check is None or self.check(match)):
                    end = match.end()
                    yield match

    def spans(self, text: str, positions: list[int] | None = None) -> list[tuple[int, int]]:
        """Where this rule's secrets are in `text` (in order, not overlapping): found everywhere, or (anchored)
        tried at `positions` only."""
        spans, last = [], 0
        check = self.check if positions is None else None
        for match in self._matches(text, positions):
            if check is not None and not check(match):
                continue
            start, end = match.span(self.group)
            if start < last or "REDACTED" in text[start:end]:
                continue  # redacted already (also "[REDACTED" cut short of its bracket): redacting is idempotent
            spans.append((start, end))
            last = end
        return spans

    def apply(self, text: str, positions: list[int] | None = None) -> str:
        """`text` with this rule's secrets replaced."""
        spans = self.spans(text, positions)
        return _replaced(text, spans, self.replacement) if spans else text


def _replaced(text: str, spans: list[tuple[int, int]], replacement: str) -> str:
    pieces, last = [], 0
    for start, end in spans:
        pieces += [text[last:start], replacement]
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


def _word_start(match: re.Match) -> bool:
    start = match.start()
    return start == 0 or not (match.string[start - 1].isalnum() or match.string[start - 1] in "_-")


_KEY_CHAR = re.compile(r"[A-Za-z0-9_.\-]")


def _key_of(match: re.Match) -> str:
    """The whole key an anchored key-assignment match sits in ("aws_" before "secret_access_key")."""
    text, start = match.string, match.start()
    begin = start
    while begin > 0 and start - begin < 60 and _KEY_CHAR.match(text, begin - 1):
        begin -= 1
    return text[begin : match.end("key")]


def _key_assignment(match: re.Match) -> bool:
    if not is_secret_key(_key_of(match)):
        return False
    value = match.group("secret")
    if value.lower() in _AUTH_SCHEMES:
        return False  # "Authorization: Bearer …": the http-credentials rule redacts what follows the scheme
    if match.group("quote") or "=" in match.group("sep"):
        return True
    # "password: click the link" is prose; "password: hunter2" is a credential
    return _said_value(value) and (len(value) >= 6 or _credential_like(value))


_SECRET_WORD_ANCHOR = "passw|pwd|pass|secret|token|key|credential|auth|cookie|signature|pin|creds|otp"
_VALUE_CHAR = r"[^\s\"'`,;&)}\]\[<>\\]"


_AUTH_SCHEMES = frozenset({"bearer", "basic", "token", "digest"})

# Names of a credential in Chinese, simplified and traditional. 令牌/權杖 alone is also what a model counts.
_ZH_SECRET_NAMES = "|".join(
    (
        "密码 密碼 口令 密钥 密鑰 秘钥 秘鑰 金鑰 私钥 私鑰 "
        "访问令牌 訪問令牌 存取令牌 存取權杖 访问权杖 验证码 驗證碼 通行码 通行碼"
    ).split()
)


# Query parameters that hold a URL's secret besides those named like a secret key ("token", "api_key").
_URL_SECRET_PARAMS = frozenset({"key", "sig", "hmac", "apikey", "api-key", "access-key"})


def _said_start(match: re.Match) -> bool:
    """An English name starts a word ("my password", not "bypassword"); a Chinese one follows anything."""
    return not match.group(0)[:1].isascii() or _word_start(match)


# The words of prose that never stand in a passphrase: articles, pronouns, prepositions, conjunctions, auxiliaries,
# negations and adverbs ("the password is stored in the vault", "is not valid anymore", "is on the fridge").
_PROSE_WORDS = (
    "a an the this that these those it its my your our their his her me you we they he she him us them i "
    "not no none nothing never always ever still now then here there also just only too very so quite rather "
    "enough again anymore already yet soon later today tomorrow yesterday daily weekly "
    "is are was were be been being am do does did has have had will would shall should can could may might must "
    "in on at for to of by with from into onto over under about after before since until while during via per "
    "through without within between behind than as like "
    "and or but if when what which who whom whose how where why because although though unless whether "
    "please same different required incorrect invalid wrong empty missing set unset expired stored saved changed "
    "reset hidden shown known unknown null nil undefined true false yes ok okay all any some each every both "
    "either neither other another more less most least"
).split()
_PROSE = r"(?i:" + _trie_pattern(_PROSE_WORDS) + r")(?![^\s,.;:!?\"'”’)])"
_PHRASE_WORD = r"[^\s,.;:!?\"'“”‘’()\[\]]{1,40}"


def _header_line(match: re.Match) -> bool:
    """A header at the start of a line or of a quoted string, whose value is not just its scheme (the scheme's
    credentials are the http-credentials rule's)."""
    start = match.start()
    header_start = start == 0 or match.string[start - 1] in " \t\n\r\"'{,-"
    return header_start and match.group("secret").split()[0].lower() not in _AUTH_SCHEMES


def _sk_key(match: re.Match) -> bool:
    return _word_start(match) and _has_digit_and_letter(match.group(0))


# Written after gitleaks' config/gitleaks.toml, loosened where a format has versions (OpenAI, Anthropic).
VALUE_RULES: list[ValueRule] = [
    ValueRule(
        "private-key",
        r"-----BEGIN (?P<kind>[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----(?P<secret>[\s\S]*?)"
        r"(?=-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
        markers="PRIVATE KEY",
        replacement=f"\n{REDACTED}\n",
    ),
    ValueRule("openai-anthropic-key", r"sk-[A-Za-z0-9_\-]{20,}", markers="sk-", check=_sk_key),
    ValueRule(
        "stripe-key",
        r"(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}|whsec_[A-Za-z0-9]{20,}",
        markers="_live_|_test_|whsec_",
        check=_word_start,
    ),
    ValueRule(
        "github-token",
        r"gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}",
        markers="ghp_|gho_|ghu_|ghs_|ghr_|github_pat_",
        check=_word_start,
    ),
    ValueRule(
        "gitlab-token",
        r"gl(?:pat|dt|ptt|rt)-[A-Za-z0-9_\-]{20,}",
        markers="glpat-|gldt-|glptt-|glrt-",
        check=_word_start,
    ),
    ValueRule("slack-token", r"xox[abeoprs]-[A-Za-z0-9\-]{10,}", markers="xox", check=_word_start),
    ValueRule(
        "slack-webhook",
        r"hooks\.slack\.com/(?:services|workflows)/(?P<secret>[A-Za-z0-9+/]{20,})",
        markers="hooks.slack.com",
    ),
    ValueRule(
        "discord-webhook",
        r"discord(?:app)?\.com/api/webhooks/\d+/(?P<secret>[A-Za-z0-9_\-]{20,})",
        markers="discord",
    ),
    ValueRule("google-api-key", r"AIza[A-Za-z0-9_\-]{35}", markers="AIza", check=_word_start),
    ValueRule(
        "huggingface-npm-pypi-sendgrid",
        r"hf_[A-Za-z0-9]{30,}|npm_[A-Za-z0-9]{36}|pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,}"
        r"|SG\.[A-Za-z0-9_\-]{20,}\.[A-Za-z0-9_\-]{20,}",
        markers="hf_|npm_|pypi-|SG.",
        check=_word_start,
    ),
    ValueRule(
        "aws-access-key-id",
        r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}(?![A-Za-z0-9])",
        markers="AKIA|ASIA|ABIA|ACCA|A3T",
        check=_word_start,
    ),
    ValueRule(
        "aws-secret-access-key",
        r"aws[\w\-. ]{0,30}?(?:secret|key)[\w\-. ]{0,20}?[\"'\s:=]{1,5}(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
        anchors="aws",
    ),
    ValueRule(
        "jwt",
        r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}=*",
        markers="eyJ",
        check=_word_start,
    ),
    ValueRule(
        "http-credentials",
        r"(?i:bearer|basic|token|digest)[ \t]+(?P<secret>[A-Za-z0-9_\-.~+/]{8,}=*)",
        anchors="bearer|basic|token|digest",
        check=lambda m: _word_start(m) and _credential_like(m.group("secret")),
    ),
    ValueRule(
        "header-line",
        r"(?i:authorization|cookie|api-key|auth-token|access-token|private-token)[ \t]*:[ \t]*"
        r"(?:(?i:bearer|basic|token|digest)[ \t]+)?(?P<secret>[^\s\[\"'\\]+(?:[ \t]+[^\s\[\"'\\]+)*)",
        anchors="authorization|cookie|api|auth|access|private",
        check=_header_line,
    ),
    ValueRule(
        "url-password",
        r"[A-Za-z][A-Za-z0-9+.\-]{1,30}://[^\s:/@'\"<>\[\]]{0,200}:(?P<secret>[^\s@/'\"<>\[\]]{1,200})@",
        markers="://",
    ),
    ValueRule(
        "url-query-secret",
        # A signed or keyed URL: "?key=AIza…", "&sig=…" (Azure SAS), "?X-Amz-Signature=…", "?token=…".
        # The value stops at the next "?" too: a match its check refuses must not hide the parameter after it.
        r"[?&](?P<key>[A-Za-z0-9_.\-]{1,60})=(?P<secret>[^?&#\s\"'<>\[\]]{1,400})",
        markers="://",
        check=lambda m: m.group("key").lower() in _URL_SECRET_PARAMS or is_secret_key(m.group("key")),
    ),
    ValueRule(
        "said-passphrase",
        # "my passphrase is correct horse battery staple": three to eight words said as the password, up to the
        # end of the clause or the first word of prose ("the password is on the fridge" has none such).
        r"(?i:password|passwd|passphrase|pass phrase|passcode)(?: for [\w.\-]+)?"
        r"(?:\s+(?i:is|was|will be)\s+|[ \t]*[:=][ \t]*)[\"'“‘]?"
        r"(?P<secret>(?!" + _PROSE + r")" + _PHRASE_WORD + r"(?:[ \t]+(?!" + _PROSE + r")" + _PHRASE_WORD + r"){2,7})"
        r"(?![^\s,.;:!?\"'”’)])",
        anchors="pass",
        check=_word_start,
    ),
    ValueRule(
        "key-assignment",
        r"(?i:" + _SECRET_WORD_ANCHOR + r")(?P<key>[A-Za-z0-9_.\-]{0,120})"
        r"(?P<sep>\\?(?P<quote>[\"'])?[ \t]*(?::=|=>|=|:)[ \t]*(?:\\?[\"'])?)"
        # The value runs to a space, a quote or the end: "Tr0ub4dor&3xyz" whole. "&", "," and ";" inside it end it
        # only where another assignment follows (a query string's "&page=2", a connection string's ";Encrypt=").
        r"(?P<secret>(?:" + _VALUE_CHAR + r"|[&,;](?![A-Za-z_][\w.\-]{0,60}=)(?=" + _VALUE_CHAR + r")){1,400})",
        anchors=_SECRET_WORD_ANCHOR,
        check=_key_assignment,
    ),
    ValueRule(
        "cli-flag",
        r"--(?P<key>[A-Za-z0-9\-]{2,60})[ \t]+(?P<secret>[^\s\-\"'\[][^\s\"'\[]*)",
        markers="--",
        check=lambda m: is_secret_key(m.group("key")),
    ),
    ValueRule(
        "said-password",
        r"(?:(?i:password|passwd|passphrase|passcode|pin(?: code)?|api[ _\-]?key|secret(?: key)?"
        r"|access[ _\-]?key|private[ _\-]?key|access token|auth token|api token)|" + _ZH_SECRET_NAMES + ")"
        r"(?: for [\w.\-]+)?\s+(?i:is|was|will be|=|:)\s+[\"'“‘]?"
        # the value, without the punctuation that ends the sentence: "my password is hunter2, thanks"
        r"(?P<secret>[^\s\"'“”‘’\[]{2,199}?[^\s\"'“”‘’\[,.;:!?)])(?=[,.;:!?)]*(?:\s|$))",
        anchors="pass|pin|api|secret|access|private|auth|" + _ZH_SECRET_NAMES,
        check=lambda m: _said_start(m) and _said_value(m.group("secret")),
    ),
    ValueRule(
        "said-password-zh",
        # 令牌 (权杖) alone is also what a model counts ("令牌是按请求统计的"); only the access token is a credential.
        # The value is what a password is made of (not the Chinese prose that goes on after 是). The name may be
        # English too ("password是hunter2", "API key为sk-…").
        r"(?:" + _ZH_SECRET_NAMES + r"|(?i:password|passwd|passphrase|passcode|api[ _\-]?key|secret[ _\-]?key)"
        r"(?=\s*[是为為：]))\s*(?:是|为|為|：|:|=|＝)\s*[\"'“‘「]?"
        r"(?P<secret>[\x21-\x7e]{0,198}[A-Za-z0-9#$%&*+\-/<=>@^_`{|}~])(?=[\"'.,;:!?)\]]*(?:[^\x21-\x7e]|$))",
        markers=_ZH_SECRET_NAMES,
        anchors="pass|api|secret",
    ),
]
_BUILT_IN_RULES = len(VALUE_RULES)
_extra_keys: re.Pattern | None = None


def configure(*, extra_keys: Iterable[str] = (), extra_patterns: Iterable[str] = ()) -> None:
    """Add key patterns (regexes searched in the key as snake_case words: ``^x_internal_``, ``_pin$``) and value
    patterns (regexes; the group ``secret`` is replaced when there is one, else the whole match). Raises
    ValueError naming the pattern that does not compile; called again, it replaces the earlier extras."""
    global _extra_keys
    keys = [pattern for pattern in extra_keys if pattern]
    values = [pattern for pattern in extra_patterns if pattern]
    for pattern in keys:
        _compile(pattern, "key")
    for pattern in values:
        _compile(pattern, "value")
    _extra_keys = re.compile("|".join(f"(?:{p})" for p in keys), re.IGNORECASE) if keys else None
    _key_cache.clear()
    _short_answers.clear()
    del VALUE_RULES[_BUILT_IN_RULES:]
    VALUE_RULES.extend(ValueRule(f"extra-{index}", pattern) for index, pattern in enumerate(values, 1))


def _compile(pattern: str, what: str) -> re.Pattern:
    try:
        return re.compile(pattern)
    except re.error as error:
        raise ValueError(f"{what} pattern {pattern!r} is not a valid regular expression: {error}") from None


# Every rule's anchors and markers, found in one pass (the longest word at a position). No word holds another
# but as its prefix ("auth" in "authorization"), so that the non-overlapping search misses none that matters.
# The Chinese words are searched for apart, in text that is not all ASCII only: each first character more in
# one alternation slows its search at every position of every text.
_WORDS = {word for rule in VALUE_RULES for word in rule.words}
_WORD_SEARCH = re.compile(_trie_pattern({word for word in _WORDS if word.isascii()}))
_WIDE_WORD_SEARCH = re.compile(_trie_pattern({word for word in _WORDS if not word.isascii()}))
_rules_by_word: dict[str, tuple[ValueRule, ...]] = {}


def _rules_at(word: str) -> tuple[ValueRule, ...]:
    """The rules a found word calls for: those with the word or a prefix of it among their anchors or markers."""
    rules = _rules_by_word.get(word)
    if rules is None:
        prefixes = {word[:end] for end in range(1, len(word) + 1)}
        rules = _rules_by_word[word] = tuple(rule for rule in VALUE_RULES if rule.words & prefixes)
    return rules


def _scan(text: str) -> dict[ValueRule, list[int]]:
    """The rules the text calls for, each with where its anchors start."""
    lower = text.lower()
    if len(lower) != len(text):  # "İ" lower-cases to two characters: keep the positions aligned
        lower = "".join(ch.lower() if len(ch.lower()) == 1 else ch for ch in text)
    found: dict[ValueRule, list[int]] = {}
    for word in _WORD_SEARCH.finditer(lower):
        for rule in _rules_at(word.group()):
            found.setdefault(rule, []).append(word.start())
    if not lower.isascii():
        wide = set()
        for word in _WIDE_WORD_SEARCH.finditer(lower):
            for rule in _rules_at(word.group()):
                found.setdefault(rule, []).append(word.start())
                wide.add(rule)
        for rule in wide:
            found[rule].sort()  # a rule is tried at its positions in order
    return found


# Short strings recur: an agent log repeats its tool names, paths, statuses and models on every line (a real Claude
# Code tree: 88,000 strings, 15,000 distinct). Their answers are kept, until the rules change (`configure`).
_SHORT_TEXT = 256
_short_answers: dict[str, str] = {}


def redact_text(text: str) -> str:
    """`text` with the secret part of every credential-looking span replaced by "[REDACTED]"."""
    if len(text) < 5:  # "pwd=x"
        return text
    if len(text) > _SHORT_TEXT:
        return _redact_text(text)
    answer = _short_answers.get(text)
    if answer is None:
        answer = _redact_text(text)
        if len(_short_answers) >= 50_000:
            _short_answers.clear()
        _short_answers[text] = answer
    return answer


def _redact_text(text: str) -> str:
    if _INVISIBLE.search(text) is None:
        return _redact_visible(text)[0]
    # Matched without the invisible characters; the text keeps them, but inside what is redacted.
    origin = [index for index, char in enumerate(text) if not _INVISIBLE.match(char)]
    visible = "".join(text[index] for index in origin)
    redacted, origin = _redact_visible(visible, origin)
    return text if redacted == visible else _restored(text, redacted, origin)


def _redact_visible(text: str, origin: list[int] | None = None) -> tuple[str, list[int] | None]:
    """`text` redacted, and with `origin` (where each character of `text` was in the original text), where each
    character of the answer was (-1: a replacement's)."""
    found = _scan(text)
    if not found and len(VALUE_RULES) == _BUILT_IN_RULES:
        return text, origin
    stale = False  # the text changed since the scan: anchors' positions moved (the words found stay found)
    for rule in VALUE_RULES:
        if rule.words and rule not in found:
            continue
        if rule.anchors and stale:
            found, stale = _scan(text), False
            if rule not in found:
                continue
        spans = rule.spans(text, found[rule] if rule.anchors else None)
        if spans:
            if origin is not None:
                origin = _moved(origin, spans, len(rule.replacement))
            text, stale = _replaced(text, spans, rule.replacement), True
    return text, origin


def _moved(origin: list[int], spans: list[tuple[int, int]], size: int) -> list[int]:
    moved, last = [], 0
    for start, end in spans:
        moved += origin[last:start]
        moved += [-1] * size
        last = end
    moved += origin[last:]
    return moved


def _restored(original: str, redacted: str, origin: list[int]) -> str:
    """`redacted` with the invisible characters of `original` back between the characters it kept."""
    pieces, previous = [], -1  # where the last kept character was in `original`; None after a replacement
    for char, index in zip(redacted, origin, strict=True):
        if index < 0:
            pieces.append(char)
            previous = None
            continue
        if previous is not None:
            pieces.append(original[previous + 1 : index])
        pieces.append(char)
        previous = index
    if previous is not None:
        pieces.append(original[previous + 1 :])
    return "".join(pieces)


# -- the walk ------------------------------------------------------------------------------------------------
def _redact_secret_value(value, depth: int):
    """A value under a secret key: strings and numbers go; inside a container every leaf does."""
    if depth > MAX_DEPTH:
        return value
    if isinstance(value, bool) or value is None or value == "":
        return value
    if isinstance(value, dict):
        return {key: _redact_secret_value(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [_redact_secret_value(item, depth + 1) for item in value]
    if isinstance(value, str) and value.startswith(REDACTED) and value.strip() == REDACTED:
        return value
    return REDACTED


_PAIR_NAMES = ("name", "key", "header", "field", "param", "variable")
_PAIR_VALUES = ("value", "val", "content", "data", "secret")


def _redact_dict(value: dict, depth: int) -> dict:
    out = {}
    pair_name = None
    for name in _PAIR_NAMES:
        candidate = value.get(name)
        if isinstance(candidate, str) and is_secret_key(candidate):
            pair_name = name
            break
    for key, item in value.items():
        if is_secret_key(key) or (pair_name is not None and key in _PAIR_VALUES):
            out[key] = _redact_secret_value(item, depth + 1)
        else:
            out[key] = _redact(item, depth + 1)
    return out


def _redact_list(value: list, depth: int) -> list:
    out = []
    for item in value:
        if isinstance(item, list | tuple) and len(item) == 2 and isinstance(item[0], str) and is_secret_key(item[0]):
            out.append([item[0], _redact_secret_value(item[1], depth + 1)])
        else:
            out.append(_redact(item, depth + 1))
    return out


def _redact_string(value: str, depth: int) -> str:
    stripped = value.lstrip()
    if stripped[:1] in ("{", "[", '"') and len(value) <= MAX_JSON_STRING and depth < MAX_DEPTH:
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            parsed = None
        else:
            if isinstance(parsed, dict | list) or (isinstance(parsed, str) and stripped[:1] == '"'):
                redacted = _redact(parsed, depth + 1)
                if redacted == parsed:
                    return value
                return json.dumps(redacted, ensure_ascii=False)
    return redact_text(value)


def _redact(value, depth: int):
    if depth > MAX_DEPTH:
        return value
    if isinstance(value, str):
        return _redact_string(value, depth)
    if isinstance(value, dict):
        return _redact_dict(value, depth)
    if isinstance(value, list | tuple):
        return _redact_list(list(value), depth)
    return value


def redact(value):
    """A copy of `value` (any JSON-like value or a string) with every secret replaced by "[REDACTED]".
    Never raises on JSON-like input; the input is not changed."""
    return _redact(value, 0)


def redact_url(url: str) -> str:
    """A URL as it may be shown (an API answer, a list, a log): its password, the secret query parameters
    (``?token=``, ``?key=``, ``&sig=``, ``X-Amz-Signature``) and a webhook path's secret (Slack, Discord)
    replaced. The URL itself is stored and called as it is."""
    return redact_text(url) if isinstance(url, str) else url


def redact_fields(item: dict, names: Iterable[str]) -> dict:
    """`item` with the fields `names` redacted: the same dict when nothing changed, else a changed copy."""
    changed = None
    for name in names:
        value = item.get(name)
        if value is None or value == "" or isinstance(value, bool | int | float):
            continue
        redacted = _redact(value, 0)
        if redacted is not value and redacted != value:
            if changed is None:
                changed = dict(item)
            changed[name] = redacted
    return item if changed is None else changed


# -- talking about a secret ------------------------------------------------------------------------------------
_MENTIONS_SECRET = re.compile(
    r"(?i)\b(?:passwords?|passwd|passphrases?|pass ?codes?|pins?(?: codes?| numbers?)?|api[ _\-]?keys?"
    r"|access[ _\-]?keys?|secret[ _\-]?keys?|private[ _\-]?keys?|ssh[ _\-]?keys?|secrets?|credentials?"
    r"|(?:access|auth|api|bearer|refresh|session|personal access|github|gitlab|slack|openai|anthropic)[ _\-]?tokens?"
    r"|2fa|mfa|otp|one[ \-]time codes?|recovery codes?|backup codes?|security (?:answers?|questions?|codes?)"
    r"|cvv|cvc|card numbers?|credit card|social security|ssn|login details|log-?in credentials)\b"
    r"|" + _ZH_SECRET_NAMES + r"|凭证|凭据|憑證|憑據|信用卡|身份证号|身分證字號|身份證號"
)
# A credential named, then within a few words a value that looks like one: "my password for the VPN hunter2".
_STATED_SECRET = re.compile(
    r"(?i)\b(?:password|passwd|passphrase|passcode|pin(?: code)?|api[ _\-]?key|secret[ _\-]?key|access[ _\-]?key"
    r"|private[ _\-]?key|secret|(?:access|auth|api|bearer|refresh) token)s?\b[^.!?\n]{0,40}?"
    r"(?<![\w\-])(?=[^\s]*[A-Za-z])(?=[^\s]*\d)[^\s,;.!?]{4,}"
)


def mentions_secret(text: str) -> bool:
    """Whether `text` talks about a credential at all ("I keep my passwords in a manager", "密码"): the rules
    extractor never makes a memory of such a sentence."""
    return bool(text) and (bool(_MENTIONS_SECRET.search(text)) or holds_secret(text))


def holds_secret(text: str) -> bool:
    """Whether `text` holds a credential: one the value rules redact ("my password is hunter2", a provider key),
    or a credential named with a credential-looking value next to it ("password for the VPN: x7Hq9"). What every
    strategy's output is checked with before a record is written."""
    return bool(text) and (redact_text(text) != text or bool(_STATED_SECRET.search(text)))
