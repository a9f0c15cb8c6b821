import { defineConfig } from 'vitest/config';
import { testConfig } from '../../vitest.shared.mjs';

// Files run one at a time: they build images, start compose stacks and run
// panels, and in parallel they would compete for the same two cores.
export default defineConfig({ test: testConfig('infra-tests', { fileParallelism: false }, { splitFast: import.meta.dirname }) });
