import type { Clock } from "../../clock.js";
import type { WriteGate } from "../changes.js";
import type { Keyring } from "../../keyring/keyring.js";
import type { Db } from "../../storage/client.js";
import type { KeyObjectReads } from "../../storage/keys/keyObjects.repository.js";
import type { KeyWrites } from "../../storage/keys/keys.writes.repository.js";

/** What the key operations use of the services (services.ts's Services has them). */
export type KeyServices = {
  readonly db: Db;
  readonly keyring: Keyring;
  readonly clock: Clock;
  readonly keyWrites: KeyWrites;
  readonly keyReads: KeyObjectReads;
  /** The write gate: each key change's transaction and its audit entry. */
  readonly changes: WriteGate;
};
