import { z } from "zod";
import {
  API_DEFAULT_PREFIX_MAX,
  API_DEFAULT_PREFIX_MIN,
  API_NAME_MAX,
  API_NAME_MIN,
  KEY_BYTES_MAX,
  KEY_BYTES_MIN,
} from "../../../core/apis/apis.bounds.js";

/** The fields of an API's settings as apis.createApi and apis.updateApi take them, within the core's bounds. */
export const apiNameInput = z.string().min(API_NAME_MIN).max(API_NAME_MAX);
export const apiDefaultPrefixInput = z.string().min(API_DEFAULT_PREFIX_MIN).max(API_DEFAULT_PREFIX_MAX);
export const apiDefaultBytesInput = z.int().min(KEY_BYTES_MIN).max(KEY_BYTES_MAX);
