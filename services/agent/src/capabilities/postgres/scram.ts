// SCRAM-SHA-256 password verifiers (RFC 5802/7677, PostgreSQL's stored format), computed
// here so that CREATE/ALTER ROLE carries only the verifier: the clear password never
// reaches the server, its statement log or an error message.

import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';

const ITERATIONS = 4096; // PostgreSQL's default scram_iterations

/**
 * `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`, the form pg_authid keeps.
 * PostgreSQL SASLprep-normalises passwords; NFKC is what that amounts to for the
 * passwords kcm generates and accepts (printable, no prohibited code points).
 */
export function scramSha256Verifier(password: string, salt: Buffer = randomBytes(16), iterations = ITERATIONS): string {
  if (password.length === 0) throw new Error('password must not be empty');
  const salted = pbkdf2Sync(Buffer.from(password.normalize('NFKC'), 'utf8'), salt, iterations, 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  const storedKey = createHash('sha256').update(clientKey).digest();
  const serverKey = createHmac('sha256', salted).update('Server Key').digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`;
}
