/** A node of PostgreSQL's `EXPLAIN (FORMAT JSON)`, as far as the tests read it. */
export type PlanNode = {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  "Subplan Name"?: string;
  "Parent Relationship"?: string;
  Plans?: PlanNode[];
};

/** Every node of the plan under `node`, itself first. */
export function nodesOf(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(nodesOf)];
}

/** The nodes of the plan in a row of `EXPLAIN (FORMAT JSON)` (its `QUERY PLAN`, text or already parsed), top first. */
export function planNodesOf(row: Record<string, unknown> | undefined): PlanNode[] {
  const json = row?.["QUERY PLAN"];
  const [top] = (typeof json === "string" ? JSON.parse(json) : json) as { Plan: PlanNode }[];
  return nodesOf(top!.Plan);
}
