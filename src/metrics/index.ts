/**
 * Every Prometheus metric Troupe exports, on one prom-client registry per
 * server. Names are `troupe_<area>_<thing>_<unit>`; labels stay low-cardinality.
 */
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { CHARACTER_ERROR_KINDS } from '../errors.js';
import type { CharacterMetrics } from '../characters/registry.js';

/** Options of {@link createMetrics}. */
export interface MetricsOptions {
  /** Also export Node's process metrics (CPU, memory, event loop lag). @defaultValue true */
  processMetrics?: boolean;
}

/** The registry and every metric on it. */
export interface Metrics {
  readonly registry: Registry;
  readonly characters: CharacterMetrics;
}

/**
 * Creates a registry with every Troupe metric.
 *
 * @example
 * const metrics = createMetrics();
 * await loadCharacters({ dir: 'characters', metrics: metrics.characters });
 * res.end(await metrics.registry.metrics());
 */
export function createMetrics(options: MetricsOptions = {}): Metrics {
  const registry = new Registry();
  if (options.processMetrics ?? true)
    collectDefaultMetrics({ register: registry, prefix: 'troupe_' });
  const loadErrors = new Counter({
    name: 'troupe_character_load_errors_total',
    help: 'Character files rejected at load or reload, by error type.',
    labelNames: ['type'] as const,
    registers: [registry],
  });
  for (const type of CHARACTER_ERROR_KINDS) loadErrors.inc({ type }, 0);
  const reloads = new Counter({
    name: 'troupe_character_reloads_total',
    help: 'Hot reloads of characters, by outcome (ok, failed: old version kept, removed).',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  const loaded = new Gauge({
    name: 'troupe_characters_loaded',
    help: 'Characters currently available to new sessions.',
    registers: [registry],
  });
  return { registry, characters: { loadErrors, reloads, loaded } };
}
