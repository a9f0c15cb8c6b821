import { checkHealthFile } from './health-file.js';
import { loadStateDir } from './config.js';

// The container HEALTHCHECK: `node dist/healthcheck.js`. Exit 0 when the
// agent rewrote its health file recently, 1 otherwise.

const result = await checkHealthFile(loadStateDir(process.env));
console.log(result.reason);
process.exit(result.ok ? 0 : 1);
