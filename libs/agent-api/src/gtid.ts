// MariaDB GTID positions (`domain-server-seq`, one per replication domain, comma
// separated), as both sides of the agent contract read them: which of two positions is
// further, and which transactions one has that another lacks (errant transactions).
//
// Within a domain, sequence numbers only grow along one history (gtid_strict_mode), so a
// position is "at least" another when it is at least as far in every domain. Errant
// transactions of an old master are those past the position its successor was promoted
// at: the successor's history went on from there without them.

export interface GtidEntry {
  domain: number;
  server: number;
  seq: number;
}

const ENTRY = /^(\d+)-(\d+)-(\d+)$/;

/** A non-empty position as MariaDB prints it: `domain-server-seq` per domain, comma separated, no spaces. */
export const GTID_POS_TEXT = /^\d+-\d+-\d+(,\d+-\d+-\d+)*$/;

/** True for a position as MariaDB prints it, or '' (the empty position). */
export function isGtidPosText(text: string): boolean {
  return text === '' || GTID_POS_TEXT.test(text);
}

/** Parses a position; throws on text that is not one ('' is the empty position). */
export function parseGtidPos(text: string): Map<number, GtidEntry> {
  const byDomain = new Map<number, GtidEntry>();
  for (const part of text.split(',').map((p) => p.trim()).filter(Boolean)) {
    const m = ENTRY.exec(part);
    if (!m) throw new Error(`${JSON.stringify(part)} is not a GTID (domain-server-seq)`);
    const entry = { domain: Number(m[1]), server: Number(m[2]), seq: Number(m[3]) };
    const seen = byDomain.get(entry.domain);
    if (!seen || seen.seq < entry.seq) byDomain.set(entry.domain, entry);
  }
  return byDomain;
}

export function formatGtidPos(pos: Map<number, GtidEntry>): string {
  return [...pos.values()].sort((a, b) => a.domain - b.domain).map((e) => `${e.domain}-${e.server}-${e.seq}`).join(',');
}

/** True when `a` has every transaction `b` has (per domain, a.seq >= b.seq). */
export function gtidCovers(a: string, b: string): boolean {
  const pa = parseGtidPos(a);
  for (const e of parseGtidPos(b).values()) if ((pa.get(e.domain)?.seq ?? 0) < e.seq) return false;
  return true;
}

/** Sum of sequence numbers: orders positions of one shard's history (higher = further). */
export function gtidProgress(pos: string): number {
  let total = 0;
  for (const e of parseGtidPos(pos).values()) total += e.seq;
  return total;
}

/**
 * What `pos` has beyond `base`: per domain, `domain-server-from..to` (or a single GTID).
 * Empty when `base` covers `pos`.
 */
export function gtidsBeyond(pos: string, base: string): string[] {
  const pb = parseGtidPos(base);
  const out: string[] = [];
  for (const e of parseGtidPos(pos).values()) {
    const from = (pb.get(e.domain)?.seq ?? 0) + 1;
    if (e.seq < from) continue;
    out.push(from === e.seq ? `${e.domain}-${e.server}-${e.seq}` : `${e.domain}-${e.server}-${from}..${e.seq}`);
  }
  return out;
}
