/**
 * Which `input_image` URLs a client may hand the LLM. The LLM server fetches
 * a URL it is given, from inside the network it runs in: a client that may
 * name any URL can make it fetch `http://169.254.169.254/…` (cloud metadata)
 * or a private service. By default only inline data URLs pass.
 */
import { isIP } from 'node:net';
import { ProtocolError } from '../errors.js';
import type { ClientEvent } from '../session/events.js';

/** `config.sessions.imageUrlHosts`: hosts whose https images may pass, `'*'` for any public one. */
export type ImageUrlPolicy = '*' | readonly string[];

/**
 * The refusal of an event whose `input_image` parts name URLs the policy
 * does not allow, or undefined when every part may pass.
 *
 * @example
 * const refused = refuseImageUrls(event, config.sessions.imageUrlHosts);
 * if (refused) return sendError(refused);
 */
export function refuseImageUrls(
  event: ClientEvent,
  policy: ImageUrlPolicy,
): ProtocolError | undefined {
  if (event.type !== 'conversation.item.create' || event.item.type !== 'message') return undefined;
  const content = event.item.content;
  for (let i = 0; i < content.length; i++) {
    const part = content[i]!;
    if (part.type !== 'input_image') continue;
    const why = imageUrlProblem(part.image_url, policy);
    if (why === undefined) continue;
    return new ProtocolError(
      'image_url_not_allowed',
      `conversation.item.create: item.content[${i}].image_url: ${why}. Send the image inline as a data:image/…;base64 URL${
        policy === '*' || policy.length > 0
          ? ''
          : ' (this server takes no image links: IMAGE_URL_HOSTS is unset)'
      }.`,
      { param: `item.content[${i}].image_url`, eventId: event.event_id ?? null },
    );
  }
  return undefined;
}

/** Why `url` may not go to the LLM, or undefined when it may. */
export function imageUrlProblem(url: string, policy: ImageUrlPolicy): string | undefined {
  if (/^data:image\//i.test(url)) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'not a URL';
  }
  if (parsed.protocol !== 'https:') return `${parsed.protocol} image links are not taken`;
  if (parsed.username !== '' || parsed.password !== '')
    return 'links with credentials are not taken';
  const host = parsed.hostname
    .toLowerCase()
    .replace(/^\[|\]$/g, '')
    .replace(/\.$/, '');
  if (isPrivateHost(host)) return `${host} is a private, loopback or link-local address`;
  if (policy === '*') return undefined;
  if (policy.includes(host)) return undefined;
  return `images from ${host} are not taken`;
}

/** Loopback, private, link-local, unique-local and unspecified addresses, and `localhost` names. */
function isPrivateHost(host: string): boolean {
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  const v = isIP(host);
  if (v === 4) {
    const [a, b] = host.split('.').map(Number) as [number, number];
    return (
      a === 0 ||
      a === 10 ||
      a === 127 ||
      (a === 100 && b >= 64 && b <= 127) ||
      (a === 169 && b === 254) ||
      (a === 172 && b >= 16 && b <= 31) ||
      (a === 192 && b === 168) ||
      a >= 224
    );
  }
  if (v === 6) {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(host);
    if (mapped) return isPrivateHost(mapped[1]!);
    // URL writes a mapped IPv4 address in hex: ::ffff:a9fe:a9fe.
    const hex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(host);
    if (hex) {
      const hi = parseInt(hex[1]!, 16);
      const lo = parseInt(hex[2]!, 16);
      return isPrivateHost(`${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`);
    }
    return (
      host === '::' ||
      host === '::1' ||
      /^f[cd]/.test(host) ||
      /^fe[89ab]/.test(host) ||
      host.startsWith('ff')
    );
  }
  return false;
}
