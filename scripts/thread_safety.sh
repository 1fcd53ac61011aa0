#!/usr/bin/env bash
# Runs clang's thread-safety analysis (-Wthread-safety, syntax only) over
# every C++ source of the tree, so that the ABSL_GUARDED_BY and
# ABSL_EXCLUSIVE_LOCKS_REQUIRED annotations are checked, not just written.
# Every thread-safety warning is an error (-Werror=thread-safety); the script
# fails on any, and on a file clang cannot parse.
#
#   scripts/thread_safety.sh [BUILD_DIR [FILE...]]
#
# FILEs (paths from the top of the tree) limit the check to those files.
#
# The flags of each file (include directories, defines, -std) come from
# BUILD_DIR/compile_commands.json (CMAKE_EXPORT_COMPILE_COMMANDS is on in the
# top-level CMakeLists.txt); without BUILD_DIR, build/thread-safety is
# configured with every backend, the adapters and the tests (configuring
# only, nothing is built). The build may have been configured for GCC: the
# compiler, its -W flags and its outputs are dropped, and clang++ checks the
# file with -fsyntax-only. A .cc of the tree that no target compiles (the
# install consumer, built against an installed dlock) is checked with the
# public include directories. Files run in parallel, one clang per core.
set -euo pipefail
cd "$(dirname "$0")/.."

clang=${CLANG:-clang++}
if ! command -v "$clang" >/dev/null; then
  echo "thread_safety.sh: $clang not found (scripts/install-deps.sh installs clang)" >&2
  exit 2
fi

build=${1:-}
[ $# -gt 0 ] && shift
if [ -z "$build" ]; then
  build=build/thread-safety
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DDLOCK_BACKENDS= \
    -DDLOCK_BUILD_ADAPTERS=ON -DDLOCK_BUILD_TESTS=ON >/dev/null
fi
db="$build/compile_commands.json"
if [ ! -f "$db" ]; then
  echo "thread_safety.sh: no $db (configure $build first)" >&2
  exit 2
fi

start=$(date +%s%N)
commands=$(mktemp)
out=$(mktemp)
trap 'rm -f "$commands" "$out"' EXIT

# One shell command per file, NUL-terminated, for xargs.
python3 - "$db" "$clang" "$PWD" "$@" >"$commands" <<'EOF'
import json, os, shlex, sys

db, clang, root = sys.argv[1], sys.argv[2], sys.argv[3]
only = set(os.path.normpath(f) for f in sys.argv[4:])
analysis = ["-fsyntax-only", "-Wthread-safety", "-Werror=thread-safety",
            "-Wno-unknown-warning-option", "-Wno-unused-command-line-argument"]
# Flags that take the next argument and only concern outputs.
drop_with_value = {"-o", "-MF", "-MT", "-MQ"}
drop = {"-c", "-MD", "-MMD"}

def clang_args(args, source):
    kept = []
    skip = False
    for a in args[1:]:
        if skip:
            skip = False
        elif a in drop_with_value:
            skip = True
        elif a in drop or a.startswith("-W") or a == source:
            pass
        else:
            kept.append(a)
    return [clang] + kept + analysis + [source]

seen = set()
commands = []
for entry in json.load(open(db)):
    source = entry["file"]
    path = os.path.relpath(source, root)
    if path.startswith(("build/", "../")) or path in seen:
        continue
    seen.add(path)
    args = entry.get("arguments") or shlex.split(entry["command"])
    commands.append((path, entry["directory"], clang_args(args, source)))

# Every .cc of the tree; those no target compiles get the public headers.
tree = []
for top in ("core", "backends", "adapters", "integration", "tests", "examples"):
    for directory, _, names in os.walk(top):
        tree += [os.path.join(directory, n) for n in names if n.endswith(".cc")]
for path in tree:
    if path in seen:
        continue
    args = [clang, "-std=c++20", "-Icore/include", "-Iadapters/include"]
    commands.append((path, root, args + analysis + [os.path.join(root, path)]))

missing = only - set(path for path, _, _ in commands)
if missing:
    sys.exit("thread_safety.sh: not a C++ source of the tree: " +
             " ".join(sorted(missing)))
for path, directory, args in sorted(commands):
    if only and path not in only:
        continue
    sys.stdout.write("cd %s && %s\0" % (shlex.quote(directory), shlex.join(args)))
EOF

files=$(tr -cd '\0' <"$commands" | wc -c)
status=0
xargs -0 -n1 -P"$(nproc)" sh -c <"$commands" >"$out" 2>&1 || status=$?
ms=$((($(date +%s%N) - start) / 1000000))
elapsed=$((ms / 1000)).$((ms % 1000 / 100))
cat "$out"
if [ "$status" -ne 0 ]; then
  echo "thread-safety analysis: FAILED ($files files, ${elapsed}s)" >&2
  exit 1
fi
echo "thread-safety analysis: $files files clean (${elapsed}s)"
