/** Test kit: the LLM simulator and in-memory helpers. Never used on production paths. */
export * from './memory-logger.js';
export * from './simulator/index.js';
export * from './character-kit.js';
export * from './scripts/demo.js';
export * from './scripted-stt.js';
export * from './fake-stt.js';
export * from './fake-tts.js';
export * from './flite-speech.js';
