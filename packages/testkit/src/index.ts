export { freeTcpPort as freePort } from '@tether/embedded-postgres';
export * from './system.js';
export * from './wait.js';
export * from './postgres.js';
export * from './docker.js';
export * from './caddy.js';
export * from './blackhole.js';
export * from './process.js';
