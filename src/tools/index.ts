export * from './constants.js';
export * from './define-tool.js';
export * from './executor.js';
export * from './library.js';
export type * from './types.js';
export { MAX_PROGRESS_CHARS, TOOL_OUTCOMES } from './types.js';
export * from './background.js';
export * from './zod-json.js';
