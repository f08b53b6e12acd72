#!/usr/bin/env bash
# Regenerates the example report and its screenshot. From the repository
# root, after building (cmake --build build):
#   visualize/examples/regenerate.sh [PLANNER]    # default build/bin/planner
set -eu
planner=${1:-build/bin/planner}
"$planner" --budget 24GB --report visualize/examples/gpt2-small.html examples/gpt2-small.json \
  > /dev/null
visualize/tools/screenshot.sh visualize/examples/gpt2-small.html \
  visualize/examples/gpt2-small.png 1400x2560 2> /dev/null ||
  { echo "regenerate.sh: the screenshot failed (apt-get install chromium)" >&2; exit 1; }
echo "wrote visualize/examples/gpt2-small.html and gpt2-small.png"
