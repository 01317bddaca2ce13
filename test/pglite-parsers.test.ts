import { PGlite, types } from "@electric-sql/pglite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openPglite, type Store } from "../src/storage/client.js";

// The embedded store's PGlite keeps no parsers of its own for built-in types (src/storage/pgliteParsers.ts): PGlite
// copies an instance's parsers for every statement it answers, and with one per array type that copy cost more than a
// third of a statement. These cases hold that the store is opened that way and that every answer stays the same as
// an instance with PGlite's own parsers gives.

const BUILT_IN_ARRAYS = `
  select b.typarray::int as array, b.typname as element
    from pg_catalog.pg_type a join pg_catalog.pg_type b on b.oid = a.typelem
   where a.typcategory = 'A' and b.typarray <> 0 and b.typarray < 16384
   group by b.typarray, b.typname`;

// What drizzle's PGlite driver passes with each statement (drizzle-orm/pglite/session.js): timestamps and dates kept
// as text, for its own column decoders.
const keepText = (value: string) => value;
const DRIZZLE_OPTIONS = {
  rowMode: "array" as const,
  parsers: Object.fromEntries(
    [types.TIMESTAMP, types.TIMESTAMPTZ, types.INTERVAL, types.DATE, 1231, 1115, 1185, 1187, 1182].map((oid) => [oid, keepText]),
  ),
};

describe("the embedded store's parsers", () => {
  let store: Store;
  let lean: PGlite;
  let plain: PGlite;

  beforeAll(async () => {
    store = await openPglite("memory://");
    lean = (store.db as unknown as { $client: PGlite }).$client;
    plain = new PGlite("memory://");
    await plain.waitReady;
  });
  afterAll(async () => {
    await store?.close();
    await plain?.close();
  });

  it("keeps none of its own for built-in types: what PGlite copies per statement is the query's parsers only", async () => {
    const arrays = (await lean.query<{ array: number }>(BUILT_IN_ARRAYS)).rows;
    expect(arrays.length).toBeGreaterThan(50);
    expect(Object.keys(plain.parsers).length).toBeGreaterThan(arrays.length);
    const builtIn = Object.keys(lean.parsers).filter((key) => /^\d+$/.test(key) && Number(key) < 16_384);
    expect(builtIn).toEqual([]);
  });

  it("parses every built-in array type as PGlite's own instance does", async () => {
    const arrays = (await plain.query<{ array: number; element: string }>(BUILT_IN_ARRAYS)).rows;
    // Texts every element type's parser takes (PGlite's array parser keeps its position across calls, and a parser
    // that throws, JSON's on a word, leaves it behind for the next call: not what is compared here).
    const samples = ["{}", "{NULL}", "{1,2}", "{{1,2},{3,4}}", '{"1",NULL,"2"}'];
    const outcome = (parse: (value: string, typeId: number) => unknown, value: string, typeId: number) => {
      try {
        return { value: parse(value, typeId) };
      } catch (err) {
        return { threw: (err as Error).name };
      }
    };
    for (const { array, element } of arrays) {
      const own = plain.parsers[array];
      const leanParse = lean.parsers[array] ?? types.parsers[array as keyof typeof types.parsers];
      expect(own, `PGlite has a parser for ${element}[]`).toBeTypeOf("function");
      expect(leanParse, `the lean store has one for ${element}[]`).toBeTypeOf("function");
      for (const sample of samples) {
        expect(outcome(leanParse!, sample, array), `${element}[] of ${sample}`).toEqual(outcome(own!, sample, array));
      }
    }
  });

  it("answers statements as PGlite's own instance does, rows of objects and drizzle's rows of arrays alike", async () => {
    const text = `select '{a,"b c",NULL}'::text[] as texts, '{1,2}'::int4[] as ints, '{1,9007199254740993}'::int8[] as bigs,
      '{t,f,NULL}'::bool[] as bools, array['{"a":[1,"x"]}'::jsonb] as jsonbs, array['{"b":2}'::json] as jsons,
      '{1.5,-2}'::float8[] as floats, '{1.25}'::numeric[] as numerics, '{varchar}'::varchar[] as varchars,
      '{00000000-0000-0000-0000-000000000001}'::uuid[] as uuids, array['\\x01ff'::bytea] as bytes,
      array['2026-11-27 03:00:00.123+00'::timestamptz] as stamps, '{2026-11-27}'::date[] as dates,
      '2026-11-27 03:00:00.123+00'::timestamptz as stamp, 42::int8 as big, '{"n":null}'::jsonb as doc, true as yes,
      'x'::bytea as byte, 1.5::float4 as real, 7::int2 as small`;
    expect((await lean.query(text)).rows).toEqual((await plain.query(text)).rows);
    expect((await lean.query(text, [], DRIZZLE_OPTIONS)).rows).toEqual((await plain.query(text, [], DRIZZLE_OPTIONS)).rows);
    const [row] = (await lean.query<Record<string, unknown>>(text)).rows;
    expect(row?.texts).toEqual(expect.arrayContaining(["a", "b c"]));
    expect(row?.ints).toEqual([1, 2]);
    expect(row?.jsonbs).toEqual([{ a: [1, "x"] }]);
  });
});
