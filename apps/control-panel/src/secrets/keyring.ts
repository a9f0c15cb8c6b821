import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { PanelError } from '../errors.js';

// The keys secrets are encrypted under (AES-256-GCM). The first key encrypts;
// the others only decrypt, so a rotation can roll across several panels
// (docs/operations.md, "Secrets key"). A key's id is derived from the key, so
// every row names the key it needs without the database holding anything that
// opens it.

const KEY_BYTES = 32;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

export interface SealedValue {
  keyId: string;
  nonce: Uint8Array;
  /** Ciphertext with the GCM tag appended. */
  ciphertext: Uint8Array;
}

export interface KeySource {
  /** Keys as given in TETHER_SECRETS_KEY (comma-separated). */
  keys: string | undefined;
  /** TETHER_SECRETS_KEY_FILE: one key a line, the first encrypts; blank lines and # comments skipped. */
  keyFile: string | undefined;
}

/** 32 random bytes, base64: what the install guide and the compose stack generate. */
export function generateKey(): string {
  return randomBytes(KEY_BYTES).toString('base64');
}

export const keyIdOf = (key: Buffer): string => `k-${createHash('sha256').update('tether-secrets-key-id\0').update(key).digest('hex').slice(0, 16)}`;

function parseKey(text: string, where: string): Buffer {
  const t = text.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(t) ? Buffer.from(t, 'hex') : /^[A-Za-z0-9+/]{43}=?$/.test(t) ? Buffer.from(t, 'base64') : undefined;
  // The text itself is never repeated: it is (nearly) a key.
  if (!key || key.length !== KEY_BYTES) throw new PanelError('SECRETS_KEY_INVALID', `${where}: a key is 32 bytes written as base64 (44 characters) or hex (64 characters)`);
  return key;
}

export class Keyring {
  private readonly keys = new Map<string, Buffer>();
  /** Id of the key that encrypts. */
  readonly activeKeyId: string;

  constructor(keys: readonly Buffer[]) {
    if (keys.length === 0) throw new PanelError('SECRETS_KEY_INVALID', 'a keyring needs at least one key');
    for (const key of keys) this.keys.set(keyIdOf(key), key);
    this.activeKeyId = keyIdOf(keys[0]!);
  }

  get keyIds(): string[] {
    return [...this.keys.keys()];
  }

  has(keyId: string): boolean {
    return this.keys.has(keyId);
  }

  /** `aad` binds the value to where it is stored (a row copied elsewhere does not open). */
  seal(plaintext: string, aad: string): SealedValue {
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.keys.get(this.activeKeyId)!, nonce);
    cipher.setAAD(Buffer.from(aad));
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()]);
    return { keyId: this.activeKeyId, nonce, ciphertext: body };
  }

  open(sealed: SealedValue, aad: string): string {
    const key = this.keys.get(sealed.keyId);
    if (!key) throw new PanelError('SECRETS_KEY_MISSING', `no key with id ${sealed.keyId} is configured`);
    const body = Buffer.from(sealed.ciphertext);
    if (body.length < TAG_BYTES) throw new PanelError('SECRET_UNREADABLE', 'a stored secret is truncated');
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(sealed.nonce));
    decipher.setAAD(Buffer.from(aad));
    decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
    try {
      return Buffer.concat([decipher.update(body.subarray(0, body.length - TAG_BYTES)), decipher.final()]).toString('utf8');
    } catch (err) {
      throw new PanelError('SECRET_UNREADABLE', `a stored secret under key ${sealed.keyId} does not authenticate`, { cause: err });
    }
  }
}

/** The keyring configured, or null when no key is (then no secret can be set). */
export function loadKeyring(source: KeySource): Keyring | null {
  if (source.keys !== undefined && source.keyFile !== undefined) {
    throw new PanelError('SECRETS_KEY_INVALID', 'set TETHER_SECRETS_KEY or TETHER_SECRETS_KEY_FILE, not both');
  }
  if (source.keys !== undefined) {
    return new Keyring(source.keys.split(',').filter((k) => k.trim() !== '').map((k, i) => parseKey(k, `TETHER_SECRETS_KEY (key ${i + 1})`)));
  }
  if (source.keyFile === undefined) return null;
  let text: string;
  try {
    text = readFileSync(source.keyFile, 'utf8');
  } catch (err) {
    throw new PanelError('SECRETS_KEY_INVALID', `TETHER_SECRETS_KEY_FILE: cannot read ${source.keyFile} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  const lines = text.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'));
  return new Keyring(lines.map((l, i) => parseKey(l, `TETHER_SECRETS_KEY_FILE ${source.keyFile} (key ${i + 1})`)));
}
