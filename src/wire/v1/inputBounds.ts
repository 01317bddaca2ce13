import { z } from "zod";

/** Ids are generated (`key_…`, about 30 characters); 256 leaves room for any imported or hand-made one. */
export const MAX_ID_LENGTH = 256;

/** An id of something in the request body or query: bounded like every input. */
export const idInput = z.string().min(1).max(MAX_ID_LENGTH);
