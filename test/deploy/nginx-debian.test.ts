/**
 * The shipped nginx file as its header says to install it on Debian: in
 * conf.d, under the package's own nginx.conf. Debian's default site also
 * takes port 80 with `server_name _`; beside it, nginx would answer every
 * request with its welcome page. The file claims the port as the default
 * server, so nginx refuses the pair, saying why, until the default site is
 * removed as the header says.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasProgram, needs } from './processes.js';

const DEBIAN = '/etc/nginx';

describe.runIf(needs('nginx') && existsSync(`${DEBIAN}/nginx.conf`))(
  "deploy/nginx/troupe.conf in Debian's nginx layout",
  () => {
    let dir: string;

    /** `nginx -t` on the copy: its exit status and what it said. */
    const check = (): { status: number | null; said: string } => {
      const run = spawnSync(hasProgram('nginx')!, ['-t', '-c', path.join(dir, 'nginx.conf')]);
      return { status: run.status, said: `${run.stdout}${run.stderr}` };
    };

    beforeAll(async () => {
      dir = await mkdtemp(path.join(tmpdir(), 'troupe-nginx-debian-'));
      await mkdir(path.join(dir, 'conf.d'));
      await mkdir(path.join(dir, 'sites-enabled'));
      // Debian's own nginx.conf, with its includes, pid and logs moved into the copy.
      const main = (await readFile(`${DEBIAN}/nginx.conf`, 'utf8'))
        .replaceAll(`${DEBIAN}/conf.d`, path.join(dir, 'conf.d'))
        .replaceAll(`${DEBIAN}/sites-enabled`, path.join(dir, 'sites-enabled'))
        .replace(/^pid .*$/m, `pid ${path.join(dir, 'nginx.pid')};`)
        .replace(/^error_log .*$/m, 'error_log stderr;')
        .replace(/access_log [^;]*;/g, 'access_log off;');
      await writeFile(path.join(dir, 'nginx.conf'), main);
      await cp(`${DEBIAN}/sites-available/default`, path.join(dir, 'sites-enabled', 'default'));
      // The file as shipped, its upstream hosts (compose's service names) made
      // local and its access log in the copy.
      const site = (await readFile('deploy/nginx/troupe.conf', 'utf8'))
        .replaceAll(/troupe-\d+:8080/g, '127.0.0.1:8080')
        .replaceAll('/var/log/nginx/access.log', path.join(dir, 'access.log'));
      await writeFile(path.join(dir, 'conf.d', 'troupe.conf'), site);
    });

    afterAll(async () => {
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    it("is refused beside Debian's default site, saying why", () => {
      const { status, said } = check();
      expect(status).not.toBe(0);
      expect(said).toMatch(/duplicate default server for 0\.0\.0\.0:80/);
    });

    it('passes once the default site is removed, as its header says', async () => {
      const header = await readFile('deploy/nginx/troupe.conf', 'utf8');
      expect(header).toMatch(/rm \/etc\/nginx\/sites-enabled\/default/);
      await rm(path.join(dir, 'sites-enabled', 'default'));
      const { status, said } = check();
      expect(said).not.toMatch(/conflicting server name/);
      expect(status).toBe(0);
    });
  },
);
