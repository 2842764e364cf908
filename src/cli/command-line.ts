/**
 * What every command does with its command line: `--help` lists the flags,
 * and an unknown flag is answered with the flags there are (and the nearest
 * one, when it looks like a typo) instead of Node's parser message.
 */
import { closest } from '../characters/closest.js';

/** Exit code for bad usage (unknown flag, missing value). */
export const EXIT_USAGE = 2;

/** A flag a command takes. */
export interface FlagInfo {
  /** Without dashes: `port`. */
  name: string;
  /** One letter: `-h`. */
  short?: string;
  /** What the value is called in the help (`N`, `URL`); absent for a switch. */
  value?: string;
  help: string;
}

/** A command: how to run it, what it does, its flags. */
export interface CommandInfo {
  /** `npm start -- [flags]` */
  usage: string;
  /** One or two lines on what it does. */
  summary: string;
  flags: readonly FlagInfo[];
  /** Text after the flags: settings, examples. */
  more?: string;
  /** How to ask for the help, for the unknown-flag message: `npm start -- --help`. */
  helpCommand: string;
}

/** The flag for `--help`, for commands' flag lists. */
export const HELP_FLAG: FlagInfo = { name: 'help', short: 'h', help: 'show this text' };

/** The `--help` text. */
export function helpText(command: CommandInfo): string {
  const left = command.flags.map(
    (f) => `${f.short ? `-${f.short}, ` : '    '}--${f.name}${f.value ? ` ${f.value}` : ''}`,
  );
  const width = Math.max(...left.map((l) => l.length)) + 2;
  const lines = command.flags.map((f, i) => `  ${left[i]!.padEnd(width)}${f.help}`);
  return [
    `Usage: ${command.usage}`,
    '',
    command.summary,
    '',
    'Flags:',
    ...lines,
    ...(command.more ? ['', command.more] : []),
  ].join('\n');
}

/** Whether the command line asks for help (`--help` or `-h` before any `--`). */
export function wantsHelp(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  const flags = end < 0 ? argv : argv.slice(0, end);
  return flags.includes('--help') || flags.includes('-h');
}

/**
 * What is wrong with the flags of a command line: an unknown flag (with the
 * nearest known one) or a value flag without its value; `undefined` when
 * every flag is known.
 *
 * @example flagProblem(['--prot', '9000'], START_COMMAND) // 'unknown flag --prot; did you mean --port? …'
 */
export function flagProblem(argv: readonly string[], command: CommandInfo): string | undefined {
  const byName = new Map(command.flags.map((f) => [f.name, f]));
  const byShort = new Map(command.flags.filter((f) => f.short).map((f) => [f.short!, f]));
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') break;
    if (!arg.startsWith('-') || arg === '-') continue;
    const long = arg.startsWith('--');
    const [name, inline] = long ? splitOnce(arg.slice(2), '=') : [arg.slice(1), undefined];
    const flag = long ? byName.get(name) : byShort.get(name);
    if (!flag) {
      const names = command.flags.map((f) => f.name);
      const guess = closest(name, names);
      return (
        `unknown flag ${long ? `--${name}` : arg}${guess ? `; did you mean --${guess}?` : ''}\n` +
        `Flags: ${names.map((n) => `--${n}`).join(', ')} (${command.helpCommand} says what each does).`
      );
    }
    if (flag.value === undefined) {
      if (inline !== undefined) return `--${flag.name} takes no value (got "${inline}").`;
      continue;
    }
    if (inline !== undefined) continue;
    const next = argv[i + 1];
    if (next === undefined || (next.startsWith('--') && next.length > 2)) {
      return `--${flag.name} needs a value: --${flag.name} ${flag.value}.`;
    }
    i++;
  }
  return undefined;
}

/**
 * Handles `--help` and bad flags for a CLI entry point: prints the help and
 * exits 0, or prints the problem and exits {@link EXIT_USAGE}. Returns when
 * the command line is fine.
 */
export function readCommandLine(argv: readonly string[], command: CommandInfo, name: string): void {
  if (wantsHelp(argv)) {
    process.stdout.write(`${helpText(command)}\n`);
    process.exit(0);
  }
  const problem = flagProblem(argv, command);
  if (problem !== undefined) {
    process.stderr.write(`${name}: ${problem}\n`);
    process.exit(EXIT_USAGE);
  }
}

function splitOnce(text: string, sep: string): [string, string | undefined] {
  const at = text.indexOf(sep);
  return at < 0 ? [text, undefined] : [text.slice(0, at), text.slice(at + 1)];
}
