import { describe, expect, it } from 'vitest';
import { imageUrlProblem } from '../../src/server/image-policy.js';

const PNG = 'data:image/png;base64,iVBORw0KGgo=';

describe('input_image URL policy', () => {
  it('passes data URLs and refuses every link by default', () => {
    expect(imageUrlProblem(PNG, [])).toBeUndefined();
    expect(imageUrlProblem('https://images.example/cat.png', [])).toContain('images.example');
    expect(imageUrlProblem('http://169.254.169.254/latest/meta-data/', [])).toContain('http:');
  });

  it('passes https links of listed hosts only', () => {
    expect(imageUrlProblem('https://images.example/cat.png', ['images.example'])).toBeUndefined();
    expect(imageUrlProblem('https://other.example/cat.png', ['images.example'])).toBeDefined();
    expect(imageUrlProblem('http://images.example/cat.png', ['images.example'])).toBeDefined();
  });

  it('refuses private, loopback and link-local addresses even when any host may pass', () => {
    for (const url of [
      'https://169.254.169.254/latest/meta-data/',
      'https://127.0.0.1/x.png',
      'https://10.1.2.3/x.png',
      'https://192.168.0.7/x.png',
      'https://172.20.0.1/x.png',
      'https://[::1]/x.png',
      'https://[fd00::1]/x.png',
      'https://[::ffff:169.254.169.254]/x.png',
      'https://localhost/x.png',
      'https://user:pw@images.example/x.png',
    ]) {
      expect(imageUrlProblem(url, '*'), url).toBeDefined();
    }
    expect(imageUrlProblem('https://images.example/cat.png', '*')).toBeUndefined();
  });
});
