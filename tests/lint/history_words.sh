#!/usr/bin/env bash
# The tree describes the project as it is; its history lives in git. This
# check fails, naming file:line, on text that records history instead:
#   - our own tracker: "issue 14", "issue14", "#14", "PR 3"
#   - a commit used as a reference: "at db6fa79", "planner at 5784699"
#   - dates: 2026-12-01
#   - who ran what when: "session", "this commit", "previous solver",
#     "branch point", "at branch x", "in git history"
#   - status instead of the state: "pending a GPU run", "before this work",
#     "after the fix", "in earlier runs", "previously", "no longer needed",
#     "used to be", "not yet run on a GPU", "has not been measured",
#     "now rejects", "no GPU was lent", "at this build", "until the x branch"
#     (say what is true of the project, or plainly what is not measured)
# Allowed on purpose: another project's tracker, written with its name
# (Megatron#525, pytorch/pytorch#1234, NVIDIA/nvbandwidth#15, or a link to
# github.com/OWNER/REPO/issues/N), and an upstream commit named with its
# project ("PyTorch 2.11.0, git 70d99e99"): they are the source of a fact.
#   tests/lint/history_words.sh [DIR]     (default: the repository root)
# Files: `git ls-files` when DIR is a git work tree, otherwise every file
# under DIR except build*/, .venv/ and .git/. Binary files are skipped.
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root"

if git rev-parse --is-inside-work-tree >/dev/null 2>&1 &&
   [ "$(git rev-parse --show-toplevel)" = "$(pwd -P)" ]; then
  list_files() { git ls-files -z; }
else
  list_files() {
    find . \( -path ./.git -o -path './build*' -o -path ./.venv \) -prune \
      -o -type f -print0 | sed -z 's|^\./||'
  }
fi

# Our tracker. A '#N' counts unless it follows a project name or an
# OWNER/REPO (Megatron#525), an HTML entity (&#123;) or is a 6-digit colour.
ours_issue='\b(issue|pr|pull)[ _-]?#?[0-9]+'
ours_hash='(^|[^A-Za-z0-9_/&.#-])#[0-9]{1,5}\b'
# A commit as a reference: a 7-40 hex token with a digit and a letter, or
# 7-8 digits right after at/against/commit/since.
hash_mixed='(^|[^A-Za-z0-9_.x/#-])[0-9a-f]*([0-9][0-9a-f]*[a-f]|[a-f][0-9a-f]*[0-9])[0-9a-f]*($|[^A-Za-z0-9_.-])'
hash_digits='\b(at|against|commit|since) [0-9]{7,8}\b'
date='\b20[0-9]{2}-[01][0-9](-[0-3][0-9])?\b'
words='\bsessions?\b|\b(this|the previous|previous|last) (commit|change|pr)\b|\bthat (commit|pr)\b|\bprevious (solver|run|table|platform|version|build|round|benchmark)s?\b|\bbranch point\b|\b(at|on|from) branch\b|\bgit history\b|\b(before|after) this (change|commit|fix)\b'
# Status words: precise phrases, so that present-tense prose ("the backward
# has not run yet" inside a schedule, "live no longer than", "the buffer
# used to keep", "was replaced") passes.
status='\bpending (a|an|the|on|until|further)\b'
status+='|\b(before|after) this (work|patch|rewrite|refactor|round)\b'
status+='|\b(before|after|since) (the|that) (fix|merge|rewrite|refactor)\b|\b(after|before) merging\b'
status+='|\bearlier runs?\b|\b(in|from|during|at) this run\b|\b(in|from|during|of|by) this (round|work)\b'
status+='|\bpreviously\b|\buntil recently\b|\bused to be\b'
status+='|\bno longer (needed|used|supported|exists?|appl(y|ies)|the case|true|required|happens|fails|crashes)\b'
status+='|\b(was|were|been) lent\b'
status+='|\bnot yet (run|measured|compared|tested|checked) on\b|\bnot yet (implemented|supported|wired|modell?ed)\b'
status+='|\bnot (modell?ed|measured|implemented|supported|wired) yet\b|\bon an? [a-z0-9]+ yet\b'
status+='|\b(has|have) not (yet )?been (run|measured|compared|tested|checked)\b'
status+='|\b(has|have) not (yet )?run on an? (gpu|cuda|device|h100|h200|a100)\b'
status+='|\bat the time([.,;)]|$)|\bat this (build|commit|revision)\b'
status+='|\b(code|tree|project|planner|solver) as it (was|stood)\b'
status+='|\bnow (rejects|refuses|accepts|supports|handles|matches|passes|agrees)\b'
status+='|\b(until|since|before|after) the [a-z0-9_-]+ branch\b'
# "Used to ..." opening a sentence or a comment (case-sensitive).
used_to='(^|[.;!?] |//+ |# )Used to [a-z]+'

# Lines that cite an upstream commit with its project are allowed.
upstream_commit='(PyTorch|pytorch|torch)[^;]*\bgit [0-9a-f]{7,40}\b'

# This check and its test, which spell out what they look for.
file_names='^tests/lint/history_words(_test)?\.sh:'

files=$(mktemp); trap 'rm -f "$files"' EXIT
list_files > "$files"
grep_all() { xargs -0 -r grep -nHIE "$@" < "$files" || true; }
hits=$( { grep_all -i "$ours_issue|$words|$date|$hash_digits|$status"
          grep_all "$ours_hash"
          grep_all "$used_to"
          grep_all "$hash_mixed" | { grep -vE "$upstream_commit" || true; } |
            awk '{ line = $0; sub(/^[^:]*:[0-9]+:/, "", line);
                   gsub(/[a-z]+:\/\/[^ )>"]*/, "", line);   # links
                   gsub(/#[0-9A-Fa-f]+/, "", line);           # colours
                   n = split(line, w, /[^A-Za-z0-9_.x-]+/);
                   for (i = 1; i <= n; i++)
                     if (w[i] ~ /^[0-9a-f]+$/ && length(w[i]) >= 7 &&
                         length(w[i]) <= 40 && w[i] ~ /[0-9]/ &&
                         w[i] ~ /[a-f]/) { print; next } }'
        } | { grep -vE "$file_names" || true; } | sort -t: -k1,1 -k2,2n -u |
        cut -c1-200)
status=0
if [ -n "$hits" ]; then printf '%s\n' "$hits"; status=1; fi

if [ $status -ne 0 ]; then
  echo "history in the tree (above, file:line): describe the project as it is;"
  echo "cite another project's tracker as OWNER/REPO#N or Project#N"
  exit 1
fi
echo "no history words in the tree"
