#!/usr/bin/env bash
# deps.sh - install what building, testing and the demo need, saying what it installs.
# Debian packages through apt-get (as root), the S3 server through `npm ci` from the committed lockfile.
set -euo pipefail
cd "$(dirname "$0")/.."

DEB_PKGS=(build-essential pkg-config libcurl4-openssl-dev libssl-dev libcjson-dev libexpat1-dev
          dpkg-dev   # `make wheel`: scripts/wheel-curl.sh unpacks Debian's curl source with dpkg-source
          cmake ninja-build   # `make wheel`, `pip install .`: scikit-build-core runs CMakeLists.txt with Ninja
          rclone python3 python3-boto3 nodejs npm openssl coreutils curl stunnel4
          ceph-mon ceph-osd radosgw   # Ceph's RADOS Gateway: the real S3 server of the RGW tests (scripts/rgwenv.sh)
          # `make bench`: nginx-light (the reference server), aria2 (a comparison), gnuplot-nox (the chart),
          # valgrind (callgrind counts the shim's instructions), time
          nginx-light aria2 gnuplot-nox valgrind time
          # `make bench`'s FUSE rows (issue 31): fuse3 (fusermount3, for `rclone mount`), s3fs; libsodium23 (the
          # libnacl of Tensorizer's row)
          fuse3 s3fs libsodium23
          python3-yaml   # t_k8s_shapes reads README.md's Kubernetes manifest
          strace   # t_real_clients: what huggingface_hub writes into a cache it reads, asked of the kernel
          clang libclang-rt-dev)   # libFuzzer (-fsanitize=fuzzer): the fuzz targets, `make fuzz` and t_fuzz
missing=()
for p in "${DEB_PKGS[@]}"; do
  # nodejs/npm from NodeSource count as present: any node >= 18 with npm will do.
  case "$p" in
    nodejs) command -v node >/dev/null && continue ;;
    npm) command -v npm >/dev/null && continue ;;
  esac
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "deps: installing Debian packages: ${missing[*]}"
  if [ "$(id -u)" != 0 ]; then echo "deps: need root for apt-get (or install them yourself)" >&2; exit 1; fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "deps: Debian packages present"
fi

need_npm() { [ ! -f "$1/node_modules/.package-lock.json" ] || ! cmp -s "$1/package-lock.json" "$1/.npm-ci-stamp" 2>/dev/null; }
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -ge 20 ]; then dir=.; else
  echo "deps: node $(node --version) < 20: using the fallback s3rver 3.7.1, which does NOT verify signatures" >&2
  dir=scripts/legacy-s3rver
fi
if need_npm "$dir"; then
  echo "deps: npm ci in $dir (the local S3 server)"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null && cp package-lock.json .npm-ci-stamp)
else
  echo "deps: S3 server present"
fi

# Python: the real clients (transformers, safetensors, huggingface_hub, tokenizers) and the peers of the bench
# (Run:ai Model Streamer, boto3, awscli), pinned in requirements.txt, in the project's own virtual environment .venv
# (tests find it as $HFS3_PY). Reinstalled when requirements.txt changes.
venv=.venv
if [ ! -x "$venv/bin/python" ]; then
  echo "deps: creating the virtual environment $venv"
  python3 -m venv "$venv" 2>/dev/null || {
    if [ "$(id -u)" = 0 ]; then apt-get install -y -qq --no-install-recommends python3-venv >/dev/null; fi
    rm -rf "$venv"; python3 -m venv "$venv"; }
fi
if ! cmp -s requirements.txt "$venv/.requirements-stamp" 2>/dev/null; then
  echo "deps: pip install -r requirements.txt into $venv (torch, transformers, safetensors, huggingface_hub, ...)"
  "$venv/bin/pip" install -q --disable-pip-version-check -r requirements.txt 2>&1 | grep -v '^WARNING: Location' || true
  "$venv/bin/python" -c "import torch, transformers, safetensors, huggingface_hub, tokenizers" ||
    { echo "deps: the Python packages of requirements.txt did not install into $venv" >&2; exit 1; }
  cp requirements.txt "$venv/.requirements-stamp"
else
  echo "deps: Python packages present ($venv)"
fi
