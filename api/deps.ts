import type { Broker } from '../broker/connection.js';
import type { ControlPlane } from '../control/control-plane.js';
import type { PipelineStats } from '../pipeline/pipeline.js';
import type { Config } from '../schemas/config.js';
import type { QueryEngine } from '../storage/duckdb.js';

/** What the API is built from; the process entry wires it, tests build their own. */
export interface AppDeps {
  config: Config;
  broker: Broker;
  control: ControlPlane;
  engine: QueryEngine;
  /**
   * The pipeline of this process, when it runs one (the `start` role): its figures go to /metrics, and its
   * journal tells a resend of a request already committed (which a restarted broker stores again) apart.
   */
  pipeline?: {
    stats(): Readonly<PipelineStats>;
    lag(): Promise<number>;
    committedRequest(messageId: string): boolean;
  } | null;
}
