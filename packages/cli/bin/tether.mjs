#!/usr/bin/env node
// The `tether` binary: the bundled CLI (dist/tether.mjs, made by `npm run build` or `npm pack`).
import { main } from '../dist/tether.mjs';

process.exitCode = await main(process.argv.slice(2));
