#!/usr/bin/env python3
"""Each folder is a layer, and layers only call down.

    tests/lint/layering.py SOURCE_DIR

The layers, lowest first, are the list REMAT_LAYERS in
planner/CMakeLists.txt, the one place that names them. Layer L is the folder
planner/src/L/ and its public headers planner/include/remat/L/; the build
already fails on an upward include inside planner/src (each layer compiles
against links to its own and the lower layers' headers only). This check
covers the rest of the contract:

- no file sits loose at planner/src's or planner/include/remat's root (but
  the umbrella header remat/planner.h), and no folder there is outside
  the list;
- the code above or beside the layers includes only what its place allows:
  planner/cli and the umbrella header sit on top, visualize/ at the report
  layer, runtime/ (the schedule's other executor) at the simulate layer;
- a relative include ("../x.h") is checked too, so that the file system
  cannot route around the build's check.

Prints each violation as "file:line: <layer> includes <header> (<layer>)"
and exits 1, else exits 0.
"""
import os
import re
import sys

UMBRELLA = "planner/include/remat/planner.h"
# Code outside planner/src and planner/include/remat, and the layer it sits at.
PLACED = [("planner/cli/", "cli"), ("visualize/", "report"), ("runtime/", "simulate")]
SCANNED = ["planner", "visualize", "runtime"]
INCLUDE_DIRS = ["planner/include", "visualize/include", "runtime/include"]
PRIVATE_DIRS = {"planner/src": "planner/src", "planner/cli": "planner/cli",
                "visualize": "visualize/src", "runtime": "runtime/src"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE_EXTENSIONS = (".h", ".cc", ".cpp", ".hpp")


def read_layers(root):
    """REMAT_LAYERS from planner/CMakeLists.txt, lowest first, then the
    places above them: the umbrella header and the CLI."""
    path = os.path.join(root, "planner", "CMakeLists.txt")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"set\(REMAT_LAYERS\s+(.*?)\)", text, re.S)
    if not m:
        raise SystemExit(f"{path}: no set(REMAT_LAYERS ...)")
    body = "\n".join(line.split("#", 1)[0] for line in m.group(1).splitlines())
    return body.split() + ["umbrella", "cli"]


def layer_of(path, layers):
    """Index into layers of a path relative to the source root, or None."""
    if path == UMBRELLA:
        return layers.index("umbrella")
    for prefix in ("planner/src/", "planner/include/remat/"):
        if path.startswith(prefix):
            rest = path[len(prefix):]
            if "/" not in rest:
                return None  # loose at the root
            folder = rest.split("/", 1)[0]
            return layers.index(folder) if folder in layers[:-2] else None
    for prefix, layer in PLACED:
        if path.startswith(prefix):
            return layers.index(layer)
    return None


def scanned_files(root):
    for top in SCANNED:
        for base, dirs, files in os.walk(os.path.join(root, top)):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(SOURCE_EXTENSIONS):
                    yield os.path.relpath(os.path.join(base, name), root).replace(os.sep, "/")


def resolve(root, including, name):
    candidates = [os.path.join(os.path.dirname(including), name)]
    candidates += [os.path.join(d, name) for d in INCLUDE_DIRS]
    for prefix, private in PRIVATE_DIRS.items():
        if including.startswith(prefix + "/"):
            candidates.append(os.path.join(private, name))
    for c in candidates:
        c = os.path.normpath(c).replace(os.sep, "/")
        if os.path.isfile(os.path.join(root, c)):
            return c
    return None


def check(root):
    """The violations in the tree at `root`, as lines to print."""
    layers = read_layers(root)
    problems = []
    for top in ("planner/src", "planner/include/remat"):
        full = os.path.join(root, top)
        for name in sorted(os.listdir(full)) if os.path.isdir(full) else []:
            if os.path.isdir(os.path.join(full, name)) and name not in layers[:-2]:
                problems.append(f"{top}/{name}/: a folder that is no layer; the layers are "
                                f"REMAT_LAYERS in planner/CMakeLists.txt")
    for path in scanned_files(root):
        own = layer_of(path, layers)
        if own is None:
            problems.append(f"{path}: in no layer; a planner file belongs in "
                            f"planner/src/<layer>/ or planner/include/remat/<layer>/")
            continue
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                header = resolve(root, path, m.group(1))
                if header is None:
                    problems.append(f"{path}:{number}: includes \"{m.group(1)}\", found nowhere")
                    continue
                theirs = layer_of(header, layers)
                if theirs is None:
                    problems.append(f"{path}:{number}: includes {header}, which is in no layer")
                elif theirs > own:
                    problems.append(f"{path}:{number}: {layers[own]} includes {header} "
                                    f"({layers[theirs]}, a layer above)")
    return problems, layers


def main(argv):
    if len(argv) != 2:
        print("usage: layering.py SOURCE_DIR", file=sys.stderr)
        return 2
    problems, layers = check(argv[1])
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} problem(s) with the layers ({' <- '.join(layers)})")
        return 1
    print("every folder is a layer and every include calls down: " + " <- ".join(layers))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
