#!/usr/bin/env bash
# Builds a PostgreSQL image from this host's Debian `postgresql` package, for
# machines that cannot pull postgres:17 (no registry, as in Tether's CI). It
# stands in for the official image in infra/compose/docker-compose.yml
# (TETHER_POSTGRES_IMAGE=<tag>) and honours the part of its interface the
# compose file uses: POSTGRES_USER, POSTGRES_PASSWORD and POSTGRES_DB on first
# start, data in /var/lib/postgresql/data, pg_isready for the healthcheck,
# pg_dump/psql for backups. The server binaries, the libraries `ldd` lists,
# busybox-static for the entrypoint's shell. Nothing is downloaded.
#
#   infra/postgres/build-local-image.sh [TAG]     (default tether-local/postgres:15)
#
# Needs: docker, Debian's postgresql (apt-get install postgresql), busybox-static.
set -euo pipefail
tag="${1:-tether-local/postgres:15}"
here="$(cd "$(dirname "$0")" && pwd)"
pgbin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
[ -n "$pgbin" ] && [ -x "$pgbin/postgres" ] || { echo "build-local-image: no PostgreSQL under /usr/lib/postgresql (apt-get install postgresql)" >&2; exit 2; }
[ -x /bin/busybox ] || { echo "build-local-image: /bin/busybox is missing (apt-get install busybox-static)" >&2; exit 2; }
pgroot="$(dirname "$pgbin")"
version="$(basename "$pgroot")"
share="/usr/share/postgresql/$version"
root="$(mktemp -d)"
trap 'rm -rf "$root" "$root.tar" "$root.log"' EXIT

copy() { # a host file at the same path in the image, symlinks resolved
  mkdir -p "$root$(dirname "$1")"
  cp -L "$1" "$root$1"
}
bins=(postgres initdb pg_ctl pg_isready psql pg_dump pg_dumpall pg_restore)
for b in "${bins[@]}"; do copy "$pgbin/$b"; done
# Server modules initdb and the server load (PL/pgSQL, text search, encodings, replication).
for m in plpgsql dict_snowball libpqwalreceiver pgoutput; do copy "$pgroot/lib/$m.so"; done
for m in "$pgroot"/lib/*_and_*.so; do copy "$m"; done
for f in "${bins[@]/#/$pgbin/}" "$pgroot"/lib/*.so; do
  [ -e "$root$f" ] || continue
  { ldd "$f" 2>/dev/null || true; } | { grep -o "/[^ ]*" || true; } | while read -r lib; do [ -e "$root$lib" ] || copy "$lib"; done
done
mkdir -p "$root$share"
cp -a "$share/." "$root$share/"
rm -rf "$root$share/man" "$root$share/contrib"
# Debian's build reads zone data from the system (--with-system-tzdata).
mkdir -p "$root/usr/share"
cp -a /usr/share/zoneinfo "$root/usr/share/zoneinfo"
copy /bin/busybox
mkdir -p "$root/usr/local/bin"
for applet in sh cat mkdir chmod rm ls echo test [ env id sleep printf grep head tr; do ln -s /bin/busybox "$root/bin/$applet"; done
for b in "${bins[@]}"; do ln -s "$pgbin/$b" "$root/usr/local/bin/$b"; done
install -m 0755 "$here/entrypoint.sh" "$root/usr/local/bin/docker-entrypoint.sh"
mkdir -p "$root/etc" "$root/tmp" "$root/var/run/postgresql" "$root/var/lib/postgresql/data"
chmod 1777 "$root/tmp"
printf 'root:x:0:0:root:/root:/bin/sh\npostgres:x:999:999:PostgreSQL:/var/lib/postgresql:/bin/sh\n' >"$root/etc/passwd"
printf 'root:x:0:\npostgres:x:999:\n' >"$root/etc/group"
printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
# A named volume takes the owner and mode of the folder it mounts over: the
# server runs as postgres from the start, no root step.
chmod 0700 "$root/var/lib/postgresql/data"
chmod 0775 "$root/var/run/postgresql"

# tar cannot give one folder another owner in the same run: repack with the data folders owned by 999.
tar -C "$root" --numeric-owner --owner=0 --group=0 --exclude=./var/lib/postgresql --exclude=./var/run/postgresql -c . >"$root.tar"
tar -C "$root" --numeric-owner --owner=999 --group=999 -r -f "$root.tar" ./var/lib/postgresql ./var/run/postgresql
docker import \
  --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
  --change 'ENV PGDATA=/var/lib/postgresql/data' \
  --change 'USER postgres' \
  --change 'VOLUME /var/lib/postgresql/data' \
  --change 'EXPOSE 5432' \
  --change 'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]' \
  --change 'CMD ["postgres"]' \
  --change "LABEL tether.role=local-postgres org.opencontainers.image.version=$version" \
  - "$tag-rootfs" <"$root.tar" >/dev/null
rm -f "$root.tar"
# `docker import` cannot set STOPSIGNAL: one local build step adds it. SIGINT
# is PostgreSQL's fast shutdown (SIGTERM would wait for every client to leave).
printf 'FROM %s\nSTOPSIGNAL SIGINT\n' "$tag-rootfs" | DOCKER_BUILDKIT=0 docker build -q -t "$tag" - >/dev/null 2>"$root.log" \
  || { cat "$root.log" >&2; exit 1; }
docker rmi "$tag-rootfs" >/dev/null
echo "$tag"
