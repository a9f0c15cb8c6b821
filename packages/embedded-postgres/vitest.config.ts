import { defineConfig } from 'vitest/config';
import { testConfig } from '../../vitest.shared.mjs';

export default defineConfig({ test: testConfig('embedded-postgres', {}, { splitFast: import.meta.dirname }) });
