#!/usr/bin/env python3
"""Every relative link in README.md and docs/*.md resolves: the file or
folder it names exists, and its #anchor is a heading of the Markdown page it
names (or of the page itself for a bare #anchor), as GitHub makes anchors
from headings: lower case, punctuation dropped, spaces to hyphens, a repeated
heading suffixed -1, -2. Explicit <a id="..."> / <a name="..."> anchors
count too. Links inside code (fenced blocks, `inline code`) are text, not
links; absolute URLs (https:, mailto:) are not checked.

    tests/lint/doc_links.py [ROOT]     (default: the repository root)

Prints each broken link as file:line: [text](target): why, and exits 1 if
there is one.
"""
import os
import re
import sys

INLINE_LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^\s{0,3}\[([^\]]+)\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:[^>]*\s)?(?:id|name)\s*=\s*\"([^\"]+)\"", re.I)
FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)                 # inline code: its text
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)      # links: their text
    text = re.sub(r"<[^>]+>", "", text)                          # HTML tags
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def prose_lines(path):
    """(line number, text) of each line outside fenced code, inline code blanked."""
    fence = None
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            m = FENCE.match(line)
            if fence:
                if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                    fence = None
                continue
            if m:
                fence = m.group(1)
                continue
            yield number, re.sub(r"(`+)(?:(?!\1).)*?\1", lambda c: " " * len(c.group(0)), line)


_anchor_cache = {}


def anchors(path):
    """The anchors a Markdown page defines."""
    if path not in _anchor_cache:
        found, seen = set(), {}
        for _, line in prose_lines(path):
            for a in HTML_ANCHOR.findall(line):
                found.add(a)
        with open(path, encoding="utf-8") as f:
            raw = f.read().split("\n")
        fence = None
        for line in raw:
            m = FENCE.match(line)
            if fence:
                if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                    fence = None
                continue
            if m:
                fence = m.group(1)
                continue
            h = HEADING.match(line)
            if not h:
                continue
            base = slug(h.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
        _anchor_cache[path] = found
    return _anchor_cache[path]


def check_link(root, page, target):
    """Why `target`, linked from `page`, does not resolve; None when it does."""
    if not target or SCHEME.match(target) or target.startswith("//"):
        return None
    path, _, anchor = target.partition("#")
    if path:
        if path.startswith("/"):
            resolved = os.path.normpath(os.path.join(root, path.lstrip("/")))
        else:
            resolved = os.path.normpath(os.path.join(os.path.dirname(page), path))
        if not os.path.exists(resolved):
            return f"no file {os.path.relpath(resolved, root)}"
    else:
        resolved = page
    if anchor:
        if not resolved.endswith(".md") or not os.path.isfile(resolved):
            return None  # an anchor into a non-Markdown file (a source line): not checked
        if anchor not in anchors(resolved):
            return f"no heading #{anchor} in {os.path.relpath(resolved, root)}"
    return None


def pages(root):
    found = []
    readme = os.path.join(root, "README.md")
    if os.path.isfile(readme):
        found.append(readme)
    docs = os.path.join(root, "docs")
    if os.path.isdir(docs):
        found += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    return found


def main(argv):
    root = os.path.abspath(argv[1] if len(argv) > 1 else
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    broken = 0
    checked = 0
    for page in pages(root):
        for number, line in prose_lines(page):
            links = [(m.group(1), m.group(2)) for m in INLINE_LINK.finditer(line)]
            ref = REFERENCE_DEF.match(line)
            if ref:
                links.append((ref.group(1), ref.group(2)))
            for text, target in links:
                checked += 1
                why = check_link(root, page, target)
                if why:
                    broken += 1
                    print(f"{os.path.relpath(page, root)}:{number}: [{text}]({target}): {why}")
    if broken:
        print(f"{broken} broken link(s) in README.md and docs/ (above)")
        return 1
    print(f"all {checked} links in README.md and docs/ resolve")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
