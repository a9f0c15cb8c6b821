// Shared vitest settings for every package. Each package also writes a JSON
// report to .test-results/<package>.json, which scripts/tether.mjs sums into
// the plain "N passed, N failed" line that CI reads.
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const root = path.dirname(fileURLToPath(import.meta.url));

/** @param {string} name */
export function testConfig(name, overrides = {}) {
  return {
    include: ['test/**/*.test.ts', 'src/**/*.test.ts'],
    reporters: ['default', 'json'],
    outputFile: { json: path.join(root, '.test-results', `${name}.json`) },
    testTimeout: 30_000,
    hookTimeout: 120_000,
    ...overrides,
  };
}
