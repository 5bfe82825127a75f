import fs from 'node:fs/promises';
import path from 'node:path';
import {
  type DuckDBConnection,
  DuckDBInstance,
  type DuckDBType,
  type DuckDBValue,
  LIST,
  listValue,
  VARCHAR,
} from '@duckdb/node-api';

/**
 * The in-process DuckDB that reads the Parquet files: a query engine, not a database of record. Its errors
 * become plain Errors carrying no SQL text out of this module (the caller logs them; clients see a 500).
 */

export type SqlParam = string | number | boolean | null | string[];

/** A statement and the parameters it names. */
export interface BuiltQuery {
  sql: string;
  params: Record<string, SqlParam>;
}
export type Row = Record<string, unknown>;

export class QueryEngineError extends Error {}

/** DuckDB gave up on a statement for want of memory under its limit (it spills what it can before that). */
export const isOutOfMemory = (err: unknown) =>
  err instanceof QueryEngineError && err.message.includes('Out of Memory Error');

/** Connections kept open: DuckDB runs one statement per connection at a time. */
const POOL_SIZE = 4;

function toDuckValue(v: SqlParam): { value: DuckDBValue; type?: DuckDBType } {
  if (Array.isArray(v)) return { value: listValue(v), type: LIST(VARCHAR) };
  return { value: v };
}

/** The parameters a statement names ($name), as DuckDB values; the others are left out (DuckDB refuses them). */
function bind(sql: string, params: Record<string, SqlParam>) {
  const values: Record<string, DuckDBValue> = {};
  const types: Record<string, DuckDBType | undefined> = {};
  const named = new Set(Array.from(sql.matchAll(/\$([A-Za-z_]\w*)/g), (m) => m[1]!));
  for (const [k, v] of Object.entries(params)) {
    if (!named.has(k)) continue;
    const t = toDuckValue(v);
    values[k] = t.value;
    if (t.type) types[k] = t.type;
  }
  return { values, types };
}

export class QueryEngine {
  readonly #instance: DuckDBInstance;
  readonly #idle: DuckDBConnection[] = [];
  readonly #waiting: ((c: DuckDBConnection) => void)[] = [];
  #closed = false;

  private constructor(instance: DuckDBInstance, connections: DuckDBConnection[]) {
    this.#instance = instance;
    this.#idle.push(...connections);
  }

  static async open(dataDir: string, threads?: number, memoryLimitMb?: number): Promise<QueryEngine> {
    const extensionDir = path.join(dataDir, 'duckdb', 'extensions');
    const tempDir = path.join(dataDir, 'duckdb', 'tmp');
    await fs.mkdir(extensionDir, { recursive: true });
    await fs.mkdir(tempDir, { recursive: true });
    const options: Record<string, string> = {
      extension_directory: extensionDir,
      temp_directory: tempDir,
    };
    if (threads) options.threads = String(threads);
    // Beyond it, sorts and merges spill to temp_directory instead of growing the process.
    if (memoryLimitMb) options.memory_limit = `${memoryLimitMb}MB`;
    const instance = await DuckDBInstance.create(':memory:', options);
    const connections = await Promise.all(Array.from({ length: POOL_SIZE }, () => instance.connect()));
    // Parquet footers are parsed once and cached between queries (files are immutable once renamed into
    // place, and a cached footer is checked against the file's modification time). Without it every query
    // re-parses the footer of every file it opens: half of a detail lookup's time at 10 M executions.
    // (enable_object_cache, set here before, is a no-op placeholder in this DuckDB.) Set once the
    // instance exists: the option belongs to the Parquet extension, which is not loaded at creation.
    await connections[0]!.run('SET GLOBAL parquet_metadata_cache = true');
    return new QueryEngine(instance, connections);
  }

  async #acquire(): Promise<DuckDBConnection> {
    const c = this.#idle.pop();
    if (c) return c;
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  #release(c: DuckDBConnection): void {
    const next = this.#waiting.shift();
    if (next) next(c);
    else this.#idle.push(c);
  }

  /**
   * Runs one statement on a pooled connection, its parameters bound (bind: those it does not name are left out, so
   * builders can share one set), and reads its result with `read`; DuckDB's errors become QueryEngineErrors.
   */
  async #run<T>(
    sql: string,
    params: Record<string, SqlParam>,
    read: (
      conn: DuckDBConnection,
      values: Record<string, DuckDBValue>,
      types: Record<string, DuckDBType | undefined>,
    ) => Promise<T>,
  ): Promise<T> {
    if (this.#closed) throw new QueryEngineError('query engine is closed');
    const { values, types } = bind(sql, params);
    const conn = await this.#acquire();
    try {
      return await read(conn, values, types);
    } catch (err) {
      throw new QueryEngineError(`query failed: ${(err as Error).message}`);
    } finally {
      this.#release(conn);
    }
  }

  /** Runs one statement with named parameters ($name) and returns its rows as plain JS values. */
  all(sql: string, params: Record<string, SqlParam> = {}): Promise<Row[]> {
    return this.#run(sql, params, async (conn, values, types) => {
      const reader = await conn.runAndReadAll(sql, values, types);
      return reader.getRowObjectsJS() as Row[];
    });
  }

  /**
   * Runs one statement whose columns are all numeric (or NULL, read as 0) and answers them as Float64Arrays, read
   * chunk by chunk: no row objects, for statements of hundreds of thousands of rows.
   */
  numericColumns(sql: string, params: Record<string, SqlParam> = {}): Promise<Float64Array[]> {
    return this.#run(sql, params, async (conn, values, types) => {
      const result = await conn.run(sql, values, types);
      const width = result.columnCount;
      let out = Array.from({ length: width }, () => new Float64Array(4096));
      let n = 0;
      for (;;) {
        const chunk = await result.fetchChunk();
        if (!chunk || chunk.rowCount === 0) break;
        const rows = chunk.rowCount;
        if (n + rows > out[0]!.length) {
          const grown = Math.max(out[0]!.length * 2, n + rows);
          out = out.map((a) => {
            const b = new Float64Array(grown);
            b.set(a.subarray(0, n));
            return b;
          });
        }
        for (let c = 0; c < width; c++) {
          const vector = chunk.getColumnVector(c);
          const into = out[c]!;
          for (let j = 0; j < rows; j++) into[n + j] = Number(vector.getItem(j) ?? 0);
        }
        n += rows;
      }
      return out.map((a) => a.slice(0, n));
    });
  }

  /**
   * The memory this engine's statements may use before they spill to disk (or fail). Instance-wide and at once,
   * for statements running on any of its connections: only for an engine with one user at a time (the compactor's).
   */
  async setMemoryLimit(mb: number): Promise<void> {
    if (!Number.isInteger(mb) || mb < 1) throw new QueryEngineError(`bad memory limit: ${mb}`);
    await this.all(`SET GLOBAL memory_limit = '${mb}MB'`);
  }

  /** Files are immutable once visible, so each one's column names are read once (from its footer). */
  readonly #columns = new Map<string, string[]>();

  /** The union of the files' column names. */
  async columnsOf(files: string[]): Promise<Set<string>> {
    const unknown = files.filter((f) => !this.#columns.has(f));
    if (unknown.length > 0) {
      const rows = await this.all('SELECT file_name, name FROM parquet_schema($files)', { files: unknown });
      if (this.#columns.size > 200_000) this.#columns.clear();
      for (const f of unknown) this.#columns.set(f, []);
      for (const r of rows) this.#columns.get(r.file_name as string)?.push(r.name as string);
    }
    const out = new Set<string>();
    for (const f of files) for (const c of this.#columns.get(f) ?? []) out.add(c);
    return out;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const c of this.#idle) c.closeSync();
    this.#instance.closeSync();
  }
}

/**
 * The options of a `COPY … TO` that writes a compacted file (storage/compaction.ts, rollup.ts, minutes.ts). zstd at
 * level 1, not DuckDB's default 3: the hour's end of an ingest benchmark run cost less and the files came out no
 * bigger (see the commit that chose it for the figures).
 */
export const parquetCopyOptions = (codec: string, rowGroup: number) =>
  `FORMAT parquet, COMPRESSION ${codec}${codec === 'zstd' ? ', COMPRESSION_LEVEL 1' : ''}, ROW_GROUP_SIZE ${rowGroup}`;
