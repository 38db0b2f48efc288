#!/usr/bin/env bash
# Builds a large file-based catalog from a real one by renaming its packages: COPIES copies of
# every package of SRC (a directory of `<package>/catalog.yaml`), copy k's packages named
# `<package>-copy<k>` (the olm.package name, each object's `package`, and every `packageName`
# that names one of SRC's packages, so dependencies stay within the copy). Bundle and channel
# names are unique within a package and stay as they are. For hack/bench-scale.sh (catalogd at
# 10x the largest shared catalog); not a test.
#
# Usage: hack/generate-catalog.sh SRC COPIES OUT
set -euo pipefail
[[ $# == 3 && -d $1 ]] || { echo "usage: hack/generate-catalog.sh SRC COPIES OUT" >&2; exit 1; }
python3 - "$@" <<'EOF'
import os, re, sys

src, copies, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
packages = sorted(p for p in os.listdir(src) if os.path.isdir(os.path.join(src, p)))
known = set(packages)
# Top-level `name:` of the olm.package object, `package:` of the others, `packageName:` anywhere.
package_line = re.compile(r"^(package: |\s*packageName: |\s*- packageName: )(\S+)$", re.M)
for k in range(1, copies + 1):
    suffix = f"-copy{k}"
    for package in packages:
        for name in os.listdir(os.path.join(src, package)):
            with open(os.path.join(src, package, name)) as f:
                text = f.read()
            text = package_line.sub(
                lambda m: m.group(1) + (m.group(2) + suffix if m.group(2) in known else m.group(2)), text)
            docs = re.split(r"^(?=---$)", text, flags=re.M)
            text = "".join(
                re.sub(rf"^name: {re.escape(package)}$", f"name: {package}{suffix}", d, flags=re.M)
                if re.search(r"^schema: olm\.package$", d, re.M) else d
                for d in docs)
            os.makedirs(os.path.join(out, package + suffix), exist_ok=True)
            with open(os.path.join(out, package + suffix, name), "w") as f:
                f.write(text)
print(f"{len(packages) * copies} packages in {out}", file=sys.stderr)
EOF
