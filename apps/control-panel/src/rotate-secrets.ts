import { rotateSecrets } from './rotate-command.js';

// Entry of the key rotation command (node dist/rotate-secrets.js); see rotate-command.ts.
process.exitCode = await rotateSecrets(process.env, (line) => console.log(line));
