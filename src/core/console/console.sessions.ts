import { createHmac, randomBytes } from "node:crypto";
import { LRUCache } from "lru-cache";
import type { Clock } from "../../clock.js";
import { hashKey, secretsEqual, sha256Hex } from "../../crypto/hash.js";
import { UnauthenticatedError, WorkspaceDisabledError } from "../../errors.js";
import type { Db } from "../../storage/client.js";
import {
  type ConsoleSessionRow,
  deleteConsoleSession,
  deleteConsoleSessionsEndedBefore,
  findLiveConsoleSession,
  insertConsoleSession,
  touchConsoleSession,
} from "../../storage/console/sessions.repository.js";
import type { RootKeyAuth, RootKeyAuthenticator } from "../auth/rootKeys.authenticator.js";
import { type AccessPolicy, type Caller, OPERATOR, type Origin, rootKeyCaller, trustedCaller } from "../caller.js";
import type { WriteGate } from "../changes.js";

/** How long sessions live (KEYHAVEN_CONSOLE_IDLE_MINUTES, KEYHAVEN_CONSOLE_SESSION_HOURS). */
export type SessionLifetimes = { readonly idleMs: number; readonly absoluteMs: number };

/**
 * How the console decides access for a root key: a permission may be granted by a resource's URN, the target
 * is looked up first, a refusal says "forbidden", so the page can say which permission is missing.
 */
export const CONSOLE_ACCESS: AccessPolicy = { urnGrants: true, check: "afterLookup", denied: "forbidden" };

/** A session is used at most this often before its last use is written again (its idle expiry moves by as much). */
const TOUCH_EVERY_MS = 60_000;
/** Sessions that ended, deleted at each sign-in (a bounded statement), so the table holds about the live ones. */
const PRUNE_ON_SIGN_IN = 100;

/** Failed sign-ins allowed per client address in a window, beyond which sign-in is refused until the window ends. */
export const MAX_FAILED_SIGN_INS = 10;
export const FAILED_SIGN_IN_WINDOW_MS = 15 * 60_000;
const FAILED_SIGN_IN_ADDRESSES = 10_000;

/** Who a live session acts as. `token` is the cookie's secret, from which the page's CSRF token is derived. */
export type ConsoleSession =
  | { readonly kind: "root_key"; readonly idHash: string; readonly rootKey: RootKeyAuth; readonly caller: Caller }
  | { readonly kind: "operator"; readonly idHash: string; readonly origin: Origin; readonly caller: (workspaceId: string) => Caller };

/** Why a sign-in was refused: a wrong secret, or too many wrong ones from this address lately. */
export class SignInRefusedError extends Error {
  constructor(readonly reason: "invalid" | "tooMany" | "workspaceDisabled") {
    super(`sign-in refused: ${reason}`);
  }
}

export type ConsoleSessionServices = {
  db: Db;
  clock: Clock;
  changes: WriteGate;
  rootKeys: RootKeyAuthenticator;
  adminToken: string | undefined;
  lifetimes: SessionLifetimes;
};

/**
 * The console's sessions: sign-in with a root key or the operator token, a session per sign-in stored only by the
 * hash of its 32 random bytes, idle and absolute expiry, sign-out, and failed sign-ins limited per client address (in
 * this process: each replica counts its own). A root key session is authenticated again by the root key's hash on
 * every request (RootKeyAuthenticator, with its cross-replica invalidation), so the console never acts with more than
 * the root key holds now.
 */
export class ConsoleSessions {
  private readonly failures = new LRUCache<string, { count: number; since: number }>({ max: FAILED_SIGN_IN_ADDRESSES });

  constructor(private readonly services: ConsoleSessionServices) {}

  /** Signs in with `secret` (a root key, or the operator token); returns the new session's cookie secret and kind. */
  async signIn(secret: string, origin: Origin): Promise<{ token: string; kind: ConsoleSession["kind"] }> {
    const address = origin.clientAddress ?? "";
    this.refuseIfTooMany(address);
    const { clock, adminToken, lifetimes } = this.services;
    const token = randomBytes(32).toString("base64url");
    const now = clock.now();
    const row: ConsoleSessionRow = {
      idHash: sha256Hex(token),
      kind: "root_key",
      workspaceId: null,
      rootKeyId: null,
      rootKeyHash: null,
      operatorCheck: null,
      createdAtM: now,
      lastSeenAtM: now,
      expiresAtM: now + lifetimes.absoluteMs,
    };
    let caller: Caller;
    if (adminToken !== undefined && secretsEqual(secret, adminToken)) {
      Object.assign(row, { kind: "operator", operatorCheck: operatorCheckOf(token, adminToken) });
      caller = trustedCaller(OPERATOR, "", origin);
    } else {
      let rootKey: RootKeyAuth;
      try {
        rootKey = await this.services.rootKeys.authenticate(secret);
      } catch (err) {
        if (err instanceof UnauthenticatedError) {
          this.noteFailure(address);
          throw new SignInRefusedError("invalid");
        }
        if (err instanceof WorkspaceDisabledError) throw new SignInRefusedError("workspaceDisabled");
        throw err;
      }
      Object.assign(row, { workspaceId: rootKey.workspaceId, rootKeyId: rootKey.rootKeyId, rootKeyHash: hashKey(secret) });
      caller = rootKeyCaller(rootKey, CONSOLE_ACCESS, origin);
    }
    await this.services.changes.change(caller, async (tx, record) => {
      await deleteConsoleSessionsEndedBefore(tx, now, PRUNE_ON_SIGN_IN);
      await insertConsoleSession(tx, row);
      record({
        event: "console.sign_in",
        targets: row.rootKeyId ? [{ type: "rootKey", id: row.rootKeyId }] : [],
        description:
          row.kind === "operator" ? "The operator signed in to the console" : `Root key ${row.rootKeyId} signed in to the console`,
        workspaceId: row.workspaceId,
      });
    });
    return { token, kind: row.kind as ConsoleSession["kind"] };
  }

  /**
   * The live session of the cookie secret `token`, or undefined: unknown, signed out, expired, the operator token
   * changed, or its root key revoked or its workspace disabled (such a session is deleted). A use moves its idle
   * expiry (written at most once a minute).
   */
  async resolve(token: string, origin: Origin): Promise<ConsoleSession | undefined> {
    if (token.length !== 43) return undefined;
    const { db, clock, lifetimes, adminToken } = this.services;
    const now = clock.now();
    const idHash = sha256Hex(token);
    const row = await findLiveConsoleSession(db, idHash, now, now - lifetimes.idleMs);
    if (!row) return undefined;
    let session: ConsoleSession;
    if (row.kind === "operator") {
      if (adminToken === undefined || row.operatorCheck === null || !secretsEqual(row.operatorCheck, operatorCheckOf(token, adminToken))) {
        await deleteConsoleSession(db, idHash);
        return undefined;
      }
      session = { kind: "operator", idHash, origin, caller: (workspaceId) => trustedCaller(OPERATOR, workspaceId, origin) };
    } else {
      let rootKey: RootKeyAuth;
      try {
        rootKey = await this.services.rootKeys.authenticateHash(row.rootKeyHash ?? "");
      } catch (err) {
        if (!(err instanceof UnauthenticatedError) && !(err instanceof WorkspaceDisabledError)) throw err;
        await deleteConsoleSession(db, idHash);
        return undefined;
      }
      session = { kind: "root_key", idHash, rootKey, caller: rootKeyCaller(rootKey, CONSOLE_ACCESS, origin) };
    }
    if (now - row.lastSeenAtM >= TOUCH_EVERY_MS) await touchConsoleSession(db, idHash, now);
    return session;
  }

  /** Ends `session` (signing out): its cookie secret is worth nothing from now on, on every replica. */
  async signOut(session: ConsoleSession): Promise<void> {
    const caller = session.kind === "operator" ? session.caller("") : session.caller;
    await this.services.changes.change(caller, async (tx, record) => {
      const gone = await deleteConsoleSession(tx, session.idHash);
      if (!gone) return;
      record({
        event: "console.sign_out",
        targets: gone.rootKeyId ? [{ type: "rootKey", id: gone.rootKeyId }] : [],
        description:
          gone.kind === "operator" ? "The operator signed out of the console" : `Root key ${gone.rootKeyId} signed out of the console`,
        workspaceId: gone.workspaceId,
      });
    });
  }

  private refuseIfTooMany(address: string): void {
    const seen = this.failures.get(address);
    if (seen === undefined) return;
    if (this.services.clock.now() - seen.since >= FAILED_SIGN_IN_WINDOW_MS) {
      this.failures.delete(address);
      return;
    }
    if (seen.count >= MAX_FAILED_SIGN_INS) throw new SignInRefusedError("tooMany");
  }

  private noteFailure(address: string): void {
    const now = this.services.clock.now();
    const seen = this.failures.get(address);
    if (seen === undefined || now - seen.since >= FAILED_SIGN_IN_WINDOW_MS) this.failures.set(address, { count: 1, since: now });
    else seen.count += 1;
  }
}

/** What an operator session holds of the admin token: an HMAC under the session's own secret (see the schema). */
function operatorCheckOf(token: string, adminToken: string): string {
  return createHmac("sha256", token).update(adminToken).digest("base64url");
}

/** The CSRF token of a session: an HMAC of a fixed label under the session's cookie secret (never stored). */
export function csrfTokenOf(token: string): string {
  return createHmac("sha256", token).update("keyhaven console csrf").digest("base64url");
}
