#!/usr/bin/env python3
"""Reports every function definition longer than --max lines in the *.cpp and *.h files given.

A function's length counts the lines from the first line of its declaration (a template line
included, the comments above it not) to its closing brace. Functions are found by matching
braces outside comments and literals: the bodies of functions at namespace scope and of member
functions in class bodies (nested classes too). Everything inside a function body, lambdas and
local classes included, counts toward that function; brace-initialized data is not a function.
This is a heuristic, not a C++ parser: a macro that expands to a function head may be missed.

Usage: check-function-length.py [--max N] PATH...   (PATH: a file or a folder, searched
recursively). Exit 0: none too long; 1: some (listed as path:line: name is N lines);
2: bad arguments. Python 3 standard library only.
"""

import argparse
import pathlib
import re
import sys

SUFFIXES = (".cpp", ".h")


def blank_out(text):
    """`text` with comments, string and character literals and preprocessor lines replaced by
    spaces (newlines kept), so that every brace left is code."""
    out = list(text)
    i, n = 0, len(text)

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c == "#":
            # A preprocessor line, with its continuations.
            j = i
            while j < n and text[j] != "\n":
                j += 2 if text[j] == "\\" and j + 1 < n else 1
            blank(i, j)
            i = j
            continue
        if c == "\n":
            at_line_start = True
            i += 1
            continue
        if not c.isspace():
            at_line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(i, j)
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not text[i - 1].isalnum()):
            m = re.match(r'R"([^()\s\\]{0,16})\(', text[i:])
            if m:
                end = text.find(")" + m.group(1) + '"', i + m.end())
                j = n if end < 0 else end + len(m.group(1)) + 2
                blank(i, j)
                i = j
            else:
                i += 1
        elif c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum()
                                            and i + 1 < n and text[i + 1].isalnum())):
            # A string or character literal (a quote between digits is a digit separator).
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            blank(i, min(j + 1, n))
            i = j + 1
        else:
            i += 1
    return "".join(out)


def squeeze(statement):
    """The statement with the insides of (), [] and {} groups removed."""
    out, depth = [], 0
    for c in statement:
        if c in "([{":
            if depth == 0:
                out.append(c)
            depth += 1
        elif c in ")]}":
            depth = max(depth - 1, 0)
            if depth == 0:
                out.append(c)
        elif depth == 0:
            out.append(c)
    return " ".join("".join(out).split())


QUALIFIERS = r"(?:\s*(?:const|volatile|noexcept\s*(?:\(\))?|override|final|mutable|&&|&|" \
             r"requires\b.*|->\s*[^=;]+))*"
FUNCTION_HEAD = re.compile(r"\(\)" + QUALIFIERS + r"\s*$")
# A constructor's member initializers: ") : a_(), b_{}" after squeezing.
CONSTRUCTOR_HEAD = re.compile(r"\(\)" + QUALIFIERS +
                              r"\s*:\s*[\w:<>, ]+?(?:\(\)|\{\})(?:\s*,\s*[\w:<>, ]+?(?:\(\)|\{\}))*\s*$")
CLASS_HEAD = re.compile(r"\b(?:class|struct|union)\b")
NAMESPACE_HEAD = re.compile(r"(?:\bnamespace\b[\w:\s]*|\bextern\s*)$")


def kind_of(statement):
    """What the brace after `statement` opens: function, class, namespace or other."""
    s = squeeze(statement)
    if NAMESPACE_HEAD.search(s) and ("namespace" in s or s.endswith("extern")):
        return "namespace"
    without_operators = re.sub(r"\boperator\s*(?:\(\)|[^\s(]+)", "operator", s)
    if "=" not in without_operators and (FUNCTION_HEAD.search(s) or CONSTRUCTOR_HEAD.search(s)):
        return "function"
    if CLASS_HEAD.search(s) and "=" not in without_operators and not re.search(r"\benum\b", s):
        return "class"
    return "other"


def name_of(statement):
    s = squeeze(statement)
    m = re.search(r"(operator\s*(?:\(\)|[^\s(]+))\s*\(\)", s) or \
        re.search(r"([~\w:]+)\s*(?:<[^<>]*>)?\s*\(\)", s)
    return m.group(1) if m else s[-40:]


def long_functions(path, limit):
    """(line, name, length) of each function of `path` longer than `limit` lines."""
    code = blank_out(path.read_text(encoding="utf-8", errors="replace"))
    # Access specifiers end a statement of a class body, as a semicolon does.
    code = re.sub(r"\b(public|private|protected)\s*:(?!:)",
                  lambda m: m.group(0)[:-1] + ";", code)
    found = []
    # Scopes: (kind, statement start offset, name); the file is a namespace.
    scopes = [("namespace", 0, "")]
    start = None  # offset where the current statement of a namespace or class body began
    line_of = [0] * (len(code) + 1)
    line = 1
    for i, c in enumerate(code):
        line_of[i] = line
        if c == "\n":
            line += 1
    line_of[len(code)] = line

    i = 0
    while i < len(code):
        c = code[i]
        kind = scopes[-1][0]
        if kind in ("function", "other-in-function"):
            # Inside a body only the braces matter.
            if c == "{":
                scopes.append(("other-in-function", i, ""))
            elif c == "}":
                opened = scopes.pop()
                if opened[0] == "function":
                    first, last = line_of[opened[1]], line_of[i]
                    if last - first + 1 > limit:
                        found.append((first, opened[2], last - first + 1))
                    start = None
            i += 1
            continue
        if kind == "other":
            if c == "{":
                scopes.append(("other", i, ""))
            elif c == "}":
                scopes.pop()
            i += 1
            continue
        # A namespace or class body.
        if c == ";":
            start = None
        elif c == "{":
            statement = code[start:i] if start is not None else ""
            k = kind_of(statement)
            if k == "function":
                scopes.append(("function", start, name_of(statement)))
            elif k in ("namespace", "class"):
                scopes.append((k, i, ""))
                start = None
            else:
                # Brace-initialized data, or an initializer inside a statement: the statement
                # goes on after it (a constructor's member initializers, `int x{1};`).
                scopes.append(("other", i, ""))
                if start is None:
                    start = i
        elif c == "}":
            if len(scopes) > 1:
                scopes.pop()
            start = None
        elif not c.isspace() and start is None:
            start = i
        i += 1
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max", type=int, default=120, help="the most lines a function may have")
    parser.add_argument("paths", nargs="+", type=pathlib.Path, help="files or folders")
    args = parser.parse_args()
    if args.max < 1:
        parser.error("--max must be at least 1")
    files = []
    for p in args.paths:
        if p.is_dir():
            files += sorted(f for f in p.rglob("*") if f.suffix in SUFFIXES and f.is_file())
        elif p.is_file():
            files.append(p)
        else:
            parser.error(f"no such file or folder: {p}")

    too_long = 0
    for f in files:
        for line, name, length in long_functions(f, args.max):
            print(f"{f}:{line}: {name} is {length} lines (at most {args.max})")
            too_long += 1
    if too_long:
        print(f"check-function-length: {too_long} function(s) longer than {args.max} lines",
              file=sys.stderr)
        return 1
    print(f"check-function-length: {len(files)} files, no function longer than {args.max} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
