import { LRUCache } from "lru-cache";
import type { Db } from "../../storage/client.js";
import { EpochCache, type EpochReader } from "../../storage/epoch.js";
import { hashKey } from "../../crypto/hash.js";
import { liveKeyHashExists, prepareRootKeyLookup, type WriteGuard } from "../../storage/rootKeys/rootKeys.auth.repository.js";
import type { Clock } from "../../clock.js";
import { UnauthenticatedError, WorkspaceDisabledError } from "../../errors.js";
import { findDependencyFailure } from "../../storage/dependency.js";
import type { LastUsed } from "../../storage/lastUsed/lastUsed.recorder.js";

export type RootKeyAuth = {
  readonly rootKeyId: string;
  readonly workspaceId: string;
  readonly permissions: ReadonlySet<string>;
  /** Set only by authorizeWrite, while the root key is authorized from memory (see Principal). */
  readonly writeGuard?: WriteGuard | undefined;
};

/** A root key in memory: `guarded` is `auth` with the writeGuard authorizeWrite hands out, made once per load. */
type CachedRootKey = { auth: RootKeyAuth; guarded: RootKeyAuth; workspaceEnabled: boolean };

/** Root keys kept in memory per process (by hash), beyond which the oldest are dropped first. */
export const ROOT_KEY_CACHE_ENTRIES = 10_000;

/** Every root key is at least this long: generated ones are much longer, KEYHAVEN_ROOT_KEY needs 16 characters. */
const MIN_ROOT_KEY_LENGTH = 16;
/** How long a token found to be no root key is remembered by `optional` (see there), and how many. */
export const UNKNOWN_ROOT_KEY_TTL_MS = 60_000;
const UNKNOWN_ROOT_KEY_ENTRIES = 10_000;

/**
 * Authenticates root keys, with the root keys of this process in memory. One per process (services.ts builds it):
 * its cache and its memory of unknown tokens belong to that process's store and are never shared with another.
 */
export class RootKeyAuthenticator {
  private readonly cache: EpochCache<CachedRootKey>;
  /** Hashes of tokens that were no root key, with when that answer expires; the least recently asked dropped first. */
  private readonly unknown = new LRUCache<string, number>({ max: UNKNOWN_ROOT_KEY_ENTRIES });

  constructor(
    private readonly db: Db,
    private readonly epochs: EpochReader,
    private readonly clock: Clock,
    /** Where each root key's last authentication is kept (in memory, written in the background). */
    private readonly lastUsed: LastUsed,
  ) {
    const lookup = prepareRootKeyLookup(db);
    this.cache = new EpochCache<CachedRootKey>(
      async (hash) => {
        const [row] = await lookup.execute({ hash });
        if (!row) return undefined;
        const auth = { rootKeyId: row.id, workspaceId: row.workspaceId, permissions: new Set(row.permissions) };
        const guarded = Object.assign({}, auth, { writeGuard: { rootKeyId: row.id, permissions: [...auth.permissions] } });
        return { auth, guarded, workspaceEnabled: row.workspaceEnabled };
      },
      ROOT_KEY_CACHE_ENTRIES,
      {
        // What the answer was read from: the root key's row and its workspace's (see migration invalidation_log).
        tracker: epochs.invalidations,
        tagsOf: ({ auth }) => [`root:${auth.rootKeyId}`, `ws:${auth.workspaceId}`],
      },
    );
  }

  /**
   * Authenticates a root key (the token of `Authorization: Bearer`; "" when none was sent). Refuses with
   * UnauthenticatedError, whose reason each adapter words, or WorkspaceDisabledError.
   *
   * Every request reads the store's epoch (one small query shared by the requests that arrive together; see
   * storage/epoch.ts); the root key is read from the database only when it is not in memory at that epoch. Deleting a
   * root key, changing its permissions or disabling its workspace moves the epoch and drops that root key (or the
   * workspace's) from memory, so the next request on every replica sees it; other writes leave it cached. `epoch` may be passed by a caller that reads it for other caches of the same request.
   */
  async authenticate(token: string, epoch?: bigint): Promise<RootKeyAuth> {
    if (token === "") throw new UnauthenticatedError("missing");
    const hash = hashKey(token);
    return this.authenticateHash(hash, epoch);
  }

  /**
   * As authenticate, for a root key known by its hash alone: a console session holds the hash of the root key it was
   * signed in with, never the key, and is authenticated again by it on every request (so revoking or narrowing the
   * root key ends or narrows the session at once, on every replica).
   */
  async authenticateHash(hash: string, epoch?: bigint): Promise<RootKeyAuth> {
    const found = await this.find(hash, epoch);
    if (!found) {
      // Only on the failure path: tell a customer's API key used as a root key apart from an unknown one.
      throw new UnauthenticatedError((await liveKeyHashExists(this.db, hash)) ? "notRootKey" : "unknown");
    }
    if (!found.workspaceEnabled) throw new WorkspaceDisabledError();
    this.used(found.auth);
    return found.auth;
  }

  /**
   * Runs `write` as the root key of `token`, for a route whose writes re-check the root key themselves (keys.createKey
   * and keys.updateKey: one statement in the common case, and reading the epoch first would double their round trips,
   * issue 13 §3).
   * A root key in memory runs it at once, with a `writeGuard`: the write's own statement checks, at its snapshot, that
   * the root key still exists with exactly these permissions in an enabled workspace, and writes nothing otherwise.
   * When that run throws (a refusal reasoned from permissions that may have changed, a guard that failed, a
   * statement's own error, …), nothing was written, and `write` runs again with the root key authenticated at a fresh
   * epoch, as every other route's is: so every answer but a success is the one a confirmed root key gets, and a
   * success was re-checked by the write itself. A root key not in memory is authenticated at once. So `write` must
   * throw only before it writes (its write is its last step), and every write it makes must apply the guard.
   *
   * Except when the store could not answer (a DependencyUnavailableError: PostgreSQL frozen, a connection lost, a
   * deadline met): the statement may have been applied all the same, so that failure is answered as it is, never run
   * again, or a second run writes a second key (issue 34 §6: 8 duplicate keys in 6 freezes). A write is attempted
   * once per request.
   */
  async authorizeWrite<T>(token: string, write: (auth: RootKeyAuth) => Promise<T>): Promise<T> {
    const remembered = token === "" ? undefined : this.cache.peek(hashKey(token));
    if (remembered?.workspaceEnabled) {
      try {
        const written = await write(remembered.guarded);
        this.used(remembered.auth);
        return written;
      } catch (err) {
        if (findDependencyFailure(err)) throw err;
        // Nothing was written: answered below, at a fresh epoch.
      }
    }
    return write(await this.authenticate(token));
  }

  /**
   * The root key of a token when it is one of an enabled workspace, else undefined: for a route where the header is
   * optional (v1's keys.verifyKey ignores anything else there). Never throws for what the token holds. A token that
   * cannot be a root key (absent, shorter than any root key, such as the SDK's `Bearer public`) costs nothing; a token
   * found to be no root key is remembered for a minute, so a client that always sends the same foreign token costs no
   * query per request. That is exact for generated root keys (nobody can send one before it exists); a secret chosen
   * by the operator that was sent before it became a root key is recognised at most a minute late.
   */
  async optional(token: string | undefined, epoch?: bigint): Promise<RootKeyAuth | undefined> {
    if (token === undefined || token.length < MIN_ROOT_KEY_LENGTH) return undefined;
    const hash = hashKey(token);
    const now = this.clock.now();
    const until = this.unknown.get(hash);
    if (until !== undefined) {
      if (until > now) return undefined;
      this.unknown.delete(hash);
    }
    const found = await this.find(hash, epoch);
    if (found === undefined) {
      this.unknown.set(hash, now + UNKNOWN_ROOT_KEY_TTL_MS);
      return undefined;
    }
    if (!found.workspaceEnabled) return undefined;
    this.used(found.auth);
    return found.auth;
  }

  /** The root key authenticated now: its last use (in memory only, one map lookup). */
  private used(auth: RootKeyAuth): void {
    this.lastUsed.rootKey(auth.rootKeyId, this.clock.now());
  }

  /** Root keys read from the database so far (not answered from memory). */
  get loads(): number {
    return this.cache.loads;
  }

  private async find(hash: string, epoch: bigint | undefined): Promise<CachedRootKey | undefined> {
    return this.cache.get(hash, epoch ?? (await this.epochs.current()));
  }
}
