import { defineConfig } from 'vitest/config';
import { testConfig } from '../../vitest.shared.mjs';

// Two files at a time, as the panel's: most files wait on Docker, Caddy and their own deadlines rather than compute.
export default defineConfig({ test: testConfig('host-agent', { maxWorkers: 2 }, { splitFast: import.meta.dirname }) });
