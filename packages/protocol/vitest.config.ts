import { defineConfig } from 'vitest/config';
import { testConfig } from '../../vitest.shared.mjs';

export default defineConfig({ test: testConfig('protocol', {}, { splitFast: import.meta.dirname }) });
