import { defineConfig } from 'vitest/config';
import { testConfig } from '../../vitest.shared.mjs';

// Files run one at a time: they build images, start compose stacks and run
// panels, and in parallel they would compete for the same two cores. Two must
// never overlap anyway: first-hour and local-fleet each end with `npm run
// reset`, which removes every local node's containers on the engine (node
// "local" and local-1 … local-9); beside each other, 8 of 20 runs failed.
export default defineConfig({ test: testConfig('infra-tests', { fileParallelism: false }, { splitFast: import.meta.dirname }) });
