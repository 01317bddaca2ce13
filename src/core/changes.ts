import type { Clock } from "../clock.js";
import { newId } from "../ids.js";
import { insertRecordset } from "../storage/bulk.js";
import type { Db } from "../storage/client.js";
import { type AuditTarget, auditLog } from "../storage/schema.js";
import type { AuditEvent } from "./audit/audit.events.js";
import type { Caller } from "./caller.js";
import type { Principal } from "./principal.js";

/**
 * Runs a read that follows a change of the same request (the answer of keys.setRoles, …) where that change is
 * visible: in the caller's idempotency scope's transaction when it holds one, else on `db`.
 */
export function readAfterChange<T>(db: Db, principal: Principal, work: (db: Db) => Promise<T>): Promise<T> {
  const scope = (principal as Partial<Caller>).idempotency;
  return scope?.read ? scope.read(db, work) : work(db);
}

/**
 * One change as the audit log records it. `targets`: what it touched (a key and the roles connected to it: several).
 * `description`: a short sentence for people. `details`: what else is worth keeping, never a secret and never a value
 * of `meta` (which fields changed, by name; counts). `workspaceId`: the caller's unless given (null: above every
 * workspace; a new workspace's own id for workspace.create).
 */
export type Change = {
  readonly event: AuditEvent;
  readonly targets: readonly AuditTarget[];
  readonly description: string;
  readonly details?: Readonly<Record<string, unknown>> | undefined;
  readonly workspaceId?: string | null | undefined;
};

/** An audit row as the gate builds it, for a repository that writes it in the change's own statement. */
export type AuditRow = typeof auditLog.$inferInsert;

/** Collects the changes a transaction makes; the gate writes them in that transaction before COMMIT. */
export type RecordChange = (change: Change) => void;

/**
 * The write gate, the one door of every mutation: it owns the transaction (repositories take it, never open one) and
 * writes an audit entry for each change in that same transaction, so a change and its entry commit together or not
 * at all. A request with an Idempotency-Key runs its changes in its idempotency scope (caller.idempotency), which
 * keeps the transaction open until the answer is stored with them. Verification is not a change: spends and counters
 * stay on their own hot path.
 */
export class WriteGate {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  /** Runs `work` in one transaction; what it records with `record` is written in that transaction before COMMIT. */
  async change<T>(caller: Caller, work: (tx: Db, record: RecordChange) => Promise<T>): Promise<T> {
    return this.transaction(caller, async (tx) => {
      const changes: Change[] = [];
      const result = await work(tx, (change) => {
        changes.push(change);
      });
      if (changes.length > 0) await insertRecordset(tx, auditLog, this.rowsOf(caller, changes));
      return result;
    });
  }

  /**
   * A change made of one statement (the hot paths, keys.createKey's and keys.updateKey's common case: BEGIN and
   * COMMIT would cost more than the write): `run` gets the audit rows and writes them in that very statement (a
   * data-modifying CTE), so they commit with it. In an idempotency scope it runs in the scope's transaction.
   */
  async statement<T>(caller: Caller, changes: readonly Change[], run: (db: Db, audit: AuditRow[]) => Promise<T>): Promise<T> {
    const rows = this.rowsOf(caller, changes);
    if (caller.idempotency) return this.transaction(caller, (tx) => run(tx, rows));
    return run(this.db, rows);
  }

  /**
   * Whether `caller`'s change may run as a prepared statement of the gate's own database handle (services.keyWrites:
   * a prepared statement runs on the handle it was prepared on): not in an idempotency scope, whose one transaction
   * holds every change of the request. Otherwise the change takes the transaction form.
   */
  preparedStatementsFor(caller: Caller): boolean {
    return caller.idempotency === undefined;
  }

  /**
   * Runs `fn` once what `caller` changed is committed: now outside an idempotency scope (each gate call has committed
   * when it returns), else after the scope's transaction commits, and never when it rolls back (the keyring must
   * remember a new data key only once the row that wraps it is stored).
   */
  afterCommit(caller: Caller, fn: () => void): void {
    if (caller.idempotency) caller.idempotency.afterCommit(fn);
    else fn();
  }

  /** The audit rows of `changes` made by `caller`, now. */
  rowsOf(caller: Caller, changes: readonly Change[]): AuditRow[] {
    const now = this.clock.now();
    const { actor, origin } = caller;
    return changes.map((change) => ({
      id: newId("audit"),
      workspaceId: change.workspaceId === undefined ? caller.workspaceId : change.workspaceId,
      event: change.event,
      actorKind: actor.kind,
      actorId: actor.id,
      actorName: actor.name,
      targets: change.targets.map((t) => (t.name === undefined ? { type: t.type, id: t.id } : { type: t.type, id: t.id, name: t.name })),
      description: change.description,
      details: change.details ?? null,
      surface: origin.surface,
      requestId: origin.requestId ?? null,
      clientAddress: origin.clientAddress ?? null,
      userAgent: origin.userAgent ?? null,
      createdAtM: now,
    }));
  }

  private transaction<T>(caller: Caller, work: (tx: Db) => Promise<T>): Promise<T> {
    if (caller.idempotency) return caller.idempotency.within(this.db, work);
    return this.db.transaction((tx) => work(tx as unknown as Db));
  }
}
