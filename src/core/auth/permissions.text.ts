import { type PermissionQuery, PermissionQueryError } from "./permissions.query.js";

/**
 * v2's permission query language (contract §5.4): identifiers of letters, digits and `. _ - * : /`, the words `AND`
 * and `OR` (any case, whole words), parentheses, whitespace between. AND binds tighter than OR:
 *   expr := and ( OR and )* ; and := primary ( AND primary )* ; primary := identifier | '(' expr ')'
 * Parsed into the same tree v1's JSON query is (permissions.query.ts), so one evaluator (`satisfies`) answers both.
 * Refusals are PermissionQueryError with v2's words; positions are 0-based offsets into the text.
 */
export function parseTextPermissionQuery(text: string): PermissionQuery {
  const tokens = tokenize(text);
  if (tokens.length === 0) throw new PermissionQueryError("Unexpected end of input. Please provide a valid permission query.");
  let at = 0;

  const expected = (): never => {
    const token = tokens[at];
    if (token === undefined) {
      throw new PermissionQueryError("Unexpected end of query. Expected a permission identifier or opening parenthesis.");
    }
    throw new PermissionQueryError(
      `Unexpected token '${token.text}' at position ${token.pos}. Expected a permission identifier or opening parenthesis.`,
    );
  };

  // Recursion depth is bounded by the text's length (the schema's 1000 characters): at most one level per `(`.
  const expr = (): PermissionQuery => {
    const parts = [and()];
    while (tokens[at]?.kind === "or") {
      at++;
      parts.push(and());
    }
    return parts.length === 1 ? parts[0]! : { or: parts };
  };
  const and = (): PermissionQuery => {
    const parts = [primary()];
    while (tokens[at]?.kind === "and") {
      at++;
      parts.push(primary());
    }
    return parts.length === 1 ? parts[0]! : { and: parts };
  };
  const primary = (): PermissionQuery => {
    const token = tokens[at];
    if (token?.kind === "id") {
      at++;
      return token.text;
    }
    if (token?.kind !== "(") return expected();
    const next = tokens[at + 1];
    if (next?.kind === ")") {
      // v2 names where the parentheses close (its test vector: `permission_1 AND ()` → 18).
      throw new PermissionQueryError(
        `Empty parentheses found at position ${next.pos}. Parentheses must contain at least one permission or expression.`,
      );
    }
    at++;
    const inner = expr();
    if (tokens[at]?.kind !== ")") {
      const pos = tokens[at]?.pos ?? text.length;
      throw new PermissionQueryError(
        `Missing closing parenthesis ')' at position ${pos}. Every opening parenthesis must have a matching closing parenthesis.`,
      );
    }
    at++;
    return inner;
  };

  const query = expr();
  const extra = tokens[at];
  if (extra !== undefined) {
    throw new PermissionQueryError(
      `Unexpected token '${extra.text}' at position ${extra.pos}. The query appears to have extra content after a valid expression.`,
    );
  }
  return query;
}

type Token = { kind: "id" | "and" | "or" | "(" | ")"; text: string; pos: number };

const IDENTIFIER = /[A-Za-z0-9._\-*:/]/;
const SPACE = /[ \t\r\n]/;

function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (SPACE.test(c)) {
      i++;
    } else if (c === "(" || c === ")") {
      tokens.push({ kind: c, text: c, pos: i });
      i++;
    } else if (IDENTIFIER.test(c)) {
      const start = i;
      while (i < text.length && IDENTIFIER.test(text[i]!)) i++;
      const word = text.slice(start, i);
      const upper = word.toUpperCase();
      tokens.push({ kind: upper === "AND" ? "and" : upper === "OR" ? "or" : "id", text: word, pos: start });
    } else {
      // v2 answers this with an empty detail (its lexer's message is lost); keyhaven says which character it is.
      throw new PermissionQueryError(
        `Invalid character '${c}' at position ${i}. Permission identifiers may only contain letters, digits and . _ - * : /`,
      );
    }
  }
  return tokens;
}
