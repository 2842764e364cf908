/**
 * Module resolve hook (registered with node:module `register`) behind hot
 * reload. Node caches every ES module for the life of the process, so a
 * changed character is imported again under a new URL query. This hook gives
 * the files that character imports from inside the characters directory
 * (helpers, tool libraries) the same query, so they are fresh too; anything
 * outside it (Troupe itself, node_modules) stays shared.
 */
const FRESH = 'troupe-fresh';
const ROOT = 'troupe-root';

export async function resolve(specifier, context, nextResolve) {
  const result = await nextResolve(specifier, context);
  const parent = context.parentURL;
  if (parent === undefined || !parent.includes(`${FRESH}=`) || !result.url.startsWith('file:')) {
    return result;
  }
  const from = new URL(parent);
  const root = from.searchParams.get(ROOT);
  const generation = from.searchParams.get(FRESH);
  if (
    !root ||
    !generation ||
    !result.url.startsWith(root) ||
    result.url.includes('/node_modules/')
  ) {
    return result;
  }
  const url = new URL(result.url);
  url.searchParams.set(FRESH, generation);
  url.searchParams.set(ROOT, root);
  return { ...result, url: url.href };
}
