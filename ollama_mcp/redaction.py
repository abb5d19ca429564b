"""Secrets in text, found and replaced before anything is stored, embedded, indexed or logged.

What is a secret is Yelp's ``detect-secrets`` (a maintained detector, its plugins and heuristic
filters), not a list of our own: every plugin's patterns, found anywhere in a text (chat is not a
file of one kind, so every line is read as prose and as configuration at once). What it cannot
know of chat is added here, each named:

- a private key is the whole PEM block, from the header the library finds to its END line (or
  the end of the text, when a message was cut);
- a value in an assignment whose name says secret (``password=``, ``DB_PASS:``, ``"api_key":``,
  ``AUTH_TOKEN=``): the library's assignment shape (``build_assignment_regex``) over its keyword
  list and ``token``/``auth``/``credential``; the value is taken when quoted, or when it is not a
  plain word (a digit and a letter, or a symbol), or long and as random as the library's entropy
  plugins require; its filters (templates, ``$VARIABLES``, ``get_secret()``, UUIDs, sequences)
  leave it alone;
- a password in a URL with one of RFC 3986's sub-delimiters (``!$&'()*+,;=``), which the
  library's pattern leaves out and people's passwords have;
- the tokens of services detect-secrets 1.5 does not know yet (Anthropic, OpenAI project keys,
  Google API keys, Hugging Face, GitHub fine-grained tokens), as detectors of its own kind.

The library's public-IP plugin is not used (an address is not a secret), nor its entropy plugins
on quoted strings alone (a quoted git SHA or base64 image would go): an entropy check only
counts inside an assignment named as a secret.

A secret becomes ``[redacted: <what it was>]``, so a model reading it knows something was there.
No I/O; the detector loads on first use (its import takes about 0.1 s). Hostile text stays
bounded: long lines are read in windows (``WINDOW``), and the costliest patterns run only where
the text they need is (``_KEYWORD``, ``_NEEDS``): under 0.35 s for any 200 KB case tried.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

PLACEHOLDER = "[redacted: {}]"
# A line longer than this is read in windows of it, each half over the last: some of the library's
# patterns backtrack over a whole line (``sk-[A-Za-z0-9-_]*…``), which on a 200 KB line of one
# repeated prefix took minutes. A secret up to WINDOW / 2 characters lies whole in some window.
WINDOW = 2048
_PLACED = re.compile(r"\[redacted: [^\]\n]{1,40}\]")
# detect-secrets' secret types, as a sentence names them.
KINDS = {
    "Artifactory Credentials": "Artifactory token", "AWS Access Key": "AWS access key",
    "Azure Storage Account access key": "Azure storage key", "Basic Auth Credentials": "password in a URL",
    "Cloudant Credentials": "Cloudant credential", "Discord Bot Token": "Discord bot token",
    "GitHub Token": "GitHub token", "GitLab Token": "GitLab token", "IBM Cloud IAM Key": "IBM Cloud key",
    "IBM COS HMAC Credentials": "IBM Cloud key", "JSON Web Token": "JSON web token",
    "Mailchimp Access Key": "Mailchimp key", "NPM tokens": "npm token", "OpenAI Token": "OpenAI API key",
    "Private Key": "private key", "PyPI Token": "PyPI token", "SendGrid API Key": "SendGrid key",
    "Slack Token": "Slack token", "SoftLayer Credentials": "SoftLayer key", "Square OAuth Secret": "Square secret",
    "Stripe Access Key": "Stripe key", "Telegram Bot Token": "Telegram bot token", "Twilio API Key": "Twilio key",
}
_LEFT_OUT = {"IPPublicDetector", "Base64HighEntropyString", "HexHighEntropyString", "KeywordDetector"}
# What a token is made of, when a plugin's pattern names only its start (GitHub's ``ghp``).
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+/=")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|---- END SSH2 ENCRYPTED PRIVATE KEY ----")
_PEM_START = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----"
                        r"|PuTTY-User-Key-File-\d")
# A password in a URL the library's pattern refuses: it leaves out RFC 3986's sub-delimiters
# (``!$&'()*+,;=``), which people's passwords have ("postgresql://app:Sup3r!@db/prod").
_URL_PASSWORD = re.compile(r"\b[a-z][a-z0-9+.-]{1,20}://[^\s:/@]{1,64}:([^\s/@]{3,128})@[\w.-]+", re.IGNORECASE)
# A line holds an assignment named as a secret only where one of these is (``_parts``' keywords).
_KEYWORD = re.compile(r"pass|pwd|secret|key|token|auth|credential|contrase", re.IGNORECASE)
# Library patterns that backtrack over a whole line of their prefix ("sk-sk-sk-…"), with a text
# each can only match where it is: OpenAI's keys all carry "T3BlbkFJ" (base64 of "OpenAI").
_NEEDS = {"OpenAIDetector": "T3BlbkFJ"}
_PASSWORD_WORD = re.compile(r"pass|pwd|contrase", re.IGNORECASE)
_SYMBOL = re.compile(r"[^A-Za-z0-9\s]")


Found = tuple[tuple[str, int], ...]  # (kind, how many), by kind


@dataclass(frozen=True)
class Redacted:
    """A text with its secrets replaced, and how many of each kind were (none: the text as given)."""

    text: str
    found: Found = ()

    @property
    def count(self) -> int:
        return sum(n for _, n in self.found)


def redact(text: str) -> Redacted:
    """``text`` with every secret found replaced by a placeholder naming its kind."""
    spans = _spans(text)
    if not spans:
        return Redacted(text)
    out: list[str] = []
    at = 0
    counted: Counter[str] = Counter()
    for start, end, kind in spans:
        out.append(text[at:start])
        out.append(PLACEHOLDER.format(kind))
        counted[kind] += 1
        at = end
    out.append(text[at:])
    return Redacted("".join(out), tuple(sorted(counted.items())))


def redact_json(value: Any) -> tuple[Any, Found]:
    """``value`` (JSON: a tool call, a memory's metadata) with the secrets of every text in it
    replaced, and how many of each kind were; ``value`` itself when none."""
    founds: list[Found] = []
    done = _leaves(value, founds)
    return done, merged(*founds)


def _leaves(value: Any, founds: list[Found]) -> Any:
    if isinstance(value, str):
        done = redact(value)
        if not done.found:
            return value
        founds.append(done.found)
        return done.text
    if isinstance(value, dict):
        items = {key: _leaves(item, founds) for key, item in value.items()}
        return value if all(items[k] is value[k] for k in value) else items
    if isinstance(value, list):
        listed = [_leaves(item, founds) for item in value]
        return value if all(a is b for a, b in zip(listed, value, strict=True)) else listed
    return value


def describe(found: Found | dict[str, int]) -> str:
    """``2 AWS access key, 1 password in a URL``: what the audit and the CLI say was redacted."""
    items = sorted(found.items()) if isinstance(found, dict) else found
    return ", ".join(f"{count} {kind}" for kind, count in items)


def merged(*founds: Found) -> Found:
    total: Counter[str] = Counter()
    for found in founds:
        for kind, count in found:
            total[kind] += count
    return tuple(sorted(total.items()))


def _spans(text: str) -> list[tuple[int, int, str]]:
    """The secrets' spans, sorted, none overlapping (the first and longest of two that do)."""
    found: list[tuple[int, int, str]] = list(_private_keys(text))
    line_start = 0
    for line in text.split("\n"):
        for at in range(0, max(len(line) - WINDOW // 2, 1), WINDOW // 2) if len(line) > WINDOW else (0,):
            part = line[at:at + WINDOW]
            if len(part) >= 8:
                found.extend((line_start + at + s, line_start + at + e, kind) for s, e, kind in _in_line(part))
        line_start += len(line) + 1
    if found and "[redacted: " in text:  # what an earlier redaction put there stays as it is
        placed = [m.span() for m in _PLACED.finditer(text)]
        found = [f for f in found if not any(f[0] < end and start < f[1] for start, end in placed)]
    found.sort(key=lambda span: (span[0], -span[1]))
    kept: list[tuple[int, int, str]] = []
    for start, end, kind in found:
        if kept and start < kept[-1][1]:
            if end > kept[-1][1]:
                kept[-1] = (kept[-1][0], end, kept[-1][2])
            continue
        kept.append((start, end, kind))
    return kept


def _private_keys(text: str) -> Iterator[tuple[int, int, str]]:
    if "PRIVATE KEY" not in text and "PuTTY-User-Key-File" not in text:
        return
    at = 0
    while (start := _PEM_START.search(text, at)) is not None:
        end = _PEM_END.search(text, start.end())
        if end is None:  # cut off: the key runs to the end of the text
            yield start.start(), len(text), "private key"
            return
        yield start.start(), end.end(), "private key"
        at = end.end()


def _in_line(line: str) -> Iterator[tuple[int, int, str]]:
    parts = _parts()
    for plugin, patterns in parts.detectors:
        kind = KINDS.get(plugin.secret_type, plugin.secret_type)
        needed = _NEEDS.get(type(plugin).__name__)
        if needed is not None and needed not in line:
            continue
        for pattern in patterns:
            covered = 0  # a match inside the last one widened is that one again ("AKIAAKIA…")
            for match in pattern.finditer(line):
                if match.start() < covered:
                    continue
                value_start, value_end = _value_span(match)
                start, end = _widened(line, value_start, value_end)
                covered = end
                if end - start >= 8 and not parts.filtered(line[start:end], line):
                    yield start, end, kind
    if _KEYWORD.search(line):  # the assignment pattern is the costliest: only where a name can be
        for match in parts.assignment.finditer(line):
            start, end = match.span("value")
            value = match.group("value")
            quoted = start > 0 and line[start - 1] in "'\"`" and end < len(line) and line[end] == line[start - 1]
            loose = match.group("sep").isspace()
            if parts.filtered(value, line) or not parts.secret_like(value, quoted, loose):
                continue
            yield start, end, "password" if _PASSWORD_WORD.search(match.group("name")) else "secret"
    if "://" in line:
        for match in _URL_PASSWORD.finditer(line):
            if not parts.filtered(match.group(1), line):
                yield *match.span(1), "password in a URL"


def _value_span(match: re.Match[str]) -> tuple[int, int]:
    """The secret in a plugin's match: its group where the group is the value (a URL's password),
    else the whole match, trimmed of the separators some patterns include."""
    start, end = match.span()
    for group in range(match.re.groups, 0, -1):
        if match.group(group) and len(match.group(group)) >= 8:
            start, end = match.span(group)
            break
    text = match.string
    while start < end and not text[start].isalnum():
        start += 1
    while end > start and not text[end - 1].isalnum() and text[end - 1] not in "=_-":
        end -= 1
    return start, end


def _widened(line: str, start: int, end: int) -> tuple[int, int]:
    """A value widened to the whole token it starts (``ghp`` of ``ghp_…``), dots included only
    where the value has them (a JSON web token's parts, not the sentence's full stop)."""
    chars = _TOKEN_CHARS | ({"."} if "." in line[start:end] else set())
    while start > 0 and line[start - 1] in chars and line[start - 1] not in "=/+":
        start -= 1
    while end < len(line) and line[end] in chars:
        end += 1
    while end > start and line[end - 1] == ".":
        end -= 1
    return start, end


@dataclass(frozen=True)
class _Parts:
    detectors: tuple[tuple[Any, tuple[re.Pattern[str], ...]], ...]
    assignment: re.Pattern[str]
    filters: tuple[Any, ...]
    line_filter: Any
    entropy: Any
    base64_limit: float

    def filtered(self, value: str, line: str) -> bool:
        """Whether the library's heuristics say this is no secret (a template, a ``$VARIABLE``,
        a UUID, a sequence, an indirect reference such as ``password = get_secret()``)."""
        return any(check(value) for check in self.filters) or self.line_filter(line)

    def secret_like(self, value: str, quoted: bool, loose: bool = False) -> bool:
        if loose:  # "secret wJalrXUtnFEMI/K7MDENG…": only what is long and random, never a word
            return (len(value) >= 16 and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)
                    and self.entropy(value) > self.base64_limit - 0.5)
        if len(value) < 6 or value.isalpha() and value.islower() and not quoted:
            return False
        if quoted or any(c.isdigit() for c in value) and any(c.isalpha() for c in value):
            return True
        return bool(_SYMBOL.search(value)) or len(value) >= 20 and self.entropy(value) > self.base64_limit


@cache
def _parts() -> _Parts:
    # Imported on first use, not with the package: about 0.1 s a process that writes nothing never pays.
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class  # noqa: PLC0415
    from detect_secrets.filters import heuristic  # noqa: PLC0415
    from detect_secrets.plugins.base import RegexBasedDetector  # noqa: PLC0415
    from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString  # noqa: PLC0415
    from detect_secrets.plugins.keyword import DENYLIST  # noqa: PLC0415

    detectors: list[tuple[Any, tuple[re.Pattern[str], ...]]] = []
    cls: Any
    for cls in get_mapping_from_secret_type_to_class().values():
        if cls.__name__ in _LEFT_OUT or not issubclass(cls, RegexBasedDetector):
            continue
        plugin = cls()
        detectors.append((plugin, tuple(plugin.denylist)))
    for kind, pattern in _NEWER_TOKENS:
        detectors.append((_Named(kind), (pattern,)))
    keywords = "|".join((*DENYLIST, "token", "auth", "credentials?", "passphrase", "access_?key"))
    assignment = RegexBasedDetector.build_assignment_regex(
        prefix_regex=r"(?P<name>[A-Za-z0-9_.-]{0,40}?", secret_keyword_regex=rf"(?:{keywords})[A-Za-z0-9_]{{0,20}})",
        secret_regex=r"(?P<value>[^\s'\"`,;{}()<>]{6,})",
    )
    # The library's ``key value`` form (a space) reads prose ("the token expired") as an assignment,
    # so a value after a space must be long and random (``secret_like``'s ``loose``).
    separator = "(?:=|:|:=|=>| +|::)"
    assert separator in assignment.pattern, "detect-secrets changed build_assignment_regex"
    assignment = re.compile(assignment.pattern.replace(separator, "(?P<sep>=|:|:=|=>| +|::)"), re.IGNORECASE)
    base64 = Base64HighEntropyString()
    return _Parts(
        detectors=tuple(detectors), assignment=assignment,
        filters=(heuristic.is_templated_secret, heuristic.is_prefixed_with_dollar_sign, heuristic.is_potential_uuid,
                 heuristic.is_sequential_string, heuristic.is_not_alphanumeric_string),
        line_filter=heuristic.is_indirect_reference, entropy=base64.calculate_shannon_entropy,
        base64_limit=base64.entropy_limit,
    )


@dataclass(frozen=True)
class _Named:
    secret_type: str


# Services detect-secrets 1.5 does not know yet, in its manner (a prefix the service gives every
# token, and the token's alphabet and length as the service documents them).
_NEWER_TOKENS = (
    ("Anthropic API key", re.compile(r"\bsk-ant-(?:api|admin|oat)\d{2}-[A-Za-z0-9_-]{32,}")),
    ("OpenAI API key", re.compile(r"\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{32,}")),
    ("OpenAI API key", re.compile(r"\bsk-[A-Za-z0-9]{48}\b")),
    ("Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{34,}")),
    ("GitHub token", re.compile(r"\bgithub_pat_[A-Za-z0-9_]{60,}")),
    ("Slack token", re.compile(r"\bxapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+")),
)
