// The CLI as one file, dist/tether.mjs: its code and its dependencies (undici,
// @tether/common) bundled by esbuild, so the package has no dependencies and
// its `npm pack` tarball installs on a machine without the workspace (and
// without a registry: `npm install -g --offline ./tether-cli-<version>.tgz`).
// Runs in `build` and before `npm pack` (prepack).
import { build } from 'esbuild';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const dir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

await build({
  entryPoints: [path.join(dir, 'src', 'index.ts')],
  outfile: path.join(dir, 'dist', 'tether.mjs'),
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  // undici is CommonJS: its require() of Node's modules needs a require in an ES module.
  banner: { js: "import { createRequire as __tetherRequire } from 'node:module';\nconst require = __tetherRequire(import.meta.url);" },
  legalComments: 'linked',
  logLevel: 'warning',
});
