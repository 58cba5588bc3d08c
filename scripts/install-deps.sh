#!/usr/bin/env bash
# Installs the Debian packages INC needs (only those missing). Run as root on Debian 12.
# Why each one is here: docs/ARCHITECTURE.md, "Dependencies".
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config ccache  # toolchain (ccache: scripts/test.sh)
  libgtest-dev libgmock-dev googletest           # tests
  libbenchmark-dev                               # kernel benchmarks
  libfmt-dev nlohmann-json3-dev libcli11-dev     # formatting, JSON output, CLI parsing
  libcpp-httplib-dev                             # switch /metrics endpoint
  libtomlplusplus-dev                            # model and topology files
  libgloo-dev openmpi-bin libopenmpi-dev         # peers measured side by side; the PMPI library
  mpich libmpich-dev                             # (src/mpi) is built and tested for both MPIs
  libsimgrid-dev gnuplot-nox                     # simulator validation, plots
  clang clang-14 libfuzzer-14-dev libclang-rt-14-dev  # fuzz targets (scripts/fuzz.sh: clang++ is
                                                      # clang-14 on Debian 12; -fsanitize=fuzzer)
  libssl-dev                                     # packet authentication (AES-GMAC, HMAC-SHA256)
  libsodium-dev                                  # the MAC it was measured against (switch_bench auth)
  clang-format iproute2 time python3
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  if [[ $(id -u) -ne 0 ]]; then
    echo "install-deps: need root to install packages (run as root or with sudo)" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Python packages of the PyTorch backend, its tests and example: pinned in python/requirements.txt.
req="$(dirname "$0")/../python/requirements.txt"
python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-deps -r "$req"
if ! python3 -c "import torch" 2>/dev/null; then
  # No CUDA 13 toolkit here to provide torch's libraries: take them from PyPI (several GB).
  torch_pin=$(grep -E '^torch==' "$req")
  echo "install-deps: 'import torch' fails with the system's CUDA libraries; installing $torch_pin with its dependencies"
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore "$torch_pin"
  python3 -c "import torch"
fi
