export * from './assembler.js';
export type * from './chunk.js';
export * from './client.js';
export * from './constants.js';
export * from './prompt-tools.js';
export * from './turn-runner.js';
