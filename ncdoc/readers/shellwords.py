"""A line of shell split into words the way a POSIX shell splits it, in time linear in its length.

`shlex` builds each token by string concatenation, a copy per character: an 800 KB value takes
seconds, and env files and launch scripts are read in job scripts (`ncdoc check --env-file`). Here
each word is a list of pieces joined once. The rules are the shell's: single quotes keep everything;
double quotes keep everything but `\\` before `$ ` " \\` and a newline; a backslash outside quotes
keeps the next character; `#` at the start of a word starts a comment; unquoted runs of the
punctuation characters (; & | ( ) for a command line) are words of their own.
"""

from __future__ import annotations

import re
from ncdoc.startup.compiled_patterns import precompiled

_BLANK = " \t\r\n"
_DQ_ESCAPES = "$`\"\\\n"
_DQ_RUN = precompiled(r'[^"\\]*')
_PLAIN: dict[str, re.Pattern] = {}


def _plain(punctuation: str) -> re.Pattern:
    rx = _PLAIN.get(punctuation)
    if rx is None:
        rx = _PLAIN[punctuation] = re.compile("[^" + re.escape(_BLANK + "'\"\\" + punctuation) + "]+")
    return rx


def split(line: str, *, punctuation: str = "", comments: bool = True) -> list[str]:
    """The words of `line`; ValueError("No closing quotation") when a quote is left open, ValueError("No
    escaped character") when it ends in a lone backslash."""
    words: list[str] = []
    word: list[str] = []
    in_word = False
    i, n = 0, len(line)
    find = line.find
    plain = _plain(punctuation).match
    while i < n:
        c = line[i]
        if c in _BLANK:
            if in_word:
                words.append("".join(word))
                word, in_word = [], False
            i += 1
        elif c == "'":
            end = find("'", i + 1)
            if end < 0:
                raise ValueError("No closing quotation")
            word.append(line[i + 1:end])
            in_word, i = True, end + 1
        elif c == '"':
            i += 1
            while True:
                j = _DQ_RUN.match(line, i).end()
                word.append(line[i:j])
                if j >= n:
                    raise ValueError("No closing quotation")
                if line[j] == '"':
                    i = j + 1
                    break
                # a backslash: it escapes only $ ` " \ and a newline; before anything else it stays
                if j + 1 < n and line[j + 1] in _DQ_ESCAPES:
                    word.append(line[j + 1])
                    i = j + 2
                else:
                    word.append("\\")
                    i = j + 1
            in_word = True
        elif c == "\\":
            if i + 1 >= n:
                raise ValueError("No escaped character")
            word.append(line[i + 1])
            in_word, i = True, i + 2
        elif c == "#" and comments and not in_word:
            break
        elif c in punctuation:
            if in_word:
                words.append("".join(word))
                word, in_word = [], False
            j = i
            while j < n and line[j] in punctuation:
                j += 1
            words.append(line[i:j])
            i = j
        else:
            j = plain(line, i).end()
            word.append(line[i:j])
            in_word, i = True, j
    if in_word:
        words.append("".join(word))
    return words


__all__ = ["split"]
