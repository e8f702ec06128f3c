#!/usr/bin/env bash
# Installs what is missing (scripts/setup.sh), builds the three feature sets, checks formatting and
# lints, and runs every test. This is what CI runs (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/setup.sh --browser)"

step() { echo "== $*" >&2; }

step "build: trainer only (no FFmpeg)"
cargo build --release --locked --no-default-features --features train
# The data tool of this build is the one a validating CI job installs: no FFmpeg.
if ldd target/release/avaprep | awk '{print $1}' | grep -E '^libav'; then
  echo "avaprep built without the extract feature links libav" >&2
  exit 1
fi
step "build: data stages only (no libtorch)"
cargo build --release --locked --no-default-features --features extract
step "build: default (both)"
cargo build --release --locked

step "both executables find their libraries without LD_LIBRARY_PATH; the data tool links no libtorch"
for binary in avaprep avaprep-train; do
  if env -u LD_LIBRARY_PATH ldd "target/release/$binary" | grep "not found"; then
    echo "target/release/$binary has unresolved libraries" >&2
    exit 1
  fi
  env -u LD_LIBRARY_PATH "target/release/$binary" --version
done
if ldd target/release/avaprep | awk '{print $1}' | grep -E '^lib(torch|c10|cuda|cudart|cublas|cudnn)'; then
  echo "target/release/avaprep links libtorch or CUDA: the data tool must not" >&2
  exit 1
fi

step "format and lints"
cargo fmt --all -- --check
cargo clippy --release --locked --all-targets -- -D warnings

step "tests"
cargo test --release --locked
