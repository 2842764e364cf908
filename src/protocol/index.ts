/** The wire contract: client event schemas, server event encoding, dialects. */
export * from './client-events.js';
export * from './server-events.js';
export * from './unmute.js';
export * from './ga-values.js';
