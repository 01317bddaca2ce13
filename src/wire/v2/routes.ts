import { createApi } from "./apis/v2.apis.createApi.js";
import { deleteApi } from "./apis/v2.apis.deleteApi.js";
import { getApi } from "./apis/v2.apis.getApi.js";
import { liveness } from "./liveness/v2.liveness.js";
import type { V2Rpc } from "./rpc.js";

/** Every v2 RPC keyhaven serves so far, by service (issue 14 adds the rest). */
export const v2Rpcs: V2Rpc[] = [
  liveness,
  // apis
  createApi,
  getApi,
  deleteApi,
];
