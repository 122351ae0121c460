#!/usr/bin/env python3
"""doc_commands.py VENV_PYTHON FILE... - every command the given docs and sources name for a tool the project pins
(hf and huggingface-cli from huggingface_hub, aws from awscli, pip, `python -m MODULE`: requirements.txt's, in the
venv of VENV_PYTHON; rclone: Debian's) exists in the version installed, with the flags it is given (issue 46).

Where a name is looked for: Markdown code spans and fenced blocks, man page text (roff escapes undone), C string
literals (adjacent ones joined), and the plain text around them. A mention in code (a code span, a fenced block, a
man page's bold) must be a command: `TOOL WORD...` where each WORD is a subcommand its parent's help lists, down to
a command without subcommands; in plain text a mention counts from its first word on only when that word is one of
the tool's commands ("rclone copy --links" yes, "an rclone remote" no), and from there on it is checked as in code.
A tool that is not installed at all fails wherever it is named. Each command's help (`--help`; aws: `help`) must
exit 0 and name each --flag given to it. Prints one line per command checked; exit 1 with one line per problem.
"""
import os
import re
import subprocess
import sys

PY = sys.argv[1]
VENV_BIN = os.path.dirname(os.path.abspath(PY))
FILES = sys.argv[2:]
TOOLS = ("hf", "huggingface-cli", "aws", "rclone", "pip", "pip3")
MENTION = re.compile(r"(?<![\w./$-])(?:\S*/)?(hf|huggingface-cli|aws|rclone|pip3?|python3?\s+-m\s+[A-Za-z_][\w.]*)(?=\s|$)")
WORD = re.compile(r"^[a-z][a-z0-9-]*$")
FLAG = re.compile(r"^(--[a-zA-Z][\w-]*)")


def runner(tool):
    """argv prefix of a tool, or None when it is not installed."""
    m = re.match(r"python3?\s+-m\s+(\S+)", tool)
    if m:
        return [PY, "-m", m.group(1)]
    if tool in ("hf", "huggingface-cli", "aws", "pip", "pip3"):
        p = os.path.join(VENV_BIN, tool)
        return [p] if os.access(p, os.X_OK) else None
    for d in os.environ.get("PATH", "").split(":"):
        p = os.path.join(d, tool)
        if d and os.access(p, os.X_OK):
            return [p]
    return None


_help = {}


def help_of(tool, path):
    """(exit status, text) of the help of tool + path."""
    key = (tool, tuple(path))
    if key not in _help:
        argv = runner(tool) + list(path) + (["help"] if tool == "aws" else ["--help"])
        env = dict(os.environ, PAGER="cat", MANPAGER="cat", COLUMNS="200", NO_COLOR="1", TERM="dumb")
        try:
            p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env=env, timeout=120)
            text = re.sub(r".\x08", "", p.stdout.decode("utf-8", "replace"))
            _help[key] = (p.returncode, text)
        except subprocess.TimeoutExpired:
            _help[key] = (124, "timed out")
    return _help[key]


def global_flags(tool):
    key = (tool, ("help", "flags"))
    if key not in _help:
        p = subprocess.run(runner(tool) + ["help", "flags"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=120)
        _help[key] = (p.returncode, p.stdout.decode("utf-8", "replace"))
    return _help[key][1]


HEADER = re.compile(r"(?i)^\s*(main |available |other )?(commands|services|subcommands)\s*:?\s*$")


def commands_of(text):
    """The subcommands a help text lists (click/typer, cobra, argparse/pip, aws), aliases included; empty: a leaf."""
    out, on = set(), False
    for line in text.splitlines():
        if HEADER.match(line):
            on = True
            continue
        if on:
            if line.strip() and not line[0].isspace():
                on = False
                continue
            m = re.match(r"^\s+(?:o\s+)?([a-z][a-z0-9-]*)(\s|$)", line)
            if m:
                out.add(m.group(1))
            for a in re.findall(r"\[alias(?:es)?: ([^\]]+)\]", line):
                out.update(x.strip() for x in a.split(","))
    return out


def texts(path):
    """(line number, text, code) pieces of a file: code is True for code spans, fenced blocks and roff bold."""
    src = open(path, encoding="utf-8", errors="replace").read()
    if path.endswith((".c", ".h")):
        # string literals, adjacent ones joined; their text is plain text with '...' and `...` as code
        lits = [(m.start(), m.end(), m.group(1)) for m in re.finditer(r'"((?:[^"\\\n]|\\.)*)"', src)]
        i = 0
        while i < len(lits):
            start, end, s = lits[i]
            while i + 1 < len(lits) and not src[end:lits[i + 1][0]].strip():
                i += 1
                end, s = lits[i][1], s + lits[i][2]
            i += 1
            s = s.replace("\\n", "\n").replace('\\"', '"')
            yield from pieces(src.count("\n", 0, start) + 1, s, False)
        return
    fenced = table = False
    for n, line in enumerate(src.splitlines(), 1):
        # CONTRIBUTING's mutation table quotes bugs, a command that does not exist among them, as bugs
        if line.startswith("<!-- mutate:begin -->") or line.startswith("<!-- mutate:end -->"):
            table = line.startswith("<!-- mutate:begin -->")
            continue
        if table:
            continue
        if path.endswith((".1", ".7")):
            code = bool(re.match(r"^\.(B|BR|RB|IP|TP)\b", line))
            line = re.sub(r"^\.[A-Z]+\s*", "", line)
            bold = re.findall(r"\\fB(.*?)\\f[RP]", line)
            line = re.sub(r"\\f[BIRP]", "", line).replace("\\-", "-").replace("\\(em", " ").replace("\\", "")
            yield n, line, code
            for b in bold:
                yield n, b.replace("\\-", "-"), True
            continue
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or path.endswith(".sh"):
            # a fenced block holds commands and also trees and YAML with comments: plain text, its code spans code
            yield from pieces(n, re.sub(r"(^|\s)#.*", "", line) if fenced else line, False)
            continue
        yield from pieces(n, line, False)


def pieces(n, s, code):
    """A line's plain text (code spans kept, their backticks gone) and each code span alone."""
    yield n, s.replace("`", " "), code
    for span in re.findall(r"`([^`]+)`|'([^'\n]+)'", s):
        yield n, span[0] or span[1], True


def mentions():
    for path in FILES:
        for n, text, code in texts(path):
            for m in MENTION.finditer(text):
                tool = re.sub(r"\s+", " ", m.group(1))
                toks = text[m.end():].split()
                words, flags, in_words = [], [], True
                for t in toks[:16]:
                    if t in ("|", "||", "&&", ";", "\\", ">", "2>&1") or t.startswith("#"):
                        break
                    end = re.search(r"[.,;:)\]]$", t) is not None
                    w = re.sub(r"[.,;:)\]'\"]+$", "", t)
                    if in_words and WORD.match(w):
                        words.append(w)
                    else:
                        in_words = False
                        f = FLAG.match(w)
                        if f:
                            flags.append(f.group(1))
                    if end:
                        break
                yield path, n, code, tool, words, flags, text


def main():
    problems, checked, seen = [], [], set()
    for path, n, code, tool, words, flags, context in mentions():
        where = f"{path}:{n}"
        near = "".join(open(path, encoding="utf-8", errors="replace").readlines()[max(n - 2, 0):n + 1])
        if tool == "aws" and "AWS CLI v2" in context + near:
            continue   # named as AWS CLI v2's (SSO profiles need it), not the awscli 1.x of requirements.txt
        run = runner(tool)
        if run is None:
            problems.append(f"{where}: `{tool}` is not installed in the pinned versions"
                            f" ({'not in ' + VENV_BIN if tool not in ('rclone',) and not tool.startswith('python') else 'not on PATH'})")
            continue
        rc, text = help_of(tool, [])
        if rc != 0:
            problems.append(f"{where}: `{tool} --help` exits {rc}: {text.strip().splitlines()[-1:] }")
            continue
        path_ = []
        bad = False
        for i, w in enumerate(words):
            cmds = commands_of(help_of(tool, path_)[1])
            if not cmds:
                break   # a command without subcommands: the rest are its arguments
            if w not in cmds:
                if i == 0 and not code:
                    bad = None    # plain text that only names the tool ("an rclone remote")
                else:
                    problems.append(f"{where}: `{' '.join([tool] + path_ + [w])}`: {tool} {' '.join(path_)} has no command"
                                    f" '{w}' (it has: {', '.join(sorted(cmds))})")
                    bad = True
                break
            path_.append(w)
            rc, sub = help_of(tool, path_)
            if rc != 0:
                problems.append(f"{where}: `{' '.join([tool] + path_)} {'help' if tool == 'aws' else '--help'}` exits {rc}")
                bad = True
                break
        if bad is None or (not code and not path_):
            continue
        if bad:
            continue
        key = (tool, tuple(path_), tuple(flags))
        if key in seen:
            continue
        seen.add(key)
        text = help_of(tool, path_)[1]
        if tool == "rclone":   # the flags every command takes (--links, --exclude, ...) are listed apart
            text += global_flags(tool)
        elif tool == "aws":    # its global options (--profile, --region, ...) too
            text += help_of(tool, [])[1]
        missing = [f for f in flags if not re.search(r"(?<![\w-])" + re.escape(f) + r"(?![\w-])", text)]
        for f in missing:
            problems.append(f"{where}: `{' '.join([tool] + path_)}` has no flag {f} (its help does not name it)")
        if not missing:
            checked.append(" ".join([tool] + path_ + flags))
    for c in sorted(set(checked)):
        print("checked:", c)
    for p in dict.fromkeys(problems):   # a code span is seen in its line and alone: each problem once
        print("problem:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
