/**
 * Module resolve hook (registered with node:module `register`) behind hot
 * reload, and behind characters that live outside the project.
 *
 * Characters anywhere: `zod` and `troupe` (and `troupe/testing`) resolve to
 * Troupe's own copies when the importing folder has none of its own, so a
 * characters folder needs no `npm install`.
 *
 * Hot reload: Node caches every ES module for the life of the process, so a
 * changed character is imported again under a new URL query. This hook gives
 * the files that character imports from inside the characters directory
 * (helpers, tool libraries) the same query, so they are fresh too; anything
 * outside it (Troupe itself, node_modules) stays shared.
 */
const FRESH = 'troupe-fresh';
const ROOT = 'troupe-root';

/** Troupe's own package.json: `zod` and `troupe` resolve from here as a last resort. */
const TROUPE_PACKAGE = new URL('../../package.json', import.meta.url).href;
/** The packages a character imports from Troupe itself. */
const SHARED = /^(?:zod|troupe)(?:\/.*)?$/;

async function resolveShared(specifier, context, nextResolve) {
  try {
    return await nextResolve(specifier, context);
  } catch (err) {
    if (err?.code !== 'ERR_MODULE_NOT_FOUND' || !SHARED.test(specifier)) throw err;
    if (context.parentURL === TROUPE_PACKAGE) throw err;
    return nextResolve(specifier, { ...context, parentURL: TROUPE_PACKAGE });
  }
}

export async function resolve(specifier, context, nextResolve) {
  const result = await resolveShared(specifier, context, nextResolve);
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
