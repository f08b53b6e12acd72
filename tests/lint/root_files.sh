#!/usr/bin/env bash
# The repository root holds the project's own files (README.md, LICENSE,
# CMakeLists.txt, pyproject.toml, dotfiles); what a command writes goes under
# build*/ or a temporary directory. This check fails, naming each file, when a
# generated-looking file is tracked at the root: a profile (*.profile.json,
# *.prof, *.profile), JSON, text, logs, HTML, CSV/TSV, images, traces or
# program output (*.out).
#   tests/lint/root_files.sh [DIR]     (default: the repository root)
# Files: `git ls-files` when DIR is the top of a git work tree, otherwise
# every file directly in DIR (for the planted test).
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root"

if git rev-parse --is-inside-work-tree >/dev/null 2>&1 &&
   [ "$(git rev-parse --show-toplevel)" = "$(pwd -P)" ]; then
  list_root() { git ls-files | { grep -v / || true; }; }
else
  list_root() { find . -mindepth 1 -maxdepth 1 -type f -printf '%f\n'; }
fi

# Generated-looking names; the root's own files that share an extension are
# named one by one.
generated='(\.profile(\.[A-Za-z0-9]+)?|\.prof|\.json|\.jsonl|\.txt|\.log|\.html?|\.csv|\.tsv|\.png|\.jpe?g|\.svg|\.trace|\.out|\.o)$|^a\.out$|^core(\.[0-9]+)?$|^perf\.data'
allowed='^(CMakeLists\.txt)$'

hits=$(list_root | grep -E "$generated" | grep -vE "$allowed" | sort || true)
if [ -n "$hits" ]; then
  printf '%s\n' "$hits"
  echo "generated-looking files tracked at the repository root (above): write"
  echo "them under build*/ or a temporary directory and git rm them"
  exit 1
fi
echo "no generated files at the repository root"
