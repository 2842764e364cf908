/**
 * The signals that stop the server, and one request to stop delivered
 * several times. `npm start` in a terminal: Ctrl+C sends SIGINT to the whole
 * process group, and npm passes the SIGINT it got on to the server, which
 * already has its own. systemd does the same with SIGTERM when it signals
 * every process of a service (`KillMode=control-group`, its default) and
 * npm is among them; a process manager may follow its SIGTERM with a SIGINT
 * or SIGHUP. Taken for a second request, the repeat stopped the server at
 * once, without a drain.
 */
import { performance } from 'node:perf_hooks';

/** Deliveries of stop signals this close together are one request. */
export const REPEAT_SIGNAL_MS = 1_000;

/**
 * Signals that ask for a drain, then exit 0: SIGTERM (process managers),
 * SIGINT (Ctrl+C) and SIGHUP (the terminal or session went away). Node's
 * default for each is to die at once.
 */
export const STOP_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP'] as const;

/**
 * A filter that says whether a request to stop is new (true) or a repeat
 * (false): a stop signal within {@link REPEAT_SIGNAL_MS} of the first of a
 * run of them, whichever signal it is. Other requests (`primary`) are kept
 * apart by name.
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
    const kind = (STOP_SIGNALS as readonly string[]).includes(signal) ? 'signal' : signal;
    const t = now();
    const at = first.get(kind);
    if (at !== undefined && t - at <= REPEAT_SIGNAL_MS) return false;
    first.set(kind, t);
    return true;
  };
}

/**
 * Calls `stop` with each stop signal this process gets, and keeps SIGUSR1
 * from opening Node's inspector on 127.0.0.1:9229 (its default, which
 * would let any local process run code in the server): it is logged and
 * ignored. Start Node with `--inspect` to debug.
 */
export function onStopSignals(
  stop: (signal: NodeJS.Signals) => void,
  log: { warn: (fields: object, message: string) => void },
): void {
  for (const signal of STOP_SIGNALS) process.on(signal, () => stop(signal));
  process.on('SIGUSR1', () =>
    log.warn({ signal: 'SIGUSR1' }, 'SIGUSR1 ignored: no debugger opens on a signal'),
  );
}
