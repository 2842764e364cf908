/** The wire contract: client event schemas, server event encoding, dialects. */
export * from './client-events.js';
export { MAX_TOOL_SCHEMA_BYTES, MAX_TOOL_SCHEMA_DEPTH, jsonDepth } from './field-schemas.js';
export * from './server-events.js';
export * from './unmute.js';
export * from './ga-values.js';
