#!/usr/bin/env bash
# Builds the static proxy's answerer image (knotd) from the host's Debian knot
# package, without a registry: the layout the agent makes itself
# (apps/host-agent/src/proxy/knot-image.ts) when TETHER_PROXY=container and
# TETHER_ANSWERER_IMAGE is unset. The agent image is built from it
# (infra/host-agent/Dockerfile, ANSWERER_IMAGE, default tether/answerer:local):
# it carries this tree and builds its answerer from it (docs/install.md, step 1).
#
#   infra/answerer/build-image.sh [TAG]
#   default TAG tether/answerer:local; needs /usr/sbin/knotd and /usr/sbin/knotc (apt-get install knot)
set -euo pipefail
tag="${1:-tether/answerer:local}"
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT

for binary in /usr/sbin/knotd /usr/sbin/knotc; do
  [ -x "$binary" ] || { echo "no $binary: install Debian's knot package (apt-get install knot)" >&2; exit 1; }
  install -D -m 0755 "$binary" "$root$binary"
  # Debian's knot is dynamically linked: bring every shared object ldd names.
  ldd "$binary" | grep -o '/[^ ]*' | while read -r lib; do install -D -m 0755 "$lib" "$root$lib"; done
done
install -d "$root/etc"
printf 'hosts: files dns\n' > "$root/etc/nsswitch.conf"
chmod 0644 "$root/etc/nsswitch.conf"
# knotd keeps its pid file and control socket in /run/knot (not shared with the host).
mkdir -p "$root/tmp" "$root/run/knot"
chmod 1777 "$root/tmp" "$root/run/knot"

tar -C "$root" --numeric-owner --owner=0 --group=0 -c . | docker import \
  --change 'ENTRYPOINT ["/usr/sbin/knotd"]' \
  --change 'LABEL tether.role=answerer' \
  - "$tag"
echo "built $tag"
