#!/usr/bin/env bash
# t_wheel.sh - `make wheel` (pyproject.toml + CMakeLists.txt through scikit-build-core, then auditwheel repair) gives
# one manylinux wheel, the tag README names; installed into a fresh venv that has no other hfs3, it puts
# hfs3-manifest on the venv's PATH, hfs3.shim_path() names its shim, and `hfs3-manifest run` loads a transformers
# model with that venv's Python through the wheel's own shim and helper, equal to the local load. The wheel's shim is
# built as the Makefile's is (libc only, the same exported symbols, -z now, -z nodelete), its helper carries its
# libraries inside the wheel, and `pip uninstall` takes every file back.
# What the wheel carries (issue 46): `auditwheel show` and the wheel's hfs3.libs/ list what is bundled; no GnuTLS, no
# LDAP (libcurl is scripts/wheel-curl.sh's, HTTP and HTTPS through OpenSSL only, static with OpenSSL), one TLS
# library, at most a third of the 18.2 MB the wheel unpacked to before; the wheel's helper fetches over TLS.
# The fresh venv has no pip and no packages of its own: the project's pip installs the wheel into it (pip --python),
# offline, and a .pth file after its own site-packages lends it torch and transformers from the project's .venv.
set -euo pipefail
source "$HFS3_ROOT/scripts/s3env.sh"; source "$HFS3_ROOT/tests/e2e/lib.sh"
[ -x "${HFS3_PY:-}" ] || skip_test venv "no ${HFS3_PY:-.venv/bin/python}: scripts/deps.sh installs requirements.txt there"
"$HFS3_PY" -c 'import scikit_build_core, auditwheel' 2>/dev/null ||
  skip_test wheel-tools "no scikit-build-core or auditwheel in $HFS3_PY: scripts/deps.sh installs requirements.txt"

# the wheel, as `make wheel` makes it (the build dir under BUILD is kept, so a second run recompiles nothing)
make -s --no-print-directory -C "$HFS3_ROOT" wheel BUILD="$BUILD" WHEEL_PY="$HFS3_PY" >"$WORK/wheel.log" 2>&1 ||
  { cat "$WORK/wheel.log"; fail "make wheel"; }
wheels=("$HFS3_ROOT/$BUILD"/wheel/hfs3-*.whl)
[ "${#wheels[@]}" = 1 ] && [ -f "${wheels[0]}" ] || fail "make wheel: want one wheel in $BUILD/wheel, got: ${wheels[*]}"
whl=${wheels[0]}
version=$(sed -n 's/^VERSION *:= *//p' "$HFS3_ROOT/Makefile")
tag=$(basename "$whl" | sed -n "s/^hfs3-$version-py3-none-\(manylinux_[0-9]*_[0-9]*_x86_64\)\.whl\$/\1/p")
[ -n "$tag" ] || fail "wheel $(basename "$whl"): want hfs3-$version-py3-none-manylinux_X_Y_x86_64.whl"
grep -q "py3-none-$tag" "$HFS3_ROOT/README.md" || fail "README names another manylinux tag than the wheel's $tag"
ok "make wheel: $(basename "$whl") ($(( $(stat -c %s "$whl") / 1024 )) KiB), the tag README names"

# what the wheel bundles: the libraries auditwheel show names and those in hfs3.libs/ (the helper's, which
# auditwheel copied in); Debian's libcurl4 brought 29 of them, 17.5 MB, GnuTLS and OpenLDAP among them
"$HFS3_PY" -m auditwheel show "$whl" >"$WORK/show.out" 2>&1 || { cat "$WORK/show.out"; fail "auditwheel show"; }
"$HFS3_PY" - "$whl" >"$WORK/contents" <<'PY'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
print("unpacked", sum(i.file_size for i in z.infolist()))
for i in z.infolist():
    if i.filename.startswith("hfs3.libs/") and not i.filename.endswith("/"):
        print("bundled", i.filename.split("/", 1)[1], i.file_size)
PY
bundled=$( (awk '$1 == "bundled" {print $2}' "$WORK/contents"; tr -s ' \n' '\n\n' <"$WORK/show.out" | grep -o '^lib[A-Za-z0-9_+.-]*\.so[0-9.]*' |
  grep -v -x -e 'libc\.so\.6' -e 'libm\.so\.6' -e 'libexpat\.so\.1' -e 'libz\.so\.1' -e 'libpthread\.so\.0' -e 'libdl\.so\.2' \
            -e 'librt\.so\.1' -e 'libresolv\.so\.2' || true) | sort -u)
echo "bundled: $bundled" >>"$WORK/show.out"
for bad in gnutls ldap lber sasl rtmp nettle hogweed krb5 gssapi; do
  if grep -qi "^lib[a-z0-9_-]*$bad" <<<"$bundled"; then
    cat "$WORK/show.out" "$WORK/contents"; fail "the wheel bundles $(grep -i "^lib[a-z0-9_-]*$bad" <<<"$bundled" | tr '\n' ' '): hfs3 uses HTTP(S) through OpenSSL only"
  fi
done
tls=$(grep -c -i -e '^libssl' -e '^libgnutls' -e '^libnss3' -e '^libmbedtls' -e '^libwolfssl' <<<"$bundled" || true)
[ "$tls" -le 1 ] || { cat "$WORK/show.out"; fail "the wheel bundles $tls TLS libraries"; }
unpacked=$(awk '$1 == "unpacked" {print $2}' "$WORK/contents")
# a third of 18,190,790 bytes, what the wheel of 7ddfb82 unpacked to
[ "$unpacked" -le 6063596 ] || { cat "$WORK/contents"; fail "the wheel unpacks to $unpacked bytes, more than a third of the 18.2 MB of 7ddfb82"; }
ok "the wheel bundles: $(echo $bundled) (no GnuTLS, no LDAP; shared TLS libraries: $tls, OpenSSL is inside the helper); unpacked $unpacked bytes"

# a fresh venv: no pip, nothing installed; the project's packages come after its own, through a .pth file
"$HFS3_PY" -m venv --without-pip "$WORK/venv"
V=$WORK/venv
site=$("$V/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$HFS3_PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' >"$site/zz-project-venv.pth"
if "$V/bin/python" -c 'import hfs3' 2>/dev/null; then
  fail "the fresh venv imports hfs3 before the wheel is installed: $("$V/bin/python" -c 'import hfs3; print(hfs3.__file__)')"
fi
"$HFS3_PY" -m pip --python "$V/bin/python" install -q --no-index --no-deps "$whl" >"$WORK/pip.log" 2>&1 ||
  { cat "$WORK/pip.log"; fail "pip install the wheel into a fresh venv"; }
# nothing of the tree's or of an installed hfs3: the venv's bin first, no helper or preload set
export PATH="$V/bin:$PATH"
unset LD_PRELOAD LD_LIBRARY_PATH HFS3_HELPER HFS3_MOUNTS
[ "$(command -v hfs3-manifest)" = "$V/bin/hfs3-manifest" ] || fail "hfs3-manifest on PATH: $(command -v hfs3-manifest)"
pkg=$site/hfs3
shim=$(python -c 'import hfs3; print(hfs3.shim_path())')
[ "$shim" = "$pkg/lib/libhfs3shim.so" ] && [ -f "$shim" ] || fail "hfs3.shim_path(): '$shim', want $pkg/lib/libhfs3shim.so"
[ "$(hfs3-manifest --version)" = "hfs3-manifest $version" ] || fail "hfs3-manifest --version: $(hfs3-manifest --version)"
[ -f "$V/share/man/man1/hfs3-manifest.1" ] && [ -f "$V/share/man/man7/hfs3.7" ] || fail "the man pages are not in the venv's share/man"
ok "pip install into a fresh venv: hfs3-manifest on its PATH, hfs3.shim_path() = site-packages/hfs3/lib/libhfs3shim.so, man pages"

# the shim as the Makefile builds it: libc only, the same exported symbols, bound now, never unloaded
ldd "$shim" | grep -v -e 'libc\.so' -e 'ld-linux' -e 'linux-vdso' | grep . && fail "the wheel's shim needs more than libc"
exports() { nm -D --defined-only "$1" | awk '{print $NF}' | sort; }
diff <(exports "$HFS3_SHIM") <(exports "$shim") >"$WORK/exports.diff" ||
  { cat "$WORK/exports.diff"; fail "the wheel's shim exports other symbols than the Makefile's"; }
readelf -d "$shim" | grep -q 'FLAGS_1.*NODELETE' || fail "the wheel's shim is not -z nodelete"
readelf -d "$shim" | grep -q 'FLAGS_1.*NOW' || fail "the wheel's shim is not -z now"
# the same compiler and linker flags as the Makefile's, each target's set of them: `make -n` of a build of its own
# against the commands Ninja ran for make wheel (the compiled-in PREFIX and the version's quoting left out)
flags() {
  # the wheel's static libcurl is -lcurl, its OpenSSL -lcrypto (libssl.a: what that libcurl needs, the shared one's own)
  sed 's/^: && //' | awk '$1 ~ /(^|\/)(cc|gcc|clang)$/' | tr ' ' '\n' |
    sed -e 's#^/.*/libcurl\.a$#-lcurl#' -e 's#^/.*/libcrypto\.a$#-lcrypto#' -e '/^\/.*\/libssl\.a$/d' | grep '^-' |
    grep -v -x -e '-o' -e '-c' -e '-MD' -e '-MT' -e '-MF' |
    grep -v -e '^-I' -e '^-DHFS3_VERSION=' -e '^-DHFS3_PREFIX=' -e '^-DHFS3_INSTALLED_HELPER=' -e '^-D[a-z0-9]*_EXPORTS$' | sort -u
}
[ -f "$HFS3_ROOT/$BUILD/skbuild/build.ninja" ] || fail "make wheel did not build with Ninja: scripts/deps.sh installs ninja-build"
for t in lib/libhfs3shim.so:hfs3shim bin/hfs3-manifest:hfs3-manifest; do
  env -u CFLAGS make -n -s --no-print-directory -C "$HFS3_ROOT" CC=cc BUILD="$WORK/nb" "$WORK/nb/${t%%:*}" | flags >"$WORK/make.flags"
  ninja -C "$HFS3_ROOT/$BUILD/skbuild" -t commands "${t#*:}" | flags >"$WORK/cmake.flags"
  [ -s "$WORK/make.flags" ] || fail "make -n ${t%%:*}: no compiler command"
  diff "$WORK/make.flags" "$WORK/cmake.flags" >"$WORK/flags.diff" ||
    { cat "$WORK/flags.diff"; fail "CMakeLists.txt builds ${t#*:} with other flags than the Makefile (<: make, >: cmake)"; }
done
# the helper: its libraries from the wheel (hfs3.libs), from the system only what every manylinux system has
helper=$pkg/bin/hfs3-manifest
nm -D --defined-only "$helper" | grep -q ' hfs3_helper_process$' || fail "the wheel's helper does not export hfs3_helper_process"
ldd "$helper" >"$WORK/ldd.out"
grep -q 'not found' "$WORK/ldd.out" && { cat "$WORK/ldd.out"; fail "the wheel's helper misses libraries"; }
# "NAME DIR" of each library the helper loads, DIR resolved (auditwheel's RPATH is $ORIGIN/../../hfs3.libs)
awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' "$WORK/ldd.out" | while read -r so path; do
  echo "$so $(dirname "$(readlink -f "$path")")"; done >"$WORK/libs"
grep -q "^libcjson-[0-9a-f]*\.so[^ ]* $site/hfs3\.libs\$" "$WORK/libs" ||
  { cat "$WORK/libs"; fail "the wheel's helper does not take libcjson from the wheel's hfs3.libs"; }
# libcurl and OpenSSL are inside the helper (static): no shared one of either, the wheel's or the system's
grep -E '^lib(curl|ssl|crypto|gnutls)[-.]' "$WORK/libs" && fail "the wheel's helper loads a shared libcurl or TLS library"
strings -a "$helper" >"$WORK/helper.strings"
grep -q '^OpenSSL 3\.' "$WORK/helper.strings" || fail "the wheel's helper has no OpenSSL inside"
grep -q 'This file was generated by libcurl' "$WORK/helper.strings" || fail "the wheel's helper has no libcurl inside"
system=$(awk -v d="$site/hfs3.libs" '$2 != d {print $1}' "$WORK/libs" | sort -u)
for so in $system; do
  case "$so" in libc.so.6|libm.so.6|libexpat.so.1|libz.so.1|libresolv.so.2|libpthread.so.0|libdl.so.2|librt.so.1) ;;
    *) cat "$WORK/libs"; fail "the wheel's helper takes $so from the system: not in the manylinux policy" ;; esac
done
ok "CMakeLists.txt's flags are the Makefile's; the wheel's shim: libc only, the Makefile shim's $(exports "$shim" | wc -l) symbols, -z now/nodelete; its helper: libcurl and OpenSSL inside, cJSON from hfs3.libs, from the system only $(echo $system)"

# a model, uploaded; loaded by the fresh venv's Python through `hfs3-manifest run` (the wheel's shim preloaded by its
# path, the wheel's helper fetching), and from the local folder in the same process: one start of torch, not two
# the packaging is under test, not the server: not repeated against RGW (t_real_clients loads through both)
export S3_SERVER=node
s3env_start "$WORK"; trap s3env_stop EXIT
unset HF_TOKEN HF_ENDPOINT TRANSFORMERS_CACHE HF_HUB_CACHE HF_HUB_OFFLINE
export HF_HOME=$WORK/hf-home HF_HUB_DISABLE_TELEMETRY=1 HF_HUB_DISABLE_PROGRESS_BARS=1 TRANSFORMERS_VERBOSITY=error \
       TOKENIZERS_PARALLELISM=false PYTHONDONTWRITEBYTECODE=1 HFS3_CACHE_DIR=$WORK/cache
RC="$HFS3_ROOT/tests/e2e/real_clients.py"
python "$RC" gen "$WORK/m" --seed 3 >/dev/null 2>"$WORK/gen.err" || { cat "$WORK/gen.err"; fail "transformers: make the model"; }
rclone copy "$WORK/m" s3test:models/qwen
hfs3-manifest build s3test:models/qwen >/dev/null
HFS3_LOG=debug hfs3-manifest run --mount /models/qwen=s3test:models/qwen -- \
  python "$RC" generate /models/qwen "$WORK/mount.pt" + "$WORK/m" "$WORK/local.pt" >"$WORK/mount.out" 2>&1 ||
  { cat "$WORK/mount.out"; fail "transformers through hfs3-manifest run from the wheel"; }
python "$RC" same "$WORK/local.pt" "$WORK/mount.pt" >"$WORK/same.out" 2>&1 || { cat "$WORK/same.out"; fail "the load through the wheel differs from the local one"; }
grep -q "helper: $helper (HFS3_HELPER)" "$WORK/mount.out" ||
  { grep 'helper:' "$WORK/mount.out"; fail "the shim did not run the wheel's helper ($helper)"; }
ok "hfs3-manifest run -- python (the fresh venv's transformers): from_pretrained(mount), 8 tokens equal to the local load, $(cat "$WORK/same.out"); the helper run: the wheel's"

# over TLS with the wheel's own libcurl and OpenSSL: stunnel4 in front of the server with a certificate from a CA made
# here; an rclone remote with ca_cert fetches the model, one without it is refused for the certificate
if command -v stunnel4 >/dev/null; then
  T=$WORK/tls; mkdir -p "$T"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=hfs3 test CA" -keyout "$T/ca.key" -out "$T/ca.pem" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout "$T/server.key" -out "$T/server.csr" 2>/dev/null
  printf 'subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$T/ext.cnf"
  openssl x509 -req -in "$T/server.csr" -CA "$T/ca.pem" -CAkey "$T/ca.key" -CAcreateserial -days 2 -extfile "$T/ext.cnf" \
    -out "$T/server.pem" 2>/dev/null
  tport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  printf 'foreground = yes\npid =\noutput = %s\n[s3]\naccept = 127.0.0.1:%s\nconnect = 127.0.0.1:%s\ncert = %s\nkey = %s\n' \
    "$T/stunnel.log" "$tport" "$S3_PORT" "$T/server.pem" "$T/server.key" >"$T/stunnel.conf"
  stunnel4 "$T/stunnel.conf" 2>"$T/stunnel.err" &
  tls_pid=$!
  trap 'kill "$tls_pid" 2>/dev/null; s3env_stop' EXIT
  for i in $(seq 1 300); do
    python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$tport" 2>/dev/null && break
    [ "$i" -lt 300 ] || { cat "$T/stunnel.err"; fail "stunnel4 does not listen on $tport"; }
    sleep 0.1
  done
  for name in tls tlsnoca; do
    printf '[%s]\ntype = s3\nprovider = Other\naccess_key_id = S3RVER\nsecret_access_key = S3RVER\nendpoint = https://localhost:%s\nregion = us-east-1\nforce_path_style = true\n' \
      "$name" "$tport" >>"$RCLONE_CONFIG"
    [ "$name" = tlsnoca ] || echo "ca_cert = $T/ca.pem" >>"$RCLONE_CONFIG"
  done
  HFS3_CACHE_DIR=$WORK/cache-tls hfs3-manifest fetch tls:models/qwen >"$WORK/tls.out" 2>&1 || { cat "$WORK/tls.out"; fail "fetch over TLS with the wheel's helper"; }
  if HFS3_CACHE_DIR=$WORK/cache-tls2 hfs3-manifest fetch tlsnoca:models/qwen >"$WORK/tlsno.out" 2>&1; then
    fail "fetch over TLS from an unknown CA succeeded with the wheel's helper"
  fi
  grep -qi certificate "$WORK/tlsno.out" || { cat "$WORK/tlsno.out"; fail "unknown CA: the message does not name the certificate"; }
  ok "the wheel's helper over TLS: fetched with the remote's ca_cert ($(head -c 60 "$WORK/tls.out")...); an unknown CA refused: $(head -1 "$WORK/tlsno.out" | head -c 150)"
else
  skip_part tls "stunnel4 not installed: the wheel's helper over TLS not tried (scripts/deps.sh installs it)"
fi

# what `run` leaves the program: the wheel's shim preloaded by its path, the signals a shell would give it (the
# console script is Python, which ignores SIGPIPE and SIGXFSZ: an ignored signal stays ignored across exec)
hfs3-manifest run --mount /models/qwen=s3test:models/qwen -- sh -c 'echo "$LD_PRELOAD"; grep "^SigIgn" /proc/self/status' >"$WORK/run.out"
[ "$(sed -n 1p "$WORK/run.out")" = "$shim" ] || fail "hfs3-manifest run: LD_PRELOAD '$(sed -n 1p "$WORK/run.out")', want $shim"
ign=$((16#$(sed -n 2p "$WORK/run.out" | awk '{print $2}')))
(( ign & (1 << (13 - 1)) )) && fail "hfs3-manifest run: the program starts with SIGPIPE ignored"
(( ign & (1 << (25 - 1)) )) && fail "hfs3-manifest run: the program starts with SIGXFSZ ignored"
ok "hfs3-manifest run: LD_PRELOAD=$shim; SIGPIPE and SIGXFSZ not ignored in the program (the launcher is Python)"

# LD_PRELOAD set by hand from hfs3.shim_path(), a cache of its own: the shim runs the wheel's helper, found beside
# itself (../bin)
out=$(LD_PRELOAD=$shim HFS3_MOUNTS=/models/q2=s3test:models/qwen HFS3_CACHE_DIR=$WORK/cache2 HFS3_LOG=debug cat /models/q2/config.json 2>"$WORK/pre.err") ||
  { cat "$WORK/pre.err"; fail "cat through LD_PRELOAD=hfs3.shim_path()"; }
[ "$out" = "$(cat "$WORK/m/config.json")" ] || fail "LD_PRELOAD=hfs3.shim_path(): config.json differs from the local one"
grep -q "helper: $pkg/lib/../bin/hfs3-manifest (beside the library)" "$WORK/pre.err" ||
  { grep 'helper:' "$WORK/pre.err"; fail "LD_PRELOAD=hfs3.shim_path(): the shim did not run the wheel's helper beside it"; }
ok "LD_PRELOAD=\$(python -c 'import hfs3; print(hfs3.shim_path())'): config.json as the local one, the helper beside the shim"

# pip uninstall takes every file back (the cache is not the package's)
"$HFS3_PY" -m pip --python "$V/bin/python" uninstall -y -q hfs3 >"$WORK/pip.log" 2>&1 || { cat "$WORK/pip.log"; fail "pip uninstall"; }
left=$(find "$V" -name '*hfs3*')
[ -z "$left" ] || fail "pip uninstall left: $left"
ok "pip uninstall removes what the wheel installed"
