/**
 * The `troupe` command.
 *
 * @example npm run troupe -- check characters
 */
import { parseArgs } from 'node:util';
import { checkCharacters, formatCheckReport } from '../characters/check.js';
import { loadConfig } from '../config/index.js';
import { TroupeError } from '../errors.js';
import { EXIT_USAGE, HELP_FLAG, flagProblem, helpText, wantsHelp } from './command-line.js';

const USAGE = `Usage: troupe <command> [flags]   (in this repository: npm run troupe -- <command>)

Commands:
  check [dir]   load every character in dir the way the server does, in strict mode;
                print a table and every error; exit 1 on any error or when dir holds
                no characters (default dir: CHARACTERS_DIR, else characters)
  help          show this text

troupe check --help lists its flags.`;

const CHECK_COMMAND = {
  usage: 'troupe check [dir] [flags]',
  summary:
    'Load every character in dir (default: CHARACTERS_DIR, else characters) the way the server\n' +
    'does, in strict mode; print a table and every error; exit 1 on any error or when dir\n' +
    'holds no characters.',
  flags: [{ name: 'json', help: 'print the report as JSON' }, HELP_FLAG],
  helpCommand: 'troupe check --help',
};

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
    console.log(USAGE);
    return command === undefined ? EXIT_USAGE : 0;
  }
  if (command !== 'check') {
    console.error(`troupe: unknown command "${command}".\n\n${USAGE}`);
    return EXIT_USAGE;
  }
  if (wantsHelp(rest)) {
    console.log(helpText(CHECK_COMMAND));
    return 0;
  }
  const problem = flagProblem(rest, CHECK_COMMAND);
  if (problem !== undefined) {
    console.error(`troupe check: ${problem}`);
    return EXIT_USAGE;
  }
  const { values, positionals } = parseArgs({
    args: rest,
    options: { json: { type: 'boolean' } },
    allowPositionals: true,
  });
  if (positionals.length > 1) {
    console.error(`troupe check: one directory at most, got ${positionals.join(' ')}.`);
    return EXIT_USAGE;
  }
  const given = positionals[0];
  const report = await checkCharacters(given ?? loadConfig().characters.dir, {
    dirSetting: given === undefined ? 'CHARACTERS_DIR' : undefined,
  });
  if (values.json) {
    const errors = report.errors.map((e) => ({
      file: e.file,
      path: e.path,
      kind: e.kind,
      message: e.message,
    }));
    console.log(
      JSON.stringify(
        { dir: report.dir, characters: report.rows, errors, warnings: report.warnings },
        null,
        2,
      ),
    );
  } else console.log(formatCheckReport(report));
  return report.errors.length > 0 || report.rows.length === 0 ? 1 : 0;
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
