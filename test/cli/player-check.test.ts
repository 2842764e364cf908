import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { choosePlayer } from '../../src/cli/chat-voice.js';
import { checkPlayer, summarizePlayerStderr } from '../../src/cli/player-check.js';

/** What Debian's aplay prints on a machine without a sound card. */
const ALSA_NOISE = `ALSA lib confmisc.c:855:(parse_card) cannot find card '0'
ALSA lib conf.c:5180:(_snd_config_evaluate) function snd_func_card_inum returned error: No such file or directory
ALSA lib confmisc.c:422:(snd_func_concat) error evaluating strings
ALSA lib pcm.c:2666:(snd_pcm_open_noupdate) Unknown PCM default
aplay: main:831: audio open error: No such file or directory
`;

describe('summarizePlayerStderr', () => {
  it("keeps the player's last word and ALSA's first, and drops the rest of the chatter", () => {
    expect(summarizePlayerStderr(ALSA_NOISE)).toBe(
      "audio open error: No such file or directory (ALSA: cannot find card '0')",
    );
    expect(summarizePlayerStderr('paplay: Connection refused\n')).toBe('Connection refused');
    expect(summarizePlayerStderr('')).toBe('');
  });
});

describe('checkPlayer', () => {
  it('says nothing about a player that plays the silence and exits 0', async () => {
    expect(await checkPlayer({ name: 'cat', path: '/bin/cat', args: [] })).toBeUndefined();
  });

  it('says in one line why a player cannot play', async () => {
    const problem = await checkPlayer({
      name: 'sh',
      path: '/bin/sh',
      args: ['-c', `cat >/dev/null; printf '%s' "$0" >&2; exit 1`, ALSA_NOISE],
    });
    expect(problem).toBe(
      "sh cannot play here (exited with code 1: audio open error: No such file or directory (ALSA: cannot find card '0'))",
    );
  });

  it('says when the player cannot be started', async () => {
    const problem = await checkPlayer({ name: 'nope', path: '/nonexistent/aplay', args: [] });
    expect(problem).toMatch(/^could not start \/nonexistent\/aplay: .*ENOENT/);
  });

  it.runIf(existsSync('/usr/bin/aplay') && !existsSync('/dev/snd'))(
    "finds that Debian's aplay cannot play on a machine without a sound card",
    async () => {
      const aplay = choosePlayer('/usr/bin')!;
      expect(aplay.name).toBe('aplay');
      expect(await checkPlayer(aplay)).toMatch(
        /^aplay cannot play here \(exited with code 1: .*\)$/,
      );
    },
  );
});
