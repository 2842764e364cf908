/**
 * The `troupe` command.
 *
 * @example npm run troupe -- check characters
 */
import { parseArgs } from 'node:util';
import { checkCharacters, formatCheckReport } from '../characters/check.js';
import { loadConfig } from '../config/index.js';
import { TroupeError } from '../errors.js';

const USAGE = `Usage: troupe <command>

  check [dir] [--json]   load every character in dir (default: CHARACTERS_DIR or characters)
                         in strict mode; print a table and every error; exit 1 on any error
  help                   show this text`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === 'help' || command === '--help') {
    console.log(USAGE);
    return command === undefined ? 1 : 0;
  }
  if (command !== 'check') {
    console.error(`troupe: unknown command "${command}".\n\n${USAGE}`);
    return 1;
  }
  const { values, positionals } = parseArgs({
    args: rest,
    options: { json: { type: 'boolean' } },
    allowPositionals: true,
  });
  if (positionals.length > 1) {
    console.error(`troupe check: one directory at most, got ${positionals.join(' ')}.`);
    return 1;
  }
  const dir = positionals[0] ?? loadConfig().characters.dir;
  const report = await checkCharacters(dir);
  if (values.json) {
    const errors = report.errors.map((e) => ({
      file: e.file,
      path: e.path,
      kind: e.kind,
      message: e.message,
    }));
    console.log(JSON.stringify({ dir: report.dir, characters: report.rows, errors }, null, 2));
  } else console.log(formatCheckReport(report));
  return report.errors.length > 0 ? 1 : 0;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    console.error(err instanceof TroupeError ? `troupe: ${err.message}` : err);
    process.exitCode = 1;
  },
);
