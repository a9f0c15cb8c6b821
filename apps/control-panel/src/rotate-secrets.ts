import { rotateSecrets } from './secrets/rotate-command.js';

// Entry of the key rotation command (node dist/rotate-secrets.js); see secrets/rotate-command.ts.
process.exitCode = await rotateSecrets(process.env, (line) => console.log(line));
