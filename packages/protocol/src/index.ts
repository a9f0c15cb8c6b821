export * from './constants.js';
export * from './errors.js';
export * from './messages.js';
export * from './codec.js';
export * from './ids.js';
export * from './routing.js';
export * from './retry-hint.js';
export * from './examples.js';
