#!/usr/bin/env node
// `npm start`: the control panel on an embedded PostgreSQL kept in ./.tether.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const env = { ...process.env, TETHER_DATA_DIR: process.env.TETHER_DATA_DIR ?? path.join(root, '.tether') };
const panel = spawn(process.execPath, [path.join(root, 'apps', 'control-panel', 'dist', 'main.js')], { cwd: root, stdio: 'inherit', env });
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => panel.kill(signal));
panel.on('exit', (code) => process.exit(code ?? 0));
