export * from './loop.js';
export * from './backoff.js';
export * from './env.js';
export * from './run-main.js';
