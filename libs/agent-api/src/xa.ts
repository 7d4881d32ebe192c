// The XIDs of the XA branches compute nodes start (DESIGN.md section 12), as both sides of
// the agent contract read them. A multi-shard transaction's gtrid names its coordinator
// shard, whose master holds the decision row; each branch's bqual names its own shard.
//
//   formatID 7037805 (0x6b636d, ASCII "kcm")
//   gtrid    `kcm:<coordinator shard id>:<unique part>`, printable ASCII, at most 64 bytes
//   bqual    `<participant shard id>.<ordinal>.<shard session id>`, at most 64 bytes (the
//            session id, CONNECTION_ID() of the compute node's shard session, is absent from
//            branches of compute nodes before it was added)

export const KCM_XA_FORMAT_ID = 7037805;

/** Printable ASCII without spaces: what a compute node puts in a unique part. */
const GTRID = /^kcm:(\d{1,20}):[\x21-\x7e]+$/;
const BQUAL = /^(\d{1,20})\.(\d{1,10})(?:\.(\d{1,20}))?$/;
/** MariaDB's limit for each of gtrid and bqual (XIDDATASIZE / 2). */
const XID_PART_MAX_BYTES = 64;

export function isKcmGtrid(text: string): boolean {
  return text.length <= XID_PART_MAX_BYTES && GTRID.test(text);
}

export function isKcmBqual(text: string): boolean {
  return text.length <= XID_PART_MAX_BYTES && BQUAL.test(text);
}

/** The coordinator shard id a kcm gtrid names; undefined for text that is not one. */
export function coordinatorShardOf(gtrid: string): string | undefined {
  return isKcmGtrid(gtrid) ? GTRID.exec(gtrid)![1] : undefined;
}

/** The participant shard id a kcm bqual names; undefined for text that is not one. */
export function participantShardOf(bqual: string): string | undefined {
  return isKcmBqual(bqual) ? BQUAL.exec(bqual)![1] : undefined;
}

/** The shard session (CONNECTION_ID()) that prepared the branch, as a decimal string; undefined when the bqual does not carry it. */
export function preparingSessionOf(bqual: string): string | undefined {
  return isKcmBqual(bqual) ? BQUAL.exec(bqual)![3] : undefined;
}

/**
 * The XID of a kcm branch as SQL text (`X'..',X'..',7037805`, as XA RECOVER FORMAT='SQL'
 * prints it): hex literals, so no byte of either part reaches the statement unquoted.
 * Throws on parts that are not kcm's.
 */
export function kcmXidSql(gtrid: string, bqual: string): string {
  if (!isKcmGtrid(gtrid)) throw new Error(`${JSON.stringify(gtrid)} is not a kcm gtrid`);
  if (!isKcmBqual(bqual)) throw new Error(`${JSON.stringify(bqual)} is not a kcm bqual`);
  const hex = (s: string) => Buffer.from(s, 'ascii').toString('hex');
  return `X'${hex(gtrid)}',X'${hex(bqual)}',${KCM_XA_FORMAT_ID}`;
}

const XID_SQL = /^X'([0-9a-fA-F]*)',X'([0-9a-fA-F]*)',(\d+)$/;

/**
 * One row of XA RECOVER FORMAT='SQL' (`formatID`, `data`) as a kcm branch: undefined when it
 * is not kcm's (another formatID, or a gtrid not starting `kcm:`), `unreadable` when it
 * claims to be (formatID 7037805, `kcm:`) but its parts are not kcm's ASCII form.
 */
export function parseKcmXidSql(formatId: number, data: string): { gtrid: string; bqual: string } | 'unreadable' | undefined {
  if (formatId !== KCM_XA_FORMAT_ID) return undefined;
  const m = XID_SQL.exec(data.trim());
  if (!m || Number(m[3]) !== KCM_XA_FORMAT_ID) return 'unreadable';
  const text = (hex: string) => Buffer.from(hex, 'hex').toString('latin1');
  const gtrid = text(m[1]);
  const bqual = text(m[2]);
  if (!gtrid.startsWith('kcm:')) return undefined;
  return isKcmGtrid(gtrid) && isKcmBqual(bqual) ? { gtrid, bqual } : 'unreadable';
}
