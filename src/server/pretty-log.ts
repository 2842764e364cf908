/**
 * Human log lines for a terminal: each JSON line pino writes becomes
 * `15:30:12 INFO  server listening  url=http://127.0.0.1:8080 characters=5`.
 * The JSON stays the format for pipes and production (see createLogger).
 */

/** Where the pretty lines go: a stream's `write`. */
export interface LineSink {
  write(text: string): unknown;
}

/** Options of {@link createPrettyStream}. */
export interface PrettyLogOptions {
  /** Colour the level and the field names. @defaultValue false */
  color?: boolean;
}

const LEVELS: Record<number, [label: string, color: string]> = {
  10: ['TRACE', '90'],
  20: ['DEBUG', '36'],
  30: ['INFO ', '32'],
  40: ['WARN ', '33'],
  50: ['ERROR', '31'],
  60: ['FATAL', '35'],
};

/** Fields every line carries, or that the line's layout already shows. */
const HIDDEN = new Set(['level', 'time', 'msg', 'service', 'pid', 'hostname', 'v']);

/**
 * A destination for pino that writes human lines to `sink`. Lines that are
 * not JSON pass through unchanged, so nothing written is lost.
 *
 * @example createLogger(config.log, createPrettyStream(process.stdout, { color: true }))
 */
export function createPrettyStream(sink: LineSink, options: PrettyLogOptions = {}): LineSink {
  let pending = '';
  return {
    write(chunk: string) {
      pending += chunk;
      let end = pending.indexOf('\n');
      while (end >= 0) {
        const line = pending.slice(0, end);
        pending = pending.slice(end + 1);
        if (line !== '') sink.write(`${prettyLine(line, options)}\n`);
        end = pending.indexOf('\n');
      }
      return true;
    },
  };
}

/** One JSON log line in words; a line that is not a JSON object comes back as it is. */
export function prettyLine(line: string, options: PrettyLogOptions = {}): string {
  let entry: unknown;
  try {
    entry = JSON.parse(line);
  } catch {
    return line;
  }
  if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) return line;
  const e = entry as Record<string, unknown>;
  const paint = (code: string, text: string) =>
    options.color ? `\x1b[${code}m${text}\x1b[0m` : text;
  const [label, color] = LEVELS[typeof e.level === 'number' ? e.level : 30] ?? [
    String(e.level),
    '0',
  ];
  const time = typeof e.time === 'number' ? new Date(e.time).toISOString().slice(11, 19) : '';
  const fields: string[] = [];
  let stack: string | undefined;
  for (const [key, value] of Object.entries(e)) {
    if (HIDDEN.has(key) || value === undefined) continue;
    if (key === 'err' && typeof value === 'object' && value !== null) {
      const err = value as { type?: string; message?: string; stack?: string };
      fields.push(
        `${paint('2', 'err=')}${fieldText(`${err.type ?? 'Error'}: ${err.message ?? ''}`)}`,
      );
      if (typeof err.stack === 'string' && (e.level as number) >= 50) stack = err.stack;
      continue;
    }
    fields.push(`${paint('2', `${key}=`)}${fieldText(value)}`);
  }
  const message = typeof e.msg === 'string' ? e.msg : '';
  const text = [time, paint(color, label), message, ...(fields.length ? [fields.join(' ')] : [])]
    .filter((part) => part !== '')
    .join(' ');
  return stack ? `${text}\n${indent(stack)}` : text;
}

function fieldText(value: unknown): string {
  if (typeof value !== 'string') return JSON.stringify(value);
  return /[\s"=]/.test(value) || value === '' ? JSON.stringify(value) : value;
}

function indent(stack: string): string {
  return stack
    .split('\n')
    .map((l) => `    ${l.trim()}`)
    .join('\n');
}
