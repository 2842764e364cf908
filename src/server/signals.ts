/**
 * One signal delivered twice is one request to stop. `npm start` in a
 * terminal: Ctrl+C sends SIGINT to the whole process group, and npm passes
 * the SIGINT it got on to the server, which already has its own. systemd
 * does the same with SIGTERM when it signals every process of a service
 * (`KillMode=control-group`, its default) and npm is among them. Taken for a
 * second signal, the repeat stopped the server at once, without a drain.
 */
import { performance } from 'node:perf_hooks';

/** Deliveries of one signal this close together are one signal. */
export const REPEAT_SIGNAL_MS = 1_000;

/**
 * A filter that says whether a signal is a new request (true) or a repeat
 * of the last one of its kind within {@link REPEAT_SIGNAL_MS} (false).
 *
 * @example
 * const fresh = signalRepeats();
 * process.on('SIGINT', () => fresh('SIGINT') && stop('SIGINT'));
 */
export function signalRepeats(
  now: () => number = () => performance.now(),
): (signal: string) => boolean {
  const first = new Map<string, number>();
  return (signal) => {
    const t = now();
    const at = first.get(signal);
    if (at !== undefined && t - at <= REPEAT_SIGNAL_MS) return false;
    first.set(signal, t);
    return true;
  };
}
