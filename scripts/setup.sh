#!/usr/bin/env bash
# Installs what a fresh machine lacks to build and test avaprep. Idempotent: each step checks first.
#   - Debian packages: FFmpeg 5.1 development libraries (ffmpeg-next), clang (bindgen), DejaVu Sans
#     (embedded at build: the text of the report and the training curves), the ffmpeg CLI (tests and
#     benchmarks only), util-linux (unshare, for the no-space test), curl and GNU time (benchmarks),
#     binutils (strip, for the GPU bundle and its test); with --browser also Chromium (the report's
#     browser tests) and Firefox ESR (how VIA's times and pixels are in each browser).
#   - .venv/ in the repository: torch==2.11.0 (the libtorch that tch 0.24 links) and the Python packages
#     that tests use as references (pytorchvideo, torchvision, PySlowFast, mmaction2 1.2.0 with
#     mmengine and mmcv-lite, which needs no compiled ops, tensorboard's event reader).
# Prints the environment the build needs as `export` lines on stdout (`eval "$(scripts/setup.sh)"`).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "setup: $*" >&2; }

debian_packages=(
  pkg-config clang libclang-dev
  libavcodec-dev libavformat-dev libavutil-dev libswscale-dev libavfilter-dev libavdevice-dev libswresample-dev
  fonts-dejavu-core ffmpeg util-linux curl time
  binutils
)
if [ "${1:-}" = "--browser" ]; then
  debian_packages+=(chromium firefox-esr)
fi
missing=()
for package in "${debian_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

if ! command -v cargo >/dev/null 2>&1; then
  log "cargo not found: install Rust with rustup (https://rustup.rs) and re-run"
  exit 1
fi

venv=.venv
python=${PYTHON:-python3}
if [ ! -x "$venv/bin/python" ]; then
  log "creating $venv"
  "$python" -m venv "$venv"
fi
# --no-compile: byte-compiling torch's thousands of modules at install took a CPU-minute; Python
# compiles the few it imports on first use (scripts/test.sh lets it keep them where the environment
# says not to write bytecode).
pip=("$venv/bin/python" -m pip install --disable-pip-version-check --no-compile -q)
# The stamp holds this list: changing the list re-runs the install.
python_packages="torch==2.11.0 torchvision==0.26.0 safetensors numpy av parameterized yacs portalocker tabulate termcolor tqdm pyyaml opencv-python-headless simplejson tensorboard==2.21.0 addict yapf rich scipy"
# mmaction2 1.2.0 asserts mmcv < 2.2.0; mmcv-lite would pull opencv-python beside the headless one.
python_nodeps="pytorchvideo==0.1.5 fvcore iopath mmaction2==1.2.0 mmengine==0.10.7 mmcv-lite==2.1.0 slowfast==1.0"
stamp="$venv/.avaprep-packages"
wanted="$python_packages | $python_nodeps"
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  log "installing Python packages into $venv (torch is large: a few minutes the first time)"
  # shellcheck disable=SC2086
  "${pip[@]}" $python_packages >&2
  # shellcheck disable=SC2086
  "${pip[@]}" --no-deps $python_nodeps >&2
  echo "$wanted" >"$stamp"
fi

torch_dir=$("$venv/bin/python" -c 'import os, torch; assert torch.__version__.startswith("2.11.0"), torch.__version__; print(os.path.dirname(torch.__file__))')
cxx11_abi=$("$venv/bin/python" -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
# tch's build script finds libtorch through LIBTORCH (the wheel has include/ and lib/ like a libtorch
# download); crates/avaprep-train/build.rs reads AVAPREP_TORCH_LIB for the rpath.
echo "export LIBTORCH=$torch_dir"
echo "export LIBTORCH_CXX11_ABI=$cxx11_abi"
echo "export AVAPREP_TORCH_LIB=$torch_dir/lib"
echo "export PATH=$PWD/$venv/bin:\$PATH"
