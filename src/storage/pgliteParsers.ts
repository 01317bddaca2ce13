import { PGlite, types } from "@electric-sql/pglite";
import { DEFAULT_PGLITE_SHARED_BUFFERS_MB } from "../config.js";

/** PGlite's own parser type (not exported by name). */
type Parser = PGlite["parsers"][number];

/** Type oids below this are PostgreSQL's built-in types: the same in every database (FirstNormalObjectId). */
const FIRST_NORMAL_OID = 16_384;

/**
 * Makes a PGlite instance answer its statements without copying its parsers each time.
 *
 * Why: PGlite builds every answer with `{ ...instance.parsers, ...query.parsers }`, a new object per statement, and
 * at start it sets up a parser for each array type of the database (316 in all, 211 of them arrays of catalog row
 * types). Copying an object with that many integer keys cost about 160 µs per statement on the slow machine of
 * docs/benchmarks.md, a third or more of what PGlite spends on a whole `select 1` (0.4 ms there): every statement of
 * the embedded store paid it, in keyhaven's event loop.
 *
 * What changes: nothing in what a statement answers. PGlite looks a type's parser up in that copy and then in its
 * module's defaults (`types.parsers`), so the built-in array types' parsers move there (the same for every database
 * and every instance, built as PGlite builds them: the element's parser applied to each element), and the instance
 * keeps only what is not a default (arrays of types created in this database, none in keyhaven's schema today).
 * The copy is then of the query's own parsers (drizzle's nine). test/pglite-parsers.test.ts holds both sides: every
 * built-in array type parses as PGlite's own instance parses it, and the instance is left without them.
 */
export async function withLeanParsers(client: PGlite): Promise<void> {
  // The query PGlite's own start-up runs (_initArrayTypes): each element type that has an array type.
  const { rows } = await client.query<{ element: number; array: number }>(
    `select b.oid::int as element, b.typarray::int as array
       from pg_catalog.pg_type a join pg_catalog.pg_type b on b.oid = a.typelem
      where a.typcategory = 'A' and b.typarray <> 0
      group by b.oid, b.typarray`,
  );
  const defaults = types.parsers as Record<number | string, Parser>;
  const moved = new Set<string>();
  for (const { element, array } of rows) {
    if (element >= FIRST_NORMAL_OID || array >= FIRST_NORMAL_OID) continue;
    defaults[array] ??= (value) => types.arrayParser(value, defaults[element] as Parser, array);
    moved.add(String(array));
  }
  const kept: Record<number | string, Parser> = {};
  for (const [oid, parse] of Object.entries(client.parsers as Record<string, Parser>)) {
    if (defaults[oid] === parse || moved.has(oid)) continue;
    kept[oid] = parse;
  }
  client.parsers = kept;
}

/**
 * A PGlite instance on `location` (a directory, or `memory://`), ready and with lean parsers: how the embedded store
 * starts one (openPglite, and the tests' pool of instances). Closed again if it cannot be made so.
 *
 * Its database is `template1`, where PGlite 0.3 (keyhaven up to 0.8) created keyhaven's tables: PGlite 0.4 opens the
 * same data directories (PostgreSQL 17) but would otherwise connect to `postgres`, empty there. Its buffer pool is
 * `sharedBuffersMb`: PGlite 0.4 reads the data directory's postgresql.conf, in which PGlite's initdb wrote
 * `shared_buffers = 400kB` (50 pages, which PGlite 0.3 never read: it ran with 128 MB), so the size is always given.
 */
export async function startPglite(
  location: string,
  sharedBuffersMb = DEFAULT_PGLITE_SHARED_BUFFERS_MB,
  /** A data directory to start from (PGlite's dumpDataDir tarball), instead of a new one (the tests' template). */
  loadDataDir?: Blob,
): Promise<PGlite> {
  const client = new PGlite(location, {
    database: "template1",
    postgresqlconf: [`shared_buffers = '${sharedBuffersMb}MB'`],
    ...(loadDataDir !== undefined && { loadDataDir }),
  });
  try {
    await client.waitReady;
    await withLeanParsers(client);
    return client;
  } catch (err) {
    await client.close().catch(() => {});
    throw err;
  }
}
