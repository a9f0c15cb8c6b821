#!/usr/bin/env node
// The `tether` binary: the built CLI (run `pnpm exec turbo run build` first).
import { main } from '../dist/main.js';

process.exitCode = await main(process.argv.slice(2));
