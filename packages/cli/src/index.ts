export { main, HELP } from './main.js';
export { EXIT, CLI_ERRORS } from './errors.js';
