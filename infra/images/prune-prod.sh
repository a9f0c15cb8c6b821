#!/bin/sh
# Trims a `pnpm deploy --prod` folder ($1) to what runs. @prisma/client lists
# the Prisma CLI as a peer dependency, so the lockfile puts the CLI and its
# tree (Studio, TypeScript, PGlite, effect: ~170 MB) into production; the panel
# never runs it (its client is generated at build time and migrations are
# applied by the panel itself). Prisma's query compilers for other databases go too.
set -eu
dir="$1"
store="$dir/node_modules/.pnpm"
for pattern in 'prisma@*' '@prisma+studio-core@*' '@prisma+dev@*' 'typescript@*' '@electric-sql+pglite*' 'effect@*' \
  '@prisma+engines@*' '@prisma+fetch-engine@*' '@prisma+query-plan-executor@*'; do
  for d in "$store"/$pattern; do [ -e "$d" ] && rm -rf "$d"; done
done
for runtime in "$store"/@prisma+client@*/node_modules/@prisma/client/runtime; do
  [ -d "$runtime" ] || continue
  for db in mysql sqlite sqlserver cockroachdb; do rm -f "$runtime"/*."$db".*; done
done
# Sources, tests and build files of the deployed package itself.
rm -rf "$dir/src" "$dir/test" "$dir/scripts" "$dir"/tsconfig*.json "$dir/vitest.config.ts" "$dir/pnpm-workspace.yaml"
