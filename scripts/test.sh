#!/usr/bin/env bash
# Installs what is missing (scripts/setup.sh), checks the data tool's dependencies, formatting and
# lints (with and without FFmpeg), builds the workspace with its tests and runs them. This is what
# CI runs (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { echo "== $*" >&2; }
lean_log=$(mktemp)
lean_lints=
trap '[ -z "$lean_lints" ] || kill "$lean_lints" 2>/dev/null; rm -f "$lean_log"' EXIT

# The lints and the format check need rustup's clippy and rustfmt (a minimal profile lacks them).
if ! cargo clippy --version >/dev/null 2>&1 || ! cargo fmt --version >/dev/null 2>&1; then
  rustup component add clippy rustfmt
fi

step "format, and the lints of the data tool without FFmpeg (as a validating CI job installs it) beside the setup"
# They need neither FFmpeg nor libtorch, and the setup's Python install (minutes on a fresh
# machine) keeps one core busy.
cargo fmt --all -- --check
cargo clippy --release --locked -p avaprep-cli --no-default-features -- -D warnings >"$lean_log" 2>&1 &
lean_lints=$!
environment=$(scripts/setup.sh --browser)
eval "$environment"
lean_status=0
wait "$lean_lints" || lean_status=$?
lean_lints=
cat "$lean_log" >&2
[ "$lean_status" -eq 0 ]

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

step "build and lint: the workspace with its tests (the data tool with FFmpeg, the trainer, every test)"
# Clippy compiles the workspace's crates as rustc would, with its lints added (what `cargo clippy
# --all-targets` checks): a separate `cargo clippy` checked every dependency again, 3 minutes of a
# fresh run. Cargo records the wrapper in the build, so a later `cargo test` without it builds the
# workspace's crates again. One build for the executables and the tests: `cargo test` builds both
# executables (the tests run them) with the library's test-only fault injection added; the demo
# builds them without.
# An empty wrapper would build without the lints: a missing clippy-driver stops here.
RUSTC_WORKSPACE_WRAPPER=$(command -v clippy-driver) || { echo "clippy-driver not found: rustup component add clippy" >&2; exit 1; }
CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__" # clippy-driver's form of `-- -D warnings`
export RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS
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
