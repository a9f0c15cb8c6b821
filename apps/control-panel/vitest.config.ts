import { defineConfig } from 'vitest/config';
import { testConfig } from '../../vitest.shared.mjs';

// Two files at a time (vitest's default is one on a 2-core machine): most of these files wait on Docker, Caddy,
// PostgreSQL and their own deadlines rather than compute. Measured on 2 cores: 649 s one at a time, 366-414 s two.
// Without isolation for the I/O files too: each worker imports the panel's modules once instead of once per file
// (import time 94 s → 13 s; the package's run 503 s → 423 s, 113 files, 1,250 tests, on 2026-12-05). The panel
// binds nothing at import, so a file cannot see another's state through a module.
export default defineConfig({ test: testConfig('control-panel', { maxWorkers: 2 }, { splitFast: import.meta.dirname, ioIsolate: false }) });
