#!/usr/bin/env bash
# Tests tests/lint/history_words.sh on a directory outside git: a clean file
# (present-tense text and the upstream references it allows) passes, and each
# planted history word fails, naming the file and line.
#   tests/lint/history_words_test.sh PATH/TO/history_words.sh
set -euo pipefail
lint=${1:?usage: history_words_test.sh PATH/TO/history_words.sh}
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
failures=0

cat > "$dir/clean.md" <<'TEXT'
The solver fills 63% fewer cells with chunk bounds than without (--exact-times).
Megatron#525 and pytorch/pytorch#1234 and NVIDIA/nvbandwidth#15 are sources.
See https://github.com/NVIDIA/nvbandwidth/issues/42 for the A100 rate.
The rules follow PyTorch 2.11.0, git 70d99e99.
A float 0.6961928009986877f, colours fill="#000000" and #1f77b4ff, an entity &#123;, 0x9e3779b9.
An upstream commit link: https://github.com/pytorch/pytorch/commit/70d99e99a1b2.
The previous layer's output_bytes equals this layer's input_bytes.
A tensor whose consumers have not run yet is live; weights live no longer than
the layer. The buffer used to keep the gradients was replaced by a file.
The file is left as it was. The CUDA path is not measured on a GPU.
The replay stops at 8 micro-steps and the report says "not yet steady" then.
At the time the op runs, the bar is on the terminal now.
The config.json keys of families that change the logits between head and loss.
Budgets of 24GB at 1024 layers; sha256 of 64 characters is not a commit:
3b1f9c0e8d7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c
TEXT
if ! out=$("$lint" "$dir" 2>&1); then
  echo "FAIL: the clean file was flagged:"; echo "$out"; failures=$((failures + 1))
fi

# A tree with nothing hex-like in it passes too (no empty grep fails the check).
plain=$(mktemp -d); echo "The planner plans." > "$plain/plain.md"
if ! out=$("$lint" "$plain" 2>&1); then
  echo "FAIL: a plain tree was flagged:"; echo "$out"; failures=$((failures + 1))
fi
rm -rf "$plain"

planted=(
  "Measured for issue 14 on CPU."
  "The matrix of issue12."
  "Fixed in #14."
  "Fixed in PR 7."
  "The planner at db6fa79 took 0.16 s."
  "measured at 1696816, after the fix"
  "Rerun whole on 2026-12-01."
  "This host ran slower than in the previous session."
  "The previous solver took 9 ms."
  "Before this change the peak was 3% low."
  "Against the branch point."
  "Measured at branch enc."
  "The last run is in git history."
  "The predicted column is this commit's planner."
  "Checked against recorded traces: pending a GPU run."
  "The first run, on the code as it was, failed."
  "Before this work the peak was 3% low."
  "Two targets stopped; after the fix each ran 300 s."
  "After merging the solvers, four targets ran again."
  "It was picked at 82% in earlier runs and not in this one."
  "The cell measured 5% in this run."
  "The bound was previously 2 GiB."
  "The margin is no longer needed."
  "The default used to be 4096 slots."
  "// Used to exhaust the stack in ParsePlanJson."
  "The NCCL path: no GPU was lent to these runs."
  "The stream is compiled, not yet run on a GPU."
  "Not modelled yet: the optimizer's temporaries."
  "The merged passes have not run on a GPU yet."
  "The model has not been compared with allocator traces."
  "The CUDA path is written but has not run on a GPU."
  "A figure measured at this build."
  "Time divisions give inf, which ValidateProfile now rejects."
  "Until the spread branch the class key left them out."
)
for i in "${!planted[@]}"; do
  rm -f "$dir"/planted*.md
  printf 'A clean first line.\n%s\n' "${planted[$i]}" > "$dir/planted$i.md"
  if out=$("$lint" "$dir" 2>&1); then
    echo "FAIL: not flagged: ${planted[$i]}"; failures=$((failures + 1))
  elif ! grep -q "planted$i.md:2:" <<<"$out"; then
    echo "FAIL: flagged without planted$i.md:2: ${planted[$i]}"; echo "$out"
    failures=$((failures + 1))
  fi
done
rm -f "$dir"/planted*.md

# Build directories and virtual environments are not the tree.
mkdir -p "$dir/build/x" "$dir/.venv"
echo "issue 14" > "$dir/build/x/log.txt"; echo "issue 14" > "$dir/.venv/a.py"
if ! out=$("$lint" "$dir" 2>&1); then
  echo "FAIL: build/ or .venv/ was read:"; echo "$out"; failures=$((failures + 1))
fi

if [ $failures -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo "history_words.sh: clean text passes, ${#planted[@]} planted cases fail"
