import type { Harness } from "./helper.js";

/**
 * Installs, in `h`'s database, a fault on inserting keys: while it is switched on (keyInsertFault), inserting a key
 * named `fail:<SQLSTATE>` fails with that SQLSTATE, e.g. `fail:P0001` (a batch that fails as a whole) or `fail:55P03`
 * (a transient lock timeout). Installing it twice is harmless.
 */
export async function installKeyInsertFault(h: Pick<Harness, "sql">): Promise<void> {
  await h.sql("create table if not exists keyhaven_test_fault (on_ boolean)");
  await h.sql(`create or replace function keyhaven_test_fault() returns trigger language plpgsql as $$
    begin
      if NEW.name like 'fail:%' and exists (select 1 from keyhaven_test_fault) then
        raise exception 'injected by the test' using errcode = substr(NEW.name, 6);
      end if;
      return NEW;
    end $$`);
  await h.sql("drop trigger if exists keyhaven_test_fault on keys");
  await h.sql("create trigger keyhaven_test_fault before insert on keys for each row execute function keyhaven_test_fault()");
}

/** Switches the fault installKeyInsertFault installed on or off. */
export async function keyInsertFault(h: Pick<Harness, "sql">, on: boolean): Promise<void> {
  await h.sql(on ? "insert into keyhaven_test_fault values (true)" : "delete from keyhaven_test_fault");
}
