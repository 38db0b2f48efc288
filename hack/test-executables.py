#!/usr/bin/env python3
"""The test executables of one `cargo test --no-run --message-format=json...` build (its JSON
messages on stdin), one per line: PACKAGE_DIR, SOURCE (relative to it) and EXECUTABLE, tab-separated,
in cargo test's order (by package, library first, then binaries, then integration tests by name).

hack/test.sh runs them itself, as cargo test would (from the package's directory), so that running a
subset builds nothing: cargo unifies features over the targets a command selects, and
`cargo test --test e2e` alone selects a different set than the whole build, recompiling olmv1.

Usage: test-executables.py e2e|others < build.json   (e2e: the e2e binary; others: every other one)
       test-executables.py binary NAME < build.json  (the path of binary NAME the build made for the
                                                      tests to run, e.g. olmv1 for deploy-test's image)
"""
import json
import os
import sys

KIND_ORDER = {"lib": 0, "bin": 1, "test": 2}


def executables():
    """The build's compiler-artifact messages that made an executable."""
    for line in sys.stdin:
        if not line.startswith("{"):
            continue
        message = json.loads(line)
        if message.get("reason") == "compiler-artifact" and message.get("executable"):
            yield message


def binary(name: str) -> None:
    for message in executables():
        target = message["target"]
        if target["name"] == name and "bin" in target["kind"] and not message["profile"]["test"]:
            print(message["executable"])
            return
    sys.exit(f"test-executables.py: the build made no binary {name}")


def main() -> None:
    want = sys.argv[1] if len(sys.argv) > 1 else ""
    if want == "binary" and len(sys.argv) == 3:
        binary(sys.argv[2])
        return
    if want not in ("e2e", "others"):
        sys.exit("usage: test-executables.py e2e|others|binary NAME < build.json")
    found = {}
    for message in executables():
        if not message["profile"]["test"]:
            continue  # a binary built for an integration test to run, not a test itself
        target = message["target"]
        is_e2e = target["name"] == "e2e" and "test" in target["kind"]
        if (want == "e2e") != is_e2e:
            continue
        package_dir = os.path.dirname(message["manifest_path"])
        kind = next((k for k in target["kind"] if k in KIND_ORDER), "test")
        key = (package_dir != os.getcwd(), package_dir, KIND_ORDER[kind], target["name"])
        found[key] = (package_dir, os.path.relpath(target["src_path"], package_dir), message["executable"])
    for key in sorted(found):
        print("\t".join(found[key]))


if __name__ == "__main__":
    main()
