// `npm run test:fast`: the test files that do no I/O (vitest.shared.mjs finds
// them by content), every package in one run without isolation between files:
// most of a pure file's time is importing the same modules again. The whole
// suite is `npm test`.
import { defineConfig } from 'vitest/config';
import { fastFiles, testedPackages } from './vitest.shared.mjs';

export default defineConfig({
  test: {
    projects: testedPackages()
      .map((p) => ({ ...p, files: fastFiles(p.dir) }))
      .filter((p) => p.files.length > 0)
      .map((p) => ({ test: { name: p.name, root: p.dir, include: p.files, isolate: false, testTimeout: 30_000 } })),
  },
});
