#!/usr/bin/env bash
# Builds Tether's Caddy image from the host's Caddy binary, without a registry:
# the same recipe the agent runs itself (apps/host-agent/src/proxy/caddy-image.ts)
# when TETHER_PROXY=container and TETHER_CADDY_IMAGE is unset. Use this to
# prepare an image by hand and pass its tag as TETHER_CADDY_IMAGE.
#
#   infra/caddy/build-image.sh [TAG] [CADDY_BINARY]
#   default TAG tether/caddy:local, default CADDY_BINARY /usr/bin/caddy (apt-get install caddy)
set -euo pipefail
tag="${1:-tether/caddy:local}"
binary="${2:-/usr/bin/caddy}"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT

install -D -m 0755 "$binary" "$root/usr/bin/caddy"
# Debian's caddy is linked against glibc and libzstd: bring every shared object ldd names.
if ldd "$binary" >/dev/null 2>&1; then
  ldd "$binary" | grep -o '/[^ ]*' | while read -r lib; do install -D -m 0755 "$lib" "$root$lib"; done
fi
# CA bundle for ACME and HTTPS upstreams.
[ -f /etc/ssl/certs/ca-certificates.crt ] && install -D -m 0644 /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
install -D -m 0644 "$here/bootstrap.json" "$root/etc/caddy/bootstrap.json"
printf 'hosts: files dns\n' > "$root/etc/nsswitch.conf"
mkdir -p "$root/tmp" "$root/data" "$root/run/tether-caddy"
chmod 1777 "$root/tmp" "$root/data" "$root/run/tether-caddy"

tar -C "$root" --numeric-owner --owner=0 --group=0 -c . | docker import \
  --change 'ENTRYPOINT ["/usr/bin/caddy"]' \
  --change 'CMD ["run", "--config", "/etc/caddy/bootstrap.json"]' \
  --change 'ENV HOME=/data' \
  --change 'ENV XDG_DATA_HOME=/data' \
  --change 'ENV XDG_CONFIG_HOME=/data/config' \
  --change 'LABEL tether.role=proxy' \
  - "$tag"
echo "built $tag"
