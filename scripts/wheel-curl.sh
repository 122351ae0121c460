#!/usr/bin/env bash
# wheel-curl.sh DIR - the libcurl that goes into the wheel (`make wheel`), built static into DIR/prefix with only
# what hfs3 uses: HTTP and HTTPS through OpenSSL, proxies from the usual variables, the threaded resolver with
# IPv6 and CURLOPT_RESOLVE. Debian's libcurl4 also speaks LDAP, RTMP, SSH, HTTP/2, IDN, Kerberos and more:
# bundled by auditwheel, those brought 28 libraries (GnuTLS beside OpenSSL among them) and 17.5 MB into the wheel.
# The source is Debian's own (the version of the installed libcurl4-openssl-dev, its security patches applied),
# fetched with apt-get source through a private copy of the machine's apt sources with deb-src in place of deb:
# the machine's apt configuration is left as it is. Built once; a second run with the same version does nothing.
set -euo pipefail
dir=${1:?usage: wheel-curl.sh DIR}
mkdir -p "$dir" && dir=$(cd "$dir" && pwd)
ver=$(dpkg-query -W -f='${source:Version}' libcurl4-openssl-dev 2>/dev/null) ||
  { echo "wheel-curl: libcurl4-openssl-dev is not installed (scripts/deps.sh installs it)" >&2; exit 1; }
# what configure is given; a change of it or of the version builds again
opts=(--disable-shared --enable-static --with-pic --disable-manual
      --with-openssl --without-gnutls --without-nss --without-wolfssl --without-mbedtls --without-rustls
      --disable-ldap --disable-ldaps --without-librtmp --without-libssh2 --without-libssh --without-nghttp2
      --without-nghttp3 --without-ngtcp2 --without-libidn2 --without-libpsl --without-brotli --without-zstd
      --without-zlib --without-gssapi --disable-ftp --disable-file --disable-dict --disable-telnet --disable-tftp
      --disable-pop3 --disable-imap --disable-smtp --disable-smb --disable-gopher --disable-mqtt --disable-rtsp
      --enable-threaded-resolver --enable-ipv6 --enable-proxy --enable-symbol-hiding
      --with-ca-bundle=/etc/ssl/certs/ca-certificates.crt --with-ca-path=/etc/ssl/certs)
stamp="$ver ${opts[*]}"
if [ -f "$dir/prefix/lib/libcurl.a" ] && [ "$(cat "$dir/stamp" 2>/dev/null)" = "$stamp" ]; then exit 0; fi
rm -rf "$dir/apt" "$dir/dl" "$dir/src" "$dir/prefix" "$dir/stamp"
echo "wheel-curl: building libcurl $ver for the wheel (HTTP and HTTPS through OpenSSL only; a minute or two, once)"

# apt's sources as deb-src, for this release's suites only (other repositories may have no sources)
. /etc/os-release
mkdir -p "$dir/apt/parts" "$dir/apt/lists/partial" "$dir/apt/cache/archives/partial" "$dir/dl"
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  awk -v RS= -v ORS='\n\n' -v rel="$VERSION_CODENAME" \
    '/(^|\n)Types:[^\n]*(^| )deb( |\n|$)/ && $0 ~ ("(^|\n)Suites:[^\n]*[ ]" rel "([ \n-]|$)") {
       sub(/(^|\n)Types:[^\n]*/, "\nTypes: deb-src"); sub(/^\n/, ""); print }' "$f" >>"$dir/apt/parts/src.sources"
done
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  [ -f "$f" ] || continue
  awk -v rel="$VERSION_CODENAME" '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ ("^" rel "(-|$)")) { $1 = "deb-src"; print; next } }' \
    "$f" >>"$dir/apt/parts/src.list"
done
[ -s "$dir/apt/parts/src.sources" ] || rm -f "$dir/apt/parts/src.sources"
[ -s "$dir/apt/parts/src.list" ] || rm -f "$dir/apt/parts/src.list"
apt_opts=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$dir/apt/parts"
          -o Dir::State::Lists="$dir/apt/lists" -o Dir::Cache="$dir/apt/cache" -o APT::Sandbox::User=root)
apt-get -qq "${apt_opts[@]}" update >"$dir/apt.log" 2>&1 || { cat "$dir/apt.log" >&2; echo "wheel-curl: apt-get update of the deb-src lists failed" >&2; exit 1; }
(cd "$dir/dl" && { apt-get -qq "${apt_opts[@]}" source --download-only "curl=$ver" >>"$dir/apt.log" 2>&1 ||
                   apt-get -qq "${apt_opts[@]}" source --download-only curl >>"$dir/apt.log" 2>&1; }) ||
  { cat "$dir/apt.log" >&2; echo "wheel-curl: apt-get source curl failed" >&2; exit 1; }
dsc=("$dir"/dl/curl_*.dsc)
dpkg-source -q -x "${dsc[0]}" "$dir/src" >>"$dir/apt.log" 2>&1 || { cat "$dir/apt.log" >&2; echo "wheel-curl: dpkg-source -x failed" >&2; exit 1; }

cd "$dir/src"
# Debian's patches leave configure to autoreconf: the release tarball's configure is kept when it is there
[ -x configure ] || autoreconf -fi >>"$dir/build.log" 2>&1
CFLAGS="-O2 -g -fstack-protector-strong" ./configure --prefix="$dir/prefix" "${opts[@]}" >>"$dir/build.log" 2>&1 ||
  { tail -40 "$dir/build.log" >&2; echo "wheel-curl: configure failed (log: $dir/build.log)" >&2; exit 1; }
jobs=$(nproc 2>/dev/null || echo 2)
{ make -j"$jobs" -C lib && make -C lib install && make -C include install && make install-pkgconfigDATA; } >>"$dir/build.log" 2>&1 ||
  { tail -40 "$dir/build.log" >&2; echo "wheel-curl: make failed (log: $dir/build.log)" >&2; exit 1; }
echo "$stamp" >"$dir/stamp"
echo "wheel-curl: $dir/prefix/lib/libcurl.a (libcurl $ver)"
