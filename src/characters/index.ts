export * from './constants.js';
export * from './conversation.js';
export * from './define-character.js';
export { loadCharacterFile, fromNamespace, characterId } from './load.js';
export type { LoadResult, LoadFileOptions } from './load.js';
export { loadCharacters, isCharacterFileName } from './registry.js';
export type {
  CharacterChange,
  CharacterMetrics,
  CharacterRegistry,
  CharacterRegistryOptions,
} from './registry.js';
export type * from './types.js';
