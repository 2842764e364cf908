/** `import()` through Node's own loader, untouched by test-runner transforms. */
export function nativeImport(url: string): Promise<Record<string, unknown>>;
