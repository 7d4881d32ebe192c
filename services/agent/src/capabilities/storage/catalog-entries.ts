// Which entries of a compute node's schema dump a restore puts back: the objects only a
// compute node holds. Everything else the destination already has or must not take from
// the source: its tables, partitioned parents, their rules, schemas and databases are made
// from the shards by the catalog sync; the foreign servers and user mappings name the
// source's shards and accounts; extensions and their event triggers are kcm's own, made
// when the instance was installed; grants name the source's roles.

/** Object kinds a restore puts back, as pg_restore --list names them. */
const COMPUTE_ONLY_KINDS = ['MATERIALIZED VIEW', 'VIEW', 'FUNCTION', 'PROCEDURE', 'AGGREGATE', 'TYPE', 'DOMAIN', 'SEQUENCE'];
/** Kinds that start like one above but are something else (a serial's owner link, a sequence's value). */
const LOOK_ALIKES = ['SEQUENCE OWNED BY', 'SEQUENCE SET', 'MATERIALIZED VIEW DATA'];

const kindAt = (text: string): string | undefined => {
  if (LOOK_ALIKES.some((k) => text.startsWith(`${k} `))) return undefined;
  return COMPUTE_ONLY_KINDS.find((k) => text.startsWith(`${k} `));
};

export interface CatalogSelection {
  /** The kept lines of the listing, for pg_restore --use-list. */
  useList: string;
  /** What they restore, as `<kind> <schema> <name>` (comments left out). */
  objects: string[];
}

/**
 * The entries of a `pg_restore --list` listing to restore: objects of the kinds above and
 * the comments on them. An entry line is `<dump id>; <catalog oid> <oid> <kind> <schema>
 * <name> <owner>`, a comment's `<kind>` part being `COMMENT <schema> <object kind> <name>`.
 */
export function computeOnlyEntries(listing: string): CatalogSelection {
  const kept: string[] = [];
  const objects: string[] = [];
  for (const line of listing.split('\n')) {
    const entry = /^\d+; \d+ \d+ (.*)$/.exec(line);
    if (!entry) continue;
    const rest = entry[1];
    const comment = /^COMMENT (\S+) (.*)$/.exec(rest);
    if (comment) {
      if (kindAt(comment[2])) kept.push(line);
      continue;
    }
    const kind = kindAt(rest);
    if (!kind) continue;
    kept.push(line);
    // `<schema> <name> <owner>`: the owner is the last word; a name may hold spaces (`f(integer, text)`).
    const words = rest.slice(kind.length + 1).split(' ');
    objects.push(`${kind} ${words[0]} ${words.slice(1, -1).join(' ')}`);
  }
  return { useList: kept.length ? `${kept.join('\n')}\n` : '', objects };
}
