/**
 * The voice suites use real speech: Debian's flite makes it, pocketsphinx
 * hears it. On a fresh machine `npm test` installs them when it runs as root
 * (as CI does); otherwise it stops at once and names the command to run.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const MODEL_DIR = '/usr/share/pocketsphinx/model/en-us/en-us';

function has(command: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

function hasLibrary(name: string): boolean {
  try {
    return execFileSync('ldconfig', ['-p'], { encoding: 'utf8' }).includes(name);
  } catch {
    return false;
  }
}

function missingPackages(): string[] {
  const missing: string[] = [];
  if (!has('flite')) missing.push('flite');
  if (!hasLibrary('libpocketsphinx.so.3')) missing.push('pocketsphinx');
  if (!existsSync(MODEL_DIR)) missing.push('pocketsphinx-en-us');
  return missing;
}

export default function setup(): void {
  const missing = missingPackages();
  if (missing.length === 0) return;
  const command = `apt-get install -y ${missing.join(' ')}`;
  if (process.getuid?.() !== 0 || !has('apt-get')) {
    throw new Error(
      `The voice tests need Debian packages that are missing: run \`sudo ${command}\`, then npm test again.`,
    );
  }
  console.log(`Installing what the voice tests need: ${missing.join(', ')}`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  execFileSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
  execFileSync('apt-get', ['install', '-y', '-qq', ...missing], { stdio: 'inherit', env });
}
