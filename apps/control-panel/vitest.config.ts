import { defineConfig } from 'vitest/config';
import { testConfig } from '../../vitest.shared.mjs';

// Two files at a time (vitest's default is one on a 2-core machine): most of these files wait on Docker, Caddy,
// PostgreSQL and their own deadlines rather than compute. Measured on 2 cores: 649 s one at a time, 366-414 s two.
export default defineConfig({ test: testConfig('control-panel', { maxWorkers: 2 }, { splitFast: import.meta.dirname }) });
