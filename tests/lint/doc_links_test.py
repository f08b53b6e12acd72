#!/usr/bin/env python3
"""The doc link check on small trees: a clean README.md and docs/ pass (links
to files, folders, headings as GitHub names them, repeated headings, explicit
anchors; links in code are text), and each planted broken link fails, named
by file and line.

    tests/lint/doc_links_test.py
"""
import contextlib
import io
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import doc_links  # noqa: E402

CLEAN_README = """# proj

See [the guide](docs/guide.md), [its options](docs/guide.md#options-and-flags),
[`remat.apply`](docs/guide.md#rematapply-on-your-model), [notes](docs/guide.md#notes-1)
and [the license](#license), [LICENSE](LICENSE), [docs](docs/),
[an anchor](docs/guide.md#kept), [a site](https://example.com/x.md#y).
Inline code is text: `[not a link](missing.md)`.

```
[in a fence](missing.md)
```

## License

Text.
"""

CLEAN_GUIDE = """# Guide

## Options and flags

## `remat.apply` on your model

## Notes

## Notes

<a id="kept"></a>
Back to [the README](../README.md#license) and [this page](#guide).
![chart](chart.png)

[ref]: guide.md#options-and-flags
"""


def write(root, path, text):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w", encoding="utf-8") as f:
        f.write(text)


def clean_tree(root):
    write(root, "README.md", CLEAN_README)
    write(root, "LICENSE", "Apache\n")
    write(root, "docs/guide.md", CLEAN_GUIDE)
    write(root, "docs/chart.png", "png\n")


def run(root):
    doc_links._anchor_cache.clear()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = doc_links.main(["doc_links.py", root])
    return code, out.getvalue()


class DocLinks(unittest.TestCase):
    def test_clean_tree_passes(self):
        with tempfile.TemporaryDirectory() as root:
            clean_tree(root)
            code, out = run(root)
            self.assertEqual(code, 0, out)

    def test_slugs_follow_github(self):
        self.assertEqual(doc_links.slug("Against the estimators users run"),
                         "against-the-estimators-users-run")
        self.assertEqual(doc_links.slug("`remat.apply` on your model"), "rematapply-on-your-model")
        self.assertEqual(doc_links.slug("CPU, measured profiles"), "cpu-measured-profiles")
        self.assertEqual(doc_links.slug("GPU (H200)"), "gpu-h200")
        self.assertEqual(doc_links.slug("End-to-end: plan, apply"), "end-to-end-plan-apply")

    def test_each_planted_broken_link_fails(self):
        planted = [
            ("docs/guide.md", "A [missing page](other.md).", "no file docs/other.md"),
            ("docs/guide.md", "A [missing heading](../README.md#usage).",
             "no heading #usage in README.md"),
            ("docs/guide.md", "A [missing heading here](#option-and-flags).",
             "no heading #option-and-flags in docs/guide.md"),
            ("docs/guide.md", "A third [notes](#notes-2).", "no heading #notes-2"),
            ("docs/guide.md", "![missing image](plot.png)", "no file docs/plot.png"),
            ("docs/guide.md", "[gone]: removed.md", "no file docs/removed.md"),
            ("README.md", "The [solver](docs/solver.md#speed).", "no file docs/solver.md"),
            ("README.md", "The [guide](docs/guide.md#speed).", "no heading #speed in docs/guide.md"),
        ]
        for page, line, why in planted:
            with self.subTest(line=line), tempfile.TemporaryDirectory() as root:
                clean_tree(root)
                with open(os.path.join(root, page), "a", encoding="utf-8") as f:
                    f.write("\n" + line + "\n")
                with open(os.path.join(root, page), encoding="utf-8") as f:
                    number = len(f.read().rstrip("\n").split("\n"))
                code, out = run(root)
                self.assertEqual(code, 1, out)
                self.assertIn(f"{page}:{number}:", out)
                self.assertIn(why, out)


if __name__ == "__main__":
    unittest.main()
