/** Every default that changes behaviour, in one place. */
export const DEFAULT_CHARACTERS_DIR = 'characters';
/** Strict loading (any bad character stops the server) is for CI and `troupe check`. */
export const DEFAULT_CHARACTERS_STRICT = false;
