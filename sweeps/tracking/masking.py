"""Mask secrets before anything reaches a tracking server.

    mask_params({"db.password": "hunter2", "lr": 0.1})  ->  {"db.password": "***", "lr": 0.1}

A value is masked when a word of its key names a credential (password, secret, token, api
key, credential, private key, auth) or when the value itself looks like one (a URL with a password,
well-known token prefixes such as ``ghp_``, ``sk-``, ``AKIA``, ``xox``).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = ["MASK", "is_secret_key", "mask_value", "mask_params", "mask_tree", "mask_text",
           "without_credentials"]

MASK = "***"
_SECRET_WORDS = {"password", "passwd", "passphrase", "secret", "token", "apikey",
                 "credential", "credentials", "auth", "authorization", "pwd"}
_SECRET_PAIRS = {("api", "key"), ("private", "key"), ("access", "key"), ("secret", "key")}
_TOKEN = re.compile(r"^(ghp_|gho_|github_pat_|sk-|xox[abpr]-|AKIA|ASIA|hf_)[A-Za-z0-9_\-]{8,}")
# user:password@ up to the host's @ (a password may hold "/" or, unescaped, "@": over-masking
# a path with an @ in it is the safe way to be wrong); a long user name alone is a token
_URL_PASSWORD = re.compile(r"(?P<scheme>[a-z][a-z0-9+.\-]*://)(?P<user>[^:/@\s]+):[^\s]*@"
                           r"(?=[^@\s]*$|[^@\s]*\s)", re.IGNORECASE)
_URL_TOKEN_USER = re.compile(r"(?P<scheme>[a-z][a-z0-9+.\-]*://)[^:/@\s]{16,}@", re.IGNORECASE)
_QUERY_SECRET = re.compile(r"(?P<key>[?&](?:[a-z_]*token|api_?key|key|secret|password|sig|"
                           r"signature|credential)=)[^&#\s]+", re.IGNORECASE)


def is_secret_key(key: str) -> bool:
    """True when a word of the key's last part names a credential.

    Whole words only: ``auth_token``, ``HF_TOKEN``, ``api_key`` are secrets; ``tokenizer``,
    ``sort_key``, ``max_tokens_per_batch`` are not.
    """
    words = [w.lower() for w in re.split(r"[_\-\s]+|(?<=[a-z])(?=[A-Z])", key.rsplit(".", 1)[-1])
             if w]
    return (any(w in _SECRET_WORDS for w in words)
            or any(pair in _SECRET_PAIRS for pair in zip(words, words[1:], strict=False)))


def mask_value(value: Any) -> Any:
    """``value`` with any embedded secret replaced by ``***`` (non-strings unchanged)."""
    if not isinstance(value, str):
        return value
    return MASK if _TOKEN.match(value.strip()) else mask_text(value)


def mask_text(text: str) -> str:
    """Every URL in ``text`` with its password, token user name and secret query values
    masked (for messages that quote a URL, e.g. MLflow's "API request to ..." errors).

    Example:
        >>> mask_text("API request to http://me:ab/c=@h:5000/api failed; http://h?token=x1")
        'API request to http://me:***@h:5000/api failed; http://h?token=***'
    """
    text = _URL_PASSWORD.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", text)
    text = _URL_TOKEN_USER.sub(lambda m: f"{m['scheme']}{MASK}@", text)
    return _QUERY_SECRET.sub(lambda m: f"{m['key']}{MASK}", text)


def without_credentials(uri: str) -> str:
    """``uri`` with no user name or password: what is written to disk and compared on resume
    (credentials come from the environment, and may rotate).

    Example:
        >>> without_credentials("https://me:pw@mlflow.team:443/"), without_credentials("sqlite:////w/m.db")
        ('https://mlflow.team:443/', 'sqlite:////w/m.db')
    """
    parts = urlsplit(uri)
    if "@" not in parts.netloc:
        return uri
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def mask_params(params: dict[str, Any]) -> dict[str, Any]:
    """Flat ``params`` with credential keys and credential-looking values masked."""
    return {k: (MASK if is_secret_key(k) and v not in (None, "") else mask_value(v))
            for k, v in params.items()}


def mask_tree(tree: Any) -> Any:
    """Nested mapping/list with the same masking as ``mask_params`` (for config artifacts)."""
    if isinstance(tree, dict):
        return {k: (MASK if isinstance(k, str) and is_secret_key(k) and v not in (None, "")
                    and not isinstance(v, dict) else mask_tree(v)) for k, v in tree.items()}
    return [mask_tree(v) for v in tree] if isinstance(tree, list) else mask_value(tree)
