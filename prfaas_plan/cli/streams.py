"""Standard streams that cannot encode what the tables print (a C locale with ``PYTHONIOENCODING=ascii``, say):
the characters beyond the stream's encoding are written as their nearest ASCII spelling (``×`` as ``x``,
``Λ`` as ``Lambda``, box lines as ``-`` and ``|``) or ``?``, rather than ending the run in UnicodeEncodeError."""

from __future__ import annotations

import codecs
import contextlib
import sys

#: The ASCII spelling of the non-ASCII characters the commands print (tables, notes, help).
_ASCII = {
    "×": "x",
    "…": "...",
    "·": "*",
    "±": "+/-",
    "≤": "<=",
    "≥": ">=",
    "≈": "~",
    "→": "->",
    "—": "-",
    "–": "-",
    "Λ": "Lambda",
    "Φ": "Phi",
    "Θ": "Theta",
    "λ": "lambda",
    "μ": "mu",
    "σ": "sigma",
    "ρ": "rho",
    "°": " deg",
    "€": "EUR",
}
_HANDLER = "prfaas-plan-ascii"
#: Characters a stream must encode to be left alone.
_PROBE = "×…Λ│"


def _nearest_ascii(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    text = error.object[error.start : error.end]
    out = []
    for char in text:
        if char in _ASCII:
            out.append(_ASCII[char])
        elif "\u2500" <= char <= "\u257f":  # box drawing: horizontal, vertical, corners and joints
            name = {"─": "-", "━": "-", "═": "=", "│": "|", "┃": "|", "║": "|"}.get(char, "+")
            out.append(name)
        else:
            out.append("?")
    return "".join(out), error.end


def tolerate_narrow_encodings() -> None:
    """Give stdout and stderr the ASCII fallback when their encoding cannot write the characters the
    commands print; streams that can (UTF-8) are left as they are."""
    with contextlib.suppress(LookupError):
        codecs.lookup_error(_HANDLER)
        return  # registered (and applied) already
    codecs.register_error(_HANDLER, _nearest_ascii)
    for stream in (sys.stdout, sys.stderr):
        if stream is None:
            continue
        encoding = getattr(stream, "encoding", None) or "ascii"
        try:
            _PROBE.encode(encoding)
        except (UnicodeEncodeError, LookupError):
            with contextlib.suppress(AttributeError, ValueError, OSError):
                stream.reconfigure(errors=_HANDLER)  # type: ignore[union-attr]
