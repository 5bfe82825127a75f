import type { Broker } from '../broker/connection.js';
import type { ApiKeyAuthenticator } from '../control/api-keys.js';
import type { Config } from '../schemas/config.js';
import type { QueryEngine } from '../storage/duckdb.js';

/** What the API is built from; the process entry wires it, tests build their own. */
export interface AppDeps {
  config: Config;
  broker: Broker;
  auth: ApiKeyAuthenticator;
  engine: QueryEngine;
}
