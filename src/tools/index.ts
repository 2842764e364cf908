export * from './constants.js';
export * from './define-tool.js';
export * from './executor.js';
export * from './library.js';
export type * from './types.js';
export { TOOL_OUTCOMES } from './types.js';
