#!/usr/bin/env bash
# Builds a Node.js base image from this host's own files, for machines that
# cannot pull node:20-bookworm-slim (no registry, as in Tether's CI). It stands
# in for the official image in `docker build --build-arg NODE_IMAGE=…`: the
# host's /usr/bin/node with npm, bash, GNU tar and ldd (the agent packages a
# Caddy image with them), busybox-static for sh and the small tools Dockerfile
# RUN lines use, and every shared object `ldd` lists for those binaries and
# for Debian's caddy (libzstd). Nothing is downloaded.
#
#   infra/base/build-local-node-base.sh [TAG]     (default tether-local/node:20)
#
# Needs: docker, /usr/bin/node (20.x), busybox-static (/bin/busybox).
set -euo pipefail
tag="${1:-tether-local/node:20}"
for need in /usr/bin/node /bin/busybox /usr/bin/ldd /bin/bash /bin/tar; do
  [ -e "$need" ] || { echo "build-local-node-base: $need is missing (install nodejs, busybox-static, libc-bin, bash, tar)" >&2; exit 2; }
done
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT

copy() { # copy a host file to the same path in the image, keeping its mode
  mkdir -p "$root$(dirname "$1")"
  cp -L "$1" "$root$1"
}
bins=(/usr/bin/node /bin/bash /bin/tar)
for b in "${bins[@]}"; do copy "$b"; done
copy /usr/bin/ldd
# Shared objects of every binary above, and of Debian's caddy when it is installed.
libs_of=("${bins[@]}")
[ -x /usr/bin/caddy ] && libs_of+=(/usr/bin/caddy)
for b in "${libs_of[@]}"; do
  ldd "$b" | grep -o '/[^ ]*' | while read -r lib; do copy "$lib"; done
done
# All of glibc, as a Debian image has it (pnpm's standalone binary needs librt, for one).
dpkg -L libc6 | grep -E '/lib[^/]*/.*\.so[.0-9]*$' | while read -r lib; do [ -f "$lib" ] && copy "$lib"; done
# npm (the Dockerfiles' build stage uses it to fetch pnpm).
npm_dir="$(dirname "$(dirname "$(readlink -f /usr/bin/npm)")")"
mkdir -p "$root/usr/lib/node_modules"
cp -a "$npm_dir" "$root/usr/lib/node_modules/npm"
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/bin/npx"
# busybox for /bin/sh and the rest of a minimal userland.
copy /bin/busybox
for applet in sh mkdir chown chmod cat echo ln rm cp mv ls env id true false test [ sleep sed grep head tail wc \
  find xargs tr cut dirname basename readlink printf nc which uname touch mktemp sort gzip kill ps; do
  [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
done
mkdir -p "$root/usr/local/bin" "$root/etc" "$root/tmp" "$root/root" "$root/var/tmp" "$root/usr/sbin"
# npm's `#!/usr/bin/env node`.
ln -s ../../bin/busybox "$root/usr/bin/env"
chmod 1777 "$root/tmp" "$root/var/tmp"
printf 'root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
printf '127.0.0.1 localhost\n::1 localhost\n' >"$root/etc/hosts"

tar -C "$root" --numeric-owner --owner=0 --group=0 -c . | docker import \
  --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin' \
  --change 'ENV NODE_VERSION='"$(/usr/bin/node --version | tr -d v)" \
  --change 'CMD ["node"]' \
  --change 'LABEL tether.role=local-node-base' \
  - "$tag" >/dev/null
echo "$tag"
