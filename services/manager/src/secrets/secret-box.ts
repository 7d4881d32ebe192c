// Generated database passwords are sealed (AES-256-GCM, node:crypto) by the leader before
// they go into any command, so the Raft log, its snapshots, the replicated state and the
// metadata backups only ever hold ciphertext. Every member has the same 32-byte key from
// its config (`secretsKeyFile`); a password is opened only where an agent call or an
// authorised get_status needs it. The state machine never opens anything: apply stays
// deterministic and keyless.
//
// Sealed text: `kcm-sealed:v1:` + base64url(12-byte IV | 16-byte tag | ciphertext).
// A manager in `insecure` mode without a key stores `kcm-plain:v1:<password>` instead, and
// says so in its log; with a key, insecure mode still seals.

import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';

export const SEALED_PREFIX = 'kcm-sealed:v1:';
export const PLAIN_PREFIX = 'kcm-plain:v1:';
const IV_BYTES = 12;
const TAG_BYTES = 16;
export const SECRETS_KEY_BYTES = 32;

export class SecretBox {
  /** Per-purpose keys for derive(), made from the key on first use. */
  private readonly derivingKeys = new Map<string, Buffer>();

  private constructor(private readonly key: Buffer | null) {}

  /** A box that seals with `key` (32 bytes). */
  static withKey(key: Buffer): SecretBox {
    if (key.length !== SECRETS_KEY_BYTES) throw new Error(`the secrets key must be ${SECRETS_KEY_BYTES} bytes, got ${key.length}`);
    return new SecretBox(Buffer.from(key));
  }

  /** Insecure mode without a key: secrets are stored as they are (marked so). */
  static unkeyed(): SecretBox {
    return new SecretBox(null);
  }

  get sealsForReal(): boolean {
    return this.key !== null;
  }

  seal(secret: string): string {
    if (!this.key) return PLAIN_PREFIX + secret;
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const body = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
    return SEALED_PREFIX + Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64url');
  }

  /**
   * 32 bytes only a holder of the key can compute from `message`, the same on every member
   * (they share the key); undefined without a key. `purpose` separates uses: each has its own
   * key, made from the secrets key by HKDF, so no derived value helps with another purpose or
   * with the sealing key. For secrets that must come out the same again, e.g. the token a
   * retried create_token answers with (gateway/token-issue.ts), without being stored anywhere.
   */
  derive(purpose: string, message: string): Buffer | undefined {
    if (!this.key) return undefined;
    let key = this.derivingKeys.get(purpose);
    if (!key) {
      key = Buffer.from(hkdfSync('sha256', this.key, Buffer.alloc(0), `kcm derive v1: ${purpose}`, 32));
      this.derivingKeys.set(purpose, key);
    }
    return createHmac('sha256', key).update(message, 'utf8').digest();
  }

  /** The secret inside `sealed`; throws (without quoting it) when it is not one or the key does not open it. */
  open(sealed: string): string {
    if (sealed.startsWith(PLAIN_PREFIX)) return sealed.slice(PLAIN_PREFIX.length);
    if (!sealed.startsWith(SEALED_PREFIX)) throw new Error('not a sealed secret (state written by a kcm without secrets at rest?)');
    if (!this.key) throw new Error('a sealed secret cannot be opened: this manager has no secretsKeyFile');
    const raw = Buffer.from(sealed.slice(SEALED_PREFIX.length), 'base64url');
    if (raw.length < IV_BYTES + TAG_BYTES) throw new Error('a sealed secret is truncated');
    const decipher = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, IV_BYTES));
    decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    try {
      return Buffer.concat([decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
    } catch {
      throw new Error('a sealed secret does not open with this manager\'s secrets key (members must share one key)');
    }
  }
}

export function isSealed(value: unknown): value is string {
  return typeof value === 'string' && (value.startsWith(SEALED_PREFIX) || value.startsWith(PLAIN_PREFIX));
}

/** Reads a key file: exactly 32 bytes, not readable by group or others. */
export function readSecretsKey(file: string): Buffer {
  const mode = statSync(file).mode & 0o777;
  if ((mode & 0o077) !== 0) throw new Error(`secretsKeyFile ${file} is readable by others (mode ${mode.toString(8)}); chmod 600 it`);
  const key = readFileSync(file);
  if (key.length !== SECRETS_KEY_BYTES) throw new Error(`secretsKeyFile ${file} must hold ${SECRETS_KEY_BYTES} bytes, it holds ${key.length}`);
  return key;
}

/**
 * The box a manager runs with: its key file, or (insecure mode only) none. Without either
 * the manager refuses to start rather than keep passwords in clear.
 */
export function secretBoxFor(config: { secretsKeyFile?: string; insecure?: boolean }): SecretBox {
  if (config.secretsKeyFile) return SecretBox.withKey(readSecretsKey(config.secretsKeyFile));
  if (config.insecure) return SecretBox.unkeyed();
  throw new Error('secretsKeyFile is required (32 random bytes, mode 0600, the same file on every member): generated database passwords are kept encrypted with it. Only `insecure: true` runs without one');
}
