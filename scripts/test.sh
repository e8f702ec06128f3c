#!/usr/bin/env bash
# Installs what is missing (scripts/setup.sh), checks the data tool's dependencies, formatting and
# lints (with and without FFmpeg), builds the workspace with its tests and runs them. This is what
# CI runs (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/setup.sh --browser)"

step() { echo "== $*" >&2; }

# The reference checks start Python many times. Where the environment says not to write
# bytecode (PYTHONDONTWRITEBYTECODE, as on the machine CI runs on), each start compiled torch's
# modules from source again (about 6 s a start); they are compiled once, into .venv/pycache.
export PYTHONPYCACHEPREFIX="$PWD/.venv/pycache"
unset PYTHONDONTWRITEBYTECODE

step "dependencies: the data tool without FFmpeg links no libav, and never libtorch"
# The dependency trees prove what a link would show, without building a third variant: a crate
# that is not in the tree cannot be linked.
if cargo tree --locked -p avaprep-cli --no-default-features -e normal | grep -E ' ffmpeg-(sys-)?next '; then
  echo "avaprep without the extract feature depends on FFmpeg" >&2
  exit 1
fi
if cargo tree --locked -p avaprep-cli --all-features -e normal | grep -E ' (tch|torch-sys) '; then
  echo "the data tool's crate depends on libtorch: only crates/avaprep-train may" >&2
  exit 1
fi
if grep -rn --include='*.rs' '#\[path' src crates tests; then
  echo "modules are crates or folders, not #[path] includes" >&2
  exit 1
fi

step "format and lints (the workspace, and the data tool without FFmpeg as a validating CI job installs it)"
# Before the build: they share its build scripts and proc-macros, so their own cost is the
# dependencies' check (about a minute). Run niced beside the tests, they slowed the tests by more.
cargo fmt --all -- --check
cargo clippy --release --locked --workspace --all-targets -- -D warnings
cargo clippy --release --locked -p avaprep-cli --no-default-features -- -D warnings

step "build: the workspace with its tests (the data tool with FFmpeg, the trainer, every test)"
# One build for the executables and the tests: `cargo test` builds both executables (the tests
# run them) with the library's test-only fault injection added; the demo builds them without.
cargo test --release --locked --workspace --no-run

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

step "tests"
cargo test --release --locked --workspace
